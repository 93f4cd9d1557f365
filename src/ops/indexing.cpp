// The index-driven ops of the movement family (see families.h): gather and take_along_axis,
// and their gradients index_add and scatter_add (updates summed into zeros where the forward op
// read, repeats adding up). Indices are checked against the axis and wrap when negative.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/gradient_util.h"
#include "ops/kernel_util.h"

namespace ingot::ops {
namespace {

// --- gather ----------------------------------------------------------------------------------

void gather_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), idx = s.in(1), y = s.out();
  if (!s.ready({x, idx})) return;
  const int rx = s.rank(x), ri = s.rank(idx);
  if (rx == 0) s.fail("gather needs an input of rank >= 1, got a scalar");
  const int ax = s.normalize_axis(s.attrs().get_int("axis", 0), rx);
  std::vector<DimVar> dims;
  for (int i = 0; i < ax; ++i) dims.push_back(s.dim(x, i));
  for (int i = 0; i < ri; ++i) dims.push_back(s.dim(idx, i));
  for (int i = ax + 1; i < rx; ++i) dims.push_back(s.dim(x, i));
  s.set_dims(y, dims);
}

void dtype_gather(const Node&, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(is_integral(in[1]), "gather: indices must have an integer dtype, got ",
              dtype_name(in[1]));
  out[0] = in[0];
}

// The indices as int64, negative ones wrapped, all checked against the axis size.
std::vector<int64_t> gather_indices(const Tensor& idx, int64_t size, int axis) {
  INGOT_CHECK(is_integral(idx.dtype()), "gather: indices must have an integer dtype, got ",
              dtype_name(idx.dtype()));
  std::vector<int64_t> out(static_cast<size_t>(idx.numel()));
  dispatch_dtype(idx.dtype(), [&](auto tag) {
    using I = decltype(tag);
    if constexpr (std::is_integral_v<I>) {
      const I* p = idx.data<I>();
      for (size_t i = 0; i < out.size(); ++i) {
        const int64_t v = static_cast<int64_t>(p[i]);
        INGOT_CHECK(v >= -size && v < size, "gather: index ", v, " is out of range for axis ",
                    axis, " of size ", size);
        out[i] = v < 0 ? v + size : v;
      }
    }
  });
  return out;
}

void gather_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  INGOT_CHECK(x.rank() > 0, "gather needs an input of rank >= 1, got a scalar");
  const int ax = normalize_axis(n.attrs.get_int("axis", 0), x.rank(), "gather");
  const Shape& xs = x.shape();
  const std::vector<int64_t> idx = gather_indices(in[1], xs[ax], ax);
  Shape shape(xs.begin(), xs.begin() + ax);
  shape.insert(shape.end(), in[1].shape().begin(), in[1].shape().end());
  shape.insert(shape.end(), xs.begin() + ax + 1, xs.end());
  out[0] = Tensor(x.dtype(), shape);
  // Each index selects one contiguous block of the input per index of the dims before axis.
  const int64_t outer = numel(Shape(xs.begin(), xs.begin() + ax));
  const int64_t inner = numel(Shape(xs.begin() + ax + 1, xs.end())) *
                        static_cast<int64_t>(dtype_size(x.dtype()));
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out[0].raw_data());
  const int64_t nidx = static_cast<int64_t>(idx.size());
  if (inner == 0) return;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < nidx; ++j)
      std::memcpy(dst + (o * nidx + j) * inner, src + (o * xs[ax] + idx[j]) * inner,
                  static_cast<size_t>(inner));
}

// --- take_along_axis ---------------------------------------------------------------------------

// Indices have the input's rank; every dim but `axis` matches the input, and the output has the
// indices' shape: out[..., j, ...] = input[..., indices[..., j, ...], ...] (NumPy
// take_along_axis, torch.gather). Picking one class per row of [N, C] logits is its main use.
void take_along_axis_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), idx = s.in(1), y = s.out();
  if (s.has_rank(x) && !s.has_rank(idx)) s.set_rank(idx, s.rank(x));
  if (!s.ready({x, idx})) return;
  const int r = s.rank(x);
  if (r == 0) s.fail("take_along_axis needs an input of rank >= 1, got a scalar");
  if (s.rank(idx) != r)
    s.fail("take_along_axis: indices have rank " + std::to_string(s.rank(idx)) +
           " but the input has rank " + std::to_string(r));
  const int ax = s.normalize_axis(s.attrs().get_int("axis"), r);
  for (int i = 0; i < r; ++i)
    if (i != ax) s.unify(s.dim(idx, i), s.dim(x, i));
  s.set_dims(y, s.dims(idx));
}

void dtype_take_along_axis(const Node&, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(is_integral(in[1]), "take_along_axis: indices must have an integer dtype, got ",
              dtype_name(in[1]));
  out[0] = in[0];
}

