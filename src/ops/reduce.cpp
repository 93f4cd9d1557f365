// The reduce family: axis reductions (sum, mean, max, min, argmax, moments), the softmax row
// kernels and the ops gradients need (sum_to_like, numel). Float sums accumulate in double.
// The normalizations (layer_norm, rms_norm, batch_norm) are in normalization.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"
#include "ops/reduce_util.h"

namespace ingot::ops {
namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers

int argmax_axis(const Node& n, int rank) { return checked_axis(n, n.attrs.get_int("axis"), rank); }

// The `axes` attribute, sorted and normalized; missing or empty means all axes.
std::vector<int> axes_attr(const Node& n, int rank) {
  std::vector<int> out;
  for (int64_t a : n.attrs.get_ints("axes", {})) out.push_back(checked_axis(n, a, rank));
  if (out.empty())
    for (int i = 0; i < rank; ++i) out.push_back(i);
  std::sort(out.begin(), out.end());
  const auto dup = std::adjacent_find(out.begin(), out.end());
  INGOT_CHECK(dup == out.end(), n.op, ": axis ", dup == out.end() ? 0 : *dup,
              " appears twice in axes");
  return out;
}

bool keepdims_attr(const Node& n) {
  const int64_t k = n.attrs.get_int("keepdims", 0);
  INGOT_CHECK(k == 0 || k == 1, n.op, ": keepdims must be 0 or 1, got ", k);
  return k == 1;
}


// ---------------------------------------------------------------------------------------------
// Axis reductions: sum mean max min moments

// How to walk a contiguous input once, in memory order, accumulating into the output: size-1
// dims are dropped and neighbouring dims of one kind (reduced or kept) merged, so the inner
// loop is as long as possible; reduced dims get output stride 0.
struct ReducePlan {
  Shape out_shape;  // honors keepdims
  Shape iter_shape;
  Strides out_strides;
  int64_t out_numel = 1;
  int64_t count = 1;  // input elements per output element
};

ReducePlan plan_reduce(const Node& n, const Shape& in) {
  const int rank = static_cast<int>(in.size());
  const bool keep = keepdims_attr(n);
  std::vector<bool> reduced(in.size(), false);
  for (int a : axes_attr(n, rank)) reduced[static_cast<size_t>(a)] = true;
  ReducePlan p;
  std::vector<bool> iter_reduced;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      p.count *= in[d];
      if (keep) p.out_shape.push_back(1);
    } else {
      p.out_numel *= in[d];
      p.out_shape.push_back(in[d]);
    }
    if (in[d] == 1) continue;
    if (!iter_reduced.empty() && iter_reduced.back() == reduced[d]) {
      p.iter_shape.back() *= in[d];
    } else {
      p.iter_shape.push_back(in[d]);
      iter_reduced.push_back(reduced[d]);
    }
  }
  p.out_strides.assign(p.iter_shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = p.iter_shape.size(); i-- > 0;) {
    if (iter_reduced[i]) continue;
    p.out_strides[i] = stride;
    stride *= p.iter_shape[i];
  }
  return p;
}

// f(acc[o], x[i]) for every input element i and the output element o it reduces into. Runs
// row by row over the innermost iteration dim: a reduced row accumulates in a local (no
// store/reload per element), a kept row maps onto consecutive outputs (vectorizable).
template <class T, class A, class F>
void accumulate(const ReducePlan& p, const T* x, A* acc, F f) {
  if (p.iter_shape.empty()) {  // a single element
    f(acc[0], x[0]);
    return;
  }
  const int64_t len = p.iter_shape.back();
  const bool reduced_row = p.out_strides.back() == 0;
  const Shape rows(p.iter_shape.begin(), p.iter_shape.end() - 1);
  const Strides row_strides(p.out_strides.begin(), p.out_strides.end() - 1);
  for_each_strided<1>(rows, {row_strides}, [&](int64_t r, int64_t o) {
    const T* row = x + r * len;
    if (reduced_row) {
      A a = acc[o];
      for (int64_t j = 0; j < len; ++j) f(a, row[j]);
      acc[o] = a;
    } else {
      A* out = acc + o;
      for (int64_t j = 0; j < len; ++j) f(out[j], row[j]);
    }
  });
}

template <class T>
using sum_acc_t = std::conditional_t<is_float_v<T>, double, uint64_t>;  // ints wrap

