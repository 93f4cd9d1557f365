// The movement family: identity, reshape, transpose, broadcast_to, slice, concat and the ops
// their gradients need (see families.h; gather and the other index-driven ops are in
// indexing.cpp). Kernels move raw elements, so they dispatch on the element size, not the dtype.
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/gradient_util.h"
#include "ops/kernel_util.h"
#include "ops/slice_util.h"

namespace ingot::ops {
namespace {

// Calls f(U{}) with U an unsigned integer type as wide as one element of `t`.
template <class F>
void dispatch_width(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
  }
  INGOT_FAIL("unsupported element size ", dtype_size(t));
}

// out (contiguous, shape `shape`) = the elements of `in` at base + sum(index * strides).
void gather_strided(const Tensor& in, int64_t base, const Shape& shape, const Strides& strides,
                    Tensor& out) {
  dispatch_width(in.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U* src = static_cast<const U*>(in.raw_data()) + base;
    U* dst = static_cast<U*>(out.raw_data());
    for_each_strided<1>(shape, {strides}, [&](int64_t i, int64_t off) { dst[i] = src[off]; });
  });
}

std::string ints_str(const std::vector<int64_t>& v) { return to_string(Shape(v)); }

// --- identity --------------------------------------------------------------------------------

void identity_shape(ShapeInfer& s) { s.same_shape(s.in(0), s.out()); }

void identity_eval(const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  out[0] = in[0].clone();
}

// --- reshape ---------------------------------------------------------------------------------

std::vector<int64_t> reshape_target(const Attrs& attrs) {
  const std::vector<int64_t> shape = attrs.get_ints("shape");
  int inferred = 0;
  for (int64_t d : shape) {
    INGOT_CHECK(d >= -1, "reshape: invalid dimension ", d, " in shape ", ints_str(shape));
    inferred += d == -1;
  }
  INGOT_CHECK(inferred <= 1, "reshape: more than one -1 in shape ", ints_str(shape));
  return shape;
}

// The product of some dims: the known factors multiplied, and the unknown ones counted (the
// last one kept, for solving when it is the only one).
struct Product {
  int64_t known = 1;
  int unknowns = 0;
  DimVar unknown = -1;
};

Product product(const ShapeInfer& s, const std::vector<DimVar>& dims) {
  Product p;
  for (DimVar d : dims) {
    if (auto v = s.value(d)) {
      // Sizes come from files (a reshape target in an ONNX model): a product past int64 is an
      // error, not an undefined overflow (found by fuzz_onnx).
      int64_t next = 0;
      if (__builtin_mul_overflow(p.known, *v, &next))
        s.fail("the element count " + std::to_string(p.known) + " x " + std::to_string(*v) + " overflows int64");
      p.known = next;
    } else {
      ++p.unknowns;
      p.unknown = d;
    }
  }
  return p;
}

// Input and output element counts must agree. Dims copied by a 0 entry cancel out; a single
// remaining unknown dim (the -1, or an input dim) is solved for, and fully known sides must
// match. Anything else stays unknown until more is known.
void reshape_sizes(ShapeInfer& s, const std::vector<DimVar>& in, const std::vector<DimVar>& out,
                   bool cancelled_unknown) {
  const Product pi = product(s, in), po = product(s, out);
  // One unknown on each side with equal non-zero known factors: the unknowns are the same size,
  // so a symbol survives the reshape ([N] -> [-1, 1] gives [N, 1]).
  if (pi.unknowns == 1 && po.unknowns == 1 && pi.known == po.known && pi.known != 0)
    s.unify(pi.unknown, po.unknown);
  if (pi.unknowns + po.unknowns > 1) return;
  // Cancelling an unknown dim that may be 0 is only sound when neither side is already 0.
  if (cancelled_unknown && (pi.known == 0 || po.known == 0)) return;
  if (pi.unknowns + po.unknowns == 0) {
    if (pi.known != po.known)
      s.fail("cannot reshape " + std::to_string(pi.known) + " elements into " +
             std::to_string(po.known));
    return;
  }
  const Product& with = pi.unknowns ? pi : po;  // the side with the unknown factor
  const int64_t other = pi.unknowns ? po.known : pi.known;
  if (with.known == 0) {  // 0 * x = other
    if (other != 0)
      s.fail("cannot reshape: one side has a zero-size dimension, the other " +
             std::to_string(other) + " elements");
    if (po.unknowns) s.fail("cannot infer -1 in a reshape of zero elements");
    return;
  }
  if (other % with.known != 0)
    s.fail("cannot reshape: " + std::to_string(other) + " elements are not a multiple of " +
           std::to_string(with.known));
  s.bind(with.unknown, other / with.known);
}

