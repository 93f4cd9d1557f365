// Function compile (MLX-style) and hot-path auto-compile (GT-style) over lazy arrays.
//
//   auto f = ingot::compile([](const Array& x) { return x * 0.5f * (1.0f + erf(x / std::sqrt(2.0f))); });
//   Array y = f(x);                 // first call: trace, optimize, build with the CPU backend
//   Array z = f(x2);                // same shapes/dtypes: the cached executable runs
//
// compile(fn) traces fn with placeholder arrays (shape and dtype, no data) on the first call of
// each input signature (number of inputs, their shapes and dtypes; with `shapeless`, ranks and
// dtypes), lowers the trace to the IR, runs the pass pipeline and builds it with the configured
// backend (the CPU backend by default). Functions take and return Arrays (one, several, or a
// std::vector<Array>); a function may also return nothing and only update captured state.
//
// Hot path: with INGOT_AUTO_COMPILE=1, each eval() hashes its graph by structure, attributes,
// shapes and dtypes; after INGOT_AUTO_COMPILE_THRESHOLD evaluations of one hash that graph is
// compiled on a background thread and later evaluations run the compiled executable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ingot/array.h"
#include "ingot/compile.h"

namespace ingot {

// ---------------------------------------------------------------- configuration

// Every switch of function compile and auto-compile. Read from the environment once, on first
// use; set_compile_config replaces it (tests, programs that configure themselves).
struct CompileConfig {
  bool disable_compile = false;   // INGOT_DISABLE_COMPILE=1: compiled functions run uncompiled
  bool auto_compile = false;      // INGOT_AUTO_COMPILE=1: compile hot graphs of eval()
  int auto_compile_threshold = 10;  // INGOT_AUTO_COMPILE_THRESHOLD: evaluations before compiling
  bool compile_all = false;       // INGOT_COMPILE=1: compile every evaluated graph at once
  bool debug = false;             // INGOT_DEBUG_COMPILE=1: [COMPILE] lines on the log sink
  std::string instruction_log;    // INGOT_INSTRUCTION_LOG=path: one line per evaluation

  // Where [COMPILE] lines go (default: stderr). Tests capture them here.
  std::function<void(const std::string&)> log_sink;
  // The backend compiled graphs are built with (default: CpuBackend()).
  std::shared_ptr<const Backend> backend;
  CompileOptions options;  // pass pipeline options for compiled graphs
  // Test hook: every build throws, as a broken toolchain would.
  bool inject_build_failure = false;

  // Reads the INGOT_* variables through `getenv`; a bad value throws ingot::Error naming the
  // variable and what it accepts.
  static CompileConfig from_env(const std::function<const char*(const char*)>& getenv = nullptr);
};

const CompileConfig& compile_config();
void set_compile_config(CompileConfig config);
// Run compiled functions uncompiled (and auto-compile off) until enable_compile().
void disable_compile();
void enable_compile();

// Compiles done by compile(fn) in this process (traces that were built), for debugging and
// tests: a cache hit does not count.
int compile_count();

// ---------------------------------------------------------------- compile(fn)

struct CompileFnOptions {
  // Compile once for any shapes of the same ranks (symbolic dimensions). A dimension of size 1
  // stays 1 (it may broadcast), so which dimensions are 1 is part of the signature. A function whose graph
  // fixes a dimension (a reshape to a literal shape, a broadcast to a fixed size) cannot be
  // shapeless: the first call throws ingot::Error naming the input and dimension.
  bool shapeless = false;
  // Implicit state (MLX's inputs= / outputs=): arrays the function reads (`inputs`) or rebinds
  // (`outputs`) without taking or returning them, e.g. parameters, optimizer state and
  // &random::state(). They are passed by address; after each call every `outputs` entry holds
  // the new value. An array the function reads but that is not listed is baked in as a
  // constant at trace time.
  std::vector<Array*> inputs = {};
  std::vector<Array*> outputs = {};
};

namespace detail {
struct CompiledState;
struct RegionState;
using Traceable = std::function<std::vector<Array>(const std::vector<Array>&)>;
// The shared cache for a function identity (`key` empty: a cache of its own).
std::shared_ptr<CompiledState> compiled_state(const std::string& key, const CompileFnOptions& options);
// `key_suffix` extends the signature with what a binding's own calling convention adds (e.g.
// the layout of Python state trees), so a change there traces again. `borrowed[i]` (when given):
// args[i] views memory its caller may change after the call (a NumPy argument read in place, not
// copied): an uncompiled or inlined call, whose lazy results could still read it, runs on a copy,
// and a result that views it (fn returned the argument, or a view of it) is copied.
std::vector<Array> call_compiled(CompiledState& state, const std::vector<Array>& args, const Traceable& fn,
                                 const std::string& key_suffix = "", const std::vector<bool>& borrowed = {});
// The cache key call_compiled files `args` under (bindings keep per-signature data beside it).
std::string call_signature(const CompiledState& state, const std::vector<Array>& args,
                           const std::string& key_suffix = "");

template <class R>
std::vector<Array> to_arrays(R&& r) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, Array>) return {std::forward<R>(r)};
  else if constexpr (std::is_same_v<T, std::vector<Array>>) return std::forward<R>(r);
  else if constexpr (std::is_same_v<T, std::pair<Array, Array>>) return {r.first, r.second};
  else static_assert(sizeof(T) == 0, "a compiled function must return Array, std::pair<Array, Array> or std::vector<Array>");
}
template <class R>
R from_arrays(std::vector<Array> v) {
  if constexpr (std::is_void_v<R>) return;
  else if constexpr (std::is_same_v<R, Array>) return v.at(0);
  else if constexpr (std::is_same_v<R, std::pair<Array, Array>>) return {v.at(0), v.at(1)};
  else return v;
}

