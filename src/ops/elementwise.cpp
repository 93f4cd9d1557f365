// The elementwise family: unary math, cast, broadcasting binary arithmetic and comparisons,
// and where. Kernels dispatch on dtype once and run typed loops over raw pointers; Half and
// BFloat16 compute in float, float64 in double, integers wrap instead of overflowing.
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"

namespace ingot::ops {
namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers

// The kernel asks the op's own dtype rule for its output dtype, so a kernel can never disagree
// with type inference and rejects exactly what the rule rejects. Checks the arity first, so
// neither indexes past the inputs it was given.
DType output_dtype(const Node& n, std::span<const Tensor> inputs) {
  const OpDef& def = get_op(n.op);
  INGOT_CHECK(static_cast<int>(inputs.size()) == def.min_inputs, n.op, ": expects ", def.min_inputs,
              " inputs, got ", inputs.size());
  std::vector<DType> in;
  for (const Tensor& t : inputs) in.push_back(t.dtype());
  DType out = DType::Float32;
  def.dtype(n, in, std::span<DType>(&out, 1));
  return out;
}


// C's conversion, with defined results where C leaves them undefined: float to integer
// truncates toward zero, saturates out of range and maps NaN to 0; anything to bool is != 0.
template <class To, class From>
To value_cast(From x) {
  using F = compute_t<From>;
  const F v = static_cast<F>(x);
  if constexpr (std::is_same_v<To, bool>) {
    return v != F(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<F>) {
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<F>(std::numeric_limits<To>::lowest()))
      return std::numeric_limits<To>::lowest();
    if (v >= static_cast<F>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// A contiguous tensor holding `t` converted to `dtype`; `t` itself (no copy) when it already is.
Tensor converted(const Tensor& t, DType dtype) {
  Tensor src = t.contiguous();
  if (src.dtype() == dtype) return src;
  Tensor out(dtype, src.shape());
  dispatch_dtype(src.dtype(), [&](auto from) {
    using F = decltype(from);
    dispatch_dtype(dtype, [&](auto to) {
      using T = decltype(to);
      const F* s = src.data<F>();
      T* d = out.data<T>();
      for (int64_t i = 0, n = src.numel(); i < n; ++i) d[i] = value_cast<T>(s[i]);
    });
  });
  return out;
}

// Integer arithmetic in the unsigned type of the promoted operands: wraps like NumPy, where
// signed overflow would be undefined behaviour.
template <class C, class Op>
C wrapping(C a, C b, Op op) {
  using U = std::make_unsigned_t<decltype(C{} + C{})>;
  return static_cast<C>(op(static_cast<U>(a), static_cast<U>(b)));
}

// ---------------------------------------------------------------------------------------------
// Unary ops. f(x) runs in the compute type C of the output dtype.

// One line per op reads as a table.
// clang-format off
struct Exp { template <class C> static C f(C x) { return std::exp(x); } };
struct Log { template <class C> static C f(C x) { return std::log(x); } };
struct Sqrt { template <class C> static C f(C x) { return std::sqrt(x); } };
struct Rsqrt { template <class C> static C f(C x) { return C(1) / std::sqrt(x); } };
struct Sin { template <class C> static C f(C x) { return std::sin(x); } };
struct Cos { template <class C> static C f(C x) { return std::cos(x); } };
struct Tanh { template <class C> static C f(C x) { return std::tanh(x); } };
struct Erf { template <class C> static C f(C x) { return std::erf(x); } };
// clang-format on
struct Sigmoid {
  // Two branches so exp never overflows.
  template <class C>
  static C f(C x) {
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  }
};
struct GeluErf {
  template <class C>
  static C f(C x) {
    return C(0.5) * x * (C(1) + std::erf(x / std::numbers::sqrt2_v<C>));
  }
};
struct GeluTanh {
  template <class C>
  static C f(C x) {
    const C k = std::numbers::sqrt2_v<C> * std::numbers::inv_sqrtpi_v<C>;  // sqrt(2/pi)
    return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
  }
};

struct Neg {
  template <class C>
  static C f(C x) {
    if constexpr (std::is_integral_v<C>)
      return wrapping(C(0), x, std::minus<>{});
    else
      return -x;
  }
};
struct Abs {
  template <class C>
  static C f(C x) {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else if constexpr (std::is_integral_v<C>)
      return x < 0 ? Neg::f(x) : x;
    else
      return std::abs(x);
  }
};
struct Relu {
  // NaN passes through (x < 0 is false), as in PyTorch.
  template <class C>
  static C f(C x) {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < C(0) ? C(0) : x;
  }
};
struct Sign {
  // sign(0) = 0 and sign(NaN) = NaN: only strictly signed values move.
  template <class C>
  static C f(C x) {
    if constexpr (std::is_unsigned_v<C>)
      return static_cast<C>(x != 0);
    else
      return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
  }
};
struct Floor {
  template <class C>
  static C f(C x) {
    if constexpr (std::is_integral_v<C>)
      return x;
    else
      return std::floor(x);
  }
};
struct Ceil {
  template <class C>
  static C f(C x) {
    if constexpr (std::is_integral_v<C>)
      return x;
    else
      return std::ceil(x);
  }
};

template <class Op, class TI, class TO>
void unary_loop(const TI* in, TO* out, int64_t n) {
  using C = compute_t<TO>;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<TO>(Op::f(static_cast<C>(in[i])));
}

// kFloatResult: integer and bool inputs compute in float32 (the dtype rule says so).
template <class Op, bool kFloatResult>
void unary_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType out_dtype = output_dtype(n, inputs);
  const Tensor x = inputs[0].contiguous();
  outputs[0] = Tensor(out_dtype, x.shape());
  Tensor& y = outputs[0];
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kFloatResult && !is_float_v<T>)
      unary_loop<Op>(x.data<T>(), y.data<float>(), x.numel());
    else
      unary_loop<Op>(x.data<T>(), y.data<T>(), x.numel());
  });
}

