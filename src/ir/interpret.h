// Running a graph with the reference kernels, node by node: the reference backend's executor,
// and how control-flow ops (src/ops/control_flow.cpp) evaluate their subgraphs. It favours
// obviously-correct over clever, since it is the oracle every other backend is checked against.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ingot/tensor.h"

namespace ingot {

class Interpreter {
 public:
  // `profiled`: each node runs inside a profile scope ("n3_matmul", backend "reference").
  explicit Interpreter(Graph g, bool profiled = false);

  // The graph's non-constant leaves (inputs, then parameters, in leaf order) as `inputs`; returns
  // the graph outputs in order. Each intermediate is freed right after its last use.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;

  const Graph& graph() const { return graph_; }
  size_t num_inputs() const { return inputs_.size(); }

 private:
  Graph graph_;
  bool profiled_;
  std::vector<std::string> profile_names_;  // "n3_matmul": one profile row per node
  std::vector<ValueId> inputs_;
  std::vector<NodeId> last_use_;
};

}  // namespace ingot