// A function's identity for the cache: the same function pointer, or the same stateless
// callable type, is the same function. A callable with state (a lambda with captures) cannot be
// compared, so each compile() of one gets a fresh cache.
template <class F>
std::string function_key() {
  if constexpr (std::is_pointer_v<F>) return "";  // keyed by value, see compile()
  else if constexpr (std::is_empty_v<F>) return std::string("type:") + typeid(F).name();
  else return "";
}
}  // namespace detail

template <class F>
class CompiledFunction {
 public:
  CompiledFunction(F fn, std::shared_ptr<detail::CompiledState> state) : fn_(std::move(fn)), state_(std::move(state)) {}

  // Called with Arrays (or one std::vector<Array>), like fn.
  template <class... A>
  auto operator()(const A&... args) const {
    using R = std::invoke_result_t<const F&, const A&...>;
    if constexpr (sizeof...(A) == 1 && (std::is_same_v<A, std::vector<Array>> && ...)) {
      const std::vector<Array>& in = std::get<0>(std::tie(args...));
      auto traced = [this](const std::vector<Array>& xs) -> std::vector<Array> {
        if constexpr (std::is_void_v<R>) return fn_(xs), std::vector<Array>{};
        else return detail::to_arrays(fn_(xs));
      };
      return detail::from_arrays<R>(detail::call_compiled(*state_, in, traced));
    } else {
      std::vector<Array> in{Array(args)...};
      auto traced = [this](const std::vector<Array>& xs) -> std::vector<Array> {
        return invoke(xs, std::index_sequence_for<A...>{});
      };
      return detail::from_arrays<R>(detail::call_compiled(*state_, in, traced));
    }
  }

 private:
  template <size_t... I>
  std::vector<Array> invoke(const std::vector<Array>& xs, std::index_sequence<I...>) const {
    using R = decltype(fn_(xs[I]...));
    if constexpr (std::is_void_v<R>) {
      fn_(xs[I]...);
      return {};
    } else {
      return detail::to_arrays(fn_(xs[I]...));
    }
  }

  F fn_;
  std::shared_ptr<detail::CompiledState> state_;
};

template <class F>
  requires(!std::is_base_of_v<Model, std::decay_t<F>>)
CompiledFunction<std::decay_t<F>> compile(F&& fn, CompileFnOptions options = {}) {
  using D = std::decay_t<F>;
  std::string key = detail::function_key<D>();
  if constexpr (std::is_pointer_v<D>) key = "fn:" + std::to_string(reinterpret_cast<uintptr_t>(fn));
  return CompiledFunction<D>(std::forward<F>(fn), detail::compiled_state(key, options));
}

// ---------------------------------------------------------------- hot-path auto-compile

struct AutoCompileStats {
  int64_t evaluations = 0;     // graphs eval() ran
  int64_t eager_runs = 0;      // ... op by op on the reference backend
  int64_t compiled_runs = 0;   // ... on a compiled executable
  int64_t compiles_started = 0;
  int64_t compiles_finished = 0;  // successfully
  int64_t compile_failures = 0;
  int64_t distinct_graphs = 0;    // hashes seen
};
AutoCompileStats auto_compile_stats();
// Blocks until every background build queued so far has finished (tests; never needed for
// correctness: eval() uses a build once it is ready).
void wait_for_background_compiles();
// Forgets every hot-path count and compiled graph, and zeroes the stats.
void reset_auto_compile();

// Everything evaluated inside the region compiles as one unit: explicit eval() calls are
// deferred to the end of the region and run as one graph, which goes through the hot path
// (counted, compiled after the threshold) even when INGOT_AUTO_COMPILE is off. Reading data
// inside the region (item(), tensor()) still evaluates at once.
//
//   for (int step = 0; step < steps; ++step) {
//     CompileRegion region("training_loop");
//     ... eval(loss); ... eval(params);    // both run at region end, as one graph
//   }
class CompileRegion {
 public:
  explicit CompileRegion(std::string name);
  // Ends the region if end() has not: evaluates the deferred arrays, or drops them when an
  // exception is unwinding the scope.
  ~CompileRegion() noexcept(false);
  CompileRegion(const CompileRegion&) = delete;
  CompileRegion& operator=(const CompileRegion&) = delete;

  // Ends the region before its scope does (bindings whose scopes are not C++ scopes, such as
  // Python's `with`): runs the deferred evaluations as one unit, or drops them when
  // `run_deferred` is false (the body failed). Regions end innermost first; ending one twice,
  // or before a region opened inside it, throws ingot::Error.
  void end(bool run_deferred = true);

 private:
  std::string name_;
  detail::RegionState* state_ = nullptr;
};

}  // namespace ingot
