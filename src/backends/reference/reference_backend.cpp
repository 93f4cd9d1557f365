// The reference interpreter: runs each node's reference kernel in graph order, freeing every
// intermediate tensor right after its last use. It is the oracle other backends are tested
// against, so it favours obviously-correct over clever.
#include "ingot/compile.h"
#include "ingot/error.h"
#include "ir/interpret.h"

namespace ingot {

namespace {

class ReferenceExecutable final : public Executable {
 public:
  explicit ReferenceExecutable(const Graph& g) : interpreter_(g, /*profiled=*/true) {}

  std::vector<Tensor> run(std::span<const Tensor> inputs) const override { return interpreter_.run(inputs); }

  std::string source() const override {
    return "# ingot reference backend: execution plan (one reference kernel per node, in order)\n" +
           print_graph(interpreter_.graph(), DumpFormat::Text);
  }

 private:
  Interpreter interpreter_;
};

}  // namespace

std::unique_ptr<Executable> ReferenceBackend::lower(const Graph& graph, const CompileOptions& options) const {
  INGOT_CHECK(options.code_transformers.empty(),
              "Option 'code_transformers': the reference backend generates no code to transform (the CPU backend "
              "and the NumPy, PyTorch, JAX and MLX backends do)");
  return std::make_unique<ReferenceExecutable>(graph);
}

}  // namespace ingot
