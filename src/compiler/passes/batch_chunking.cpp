// Batch chunking (inference): the region of the graph that computes each sample from that sample
// alone (conv2d, batch_norm, pooling, elementwise ops over the batch) runs in chunks of c samples,
// one chunk after the other, so only one chunk's activations are live at a time:
//   x -> conv -> relu -> conv -> global_avg_pool2d -> ...
// becomes, for chunk i of N / c,
//   slice(x, i*c .. (i+1)*c) -> conv -> relu -> conv -> global_avg_pool2d   (c samples)
// and the region's results are concatenated along the batch axis. The memory plan then holds one
// chunk's intermediates instead of the whole batch's (the CNN's conv outputs are 1.2 GB at batch
// 32), and a chunk's activations are closer to the caches' size.
//
// The region: nodes whose output has the batch size N in dim 0 and whose operands of that batch
// are data inputs (batch N in dim 0) or region results, read where the op keeps samples apart:
// conv2d / batch_norm / max_pool2d / avg_pool2d / global_avg_pool2d (their first operand) and
// elementwise ops (operands of the output's rank; the others broadcast, as weights do). A node
// that depends on the region through a node outside it is not in it (chunks run back to back).
// The pass applies only in inference, with a static batch shared by the data inputs, when one
// sample's largest live set (a node's batched operands and output) times N exceeds twice
// PassContext::chunk_bytes; c is the largest divisor of N whose live set fits chunk_bytes. The
// compile options choose chunk_bytes (compiler/target_options.h): 256 MiB, 64 MiB with the
// throughput priority, 16 MiB with optimize_for = "memory".
#include <algorithm>
#include <set>

#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {
namespace {

int64_t value_bytes(const Value& v) { return numel(to_shape(v.shape)) * static_cast<int64_t>(dtype_size(v.dtype)); }

bool batch_dim(const Value& v, int64_t n) { return !v.shape.empty() && v.shape[0].known() && v.shape[0].value == n; }

// Whether node `n` keeps samples apart, given which values are batched (batch N in dim 0).
bool per_sample(const Graph& g, const Node& n, const std::vector<bool>& batched, int64_t batch) {
  static const std::set<std::string> first_operand = {"conv2d", "batch_norm", "max_pool2d", "avg_pool2d",
                                                      "global_avg_pool2d"};
  const bool elementwise = get_op(n.op).fusion == FusionClass::Elementwise;
  if (n.outputs.size() != 1 || (!elementwise && !first_operand.count(n.op))) return false;
  const Value& y = g.value(n.outputs[0]);
  if (!batch_dim(y, batch) || !is_static(y.shape)) return false;
  bool any = false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& v = g.value(n.inputs[i]);
    // Elementwise operands line up with the output dim for dim; pooling changes the rank.
    const bool aligned = batch_dim(v, batch) && (!elementwise || v.shape.size() == y.shape.size());
    if (batched[static_cast<size_t>(v.id)]) {
      if (!aligned || (!elementwise && i != 0)) return false;
      any = true;
    } else if (elementwise && aligned) {
      return false;  // a whole batch that is not chunked
    } else if (!elementwise && i == 0) {
      return false;
    }
  }
  return any;
}

}  // namespace