void reshape_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), y = s.out();
  const std::vector<int64_t> target = or_fail(s, [&] { return reshape_target(s.attrs()); });
  const int ry = static_cast<int>(target.size());
  s.set_rank(y, ry);
  for (int i = 0; i < ry; ++i)
    if (target[i] > 0) s.bind(s.dim(y, i), target[i]);
  if (!s.has_rank(x)) return;
  const int rx = s.rank(x);
  std::vector<DimVar> in_rest, out_rest;  // the dims not copied by a 0 entry
  bool cancelled_unknown = false;
  for (int i = 0; i < ry; ++i) {
    if (target[i] != 0) {
      out_rest.push_back(s.dim(y, i));
      continue;
    }
    if (i >= rx)
      s.fail("shape " + ints_str(target) + " copies input dim " + std::to_string(i) +
             " (0) but the input has rank " + std::to_string(rx));
    s.unify(s.dim(y, i), s.dim(x, i));
    cancelled_unknown |= !s.value(s.dim(x, i));
  }
  for (int i = 0; i < rx; ++i)
    if (i >= ry || target[i] != 0) in_rest.push_back(s.dim(x, i));
  reshape_sizes(s, in_rest, out_rest, cancelled_unknown);
}

// The concrete output shape: 0 copies the input dim, -1 takes the remaining elements.
Shape reshape_resolve(const std::vector<int64_t>& target, const Shape& in) {
  Shape out(target.begin(), target.end());
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      INGOT_CHECK(i < in.size(), "reshape: shape ", ints_str(target), " copies input dim ", i,
                  " but the input is ", to_string(in));
      out[i] = in[i];
    }
    if (out[i] == -1) inferred = static_cast<int>(i);
    else known *= out[i];
  }
  const int64_t total = numel(in);
  if (inferred >= 0) {
    INGOT_CHECK(known != 0 && total % known == 0, "reshape: cannot reshape ", to_string(in),
                " into ", ints_str(target));
    out[static_cast<size_t>(inferred)] = total / known;
  }
  INGOT_CHECK(numel(out) == total, "reshape: cannot reshape ", to_string(in), " (", total,
              " elements) into ", to_string(out));
  return out;
}

void reshape_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  out[0] = in[0].clone().reshape(reshape_resolve(reshape_target(n.attrs), in[0].shape()));
}

// --- transpose -------------------------------------------------------------------------------

// The permutation (missing = reverse), validated against `rank`, negative entries normalized.
std::vector<int> transpose_perm(const Attrs& attrs, int rank) {
  std::vector<int> perm;
  if (!attrs.has("perm")) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  const std::vector<int64_t> p = attrs.get_ints("perm");
  INGOT_CHECK(static_cast<int>(p.size()) == rank, "transpose: perm ", ints_str(p), " has ",
              p.size(), " entries for an input of rank ", rank);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : p) {
    const int64_t ax = a < 0 ? a + rank : a;
    INGOT_CHECK(ax >= 0 && ax < rank && !seen[ax], "transpose: perm ", ints_str(p),
                " is not a permutation of the ", rank, " axes");
    seen[ax] = true;
    perm.push_back(static_cast<int>(ax));
  }
  return perm;
}

void transpose_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), y = s.out();
  if (s.attrs().has("perm"))
    s.set_rank(x, or_fail(s, [&] { return static_cast<int>(s.attrs().get_ints("perm").size()); }));
  if (!s.has_rank(x)) return;
  const std::vector<int> perm = or_fail(s, [&] { return transpose_perm(s.attrs(), s.rank(x)); });
  s.set_rank(y, s.rank(x));
  for (int i = 0; i < s.rank(x); ++i) s.unify(s.dim(y, i), s.dim(x, perm[i]));
}

