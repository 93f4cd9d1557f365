// Counter-based random numbers: value i of a stream depends only on (seed, i), so every
// backend, thread split and evaluation order produces the same numbers.
#pragma once

#include <cmath>
#include <cstdint>

namespace ingot::rng {

inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t bits(uint64_t seed, uint64_t i) { return mix64(mix64(seed) ^ i); }

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
inline float uniform01(uint64_t seed, uint64_t i) {
  return static_cast<float>(bits(seed, i) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller over the counter pair (2i, 2i + 1).
inline double normal(uint64_t seed, uint64_t i) {
  double u1 = (static_cast<double>(bits(seed, 2 * i) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = static_cast<double>(bits(seed, 2 * i + 1) >> 11) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ingot::rng
