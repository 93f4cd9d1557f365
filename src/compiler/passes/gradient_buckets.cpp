// Gradient buckets: the gradient all-reduces of a data-parallel training step (all_reduce nodes
// marked gradient_bucket = 1 by compile_train_step) become a few large all-reduces that overlap
// the backward, as PyTorch DDP's buckets do.
//
// The marked all-reduces are taken in the order their operands are computed (the order the
// backward produces the gradients, not the parameters' order) and packed into buckets of at
// least `gradient_bucket_bytes` each (one dtype, one reduction per bucket). A bucket is an
// all_reduce_start of its gradients, placed right after the last of them is computed, and an
// all_reduce_wait giving the reduced gradients, placed right before the first node that reads
// one (the optimizer update): the communication thread reduces the bucket while the backward goes
// on (src/distributed/started.h). With gradient_overlap off, each wait follows its start at once.
//
// Only all-reduces of statically shaped operands are bucketed (the wait records the shapes);
// others stay as they are, blocking where they are.
#include <algorithm>
#include <map>
#include <tuple>

#include "compiler/passes/passes.h"
#include "ingot/error.h"

namespace ingot {
namespace {

struct Bucket {
  std::vector<NodeId> reduces;  // the marked all_reduce nodes, in ready order
  int64_t bytes = 0;
};

bool is_bucketable(const Graph& g, const Node& n) {
  if (n.op != "all_reduce" || n.attrs.get_int("gradient_bucket", 0) != 1) return false;
  const Value& x = g.value(n.inputs[0]);
  return x.shape_known && is_static(x.shape);
}

// The node order: each bucket's start right after its operands' last producer, each wait right
// before its results' first reader (or right after the start without overlap).
std::vector<NodeId> schedule(const Graph& g, bool overlap) {
  const size_t n = g.nodes().size();
  std::vector<NodeId> starts, waits;
  std::vector<NodeId> base;
  for (const Node& node : g.nodes()) {
    if (node.op == "all_reduce_start") starts.push_back(node.id);
    else if (node.op == "all_reduce_wait") waits.push_back(node.id);
    else base.push_back(node.id);
  }
  std::vector<int64_t> index(n, -1);
  for (size_t i = 0; i < base.size(); ++i) index[static_cast<size_t>(base[i])] = static_cast<int64_t>(i);
  // after[i]: starts to emit after base[i] (slot 0 is "before everything", so i + 1); before[i]:
  // waits to emit before base[i] (slot base.size() is "at the end").
  std::vector<std::vector<NodeId>> after(base.size() + 1), before(base.size() + 1);
  std::map<NodeId, NodeId> wait_of_start;
  for (NodeId w : waits) wait_of_start[g.value(g.node(w).inputs[0]).producer] = w;
  std::vector<std::vector<NodeId>> readers(g.values().size());
  for (NodeId b : base)
    for (ValueId v : g.node(b).inputs) readers[static_cast<size_t>(v)].push_back(b);
  for (NodeId s : starts) {
    int64_t last = -1;
    for (ValueId v : g.node(s).inputs) {
      const NodeId p = g.value(v).producer;
      if (p >= 0) last = std::max(last, index[static_cast<size_t>(p)]);
    }
    after[static_cast<size_t>(last + 1)].push_back(s);
  }
  for (NodeId w : waits) {
    int64_t first = static_cast<int64_t>(base.size());
    for (ValueId v : g.node(w).outputs)
      for (NodeId r : readers[static_cast<size_t>(v)]) first = std::min(first, index[static_cast<size_t>(r)]);
    before[static_cast<size_t>(first)].push_back(w);
  }
  std::vector<NodeId> order;
  auto emit_starts = [&](size_t slot) {
    for (NodeId s : after[slot]) {
      order.push_back(s);
      if (!overlap) order.push_back(wait_of_start.at(s));
    }
  };
  auto emit_waits = [&](size_t slot) {
    if (!overlap) return;
    for (NodeId w : before[slot]) order.push_back(w);
  };
  emit_starts(0);
  for (size_t i = 0; i < base.size(); ++i) {
    emit_waits(i);
    order.push_back(base[i]);
    emit_starts(i + 1);
  }
  emit_waits(base.size());
  return order;
}

}  // namespace

PassReport bucket_gradient_all_reduce(Graph& g, const PassContext& ctx) {
  PassReport report;
  std::vector<NodeId> marked;
  for (const Node& n : g.nodes())
    if (is_bucketable(g, n)) marked.push_back(n.id);
  if (marked.empty()) return report;
  auto ready = [&](NodeId id) { return g.value(g.node(id).inputs[0]).producer; };
  std::stable_sort(marked.begin(), marked.end(), [&](NodeId a, NodeId b) { return ready(a) < ready(b); });

  // Open buckets by (dtype, reduction, group size); a bucket closes once it holds enough bytes.
  using Key = std::tuple<DType, std::string, int64_t>;
  std::map<Key, Bucket> open;
  std::vector<Bucket> buckets;
  for (NodeId id : marked) {
    const Node& n = g.node(id);
    const Value& x = g.value(n.inputs[0]);
    const Key key{x.dtype, n.attrs.get_string("op", "sum"), n.attrs.get_int("group_size")};
    Bucket& b = open[key];
    b.reduces.push_back(id);
    b.bytes += static_cast<int64_t>(ingot::numel(to_shape(x.shape)) * dtype_size(x.dtype));
    if (b.bytes >= ctx.gradient_bucket_bytes) {
      buckets.push_back(std::move(b));
      open.erase(key);
    }
  }
  for (auto& [key, b] : open) buckets.push_back(std::move(b));
  std::stable_sort(buckets.begin(), buckets.end(),
                   [&](const Bucket& a, const Bucket& b) { return ready(a.reduces.back()) < ready(b.reduces.back()); });

  for (const Bucket& b : buckets) {
    const Node first = g.node(b.reduces[0]);
    const DType dtype = g.value(first.inputs[0]).dtype;
    std::vector<ValueId> grads;
    std::vector<int64_t> ranks, dims;
    for (NodeId id : b.reduces) {
      const ValueId x = g.node(id).inputs[0];
      grads.push_back(x);
      const Shape s = to_shape(g.value(x).shape);
      ranks.push_back(static_cast<int64_t>(s.size()));
      dims.insert(dims.end(), s.begin(), s.end());
    }
    Attrs start_attrs;
    start_attrs.set("op", first.attrs.get_string("op", "sum"));
    start_attrs.set("group_size", first.attrs.get_int("group_size"));
    const ValueId ticket = g.add_node("all_reduce_start", grads, start_attrs, 1, first.scope)[0];
    g.value(ticket).dtype = DType::Int64;
    g.value(ticket).shape = {};
    g.value(ticket).shape_known = true;
    Attrs wait_attrs;
    wait_attrs.set("group_size", first.attrs.get_int("group_size"));
    wait_attrs.set("dtype", std::string(dtype_name(dtype)));
    wait_attrs.set("ranks", ranks);
    wait_attrs.set("dims", dims);
    const std::vector<ValueId> reduced =
        g.add_node("all_reduce_wait", {ticket}, wait_attrs, static_cast<int>(b.reduces.size()), first.scope);
    int64_t bytes = 0;
    for (size_t i = 0; i < reduced.size(); ++i) {
      const ValueId old = g.node(b.reduces[i]).outputs[0];
      Value& v = g.value(reduced[i]);
      v.dtype = dtype;
      v.shape = g.value(old).shape;
      v.shape_known = true;
      v.name = g.value(old).name;
      replace_uses(g, old, reduced[i]);
      bytes += static_cast<int64_t>(ingot::numel(to_shape(v.shape)) * dtype_size(dtype));
    }
    report.changes += 1;
    report.notes.push_back("bucket of " + std::to_string(b.reduces.size()) + " gradients, " + std::to_string(bytes) +
                           " bytes of " + std::string(dtype_name(dtype)));
  }
  reorder_nodes(g, schedule(g, ctx.gradient_overlap));  // first: dead-node removal needs a topological order
  remove_dead_nodes(g);  // the marked all-reduces, read by nothing now
  return report;
}

}  // namespace ingot