void transpose_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::vector<int> perm = transpose_perm(n.attrs, in[0].rank());
  const Strides cs = contiguous_strides(in[0].shape());
  Shape shape;
  Strides strides;
  for (int p : perm) {
    shape.push_back(in[0].shape()[p]);
    strides.push_back(cs[p]);
  }
  out[0] = Tensor(in[0].dtype(), shape);
  gather_strided(in[0], 0, shape, strides, out[0]);
}

// --- broadcast_to ----------------------------------------------------------------------------

std::vector<int64_t> broadcast_target(const Attrs& attrs) {
  const std::vector<int64_t> shape = attrs.get_ints("shape");
  for (int64_t d : shape)
    INGOT_CHECK(d >= 0, "broadcast_to: negative dimension in shape ", ints_str(shape));
  return shape;
}

void broadcast_to_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), y = s.out();
  const std::vector<int64_t> target = or_fail(s, [&] { return broadcast_target(s.attrs()); });
  const int ry = static_cast<int>(target.size());
  s.set_rank(y, ry);
  for (int i = 0; i < ry; ++i) s.bind(s.dim(y, i), target[i]);
  if (!s.has_rank(x)) return;
  const int rx = s.rank(x);
  if (rx > ry)
    s.fail("cannot broadcast an input of rank " + std::to_string(rx) + " to " + ints_str(target));
  for (int i = 0; i < rx; ++i) {
    auto v = s.value(s.dim(x, i));
    if (v && *v != 1 && *v != target[ry - rx + i])
      s.fail("cannot broadcast input dim " + std::to_string(i) + " of size " + std::to_string(*v) +
             " to " + ints_str(target));
  }
}

void broadcast_to_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape target = broadcast_target(n.attrs);
  const Shape& xs = in[0].shape();
  INGOT_CHECK(xs.size() <= target.size(), "broadcast_to: cannot broadcast ", to_string(xs),
              " to ", to_string(target));
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t d = xs[i], t = target[target.size() - xs.size() + i];
    INGOT_CHECK(d == 1 || d == t, "broadcast_to: cannot broadcast ", to_string(xs), " to ",
                to_string(target));
  }
  out[0] = Tensor(in[0].dtype(), target);
  gather_strided(in[0], 0, target, broadcast_strides(xs, target), out[0]);
}

// --- slice -----------------------------------------------------------------------------------

}  // namespace

SliceSpec slice_spec(const Attrs& attrs, int rank) {
  SliceSpec s;
  s.starts = attrs.get_ints("starts");
  s.ends = attrs.get_ints("ends");
  const size_t n = s.starts.size();
  INGOT_CHECK(s.ends.size() == n, "slice: ", n, " starts but ", s.ends.size(), " ends");
  s.steps = attrs.get_ints("steps", std::vector<int64_t>(n, 1));
  INGOT_CHECK(s.steps.size() == n, "slice: ", n, " starts but ", s.steps.size(), " steps");
  for (int64_t step : s.steps)
    INGOT_CHECK(step != 0 && step != std::numeric_limits<int64_t>::min(), "slice: invalid step ",
                step);
  std::vector<int64_t> axes = attrs.get_ints("axes", {});
  if (!attrs.has("axes"))
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  INGOT_CHECK(axes.size() == n, "slice: ", n, " starts but ", axes.size(), " axes");
  // (normalize_axis lets axis 0 of a scalar through, for the ops that treat it as a vector;
  // a slice cannot: fuzz_onnx's Slice of a scalar indexed `seen` past its end)
  INGOT_CHECK(n == 0 || rank > 0, "slice: a scalar has no axis to slice");
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    const int ax = normalize_axis(a, rank, "slice");
    INGOT_CHECK(!seen[ax], "slice: axis ", a, " given twice");
    seen[ax] = true;
    s.axes.push_back(ax);
  }
  return s;
}

// NumPy's slice [start:end:step] of a dim of size d: negative indices count from the end and
// both bounds clamp to the dim.
SliceRange slice_range(int64_t start, int64_t end, int64_t step, int64_t d) {
  auto clamp = [d](int64_t i, int64_t lo, int64_t hi) { return std::clamp(i < 0 ? i + d : i, lo, hi); };
  const int64_t s = step > 0 ? clamp(start, 0, d) : clamp(start, -1, d - 1);
  const int64_t e = step > 0 ? clamp(end, 0, d) : clamp(end, -1, d - 1);
  const int64_t span = step > 0 ? e - s : s - e, stride = step > 0 ? step : -step;
  if (span <= 0) return {0, 0};
  return {s, (span + stride - 1) / stride};
}

