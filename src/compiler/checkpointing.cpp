#include "compiler/checkpointing.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/passes/passes.h"
#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {

std::string CheckpointReport::str() const {
  return std::to_string(segments) + " forward segments; " + std::to_string(recomputed_nodes) +
         " forward nodes recomputed in the backward graph; " + std::to_string(kept_values) +
         " forward values the backward reads kept";
}

CheckpointReport apply_gradient_checkpointing(Graph& g, NodeId forward_nodes, int segments) {
  INGOT_CHECK(segments >= 1, "gradient checkpointing: checkpoint_segments must be at least 1, got ", segments);
  const auto total = static_cast<NodeId>(g.nodes().size());
  INGOT_CHECK(forward_nodes >= 0 && forward_nodes <= total, "gradient checkpointing: ", forward_nodes,
              " forward nodes in a graph of ", total);
  CheckpointReport report;
  const int k = std::min<int>(segments, std::max<NodeId>(forward_nodes, 1));
  report.segments = k;
  // Segment of each forward node: equal shares of the bytes the forward produces (of its node
  // count when a shape is symbolic), so each segment holds a like amount of activations.
  std::vector<int64_t> weight(static_cast<size_t>(forward_nodes), 1);
  bool sized = true;
  for (NodeId n = 0; n < forward_nodes; ++n) {
    weight[n] = 0;
    for (ValueId v : g.node(n).outputs) {
      sized = sized && is_static(g.value(v).shape);
      if (sized) weight[n] += numel(to_shape(g.value(v).shape)) * static_cast<int64_t>(dtype_size(g.value(v).dtype));
    }
  }
  if (!sized) std::fill(weight.begin(), weight.end(), 1);
  int64_t total_weight = 0;
  for (int64_t w : weight) total_weight += w;
  std::vector<int> node_segment(static_cast<size_t>(forward_nodes), 0);
  for (int64_t n = 0, before = 0; n < forward_nodes; before += weight[n++])
    node_segment[n] = total_weight > 0 ? static_cast<int>(std::min<int64_t>(k - 1, before * k / total_weight)) : 0;
  auto segment_of_node = [&](NodeId n) { return node_segment[static_cast<size_t>(n)]; };
  // Segment of each forward value (-1: not produced by the forward part).
  std::vector<int> seg(g.values().size(), -1);
  for (NodeId n = 0; n < forward_nodes; ++n)
    for (ValueId v : g.node(n).outputs) seg[v] = segment_of_node(n);
  std::vector<bool> kept(g.values().size(), false);
  for (ValueId v = 0; v < static_cast<ValueId>(seg.size()); ++v) kept[v] = seg[v] == k - 1;
  for (const auto& [name, v] : g.outputs()) kept[v] = true;
  // A collective's result is kept: recomputing it would communicate with every rank once more.
  for (NodeId n = 0; n < forward_nodes; ++n)
    if (get_op(g.node(n).op).collective)
      for (ValueId v : g.node(n).outputs) kept[v] = true;
  for (NodeId n = 0; n < forward_nodes; ++n)
    for (ValueId v : g.node(n).inputs)
      if (seg[v] >= 0 && seg[v] < segment_of_node(n)) kept[v] = true;
  auto recomputed = [&](ValueId v) { return seg[v] >= 0 && !kept[v]; };

  // The forward nodes to duplicate: producers of recomputed values the backward reads, and of
  // recomputed values those read (always in the same segment: a value read across a boundary is kept).
  std::vector<bool> clone(static_cast<size_t>(forward_nodes), false);
  std::set<ValueId> kept_reads;
  std::vector<NodeId> stack;
  for (NodeId n = forward_nodes; n < total; ++n)
    for (ValueId v : g.node(n).inputs) {
      if (seg[v] >= 0 && kept[v]) kept_reads.insert(v);
      if (recomputed(v) && !clone[g.value(v).producer]) {
        clone[g.value(v).producer] = true;
        stack.push_back(g.value(v).producer);
      }
    }
  report.kept_values = static_cast<int>(kept_reads.size());
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : g.node(n).inputs)
      if (recomputed(v) && !clone[g.value(v).producer]) {
        clone[g.value(v).producer] = true;
        stack.push_back(g.value(v).producer);
      }
  }

  // Duplicate them in forward order, marked with their segment.
  std::map<ValueId, ValueId> copy_of;
  std::vector<std::vector<NodeId>> clones_of_segment(static_cast<size_t>(k));
  for (NodeId n = 0; n < forward_nodes; ++n) {
    if (!clone[n]) continue;
    const Node original = g.node(n);
    std::vector<ValueId> inputs;
    for (ValueId v : original.inputs) inputs.push_back(recomputed(v) ? copy_of.at(v) : v);
    Attrs attrs = original.attrs;
    attrs.set(kRecomputeAttr, int64_t{segment_of_node(n)});
    const std::vector<ValueId> outs =
        g.add_node(original.op, std::move(inputs), std::move(attrs), static_cast<int>(original.outputs.size()), original.scope);
    for (size_t i = 0; i < outs.size(); ++i) {
      const Value& from = g.value(original.outputs[i]);
      Value& to = g.value(outs[i]);
      to.dtype = from.dtype;
      to.shape = from.shape;
      to.shape_known = from.shape_known;
      copy_of[original.outputs[i]] = outs[i];
    }
    clones_of_segment[static_cast<size_t>(segment_of_node(n))].push_back(g.value(outs[0]).producer);
    ++report.recomputed_nodes;
  }
  if (report.recomputed_nodes == 0) return report;

  // The backward reads the copies; each segment's copies run right before the first backward
  // node that reads one of them.
  std::vector<NodeId> order;
  for (NodeId n = 0; n < forward_nodes; ++n) order.push_back(n);
  std::vector<bool> placed(static_cast<size_t>(k), false);
  for (NodeId n = forward_nodes; n < total; ++n) {
    for (ValueId& v : g.node(n).inputs) {
      if (!recomputed(v)) continue;
      const int s = seg[v];
      if (!placed[static_cast<size_t>(s)]) {
        order.insert(order.end(), clones_of_segment[static_cast<size_t>(s)].begin(), clones_of_segment[static_cast<size_t>(s)].end());
        placed[static_cast<size_t>(s)] = true;
      }
      v = copy_of.at(v);
    }
    order.push_back(n);
  }
  reorder_nodes(g, order);
  return report;
}

}  // namespace ingot
