// compile(fn): trace with placeholders once per input signature, build, cache, run.
//
// The signature is the number of arguments and captured inputs, and each one's dtype and shape
// (with `shapeless`, its rank). A miss traces fn with placeholder arrays standing in for the
// arguments and for every captured input, lowers what it recorded (build_lazy_graph, data as
// constants), and builds it through the pass pipeline and the configured backend. Calls made
// while another function is being traced run fn itself, so nested compiled functions inline.
#include <atomic>
#include <map>
#include <mutex>

#include "ingot/error.h"
#include "trace/array_impl.h"
#include "trace/trace_state.h"

namespace ingot {

struct detail::CompiledState {
  CompileFnOptions options;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const BuiltGraph>> cache;  // by signature
};

namespace detail {
namespace {

std::atomic<int> compiles{0};

// With `shapeless`, a dimension of size 1 stays 1 in the trace (it may broadcast against the
// other operand, which a free symbol cannot), so which dimensions are 1 is part of the key.
std::string shapeless_key(const Shape& shape) {
  std::string s = "rank" + std::to_string(shape.size()) + "[";
  for (int64_t d : shape) s += d == 1 ? '1' : '*';
  return s + "]";
}

std::string signature(const std::vector<Array>& args, const std::vector<Array*>& captured, bool shapeless) {
  std::string s = "args=" + std::to_string(args.size()) + ";captured=" + std::to_string(captured.size()) + ";";
  auto add = [&](const Array& a) {
    s += std::string(dtype_name(a.dtype())) + (shapeless ? shapeless_key(a.shape()) : to_string(a.shape())) + ";";
  };
  for (const Array& a : args) add(a);
  for (const Array* a : captured) add(*a);
  return s;
}

// Rebinds captured arrays to placeholders for the trace and back afterwards (also on errors).
class CaptureSwap {
 public:
  explicit CaptureSwap(const CompileFnOptions& o) {
    for (Array* p : o.inputs) saved_.emplace_back(p, *p);
    for (Array* p : o.outputs) saved_.emplace_back(p, *p);
  }
  ~CaptureSwap() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) *it->first = it->second;
  }
  CaptureSwap(const CaptureSwap&) = delete;
  CaptureSwap& operator=(const CaptureSwap&) = delete;