namespace {

// True when the slice keeps the whole dim in order (or reversed, same size) whatever its size.
bool slice_keeps_size(int64_t start, int64_t end, int64_t step) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  return (step == 1 && start == 0 && end == kMax) ||
         (step == -1 && (start == -1 || start == kMax) && end == kMin);
}

void slice_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), y = s.out();
  if (!s.has_rank(x)) return;
  const int r = s.rank(x);
  const SliceSpec spec = or_fail(s, [&] { return slice_spec(s.attrs(), r); });
  s.set_rank(y, r);
  std::vector<bool> sliced(static_cast<size_t>(r), false);
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const int ax = spec.axes[i];
    sliced[ax] = true;
    const DimVar dx = s.dim(x, ax), dy = s.dim(y, ax);
    if (auto d = s.value(dx))
      s.bind(dy, slice_range(spec.starts[i], spec.ends[i], spec.steps[i], *d).length);
    else if (slice_keeps_size(spec.starts[i], spec.ends[i], spec.steps[i]))
      s.unify(dy, dx);
  }
  for (int ax = 0; ax < r; ++ax)
    if (!sliced[ax]) s.unify(s.dim(y, ax), s.dim(x, ax));
}

void slice_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const SliceSpec spec = slice_spec(n.attrs, in[0].rank());
  Shape shape = in[0].shape();
  Strides strides = contiguous_strides(shape);
  int64_t base = 0;
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const int ax = spec.axes[i];
    const SliceRange range = slice_range(spec.starts[i], spec.ends[i], spec.steps[i], shape[ax]);
    base += range.start * strides[ax];
    strides[ax] *= spec.steps[i];
    shape[ax] = range.length;
  }
  out[0] = Tensor(in[0].dtype(), shape);
  if (out[0].numel() > 0) gather_strided(in[0], base, shape, strides, out[0]);
}

// --- concat ----------------------------------------------------------------------------------

void concat_shape(ShapeInfer& s) {
  const ValueId y = s.out();
  const int n = s.num_inputs();
  std::optional<int> rank;
  for (int k = 0; k < n && !rank; ++k)
    if (s.has_rank(s.in(k))) rank = s.rank(s.in(k));
  if (!rank && s.has_rank(y)) rank = s.rank(y);
  if (!rank) return;
  const int r = *rank;
  const int ax = s.normalize_axis(or_fail(s, [&] { return s.attrs().get_int("axis"); }), r);
  s.set_rank(y, r);
  for (int k = 0; k < n; ++k) s.set_rank(s.in(k), r);
  for (int d = 0; d < r; ++d) {
    if (d == ax) continue;
    for (int k = 0; k < n; ++k) {
      auto v0 = s.value(s.dim(y, d)), vk = s.value(s.dim(s.in(k), d));
      if (v0 && vk && *v0 != *vk)
        s.fail("input " + std::to_string(k) + " has size " + std::to_string(*vk) + " in dim " +
               std::to_string(d) + " where the others have " + std::to_string(*v0) +
               " (only the concat axis " + std::to_string(ax) + " may differ)");
      s.unify(s.dim(s.in(k), d), s.dim(y, d));
    }
  }
  // Along the axis: the output is the sum; with the sum known, one unknown input is the rest.
  int64_t known = 0;
  int unknowns = 0;
  DimVar unknown = -1;
  for (int k = 0; k < n; ++k) {
    const DimVar d = s.dim(s.in(k), ax);
    if (auto v = s.value(d)) {
      known += *v;
    } else {
      ++unknowns;
      unknown = d;
    }
  }
  if (n == 1) {
    s.unify(s.dim(y, ax), s.dim(s.in(0), ax));
  } else if (unknowns == 0) {
    s.bind(s.dim(y, ax), known);
  } else if (auto total = s.value(s.dim(y, ax))) {
    if (*total < known)
      s.fail("the output has " + std::to_string(*total) + " along the concat axis but the inputs " +
             "already have " + std::to_string(known));
    if (unknowns == 1) s.bind(unknown, *total - known);
  }
}

