#include "ir/interpret.h"

#include "ingot/error.h"
#include "ingot/profile.h"
#include "ir/op_registry.h"

namespace ingot {

Interpreter::Interpreter(Graph g, bool profiled) : graph_(std::move(g)), profiled_(profiled) {
  for (const Node& n : graph_.nodes()) profile_names_.push_back("n" + std::to_string(n.id) + "_" + n.op);
  for (ValueId id : graph_.leaves())
    if (graph_.value(id).kind != ValueKind::Constant) inputs_.push_back(id);
  // Last node reading each value; graph outputs live to the end.
  last_use_.assign(graph_.values().size(), -1);
  for (const Node& n : graph_.nodes())
    for (ValueId v : n.inputs) last_use_[v] = n.id;
  for (const auto& [name, v] : graph_.outputs()) last_use_[v] = static_cast<NodeId>(graph_.nodes().size());
}

std::vector<Tensor> Interpreter::run(std::span<const Tensor> inputs) const {
  INGOT_CHECK(inputs.size() == inputs_.size(), "reference interpreter: expected ", inputs_.size(), " inputs, got ",
              inputs.size());
  std::vector<Tensor> slots(graph_.values().size());
  for (size_t i = 0; i < inputs_.size(); ++i) slots[inputs_[i]] = inputs[i].contiguous();
  for (ValueId id : graph_.leaves())
    if (graph_.value(id).kind == ValueKind::Constant) slots[id] = graph_.value(id).constant;
  std::vector<Tensor> args, results;
  for (const Node& n : graph_.nodes()) {
    args.clear();
    for (ValueId v : n.inputs) args.push_back(slots[v]);
    results.assign(n.outputs.size(), Tensor());
    try {
      if (profiled_) {
        const profile::Scope timed(profile_names_[n.id], "reference", n.scope);
        get_op(n.op).eval(n, args, results);
      } else {
        get_op(n.op).eval(n, args, results);
      }
    } catch (const Error& e) {
      INGOT_FAIL("Evaluating ", n.op, n.scope.empty() ? "" : " in '" + n.scope + "'", ": ", e.what());
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) slots[n.outputs[k]] = std::move(results[k]);
    for (ValueId v : n.inputs)
      if (last_use_[v] == n.id) slots[v] = Tensor();
  }
  std::vector<Tensor> out;
  for (const auto& [name, v] : graph_.outputs()) out.push_back(slots[v]);
  return out;
}

}  // namespace ingot