std::string gelu_mode(const Node& n) {
  std::string mode = n.attrs.get_string("approximate", "none");
  INGOT_CHECK(mode == "none" || mode == "tanh",
              "gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\"");
  return mode;
}

void gelu_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  if (gelu_mode(n) == "tanh")
    unary_kernel<GeluTanh, true>(n, inputs, outputs);
  else
    unary_kernel<GeluErf, true>(n, inputs, outputs);
}

void cast_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType to = output_dtype(n, inputs);
  outputs[0] = inputs[0].dtype() == to ? inputs[0].clone() : converted(inputs[0], to);
}

void unary_shape(ShapeInfer& s) { s.same_shape(s.in(0), s.out()); }

void gelu_shape(ShapeInfer& s) {
  or_fail(s, [&] { gelu_mode(s.node()); });
  unary_shape(s);
}

void float_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  out[0] = to_floating(in[0]);
}

void neg_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(in[0] != DType::Bool, "neg: bool input is not supported");
  out[0] = in[0];
}

void cast_dtype(const Node& n, std::span<const DType>, std::span<DType> out) {
  out[0] = n.attrs.get_dtype("dtype");
}

// ---------------------------------------------------------------------------------------------
// Binary ops and where. Operands are converted to one compute dtype, then broadcast.

struct Add {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>)
      return wrapping(a, b, std::plus<>{});
    else
      return a + b;
  }
};
struct Sub {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>)
      return wrapping(a, b, std::minus<>{});
    else
      return a - b;
  }
};
struct Mul {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>)
      return wrapping(a, b, std::multiplies<>{});
    else
      return a * b;
  }
};
// clang-format off
struct Div { template <class C> static C f(C a, C b) { return a / b; } };  // floats only
// clang-format on
struct Pow {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>)
      return value_cast<C>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    else
      return std::pow(a, b);
  }
};
// mod: NumPy's remainder, with the sign of the divisor (Python's %); fmod: C's, with the sign of
// the dividend. An integer divisor of 0 gives 0 (NumPy's result; C leaves it undefined), as does
// -1 (whose C remainder overflows for the most negative dividend); a float one NaN.
struct Mod {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1)) return C(0);
      C r = static_cast<C>(a % b);
      if (r != C(0) && ((r < C(0)) != (b < C(0)))) r = static_cast<C>(r + b);
      return r;
    } else {
      C r = std::fmod(a, b);
      if (std::isnan(r)) return r;
      if (r == C(0)) return std::copysign(C(0), b);
      return (r < C(0)) != (b < C(0)) ? r + b : r;
    }
  }
};
struct FMod {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1)) return C(0);
      return static_cast<C>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
