// From a lazy graph to a runnable executable: the pass pipeline and the configured backend,
// with the inputs and outputs mapped back to the graph's own order.
#include <chrono>
#include <string>

#include "compiler/passes/passes.h"
#include "ingot/error.h"
#include "trace/trace_state.h"

namespace ingot::detail {

namespace {
int index_of(const std::string& name, const char* prefix) {
  const std::string p(prefix);
  INGOT_CHECK(name.rfind(p, 0) == 0, "internal: compiled graph value '", name, "' is not named ", p, "<k>");
  return std::stoi(name.substr(p.size()));
}
}  // namespace

BuiltGraph build_graph_executable(Graph g, const std::vector<ShapeConstraint>& constraints, const CompileConfig& c,
                                  const std::function<void(const Graph&)>& check) {
  const auto t0 = std::chrono::steady_clock::now();
  INGOT_CHECK(!c.inject_build_failure, "injected build failure (CompileConfig::inject_build_failure)");
  const size_t num_outputs = g.outputs().size();
  infer_shapes(g, constraints);
  infer_types(g);
  if (check) check(g);
  verify(g);
  optimize(g, c.options);
  BuiltGraph b;
  b.exe = build_backend(c).lower(g, c.options);
  for (ValueId id : g.leaves())
    if (g.value(id).kind != ValueKind::Constant) b.input_map.push_back(index_of(g.value(id).name, "in"));
  b.output_map.assign(num_outputs, -1);
  for (size_t j = 0; j < g.outputs().size(); ++j)
    b.output_map.at(static_cast<size_t>(index_of(g.outputs()[j].first, "out"))) = static_cast<int>(j);
  for (int j : b.output_map) INGOT_CHECK(j >= 0, "internal: the pass pipeline dropped a graph output");
  b.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

std::vector<Tensor> BuiltGraph::run(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> ins;
  for (int i : input_map) ins.push_back(inputs.at(static_cast<size_t>(i)));
  std::vector<Tensor> outs = exe->run(ins);
  std::vector<Tensor> result;
  for (int j : output_map) result.push_back(outs.at(static_cast<size_t>(j)));
  return result;
}

}  // namespace ingot::detail
