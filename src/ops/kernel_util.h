// Shared pieces of reference kernels and shape rules: broadcasting, axis handling, conv sizes,
// and typed dispatch. Kept header-only so kernels inline them.
#pragma once

#include <algorithm>
#include <array>
#include <tuple>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ingot/error.h"
#include "ingot/graph.h"
#include "ingot/tensor.h"

namespace ingot::ops {

// float for Half/BFloat16 (compute type), the type itself otherwise.
template <class T>
using compute_t = std::conditional_t<std::is_class_v<T>, float, T>;

inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast") {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    INGOT_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", to_string(a), " and ",
                to_string(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides (in elements) to read a contiguous tensor of shape `in` as if broadcast to `out`:
// broadcast dimensions get stride 0.
inline Strides broadcast_strides(const Shape& in, const Shape& out) {
  Strides s(out.size(), 0);
  Strides cs = contiguous_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

// Visits every element of `shape` in row-major order with the matching offsets of N operands
// given by their strides: f(out_index, offsets[0], ..., offsets[N-1]). The innermost dimension
// runs as a tight loop.
template <size_t N, class F>
void for_each_strided(const Shape& shape, const std::array<Strides, N>& strides, F&& f) {
  const int64_t total = numel(shape);
  if (total == 0) return;
  const int r = static_cast<int>(shape.size());
  if (r == 0) {
    std::apply([&](auto... z) { f(int64_t{0}, z...); }, std::array<int64_t, N>{});
    return;
  }
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> off{};
  const int64_t inner = shape[r - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][r - 1];
  for (int64_t base = 0; base < total; base += inner) {
    std::array<int64_t, N> o = off;
    for (int64_t j = 0; j < inner; ++j) {
      std::apply([&](auto... z) { f(base + j, z...); }, o);
      for (size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

inline int normalize_axis(int64_t axis, int rank, const char* op) {
  INGOT_CHECK(axis >= -rank && axis < std::max(rank, 1), op, ": axis ", axis,
              " out of range for rank ", rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Sorted, de-duplicated, non-negative axes; empty `axes` means all axes.
inline std::vector<int> normalize_axes(const std::vector<int64_t>& axes, int rank, const char* op) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  INGOT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": repeated axis");
  return out;
}

// Output size of a convolution/pooling window along one dimension (0 when it does not fit).
// ceil: max_pool2d's ceil_mode, PyTorch's and ONNX's rule: one more window where the floor rule
// stops short of the padded end, unless it would start in the end padding (so every window
// starts inside the input or its start padding and holds an input element).
inline int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                             bool ceil = false) {
  const int64_t eff = dilation * (kernel - 1) + 1;
  const int64_t span = in + 2 * pad - eff;
  if (span < 0) return 0;
  const int64_t floor = span / stride + 1;
  return ceil && span % stride != 0 && floor * stride < in + pad ? floor + 1 : floor;
}

// Single-dtype dtype rules shared by families.
inline void dtype_same_as_input(const Node&, std::span<const DType> in, std::span<DType> out) {
  for (DType& o : out) o = in[0];
}

// True for the floating storage types, Half and BFloat16 included.
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_class_v<T>;

// Runs f() inside a shape rule `s` (a ShapeInfer), turning an ingot::Error it throws (say from
// attribute checks shared with the kernel) into s.fail(...), which names the node.
template <class Infer, class F>
auto or_fail(Infer& s, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    s.fail(e.what());
  }
  __builtin_unreachable();  // GCC does not see [[noreturn]] through the virtual fail()
}

}  // namespace ingot::ops
