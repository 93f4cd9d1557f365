#include "backends/cpu/widen.h"

#include "compiler/passes/passes.h"

namespace ingot::cpu {

std::optional<Graph> widen_half_dense(const Graph& g) {
  auto half_dense = [](const Graph& graph, const Node& n) {
    if (n.op != "matmul" && n.op != "conv2d") return false;
    const DType t = graph.value(n.outputs[0]).dtype;
    if (t != DType::Float16 && t != DType::BFloat16) return false;
    for (ValueId v : n.inputs)
      if (graph.value(v).dtype != t) return false;
    return true;
  };
  bool any = false;
  for (const Node& n : g.nodes()) any = any || half_dense(g, n);
  if (!any) return std::nullopt;
  Graph w = g;
  run_in_dtype(
      w, [&](const Node& n) { return half_dense(w, n) ? std::optional<DType>(DType::Float32) : std::nullopt; },
      "f32");
  return w;
}

}  // namespace ingot::cpu