// maximum/minimum propagate NaN, as NumPy does.
struct Maximum {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_floating_point_v<C>)
      if (std::isnan(a) || std::isnan(b)) return a + b;
    return a < b ? b : a;
  }
};
struct Minimum {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_floating_point_v<C>)
      if (std::isnan(a) || std::isnan(b)) return a + b;
    return b < a ? b : a;
  }
};
// clang-format off
struct Equal { template <class C> static bool f(C a, C b) { return a == b; } };
struct NotEqual { template <class C> static bool f(C a, C b) { return a != b; } };
struct Less { template <class C> static bool f(C a, C b) { return a < b; } };
struct LessEqual { template <class C> static bool f(C a, C b) { return a <= b; } };
struct Greater { template <class C> static bool f(C a, C b) { return a > b; } };
struct GreaterEqual { template <class C> static bool f(C a, C b) { return a >= b; } };
// clang-format on

// out[i] = f(a[ia], b[ib]) over the broadcast shape of `out`; a and b are contiguous.
template <class T, class O, class F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  O* po = out.data<O>();
  const int64_t n = out.numel();
  if (a.shape() == b.shape()) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
  } else if (b.numel() == 1 && a.shape() == out.shape()) {
    const T s = pb[0];
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], s);
  } else {
    for_each_strided<2>(
        out.shape(),
        {broadcast_strides(a.shape(), out.shape()), broadcast_strides(b.shape(), out.shape())},
        [&](int64_t i, int64_t ia, int64_t ib) { po[i] = f(pa[ia], pb[ib]); });
  }
}

// kCompare: the result is bool and the operands compute in their promoted dtype; otherwise
// they compute in the output dtype (promoted, or floating for div).
template <class Op, bool kCompare>
void binary_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType out_dtype = output_dtype(n, inputs);
  const DType compute = kCompare ? promote_types(inputs[0].dtype(), inputs[1].dtype()) : out_dtype;
  const Tensor a = converted(inputs[0], compute);
  const Tensor b = converted(inputs[1], compute);
  outputs[0] = Tensor(out_dtype, broadcast_shapes(a.shape(), b.shape(), n.op.c_str()));
  dispatch_dtype(compute, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    using O = std::conditional_t<kCompare, bool, T>;
    binary_loop<T, O>(a, b, outputs[0], [](T x, T y) {
      return static_cast<O>(Op::f(static_cast<C>(x), static_cast<C>(y)));
    });
  });
}

void where_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const DType dt = output_dtype(n, inputs);
  const Tensor cond = converted(inputs[0], DType::Bool);
  const Tensor a = converted(inputs[1], dt);
  const Tensor b = converted(inputs[2], dt);
  const Shape ab = broadcast_shapes(a.shape(), b.shape(), "where: a and b");
  outputs[0] = Tensor(dt, broadcast_shapes(cond.shape(), ab, "where: cond and a/b"));
  Tensor& out = outputs[0];
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    const bool* pc = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    if (cond.shape() == out.shape() && a.shape() == out.shape() && b.shape() == out.shape()) {
      for (int64_t i = 0, e = out.numel(); i < e; ++i) po[i] = pc[i] ? pa[i] : pb[i];
      return;
    }
    const Shape& s = out.shape();
    for_each_strided<3>(
        s,
        {broadcast_strides(cond.shape(), s), broadcast_strides(a.shape(), s),
         broadcast_strides(b.shape(), s)},
        [&](int64_t i, int64_t ic, int64_t ia, int64_t ib) { po[i] = pc[ic] ? pa[ia] : pb[ib]; });
  });
}

