// The fusion pass: which nodes a backend runs as one kernel (see compiler/fusion_plan.h).
//
// Nodes are visited in graph order; each either joins an open group of one of its producers or
// starts a new group. Rules:
//   - Elementwise nodes join their producer's group (an Elementwise group, or the epilogue of a
//     Dense / RowKernel group) when their output has the group's iteration shape (the shape of the
//     group's output; inputs may broadcast into it).
//   - A Reduction absorbs the Elementwise group producing its input (the reduction then anchors
//     the group, which is closed).
//   - Dense (matmul, conv2d) and RowKernel (softmax, layer_norm, ...) nodes start a group that
//     absorbs a following elementwise epilogue of their output shape (bias add, activation,
//     residual add).
//   - Injective, Opaque and Source nodes are groups of their own.
// A node may only join through a value that is not a graph output and whose readers are all in
// the group, the joining node, or later elementwise nodes of the group's shape (which may still
// join; if they do not, the value simply becomes one more output of the group). A node joins a
// group only when every other group it reads from comes earlier in the plan, so the groups stay in
// a valid execution order. Every node is in exactly one group.
//
// Then Elementwise groups of one iteration shape connected by a value are merged (maximal
// elementwise regions), unless a path through a third group connects them: see
// merge_elementwise_regions.
//
// Last, a layer_norm / rms_norm takes the elementwise nodes that only compute its input as its
// prologue (a post-norm transformer's bias and residual adds): see take_norm_prologues.
//
// Backends get the plan with fusion_plan_for(graph, options) (compiler/passes/passes.h): fusion
// on (optimizations["fusion"], default from medium up) -> plan_fusion, off -> unfused_plan. The
// reference backend runs node by node and does not consume it.
#include <algorithm>
#include <set>

#include "compiler/fusion_plan.h"
#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {

