// What the op families' fuzz samplers share (OpDef::sample_attrs and sample_operands, for the
// differential fuzzer in fuzz/programs.h): a small seeded generator and the usual draws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "ingot/tensor.h"

namespace ingot::ops {

// SplitMix64: enough randomness for attributes, and the same draws on every platform.
struct Draw {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  bool coin() { return next() & 1; }
  // An axis of a rank-r value, negative half the time.
  int64_t axis(int r) {
    const int64_t a = below(r);
    return coin() ? a - r : a;
  }
  // A non-empty set of distinct axes (empty, meaning all, one time in four).
  std::vector<int64_t> axes(int r) {
    std::vector<int64_t> out;
    if (r == 0 || below(4) == 0) return out;
    for (int a = 0; a < r; ++a)
      if (coin()) out.push_back(coin() ? a - r : a);
    if (out.empty()) out.push_back(below(r));
    return out;
  }
  std::vector<int64_t> permutation(int r) {
    std::vector<int64_t> p(static_cast<size_t>(r));
    std::iota(p.begin(), p.end(), 0);
    for (int i = r - 1; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(below(i + 1))]);
    return p;
  }
  // Float32 values uniform in [lo, hi) (operands an OperandSampler feeds).
  Tensor uniform(const Shape& shape, double lo, double hi) {
    Tensor t(DType::Float64, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<double>()[i] = lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
    return t.astype(DType::Float32);
  }
  // Int64 indices into a dim of `size`, negative (counted from the end) one time in four;
  // repeats are likely, as scatters must add them up.
  Tensor indices(const Shape& shape, int64_t size) {
    Tensor t(DType::Int64, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t k = below(size);
      t.data<int64_t>()[i] = below(4) == 0 ? k - size : k;
    }
    return t;
  }
};

}  // namespace ingot::ops
