// The reference interpreter: runs each node's reference kernel in graph order, freeing every
// intermediate tensor right after its last use. It is the oracle other backends are tested
// against, so it favours obviously-correct over clever.
#include <sstream>

#include "ingot/compile.h"
#include "ingot/error.h"
#include "ingot/profile.h"
#include "ir/op_registry.h"

namespace ingot {

namespace {

class ReferenceExecutable final : public Executable {
 public:
  explicit ReferenceExecutable(const Graph& g) : graph_(g) {
    for (const Node& n : graph_.nodes()) {
      kernels_.push_back(get_op(n.op).eval);
      profile_names_.push_back("n" + std::to_string(n.id) + "_" + n.op);
    }
    for (ValueId id : graph_.leaves())
      if (graph_.value(id).kind != ValueKind::Constant) inputs_.push_back(id);
    // Last node reading each value; graph outputs live to the end.
    last_use_.assign(graph_.values().size(), -1);
    for (const Node& n : graph_.nodes())
      for (ValueId v : n.inputs) last_use_[v] = n.id;
    for (const auto& [name, v] : graph_.outputs()) last_use_[v] = static_cast<NodeId>(graph_.nodes().size());
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) const override {
    INGOT_CHECK(inputs.size() == inputs_.size(), "reference executable: expected ", inputs_.size(),
                " inputs, got ", inputs.size());
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
        const profile::Scope timed(profile_names_[n.id], "reference", n.scope);
        kernels_[n.id](n, args, results);
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

  std::string source() const override {
    return "# ingot reference backend: execution plan (one reference kernel per node, in order)\n" +
           print_graph(graph_, DumpFormat::Text);
  }

 private:
  Graph graph_;
  std::vector<Kernel> kernels_;
  std::vector<std::string> profile_names_;  // "n3_matmul": one profile row per node
  std::vector<ValueId> inputs_;
  std::vector<NodeId> last_use_;
};

}  // namespace

std::unique_ptr<Executable> ReferenceBackend::lower(const Graph& graph, const CompileOptions& options) const {
  INGOT_CHECK(options.code_transformers.empty(),
              "Option 'code_transformers': the reference backend generates no code to transform (the CPU backend "
              "and the NumPy, PyTorch, JAX and MLX backends do)");
  return std::make_unique<ReferenceExecutable>(graph);
}

}  // namespace ingot
