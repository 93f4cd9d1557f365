// Helpers shared by the reduce family's files (reduce.cpp: axis reductions and softmax;
// normalization.cpp: layer_norm, rms_norm, batch_norm): the kernels' dtype check, axis
// attributes and row splits.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ingot/error.h"
#include "ingot/graph.h"
#include "ingot/tensor.h"
#include "ir/op_registry.h"

namespace ingot::ops {

// The kernel asks the op's own dtype rule for its output dtypes, so a kernel can never disagree
// with type inference and rejects exactly what the rule rejects. Checks the arity first, so
// neither indexes past the inputs it was given.
inline std::vector<DType> output_dtypes(const Node& n, std::span<const Tensor> inputs) {
  const OpDef& def = get_op(n.op);
  const auto count = static_cast<int>(inputs.size());
  INGOT_CHECK(count >= def.min_inputs && count <= def.max_inputs, n.op, ": expects ",
              def.min_inputs,
              def.min_inputs == def.max_inputs ? "" : " to " + std::to_string(def.max_inputs),
              " inputs, got ", count);
  std::vector<DType> in, out(static_cast<size_t>(def.num_outputs), DType::Float32);
  for (const Tensor& t : inputs) in.push_back(t.dtype());
  def.dtype(n, in, out);
  return out;
}

inline int checked_axis(const Node& n, int64_t axis, int rank) {
  INGOT_CHECK(axis >= -rank && axis < rank, n.op, ": axis ", axis, " out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// The normalized `axis` attribute; softmax and layer_norm default to -1, argmax requires it.
inline int axis_attr(const Node& n, int rank) {
  return checked_axis(n, n.attrs.get_int("axis", -1), rank);
}

// Sizes of the dims before `axis`, at it, and after it (the row layout of a per-axis kernel).
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit split_at(const Shape& s, int axis) {
  AxisSplit r;
  for (int d = 0; d < static_cast<int>(s.size()); ++d)
    (d < axis ? r.outer : d == axis ? r.n : r.inner) *= s[static_cast<size_t>(d)];
  return r;
}

inline void require_float(const Node& n, DType t, const char* what) {
  INGOT_CHECK(is_floating(t), n.op, ": ", what, " must be floating point, got ", dtype_name(t));
}

}  // namespace ingot::ops
