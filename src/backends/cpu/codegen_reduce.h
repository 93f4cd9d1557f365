// Code generation for reductions over any set of axes (prelude: ig_reduce_axes), the case
// ig_reduce's [outer, n, inner] form does not cover: reduced axes that are not one contiguous
// block, as gradient rules produce when they sum a broadcast operand's gradient back to its shape.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot::cpu {

// Per input axis, whether sum / mean / max / min node `n` reduces it (its `axes`; none given:
// all). Nullopt when the axes are out of range or repeated.
std::optional<std::vector<bool>> reduced_axes(const Node& n, int rank);

// Kernel body statements computing y from x0 with ig_reduce_axes. `dims`: the input's dims as
// C++ expressions (size-1 dims may be given as "1"); kind: 0 sum, 1 mean, 2 max, 3 min.
std::string reduce_axes_body(int kind, const std::string& op, const std::string& tx, const std::string& ty,
                             const std::vector<std::string>& dims, const std::vector<bool>& reduced);

// Kernel body statements computing moments' mean (y) and variance (y1) from x0 over any set of
// axes with ig_moments_axes.
std::string moments_axes_body(const std::vector<std::string>& dims, const std::vector<bool>& reduced);

}  // namespace ingot::cpu