void dtype_concat(const Node&, std::span<const DType> in, std::span<DType> out) {
  DType t = in[0];
  for (DType d : in) t = promote_types(t, d);
  out[0] = t;
}

void concat_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape& first = in[0].shape();
  const int r = static_cast<int>(first.size());
  INGOT_CHECK(r > 0, "concat: inputs must have rank >= 1");
  const int ax = normalize_axis(n.attrs.get_int("axis"), r, "concat");
  Shape shape = first;
  shape[ax] = 0;
  DType t = in[0].dtype();
  for (size_t k = 0; k < in.size(); ++k) {
    Shape s = in[k].shape();
    INGOT_CHECK(static_cast<int>(s.size()) == r, "concat: input ", k, " has shape ", to_string(s),
                " but input 0 has ", to_string(first));
    shape[ax] += s[ax];
    s[ax] = first[ax];
    INGOT_CHECK(s == first, "concat: input ", k, " has shape ", to_string(in[k].shape()),
                " but input 0 has ", to_string(first), "; only axis ", ax, " may differ");
    t = promote_types(t, in[k].dtype());
  }
  out[0] = Tensor(t, shape);
  // Each input contributes one contiguous block per index of the dims before the axis.
  const int64_t outer = numel(Shape(shape.begin(), shape.begin() + ax));
  const int64_t inner = numel(Shape(shape.begin() + ax + 1, shape.end())) *
                        static_cast<int64_t>(dtype_size(t));
  char* dst = static_cast<char*>(out[0].raw_data());
  const int64_t out_block = shape[ax] * inner;
  int64_t offset = 0;
  for (const Tensor& x : in) {
    const Tensor xt = x.dtype() == t ? x : x.astype(t);
    const char* src = static_cast<const char*>(xt.raw_data());
    const int64_t block = x.shape()[ax] * inner;
    for (int64_t o = 0; o < outer && block > 0; ++o)
      std::memcpy(dst + o * out_block + offset, src + o * block, static_cast<size_t>(block));
    offset += block;
  }
}

// --- ops for gradients: shapes read from a `like` operand at run time ------------------------

void broadcast_to_like_eval(const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape& xs = in[0].shape();
  const Shape& target = in[1].shape();
  INGOT_CHECK(broadcast_shapes(xs, target, "broadcast_to_like") == target,
              "broadcast_to_like: cannot broadcast ", to_string(xs), " to ", to_string(target));
  out[0] = Tensor(in[0].dtype(), target);
  gather_strided(in[0], 0, target, broadcast_strides(xs, target), out[0]);
}

void reshape_like_eval(const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  INGOT_CHECK(in[0].numel() == in[1].numel(), "reshape_like: cannot reshape ",
              to_string(in[0].shape()), " to ", to_string(in[1].shape()));
  out[0] = in[0].reshape(in[1].shape()).clone();
}

// Result positions of the inserted axes, sorted, for an input of rank r.
std::vector<int> expand_axes(const Attrs& attrs, int r) {
  const std::vector<int64_t> axes = attrs.get_ints("axes");
  const int ro = r + static_cast<int>(axes.size());
  std::vector<int> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, ro, "expand_dims"));
  std::sort(out.begin(), out.end());
  INGOT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "expand_dims: repeated axis");
  return out;
}

void expand_dims_shape(ShapeInfer& s) {
  if (!s.has_rank(s.in(0))) return;
  const std::vector<int> axes = or_fail(s, [&] { return expand_axes(s.attrs(), s.rank(s.in(0))); });
  std::vector<DimVar> dims = s.dims(s.in(0));
  s.set_rank(s.out(), static_cast<int>(dims.size() + axes.size()));
  for (int a : axes) dims.insert(dims.begin() + a, s.dim(s.out(), a));
  s.set_dims(s.out(), dims);
  for (int a : axes) s.bind(s.dim(s.out(), a), 1);
}

void expand_dims_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  Shape shape = in[0].shape();
  for (int a : expand_axes(n.attrs, in[0].rank())) shape.insert(shape.begin() + a, 1);
  out[0] = in[0].reshape(shape).clone();
}

void zeros_like_eval(const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  out[0] = Tensor(in[0].dtype(), in[0].shape());
}

