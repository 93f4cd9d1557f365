// The pools of the linalg family (see families.h for the contract): max_pool2d, avg_pool2d,
// global_avg_pool2d and the gradients of the first two. A window clipped to the input is walked
// for each output element, planes spread over the thread pool; the gradients accumulate in
// double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"
#include "ops/window_util.h"
#include "runtime/parallel.h"

namespace ingot::ops {
namespace {

// The input in its floating type: the average pools of integers run on (and give) float32.
Tensor floating(const Tensor& t) {
  const DType f = to_floating(t.dtype());
  return t.dtype() == f ? t : t.astype(f);
}

// Pools keep float dtypes; average pools of integers produce float32 (like mean).
void dtype_average(const Node&, std::span<const DType> in, std::span<DType> out) {
  out[0] = to_floating(in[0]);
}

Window pool_window(const Node& n) {
  Window w;
  INGOT_CHECK(n.attrs.has("kernel"), n.op, ": missing attribute 'kernel' ([kh, kw])");
  w.kernel = pair_attr(n, "kernel", {1, 1}, 1);
  w.stride = pair_attr(n, "stride", w.kernel, 1);
  w.pad = pair_attr(n, "padding", {0, 0}, 0);
  for (int i = 0; i < 2; ++i)
    INGOT_CHECK(2 * w.pad[i] <= w.kernel[i], n.op, ": padding ", w.pad[i],
                " is more than half the kernel ", w.kernel[i]);
  const int64_t ceil_mode = n.attrs.get_int("ceil_mode", 0);
  INGOT_CHECK(ceil_mode == 0 || ceil_mode == 1, n.op, ": ceil_mode must be 0 or 1, got ", ceil_mode);
  // An average's divisor over a window past the padded end has no one definition (PyTorch and
  // ONNX differ); ONNX import writes that case out (pads and a count of the elements).
  INGOT_CHECK(ceil_mode == 0 || n.op == "max_pool2d" || n.op == "max_pool2d_grad", n.op,
              ": ceil_mode = 1 is max_pool2d's only");
  w.ceil = ceil_mode == 1;
  return w;
}

void pool_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), y = s.out();
  if (!expect_rank(s, x, 4, "an NCHW input")) return;
  const Window w = or_fail(s, [&] { return pool_window(s.node()); });
  s.set_rank(y, 4);
  s.unify(s.dim(y, 0), s.dim(x, 0));
  s.unify(s.dim(y, 1), s.dim(x, 1));
  window_shape(s, w, x, y);
}

struct PoolGeom {
  int64_t planes, H, W, Ho, Wo;  // planes = N * C
  Window win;
};

PoolGeom pool_geom(const Node& n, const Shape& x) {
  INGOT_CHECK(x.size() == 4, n.op, " expects an NCHW input of rank 4, got ", to_string(x));
  PoolGeom g{x[0] * x[1], x[2], x[3], 0, 0, pool_window(n)};
  g.Ho = g.win.out_size(g.H, 0, n.op);
  g.Wo = g.win.out_size(g.W, 1, n.op);
  return g;
}

// Calls f(plane, output index within the plane, h0, h1, w0, w1) for every output element,
// with the window clipped to the input: rows [h0, h1), columns [w0, w1).
template <class F>
void for_each_window(const PoolGeom& g, F&& f) {
  const Window& w = g.win;
  parallel_for(g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.H * g.W, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t p = begin; p < end; ++p)
                   for (int64_t oh = 0; oh < g.Ho; ++oh) {
                     const int64_t h = oh * w.stride[0] - w.pad[0];
                     const int64_t h0 = std::max<int64_t>(h, 0), h1 = std::min(h + w.kernel[0], g.H);
                     for (int64_t ow = 0; ow < g.Wo; ++ow) {
                       const int64_t c = ow * w.stride[1] - w.pad[1];
                       f(p, oh * g.Wo + ow, h0, h1, std::max<int64_t>(c, 0),
                         std::min(c + w.kernel[1], g.W));
                     }
                   }
               });
}

void max_pool2d_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const PoolGeom g = pool_geom(n, in[0].shape());
  out[0] = Tensor(in[0].dtype(), {in[0].dim(0), in[0].dim(1), g.Ho, g.Wo});
  dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    for_each_window(g, [&](int64_t p, int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
      const T* plane = x + p * g.H * g.W;
      C m = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                  : std::numeric_limits<C>::lowest();
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const C v = static_cast<C>(plane[h * g.W + w]);
          if (v > m || v != v) m = v;  // v != v: NaN wins, as in PyTorch
          if (m != m) break;
        }
      y[p * g.Ho * g.Wo + o] = T(m);
    });
  });
}

