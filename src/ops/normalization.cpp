// The normalizations: layer_norm and rms_norm over trailing dims (one kernel, one gradient
// rule, a flag apart) and batch_norm per channel. Statistics accumulate in double.
#include <algorithm>
#include <cmath>
#include <optional>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"
#include "ops/reduce_util.h"

namespace ingot::ops {
namespace {

using Ctx = VjpContext;

// ---------------------------------------------------------------------------------------------
// Kernels, shape and dtype rules

// Parameters (weight, bias, running stats) as doubles; checked against the expected shape.
std::vector<double> param(const Node& n, const Tensor& t, const char* what, const Shape& want) {
  INGOT_CHECK(t.shape() == want, n.op, ": ", what, " has shape ", to_string(t.shape()),
              " but must have shape ", to_string(want));
  return t.to_vector<double>();
}

// layer_norm (kCenter) and rms_norm: each row of the trailing dims axis..end scaled by
// (mean square of its deviation + eps)^-1/2, the deviation taken from the row's mean for
// layer_norm and from 0 for rms_norm; then weight (and layer_norm's bias). In double.
template <bool kCenter>
void trailing_norm_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  const int axis = axis_attr(n, x.rank());
  const double eps = n.attrs.get_float("eps", 1e-5);
  outputs[0] = Tensor(od, x.shape());
  const Shape row_shape(x.shape().begin() + axis, x.shape().end());
  const int64_t len = numel(row_shape), rows = len == 0 ? 0 : x.numel() / len;
  const std::vector<double> w = inputs.size() > 1
                                    ? param(n, inputs[1], "weight", row_shape)
                                    : std::vector<double>(static_cast<size_t>(len), 1.0);
  const std::vector<double> b = inputs.size() > 2
                                    ? param(n, inputs[2], "bias", row_shape)
                                    : std::vector<double>(static_cast<size_t>(len), 0.0);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x.data<T>() + r * len;
      T* yr = outputs[0].data<T>() + r * len;
      double mean = 0, var = 0;
      if (kCenter) {
        for (int64_t k = 0; k < len; ++k) mean += static_cast<double>(static_cast<C>(xr[k]));
        mean /= static_cast<double>(len);
      }
      for (int64_t k = 0; k < len; ++k) {
        const double d = static_cast<double>(static_cast<C>(xr[k])) - mean;
        var += d * d;
      }
      const double rstd = 1.0 / std::sqrt(var / static_cast<double>(len) + eps);
      for (int64_t k = 0; k < len; ++k) {
        const auto kk = static_cast<size_t>(k);
        const double d = static_cast<double>(static_cast<C>(xr[k])) - mean;
        yr[k] = static_cast<T>(static_cast<C>(d * rstd * w[kk] + b[kk]));
      }
    }
  });
}

// weight and bias have the shape of the normalized trailing dims.
void trailing_norm_shape(ShapeInfer& s) {
  s.same_shape(s.in(0), s.out());
  if (!s.has_rank(s.in(0))) return;
  const int r = s.rank(s.in(0));
  int axis = 0;
  or_fail(s, [&] { axis = axis_attr(s.node(), r); });
  for (int p = 1; p < s.num_inputs(); ++p) {
    s.set_rank(s.in(p), r - axis);
    for (int d = axis; d < r; ++d) s.unify(s.dim(s.in(p), d - axis), s.dim(s.in(0), d));
  }
}

void trailing_norm_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  static const char* const kNames[] = {"input", "weight", "bias"};
  for (size_t i = 0; i < std::min(in.size(), std::size(kNames)); ++i)
    require_float(n, in[i], kNames[i]);
  out[0] = in[0];
}

