// The joint forward + backward graph behind PhysicalModel::evaluate(params, inputs,
// output_gradients): the "autodiff" stage (append_backward over the inferred, not yet optimized
// graph), then the same optimize and lower stages as compile, each printed with `verbose`.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ingot/compile.h"
#include "compiler/checkpointing.h"
#include "compiler/memory_plan.h"
#include "ingot/graph.h"

namespace ingot {

struct JointGraph {
  Graph graph;  // optimized; outputs: the forward outputs, then one gradient per differentiated value
  std::shared_ptr<const Executable> executable;
  std::map<std::string, std::string> cotangent_inputs;  // input leaf name -> the output it seeds
  std::map<std::string, std::string> gradient_outputs;  // output name -> the value it differentiates
  std::shared_ptr<const MemoryPlan> memory_plan;         // of the optimized joint graph
  // With gradient_checkpointing: what it did, and the plan of the same graph without it.
  CheckpointReport checkpoint;
  std::shared_ptr<const MemoryPlan> plain_memory_plan;
  int64_t arena_bytes = 0, plain_arena_bytes = 0;  // Backend::arena_bytes of the graph and of the plain one
};

// Its planned peaks with and without checkpointing (PhysicalModel and TrainStep report them).
GradientMemory joint_memory(const JointGraph& joint);

// Grows the joint graph after autodiff and before the optimize stage (the compiled training step
// appends its optimizer update here, src/train/train_step.cpp), printed as stage `stage`.
struct JointGraphExtension {
  std::string stage;
  std::function<void(JointGraph&, const std::function<void(const std::string&)>& note)> fn;
};

// `forward`: the shape- and type-inferred graph before optimization. `seeded`: output names
// that get a cotangent input each. `wrt`: names of the leaves to differentiate.
JointGraph build_joint_graph(const Graph& forward, const std::vector<std::string>& seeded,
                             const std::vector<std::string>& wrt, const Backend& backend,
                             const CompileOptions& options, const JointGraphExtension& extend = {});

// The front half of compile without the optimize stage: flattened, resolved, shape- and
// type-inferred and verified (what autodiff differentiates and TrainModel extends).
Graph build_inferred_graph(const Model& model, const CompileOptions& options);
// The back half of compile over such a graph: optimize, memory planning, lower, PhysicalModel.
PhysicalModel compile_inferred(Graph inferred, const Backend& backend, const CompileOptions& options);

}  // namespace ingot
