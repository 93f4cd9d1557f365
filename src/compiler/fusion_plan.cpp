#include "compiler/fusion_plan.h"

#include <algorithm>
#include <sstream>

#include "ir/op_registry.h"

namespace ingot {

std::string_view group_kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::Elementwise: return "elementwise";
    case GroupKind::Reduction: return "reduction";
    case GroupKind::RowKernel: return "row-kernel";
    case GroupKind::Dense: return "dense";
    case GroupKind::Injective: return "injective";
    case GroupKind::Opaque: return "opaque";
  }
  return "?";
}

std::string FusionPlan::str(const Graph& g) const {
  std::ostringstream os;
  for (size_t i = 0; i < groups.size(); ++i) {
    const FusionGroup& grp = groups[i];
    os << "group " << i << " [" << group_kind_name(grp.kind) << "]:";
    for (NodeId n : grp.nodes) os << " " << g.node(n).op;
    os << "\n";
  }
  return os.str();
}

void compute_group_io(const Graph& g, FusionPlan& plan) {
  std::vector<int> group_of(g.values().size(), -1);
  for (size_t gi = 0; gi < plan.groups.size(); ++gi)
    for (NodeId n : plan.groups[gi].nodes)
      for (ValueId v : g.node(n).outputs) group_of[v] = static_cast<int>(gi);
  std::vector<bool> is_output(g.values().size(), false);
  for (const auto& [name, v] : g.outputs()) is_output[v] = true;
  std::vector<std::vector<int>> readers(g.values().size());
  for (size_t gi = 0; gi < plan.groups.size(); ++gi)
    for (NodeId n : plan.groups[gi].nodes)
      for (ValueId v : g.node(n).inputs) readers[v].push_back(static_cast<int>(gi));
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    FusionGroup& grp = plan.groups[gi];
    grp.inputs.clear();
    grp.outputs.clear();
    for (NodeId n : grp.nodes) {
      for (ValueId v : g.node(n).inputs)
        if (group_of[v] != static_cast<int>(gi) &&
            std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end())
          grp.inputs.push_back(v);
      for (ValueId v : g.node(n).outputs) {
        bool outside = is_output[v];
        for (int r : readers[v]) outside = outside || r != static_cast<int>(gi);
        if (outside) grp.outputs.push_back(v);
      }
    }
  }
}

FusionPlan unfused_plan(const Graph& g) {
  FusionPlan plan;
  for (const Node& n : g.nodes()) {
    FusionGroup grp;
    grp.nodes = {n.id};
    switch (get_op(n.op).fusion) {
      case FusionClass::Elementwise: grp.kind = GroupKind::Elementwise; break;
      case FusionClass::Reduction: grp.kind = GroupKind::Reduction; break;
      case FusionClass::RowKernel: grp.kind = GroupKind::RowKernel; break;
      case FusionClass::Dense: grp.kind = GroupKind::Dense; break;
      case FusionClass::Injective: grp.kind = GroupKind::Injective; break;
      default: grp.kind = GroupKind::Opaque; break;
    }
    if (grp.kind != GroupKind::Elementwise) grp.anchor = n.id;
    plan.groups.push_back(std::move(grp));
  }
  compute_group_io(g, plan);
  return plan;
}

}  // namespace ingot
