// The 2-D window arithmetic conv2d (linalg.cpp) and the pools (pool.cpp) share: [h, w]
// attributes, a window's extent and output size, and the shape rule that applies it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/op_registry.h"
#include "ops/kernel_util.h"

namespace ingot::ops {

using Pair = std::array<int64_t, 2>;

// An attribute of two ints [h, w] (a single int applies to both), each at least `min`.
inline Pair pair_attr(const Node& n, const char* key, Pair fallback, int64_t min) {
  if (!n.attrs.has(key)) return fallback;
  const std::vector<int64_t> v = n.attrs.get_ints(key);
  INGOT_CHECK(v.size() == 1 || v.size() == 2, n.op, ": attribute '", key,
              "' needs 2 values [h, w], got ", v.size());
  const Pair p{v[0], v.back()};
  INGOT_CHECK(p[0] >= min && p[1] >= min, n.op, ": attribute '", key, "' must be >= ", min,
              ", got [", p[0], ", ", p[1], "]");
  return p;
}

struct Window {
  Pair kernel{1, 1}, stride{1, 1}, pad{0, 0}, dilation{1, 1};
  bool ceil = false;  // max_pool2d's ceil_mode

  int64_t extent(int i) const { return dilation[i] * (kernel[i] - 1) + 1; }
  // Output size along spatial axis i (0 = H, 1 = W), conv_out_size's rule (ceil_mode's last
  // window may run past the padded end); fails when the window does not fit.
  int64_t out_size(int64_t in, int i, const std::string& op) const {
    INGOT_CHECK(in + 2 * pad[i] >= extent(i), op, ": kernel extent ", extent(i),
                " is larger than the padded input ", in + 2 * pad[i], " along ", i ? "W" : "H");
    return conv_out_size(in, kernel[i], stride[i], pad[i], dilation[i], ceil);
  }
  bool is_identity(int i) const { return extent(i) == 1 && stride[i] == 1 && pad[i] == 0; }
};

// Output spatial dims from input dims: computed when the sizes are known, the input dim itself
// for a 1x1 stride-1 unpadded window, else left unknown.
inline void window_shape(ShapeInfer& s, const Window& w, ValueId x, ValueId y) {
  for (int i = 0; i < 2; ++i) {
    const DimVar in = s.dim(x, 2 + i), out = s.dim(y, 2 + i);
    if (auto h = s.value(in)) s.bind(out, or_fail(s, [&] { return w.out_size(*h, i, s.node().op); }));
    else if (w.is_identity(i)) s.unify(out, in);
  }
}

// Returns false (rank not known yet) or fails unless `v` has rank `r`.
inline bool expect_rank(ShapeInfer& s, ValueId v, int r, const char* what) {
  if (!s.has_rank(v)) return false;
  if (s.rank(v) != r)
    s.fail(s.node().op + " expects " + what + " of rank " + std::to_string(r) + ", got rank " +
           std::to_string(s.rank(v)));
  return true;
}

}  // namespace ingot::ops