// out dim = broadcast of the operands' dims aligned at it. Known sizes of 1 drop out first so
// that a pairwise broadcast of the rest never compares a real size against a 1.
void broadcast_dims(ShapeInfer& s, const std::vector<DimVar>& dims, DimVar out) {
  std::vector<DimVar> rest;
  for (DimVar d : dims)
    if (s.value(d) != 1) rest.push_back(d);
  if (rest.empty()) {
    s.bind(out, 1);
    return;
  }
  if (rest.size() == 1) s.unify(out, rest[0]);
  for (size_t i = 1; i < rest.size(); ++i) s.broadcast(rest[i - 1], rest[i], out);
}

// NumPy broadcasting of all inputs; the output rank is the largest input rank.
void broadcast_shape(ShapeInfer& s) {
  int r = 0;
  for (int i = 0; i < s.num_inputs(); ++i) {
    if (!s.has_rank(s.in(i))) return;
    r = std::max(r, s.rank(s.in(i)));
  }
  const bool is_where = s.num_inputs() == 3;
  auto name = [&](int i) -> std::string {
    static const char* const kNames[] = {"cond", "a", "b"};
    return kNames[is_where ? i : i + 1];
  };
  s.set_rank(s.out(), r);
  for (int d = 0; d < r; ++d) {
    std::vector<DimVar> dims;
    int known_from = -1;
    int64_t known = 1;
    for (int i = 0; i < s.num_inputs(); ++i) {
      const int offset = r - s.rank(s.in(i));
      if (d < offset) continue;
      const DimVar dv = s.dim(s.in(i), d - offset);
      dims.push_back(dv);
      const auto v = s.value(dv);
      if (!v || *v == 1) continue;
      if (known_from >= 0 && *v != known)
        s.fail(s.node().op + ": " + name(known_from) + " and " + name(i) +
               " do not broadcast (sizes " + std::to_string(known) + " and " + std::to_string(*v) +
               " at output axis " + std::to_string(d) + ")");
      known_from = i;
      known = *v;
    }
    broadcast_dims(s, dims, s.dim(s.out(), d));
  }
}

void promoted_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  out[0] = promote_types(in[0], in[1]);
}

void sub_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(in[0] != DType::Bool || in[1] != DType::Bool, n.op,
              ": subtracting two bool tensors is not supported");
  promoted_dtype(n, in, out);
}

void div_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  out[0] = to_floating(promote_types(in[0], in[1]));
}

void bool_dtype(const Node&, std::span<const DType>, std::span<DType> out) { out[0] = DType::Bool; }

void where_dtype(const Node&, std::span<const DType> in, std::span<DType> out) {
  out[0] = promote_types(in[1], in[2]);
}

// ---------------------------------------------------------------------------------------------
// Gradient rules: one per differentiable op. `g` is the output's cotangent, `y` the output.

using Ctx = VjpContext;
ValueId mul(Ctx& c, ValueId a, ValueId b) { return c.op("mul", {a, b}); }
ValueId k(Ctx& c, double v) { return c.scalar_like(v, c.out()); }