namespace {

struct Building {
  GroupKind kind;
  NodeId anchor = -1;
  std::vector<NodeId> nodes;
  SymShape shape;  // iteration space
  bool open = true;
};

GroupKind kind_of(FusionClass c) {
  switch (c) {
    case FusionClass::Elementwise: return GroupKind::Elementwise;
    case FusionClass::Reduction: return GroupKind::Reduction;
    case FusionClass::RowKernel: return GroupKind::RowKernel;
    case FusionClass::Dense: return GroupKind::Dense;
    case FusionClass::Injective: return GroupKind::Injective;
    default: return GroupKind::Opaque;
  }
}

// Second step: the greedy walk above joins a node to one producer's group only, so an
// elementwise node whose operands are all leaves (the `0.5 * x` of a composite gelu, each side of
// `relu(a) + tanh(b)`) starts a group of its own. Here Elementwise groups of one iteration shape
// that a value connects are merged, unless a path through another group joins them (merging
// would make a cycle: that group needs the first half's result and feeds the second half).
// Groups are then put back in a valid execution order.
std::vector<Building> merge_elementwise_regions(const Graph& g, const std::vector<std::vector<NodeId>>& readers,
                                                std::vector<Building>& groups, std::vector<int>& group_of) {
  std::vector<int> parent(groups.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
  auto find = [&](int x) {
    while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  // The groups reading a value produced in each group, as group ids that may since have been
  // merged away (read through find). Kept per group and joined on a merge, so a search step costs
  // the group's edges, not a walk over all its nodes (a long elementwise chain is one group).
  std::vector<std::vector<int>> succ_raw(groups.size());
  for (size_t a = 0; a < groups.size(); ++a)
    for (NodeId n : groups[a].nodes)
      for (ValueId v : g.node(n).outputs)
        for (NodeId r : readers[v])
          if (group_of[r] != static_cast<int>(a)) succ_raw[a].push_back(group_of[r]);
  std::vector<int> listed_in(groups.size(), -1);  // dedup stamp: the group whose list last took it
  // The merged groups reading a value produced in merged group `a`; also compacts its list.
  auto successors = [&](int a, std::vector<int>& out) {
    out.clear();
    for (int raw : succ_raw[static_cast<size_t>(a)]) {
      const int b = find(raw);
      if (b != a && listed_in[static_cast<size_t>(b)] != a) {
        listed_in[static_cast<size_t>(b)] = a;
        out.push_back(b);
      }
    }
    for (int b : out) listed_in[static_cast<size_t>(b)] = -1;
    succ_raw[static_cast<size_t>(a)] = out;
  };
  // Whether `to` is reachable from `from` through at least one other group. Node ids follow the
  // topological order, so a group whose first node comes after `to`'s last cannot lead to `to`:
  // the search stays within the span between the two groups instead of the whole graph below.
  std::vector<int> seen_in(groups.size(), -1);  // the search that last visited each group
  int search = 0;
  auto indirect_path = [&](int from, int to) {
    const NodeId last = groups[static_cast<size_t>(to)].nodes.back();
    auto can_reach = [&](int c) { return groups[static_cast<size_t>(c)].nodes.front() < last; };
    std::vector<int> next, stack;
    ++search;
    successors(from, next);
    for (int s : next)
      if (s != to && can_reach(s)) stack.push_back(s);
    while (!stack.empty()) {
      const int c = stack.back();
      stack.pop_back();
      if (seen_in[static_cast<size_t>(c)] == search) continue;
      seen_in[static_cast<size_t>(c)] = search;
      successors(c, next);
      for (int s : next) {
        if (s == to) return true;
        if (seen_in[static_cast<size_t>(s)] != search && can_reach(s)) stack.push_back(s);
      }
    }
    return false;
  };
  // Open Elementwise groups: single-output elementwise nodes only (no reduction absorbed them).
  auto mergeable = [&](int a) {
    const Building& b = groups[static_cast<size_t>(a)];
    return b.kind == GroupKind::Elementwise && b.open;
  };
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.inputs) {
      const NodeId p = g.value(v).producer;
      if (p < 0) continue;
      const int from = find(group_of[p]), to = find(group_of[n.id]);
      if (from == to || !mergeable(from) || !mergeable(to) ||
          groups[static_cast<size_t>(from)].shape != groups[static_cast<size_t>(to)].shape || indirect_path(from, to))
        continue;
      Building& keep = groups[static_cast<size_t>(from)];
      Building& gone = groups[static_cast<size_t>(to)];
      const auto middle = static_cast<std::ptrdiff_t>(keep.nodes.size());
      keep.nodes.insert(keep.nodes.end(), gone.nodes.begin(), gone.nodes.end());
      // Both halves are sorted, and node ids follow the graph's topological order.
      std::inplace_merge(keep.nodes.begin(), keep.nodes.begin() + middle, keep.nodes.end());
      gone.nodes.clear();
      std::vector<int>& succ_keep = succ_raw[static_cast<size_t>(from)];
      succ_keep.insert(succ_keep.end(), succ_raw[static_cast<size_t>(to)].begin(), succ_raw[static_cast<size_t>(to)].end());
      succ_raw[static_cast<size_t>(to)].clear();
      parent[static_cast<size_t>(to)] = from;
    }
  }
  for (int& gi : group_of) gi = find(gi);

  // Execution order: repeatedly take the ready group whose first node comes first (Kahn's
  // algorithm); without merges this is the original order.
  std::vector<int> pending(groups.size(), 0);
  std::vector<std::vector<int>> succ(groups.size());
  for (size_t a = 0; a < groups.size(); ++a)
    if (!groups[a].nodes.empty()) {
      successors(static_cast<int>(a), succ[a]);
      for (int b : succ[a]) ++pending[static_cast<size_t>(b)];
    }
  std::set<std::pair<NodeId, int>> ready;
  for (size_t a = 0; a < groups.size(); ++a)
    if (!groups[a].nodes.empty() && pending[a] == 0) ready.insert({groups[a].nodes.front(), static_cast<int>(a)});
  size_t live = 0;
  for (const Building& b : groups) live += !b.nodes.empty();
  std::vector<Building> ordered;
  while (!ready.empty()) {
    const int a = ready.begin()->second;
    ready.erase(ready.begin());
    for (int b : succ[static_cast<size_t>(a)])
      if (--pending[static_cast<size_t>(b)] == 0) ready.insert({groups[static_cast<size_t>(b)].nodes.front(), b});
    ordered.push_back(std::move(groups[static_cast<size_t>(a)]));
  }
  INGOT_CHECK(ordered.size() == live, "fusion: merged groups form a cycle (", live - ordered.size(),
              " groups unordered)");
  return ordered;
}

// Third step: a layer_norm / rms_norm takes the elementwise nodes that compute its input and
// nothing else (a transformer's bias and residual adds, which the walk gave to the matmul
// before it as an epilogue) as its prologue: the row kernel computes them per row, so their
// result is never written out. The nodes taken are those of the producer's group whose every
// result is read only by the taken nodes or, for the input itself, by the norm alone; none may be
// a graph output, and each has the norm input's shape. A group left empty is dropped; the
// order stays valid, as the taken nodes only move later, to the norm.
void take_norm_prologues(const Graph& g, const std::vector<std::vector<NodeId>>& readers,
                         const std::vector<bool>& is_output, std::vector<Building>& groups) {
  std::vector<int> group_of(g.nodes().size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (NodeId n : groups[gi].nodes) group_of[static_cast<size_t>(n)] = static_cast<int>(gi);
  for (size_t ri = 0; ri < groups.size(); ++ri) {
    Building& row = groups[ri];
    if (row.kind != GroupKind::RowKernel || row.nodes.empty() || row.nodes.front() != row.anchor) continue;
    const Node& norm = g.node(row.anchor);
    if (norm.op != "layer_norm" && norm.op != "rms_norm") continue;
    const ValueId x = norm.inputs[0];
    const NodeId p = g.value(x).producer;
    if (p < 0 || group_of[static_cast<size_t>(p)] < 0 || group_of[static_cast<size_t>(p)] == static_cast<int>(ri))
      continue;
    Building& from = groups[static_cast<size_t>(group_of[static_cast<size_t>(p)])];
    std::set<NodeId> taken;
    auto takeable = [&](NodeId n) {
      const Node& node = g.node(n);
      if (n == from.anchor || get_op(node.op).fusion != FusionClass::Elementwise || node.outputs.size() != 1) return false;
      const ValueId v = node.outputs[0];
      if (is_output[static_cast<size_t>(v)] || g.value(v).shape != g.value(x).shape) return false;
      for (NodeId r : readers[static_cast<size_t>(v)])
        if (!taken.count(r) && !(v == x && r == norm.id)) return false;
      for (size_t i = 1; i < norm.inputs.size(); ++i)
        if (norm.inputs[i] == v) return false;
      return true;
    };
    // From p backwards (the group's nodes are in topological order, so a node's readers in it
    // are decided before the node; the nodes after p do not lead to x).
    for (auto it = std::find(from.nodes.rbegin(), from.nodes.rend(), p); it != from.nodes.rend(); ++it)
      if (takeable(*it)) taken.insert(*it);
    if (!taken.count(p)) continue;
    std::vector<NodeId> prologue, rest;
    for (NodeId n : from.nodes) (taken.count(n) ? prologue : rest).push_back(n);
    from.nodes = std::move(rest);
    for (NodeId n : prologue) group_of[static_cast<size_t>(n)] = static_cast<int>(ri);
    row.nodes.insert(row.nodes.begin(), prologue.begin(), prologue.end());
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const Building& b) { return b.nodes.empty(); }),
               groups.end());
}

}  // namespace