void batch_norm_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  INGOT_CHECK(x.rank() >= 2, n.op, ": input must be [N, C, ...], got shape ", to_string(x.shape()));
  const double eps = n.attrs.get_float("eps", 1e-5);
  const AxisSplit sp = split_at(x.shape(), 1);
  const Shape c_shape = {sp.n};
  const std::vector<double> w = param(n, inputs[1], "weight", c_shape);
  const std::vector<double> b = param(n, inputs[2], "bias", c_shape);
  const std::vector<double> mean = param(n, inputs[3], "mean", c_shape);
  const std::vector<double> var = param(n, inputs[4], "variance", c_shape);
  // Fold the four parameters into one scale and shift per channel.
  std::vector<double> scale(w.size()), shift(w.size());
  for (size_t c = 0; c < w.size(); ++c) {
    scale[c] = w[c] / std::sqrt(var[c] + eps);
    shift[c] = b[c] - mean[c] * scale[c];
  }
  outputs[0] = Tensor(od, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* px = x.data<T>();
    T* py = outputs[0].data<T>();
    for (int64_t o = 0; o < sp.outer; ++o) {
      for (int64_t c = 0; c < sp.n; ++c) {
        const C sc = static_cast<C>(scale[static_cast<size_t>(c)]);
        const C sh = static_cast<C>(shift[static_cast<size_t>(c)]);
        const int64_t base = (o * sp.n + c) * sp.inner;
        for (int64_t i = 0; i < sp.inner; ++i)
          py[base + i] = static_cast<T>(static_cast<C>(px[base + i]) * sc + sh);
      }
    }
  });
}

// weight, bias, mean and variance are all [C], C being input dim 1.
void batch_norm_shape(ShapeInfer& s) {
  s.same_shape(s.in(0), s.out());
  if (!s.has_rank(s.in(0))) return;
  if (s.rank(s.in(0)) < 2)
    s.fail("batch_norm: input must be [N, C, ...], got rank " + std::to_string(s.rank(s.in(0))));
  for (int p = 1; p < s.num_inputs(); ++p) {
    s.set_rank(s.in(p), 1);
    s.unify(s.dim(s.in(p), 0), s.dim(s.in(0), 1));
  }
}

void batch_norm_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  static const char* const kNames[] = {"input", "weight", "bias", "mean", "variance"};
  for (size_t i = 0; i < std::min(in.size(), std::size(kNames)); ++i)
    require_float(n, in[i], kNames[i]);
  out[0] = in[0];
}

// ---------------------------------------------------------------------------------------------
// Gradient rules

// Sum over the first `lead` axes (the gradient of a parameter broadcast along them).
ValueId sum_leading(Ctx& c, ValueId v, int lead) {
  if (lead == 0) return v;
  std::vector<int64_t> axes;
  for (int i = 0; i < lead; ++i) axes.push_back(i);
  return c.op("sum", {v}, {{"axes", axes}, {"keepdims", int64_t{0}}});
}

// x_hat = (x - mean) rstd over dims axis..end; dx = rstd (d - mean(d) - x_hat mean(d x_hat))
// with d = g * weight; d weight = sum of g x_hat and d bias = sum of g over the leading dims.
// rms_norm (no kCenter) is the same with the mean taken as 0: x_hat = x rstd, rstd =
// (mean(x^2) + eps)^-1/2, and no mean(d) term (shifting x changes its scale, not just y).
template <bool kCenter>
void trailing_norm_vjp(Ctx& c) {
  const ValueId x = c.in(0), g = c.grad_out();
  const int r = c.rank(x), axis = axis_attr(c.node(), r);
  std::vector<int64_t> axes;
  for (int i = axis; i < r; ++i) axes.push_back(i);
  const Attrs keep{{"axes", axes}, {"keepdims", int64_t{1}}};
  ValueId centered = x, variance;
  if (kCenter) {
    const std::vector<ValueId> mv = c.op_n("moments", {x}, keep, 2);
    centered = c.op("sub", {x, mv[0]});
    variance = mv[1];
  } else {
    variance = c.op("mean", {c.op("mul", {x, x})}, keep);
  }
  const ValueId eps = c.scalar(c.attrs().get_float("eps", 1e-5), c.dtype(variance));
  const ValueId rstd = c.op("rsqrt", {c.op("add", {variance, eps})});
  const ValueId xhat = c.op("mul", {centered, rstd});
  if (c.needs_grad(0)) {
    const ValueId d = c.num_inputs() > 1 ? c.op("mul", {g, c.in(1)}) : g;
    const ValueId mdx = c.op("mean", {c.op("mul", {d, xhat})}, keep);
    ValueId inner = c.op("sub", {d, c.op("mul", {xhat, mdx})});
    if (kCenter) inner = c.op("sub", {inner, c.op("mean", {d}, keep)});
    c.set_grad(0, c.op("mul", {rstd, inner}));
  }
  if (c.num_inputs() > 1 && c.needs_grad(1)) c.set_grad(1, sum_leading(c, c.op("mul", {g, xhat}), axis));
  if (c.num_inputs() > 2 && c.needs_grad(2)) c.set_grad(2, sum_leading(c, g, axis));
}

