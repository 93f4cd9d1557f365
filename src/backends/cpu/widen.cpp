#include "backends/cpu/widen.h"

#include "compiler/layout_plan.h"
#include "compiler/passes/passes.h"

namespace ingot::cpu {

std::optional<Graph> widen_half_dense(const Graph& g, bool native_bf16_matmul, bool native_bf16_conv) {
  auto half_dense = [&](const Graph& graph, const Node& n) {
    if (is_conv2d_gradient(n)) {  // two half operands, any `like`
      const DType t = graph.value(n.inputs[0]).dtype;
      if ((t != DType::Float16 && t != DType::BFloat16) || graph.value(n.inputs[1]).dtype != t) return false;
      return !(native_bf16_conv && bf16_conv_grad_fits(graph, n));
    }
    if (n.op != "matmul" && n.op != "conv2d") return false;
    const DType t = graph.value(n.outputs[0]).dtype;
    if (t != DType::Float16 && t != DType::BFloat16) return false;
    if (native_bf16_matmul && n.op == "matmul" && t == DType::BFloat16) return false;
    if (native_bf16_conv && bf16_conv_fits(graph, n)) return false;
    for (ValueId v : n.inputs)
      if (graph.value(v).dtype != t) return false;
    return true;
  };
  bool any = false;
  for (const Node& n : g.nodes()) any = any || half_dense(g, n);
  std::vector<std::pair<NodeId, size_t>> subs;  // control-flow subgraphs that change
  std::vector<Graph> widened;
  for (const Node& n : g.nodes())
    for (size_t k = 0; k < n.subgraphs.size(); ++k)
      if (std::optional<Graph> w = widen_half_dense(n.subgraphs[k], native_bf16_matmul, native_bf16_conv)) {
        subs.emplace_back(n.id, k);
        widened.push_back(std::move(*w));
      }
  if (!any && subs.empty()) return std::nullopt;
  Graph w = g;
  for (size_t i = 0; i < subs.size(); ++i) w.node(subs[i].first).subgraphs[subs[i].second] = std::move(widened[i]);
  if (any)
    run_in_dtype(
        w, [&](const Node& n) { return half_dense(w, n) ? std::optional<DType>(DType::Float32) : std::nullopt; },
        "f32");
  return w;
}

}  // namespace ingot::cpu