void sum_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  const ReducePlan p = plan_reduce(n, x.shape());
  outputs[0] = Tensor(od, p.out_shape);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = sum_acc_t<T>;
    using O = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
    std::vector<A> acc(static_cast<size_t>(p.out_numel), A(0));
    accumulate(p, x.data<T>(), acc.data(),
               [](A& a, T v) { a += static_cast<A>(static_cast<compute_t<T>>(v)); });
    O* out = outputs[0].data<O>();
    for (int64_t i = 0; i < p.out_numel; ++i) out[i] = static_cast<O>(acc[i]);
  });
}

// Mean and biased variance in double, two passes (the second around the mean, for accuracy).
// Writes mean to outputs[0] and, when asked, variance to outputs[1].
void moments_into(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                  bool variance) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  const ReducePlan p = plan_reduce(n, x.shape());
  for (Tensor& o : outputs) o = Tensor(od, p.out_shape);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* px = x.data<T>();
    const double count = static_cast<double>(p.count);  // 0: mean is NaN, as in NumPy
    struct Stats {
      double mean = 0, m2 = 0;
    };
    std::vector<Stats> st(static_cast<size_t>(p.out_numel));
    auto value = [](T v) { return static_cast<double>(static_cast<C>(v)); };
    accumulate(p, px, st.data(), [&](Stats& a, T v) { a.mean += value(v); });
    for (Stats& s : st) s.mean /= count;
    if (variance)
      accumulate(p, px, st.data(), [&](Stats& a, T v) {
        const double d = value(v) - a.mean;
        a.m2 += d * d;
      });
    using O = std::conditional_t<is_float_v<T>, T, float>;  // the dtype rule's to_floating
    O* out_mean = outputs[0].data<O>();
    O* out_var = variance ? outputs[1].data<O>() : nullptr;
    for (size_t i = 0; i < st.size(); ++i) {
      out_mean[i] = static_cast<O>(st[i].mean);
      if (variance) out_var[i] = static_cast<O>(st[i].m2 / count);
    }
  });
}

void mean_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  moments_into(n, inputs, outputs.first(1), false);
}

void moments_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  moments_into(n, inputs, outputs.first(2), true);
}

// max (kMax) or min, NaN-propagating like NumPy; the dtype is kept.
template <bool kMax>
void extreme_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  const ReducePlan p = plan_reduce(n, x.shape());
  INGOT_CHECK(p.count > 0 || p.out_numel == 0, n.op,
              ": cannot reduce over a zero-size dimension (no identity), input shape ",
              to_string(x.shape()));
  outputs[0] = Tensor(od, p.out_shape);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    using L = std::numeric_limits<C>;
    C identity;
    if constexpr (L::has_infinity)
      identity = kMax ? -L::infinity() : L::infinity();
    else
      identity = kMax ? L::lowest() : L::max();
    auto acc = std::make_unique<C[]>(static_cast<size_t>(p.out_numel));  // not vector<bool>
    std::fill_n(acc.get(), p.out_numel, identity);
    accumulate(p, x.data<T>(), acc.get(), [](C& a, T t) {
      const C v = static_cast<C>(t);
      if constexpr (std::is_floating_point_v<C>) {
        if (std::isnan(v)) a = v;  // once a is NaN, no comparison below replaces it
      }
      if (kMax ? v > a : v < a) a = v;
    });
    T* out = outputs[0].data<T>();
    for (int64_t i = 0; i < p.out_numel; ++i) out[i] = static_cast<T>(acc[i]);
  });
}

// Reduced dims become 1 (keepdims) or vanish; kept dims unify with the input. All outputs
// (moments has two) get that shape.
void reduce_shape(ShapeInfer& s) {
  if (!s.has_rank(s.in(0))) return;
  const int r = s.rank(s.in(0));
  std::vector<int> axes;
  bool keep = false;
  or_fail(s, [&] {
    axes = axes_attr(s.node(), r);
    keep = keepdims_attr(s.node());
  });
  std::vector<bool> reduced(static_cast<size_t>(r), false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  for (size_t o = 0; o < s.node().outputs.size(); ++o) {
    const ValueId out = s.out(static_cast<int>(o));
    s.set_rank(out, keep ? r : r - static_cast<int>(axes.size()));
    int j = 0;
    for (int d = 0; d < r; ++d) {
      if (!reduced[static_cast<size_t>(d)])
        s.unify(s.dim(out, j++), s.dim(s.in(0), d));
      else if (keep)
        s.bind(s.dim(out, j++), 1);
    }
  }
}

void sum_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  out[0] = in[0] == DType::Bool ? DType::Int64 : in[0];
}

void float_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  for (DType& o : out) o = to_floating(in[0]);
}

// ---------------------------------------------------------------------------------------------
// argmax