void take_along_axis_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  const Shape& xs = x.shape();
  const Shape& is = in[1].shape();
  INGOT_CHECK(x.rank() > 0 && in[1].rank() == x.rank(), "take_along_axis: indices of shape ",
              to_string(is), " do not match an input of shape ", to_string(xs));
  const int ax = normalize_axis(n.attrs.get_int("axis"), x.rank(), "take_along_axis");
  for (int i = 0; i < x.rank(); ++i)
    INGOT_CHECK(i == ax || is[i] == xs[i], "take_along_axis: indices of shape ", to_string(is),
                " do not match an input of shape ", to_string(xs), " off axis ", ax);
  const std::vector<int64_t> idx = gather_indices(in[1], xs[ax], ax);
  out[0] = Tensor(x.dtype(), is);
  const int64_t outer = numel(Shape(xs.begin(), xs.begin() + ax));
  const int64_t inner = numel(Shape(xs.begin() + ax + 1, xs.end()));
  const int64_t nx = xs[ax], ni = is[ax];
  const size_t esize = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out[0].raw_data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t at = (o * ni + j) * inner + k;
        std::memcpy(dst + at * static_cast<int64_t>(esize),
                    src + ((o * nx + idx[at]) * inner + k) * static_cast<int64_t>(esize), esize);
      }
}

// --- gradients -------------------------------------------------------------------------------

// index_add(like, indices, updates) {axis}: zeros shaped like `like`, plus each slice of
// `updates` added at the row its index names: the gradient of gather (repeats add up).
void index_add_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape& xs = in[0].shape();
  INGOT_CHECK(!xs.empty(), "index_add needs a target of rank >= 1");
  const int ax = normalize_axis(n.attrs.get_int("axis", 0), static_cast<int>(xs.size()), "index_add");
  const std::vector<int64_t> idx = gather_indices(in[1], xs[ax], ax);
  Shape expect(xs.begin(), xs.begin() + ax);
  expect.insert(expect.end(), in[1].shape().begin(), in[1].shape().end());
  expect.insert(expect.end(), xs.begin() + ax + 1, xs.end());
  INGOT_CHECK(in[2].shape() == expect, "index_add: updates of shape ", to_string(in[2].shape()),
              ", expected ", to_string(expect));
  const int64_t nidx = static_cast<int64_t>(idx.size());
  const int64_t inner = numel(Shape(xs.begin() + ax + 1, xs.end()));
  scatter_into(in[2], xs, out[0], [&](int64_t j) {
    const int64_t k = j % inner, i = j / inner % std::max<int64_t>(nidx, 1), o = j / inner / std::max<int64_t>(nidx, 1);
    return (o * xs[ax] + idx[i]) * inner + k;
  });
}

// scatter_add(like, indices, updates) {axis}: zeros shaped like `like`, plus updates[..j..] at
// [..indices[..j..]..] along `axis`: the gradient of take_along_axis (repeats add up).
void scatter_add_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape& xs = in[0].shape();
  const Shape& is = in[1].shape();
  INGOT_CHECK(!xs.empty() && is.size() == xs.size() && in[2].shape() == is, "scatter_add: target ",
              to_string(xs), ", indices ", to_string(is), " and updates ", to_string(in[2].shape()),
              " do not match");
  const int ax = normalize_axis(n.attrs.get_int("axis"), static_cast<int>(xs.size()), "scatter_add");
  for (size_t i = 0; i < xs.size(); ++i)
    INGOT_CHECK(static_cast<int>(i) == ax || is[i] == xs[i], "scatter_add: indices ", to_string(is),
                " do not match the target ", to_string(xs), " off axis ", ax);
  const std::vector<int64_t> idx = gather_indices(in[1], xs[ax], ax);
  const int64_t inner = numel(Shape(xs.begin() + ax + 1, xs.end()));
  scatter_into(in[2], xs, out[0], [&](int64_t j) {
    const int64_t k = j % inner, o = j / inner / is[ax];
    return (o * xs[ax] + idx[j]) * inner + k;
  });
}

// index_add / scatter_add (like, indices, updates): the updates' dtype; integer indices, checked
// here at type inference rather than only by the kernel (found by the program fuzzer).
void dtype_scatter(const Node& n, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(is_integral(in[1]), n.op, ": indices must have an integer dtype, got ", dtype_name(in[1]));
  out[0] = in[2];
}

// --- gradient rules --------------------------------------------------------------------------

using Ctx = VjpContext;

