// Common subexpression elimination: two nodes with the same op, the same attributes and the same
// inputs (in order) compute the same values, so the later one is dropped and its readers read the
// earlier one's outputs. Runs in node order, so chains collapse in one sweep (two branches reading
// one Linear's output compute it once).
//
// Source ops (random_uniform / random_normal) and dropout are counter-based and seeded: with the
// same op, attrs (seed included) and inputs they produce the same numbers, so merging them is
// exact. Source nodes are only ever merged on a full op+attrs+inputs match, like every node;
// two random ops with different seeds are never merged.
//
// Small constants (up to 64 elements) with the same dtype, shape, weak flag and values are merged
// first, so `x * 2.0` written twice becomes one node.
#include <cstring>
#include <map>
#include <tuple>

#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {

namespace {

bool same_constant(const Value& a, const Value& b) {
  if (a.dtype != b.dtype || a.shape != b.shape || a.weak_type != b.weak_type) return false;
  const Tensor ta = a.constant.contiguous(), tb = b.constant.contiguous();
  return ta.nbytes() == tb.nbytes() && std::memcmp(ta.raw_data(), tb.raw_data(), ta.nbytes()) == 0;
}

}  // namespace

PassReport eliminate_common_subexpressions(Graph& g, const PassContext&) {
  PassReport report;
  // Constants.
  std::vector<ValueId> small;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    if (v.kind != ValueKind::Constant || !v.constant.defined() || v.constant.numel() > 64) continue;
    bool merged = false;
    for (ValueId s : small) {
      if (same_constant(g.value(s), v)) {
        replace_uses(g, id, s);
        merged = true;
        break;
      }
    }
    if (!merged) small.push_back(id);
  }
  // Nodes.
  using Key = std::tuple<std::string, std::vector<ValueId>>;
  std::map<Key, std::vector<NodeId>> seen;
  for (Node& n : g.nodes()) {
    if (!n.subgraphs.empty()) continue;  // two ifs over the same operands may hold different branches
    Key key{n.op, n.inputs};
    std::vector<NodeId>& same = seen[key];
    bool merged = false;
    for (NodeId other : same) {
      const Node& o = g.node(other);
      if (!(o.attrs == n.attrs) || o.outputs.size() != n.outputs.size()) continue;
      for (size_t k = 0; k < n.outputs.size(); ++k) replace_uses(g, n.outputs[k], o.outputs[k]);
      report.notes.push_back("merged " + n.op + (n.scope.empty() ? "" : " in '" + n.scope + "'") +
                             " into the same " + o.op + (o.scope.empty() ? "" : " in '" + o.scope + "'"));
      ++report.changes;
      merged = true;
      break;
    }
    if (!merged) same.push_back(n.id);
  }
  remove_dead_nodes(g);
  return report;
}

}  // namespace ingot