void argmax_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  const int axis = argmax_axis(n, x.rank());
  const bool keep = keepdims_attr(n);
  const AxisSplit sp = split_at(x.shape(), axis);
  Shape out_shape = x.shape();
  if (keep)
    out_shape[static_cast<size_t>(axis)] = 1;
  else
    out_shape.erase(out_shape.begin() + axis);
  INGOT_CHECK(sp.n > 0 || numel(out_shape) == 0, n.op, ": axis ", axis,
              " has size 0, so there is no maximum; input shape ", to_string(x.shape()));
  outputs[0] = Tensor(od, out_shape);  // zero-filled: index 0
  int64_t* idx = outputs[0].data<int64_t>();
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* px = x.data<T>();
    // Scan the axis one whole inner block at a time, keeping the best so far per position.
    auto best = std::make_unique<C[]>(static_cast<size_t>(sp.inner));  // not vector<bool>
    for (int64_t o = 0; o < sp.outer; ++o) {
      const T* block = px + o * sp.n * sp.inner;
      int64_t* oi = idx + o * sp.inner;
      for (int64_t i = 0; i < sp.inner; ++i) best[i] = static_cast<C>(block[i]);
      for (int64_t k = 1; k < sp.n; ++k) {
        const T* row = block + k * sp.inner;
        for (int64_t i = 0; i < sp.inner; ++i) {
          const C v = static_cast<C>(row[i]);
          C& b = best[i];
          bool better = v > b;  // strict: the first maximum wins
          if constexpr (std::is_floating_point_v<C>)
            better = better || (std::isnan(v) && !std::isnan(b));
          if (better) {
            b = v;
            oi[i] = k;
          }
        }
      }
    }
  });
}

void argmax_shape(ShapeInfer& s) {
  if (!s.has_rank(s.in(0))) return;
  const int r = s.rank(s.in(0));
  int axis = 0;
  bool keep = false;
  or_fail(s, [&] {
    axis = argmax_axis(s.node(), r);
    keep = keepdims_attr(s.node());
  });
  s.set_rank(s.out(), keep ? r : r - 1);
  int j = 0;
  for (int d = 0; d < r; ++d) {
    if (d != axis)
      s.unify(s.dim(s.out(), j++), s.dim(s.in(0), d));
    else if (keep)
      s.bind(s.dim(s.out(), j++), 1);
  }
}

void int64_dtype(const Node&, std::span<const DType>, std::span<DType> out) {
  out[0] = DType::Int64;
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax

// Rows are the `n` elements along the axis, `inner` apart. Each block of `inner` rows is done
// together, walking memory in order: the max, then exp(x - max) and its sum (in double), then
// the output. Subtracting the max keeps exp from overflowing.
template <bool kLog, class TI, class TO>
void softmax_rows(const TI* x, TO* y, const AxisSplit& sp) {
  using C = compute_t<TO>;
  const int64_t n = sp.n, inner = sp.inner;
  std::vector<C> mx(static_cast<size_t>(inner)), norm(static_cast<size_t>(inner));
  std::vector<C> buf(static_cast<size_t>(n * inner));  // x - max (log) or exp(x - max)
  std::vector<double> sum(static_cast<size_t>(inner));
  for (int64_t o = 0; o < sp.outer; ++o) {
    const TI* xb = x + o * n * inner;
    TO* yb = y + o * n * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<C>::infinity());
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i)
        mx[i] = std::max(mx[i], static_cast<C>(xb[k * inner + i]));
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t i = 0; i < inner; ++i) {
        const C d = static_cast<C>(xb[k * inner + i]) - mx[i];
        const C e = std::exp(d);
        sum[i] += static_cast<double>(e);
        buf[k * inner + i] = kLog ? d : e;
      }
    }
    for (int64_t i = 0; i < inner; ++i)
      norm[i] = static_cast<C>(kLog ? std::log(sum[i]) : 1.0 / sum[i]);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const C v = buf[k * inner + i];
        yb[k * inner + i] = static_cast<TO>(kLog ? v - norm[i] : v * norm[i]);
      }
  }
}

template <bool kLog>
void softmax_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType od = output_dtypes(n, inputs)[0];
  const Tensor x = inputs[0].contiguous();
  const AxisSplit sp = split_at(x.shape(), axis_attr(n, x.rank()));
  outputs[0] = Tensor(od, x.shape());
  Tensor& y = outputs[0];
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_v<T>)
      softmax_rows<kLog>(x.data<T>(), y.data<T>(), sp);
    else
      softmax_rows<kLog>(x.data<T>(), y.data<float>(), sp);
  });
}

