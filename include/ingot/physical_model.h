// PhysicalModel: what compile returns. A flat, typed, shape-checked graph plus the backend's
// executable, with named inputs, parameters and outputs.
//
//   PhysicalModel pm = compile(model, ReferenceBackend(), opts);
//   TensorMap params = pm.randomize_params(/*seed=*/0);
//   TensorMap out = pm.evaluate(params, {{"input", x}});
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ingot/tensor.h"

namespace ingot {

using TensorMap = std::map<std::string, Tensor>;
class Executable;
class Backend;
struct CompileOptions;
struct MemoryPlan;  // src/compiler/memory_plan.h
struct JointGraph;  // src/compiler/gradient_pipeline.h

// Memory of a joint forward + backward graph (PhysicalModel::gradient_memory,
// TrainStep::gradient_memory); 0 bytes when not planned (symbolic shapes).
struct GradientMemory {
  int64_t planned_peak_bytes = 0;  // the compiler's memory plan
  // The same graph without gradient checkpointing (equal to planned_peak_bytes when the option is off).
  int64_t without_checkpointing_bytes = 0;
  int recomputed_nodes = 0;  // forward nodes duplicated into the backward graph
  // What the backend's executable allocates for intermediates (Backend::arena_bytes: the CPU
  // backend's arena; 0 for the reference backend), with and without checkpointing. The CPU
  // backend's own schedule and fusion make it differ from the plan.
  int64_t arena_bytes = 0;
  int64_t without_checkpointing_arena_bytes = 0;
};

// What evaluate returns when gradients are asked for.
struct Evaluation {
  TensorMap outputs;    // every output, as evaluate(params, inputs) gives them
  TensorMap gradients;  // one per gradient_names() entry, shaped and typed like that terminal
};

class PhysicalModel {
 public:
  PhysicalModel(Graph graph, std::shared_ptr<const Backend> backend,
                std::shared_ptr<const CompileOptions> options,
                std::shared_ptr<const Executable> executable);

  // Fresh parameters from each parameter's initializer, deterministic for a seed.
  TensorMap randomize_params(uint64_t seed = 0) const;
  // Runs the model. `params` holds every parameter; `inputs` every data input. Names, dtypes and
  // shapes are checked first and any mismatch is an ingot::Error naming the terminal.
  TensorMap evaluate(const TensorMap& params, const TensorMap& inputs = {}) const;
  // Runs the model and its backward pass: `output_gradients` maps output names to their
  // cotangents (dtype and shape of that output; `{{"loss", Tensor::scalar(1.0f)}}` for a scalar
  // loss), and the result holds the outputs and the gradient of the seeded outputs with respect
  // to every differentiable parameter and trainable input (gradient_names()). Outputs left out
  // of `output_gradients` contribute nothing. The joint forward + backward graph is built,
  // optimized and lowered on the first request for a set of seeded outputs, then cached, so
  // plain evaluate pays nothing for it. A model compiled with `inference = true` refuses.
  //
  //   Evaluation r = pm.evaluate(params, {{"input", x}}, {{"loss", Tensor::scalar(1.0f)}});
  //   Tensor dw = r.gradients.at("linear_0.weight");
  Evaluation evaluate(const TensorMap& params, const TensorMap& inputs,
                      const TensorMap& output_gradients) const;
  // Names of what gets a gradient: differentiable parameters and inputs named in
  // `trainable_keys`; never constants or `data_keys`.
  std::vector<std::string> gradient_names() const;
  // The optimized joint forward + backward graph for a set of seeded outputs (built on demand,
  // like evaluate); its gradient outputs are named "grad:<terminal>" and its cotangent inputs
  // "cotangent:<output>".
  const Graph& gradient_graph(const std::vector<std::string>& seeded_outputs) const;
  // The planned peak of that graph, with and without gradient checkpointing (compile options
  // gradient_checkpointing, checkpoint_segments).
  GradientMemory gradient_memory(const std::vector<std::string>& seeded_outputs) const;
  // Set by compile: the inferred graph before optimization, which autodiff differentiates.
  void set_differentiation_graph(Graph graph);
  // Set by compile: the model's inputs and parameters that optimization made unnecessary (a loop
  // that runs no iteration no longer reads its invariants). evaluate accepts and ignores them, so
  // the model's signature does not depend on what the optimizer could prove.
  void set_optimized_away(std::map<std::string, ValueKind> terminals);

  // Shapes and dtypes of every terminal (inputs, parameters, constants, outputs and named
  // intermediate wires) after inference; symbols stay symbols ("N").
  std::map<std::string, SymShape> get_shapes() const;
  std::map<std::string, DType> get_types() const;

  std::vector<std::string> input_names() const;      // run-time data inputs
  std::vector<std::string> parameter_names() const;  // trainable and non-trainable parameters
  std::vector<std::string> constant_names() const;
  std::vector<std::string> output_names() const;
  int64_t parameter_count() const;  // total elements of parameters with static shapes

  const Graph& graph() const { return graph_; }
  // The memory plan compile made (option memory_planning): planned_peak_bytes, lower_bound_bytes,
  // unplanned_bytes, per-tensor offsets. Not planned (planned == false, with a reason) for symbolic shapes
  // unless hints input_batch_size_range bounds the batch (then planned at its top: MemoryPlan::assumption).
  // Include "compiler/memory_plan.h". Backends consume it; the reference backend allocates per kernel, no arena.
  const MemoryPlan& memory_plan() const;
  void set_memory_plan(MemoryPlan plan);
  std::string summary() const;

  // Parameters in safetensors format; load checks names, dtypes and shapes against the model.
  void save_params(const std::string& path, const TensorMap& params) const;
  TensorMap load_params(const std::string& path) const;

 private:
  const Executable& executable() const;
  std::vector<ValueId> run_leaves() const;  // inputs and parameters, in executable order
  // Checks names, dtypes and shapes of params and inputs, binding symbols in `bound`.
  void check_arguments(const TensorMap& params, const TensorMap& inputs,
                       std::map<std::string, std::pair<int64_t, std::string>>& bound) const;
  const JointGraph& joint_graph(const std::vector<std::string>& seeded) const;
  const JointGraph& checked_joint_graph(const std::vector<std::string>& seeded_outputs) const;

  struct GradientCache;

  Graph graph_;
  std::shared_ptr<const Backend> backend_;
  std::shared_ptr<const CompileOptions> options_;
  mutable std::shared_ptr<const Executable> executable_;
  std::shared_ptr<const MemoryPlan> memory_plan_;  // lowered lazily when jit = false
  std::shared_ptr<GradientCache> gradients_;        // the graph autodiff reads + joint graphs built
  std::shared_ptr<const std::map<std::string, ValueKind>> optimized_away_;
};

}  // namespace ingot
