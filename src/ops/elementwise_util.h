// What the elementwise family's files (unary.cpp, binary.cpp) share: the dtype the op's own rule
// gives, C's conversions made total, NumPy's wrapping integer arithmetic, the gradient rules'
// shorthands, and `define`, which registers an op with its ElementwiseForms.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "ir/op_registry.h"
#include "ops/kernel_util.h"

namespace ingot::ops::elementwise {


// The kernel asks the op's own dtype rule for its output dtype, so a kernel can never disagree
// with type inference and rejects exactly what the rule rejects. Checks the arity first, so
// neither indexes past the inputs it was given.
inline DType output_dtype(const Node& n, std::span<const Tensor> inputs) {
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
inline Tensor converted(const Tensor& t, DType dtype) {
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

// Gradient rules: `g` is the output's cotangent, `y` the output.
using Ctx = VjpContext;
inline ValueId mul(Ctx& c, ValueId a, ValueId b) { return c.op("mul", {a, b}); }
inline ValueId k(Ctx& c, double v) { return c.scalar_like(v, c.out()); }

using K = ElementwiseForms::Kind;

// Registers an elementwise op of `arity` operands and one result with the forms the CPU code
// generator, the Python emitters and ONNX write it in.
inline void define(const char* name, int arity, ShapeRule shape, DTypeRule dtype, Kernel eval, const char* doc,
                   VjpRule vjp, ElementwiseForms forms) {
  OpDef def{name, arity, arity, 1, FusionClass::Elementwise, shape, dtype, eval, doc, vjp};
  def.elementwise = std::move(forms);
  register_op(std::move(def));
}

}  // namespace ingot::ops::elementwise