// Unary ops: d = f'(x) as a graph; the input gets g * d.
template <ValueId (*kDerivative)(Ctx&)>
void unary_vjp(Ctx& c) {
  c.set_grad(0, mul(c, c.grad_out(), kDerivative(c)));
}
// clang-format off
ValueId d_exp(Ctx& c) { return c.out(); }
ValueId d_log(Ctx& c) { return c.op("div", {k(c, 1), c.in(0)}); }
ValueId d_sqrt(Ctx& c) { return c.op("div", {k(c, 0.5), c.out()}); }
ValueId d_rsqrt(Ctx& c) { return c.op("div", {mul(c, c.out(), k(c, -0.5)), c.in(0)}); }
ValueId d_sin(Ctx& c) { return c.op("cos", {c.in(0)}); }
ValueId d_cos(Ctx& c) { return c.op("neg", {c.op("sin", {c.in(0)})}); }
ValueId d_tanh(Ctx& c) { return c.op("sub", {k(c, 1), mul(c, c.out(), c.out())}); }
ValueId d_sigmoid(Ctx& c) { return mul(c, c.out(), c.op("sub", {k(c, 1), c.out()})); }
ValueId d_abs(Ctx& c) { return c.op("sign", {c.in(0)}); }
// clang-format on
ValueId d_erf(Ctx& c) {  // 2/sqrt(pi) e^(-x^2)
  const ValueId x = c.in(0);
  return mul(c, k(c, 2 * std::numbers::inv_sqrtpi), c.op("exp", {c.op("neg", {mul(c, x, x)})}));
}
ValueId d_gelu(Ctx& c) {
  const ValueId x = c.in(0);
  if (c.attrs().get_string("approximate", "none") == "tanh") {
    // t = tanh(s (x + a x^3)), s = sqrt(2/pi): 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 a x^2)
    const double s = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, a = 0.044715;
    const ValueId x2 = mul(c, x, x);
    const ValueId inner = mul(c, k(c, s), c.op("add", {x, mul(c, k(c, a), mul(c, x2, x))}));
    const ValueId t = c.op("tanh", {inner});
    const ValueId left = mul(c, k(c, 0.5), c.op("add", {k(c, 1), t}));
    const ValueId dt = c.op("sub", {k(c, 1), mul(c, t, t)});
    const ValueId dinner = mul(c, k(c, s), c.op("add", {k(c, 1), mul(c, k(c, 3 * a), x2)}));
    return c.op("add", {left, mul(c, mul(c, k(c, 0.5), x), mul(c, dt, dinner))});
  }
  // Phi(x) + x phi(x): Phi(x) = 0.5 (1 + erf(x / sqrt 2)), phi(x) = e^(-x^2/2) / sqrt(2 pi)
  const ValueId cdf = mul(c, k(c, 0.5), c.op("add", {k(c, 1), c.op("erf", {mul(c, x, k(c, std::numbers::sqrt2 / 2))})}));
  const ValueId pdf = mul(c, k(c, 0.5 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi),
                          c.op("exp", {mul(c, mul(c, x, x), k(c, -0.5))}));
  return c.op("add", {cdf, mul(c, x, pdf)});
}

void neg_vjp(Ctx& c) { c.set_grad(0, c.op("neg", {c.grad_out()})); }
void pass_through_vjp(Ctx& c) { c.set_grad(0, c.grad_out()); }  // cast: set_grad casts back

void relu_vjp(Ctx& c) {
  const ValueId x = c.in(0);
  c.set_grad(0, c.op("where", {c.op("greater", {x, c.scalar_like(0, x)}), c.grad_out(), k(c, 0)}));
}

