// Gradient rules of the reduce family (reductions, moments, softmax, layer_norm, batch_norm)
// against central finite differences in float64.
#include <gtest/gtest.h>

#include "autodiff_test_util.h"

namespace ingot::testing {
namespace {

Attrs reduce_attrs(std::vector<int64_t> axes, int64_t keepdims) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

TEST(AutodiffReduce, SumMeanMaxMinOverSeveralAxes) {
  const std::vector<std::vector<int64_t>> axes_list = {{}, {1}, {0, 2}, {-1, 0}, {0, 1, 2}};
  for (const char* op : {"sum", "mean", "max", "min"})
    for (const auto& axes : axes_list)
      for (int64_t keep : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " axes " + to_string(Shape(axes)) + " keepdims " + std::to_string(keep));
        check_op_gradients(op, {rnd({2, 3, 4}, 1)}, reduce_attrs(axes, keep));
      }
}

TEST(AutodiffReduce, MaxSharesTheGradientBetweenTies) {
  // Finite differences cannot see a tie; the rule splits it evenly, as PyTorch's amax does.
  Graph g;
  const ValueId x = g.add_input("x");
  g.value(x).dtype = DType::Float64;
  const ValueId y = g.add_op("max", {x}, reduce_attrs({1}, 0));
  infer_shapes(g, {{x, {2, 3}, "", "x"}});
  infer_types(g);
  const ValueId w = g.add_input("w");
  g.value(w).dtype = DType::Float64;
  g.value(w).shape = g.value(y).shape;
  g.value(w).shape_known = true;
  g.set_output("dx", append_backward(g, {{y, w}}, {x})[0]);
  const Tensor dx = run_graph(g, {tensor<double>({1, 5, 5, 2, 0, 1}, {2, 3}), tensor<double>({1, 1}, {2})})[0];
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 1, 0, 0}));
}

TEST(AutodiffReduce, MomentsBothOutputs) {
  for (int64_t keep : {0, 1}) {
    check_op_gradients("moments", {rnd({3, 2, 4}, 2)}, reduce_attrs({0, 2}, keep), {}, 2);
    check_op_gradients("moments", {rnd({5, 3}, 3)}, reduce_attrs({}, keep), {}, 2);
  }
}

TEST(AutodiffReduce, SoftmaxAndLogSoftmax) {
  for (const char* op : {"softmax", "log_softmax"})
    for (int64_t axis : {-1, 0, 1}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      check_op_gradients(op, {rnd({3, 4, 2}, 4, -2, 2)}, {{"axis", axis}});
    }
}

TEST(AutodiffReduce, LayerNormWithAndWithoutAffine) {
  check_op_gradients("layer_norm", {rnd({3, 5}, 5)});
  check_op_gradients("layer_norm", {rnd({2, 3, 4}, 6), rnd({4}, 7, 0.5, 1.5), rnd({4}, 8)});
  check_op_gradients("layer_norm", {rnd({2, 3, 4}, 9), rnd({3, 4}, 10, 0.5, 1.5)}, {{"axis", int64_t{1}}});
  check_op_gradients("layer_norm", {rnd({2, 3}, 11), rnd({2, 3}, 12), rnd({2, 3}, 13)},
                     {{"axis", int64_t{0}}, {"eps", 1e-3}});
}

TEST(AutodiffReduce, RmsNormWithAndWithoutWeight) {
  check_op_gradients("rms_norm", {rnd({3, 5}, 40)});
  check_op_gradients("rms_norm", {rnd({2, 3, 4}, 41), rnd({4}, 42, 0.5, 1.5)});
  check_op_gradients("rms_norm", {rnd({2, 3, 4}, 43), rnd({3, 4}, 44, 0.5, 1.5)}, {{"axis", int64_t{1}}});
  check_op_gradients("rms_norm", {rnd({2, 3}, 45), rnd({2, 3}, 46)}, {{"axis", int64_t{0}}, {"eps", 1e-3}});
  GradCheckOptions o;
  o.shapes = {{"N", "D"}, {"D"}};
  check_op_gradients("rms_norm", {rnd({2, 4}, 47), rnd({4}, 48, 0.5, 1.5)}, {}, o);
}

TEST(AutodiffReduce, BatchNormInInputsAndParameters) {
  // Inference form: mean and variance are inputs with their own gradients.
  check_op_gradients("batch_norm", {rnd({2, 3, 2, 2}, 14), rnd({3}, 15, 0.5, 1.5), rnd({3}, 16),
                                    rnd({3}, 17), rnd({3}, 18, 0.5, 1.5)});
  check_op_gradients("batch_norm", {rnd({4, 3}, 19), rnd({3}, 20), rnd({3}, 21), rnd({3}, 22),
                                    rnd({3}, 23, 0.5, 1.5)}, {{"eps", 1e-2}});
}

TEST(AutodiffReduce, BatchNormTrainingModeThroughMoments) {
  // BatchNorm2d's training graph: batch statistics from `moments` over N, H, W.
  auto build = [](Graph& g, const std::vector<ValueId>& in) {
    const std::vector<ValueId> mv = g.add_node("moments", {in[0]}, reduce_attrs({0, 2, 3}, 0), 2);
    return std::vector<ValueId>{g.add_op("batch_norm", {in[0], in[1], in[2], mv[0], mv[1]})};
  };
  check_gradients(build, {rnd({3, 2, 3, 2}, 24), rnd({2}, 25, 0.5, 1.5), rnd({2}, 26)});
  GradCheckOptions o;
  o.shapes = {{"N", 2, "H", "W"}, {2}, {2}};
  check_gradients(build, {rnd({3, 2, 2, 3}, 27), rnd({2}, 28, 0.5, 1.5), rnd({2}, 29)}, o);
}

TEST(AutodiffReduce, SymbolicReducedDimsCountAtRunTime) {
  GradCheckOptions o;
  o.shapes = {{"N", 3}};
  check_op_gradients("mean", {rnd({5, 3}, 30)}, reduce_attrs({0}, 0), o);
  check_op_gradients("moments", {rnd({5, 3}, 31)}, reduce_attrs({0}, 0), o, 2);
  check_op_gradients("sum", {rnd({5, 3}, 32)}, reduce_attrs({1}, 0), o);
  o.shapes = {{"N", "D"}};
  check_op_gradients("layer_norm", {rnd({2, 4}, 33)}, {}, o);
  check_op_gradients("max", {rnd({2, 4}, 34)}, reduce_attrs({1}, 0), o);
}

TEST(AutodiffReduce, ArgmaxStopsTheGradient) {
  // x * argmax(x): only the product's first factor carries a gradient.
  check_gradients(
      [](Graph& g, const std::vector<ValueId>& in) {
        const ValueId am = g.add_op("argmax", {in[0]}, {{"axis", int64_t{1}}, {"keepdims", int64_t{1}}});
        return std::vector<ValueId>{g.add_op("mul", {in[0], am})};
      },
      {rnd({3, 4}, 35)});
}

}  // namespace
}  // namespace ingot::testing