void softmax_shape(ShapeInfer& s) {
  s.same_shape(s.in(0), s.out());
  if (s.has_rank(s.in(0))) or_fail(s, [&] { axis_attr(s.node(), s.rank(s.in(0))); });
}

// ---------------------------------------------------------------------------------------------
// Ops for gradients: sum_to_like (the inverse of a broadcast) and numel (an element count
// read at run time, for means over symbolic dims)

void sum_to_like_shape(ShapeInfer& s) {
  if (s.has_rank(s.in(1))) s.set_dims(s.out(), s.dims(s.in(1)));
}

void sum_to_like_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  require_float(n, in[0], "input");
  out[0] = in[0];
}

// Sums x over the dims that NumPy broadcasting expanded from `like`'s shape, in double.
void sum_to_like_kernel(const Node&, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const Shape& xs = inputs[0].shape();
  const Shape& ls = inputs[1].shape();
  INGOT_CHECK(broadcast_shapes(ls, xs, "sum_to_like") == xs, "sum_to_like: ", to_string(ls),
              " does not broadcast to ", to_string(xs));
  Tensor acc(DType::Float64, ls);
  double* pa = acc.data<double>();
  const Tensor x = inputs[0].astype(DType::Float64);
  const double* px = x.data<double>();
  for_each_strided<1>(xs, {broadcast_strides(ls, xs)}, [&](int64_t i, int64_t o) { pa[o] += px[i]; });
  outputs[0] = acc.astype(inputs[0].dtype());
}

void numel_shape(ShapeInfer& s) { s.set_rank(s.out(), 0); }

void numel_dtype(const Node& n, std::span<const DType>, std::span<DType> out) {
  out[0] = n.attrs.get_dtype("dtype");
}

void numel_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const Shape& xs = inputs[0].shape();
  double count = 1;
  for (int a : axes_attr(n, static_cast<int>(xs.size()))) count *= static_cast<double>(xs[static_cast<size_t>(a)]);
  outputs[0] = Tensor::full(DType::Float64, {}, count).astype(n.attrs.get_dtype("dtype"));
}

// ---------------------------------------------------------------------------------------------
// Gradient rules

using Ctx = VjpContext;

// The normalized reduced axes of a reduction node's input (all when `axes` is empty).
std::vector<int64_t> reduced_axes(Ctx& c) {
  std::vector<int64_t> out;
  for (int a : axes_attr(c.node(), c.rank(c.in(0)))) out.push_back(a);
  return out;
}

// A reduced value with its reduced axes restored as size 1 (keepdims), so it broadcasts
// against the input.
ValueId kept(Ctx& c, ValueId reduced) {
  return keepdims_attr(c.node()) ? reduced : c.expand_dims(reduced, reduced_axes(c));
}

void sum_vjp(Ctx& c) { c.set_grad(0, c.broadcast_to_like(kept(c, c.grad_out()), c.in(0))); }

void mean_vjp(Ctx& c) {
  const ValueId g = kept(c, c.grad_out());
  const ValueId n = c.count(c.in(0), reduced_axes(c), c.dtype(g));
  c.set_grad(0, c.broadcast_to_like(c.op("div", {g, n}), c.in(0)));
}

// max/min: the gradient is shared evenly by the elements equal to the extreme.
void extreme_vjp(Ctx& c) {
  const ValueId x = c.in(0);
  const ValueId hit = c.op("cast", {c.op("equal", {x, kept(c, c.out())})},
                           {{"dtype", std::string(dtype_name(c.dtype(x)))}});
  const ValueId ties = c.op("sum", {hit}, {{"axes", reduced_axes(c)}, {"keepdims", int64_t{1}}});
  c.set_grad(0, c.op("mul", {c.op("div", {hit, ties}), kept(c, c.grad_out())}));
}

// mean m = sum x / n, variance v = sum (x - m)^2 / n: dx = gm / n + gv 2 (x - m) / n.
void moments_vjp(Ctx& c) {
  const ValueId x = c.in(0);
  const std::vector<int64_t> axes = reduced_axes(c);
  const DType t = c.dtype(c.out(0));
  const ValueId n = c.count(x, axes, t);
  if (c.grad_out(0) >= 0)
    c.set_grad(0, c.broadcast_to_like(c.op("div", {kept(c, c.grad_out(0)), n}), c.cast_like(x, c.out(0))));
  if (c.grad_out(1) >= 0) {
    const ValueId centered = c.op("sub", {c.cast_like(x, c.out(0)), kept(c, c.out(0))});
    const ValueId scale = c.op("div", {c.scalar(2, t), n});
    c.set_grad(0, c.op("mul", {c.op("mul", {kept(c, c.grad_out(1)), scale}), centered}));
  }
}

