// What the gradient ops of movement.cpp and indexing.cpp share: the rule that shapes a result
// like one of its operands, and the scatter of updates into zeros, summed in double.
#pragma once

#include <cstdint>

#include "ingot/tensor.h"
#include "ir/op_registry.h"

namespace ingot::ops {

// out takes the shape of input `like_index` (a value read only for its shape).
template <int kLikeIndex>
inline void like_shape(ShapeInfer& s) {
  if (s.has_rank(s.in(kLikeIndex))) s.set_dims(s.out(), s.dims(s.in(kLikeIndex)));
}

// out = zeros shaped like in[1] (or `like`), then out[at(j)] += updates[j] for each element j
// of `updates`, accumulating in double so repeated targets add up exactly once rounded.
template <class At>
inline void scatter_into(const Tensor& updates, const Shape& shape, Tensor& out, At at) {
  Tensor acc(DType::Float64, shape);
  double* pa = acc.data<double>();
  const Tensor u = updates.astype(DType::Float64);
  const double* pu = u.data<double>();
  for (int64_t j = 0, n = u.numel(); j < n; ++j) pa[at(j)] += pu[j];
  out = acc.astype(updates.dtype());
}

}  // namespace ingot::ops