// slice_scatter's result has `like`'s shape; its slice attributes are checked here, at type
// inference, rather than only by the kernel (a rule gap the program fuzzer reported).
void slice_scatter_shape(ShapeInfer& s) {
  like_shape<1>(s);
  if (s.has_rank(s.in(1))) or_fail(s, [&] { return slice_spec(s.attrs(), s.rank(s.in(1))); });
}

// slice_scatter(grad, like): zeros shaped like `like` with `grad` written where
// slice(like, attrs) reads: the gradient of slice.
void slice_scatter_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape& xs = in[1].shape();
  const SliceSpec spec = slice_spec(n.attrs, static_cast<int>(xs.size()));
  Shape shape = xs;
  Strides strides = contiguous_strides(xs);
  int64_t base = 0;
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const int ax = spec.axes[i];
    const SliceRange range = slice_range(spec.starts[i], spec.ends[i], spec.steps[i], xs[ax]);
    base += range.start * strides[ax];
    strides[ax] *= spec.steps[i];
    shape[ax] = range.length;
  }
  INGOT_CHECK(in[0].shape() == shape, "slice_scatter: the update has shape ", to_string(in[0].shape()),
              " but the slice of ", to_string(xs), " has shape ", to_string(shape));
  std::vector<int64_t> offsets(static_cast<size_t>(numel(shape)));
  for_each_strided<1>(shape, {strides}, [&](int64_t i, int64_t off) { offsets[i] = base + off; });
  scatter_into(in[0], xs, out[0], [&](int64_t j) { return offsets[j]; });
}

// concat_part(grad, x0, x1, ...) {axis, index}: the part of `grad` that concat(x0, x1, ...)
// took from x<index>: the gradient of concat for that input.
void concat_part_shape(ShapeInfer& s) {
  const int index = static_cast<int>(s.attrs().get_int("index"));
  if (index < 0 || index + 1 >= s.num_inputs()) s.fail("index " + std::to_string(index) + " out of range");
  if (s.has_rank(s.in(index + 1))) s.set_dims(s.out(), s.dims(s.in(index + 1)));
}

void concat_part_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const int64_t index = n.attrs.get_int("index");
  INGOT_CHECK(index >= 0 && index + 1 < static_cast<int64_t>(in.size()), "concat_part: index ",
              index, " out of range");
  const int ax = normalize_axis(n.attrs.get_int("axis"), in[0].rank(), "concat_part");
  int64_t start = 0;
  for (int64_t i = 1; i <= index; ++i) start += in[static_cast<size_t>(i)].dim(ax);
  const Shape& part = in[static_cast<size_t>(index + 1)].shape();
  INGOT_CHECK(static_cast<int>(part.size()) == in[0].rank() && start + part[ax] <= in[0].dim(ax),
              "concat_part: part ", to_string(part), " does not fit in ", to_string(in[0].shape()));
  const Strides strides = contiguous_strides(in[0].shape());
  out[0] = Tensor(in[0].dtype(), part);
  if (out[0].numel() > 0) gather_strided(in[0], start * strides[ax], part, strides, out[0]);
}

// --- gradient rules ---------------------------------------------------------------------------

using Ctx = VjpContext;

