// Control-flow simplification: an `if` whose condition is a constant becomes the nodes of the
// branch it takes, and a `while` that can run no iteration (max_iterations = 0) becomes its
// operands. The graph is rebuilt in order with the branch's nodes where the `if` stood, so the
// taken branch's nodes are optimized, fused and planned with the rest; the nodes keep the
// shapes and dtypes inference gave them inside the branch.
#include "compiler/passes/passes.h"
#include "ingot/error.h"

namespace ingot {
namespace {

// The value fields a rebuilt graph keeps (the id and producer are the new graph's).
void copy_value_info(Value& to, const Value& from) {
  to.name = from.name;
  to.dtype = from.dtype;
  to.shape = from.shape;
  to.shape_known = from.shape_known;
  to.differentiable = from.differentiable;
  to.init = from.init;
  to.weak_type = from.weak_type;
}

// Copies `n` into `out` with its inputs through `map`, recording its outputs in `map`.
void copy_node(Graph& out, const Graph& in, const Node& n, std::vector<ValueId>& map, const std::string& scope) {
  std::vector<ValueId> inputs;
  for (ValueId v : n.inputs) inputs.push_back(map[static_cast<size_t>(v)]);
  const std::vector<ValueId> outs =
      out.add_node(n.op, inputs, n.attrs, static_cast<int>(n.outputs.size()), scope.empty() ? n.scope : scope);
  out.node(out.value(outs[0]).producer).subgraphs = n.subgraphs;
  for (size_t k = 0; k < outs.size(); ++k) {
    copy_value_info(out.value(outs[k]), in.value(n.outputs[k]));
    map[static_cast<size_t>(n.outputs[k])] = outs[k];
  }
}

bool constant_condition(const Graph& g, const Node& n, bool* taken) {
  if (n.op != "if") return false;
  const Value& c = g.value(n.inputs[0]);
  if (c.kind != ValueKind::Constant || c.constant.numel() != 1) return false;
  *taken = c.constant.item(0) != 0.0;
  return true;
}

}  // namespace

PassReport simplify_control_flow(Graph& g, const PassContext&) {
  PassReport report;
  bool any = false;
  for (const Node& n : g.nodes()) {
    bool taken = false;
    any = any || constant_condition(g, n, &taken) ||
          (n.op == "while" && n.attrs.has("max_iterations") && n.attrs.get_int("max_iterations") == 0);
  }
  if (!any) return report;
  Graph out;
  std::vector<ValueId> map(g.values().size(), -1);
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    const ValueId nid = v.kind == ValueKind::Constant ? out.add_constant(v.name, v.constant) : out.add_input(v.name, v.kind);
    copy_value_info(out.value(nid), v);
    map[static_cast<size_t>(id)] = nid;
  }
  for (const Node& n : g.nodes()) {
    const std::string where = n.scope.empty() ? "" : " in '" + n.scope + "'";
    bool taken = false;
    if (constant_condition(g, n, &taken)) {
      // The branch's leaves: its inputs are the operands; its constants are copied in.
      const Graph& branch = n.subgraphs[taken ? 0 : 1];
      std::vector<ValueId> inner(branch.values().size(), -1);
      const std::vector<ValueId> params = branch.leaves_of(ValueKind::Input);
      for (size_t i = 0; i < params.size(); ++i) inner[static_cast<size_t>(params[i])] = map[static_cast<size_t>(n.inputs[i + 1])];
      for (ValueId id : branch.leaves_of(ValueKind::Constant)) {
        const Value& c = branch.value(id);
        const std::string name =
            c.name.empty() || out.find_leaf(c.name) ? "inlined_" + std::to_string(out.values().size()) : c.name;
        const ValueId nid = out.add_constant(name, c.constant);
        copy_value_info(out.value(nid), c);
        out.value(nid).name = name;  // unique among the graph's leaves
        inner[static_cast<size_t>(id)] = nid;
      }
      for (const Node& b : branch.nodes()) copy_node(out, branch, b, inner, n.scope);
      for (size_t k = 0; k < n.outputs.size(); ++k)
        map[static_cast<size_t>(n.outputs[k])] = inner[static_cast<size_t>(branch.outputs()[k].second)];
      report.notes.push_back(std::string("if") + where + ": the condition is a constant; the " +
                             (taken ? "then" : "else") + " branch inlined");
      ++report.changes;
    } else if (n.op == "while" && n.attrs.has("max_iterations") && n.attrs.get_int("max_iterations") == 0) {
      for (size_t k = 0; k < n.outputs.size(); ++k) map[static_cast<size_t>(n.outputs[k])] = map[static_cast<size_t>(n.inputs[k])];
      report.notes.push_back("while" + where + ": max_iterations = 0; the loop is its operands");
      ++report.changes;
    } else {
      copy_node(out, g, n, map, "");
    }
  }
  for (const auto& [name, v] : g.outputs()) out.set_output(name, map[static_cast<size_t>(v)]);
  g = std::move(out);
  return report;
}

}  // namespace ingot
