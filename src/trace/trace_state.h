// Internal state shared by eval, compile(fn) and the hot path: the configuration, the tracing
// depth, and building a lazy graph into an executable.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/shape_inference.h"
#include "ingot/function_compile.h"

namespace ingot::detail {

std::shared_ptr<const CompileConfig> current_config();
bool compile_enabled();  // neither INGOT_DISABLE_COMPILE nor disable_compile()
const Backend& build_backend(const CompileConfig& c);
void compile_log(const CompileConfig& c, const std::string& line);
std::string fixed(double x, int digits);  // "%.*f", for log lines

// > 0 while compile(fn) or a transform traces a function on this thread.
int& tracing_depth();
// Throws the error for an array that escaped a finished trace and is now `use`d ("read", ...).
[[noreturn]] void fail_escaped_placeholder(const std::string& use);

// Counts one level of tracing for its scope.
struct TraceGuard {
  TraceGuard() { ++tracing_depth(); }
  ~TraceGuard() { --tracing_depth(); }
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;
};

// A stand-in with `like`'s shape and dtype and no data: what traced functions receive.
Array placeholder_like(const Array& like);

// A graph built by the configured backend, with its inputs and outputs mapped back to the
// graph's original ones (passes may drop inputs nothing reads).
struct BuiltGraph {
  std::shared_ptr<const Executable> exe;
  std::vector<int> input_map;   // executable input j is original input input_map[j]
  std::vector<int> output_map;  // original output i is executable output output_map[i]
  double build_ms = 0;
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
};
// Shape/type inference (with `constraints` on the inputs), verify, the pass pipeline and the
// backend. Inputs must be named in0, in1, ...; outputs out0, out1, ... (build_lazy_graph does).
// `check` sees the inferred graph before the passes (compile's shapeless check).
BuiltGraph build_graph_executable(Graph g, const std::vector<ShapeConstraint>& constraints, const CompileConfig& c,
                                  const std::function<void(const Graph&)>& check = {});

// The arrays' deferred eval() calls while a CompileRegion is open on this thread.
struct RegionState;
RegionState* current_region();

// Evaluates `targets` now, through the hot path (`region`: the name of the region whose unit
// this is, which makes the graph eligible for compile).
void eval_now(const std::vector<Array>& targets, const std::string& region = "");

}  // namespace ingot::detail