PassReport chunk_batch(Graph& g, const PassContext& ctx) {
  PassReport report;
  if (!ctx.inference) return report;
  // The batch: dim 0 of the data inputs.
  int64_t batch = -1;
  for (ValueId id : g.leaves_of(ValueKind::Input)) {
    const Value& v = g.value(id);
    if (v.shape.empty()) continue;
    if (!v.shape[0].known() || (batch >= 0 && v.shape[0].value != batch)) return report;
    batch = v.shape[0].value;
  }
  if (batch < 2) return report;
  const size_t nv = g.values().size(), nn = g.nodes().size();
  std::vector<bool> batched(nv, false), in_region(nn, false);
  for (ValueId id : g.leaves_of(ValueKind::Input)) batched[static_cast<size_t>(id)] = batch_dim(g.value(id), batch);
  for (const Node& n : g.nodes())
    if (per_sample(g, n, batched, batch)) {
      in_region[static_cast<size_t>(n.id)] = true;
      batched[static_cast<size_t>(n.outputs[0])] = true;
    }
  // Downstream: nodes outside the region that read it (directly or through each other). A region
  // node reading a downstream value leaves the region, to a fixpoint.
  std::vector<bool> downstream(nn, false);
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<bool> down_value(nv, false);
    for (const Node& n : g.nodes()) {
      bool reads_region = false, reads_down = false;
      for (ValueId v : n.inputs) {
        const NodeId p = g.value(v).producer;
        reads_region = reads_region || (p >= 0 && in_region[static_cast<size_t>(p)]);
        reads_down = reads_down || down_value[static_cast<size_t>(v)];
      }
      const size_t i = static_cast<size_t>(n.id);
      if (in_region[i] && reads_down) {
        in_region[i] = false;
        changed = true;
      }
      downstream[i] = !in_region[i] && (reads_region || reads_down);
      for (ValueId v : n.outputs) down_value[static_cast<size_t>(v)] = downstream[i];
    }
  }
  std::vector<NodeId> region;
  int64_t live_per_sample = 0;
  for (const Node& n : g.nodes()) {
    if (!in_region[static_cast<size_t>(n.id)]) continue;
    region.push_back(n.id);
    int64_t live = value_bytes(g.value(n.outputs[0]));
    for (ValueId v : n.inputs)
      if (batched[static_cast<size_t>(v)]) live += value_bytes(g.value(v));
    live_per_sample = std::max(live_per_sample, live / batch);
  }
  if (region.empty() || live_per_sample * batch <= 2 * ctx.chunk_bytes) return report;
  int64_t chunk = 1;
  for (int64_t c = 1; c < batch; ++c)
    if (batch % c == 0 && c * live_per_sample <= ctx.chunk_bytes) chunk = c;
  const int64_t chunks = batch / chunk;
  std::string ops;
  for (NodeId id : region) ops += (ops.empty() ? "" : " ") + g.node(id).op;

  // The region's inputs (batched values it reads but does not produce) and results (values it
  // produces that something outside reads).
  std::vector<ValueId> inputs, results;
  std::vector<int> uses = g.use_counts(), uses_inside(nv, 0);
  for (NodeId id : region)
    for (ValueId v : g.node(id).inputs) {
      ++uses_inside[static_cast<size_t>(v)];
      const NodeId p = g.value(v).producer;
      if (batched[static_cast<size_t>(v)] && (p < 0 || !in_region[static_cast<size_t>(p)]) &&
          std::find(inputs.begin(), inputs.end(), v) == inputs.end())
        inputs.push_back(v);
    }
  for (NodeId id : region) {
    const ValueId y = g.node(id).outputs[0];
    if (uses[static_cast<size_t>(y)] > uses_inside[static_cast<size_t>(y)]) results.push_back(y);
  }
  auto chunk_shape = [&](ValueId v) {
    SymShape s = g.value(v).shape;
    s[0] = SymDim(chunk);
    return s;
  };
  auto annotate = [&](ValueId v, const SymShape& shape, DType dt) {
    g.value(v).shape = shape;
    g.value(v).shape_known = true;
    g.value(v).dtype = dt;
  };
  std::vector<NodeId> chunked;  // new nodes, in execution order
  std::vector<std::vector<ValueId>> parts(results.size());
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<ValueId> copy(nv, -1);  // original value -> this chunk's
    for (ValueId v : inputs) {
      const ValueId s = g.add_op("slice", {v},
                                 {{"starts", std::vector<int64_t>{c * chunk}}, {"ends", std::vector<int64_t>{(c + 1) * chunk}},
                                  {"axes", std::vector<int64_t>{0}}});
      annotate(s, chunk_shape(v), g.value(v).dtype);
      copy[static_cast<size_t>(v)] = s;
      chunked.push_back(g.value(s).producer);
    }
    for (NodeId id : region) {
      const Node n = g.node(id);
      std::vector<ValueId> ins;
      for (ValueId v : n.inputs) ins.push_back(copy[static_cast<size_t>(v)] >= 0 ? copy[static_cast<size_t>(v)] : v);
      const ValueId y = g.add_op(n.op, ins, n.attrs, n.scope);
      annotate(y, chunk_shape(n.outputs[0]), g.value(n.outputs[0]).dtype);
      copy[static_cast<size_t>(n.outputs[0])] = y;
      chunked.push_back(g.value(y).producer);
    }
    for (size_t r = 0; r < results.size(); ++r) parts[r].push_back(copy[static_cast<size_t>(results[r])]);
  }
  for (size_t r = 0; r < results.size(); ++r) {
    const ValueId joined = g.add_op("concat", parts[r], {{"axis", int64_t{0}}}, g.node(g.value(results[r]).producer).scope);
    annotate(joined, g.value(results[r]).shape, g.value(results[r]).dtype);
    replace_uses(g, results[r], joined);
    chunked.push_back(g.value(joined).producer);
  }
  // Everything the region does not depend on, the chunks, then what reads the region.
  std::vector<NodeId> order;
  for (size_t i = 0; i < nn; ++i)
    if (!in_region[i] && !downstream[i]) order.push_back(static_cast<NodeId>(i));
  order.insert(order.end(), chunked.begin(), chunked.end());
  for (size_t i = 0; i < nn; ++i)
    if (downstream[i]) order.push_back(static_cast<NodeId>(i));
  for (NodeId id : region) order.push_back(id);  // now unread: removed below
  reorder_nodes(g, order);
  remove_dead_nodes(g);
  report.changes = static_cast<int>(region.size());
  report.notes.push_back("batch " + std::to_string(batch) + " in " + std::to_string(chunks) + " chunks of " +
                         std::to_string(chunk) + " through " + ops + ": live activations per chunk about " +
                         std::to_string(chunk * live_per_sample >> 20) + " MiB instead of " +
                         std::to_string(batch * live_per_sample >> 20) + " MiB");
  return report;
}

}  // namespace ingot