// Binary ops: each operand's share of g, summed down to its own (pre-broadcast) shape.
void add_vjp(Ctx& c) {
  for (int i = 0; i < 2; ++i)
    if (c.needs_grad(i)) c.set_grad(i, c.sum_to_like(c.grad_out(), c.in(i)));
}
void sub_vjp(Ctx& c) {
  if (c.needs_grad(0)) c.set_grad(0, c.sum_to_like(c.grad_out(), c.in(0)));
  if (c.needs_grad(1)) c.set_grad(1, c.sum_to_like(c.op("neg", {c.grad_out()}), c.in(1)));
}
void mul_vjp(Ctx& c) {
  if (c.needs_grad(0)) c.set_grad(0, c.sum_to_like(mul(c, c.grad_out(), c.in(1)), c.in(0)));
  if (c.needs_grad(1)) c.set_grad(1, c.sum_to_like(mul(c, c.grad_out(), c.in(0)), c.in(1)));
}
void div_vjp(Ctx& c) {  // y = a / b: da = g / b, db = -g y / b
  const ValueId g = c.grad_out(), b = c.in(1);
  if (c.needs_grad(0)) c.set_grad(0, c.sum_to_like(c.op("div", {g, b}), c.in(0)));
  if (c.needs_grad(1))
    c.set_grad(1, c.sum_to_like(c.op("neg", {c.op("div", {mul(c, g, c.out()), b})}), b));
}
void pow_vjp(Ctx& c) {  // y = a^b: da = g b a^(b-1), db = g y log(a)
  const ValueId g = c.grad_out(), a = c.in(0), b = c.in(1);
  if (c.needs_grad(0)) {
    const ValueId am1 = c.op("pow", {a, c.op("sub", {b, c.scalar_like(1, b)})});
    c.set_grad(0, c.sum_to_like(mul(c, g, mul(c, b, am1)), a));
  }
  if (c.needs_grad(1))
    c.set_grad(1, c.sum_to_like(mul(c, g, mul(c, c.out(), c.op("log", {a}))), b));
}
// y = a - q b with q = floor(a / b) (mod) or trunc(a / b) (fmod), piecewise constant: da = g,
// db = -g q.
template <bool kFloor>
void mod_vjp(Ctx& c) {
  const ValueId g = c.grad_out(), a = c.in(0), b = c.in(1);
  if (c.needs_grad(0)) c.set_grad(0, c.sum_to_like(g, a));
  if (c.needs_grad(1)) {
    const ValueId t = c.op("div", {a, b});
    const ValueId q = kFloor ? c.op("floor", {t}) : mul(c, c.op("sign", {t}), c.op("floor", {c.op("abs", {t})}));
    c.set_grad(1, c.sum_to_like(c.op("neg", {mul(c, g, q)}), b));
  }
}
// maximum/minimum: g goes to the operand that was picked; ties go to `a`.
template <bool kMax>
void extreme_vjp(Ctx& c) {
  const ValueId a = c.in(0), b = c.in(1), g = c.grad_out(), zero = k(c, 0);
  const ValueId a_wins = c.op(kMax ? "greater_equal" : "less_equal", {a, b});
  if (c.needs_grad(0)) c.set_grad(0, c.sum_to_like(c.op("where", {a_wins, g, zero}), a));
  if (c.needs_grad(1)) c.set_grad(1, c.sum_to_like(c.op("where", {a_wins, zero, g}), b));
}
void where_vjp(Ctx& c) {
  const ValueId cond = c.in(0), g = c.grad_out(), zero = k(c, 0);
  if (c.needs_grad(1)) c.set_grad(1, c.sum_to_like(c.op("where", {cond, g, zero}), c.in(1)));
  if (c.needs_grad(2)) c.set_grad(2, c.sum_to_like(c.op("where", {cond, zero, g}), c.in(2)));
}

// ---------------------------------------------------------------------------------------------

void define(const char* name, int arity, ShapeRule shape, DTypeRule dtype, Kernel eval,
            const char* doc, VjpRule vjp) {
  register_op(OpDef{name, arity, arity, 1, FusionClass::Elementwise, shape, dtype, eval, doc, vjp});
}

}  // namespace

