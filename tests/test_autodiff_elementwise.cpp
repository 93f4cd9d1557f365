// Gradient rules of the elementwise family against central finite differences in float64.
#include <gtest/gtest.h>

#include "autodiff_test_util.h"

namespace ingot::testing {
namespace {

TEST(AutodiffElementwise, UnaryOps) {
  for (const char* op : {"exp", "sin", "cos", "tanh", "sigmoid", "erf", "neg", "abs", "relu", "atan"}) {
    SCOPED_TRACE(op);
    check_op_gradients(op, {rnd({3, 4}, 1, -2, 2)});
  }
  // Inside (-1, 1) where the function needs it.
  for (const char* op : {"asin", "acos"}) {
    SCOPED_TRACE(op);
    check_op_gradients(op, {rnd({3, 4}, 5, -0.9, 0.9)});
  }
  // Positive inputs where the function needs them.
  for (const char* op : {"log", "sqrt", "rsqrt"}) {
    SCOPED_TRACE(op);
    check_op_gradients(op, {rnd({3, 4}, 2, 0.5, 2)});
  }
}

TEST(AutodiffElementwise, GeluBothForms) {
  check_op_gradients("gelu", {rnd({5, 3}, 3, -3, 3)});
  check_op_gradients("gelu", {rnd({5, 3}, 4, -3, 3)}, {{"approximate", std::string("tanh")}});
}

TEST(AutodiffElementwise, BinaryOpsWithBroadcasting) {
  // [2, 3, 4] with [3, 1], [4], [1, 1, 4] and a scalar: the gradient sums over broadcast dims.
  const std::vector<Shape> others = {{2, 3, 4}, {3, 1}, {4}, {1, 1, 4}, {}};
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    for (size_t i = 0; i < others.size(); ++i) {
      SCOPED_TRACE(std::string(op) + " with " + to_string(others[i]));
      check_op_gradients(op, {rnd({2, 3, 4}, 5), rnd(others[i], 6 + i, 0.5, 1.5)});
      check_op_gradients(op, {rnd(others[i], 16 + i, 0.5, 1.5), rnd({2, 3, 4}, 26 + i)});
    }
  }
}

TEST(AutodiffElementwise, PowInBothOperands) {
  check_op_gradients("pow", {rnd({3, 4}, 7, 0.5, 2), rnd({3, 4}, 8, -2, 2)});
  check_op_gradients("pow", {rnd({3, 4}, 9, 0.5, 2), rnd({4}, 10, -2, 2)});
}

// mod and fmod are piecewise linear: away from the jumps (where a / b is a whole number) da = g
// and db = -g floor(a / b) (mod) or -g trunc(a / b) (fmod). Operands keep a / b off whole numbers
// by more than the finite-difference step.
TEST(AutodiffElementwise, ModAndFmodAwayFromTheirJumps) {
  Tensor a = tensor<double>({5.3, -5.3, 7.9, -7.9, 0.4, -0.6}, {2, 3}), b = tensor<double>({2.1, 2.1, -3.2, -3.2, 0.9, 0.7}, {2, 3});
  for (const char* op : {"mod", "fmod"}) {
    SCOPED_TRACE(op);
    check_op_gradients(op, {a, b});
    check_op_gradients(op, {a, tensor<double>({1.7, -2.3, 3.1}, {3})});
  }
}

TEST(AutodiffElementwise, WhereRoutesToThePickedOperand) {
  Tensor cond = tensor<bool>({true, false, true, true, false, false}, {2, 3});
  check_op_gradients("where", {cond, rnd({2, 3}, 11), rnd({3}, 12)});
  check_op_gradients("where", {tensor<bool>({true, false, true}, {3}), rnd({2, 1}, 13), rnd({2, 3}, 14)});
}

TEST(AutodiffElementwise, CastGoesBackToTheInputType) {
  // float64 -> float32 -> float64: the gradient is float64 again (finite differences on the
  // float32 intermediate are coarse, so the tolerance is float32's).
  GradCheckOptions o;
  o.step = 1e-3;
  o.atol = 1e-3;
  o.rtol = 1e-3;
  check_gradients(
      [](Graph& g, const std::vector<ValueId>& in) {
        const ValueId f = g.add_op("cast", {in[0]}, {{"dtype", std::string("float32")}});
        return std::vector<ValueId>{g.add_op("cast", {g.add_op("mul", {f, f})}, {{"dtype", std::string("float64")}})};
      },
      {rnd({3, 2}, 15)}, o);
}

TEST(AutodiffElementwise, DropoutReusesTheForwardMask) {
  check_op_gradients("dropout", {rnd({4, 8}, 16)}, {{"p", 0.3}, {"seed", int64_t{5}}, {"training", int64_t{1}}});
}

TEST(AutodiffElementwise, SymbolicShapesUseRunTimeSizes) {
  // [N, 3] + [3] and [N, 3] * [N, 1]: with a symbolic N the backward graph must not bake sizes in.
  GradCheckOptions o;
  o.shapes = {{"N", 3}, {3}};
  check_op_gradients("add", {rnd({4, 3}, 17), rnd({3}, 18)}, {}, o);
  o.shapes = {{"N", 3}, {"N", 1}};
  check_op_gradients("mul", {rnd({4, 3}, 19), rnd({4, 1}, 20)}, {}, o);
  // An unknown size against a known one: only the run says whether it broadcast (sum_to_like).
  o.shapes = {{4, 3}, {nullptr, 3}};
  check_op_gradients("mul", {rnd({4, 3}, 21), rnd({1, 3}, 22)}, {}, o);
}

TEST(AutodiffElementwise, ZeroGradientOpsStopTheGradient) {
  // sign, floor and comparisons are marked no_gradient: x gets a gradient only through mul.
  check_gradients(
      [](Graph& g, const std::vector<ValueId>& in) {
        const ValueId s = g.add_op("sign", {in[0]});
        const ValueId f = g.add_op("floor", {in[0]});
        const ValueId c = g.add_op("cast", {g.add_op("greater", {in[0], in[1]})}, {{"dtype", std::string("float64")}});
        return std::vector<ValueId>{g.add_op("mul", {g.add_op("add", {g.add_op("add", {s, f}), c}), in[0]})};
      },
      {rnd({2, 5}, 23, -3, 3), rnd({2, 5}, 24)});
}

}  // namespace
}  // namespace ingot::testing