void identity_vjp(Ctx& c) { c.set_grad(0, c.grad_out()); }
void reshape_vjp(Ctx& c) { c.set_grad(0, c.reshape_like(c.grad_out(), c.in(0))); }
void transpose_vjp(Ctx& c) {
  const int r = c.rank(c.in(0));
  std::vector<int64_t> perm = c.attrs().get_ints("perm", {});
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<size_t>(normalize_axis(perm[i], r, "transpose"))] = static_cast<int64_t>(i);
  c.set_grad(0, c.op("transpose", {c.grad_out()}, {{"perm", inverse}}));
}
void broadcast_vjp(Ctx& c) { c.set_grad(0, c.sum_to_like(c.grad_out(), c.in(0))); }
void slice_vjp(Ctx& c) { c.set_grad(0, c.op("slice_scatter", {c.grad_out(), c.in(0)}, c.attrs())); }
void concat_vjp(Ctx& c) {
  std::vector<ValueId> ins{c.grad_out()};
  for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.in(i));
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.needs_grad(i)) continue;
    Attrs a{{"axis", c.attrs().get_int("axis")}, {"index", int64_t{i}}};
    c.set_grad(i, c.op("concat_part", ins, a));
  }
}
// The gradient ops' own rules (second derivatives, or gradients of graphs that use them).
void broadcast_to_like_vjp(Ctx& c) { c.set_grad(0, c.sum_to_like(c.grad_out(), c.in(0))); }
void slice_scatter_vjp(Ctx& c) { c.set_grad(0, c.op("slice", {c.grad_out()}, c.attrs())); }
void dtype_of_input0(const Node&, std::span<const DType> in, std::span<DType> out) { out[0] = in[0]; }
// The fuzzer's attributes (OpDef::sample_attrs) for the movement ops that need some.
Attrs sample_transpose(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  return {{"perm", d.permutation(static_cast<int>(in[0].size()))}};
}
// Flattened, two neighbouring dims merged, or a 1 inserted.
Attrs sample_reshape(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  std::vector<int64_t> s(in[0].begin(), in[0].end());
  const int64_t pick = d.below(3);
  if (pick == 0 || s.size() < 2) return {{"shape", std::vector<int64_t>{-1}}};
  if (pick == 1) {
    const size_t i = static_cast<size_t>(d.below(static_cast<int64_t>(s.size()) - 1));
    s[i] *= s[i + 1];
    s.erase(s.begin() + static_cast<long>(i) + 1);
  } else {
    s.insert(s.begin() + d.below(static_cast<int64_t>(s.size()) + 1), 1);
  }
  return {{"shape", s}};
}
Attrs sample_expand_dims(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  return {{"axes", std::vector<int64_t>{d.below(static_cast<int64_t>(in[0].size()) + 1)}}};
}
// A new leading dim of 2, and the 1s broadcast to 3.
Attrs sample_broadcast_to(std::span<const Shape> in, uint64_t) {
  std::vector<int64_t> s{2};
  for (int64_t v : in[0]) s.push_back(v == 1 ? 3 : v);
  return {{"shape", s}};
}
// One axis: [start, end) with step 1 or 2 (negative starts half the time).
Attrs sample_slice(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  const int r = static_cast<int>(in[0].size());
  if (r == 0) return {};
  const int64_t axis = d.below(r), size = in[0][static_cast<size_t>(axis)];
  const int64_t start = d.below(size), end = start + 1 + d.below(size - start);
  return {{"starts", std::vector<int64_t>{d.coin() ? start - size : start}},
          {"ends", std::vector<int64_t>{end}},
          {"axes", std::vector<int64_t>{axis}},
          {"steps", std::vector<int64_t>{1 + d.below(2)}}};
}
Attrs sample_concat(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  return {{"axis", d.below(static_cast<int64_t>(in[0].size()))}};
}

// The fuzzer's operands (OpDef::sample_operands) for the gradient ops that need an operand shaped
// to fit another.
// slice_scatter(grad, like) {slice}: a slice of `like` and an update of its shape.
SampledOperands sample_slice_scatter(std::span<const Shape> in, uint64_t seed) {
  if (in.size() < 2 || in[1].empty()) return {};
  ops::Draw d{seed + 1};
  SampledOperands out;
  out.attrs = sample_slice(in.subspan(1, 1), seed);
  Shape part = in[1];
  const SliceSpec spec = slice_spec(out.attrs, static_cast<int>(part.size()));
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const size_t axis = static_cast<size_t>(spec.axes[i]);
    part[axis] = slice_range(spec.starts[i], spec.ends[i], spec.steps[i], in[1][axis]).length;
  }
  out.operands = {in[0] == part ? std::nullopt : std::optional<Tensor>(d.uniform(part, -2.0, 2.0))};
  return out;
}

// concat_part(grad, x0, x1, ...) {axis, index}: parts that concatenate (drawn where they fit x0)
// and a gradient of the concatenation's shape.
SampledOperands sample_concat_part(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  if (in.size() < 2 || in[1].empty()) return {};
  const size_t r = in[1].size(), ax = static_cast<size_t>(d.below(static_cast<int64_t>(r)));
  SampledOperands out;
  out.operands.resize(in.size());
  Shape whole = in[1];
  for (size_t i = 2; i < in.size(); ++i) {
    bool fits = in[i].size() == r;
    for (size_t k = 0; fits && k < r; ++k) fits = k == ax || in[i][k] == in[1][k];
    Shape part = in[1];
    if (fits) part = in[i];
    else part[ax] = 1 + d.below(3);
    if (!fits) out.operands[i] = d.uniform(part, -2.0, 2.0);
    whole[ax] += part[ax];
  }
  if (in[0] != whole) out.operands[0] = d.uniform(whole, -2.0, 2.0);
  out.attrs = {{"axis", static_cast<int64_t>(ax)}, {"index", d.below(static_cast<int64_t>(in.size()) - 1)}};
  return out;
}

}  // namespace