ValueId sum_keep(Ctx& c, ValueId v, int64_t axis) {
  return c.op("sum", {v}, {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}});
}

void softmax_vjp(Ctx& c) {  // y (g - sum(g y))
  const ValueId y = c.out(), g = c.grad_out();
  const int64_t axis = axis_attr(c.node(), c.rank(y));
  const ValueId dot = sum_keep(c, c.op("mul", {g, y}), axis);
  c.set_grad(0, c.op("mul", {y, c.op("sub", {g, dot})}));
}

void log_softmax_vjp(Ctx& c) {  // g - exp(y) sum(g)
  const ValueId y = c.out(), g = c.grad_out();
  const int64_t axis = axis_attr(c.node(), c.rank(y));
  c.set_grad(0, c.op("sub", {g, c.op("mul", {c.op("exp", {y}), sum_keep(c, g, axis)})}));
}

void sum_to_like_vjp(Ctx& c) { c.set_grad(0, c.broadcast_to_like(c.grad_out(), c.in(0))); }

// ---------------------------------------------------------------------------------------------

void define(const char* name, int min_in, int max_in, int outs, FusionClass fusion, ShapeRule shape,
            DTypeRule dtype, Kernel eval, const char* doc, VjpRule vjp) {
  register_op(OpDef{name, min_in, max_in, outs, fusion, shape, dtype, eval, doc, vjp});
}

// The fuzzer's attributes: reductions over any axes with or without keepdims; one axis for
// argmax and the row kernels.
Attrs sample_reduce(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  const int r = static_cast<int>(in[0].size());
  return {{"axes", d.axes(r)}, {"keepdims", static_cast<int64_t>(d.coin())}};
}
Attrs sample_axis_keepdims(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  return {{"axis", d.axis(static_cast<int>(in[0].size()))}, {"keepdims", static_cast<int64_t>(d.coin())}};
}
Attrs sample_axis(std::span<const Shape> in, uint64_t seed) {
  ops::Draw d{seed};
  return {{"axis", d.axis(static_cast<int>(in[0].size()))}};
}

}  // namespace

void register_reduce_ops() {
  constexpr FusionClass kRed = FusionClass::Reduction, kRow = FusionClass::RowKernel;
  define("sum", 1, 1, 1, kRed, reduce_shape, sum_dtype, sum_kernel,
         "sum over {axes} (all if empty) {keepdims}; bool sums to int64", sum_vjp);
  define("mean", 1, 1, 1, kRed, reduce_shape, float_dtype, mean_kernel,
         "mean over {axes} {keepdims}; float result", mean_vjp);
  define("max", 1, 1, 1, kRed, reduce_shape, dtype_same_as_input, extreme_kernel<true>,
         "max over {axes} {keepdims}; NaN propagates", extreme_vjp);
  define("min", 1, 1, 1, kRed, reduce_shape, dtype_same_as_input, extreme_kernel<false>,
         "min over {axes} {keepdims}; NaN propagates", extreme_vjp);
  define("argmax", 1, 1, 1, kRed, argmax_shape, int64_dtype, argmax_kernel,
         "int64 index of the first max along {axis} {keepdims}; NaN counts as max", no_gradient);
  define("moments", 1, 1, 2, kRed, reduce_shape, float_dtype, moments_kernel,
         "(mean, biased variance) over {axes} {keepdims}", moments_vjp);
  define("softmax", 1, 1, 1, kRow, softmax_shape, float_dtype, softmax_kernel<false>,
         "exp(x) / sum exp(x) along {axis = -1}, max-subtracted", softmax_vjp);
  define("log_softmax", 1, 1, 1, kRow, softmax_shape, float_dtype, softmax_kernel<true>,
         "x - log sum exp(x) along {axis = -1}, max-subtracted", log_softmax_vjp);
  // For gradients.
  define("sum_to_like", 2, 2, 1, FusionClass::Opaque, sum_to_like_shape, sum_to_like_dtype,
         sum_to_like_kernel, "sum_to_like(x, like): x summed over the dims broadcasting expanded from like", sum_to_like_vjp);
  define("numel", 1, 1, 1, FusionClass::Opaque, numel_shape, numel_dtype, numel_kernel,
         "element count of x over {axes} (all if empty) as a scalar of {dtype}", no_gradient);
  for (const char* op : {"sum", "mean", "max", "min", "moments"}) set_attr_sampler(op, sample_reduce);
  set_attr_sampler("argmax", sample_axis_keepdims);
  for (const char* op : {"softmax", "log_softmax"}) set_attr_sampler(op, sample_axis);
}

}  // namespace ingot::ops
