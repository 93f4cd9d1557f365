// Fusion decisions: which nodes a backend runs as one kernel. The fusion pass (issue: graph
// optimizations) produces this plan from each op's FusionClass; backends consume it and never
// decide fusion themselves. Every node belongs to exactly one group; groups are in a valid
// execution order.
#pragma once

#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot {

enum class GroupKind {
  Elementwise,  // a chain/DAG of elementwise ops (with broadcasting): one loop nest
  Reduction,    // elementwise producers feeding one reduction: one loop nest reducing
  RowKernel,    // softmax / log_softmax / layer_norm / batch_norm (+ elementwise epilogue; a
                // layer_norm / rms_norm also an elementwise prologue computing its input)
  Dense,        // one matmul / conv2d plus an elementwise epilogue (bias, activation, residual)
  Injective,    // a data-movement op (reshape, transpose, slice, concat, gather, ...)
  Opaque,       // anything else, run on its own
};
std::string_view group_kind_name(GroupKind k);

struct FusionGroup {
  GroupKind kind = GroupKind::Opaque;
  std::vector<NodeId> nodes;   // in topological order
  NodeId anchor = -1;          // the reduction / row / dense node, -1 for Elementwise groups
  std::vector<ValueId> inputs;   // values read by the group and produced outside it (or leaves)
  std::vector<ValueId> outputs;  // values produced here and read outside it (or graph outputs)
};

struct FusionPlan {
  std::vector<FusionGroup> groups;
  std::string str(const Graph& g) const;  // one line per group, for verbose and tests
};

// One group per node: what a backend does with fusion turned off.
FusionPlan unfused_plan(const Graph& g);

// The fusion decisions for `g` (src/compiler/passes/fusion.cpp).
FusionPlan plan_fusion(const Graph& g);

// Fills each group's inputs/outputs from its nodes (shared by every plan builder).
void compute_group_io(const Graph& g, FusionPlan& plan);

}  // namespace ingot
