// The slice op's attributes and its NumPy bounds (src/ops/movement.cpp defines them), for the
// code that must read a slice exactly as the reference kernel does (the CPU backend's slices read
// in place).
#pragma once

#include <cstdint>
#include <vector>

#include "ingot/graph.h"

namespace ingot::ops {

// The sliced axes (normalized, each once) with their starts, ends and steps; throws an
// ingot::Error for invalid attributes.
struct SliceSpec {
  std::vector<int> axes;
  std::vector<int64_t> starts, ends, steps;
};
SliceSpec slice_spec(const Attrs& attrs, int rank);

// NumPy's slice [start:end:step] of a dim of size d: its first index and its length (negative
// indices count from the end, both bounds clamp to the dim; an empty slice is {0, 0}).
struct SliceRange {
  int64_t start, length;
};
SliceRange slice_range(int64_t start, int64_t end, int64_t step, int64_t d);

}  // namespace ingot::ops
