// Reverse-mode automatic differentiation as a graph transformation.
//
// append_backward grows a shape- and type-inferred graph by its backward graph: it walks the
// nodes in reverse, calls each op's gradient rule (OpDef::vjp, beside the op in
// src/ops/<family>.cpp) and adds up the cotangents of values read more than once. The backward
// nodes land after the forward ones in the same graph, so the passes, the fusion plan and the
// memory planner see forward and backward together.
//
//   Graph g = ...;                                   // inferred: every value has shape and dtype
//   ValueId seed = g.add_input("d_loss");            // the cotangent of `loss`, shaped like it
//   g.value(seed).shape = g.value(loss).shape; g.value(seed).shape_known = true;
//   g.value(seed).dtype = g.value(loss).dtype;
//   std::vector<ValueId> grads = append_backward(g, {{loss, seed}}, {w, b});
//   g.set_output("grad_w", grads[0]);
//
// Only what lies on a path from a `wrt` value to a seeded output is differentiated, and only
// floating-point values carry gradients (integer and bool values stop them). A `wrt` value no
// path connects gets zeros of its shape. Crossing an op without a gradient rule (and not marked
// `no_gradient`) is an ingot::Error naming the op and its scope.
#pragma once

#include <utility>
#include <vector>

#include "ingot/graph.h"

namespace ingot {

// seeds: (forward value, its cotangent: a value already in g with that value's shape); the
// same value may be seeded twice (the cotangents add). Returns one gradient per `wrt` entry,
// shaped and typed like it.
std::vector<ValueId> append_backward(Graph& g, const std::vector<std::pair<ValueId, ValueId>>& seeds,
                                     const std::vector<ValueId>& wrt);

}  // namespace ingot