void gather_vjp(Ctx& c) {
  c.set_grad(0, c.op("index_add", {c.in(0), c.in(1), c.grad_out()}, {{"axis", c.attrs().get_int("axis", 0)}}));
}
void take_along_axis_vjp(Ctx& c) {
  c.set_grad(0, c.op("scatter_add", {c.in(0), c.in(1), c.grad_out()}, {{"axis", c.attrs().get_int("axis")}}));
}
void index_add_vjp(Ctx& c) {
  c.set_grad(2, c.op("gather", {c.grad_out(), c.in(1)}, {{"axis", c.attrs().get_int("axis", 0)}}));
}
void scatter_add_vjp(Ctx& c) {
  c.set_grad(2, c.op("take_along_axis", {c.grad_out(), c.in(1)}, {{"axis", c.attrs().get_int("axis")}}));
}

// --- the fuzzer's operands (OpDef::sample_operands): indices in range, and the values they
// scatter drawn from the program where its shapes fit (a fresh input where they do not) ------

SampledOperands sample_gather(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  const int r = static_cast<int>(in[0].size());
  if (r == 0) return {};  // the rules refuse a scalar
  const int64_t axis = d.axis(r), size = in[0][static_cast<size_t>(axis < 0 ? axis + r : axis)];
  Shape is;
  for (int64_t k = d.below(3); k > 0; --k) is.push_back(size == 0 ? 0 : 1 + d.below(5));
  SampledOperands out;
  out.attrs = {{"axis", axis}};
  out.operands = {std::nullopt, d.indices(size == 0 && is.empty() ? Shape{0} : is, size)};
  return out;
}

SampledOperands sample_take_along_axis(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  const int r = static_cast<int>(in[0].size());
  if (r == 0) return {};
  const int64_t axis = d.axis(r);
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + r : axis);
  Shape is = in[0];
  is[ax] = in[0][ax] == 0 ? 0 : 1 + d.below(4);
  SampledOperands out;
  out.attrs = {{"axis", axis}};
  out.operands = {std::nullopt, d.indices(is, in[0][ax])};
  return out;
}

// index_add and scatter_add (like, indices, updates) {axis}: the drawn updates when they match
// `like` off the axis, else fresh ones; indices to fit them.
template <bool kScatter>
SampledOperands sample_scatter(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  const int r = static_cast<int>(in[0].size());
  if (r == 0 || in.size() < 3) return {};
  const int64_t axis = d.axis(r);
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + r : axis);
  const int64_t size = in[0][ax];
  bool fits = in[2].size() == in[0].size() && (size > 0 || in[2][ax] == 0);
  for (size_t i = 0; fits && i < in[0].size(); ++i) fits = i == ax || in[2][i] == in[0][i];
  Shape updates = in[0];
  if (fits) updates = in[2];
  else updates[ax] = size == 0 ? 0 : 1 + d.below(4);
  SampledOperands out;
  out.attrs = {{"axis", axis}};
  out.operands = {std::nullopt, d.indices(kScatter ? updates : Shape{updates[ax]}, size),
                  fits ? std::nullopt : std::optional<Tensor>(d.uniform(updates, -2.0, 2.0))};
  return out;
}

}  // namespace

void register_indexing_ops() {
  register_op(OpDef{.name = "gather",
                    .min_inputs = 2,
                    .max_inputs = 2,
                    .fusion = FusionClass::Injective,
                    .shape = gather_shape,
                    .dtype = dtype_gather,
                    .eval = gather_eval,
                    .doc = "NumPy take(input, indices, axis): integer indices, negative ones wrap",
                    .vjp = gather_vjp});
  register_op(OpDef{.name = "take_along_axis",
                    .min_inputs = 2,
                    .max_inputs = 2,
                    .fusion = FusionClass::Injective,
                    .shape = take_along_axis_shape,
                    .dtype = dtype_take_along_axis,
                    .eval = take_along_axis_eval,
                    .doc = "NumPy take_along_axis(input, indices, {axis}): indices have the input's rank",
                    .vjp = take_along_axis_vjp});
  register_op(OpDef{.name = "index_add",
                    .min_inputs = 3,
                    .max_inputs = 3,
                    .fusion = FusionClass::Injective,
                    .shape = like_shape<0>,
                    .dtype = dtype_scatter,
                    .eval = index_add_eval,
                    .doc = "index_add(like, indices, updates) {axis}: zeros like `like`, updates added at gather's rows",
                    .vjp = index_add_vjp});
  register_op(OpDef{.name = "scatter_add",
                    .min_inputs = 3,
                    .max_inputs = 3,
                    .fusion = FusionClass::Injective,
                    .shape = like_shape<0>,
                    .dtype = dtype_scatter,
                    .eval = scatter_add_eval,
                    .doc = "scatter_add(like, indices, updates) {axis}: zeros like `like`, updates added where "
      "take_along_axis reads",
                    .vjp = scatter_add_vjp});
  set_operand_sampler("gather", sample_gather);
  set_operand_sampler("take_along_axis", sample_take_along_axis);
  set_operand_sampler("index_add", sample_scatter<false>);
  set_operand_sampler("scatter_add", sample_scatter<true>);
}

}  // namespace ingot::ops
