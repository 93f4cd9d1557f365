// What the oneDNN-backed host kernels share (dnnl_conv.cpp, dnnl_conv_backward.cpp, dnnl_gemm.cpp). Include only
// where INGOT_HAVE_DNNL is defined.
#pragma once

#include <algorithm>
#include <memory>

#include <oneapi/dnnl/dnnl.hpp>

#include "backends/cpu/dnnl_conv.h"
#include "core/buffer_cache.h"

namespace ingot::cpu {

// The process's CPU engine (oneDNN engines are thread-safe and cheap to share).
const dnnl::engine& cpu_engine();

// A 64-byte aligned temporary for one call (empty when bytes == 0): reordered operands and
// per-call scratchpads, so concurrent calls never share memory. From the buffer cache: a
// training step's reordered activations are tens of MB per call, and fresh pages cost more in
// faults than the reorder itself (30 ms against 3 for a 59 MB gradient, measured).
struct Scratch {
  void* p = nullptr;
  explicit Scratch(size_t bytes) {
    if (bytes == 0) return;
    storage_ = allocate_buffer(bytes);
    p = storage_.get();
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

 private:
  std::shared_ptr<void> storage_;
};

// A convolution's geometry as oneDNN's forward and backward descriptors take it.
struct DnnlConvDims {
  dnnl::memory::dims src, dst, wei, strides, dilates, pad_l, pad_r;
};

inline DnnlConvDims dnnl_conv_dims(const ConvSpec& s) {
  const int64_t g = s.groups;
  DnnlConvDims d;
  d.src = {s.n, s.cin, s.h, s.w};
  d.dst = {s.n, s.cout, s.oh, s.ow};
  d.wei = g > 1 ? dnnl::memory::dims{g, s.cout / g, s.cin / g, s.kh, s.kw}
                : dnnl::memory::dims{s.cout, s.cin, s.kh, s.kw};
  // oneDNN counts dilation from 0 and wants a right padding that yields oh x ow by its floor
  // division: where the last window ends, or 0 when the stride drops trailing input rows
  // (conv_geometry_fits admits fewer than `stride` of them).
  d.strides = {s.sh, s.sw};
  d.dilates = {s.dh - 1, s.dw - 1};
  d.pad_l = {s.ph, s.pw};
  d.pad_r = {std::max<int64_t>(0, (s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.ph),
             std::max<int64_t>(0, (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pw)};
  return d;
}

}  // namespace ingot::cpu