void register_movement_ops() {
  auto add = [](const char* name, ShapeRule shape, DTypeRule dtype, Kernel eval, const char* doc,
                VjpRule vjp, int max_inputs = 1, int min_inputs = 1,
                FusionClass fusion = FusionClass::Injective) {
    register_op(OpDef{.name = name,
                      .min_inputs = min_inputs,
                      .max_inputs = max_inputs,
                      .fusion = fusion,
                      .shape = shape,
                      .dtype = dtype,
                      .eval = eval,
                      .doc = doc,
                      .vjp = vjp,
                      // Elementwise here: out[i] = x[broadcast i], read through the loop's strides.
                      .elementwise = fusion == FusionClass::Elementwise
                                         ? std::optional(ElementwiseForms{.kind = ElementwiseForms::Kind::Identity})
                                         : std::nullopt});
  };
  add("identity", identity_shape, dtype_same_as_input, identity_eval, "copy of the input", identity_vjp);
  add("reshape", reshape_shape, dtype_same_as_input, reshape_eval,
      "same elements, new shape {shape}: -1 inferred, 0 copies the input dim", reshape_vjp);
  add("transpose", transpose_shape, dtype_same_as_input, transpose_eval,
      "permutes dims by {perm} (default: reversed)", transpose_vjp);
  add("broadcast_to", broadcast_to_shape, dtype_same_as_input, broadcast_to_eval,
      "NumPy broadcast to {shape}", broadcast_vjp);
  add("slice", slice_shape, dtype_same_as_input, slice_eval,
      "NumPy slicing by {starts, ends, axes, steps}; ends clamp, negative indices from the end", slice_vjp);
  add("concat", concat_shape, dtype_concat, concat_eval,
      "joins inputs along {axis} (dtypes promoted)", concat_vjp, -1);
  // Ops that gradients need; `like` operands are read only for their shapes.
  // Elementwise: out[i] = x[broadcast i], so it fuses with the ops around it.
  add("broadcast_to_like", like_shape<1>, dtype_of_input0, broadcast_to_like_eval,
      "broadcast_to_like(x, like): x broadcast to like's shape", broadcast_to_like_vjp, 2, 2,
      FusionClass::Elementwise);
  add("reshape_like", like_shape<1>, dtype_of_input0, reshape_like_eval,
      "reshape_like(x, like): x's elements in like's shape", reshape_vjp, 2, 2);
  add("expand_dims", expand_dims_shape, dtype_of_input0, expand_dims_eval,
      "inserts size-1 dims at {axes} (positions in the result)", reshape_vjp);
  add("zeros_like", identity_shape, dtype_of_input0, zeros_like_eval, "zeros of x's shape and dtype", no_gradient);
  add("slice_scatter", slice_scatter_shape, dtype_of_input0, slice_scatter_eval,
      "slice_scatter(grad, like) {slice's attrs}: zeros like `like`, grad where slice reads", slice_scatter_vjp, 2, 2);
  add("concat_part", concat_part_shape, dtype_of_input0, concat_part_eval,
      "concat_part(grad, x0, x1, ...) {axis, index}: the part of grad concat took from x<index>", nullptr, -1, 2);
  set_attr_sampler("transpose", sample_transpose);
  set_attr_sampler("reshape", sample_reshape);
  set_attr_sampler("expand_dims", sample_expand_dims);
  set_attr_sampler("broadcast_to", sample_broadcast_to);
  set_attr_sampler("slice", sample_slice);
  set_attr_sampler("concat", sample_concat);
  set_operand_sampler("slice_scatter", sample_slice_scatter);
  set_operand_sampler("concat_part", sample_concat_part);
}

}  // namespace ingot::ops
