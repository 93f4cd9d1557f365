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
  // unplanned_bytes, per-tensor offsets. Not planned (planned == false, with a reason) for symbolic
  // shapes. Include "compiler/memory_plan.h" for the type. Backends consume it; the reference
  // backend allocates per kernel and does not execute out of the arena.
  const MemoryPlan& memory_plan() const;
  void set_memory_plan(MemoryPlan plan);
  std::string summary() const;

  // Parameters in safetensors format; load checks names, dtypes and shapes against the model.
  void save_params(const std::string& path, const TensorMap& params) const;
  TensorMap load_params(const std::string& path) const;

 private:
  const Executable& executable() const;
  std::vector<ValueId> run_leaves() const;  // inputs and parameters, in executable order

  Graph graph_;
  std::shared_ptr<const Backend> backend_;
  std::shared_ptr<const CompileOptions> options_;
  mutable std::shared_ptr<const Executable> executable_;
  std::shared_ptr<const MemoryPlan> memory_plan_;  // lowered lazily when jit = false
};

}  // namespace ingot
