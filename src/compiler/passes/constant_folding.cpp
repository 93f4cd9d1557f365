// Constant folding: a node whose inputs are all Constant values (literals, and parameters the
// user fixed with `constant_keys`) is run once at compile time with its reference kernel and
// replaced by a Constant holding the result. The result keeps the dtype type inference gave the
// node's output (so weak scalars keep the type they resolved to) and is never weak itself.
// Source ops (random_*: no inputs), collectives (OpDef::collective) and control flow are not folded, nor results above
// PassContext::max_fold_elements elements, nor broadcast_to of a one-element value: that would
// only copy one number into a full-size constant, where simplify lets an elementwise reader
// take the scalar itself.
#include "compiler/passes/passes.h"
#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {

PassReport fold_constants(Graph& g, const PassContext& ctx) {
  PassReport report;
  const size_t num_nodes = g.nodes().size();
  for (size_t i = 0; i < num_nodes; ++i) {
    const Node& n = g.nodes()[i];
    // Control flow is not run at compile time: a loop's trip count is data, and folding it could
    // run without end (simplify folds an if whose condition is a constant).
    if (n.inputs.empty() || !n.subgraphs.empty()) continue;
    if (get_op(n.op).collective) continue;  // its value is the other ranks' too: known only at run time
    if (n.op == "broadcast_to" && is_static(g.value(n.inputs[0]).shape) &&
        numel(to_shape(g.value(n.inputs[0]).shape)) == 1)
      continue;
    bool all_const = true;
    for (ValueId v : n.inputs) all_const = all_const && g.value(v).kind == ValueKind::Constant;
    if (!all_const) continue;
    bool small = true;
    for (ValueId v : n.outputs) {
      const Value& val = g.value(v);
      small = small && is_static(val.shape) && numel(to_shape(val.shape)) <= ctx.max_fold_elements;
    }
    if (!small) continue;
    const OpDef& def = get_op(n.op);
    std::vector<Tensor> args;
    for (ValueId v : n.inputs) args.push_back(g.value(v).constant.contiguous());
    std::vector<Tensor> results(n.outputs.size());
    try {
      def.eval(n, args, results);
    } catch (const Error&) {
      continue;  // leave it for run time, where the error is reported in context
    }
    const Node node = n;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const Value& out = g.value(node.outputs[k]);
      Tensor t = results[k].dtype() == out.dtype ? results[k] : results[k].astype(out.dtype);
      std::string name = out.name;
      if (name.empty() || g.find_leaf(name)) name = "folded_" + std::to_string(g.values().size());
      ValueId c = g.add_constant(name, t);
      g.value(c).weak_type = false;
      g.value(c).shape = g.value(node.outputs[k]).shape;
      replace_uses(g, node.outputs[k], c);
    }
    ++report.changes;
    report.notes.push_back("folded " + node.op + (node.scope.empty() ? "" : " in '" + node.scope + "'"));
  }
  if (report.changes) remove_dead_nodes(g);
  return report;
}

}  // namespace ingot
