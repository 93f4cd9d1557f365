// Writes a new value into a tensor the user holds: into its buffer when the layout allows (so
// every alias of it sees the update), else by replacing the handle.
#pragma once

#include <cstring>

#include "ingot/tensor.h"

namespace ingot {

// True when `dst`'s own buffer can receive a value of `src`'s dtype and shape.
inline bool writable_in_place(const Tensor& dst, DType dtype, const Shape& shape) {
  return dst.defined() && dst.is_contiguous() && dst.dtype() == dtype && dst.shape() == shape;
}

inline void write_back(Tensor& dst, const Tensor& src) {
  if (writable_in_place(dst, src.dtype(), src.shape())) {
    const Tensor s = src.contiguous();
    if (s.raw_data() != dst.raw_data()) std::memcpy(dst.raw_data(), s.raw_data(), s.nbytes());
    return;
  }
  dst = src;
}

}  // namespace ingot