 private:
  std::vector<std::pair<Array*, Array>> saved_;
};

std::string input_name(size_t k, size_t num_args) {
  return k < num_args ? "argument " + std::to_string(k) : "captured input " + std::to_string(k - num_args);
}

// The shapeless check. First, every input dimension must still be free after symbolic shape
// inference. Then a probe: shape inference must also succeed with every input dimension above 1
// grown by the same amount (equal dims stay equal, broadcast 1s stay 1), which catches sizes the
// graph relates in ways symbols do not express (a reshape of [a, b] to a literal [6]).
void check_shapeless(const Graph& g, const std::vector<Array>& inputs, size_t num_args) {
  Graph probe = g;
  std::string probe_shapes;
  for (Value& v : probe.values()) {
    if (v.producer >= 0) {
      v.shape.clear();
      v.shape_known = false;
      continue;
    }
    if (v.kind == ValueKind::Constant) continue;
    const size_t k = static_cast<size_t>(std::stoi(v.name.substr(2)));
    for (size_t d = 0; d < v.shape.size(); ++d)
      if (v.shape[d].known() && inputs[k].shape()[d] != 1)  // size-1 dims are fixed by the signature
        INGOT_FAIL("compile(shapeless=true): dimension ", d, " of ", input_name(k, num_args), " (size ",
                   inputs[k].shape()[d], " in this call) cannot vary: the function's graph fixes it to ",
                   v.shape[d].value,
                   " (a reshape or broadcast to a literal shape, or a size read from shape() while tracing). "
                   "Compile without shapeless, or write the shape with -1 / from the inputs' own dims.");
    Shape s = inputs[k].shape();
    for (int64_t& d : s) d = d > 1 ? d + 7 : d;
    v.shape.assign(s.begin(), s.end());
    v.shape_known = true;
    probe_shapes += (probe_shapes.empty() ? "" : ", ") + input_name(k, num_args) + " " + to_string(s);
  }
  try {
    infer_shapes(probe, {});
  } catch (const Error& e) {
    INGOT_FAIL("compile(shapeless=true): the function's graph does not allow other input shapes of the same rank "
               "(probed with ", probe_shapes, "): ", e.what(),
               ". Compile without shapeless, or write shapes with -1 / from the inputs' own dims.");
  }
}

std::shared_ptr<const BuiltGraph> trace_and_build(CompiledState& state, const std::vector<Array>& args,
                                                  const Traceable& fn) {
  const CompileFnOptions& o = state.options;
  std::vector<Array> all = args;
  for (Array* p : o.inputs) all.push_back(*p);
  std::vector<Array> holders;  // placeholders, arguments first, then captured inputs
  std::vector<ArrayImpl*> leading;
  for (const Array& a : all) {
    holders.push_back(placeholder_like(a));
    leading.push_back(holders.back().impl().get());
  }
  std::vector<Array> outs;
  {
    TraceGuard tracing;
    CaptureSwap swap(o);
    for (size_t i = 0; i < o.inputs.size(); ++i) *o.inputs[i] = holders[args.size() + i];
    outs = fn(std::vector<Array>(holders.begin(), holders.begin() + static_cast<long>(args.size())));
    for (size_t i = 0; i < o.outputs.size(); ++i) {
      INGOT_CHECK(o.outputs[i]->defined(), "compile: captured output ", i, " is undefined after the call");
      outs.push_back(*o.outputs[i]);
    }
  }
  std::vector<ArrayImpl*> targets;
  for (size_t i = 0; i < outs.size(); ++i) {
    INGOT_CHECK(outs[i].defined(), "compile: output ", i, " of the function is undefined");
    targets.push_back(outs[i].impl().get());
  }
  LazyGraph lg = build_lazy_graph(targets, DataLeaves::Constants, /*keep_external=*/false, leading);
  // Every input past this trace's own placeholders is one a finished trace left behind (nested
  // compiled functions inline, so no other trace runs now); it would have no data to run with.
  if (lg.inputs.size() > all.size()) fail_escaped_placeholder("used by a compiled function");
  std::vector<ShapeConstraint> constraints;
  if (o.shapeless) {
    for (size_t k = 0; k < lg.input_values.size(); ++k) {
      Value& v = lg.graph.value(lg.input_values[k]);
      ShapeTemplate t;
      const Shape& given = all[k].shape();
      for (size_t d = 0; d < given.size(); ++d)
        t.push_back(given[d] == 1 ? Dim(1) : Dim("s" + std::to_string(k) + "_" + std::to_string(d)));
      v.shape.clear();
      v.shape_known = false;
      constraints.push_back({lg.input_values[k], t, "", "shapeless input " + std::to_string(k)});
    }
  }
  const std::shared_ptr<const CompileConfig> cfg = current_config();
  BuiltGraph built;
  try {
    built = build_graph_executable(std::move(lg.graph), constraints, *cfg, [&](const Graph& g) {
      if (o.shapeless) check_shapeless(g, all, args.size());
    });
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("compile(", 0) == 0) throw;
    INGOT_FAIL("compile", o.shapeless ? "(shapeless=true)" : "", ": building the traced function failed: ", what);
  }
  ++compiles;
  return std::make_shared<const BuiltGraph>(std::move(built));
}

// "float32[2, 3], int64[]" (shapeless: "float32 rank 2, ...").
std::string describe(const std::vector<Array>& args, const std::vector<Array*>& captured, bool shapeless) {
  std::string s;
  auto add = [&](const Array& a) {
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(a.dtype())) +
         (shapeless ? " rank " + std::to_string(a.ndim()) : to_string(a.shape()));
  };
  for (const Array& a : args) add(a);
  for (const Array* a : captured) add(*a);
  return s.empty() ? "no inputs" : s;
}

}  // namespace

