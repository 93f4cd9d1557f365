// The joint forward + backward graph behind PhysicalModel::evaluate(params, inputs,
// output_gradients): the "autodiff" stage (append_backward over the inferred, not yet optimized
// graph), then the same optimize and lower stages as compile, each printed with `verbose`.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ingot/compile.h"
#include "ingot/graph.h"

namespace ingot {

struct JointGraph {
  Graph graph;  // optimized; outputs: the forward outputs, then one gradient per differentiated value
  std::shared_ptr<const Executable> executable;
  std::map<std::string, std::string> cotangent_inputs;  // input leaf name -> the output it seeds
  std::map<std::string, std::string> gradient_outputs;  // output name -> the value it differentiates
};

// `forward`: the shape- and type-inferred graph before optimization. `seeded`: output names
// that get a cotangent input each. `wrt`: names of the leaves to differentiate.
JointGraph build_joint_graph(const Graph& forward, const std::vector<std::string>& seeded,
                             const std::vector<std::string>& wrt, const Backend& backend,
                             const CompileOptions& options);

}  // namespace ingot