void avg_pool2d_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const PoolGeom g = pool_geom(n, in[0].shape());
  const int64_t include_pad = n.attrs.get_int("count_include_pad", 1);
  INGOT_CHECK(include_pad == 0 || include_pad == 1, "avg_pool2d: count_include_pad must be 0 or 1");
  const Tensor x = floating(in[0]);
  out[0] = Tensor(x.dtype(), {in[0].dim(0), in[0].dim(1), g.Ho, g.Wo});
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>) {
      const T* px = x.data<T>();
      T* y = out[0].data<T>();
      const C full = static_cast<C>(g.win.kernel[0] * g.win.kernel[1]);
      for_each_window(g, [&](int64_t p, int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
        const T* plane = px + p * g.H * g.W;
        C sum = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += static_cast<C>(plane[h * g.W + w]);
        y[p * g.Ho * g.Wo + o] = T(sum / (include_pad ? full : static_cast<C>((h1 - h0) * (w1 - w0))));
      });
    }
  });
}

void global_pool_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), y = s.out();
  if (!expect_rank(s, x, 4, "an NCHW input")) return;
  const bool keep = s.attrs().get_int("keepdims", 0) != 0;
  s.set_rank(y, keep ? 4 : 2);
  s.unify(s.dim(y, 0), s.dim(x, 0));
  s.unify(s.dim(y, 1), s.dim(x, 1));
  if (keep) {
    s.bind(s.dim(y, 2), 1);
    s.bind(s.dim(y, 3), 1);
  }
}

// Sums each plane in double; an empty plane averages to NaN (0 / 0), like NumPy's mean.
void global_avg_pool2d_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Shape& xs = in[0].shape();
  INGOT_CHECK(xs.size() == 4, n.op, " expects an NCHW input of rank 4, got ", to_string(xs));
  const bool keep = n.attrs.get_int("keepdims", 0) != 0;
  const Tensor x = floating(in[0]);
  out[0] = Tensor(x.dtype(), keep ? Shape{xs[0], xs[1], 1, 1} : Shape{xs[0], xs[1]});
  const int64_t planes = xs[0] * xs[1], size = xs[2] * xs[3];
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const T* px = x.data<T>();
      T* y = out[0].data<T>();
      parallel_for(planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(size, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t p = begin; p < end; ++p) {
                       double sum = 0;
                       for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(px[p * size + i]);
                       y[p] = T(static_cast<compute_t<T>>(sum / static_cast<double>(size)));
                     }
                   });
    }
  });
}

// --- gradients -------------------------------------------------------------------------------

// max_pool2d_grad(input, dy) {max_pool2d's attrs}: dy routed to the first maximum of each
// window (the element the forward pass picked), summed where windows overlap.
void max_pool2d_grad_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const PoolGeom g = pool_geom(n, in[0].shape());
  const Shape ys{in[0].dim(0), in[0].dim(1), g.Ho, g.Wo};
  INGOT_CHECK(in[1].shape() == ys, n.op, ": the output gradient has shape ", to_string(in[1].shape()),
              ", expected ", to_string(ys));
  const Tensor x = in[0].astype(DType::Float64), dy = in[1].astype(DType::Float64);
  Tensor acc(DType::Float64, in[0].shape());
  const double *px = x.data<double>(), *pdy = dy.data<double>();
  double* pa = acc.data<double>();
  for_each_window(g, [&](int64_t p, int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    const double* plane = px + p * g.H * g.W;
    double m = -std::numeric_limits<double>::infinity();
    int64_t at = -1;
    for (int64_t h = h0; h < h1 && !(m != m); ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const double v = plane[h * g.W + w];
        if (v > m || v != v || at < 0) m = v, at = h * g.W + w;
        if (m != m) break;
      }
    if (at >= 0) pa[p * g.H * g.W + at] += pdy[p * g.Ho * g.Wo + o];
  });
  out[0] = acc.astype(in[1].dtype());
}

// avg_pool2d_grad(dy, like) {avg_pool2d's attrs}: each window's gradient spread evenly over the
// elements it averaged.
void avg_pool2d_grad_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const PoolGeom g = pool_geom(n, in[1].shape());
  const int64_t include_pad = n.attrs.get_int("count_include_pad", 1);
  const Shape ys{in[1].dim(0), in[1].dim(1), g.Ho, g.Wo};
  INGOT_CHECK(in[0].shape() == ys, n.op, ": the output gradient has shape ", to_string(in[0].shape()),
              ", expected ", to_string(ys));
  const Tensor dy = in[0].astype(DType::Float64);
  Tensor acc(DType::Float64, in[1].shape());
  const double* pdy = dy.data<double>();
  double* pa = acc.data<double>();
  const double full = static_cast<double>(g.win.kernel[0] * g.win.kernel[1]);
  for_each_window(g, [&](int64_t p, int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    const double d = pdy[p * g.Ho * g.Wo + o] /
                     (include_pad ? full : static_cast<double>((h1 - h0) * (w1 - w0)));
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) pa[p * g.H * g.W + h * g.W + w] += d;
  });
  out[0] = acc.astype(in[0].dtype());
}