std::shared_ptr<CompiledState> compiled_state(const std::string& key, const CompileFnOptions& options) {
  auto fresh = [&] {
    auto s = std::make_shared<CompiledState>();
    s->options = options;
    return s;
  };
  if (key.empty()) return fresh();
  std::string full = key + "|shapeless=" + std::to_string(options.shapeless) + "|in=";
  for (const Array* p : options.inputs) full += std::to_string(reinterpret_cast<uintptr_t>(p)) + ",";
  full += "|out=";
  for (const Array* p : options.outputs) full += std::to_string(reinterpret_cast<uintptr_t>(p)) + ",";
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<CompiledState>> registry;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = registry[full];
  if (!slot) slot = fresh();
  return slot;
}

namespace {

// Whether tensors a and b view any of the same bytes.
bool overlap(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  if (a.shares_storage(b)) return true;
  const char* pa = static_cast<const char*>(a.raw_data());
  const char* pb = static_cast<const char*>(b.raw_data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

std::vector<Array> call_compiled(CompiledState& state, const std::vector<Array>& args, const Traceable& fn,
                                 const std::string& key_suffix, const std::vector<bool>& borrowed) {
  INGOT_CHECK(borrowed.empty() || borrowed.size() == args.size(), "compiled function: ", borrowed.size(),
              " borrowed flags for ", args.size(), " arguments");
  auto is_borrowed = [&](size_t i) { return !borrowed.empty() && borrowed[i]; };
  if (!compile_enabled() || tracing_depth() > 0) {  // uncompiled, or inlined: lazy results may keep args
    std::vector<Array> owned = args;
    for (size_t i = 0; i < owned.size(); ++i)
      if (is_borrowed(i)) owned[i] = Array(owned[i].tensor().clone());
    return fn(owned);
  }
  const CompileFnOptions& o = state.options;
  for (size_t i = 0; i < args.size(); ++i)
    INGOT_CHECK(args[i].defined(), "compiled function: argument ", i, " is undefined");
  for (size_t i = 0; i < o.inputs.size(); ++i)
    INGOT_CHECK(o.inputs[i] && o.inputs[i]->defined(), "compiled function: captured input ", i, " is undefined");
  for (size_t i = 0; i < o.outputs.size(); ++i)
    INGOT_CHECK(o.outputs[i] != nullptr, "compiled function: captured output ", i, " is a null pointer");
  const std::string sig = signature(args, o.inputs, o.shapeless) + key_suffix;
  std::shared_ptr<const BuiltGraph> built;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    auto it = state.cache.find(sig);
    if (it != state.cache.end()) built = it->second;
  }
  if (!built) {
    built = trace_and_build(state, args, fn);
    size_t cached = 0;
    {
      std::lock_guard<std::mutex> lock(state.mu);
      state.cache[sig] = built;
      cached = state.cache.size();
    }
    const std::shared_ptr<const CompileConfig> cfg = current_config();
    if (cfg->debug)
      compile_log(*cfg, "[COMPILE] compiled function for " + describe(args, o.inputs, o.shapeless) + " (" +
                            std::to_string(args.size()) + " arguments, " + std::to_string(o.inputs.size()) +
                            " captured; signature " + std::to_string(cached) + " of this function) in " +
                            fixed(built->build_ms, 1) + " ms");
  }
  std::vector<Array> all = args;
  for (Array* p : o.inputs) all.push_back(*p);
  eval_now(all);
  std::vector<Tensor> inputs;
  for (const Array& a : all) inputs.push_back(a.tensor());
  std::vector<Tensor> outs = built->run(inputs);
  // An output may be an input passed through (or a view of one): never the caller's memory.
  for (Tensor& out : outs)
    for (size_t i = 0; i < args.size(); ++i)
      if (is_borrowed(i) && overlap(out, inputs[i])) {
        out = out.clone();
        break;
      }
  const size_t num_returned = outs.size() - o.outputs.size();
  for (size_t i = 0; i < o.outputs.size(); ++i) *o.outputs[i] = Array(outs[num_returned + i]);
  std::vector<Array> result;
  for (size_t i = 0; i < num_returned; ++i) result.emplace_back(outs[i]);
  return result;
}

std::string call_signature(const CompiledState& state, const std::vector<Array>& args, const std::string& key_suffix) {
  return signature(args, state.options.inputs, state.options.shapeless) + key_suffix;
}

}  // namespace detail

int compile_count() { return detail::compiles.load(); }

}  // namespace ingot