// y = (x - mean) rstd weight + bias per channel (dim 1), rstd = (variance + eps)^-1/2, with
// mean and variance inputs in their own right: batch norm's training mode feeds them from
// `moments`, whose own rule then carries their gradients on to x.
void batch_norm_vjp(Ctx& c) {
  const ValueId x = c.in(0), w = c.in(1), mean = c.in(3), var = c.in(4), g = c.grad_out();
  const int r = c.rank(x);
  std::vector<int64_t> others{0};
  for (int i = 2; i < r; ++i) others.push_back(i);
  auto per_channel = [&](ValueId v) { return c.expand_dims(v, others); };  // [C] -> [1, C, 1, 1]
  auto channel_sum = [&](ValueId v) {
    return c.op("sum", {v}, {{"axes", others}, {"keepdims", int64_t{0}}});
  };
  const ValueId rstd = c.op("rsqrt", {c.op("add", {var, c.scalar(c.attrs().get_float("eps", 1e-5), c.dtype(var))})});
  const ValueId centered = c.op("sub", {x, per_channel(mean)});
  const ValueId scale = c.op("mul", {w, rstd});
  if (c.needs_grad(0)) c.set_grad(0, c.op("mul", {g, per_channel(scale)}));
  if (c.needs_grad(1)) c.set_grad(1, c.op("mul", {channel_sum(c.op("mul", {g, centered})), rstd}));
  if (c.needs_grad(2) || c.needs_grad(3)) {
    const ValueId gsum = channel_sum(g);
    c.set_grad(2, gsum);
    c.set_grad(3, c.op("neg", {c.op("mul", {gsum, scale})}));
  }
  if (c.needs_grad(4)) {
    // d/dvar of (x - mean) (var + eps)^-1/2 w = -1/2 (x - mean) w rstd^3
    const ValueId rstd3 = c.op("mul", {rstd, c.op("mul", {rstd, rstd})});
    const ValueId k = c.op("mul", {c.op("mul", {w, rstd3}), c.scalar(-0.5, c.dtype(var))});
    c.set_grad(4, c.op("mul", {channel_sum(c.op("mul", {g, centered})), k}));
  }
}

// ---------------------------------------------------------------------------------------------
// The fuzzer's operands: one axis for the trailing norms, positive statistics for batch_norm

Attrs sample_axis(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  return {{"axis", d.axis(static_cast<int>(in[0].size()))}};
}

// batch_norm(x, weight, bias, mean, variance): per-channel statistics with a positive variance
// (a drawn value as the variance would make most programs NaN), eps small or large.
SampledOperands sample_batch_norm(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  if (in[0].size() < 2) return {};
  const Shape c = {in[0][1]};
  SampledOperands out;
  out.attrs = {{"eps", d.coin() ? 1e-5 : 0.1}};
  out.operands = {std::nullopt, d.uniform(c, -2.0, 2.0), d.uniform(c, -1.0, 1.0), d.uniform(c, -1.0, 1.0),
                  d.uniform(c, 0.1, 2.0)};
  return out;
}

}  // namespace

void register_normalization_ops() {
  constexpr FusionClass kRow = FusionClass::RowKernel;
  register_op(OpDef{"layer_norm", 1, 3, 1, kRow, trailing_norm_shape, trailing_norm_dtype,
                    trailing_norm_kernel<true>,
                    "layer_norm(input, [weight], [bias]) over dims {axis = -1}..end, {eps = 1e-5}",
                    trailing_norm_vjp<true>});
  register_op(OpDef{"rms_norm", 1, 2, 1, kRow, trailing_norm_shape, trailing_norm_dtype,
                    trailing_norm_kernel<false>,
                    "rms_norm(input, [weight]): x / sqrt(mean(x^2) + {eps = 1e-5}) over dims {axis = -1}..end",
                    trailing_norm_vjp<false>});
  register_op(OpDef{"batch_norm", 5, 5, 1, kRow, batch_norm_shape, batch_norm_dtype, batch_norm_kernel,
                    "batch_norm(input, weight, bias, mean, variance) per channel (dim 1), {eps = 1e-5}",
                    batch_norm_vjp});
  for (const char* op : {"layer_norm", "rms_norm"}) set_attr_sampler(op, sample_axis);
  set_operand_sampler("batch_norm", sample_batch_norm);
}

}  // namespace ingot::ops
