// What the op families' attribute samplers share (OpDef::sample_attrs, for the differential
// fuzzer in fuzz/programs.h): a small seeded generator and the usual draws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

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
};

}  // namespace ingot::ops