FusionPlan plan_fusion(const Graph& g) {
  const size_t nv = g.values().size();
  std::vector<std::vector<NodeId>> readers(nv);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs)
      if (readers[v].empty() || readers[v].back() != n.id) readers[v].push_back(n.id);
  std::vector<bool> is_output(nv, false);
  for (const auto& [name, v] : g.outputs()) is_output[v] = true;

  std::vector<Building> groups;
  std::vector<int> group_of(g.nodes().size(), -1);
  auto cls = [&](NodeId n) { return get_op(g.node(n).op).fusion; };

  // Whether node n may enter group gi through value v (produced in gi).
  auto can_pass = [&](ValueId v, NodeId n, int gi) {
    if (is_output[v]) return false;
    for (NodeId r : readers[v]) {
      if (r == n || group_of[r] == gi) continue;
      if (group_of[r] >= 0) return false;
      // A later reader that may still join: an elementwise node of the group's shape.
      const Node& rn = g.node(r);
      if (cls(r) != FusionClass::Elementwise || rn.outputs.size() != 1 ||
          g.value(rn.outputs[0]).shape != groups[static_cast<size_t>(gi)].shape)
        return false;
    }
    return true;
  };

  for (const Node& n : g.nodes()) {
    const FusionClass fc = get_op(n.op).fusion;
    // The latest group among n's producers.
    int target = -1;
    for (ValueId v : n.inputs) {
      NodeId p = g.value(v).producer;
      if (p >= 0) target = std::max(target, group_of[p]);
    }
    bool joined = false;
    if (target >= 0 && (fc == FusionClass::Elementwise || fc == FusionClass::Reduction) &&
        n.outputs.size() == 1) {
      Building& grp = groups[static_cast<size_t>(target)];
      bool ok = grp.open;
      if (fc == FusionClass::Elementwise)
        ok = ok && grp.kind != GroupKind::Reduction && g.value(n.outputs[0]).shape == grp.shape;
      else
        ok = ok && grp.kind == GroupKind::Elementwise;
      for (ValueId v : n.inputs) {
        NodeId p = g.value(v).producer;
        if (!ok || p < 0 || group_of[p] != target) continue;
        ok = can_pass(v, n.id, target);
        // A reduction absorbs producers with no other reader at all.
        if (ok && fc == FusionClass::Reduction)
          for (NodeId r : readers[v]) ok = ok && (r == n.id || group_of[r] == target);
      }
      if (ok) {
        grp.nodes.push_back(n.id);
        group_of[n.id] = target;
        if (fc == FusionClass::Reduction) {
          grp.kind = GroupKind::Reduction;
          grp.anchor = n.id;
          grp.open = false;
        }
        joined = true;
      }
    }
    if (joined) continue;
    Building grp;
    grp.kind = kind_of(fc);
    grp.nodes = {n.id};
    if (!n.outputs.empty()) grp.shape = g.value(n.outputs[0]).shape;
    if (grp.kind != GroupKind::Elementwise) grp.anchor = n.id;
    grp.open = n.outputs.size() == 1 &&
               (grp.kind == GroupKind::Elementwise || grp.kind == GroupKind::Dense ||
                grp.kind == GroupKind::RowKernel || grp.kind == GroupKind::Reduction);
    // A lone reduction stays open only to absorb nothing: close it.
    if (grp.kind == GroupKind::Reduction) grp.open = false;
    group_of[n.id] = static_cast<int>(groups.size());
    groups.push_back(std::move(grp));
  }

  std::vector<Building> ordered = merge_elementwise_regions(g, readers, groups, group_of);
  take_norm_prologues(g, readers, is_output, ordered);
  FusionPlan plan;
  for (Building& b : ordered) {
    FusionGroup fg;
    fg.kind = b.kind;
    fg.anchor = b.anchor;
    fg.nodes = std::move(b.nodes);
    plan.groups.push_back(std::move(fg));
  }
  compute_group_io(g, plan);
  return plan;
}

PassReport fusion_pass(Graph& g, const PassContext&) {
  PassReport report;
  FusionPlan plan = plan_fusion(g);
  size_t fused = 0;
  for (const FusionGroup& grp : plan.groups) fused += grp.nodes.size() > 1;
  report.notes.push_back(std::to_string(g.nodes().size()) + " nodes in " +
                         std::to_string(plan.groups.size()) + " groups (" + std::to_string(fused) +
                         " fused); the graph is unchanged, backends call fusion_plan_for");
  std::string s = plan.str(g);
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) report.notes.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return report;
}

}  // namespace ingot
