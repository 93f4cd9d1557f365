// What the oneDNN-backed host kernels share (dnnl_conv.cpp, dnnl_conv_backward.cpp). Include only
// where INGOT_HAVE_DNNL is defined.
#pragma once

#include <cstdlib>
#include <new>

#include <oneapi/dnnl/dnnl.hpp>

namespace ingot::cpu {

// The process's CPU engine (oneDNN engines are thread-safe and cheap to share).
const dnnl::engine& cpu_engine();

// A 64-byte aligned temporary for one call (empty when bytes == 0): reordered operands and
// per-call scratchpads, so concurrent calls never share memory.
struct Scratch {
  void* p = nullptr;
  explicit Scratch(size_t bytes) {
    if (bytes == 0) return;
    p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
  }
  ~Scratch() { std::free(p); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

}  // namespace ingot::cpu
