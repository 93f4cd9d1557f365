// The hot path every eval() goes through: eager on the reference backend, counting graphs by
// their structural key and switching a graph to a compiled executable once it is hot.
#pragma once

#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ingot/tensor.h"

namespace ingot::detail {

// Runs `graph` (inputs in graph.leaves() order, outputs in graph.outputs() order). `region`
// names the CompileRegion whose unit this is ("" for none).
std::vector<Tensor> hot_path_run(const Graph& graph, const std::vector<Tensor>& inputs, const std::string& region);

}  // namespace ingot::detail
