// Writes a new value into a tensor the user holds: into its buffer when the layout allows (so
// every alias of it sees the update), else by replacing the handle.
#pragma once

#include <cstring>

#include "ingot/tensor.h"

namespace ingot::train {

inline void write_back(Tensor& dst, const Tensor& src) {
  if (dst.defined() && dst.is_contiguous() && dst.dtype() == src.dtype() && dst.shape() == src.shape()) {
    const Tensor s = src.contiguous();
    if (!s.shares_storage(dst)) std::memcpy(dst.raw_data(), s.raw_data(), s.nbytes());
    return;
  }
  dst = src;
}

}  // namespace ingot::train
