// ONNX elementwise operators: unary math, binary arithmetic and comparisons (NumPy broadcasting,
// as ingot's), variadic Max/Min/Sum/Mean, Clip, LeakyRelu, Shrink, Swish, Round, Where, Cast,
// Identity, Dropout (inference: identity).
#include <cmath>
#include <optional>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"
#include "frontends/onnx/tensor_proto.h"
#include "ir/op_registry.h"

namespace ingot::onnx_import {
namespace {

void unary(const char* onnx_op, const char* ingot_op) {
  register_conversion(onnx_op, [ingot_op](NodeContext& c) { return std::vector<Connection>{c.op(ingot_op, {c.in(0)})}; });
}

void binary(const char* onnx_op, const char* ingot_op) {
  register_conversion(onnx_op, [ingot_op](NodeContext& c) {
    return std::vector<Connection>{c.op(ingot_op, {c.in(0), c.in(1)})};
  });
}

// Max, Min, Sum, Mean of any number of inputs, folded pairwise.
void variadic(const char* onnx_op, const char* ingot_op, bool mean) {
  register_conversion(onnx_op, [ingot_op, mean](NodeContext& c) {
    if (c.num_inputs() == 0) c.fail("needs at least one input");
    Connection acc = c.in(0);
    for (int i = 1; i < c.num_inputs(); ++i) acc = c.op(ingot_op, {acc, c.in(i)});
    if (mean && c.num_inputs() > 1) acc = acc / static_cast<double>(c.num_inputs());
    if (c.num_inputs() == 1) acc = c.op("identity", {acc});
    return std::vector<Connection>{acc};
  });
}

}  // namespace

void register_elementwise_conversions() {
  unary("Identity", "identity");
  // Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
  register_conversion("Shrink", [](NodeContext& c) {
    const double lambd = c.attr_float("lambd", 0.5f), bias = c.attr_float("bias", 0.0f);
    const Connection x = c.in(0);
    const Connection mid = c.op("where", {c.op("greater", {x, lambd}), x - bias, c.op("zeros_like", {x})});
    return std::vector<Connection>{c.op("where", {c.op("less", {x, -lambd}), x + bias, mid})};
  });
  register_conversion("Swish", [](NodeContext& c) {
    const Connection x = c.in(0);
    return std::vector<Connection>{x * c.op("sigmoid", {x * static_cast<double>(c.attr_float("alpha", 1.0f))})};
  });
  // Round: to the nearest integer, halves to the even one; integers (and infinities) unchanged.
  register_conversion("Round", [](NodeContext& c) {
    const Connection x = c.in(0), lo = c.op("floor", {x}), frac = x - lo;
    const Connection half = c.op("where", {c.op("greater", {frac, 0.5}), lo + 1.0, lo + c.op("mod", {lo, 2.0})});
    const Connection rounded = c.op("where", {c.op("less", {frac, 0.5}), lo, half});
    return std::vector<Connection>{c.op("where", {c.op("equal", {x, lo}), x, rounded})};
  });
  // ONNX Div of integers truncates, where ingot's div has a float result: integer quotients
  // known while importing (shape arithmetic: a size over the number of heads) are computed here,
  // others written with fmod, a float64 division and a cast back.
  register_conversion("Div", [](NodeContext& c) {
    const std::optional<Tensor> a = c.known(0), b = c.known(1);
    if (a && b && !is_floating(a->dtype()) && !is_floating(b->dtype())) {
      const Tensor num = a->astype(DType::Int64), den = b->astype(DType::Int64);
      if (den.numel() != 1 && den.shape() != num.shape()) c.fail("integer Div of shapes that broadcast is not supported");
      Tensor q(DType::Int64, num.shape());
      for (int64_t i = 0; i < num.numel(); ++i) {
        const int64_t d = den.data<int64_t>()[den.numel() == 1 ? 0 : i];
        if (d == 0) c.fail("integer division by zero");
        q.data<int64_t>()[i] = num.data<int64_t>()[i] / d;
      }
      c.known_outputs[0] = q.astype(a->dtype());
      return std::vector<Connection>{};
    }
    const std::optional<DType> t = c.dtype(0);
    if (!t) c.fail("the element type of its operands is unknown (ONNX type inference gave none)");
    if (is_floating(*t)) return std::vector<Connection>{c.op("div", {c.in(0), c.in(1)})};
    // At run time: a - fmod(a, b) is an exact multiple of b, so its float64 quotient is the
    // truncated quotient exactly (for quotients below 2^53); a divisor of 0 gives 0, as fmod's.
    const Connection num = c.in(0), div = c.in(1);
    const Attrs f64 = {{"dtype", std::string("float64")}};
    const Connection whole = c.op("cast", {c.op("sub", {num, c.op("fmod", {num, div})})}, f64);
    const Connection den = c.op("cast", {div}, f64);
    const Connection zero = c.op("equal", {den, 0.0});
    const Connection q = c.op("where", {zero, 0.0, c.op("div", {whole, c.op("where", {zero, 1.0, den})})});
    return std::vector<Connection>{c.op("cast", {q}, {{"dtype", std::string(dtype_name(*t))}})};
  });
  // ONNX Pow has its base's type: an integer base takes the power in floating point, truncated
  // back (as ONNX's reference does).
  register_conversion("Pow", [](NodeContext& c) {
    const Connection y = c.op("pow", {c.in(0), c.in(1)});
    const std::optional<DType> t = c.dtype(0);
    if (!t) c.fail("the element type of its base is unknown (ONNX type inference gave none)");
    if (is_floating(*t)) return std::vector<Connection>{y};
    return std::vector<Connection>{c.op("cast", {y}, {{"dtype", std::string(dtype_name(*t))}})};
  });
  // Mod: fmod=1 is C's remainder (the dividend's sign), fmod=0 NumPy's (the divisor's).
  register_conversion("Mod", [](NodeContext& c) {
    return std::vector<Connection>{c.op(c.attr_int("fmod", 0) != 0 ? "fmod" : "mod", {c.in(0), c.in(1)})};
  });
  variadic("Max", "maximum", false);
  variadic("Min", "minimum", false);
  variadic("Sum", "add", false);
  variadic("Mean", "add", true);
  register_conversion("Reciprocal", [](NodeContext& c) { return std::vector<Connection>{1.0 / c.in(0)}; });
  register_conversion("Where", [](NodeContext& c) {
    return std::vector<Connection>{c.op("where", {c.in(0), c.in(1), c.in(2)})};
  });
  register_conversion("LeakyRelu", [](NodeContext& c) {
    const double alpha = c.attr_float("alpha", 0.01f);
    const Connection x = c.in(0);
    return std::vector<Connection>{c.op("where", {c.op("less", {x, 0.0}), x * alpha, x})};
  });
  // Clip: bounds from attributes (opset < 11) or optional inputs; a missing bound is no bound.
  register_conversion("Clip", [](NodeContext& c) {
    Connection y = c.op("identity", {c.in(0)});
    if (c.opset < 11) {
      if (c.has_attr("min")) y = c.op("maximum", {y, static_cast<double>(c.attr_float("min", 0))});
      if (c.has_attr("max")) y = c.op("minimum", {y, static_cast<double>(c.attr_float("max", 0))});
    } else {
      if (c.has_input(1)) y = c.op("maximum", {y, c.in(1)});
      if (c.has_input(2)) y = c.op("minimum", {y, c.in(2)});
    }
    return std::vector<Connection>{y};
  });
  register_conversion("Not", [](NodeContext& c) {
    return std::vector<Connection>{c.op("equal", {c.in(0), c.scalar(0, DType::Bool)})};
  });
  // Booleans: and = a ? b : a, or = a ? a : b, xor = a != b.
  register_conversion("And", [](NodeContext& c) {
    return std::vector<Connection>{c.op("where", {c.in(0), c.in(1), c.in(0)})};
  });
  register_conversion("Or", [](NodeContext& c) {
    return std::vector<Connection>{c.op("where", {c.in(0), c.in(0), c.in(1)})};
  });
  register_conversion("Xor", [](NodeContext& c) { return std::vector<Connection>{c.op("not_equal", {c.in(0), c.in(1)})}; });
  register_conversion("IsNaN", [](NodeContext& c) { return std::vector<Connection>{c.op("not_equal", {c.in(0), c.in(0)})}; });
  register_conversion("IsInf", [](NodeContext& c) {
    const Connection x = c.in(0);
    const bool pos = c.attr_int("detect_positive", 1) != 0, neg = c.attr_int("detect_negative", 1) != 0;
    if (pos && neg) return std::vector<Connection>{c.op("equal", {c.op("abs", {x}), double{INFINITY}})};
    if (pos) return std::vector<Connection>{c.op("equal", {x, double{INFINITY}})};
    if (neg) return std::vector<Connection>{c.op("equal", {x, -double{INFINITY}})};
    return std::vector<Connection>{c.op("less", {x, -double{INFINITY}})};  // detects nothing: all false
  });
  // Activations written with the catalogue's ops, as ONNX defines them.
  auto activation = [](const char* name, Connection (*f)(NodeContext&, const Connection&)) {
    register_conversion(name, [f](NodeContext& c) { return std::vector<Connection>{f(c, c.in(0))}; });
  };
  activation("Elu", [](NodeContext& c, const Connection& x) {
    const double alpha = c.attr_float("alpha", 1.0f);
    return c.op("where", {c.op("less", {x, 0.0}), (apply("exp", x) - 1.0) * alpha, x});
  });
  activation("Celu", [](NodeContext& c, const Connection& x) {
    const double alpha = c.attr_float("alpha", 1.0f);
    const Connection neg = (apply("exp", x / alpha) - 1.0) * alpha;
    return c.op("add", {c.op("maximum", {x, 0.0}),
                        c.op("minimum", {neg, 0.0})});
  });
  activation("Selu", [](NodeContext& c, const Connection& x) {
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625f), gamma = c.attr_float("gamma", 1.05070102214813232421875f);
    return c.op("where", {c.op("less_equal", {x, 0.0}), (apply("exp", x) * alpha - alpha) * gamma,
                          x * gamma});
  });
  activation("HardSigmoid", [](NodeContext& c, const Connection& x) {
    const double alpha = c.attr_float("alpha", 0.2f), beta = c.attr_float("beta", 0.5f);
    return c.op("maximum", {c.op("minimum", {x * alpha + beta, 1.0}), 0.0});
  });
  activation("HardSwish", [](NodeContext& c, const Connection& x) {
    return x * c.op("maximum", {c.op("minimum", {x * (1.0 / 6) + 0.5, 1.0}),
                                0.0});
  });
  // Trigonometric and hyperbolic functions from exp, log, sin and cos (ingot has no own ops for
  // them yet; within float rounding of the direct forms over the ranges ONNX tests).
  activation("Tan", [](NodeContext&, const Connection& x) { return apply("sin", x) / apply("cos", x); });
  activation("Sinh", [](NodeContext&, const Connection& x) { return (apply("exp", x) - apply("exp", -1.0 * x)) * 0.5; });
  activation("Cosh", [](NodeContext&, const Connection& x) { return (apply("exp", x) + apply("exp", -1.0 * x)) * 0.5; });
  activation("Asinh", [](NodeContext&, const Connection& x) {
    return apply("log", x + apply("sqrt", x * x + 1.0));
  });
  activation("Acosh", [](NodeContext&, const Connection& x) {
    return apply("log", x + apply("sqrt", x * x - 1.0));
  });
  activation("Atanh", [](NodeContext&, const Connection& x) { return apply("log", (1.0 + x) / (1.0 - x)) * 0.5; });
  activation("Softplus", [](NodeContext&, const Connection& x) { return apply("log", apply("exp", x) + 1.0); });
  activation("Softsign", [](NodeContext&, const Connection& x) { return x / (apply("abs", x) + 1.0); });
  activation("Mish", [](NodeContext&, const Connection& x) { return x * apply("tanh", apply("log", apply("exp", x) + 1.0)); });
  activation("ThresholdedRelu", [](NodeContext& c, const Connection& x) {
    const double alpha = c.attr_float("alpha", 1.0f);
    return c.op("where", {c.op("greater", {x, alpha}), x, 0.0});
  });
  register_conversion("PRelu", [](NodeContext& c) {
    const Connection x = c.in(0);
    return std::vector<Connection>{c.op("where", {c.op("less", {x, 0.0}), x * c.in(1), x})};
  });
  register_conversion("Cast", [](NodeContext& c) {
    const DType to = dtype_of(static_cast<int>(c.attr_int("to", 0)), "ONNX Cast's 'to'");
    return std::vector<Connection>{c.op("cast", {c.in(0)}, {{"dtype", std::string(dtype_name(to))}})};
  });
  register_conversion("CastLike", [](NodeContext& c) {
    const std::optional<DType> to = c.dtype(1);
    if (!to) c.fail("the element type of its 'target_type' input is unknown");
    return std::vector<Connection>{c.op("cast", {c.in(0)}, {{"dtype", std::string(dtype_name(*to))}})};
  });
  // Inference: Dropout passes its input through, and its mask (where asked) is all true.
  register_conversion("Dropout", [](NodeContext& c) {
    if (c.has_input(2)) {
      const std::optional<Tensor> training = c.known(2);
      if (!training || training->item(0) != 0) c.fail("training mode is not supported (import for inference)");
    }
    const Connection x = c.in(0);
    std::vector<Connection> outs = {c.op("identity", {x})};
    if (c.node.output_size() > 1) outs.push_back(c.op("equal", {c.op("zeros_like", {x}), 0.0}));
    return outs;
  });
}

void register_catalogue_conversions() {
  for (const OpDef* op : all_ops()) {
    if (!op->elementwise || op->elementwise->onnx.empty() || has_conversion(op->elementwise->onnx)) continue;
    if (op->min_inputs == 1) unary(op->elementwise->onnx.c_str(), op->name.c_str());
    else binary(op->elementwise->onnx.c_str(), op->name.c_str());
  }
}

}  // namespace ingot::onnx_import
