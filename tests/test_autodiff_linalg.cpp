// Gradient rules of matmul, conv2d and the pools, and of the movement family, against central
// finite differences in float64.
#include <gtest/gtest.h>

#include "autodiff_test_util.h"

namespace ingot::testing {
namespace {

TEST(AutodiffLinalg, MatmulShapes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 2}},           {{4}, {4, 2}},          {{3, 4}, {4}},      {{4}, {4}},
      {{2, 3, 4}, {4, 5}},        {{3, 4}, {2, 4, 5}},    {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {2, 4, 3}},           {{2, 3, 4}, {4}}};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(to_string(cases[i].first) + " @ " + to_string(cases[i].second));
    check_op_gradients("matmul", {rnd(cases[i].first, 1 + i), rnd(cases[i].second, 20 + i)});
  }
  GradCheckOptions o;
  o.shapes = {{"B", 3, 4}, {4, 2}};
  check_op_gradients("matmul", {rnd({2, 3, 4}, 40), rnd({4, 2}, 41)}, {}, o);
}

// A matrix every batch entry shares ([B, S, K] @ [K, N], a layer's weight): its gradient is one
// product over all B x S rows, not B products summed afterwards (which wrote and read back a
// [K, N] partial per entry in a training step). Symbolic batch dims keep the general rule.
TEST(AutodiffLinalg, ASharedMatrixsGradientIsOneProductOverEveryRow) {
  for (bool symbolic : {false, true}) {
    SCOPED_TRACE(symbolic ? "symbolic batch" : "static shapes");
    Graph g;
    const ValueId a = g.add_input("a"), b = g.add_input("b"), dy = g.add_input("dy");
    const ValueId y = g.add_op("matmul", {a, b});
    std::vector<ShapeConstraint> cs = {{a, symbolic ? ShapeTemplate{"B", 3, 4} : ShapeTemplate{2, 3, 4}, "", "test"},
                                       {b, {4, 5}, "", "test"},
                                       {dy, symbolic ? ShapeTemplate{"B", 3, 5} : ShapeTemplate{2, 3, 5}, "", "test"}};
    infer_shapes(g, cs);
    infer_types(g);
    const std::vector<ValueId> grads = append_backward(g, {{y, dy}}, {b});
    int matmuls = 0, sums = 0;
    for (const Node& n : g.nodes()) {
      matmuls += n.op == "matmul";
      sums += n.op == "sum" || n.op == "sum_to_like";
    }
    EXPECT_EQ(matmuls, 2) << "the forward and one product for b's gradient";
    EXPECT_EQ(sums, symbolic ? 1 : 0);
    EXPECT_EQ(to_string(g.value(grads[0]).shape), "[4, 5]");
  }
  check_op_gradients("matmul", {rnd({2, 3, 4}, 90), rnd({4, 5}, 91)});  // the values, by finite differences
}

