// The elementwise family's binary ops (NumPy broadcasting): arithmetic in the promoted dtype
// (div's result floating), mod/fmod, maximum/minimum, comparisons with a bool result, and where.
// Operands are converted to one compute dtype, then broadcast; integers wrap.
#include <cmath>
#include <functional>

#include "ops/elementwise_util.h"
#include "ops/families.h"

namespace ingot::ops {
namespace {

using namespace elementwise;

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
// Gradient rules. Binary ops: each operand's share of g, summed down to its own (pre-broadcast) shape.
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

}  // namespace

// Each op: its reference kernel and gradient above; here its definition with the forms the CPU
// code generator, the Python emitters and ONNX write it in (ElementwiseForms, ir/op_registry.h),
// so that a new elementwise op is written in this file only (plus its test). The CPU functions
// are C++ source for generated programs, templates over the compute type C: float16/bfloat16
// compute in float, and float32 calls the prelude's vector math where it has it.
// clang-format off
void register_binary_ops() {
  using namespace elementwise;
  // Binary, broadcasting.
  define("add", 2, broadcast_shape, promoted_dtype, binary_kernel<Add, false>, "a + b", add_vjp,
         {K::Binary, "ig_add", R"(template <class C> inline C ig_add(C a, C b) {
  if constexpr (std::is_integral<C>::value) return ig_wrap(a, b, ig_plus{}); else return a + b;
})", false, nullptr, "add(a, b)", "Add"});
  define("sub", 2, broadcast_shape, sub_dtype, binary_kernel<Sub, false>, "a - b", sub_vjp,
         {K::Binary, "ig_sub", R"(template <class C> inline C ig_sub(C a, C b) {
  if constexpr (std::is_integral<C>::value) return ig_wrap(a, b, ig_minus{}); else return a - b;
})", false, nullptr, "subtract(a, b)", "Sub"});
  define("mul", 2, broadcast_shape, promoted_dtype, binary_kernel<Mul, false>, "a * b", mul_vjp,
         {K::Binary, "ig_mul", R"(template <class C> inline C ig_mul(C a, C b) {
  if constexpr (std::is_integral<C>::value) return ig_wrap(a, b, ig_times{}); else return a * b;
})", false, nullptr, "multiply(a, b)", "Mul"});
  // ONNX's Div of integers truncates; its converter computes that (convert_elementwise.cpp).
  define("div", 2, broadcast_shape, div_dtype, binary_kernel<Div, false>, "a / b (float result)", div_vjp,
         {K::Binary, "ig_div", "template <class C> inline C ig_div(C a, C b) { return a / b; }",
          false, nullptr, "divide(a, b)", "Div"});
  define("pow", 2, broadcast_shape, promoted_dtype, binary_kernel<Pow, false>, "a ^ b", pow_vjp,
         {K::Binary, "ig_pow", R"(template <class C> inline C ig_pow(C a, C b) {
  if constexpr (std::is_integral<C>::value) return ig_cast<C>(std::pow(double(a), double(b)));
  else return std::pow(a, b);
})", false, nullptr, "pow(a, b)", "Pow"});
  // ONNX's Mod carries an fmod attribute: its converter and exporter write mod and fmod.
  define("mod", 2, broadcast_shape, promoted_dtype, binary_kernel<Mod, false>,
         "remainder with the divisor's sign (NumPy mod, Python %); integer divisor 0 gives 0", mod_vjp<true>,
         {K::Binary, "ig_mod", R"(template <class C> inline C ig_mod(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    if (b == C(0)) return C(0);
    if constexpr (std::is_signed<C>::value)
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
})", false, nullptr, "remainder(a, b)", ""});
  define("fmod", 2, broadcast_shape, promoted_dtype, binary_kernel<FMod, false>,
         "remainder with the dividend's sign (C fmod); integer divisor 0 gives 0", mod_vjp<false>,
         {K::Binary, "ig_fmod", R"(template <class C> inline C ig_fmod(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    if (b == C(0)) return C(0);
    if constexpr (std::is_signed<C>::value)
      if (b == C(-1)) return C(0);
    return static_cast<C>(a % b);
  } else {
    return std::fmod(a, b);
  }
})", false, nullptr, "", ""});  // fmod is not in the array API: each emitter writes it
  // ONNX's Max and Min take any number of inputs: converters fold them pairwise.
  define("maximum", 2, broadcast_shape, promoted_dtype, binary_kernel<Maximum, false>,
         "elementwise max (NaN propagates)", extreme_vjp<true>,
         {K::Binary, "ig_maximum", R"(template <class C> inline C ig_maximum(C a, C b) {
  if constexpr (std::is_floating_point<C>::value) { if (std::isnan(a) || std::isnan(b)) return a + b; }
  return a < b ? b : a;
})", false, nullptr, "maximum(a, b)", "Max"});
  define("minimum", 2, broadcast_shape, promoted_dtype, binary_kernel<Minimum, false>,
         "elementwise min (NaN propagates)", extreme_vjp<false>,
         {K::Binary, "ig_minimum", R"(template <class C> inline C ig_minimum(C a, C b) {
  if constexpr (std::is_floating_point<C>::value) { if (std::isnan(a) || std::isnan(b)) return a + b; }
  return b < a ? b : a;
})", false, nullptr, "minimum(a, b)", "Min"});
  // Comparisons: a C++ operator, no function of their own.
  define("equal", 2, broadcast_shape, bool_dtype, binary_kernel<Equal, true>, "a == b", no_gradient,
         {K::Compare, "==", "", false, nullptr, "equal(a, b)", "Equal"});
  define("not_equal", 2, broadcast_shape, bool_dtype, binary_kernel<NotEqual, true>, "a != b", no_gradient,
         {K::Compare, "!=", "", false, nullptr, "not_equal(a, b)", ""});  // ONNX: Not of Equal
  define("less", 2, broadcast_shape, bool_dtype, binary_kernel<Less, true>, "a < b", no_gradient,
         {K::Compare, "<", "", false, nullptr, "less(a, b)", "Less"});
  define("less_equal", 2, broadcast_shape, bool_dtype, binary_kernel<LessEqual, true>, "a <= b", no_gradient,
         {K::Compare, "<=", "", false, nullptr, "less_equal(a, b)", "LessOrEqual"});
  define("greater", 2, broadcast_shape, bool_dtype, binary_kernel<Greater, true>, "a > b", no_gradient,
         {K::Compare, ">", "", false, nullptr, "greater(a, b)", "Greater"});
  define("greater_equal", 2, broadcast_shape, bool_dtype, binary_kernel<GreaterEqual, true>, "a >= b", no_gradient,
         {K::Compare, ">=", "", false, nullptr, "greater_equal(a, b)", "GreaterOrEqual"});
  // ONNX's Where reads a bool condition; its exporter casts ingot's (any nonzero) to one.
  define("where", 3, broadcast_shape, where_dtype, where_kernel,
         "where(cond, a, b): a where cond is nonzero, else b", where_vjp,
         {K::Where, "", "", false, nullptr, "", ""});
}
// clang-format on

}  // namespace ingot::ops
