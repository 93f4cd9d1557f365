// The elementwise family's unary ops: math with a float result, neg/abs/relu/sign/floor/ceil in
// the input's dtype, and cast. Kernels dispatch on dtype once and run typed loops over raw
// pointers; Half and BFloat16 compute in float, float64 in double, integers wrap.
#include <cmath>
#include <numbers>

#include "ops/elementwise_util.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"

namespace ingot::ops {
namespace {

using namespace elementwise;

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
struct Asin { template <class C> static C f(C x) { return std::asin(x); } };
struct Acos { template <class C> static C f(C x) { return std::acos(x); } };
struct Atan { template <class C> static C f(C x) { return std::atan(x); } };
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
// Gradient rules. Unary ops: d = f'(x) as a graph; the input gets g * d.
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
// asin' = 1 / sqrt(1 - x^2), acos' = -asin', atan' = 1 / (1 + x^2)
ValueId d_asin(Ctx& c) { return c.op("rsqrt", {c.op("sub", {k(c, 1), mul(c, c.in(0), c.in(0))})}); }
ValueId d_acos(Ctx& c) { return c.op("neg", {d_asin(c)}); }
ValueId d_atan(Ctx& c) { return c.op("div", {k(c, 1), c.op("add", {k(c, 1), mul(c, c.in(0), c.in(0))})}); }
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

std::string gelu_variant(const Node& n) {
  return n.attrs.get_string("approximate", "none") == "tanh" ? "ig_gelu_tanh" : "ig_gelu";
}

}  // namespace

// Each op: its reference kernel and gradient above; here its definition with the forms the CPU
// code generator, the Python emitters and ONNX write it in (ElementwiseForms, ir/op_registry.h),
// so that a new elementwise op is written in this file only (plus its test). The CPU functions
// are C++ source for generated programs, templates over the compute type C: float16/bfloat16
// compute in float, and float32 calls the prelude's vector math where it has it.
// clang-format off
void register_unary_ops() {
  using namespace elementwise;
  // Unary, float result (integers and bool compute in float32).
  define("exp", 1, unary_shape, float_dtype, unary_kernel<Exp, true>, "e^x", unary_vjp<d_exp>,
         {K::UnaryFloat, "ig_exp", R"(template <class C> inline C ig_exp(C x) {
  if constexpr (std::is_same<C, float>::value) return ig_vexp(x); else return std::exp(x);
})", true, nullptr, "exp(x)", "Exp"});
  define("log", 1, unary_shape, float_dtype, unary_kernel<Log, true>, "natural logarithm", unary_vjp<d_log>,
         {K::UnaryFloat, "ig_log", R"(template <class C> inline C ig_log(C x) {
  if constexpr (std::is_same<C, float>::value) return ig_vlog(x); else return std::log(x);
})", true, nullptr, "log(x)", "Log"});
  define("sqrt", 1, unary_shape, float_dtype, unary_kernel<Sqrt, true>, "square root", unary_vjp<d_sqrt>,
         {K::UnaryFloat, "ig_sqrt", "template <class C> inline C ig_sqrt(C x) { return std::sqrt(x); }",
          false, nullptr, "sqrt(x)", "Sqrt"});
  define("rsqrt", 1, unary_shape, float_dtype, unary_kernel<Rsqrt, true>, "1 / sqrt(x)", unary_vjp<d_rsqrt>,
         {K::UnaryFloat, "ig_rsqrt", "template <class C> inline C ig_rsqrt(C x) { return C(1) / std::sqrt(x); }",
          false, nullptr, "1 / sqrt(x)", ""});  // ONNX: Reciprocal of Sqrt (export_ops.cpp)
  define("sin", 1, unary_shape, float_dtype, unary_kernel<Sin, true>, "sine", unary_vjp<d_sin>,
         {K::UnaryFloat, "ig_sin", "template <class C> inline C ig_sin(C x) { return std::sin(x); }",
          false, nullptr, "sin(x)", "Sin"});
  define("cos", 1, unary_shape, float_dtype, unary_kernel<Cos, true>, "cosine", unary_vjp<d_cos>,
         {K::UnaryFloat, "ig_cos", "template <class C> inline C ig_cos(C x) { return std::cos(x); }",
          false, nullptr, "cos(x)", "Cos"});
  define("tanh", 1, unary_shape, float_dtype, unary_kernel<Tanh, true>, "hyperbolic tangent", unary_vjp<d_tanh>,
         {K::UnaryFloat, "ig_tanh", R"(template <class C> inline C ig_tanh(C x) {
  if constexpr (std::is_same<C, float>::value) return ig_vtanh(x); else return std::tanh(x);
})", true, nullptr, "tanh(x)", "Tanh"});
  define("erf", 1, unary_shape, float_dtype, unary_kernel<Erf, true>, "error function", unary_vjp<d_erf>,
         {K::UnaryFloat, "ig_erf", R"(template <class C> inline C ig_erf(C x) {
  if constexpr (std::is_same<C, float>::value) return ig_verf(x); else return std::erf(x);
})", true, nullptr, "", "Erf"});  // erf is not in the array API: each emitter writes it
  define("asin", 1, unary_shape, float_dtype, unary_kernel<Asin, true>, "inverse sine", unary_vjp<d_asin>,
         {K::UnaryFloat, "ig_asin", "template <class C> inline C ig_asin(C x) { return std::asin(x); }",
          false, nullptr, "asin(x)", "Asin"});
  define("acos", 1, unary_shape, float_dtype, unary_kernel<Acos, true>, "inverse cosine", unary_vjp<d_acos>,
         {K::UnaryFloat, "ig_acos", "template <class C> inline C ig_acos(C x) { return std::acos(x); }",
          false, nullptr, "acos(x)", "Acos"});
  define("atan", 1, unary_shape, float_dtype, unary_kernel<Atan, true>, "inverse tangent", unary_vjp<d_atan>,
         {K::UnaryFloat, "ig_atan", "template <class C> inline C ig_atan(C x) { return std::atan(x); }",
          false, nullptr, "atan(x)", "Atan"});
  define("sigmoid", 1, unary_shape, float_dtype, unary_kernel<Sigmoid, true>, "1 / (1 + e^-x)", unary_vjp<d_sigmoid>,
         {K::UnaryFloat, "ig_sigmoid", R"(template <class C> inline C ig_sigmoid(C x) {
  if constexpr (std::is_same<C, float>::value) {
    return ig_vsigmoid(x);
  } else {
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  }
})", true, nullptr, "1 / (1 + exp(-x))", "Sigmoid"});
  define("gelu", 1, gelu_shape, float_dtype, gelu_kernel,
         "GELU {approximate: \"none\" (erf form) | \"tanh\"}", unary_vjp<d_gelu>,
         {K::UnaryFloat, "ig_gelu", R"(template <class C> inline C ig_gelu(C x) {
  if constexpr (std::is_same<C, float>::value) return ig_vgelu(x);
  else return C(0.5) * x * (C(1) + std::erf(x / C(1.41421356237309504880168872420969808L)));
}
template <class C> inline C ig_gelu_tanh(C x) {
  if constexpr (std::is_same<C, float>::value) {
    return ig_vgelu_tanh(x);
  } else {
    const C k = C(1.41421356237309504880168872420969808L) * C(0.564189583547756286948079451560772586L);
    return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
  }
})", true, gelu_variant, "", ""});  // attributes: each emitter and the ONNX exporter write it
  // Unary, same dtype.
  define("neg", 1, unary_shape, neg_dtype, unary_kernel<Neg, false>, "-x (integers wrap)", neg_vjp,
         {K::UnarySame, "ig_neg", R"(template <class C> inline C ig_neg(C x) {
  if constexpr (std::is_integral<C>::value) return ig_wrap(C(0), x, ig_minus{}); else return -x;
})", false, nullptr, "negative(x)", "Neg"});
  define("abs", 1, unary_shape, dtype_same_as_input, unary_kernel<Abs, false>, "|x|", unary_vjp<d_abs>,
         {K::UnarySame, "ig_abs", R"(template <class C> inline C ig_abs(C x) {
  if constexpr (std::is_unsigned<C>::value) return x;
  else if constexpr (std::is_integral<C>::value) return x < 0 ? ig_neg(x) : x;
  else return std::abs(x);
})", false, nullptr, "abs(x)", "Abs"});
  define("relu", 1, unary_shape, dtype_same_as_input, unary_kernel<Relu, false>, "max(x, 0)", relu_vjp,
         {K::UnarySame, "ig_relu", R"(template <class C> inline C ig_relu(C x) {
  if constexpr (std::is_unsigned<C>::value) return x; else return x < C(0) ? C(0) : x;
})", false, nullptr, "where(x < 0, zeros_like(x), x)", "Relu"});
  define("sign", 1, unary_shape, dtype_same_as_input, unary_kernel<Sign, false>,
         "-1, 0 or 1 by the sign of x", no_gradient,
         {K::UnarySame, "ig_sign", R"(template <class C> inline C ig_sign(C x) {
  if constexpr (std::is_unsigned<C>::value) return static_cast<C>(x != 0);
  else return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
})", false, nullptr, "sign(x)", "Sign"});
  define("floor", 1, unary_shape, dtype_same_as_input, unary_kernel<Floor, false>, "round toward -inf", no_gradient,
         {K::UnarySame, "ig_floor", R"(template <class C> inline C ig_floor(C x) {
  if constexpr (std::is_integral<C>::value) return x; else return std::floor(x);
})", false, nullptr, "floor(x)", "Floor"});
  define("ceil", 1, unary_shape, dtype_same_as_input, unary_kernel<Ceil, false>, "round toward +inf", no_gradient,
         {K::UnarySame, "ig_ceil", R"(template <class C> inline C ig_ceil(C x) {
  if constexpr (std::is_integral<C>::value) return x; else return std::ceil(x);
})", false, nullptr, "ceil(x)", "Ceil"});
  define("cast", 1, unary_shape, cast_dtype, cast_kernel,
         "convert to {dtype} (float to int truncates, saturates; to bool is x != 0)", pass_through_vjp,
         {K::Cast, "", "", false, nullptr, "", ""});  // an attribute: the emitters and ONNX write it
  // The fuzzer's casts bring every dtype into its programs: the ops after a cast meet integers,
  // bools and half floats, as far as their dtype rules accept them.
  set_attr_sampler("cast", [](std::span<const Shape>, uint64_t seed) -> Attrs {
    static const char* const types[] = {"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float64"};
    return {{"dtype", std::string(types[Draw{seed}.below(9)])}};
  });
}
// clang-format on

}  // namespace ingot::ops