TEST(AutodiffLinalg, Conv2dStridePaddingDilationGroupsBias) {
  struct Case {
    Shape x, w;
    Attrs attrs;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, {}, true},
      {{1, 2, 6, 5}, {3, 2, 3, 2}, {{"stride", std::vector<int64_t>{2, 1}}, {"padding", std::vector<int64_t>{1, 2}}}, false},
      {{1, 2, 7, 7}, {2, 2, 3, 3}, {{"dilation", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1}}}, true},
      {{2, 4, 5, 4}, {6, 2, 3, 3}, {{"groups", int64_t{2}}, {"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1}}}, true},
      {{1, 4, 4, 4}, {4, 1, 2, 2}, {{"groups", int64_t{4}}}, false},  // depthwise
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<Tensor> in = {rnd(cases[i].x, 50 + i), rnd(cases[i].w, 60 + i)};
    if (cases[i].bias) in.push_back(rnd({cases[i].w[0]}, 70 + i));
    check_op_gradients("conv2d", in, cases[i].attrs);
  }
  GradCheckOptions o;
  o.shapes = {{"N", 3, 5, 5}, {2, 3, 3, 3}, {2}};
  check_op_gradients("conv2d", {rnd({2, 3, 5, 5}, 80), rnd({2, 3, 3, 3}, 81), rnd({2}, 82)},
                     {{"stride", std::vector<int64_t>{2, 2}}}, o);
}

TEST(AutodiffLinalg, Pools) {
  const Attrs k2{{"kernel", std::vector<int64_t>{2, 2}}};
  const Attrs k3s2p1{{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                     {"padding", std::vector<int64_t>{1, 1}}};
  Attrs k3_no_pad = k3s2p1;
  k3_no_pad.set("count_include_pad", int64_t{0});
  // Overlapping windows (stride 1 < kernel 2) add up where they share an element.
  const Attrs overlap{{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{1, 1}}};
  for (const Attrs& a : {k2, k3s2p1, overlap}) {
    check_op_gradients("max_pool2d", {rnd({2, 2, 5, 6}, 90)}, a);
    check_op_gradients("avg_pool2d", {rnd({2, 2, 5, 6}, 91)}, a);
  }
  check_op_gradients("avg_pool2d", {rnd({1, 2, 5, 5}, 92)}, k3_no_pad);
  check_op_gradients("global_avg_pool2d", {rnd({2, 3, 4, 5}, 93)});
  check_op_gradients("global_avg_pool2d", {rnd({2, 3, 4, 5}, 94)}, {{"keepdims", int64_t{1}}});
  GradCheckOptions o;
  o.shapes = {{"N", 3, "H", "W"}};
  check_op_gradients("global_avg_pool2d", {rnd({2, 3, 4, 5}, 95)}, {}, o);
  o.shapes = {{"N", 2, 4, 4}};
  check_op_gradients("max_pool2d", {rnd({2, 2, 4, 4}, 96)}, k2, o);
}

TEST(AutodiffMovement, ReshapeTransposeBroadcastIdentity) {
  check_op_gradients("identity", {rnd({2, 3}, 1)});
  check_op_gradients("reshape", {rnd({2, 3, 4}, 2)}, {{"shape", std::vector<int64_t>{4, -1}}});
  check_op_gradients("transpose", {rnd({2, 3, 4}, 3)}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  check_op_gradients("transpose", {rnd({2, 3, 4}, 4)});
  check_op_gradients("broadcast_to", {rnd({3, 1}, 5)}, {{"shape", std::vector<int64_t>{2, 3, 4}}});
  GradCheckOptions o;
  o.shapes = {{"N", 3, 4}};
  check_op_gradients("reshape", {rnd({2, 3, 4}, 6)}, {{"shape", std::vector<int64_t>{0, -1}}}, o);
}

TEST(AutodiffMovement, SliceWithSteps) {
  const auto big = std::numeric_limits<int64_t>::max();
  check_op_gradients("slice", {rnd({5, 6}, 7)},
                     {{"starts", std::vector<int64_t>{1, 0}}, {"ends", std::vector<int64_t>{5, big}},
                      {"steps", std::vector<int64_t>{2, 3}}});
  check_op_gradients("slice", {rnd({5, 6}, 8)},
                     {{"starts", std::vector<int64_t>{-1}}, {"ends", std::vector<int64_t>{-5}},
                      {"axes", std::vector<int64_t>{1}}, {"steps", std::vector<int64_t>{-2}}});
}

TEST(AutodiffMovement, ConcatGatherTakeAlongAxis) {
  check_op_gradients("concat", {rnd({2, 3}, 9), rnd({2, 1}, 10), rnd({2, 2}, 11)}, {{"axis", int64_t{1}}});
  GradCheckOptions o;
  o.shapes = {{"A", 3}, {"B", 3}};
  check_op_gradients("concat", {rnd({2, 3}, 12), rnd({3, 3}, 13)}, {{"axis", int64_t{0}}}, o);
  // Repeated and negative indices accumulate.
  check_op_gradients("gather", {rnd({4, 3}, 14), tensor<int64_t>({0, 2, 0, -1, 2}, {5})}, {{"axis", int64_t{0}}});
  check_op_gradients("gather", {rnd({2, 4, 3}, 15), tensor<int32_t>({1, 1, 3, 0}, {2, 2})}, {{"axis", int64_t{1}}});
  check_op_gradients("take_along_axis", {rnd({3, 4}, 16), tensor<int64_t>({0, 0, 3, 1, 1, 2}, {3, 2})},
                     {{"axis", int64_t{1}}});
  check_op_gradients("take_along_axis", {rnd({3, 2}, 17), tensor<int64_t>({2, 2, 0, 1}, {2, 2})},
                     {{"axis", int64_t{0}}});
}

}  // namespace
}  // namespace ingot::testing