void pool_grad_shape(ShapeInfer& s) {
  const ValueId like = s.node().op == "max_pool2d_grad" ? s.in(0) : s.in(1);
  if (s.has_rank(like)) s.set_dims(s.out(), s.dims(like));
}

void dtype_of_grad(const Node& n, std::span<const DType> in, std::span<DType> out) {
  out[0] = n.op == "max_pool2d_grad" ? in[1] : in[0];
}

// --- gradient rules --------------------------------------------------------------------------

void max_pool2d_vjp(VjpContext& c) {
  c.set_grad(0, c.op("max_pool2d_grad", {c.in(0), c.grad_out()}, c.attrs()));
}

void avg_pool2d_vjp(VjpContext& c) {
  c.set_grad(0, c.op("avg_pool2d_grad", {c.grad_out(), c.in(0)}, c.attrs()));
}

void global_avg_pool2d_vjp(VjpContext& c) {
  const ValueId x = c.in(0);
  ValueId g = c.grad_out();
  if (c.attrs().get_int("keepdims", 0) == 0) g = c.expand_dims(g, {2, 3});
  g = c.op("div", {g, c.count(x, {2, 3}, c.dtype(g))});
  c.set_grad(0, c.broadcast_to_like(g, x));
}

// The fuzzer's pooling windows (OpDef::sample_attrs) over an NCHW operand: kernel 1 to 3 that
// fits the padded input, stride 1 or 2, padding at most half the kernel.
Attrs sample_pool(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  if (in[0].size() != 4) return {};  // pools take NCHW only: the shape rule refuses the rest
  const int64_t smallest = std::min(in[0][2], in[0][3]);
  int64_t k = 1 + d.below(3), p = d.below(k / 2 + 1);
  k = std::min(k, smallest + 2 * p);
  p = std::min(p, k / 2);
  const int64_t st = 1 + d.below(2);
  return {{"kernel", std::vector<int64_t>{k, k}}, {"stride", std::vector<int64_t>{st, st}},
          {"padding", std::vector<int64_t>{p, p}}};
}

// max_pool2d's: sample_pool's window, half the time in ceil_mode.
Attrs sample_max_pool(std::span<const Shape> in, uint64_t seed) {
  Attrs a = sample_pool(in, seed);
  if (a.has("kernel") && ops::Draw{seed ^ 0x5bd1e995ULL}.coin()) a.set("ceil_mode", int64_t{1});
  return a;
}

}  // namespace

void register_pool_ops() {
  register_op(OpDef{.name = "max_pool2d",
                    .fusion = FusionClass::Opaque,
                    .shape = pool_shape,
                    .dtype = dtype_same_as_input,
                    .eval = max_pool2d_eval,
                    .doc = "2-D max pooling over [kh, kw] windows, padding counts as -inf; ceil_mode = 1: "
                           "a last window past the padded end where the floor rule stops short",
                    .vjp = max_pool2d_vjp,
                    .sample_attrs = sample_max_pool});
  register_op(OpDef{.name = "avg_pool2d",
                    .fusion = FusionClass::Opaque,
                    .shape = pool_shape,
                    .dtype = dtype_average,
                    .eval = avg_pool2d_eval,
                    .doc = "2-D average pooling over [kh, kw] windows (count_include_pad = 1)",
                    .vjp = avg_pool2d_vjp,
                    .sample_attrs = sample_pool});
  register_op(OpDef{.name = "global_avg_pool2d",
                    .fusion = FusionClass::Reduction,
                    .shape = global_pool_shape,
                    .dtype = dtype_average,
                    .eval = global_avg_pool2d_eval,
                    .doc = "mean over H and W: [N, C, H, W] -> [N, C] (or [N, C, 1, 1])",
                    .vjp = global_avg_pool2d_vjp});
  register_op(OpDef{.name = "max_pool2d_grad",
                    .min_inputs = 2,
                    .max_inputs = 2,
                    .shape = pool_grad_shape,
                    .dtype = dtype_of_grad,
                    .eval = max_pool2d_grad_eval,
                    .doc = "max_pool2d_grad(input, dy) {max_pool2d's attrs}: dy to each window's first max"});
  register_op(OpDef{.name = "avg_pool2d_grad",
                    .min_inputs = 2,
                    .max_inputs = 2,
                    .shape = pool_grad_shape,
                    .dtype = dtype_of_grad,
                    .eval = avg_pool2d_grad_eval,
                    .doc = "avg_pool2d_grad(dy, like_input) {avg_pool2d's attrs}: dy spread over each window"});
}

}  // namespace ingot::ops