void register_elementwise_ops() {
  // Unary, float result (integers and bool compute in float32).
  define("exp", 1, unary_shape, float_dtype, unary_kernel<Exp, true>, "e^x", unary_vjp<d_exp>);
  define("log", 1, unary_shape, float_dtype, unary_kernel<Log, true>, "natural logarithm", unary_vjp<d_log>);
  define("sqrt", 1, unary_shape, float_dtype, unary_kernel<Sqrt, true>, "square root", unary_vjp<d_sqrt>);
  define("rsqrt", 1, unary_shape, float_dtype, unary_kernel<Rsqrt, true>, "1 / sqrt(x)", unary_vjp<d_rsqrt>);
  define("sin", 1, unary_shape, float_dtype, unary_kernel<Sin, true>, "sine", unary_vjp<d_sin>);
  define("cos", 1, unary_shape, float_dtype, unary_kernel<Cos, true>, "cosine", unary_vjp<d_cos>);
  define("tanh", 1, unary_shape, float_dtype, unary_kernel<Tanh, true>, "hyperbolic tangent", unary_vjp<d_tanh>);
  define("sigmoid", 1, unary_shape, float_dtype, unary_kernel<Sigmoid, true>, "1 / (1 + e^-x)", unary_vjp<d_sigmoid>);
  define("erf", 1, unary_shape, float_dtype, unary_kernel<Erf, true>, "error function", unary_vjp<d_erf>);
  define("gelu", 1, gelu_shape, float_dtype, gelu_kernel,
         "GELU {approximate: \"none\" (erf form) | \"tanh\"}", unary_vjp<d_gelu>);
  // Unary, same dtype.
  define("neg", 1, unary_shape, neg_dtype, unary_kernel<Neg, false>, "-x (integers wrap)", neg_vjp);
  define("abs", 1, unary_shape, dtype_same_as_input, unary_kernel<Abs, false>, "|x|", unary_vjp<d_abs>);
  define("relu", 1, unary_shape, dtype_same_as_input, unary_kernel<Relu, false>, "max(x, 0)", relu_vjp);
  define("sign", 1, unary_shape, dtype_same_as_input, unary_kernel<Sign, false>,
         "-1, 0 or 1 by the sign of x", no_gradient);
  define("floor", 1, unary_shape, dtype_same_as_input, unary_kernel<Floor, false>,
         "round toward -inf", no_gradient);
  define("ceil", 1, unary_shape, dtype_same_as_input, unary_kernel<Ceil, false>,
         "round toward +inf", no_gradient);
  define("cast", 1, unary_shape, cast_dtype, cast_kernel,
         "convert to {dtype} (float to int truncates, saturates; to bool is x != 0)", pass_through_vjp);
  // The fuzzer's casts bring every dtype into its programs: the ops after a cast meet integers,
  // bools and half floats, as far as their dtype rules accept them.
  set_attr_sampler("cast", [](std::span<const Shape>, uint64_t seed) -> Attrs {
    static const char* const types[] = {"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float64"};
    return {{"dtype", std::string(types[Draw{seed}.below(9)])}};
  });
  // Binary, broadcasting.
  define("add", 2, broadcast_shape, promoted_dtype, binary_kernel<Add, false>, "a + b", add_vjp);
  define("sub", 2, broadcast_shape, sub_dtype, binary_kernel<Sub, false>, "a - b", sub_vjp);
  define("mul", 2, broadcast_shape, promoted_dtype, binary_kernel<Mul, false>, "a * b", mul_vjp);
  define("div", 2, broadcast_shape, div_dtype, binary_kernel<Div, false>, "a / b (float result)", div_vjp);
  define("pow", 2, broadcast_shape, promoted_dtype, binary_kernel<Pow, false>, "a ^ b", pow_vjp);
  define("mod", 2, broadcast_shape, promoted_dtype, binary_kernel<Mod, false>,
         "remainder with the divisor's sign (NumPy mod, Python %); integer divisor 0 gives 0", mod_vjp<true>);
  define("fmod", 2, broadcast_shape, promoted_dtype, binary_kernel<FMod, false>,
         "remainder with the dividend's sign (C fmod); integer divisor 0 gives 0", mod_vjp<false>);
  define("maximum", 2, broadcast_shape, promoted_dtype, binary_kernel<Maximum, false>,
         "elementwise max (NaN propagates)", extreme_vjp<true>);
  define("minimum", 2, broadcast_shape, promoted_dtype, binary_kernel<Minimum, false>,
         "elementwise min (NaN propagates)", extreme_vjp<false>);
  define("equal", 2, broadcast_shape, bool_dtype, binary_kernel<Equal, true>, "a == b", no_gradient);
  define("not_equal", 2, broadcast_shape, bool_dtype, binary_kernel<NotEqual, true>, "a != b", no_gradient);
  define("less", 2, broadcast_shape, bool_dtype, binary_kernel<Less, true>, "a < b", no_gradient);
  define("less_equal", 2, broadcast_shape, bool_dtype, binary_kernel<LessEqual, true>, "a <= b", no_gradient);
  define("greater", 2, broadcast_shape, bool_dtype, binary_kernel<Greater, true>, "a > b", no_gradient);
  define("greater_equal", 2, broadcast_shape, bool_dtype, binary_kernel<GreaterEqual, true>,
         "a >= b", no_gradient);
  define("where", 3, broadcast_shape, where_dtype, where_kernel,
         "where(cond, a, b): a where cond is nonzero, else b", where_vjp);
}

}  // namespace ingot::ops
