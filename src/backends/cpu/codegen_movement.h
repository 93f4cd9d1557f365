// Code generation for the index and slice movement ops the prelude's movement kernels run
// (prelude_movement.cpp): slice with any axes and steps, slice_scatter, concat along any axis,
// concat_part, take_along_axis, scatter_add and index_add. They are what gradient rules emit
// for slicing, concatenation, embedding lookups and class picks, so a training step's backward
// graph runs natively too.
#pragma once

#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot::cpu {

// The fast special cases, memcpy's of contiguous blocks: a slice of leading rows (axis 0, start >=
// 0, step 1, the row count known) and a concat along axis 0 of static inputs.
bool leading_rows_slice(const Graph& g, const Node& n);
bool leading_blocks_concat(const Graph& g, const Node& n);

// Whether node `n` is one of these ops in a form the kernels take (ranks <= 16, one element type
// in and out, integer indices, float32 / float64 for the scatters).
bool movement_native(const Graph& g, const Node& n);

// Kernel body statements for `n` (movement_native), reading x0, x1, ... and writing y. `in_dims`:
// each input's dims as C++ expressions; `out_dims`: the output's; `ctype`: the output's C++ type.
std::string movement_body(const Node& n, const std::vector<std::vector<std::string>>& in_dims,
                          const std::vector<std::string>& out_dims, const std::string& ctype);

}  // namespace ingot::cpu
