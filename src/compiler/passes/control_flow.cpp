// Control-flow simplification: an `if` whose condition is a constant becomes the nodes of the
// branch it takes, and a `while` that can run no iteration (max_iterations = 0) becomes its
// operands. The graph is rebuilt in order with the branch's nodes where the `if` stood, so the
// taken branch's nodes are optimized, fused and planned with the rest; the nodes keep the
// shapes and dtypes inference gave them inside the branch.
#include "compiler/passes/passes.h"
#include "ingot/error.h"
#include "ir/inline.h"

namespace ingot {
namespace {

bool constant_condition(const Graph& g, const Node& n, bool* taken) {
  if (n.op != "if") return false;
  const Value& c = g.value(n.inputs[0]);
  if (c.kind != ValueKind::Constant || c.constant.numel() != 1) return false;
  *taken = c.constant.item(0) != 0.0;
  return true;
}

bool never_runs(const Node& n) {
  return n.op == "while" && n.attrs.has("max_iterations") && n.attrs.get_int("max_iterations") == 0;
}

}  // namespace

PassReport simplify_control_flow(Graph& g, const PassContext&) {
  PassReport report;
  bool any = false;
  for (const Node& n : g.nodes()) {
    bool taken = false;
    any = any || constant_condition(g, n, &taken) || never_runs(n);
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
      const Graph& branch = n.subgraphs[taken ? 0 : 1];
      std::vector<ValueId> args;
      for (size_t i = 1; i < n.inputs.size(); ++i) args.push_back(map[static_cast<size_t>(n.inputs[i])]);
      const std::vector<ValueId> results = inline_graph(out, branch, args, n.scope);
      for (size_t k = 0; k < n.outputs.size(); ++k) map[static_cast<size_t>(n.outputs[k])] = results[k];
      report.notes.push_back(std::string("if") + where + ": the condition is a constant; the " +
                             (taken ? "then" : "else") + " branch inlined");
      ++report.changes;
    } else if (never_runs(n)) {
      for (size_t k = 0; k < n.outputs.size(); ++k) map[static_cast<size_t>(n.outputs[k])] = map[static_cast<size_t>(n.inputs[k])];
      report.notes.push_back("while" + where + ": max_iterations = 0; the loop is its operands");
      ++report.changes;
    } else {
      copy_node(out, g, n, map);
    }
  }
  for (const auto& [name, v] : g.outputs()) out.set_output(name, map[static_cast<size_t>(v)]);
  g = std::move(out);
  return report;
}

}  // namespace ingot
