// The ops that exist for backward graphs (families.h, marked "(grad)"): shape rule, dtype rule
// and reference kernel through run_op, values checked by hand or by the adjoint identity
// <dy, f(x)> = <f^T(dy), x> of the linear op they transpose.
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace ingot::testing {
namespace {

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

TEST(GradientOps, SumToLikeAndBroadcastToLike) {
  const Tensor x = tensor<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(run_op("sum_to_like", {x, Tensor(DType::Float32, {3})}).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(run_op("sum_to_like", {x, Tensor(DType::Float32, {2, 1})}).to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(run_op("sum_to_like", {x, Tensor(DType::Float32, {})}).item(), 21);
  EXPECT_EQ(infer_op_shape("sum_to_like", {{"N", 3}, {1, 3}}), "[1, 3]");
  expect_error([&] { eval_only("sum_to_like", {x, Tensor(DType::Float32, {2})}); }, "sum_to_like: shapes [2] and [2, 3] do not broadcast");
  const Tensor b = run_op("broadcast_to_like", {tensor<float>({1, 2, 3}, {3}), Tensor(DType::Float64, {2, 3})});
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(infer_op_shape("broadcast_to_like", {{3}, {"N", 3}}), "[N, 3]");
  expect_error([&] { eval_only("broadcast_to_like", {x, Tensor(DType::Float32, {3, 3})}); }, "broadcast_to_like: shapes [2, 3] and [3, 3] do not broadcast");
}

TEST(GradientOps, ReshapeLikeExpandDimsZerosLikeNumel) {
  const Tensor x = tensor<int32_t>({1, 2, 3, 4, 5, 6}, {6});
  EXPECT_EQ(run_op("reshape_like", {x, Tensor(DType::Float32, {2, 3})}).shape(), (Shape{2, 3}));
  expect_error([&] { eval_only("reshape_like", {x, Tensor(DType::Float32, {4})}); }, "cannot reshape [6] to [4]");
  const Tensor e = run_op("expand_dims", {tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3})}, {{"axes", std::vector<int64_t>{0, -1}}});
  EXPECT_EQ(e.shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(infer_op_shape("expand_dims", {{"N", 3}}, {{"axes", std::vector<int64_t>{1}}}), "[N, 1, 3]");
  const Tensor z = run_op("zeros_like", {tensor<double>({1, 2}, {2})});
  EXPECT_EQ(z.to_vector<double>(), (std::vector<double>{0, 0}));
  const Tensor n = run_op("numel", {Tensor(DType::Float32, {2, 3, 4})}, {{"axes", std::vector<int64_t>{0, -1}}, {"dtype", std::string("float64")}});
  EXPECT_EQ(n.dtype(), DType::Float64);
  EXPECT_EQ(n.item(), 8);
  EXPECT_EQ(run_op("numel", {Tensor(DType::Float32, {2, 3})}, {{"dtype", std::string("int64")}}).item(), 6);
}

TEST(GradientOps, SliceScatterConcatPart) {
  const Attrs steps{{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{5}}, {"steps", std::vector<int64_t>{2}}};
  const Tensor s = run_op("slice_scatter", {tensor<double>({7, 8}, {2}), Tensor(DType::Float64, {5})}, steps);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 7, 0, 8, 0}));
  expect_error([&] { eval_only("slice_scatter", {tensor<double>({7, 8, 9}, {3}), Tensor(DType::Float64, {5})}, steps); },
               "slice_scatter: the update has shape [3] but the slice of [5] has shape [2]");
  const Tensor g = tensor<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  const Tensor p = run_op("concat_part", {g, Tensor(DType::Float32, {2, 2}), Tensor(DType::Float32, {2, 3})},
                          {{"axis", int64_t{1}}, {"index", int64_t{1}}});
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{3, 4, 5, 8, 9, 10}));
  EXPECT_EQ(infer_op_shape("concat_part", {{"N", 5}, {"N", 2}, {"N", 3}}, {{"axis", int64_t{1}}, {"index", int64_t{0}}}), "[N, 2]");
}

TEST(GradientOps, IndexAddAndScatterAddAccumulateRepeats) {
  const Tensor u = tensor<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor a = run_op("index_add", {Tensor(DType::Float64, {3, 2}), tensor<int64_t>({0, 2, -3}, {3}), u}, {{"axis", int64_t{0}}});
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{6, 8, 0, 0, 3, 4}));
  expect_error([&] { eval_only("index_add", {Tensor(DType::Float64, {3, 2}), tensor<int64_t>({0, 3, 0}, {3}), u}); },
               "index 3 is out of range");
  const Tensor s = run_op("scatter_add", {Tensor(DType::Float32, {2, 3}), tensor<int64_t>({0, 0, 2, 1}, {2, 2}),
                                          tensor<float>({1, 2, 3, 4}, {2, 2})}, {{"axis", int64_t{1}}});
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{3, 0, 0, 0, 4, 3}));
  expect_error([&] { eval_only("scatter_add", {Tensor(DType::Float32, {2, 3}), tensor<int64_t>({0, 0}, {2}),
                                               tensor<float>({1, 2}, {2})}, {{"axis", int64_t{1}}}); },
               "do not match");
}

TEST(GradientOps, ConvGradientsAreTheAdjointsOfConv2d) {
  const std::vector<Attrs> cases = {
      {},
      {{"stride", std::vector<int64_t>{2, 1}}, {"padding", std::vector<int64_t>{1, 2}}, {"dilation", std::vector<int64_t>{1, 2}}},
      {{"groups", int64_t{2}}, {"padding", std::vector<int64_t>{1, 1}}}};
  for (const Attrs& a : cases) {
    const Tensor x = random_tensor({2, 4, 6, 7}, 1, -1, 1, DType::Float64);
    const Tensor w = random_tensor({6, 4 / static_cast<int>(a.get_int("groups", 1)), 3, 2}, 2, -1, 1, DType::Float64);
    const Tensor y = run_op("conv2d", {x, w}, a);
    const Tensor dy = random_tensor(y.shape(), 3, -1, 1, DType::Float64);
    const Tensor dx = run_op("conv2d_input_grad", {dy, w, x}, a);
    const Tensor dw = run_op("conv2d_weight_grad", {x, dy, w}, a);
    EXPECT_NEAR(dot(dx, x), dot(dy, y), 1e-9);
    EXPECT_NEAR(dot(dw, w), dot(dy, y), 1e-9);
  }
  expect_error([&] { eval_only("conv2d_input_grad", {Tensor(DType::Float32, {1, 2, 2, 2}), Tensor(DType::Float32, {2, 1, 2, 2}),
                                                     Tensor(DType::Float32, {1, 1, 4, 4})}); },
               "the output gradient has shape [1, 2, 2, 2], expected [1, 2, 3, 3]");
}

TEST(GradientOps, PoolGradients) {
  const Attrs k2{{"kernel", std::vector<int64_t>{2, 2}}};
  const Tensor x = tensor<double>({1, 4, 3, 2}, {1, 1, 2, 2});
  const Tensor dx = run_op("max_pool2d_grad", {x, tensor<double>({5}, {1, 1, 1, 1})}, k2);
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{0, 5, 0, 0}));
  for (int64_t include_pad : {0, 1}) {
    const Attrs a{{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                  {"padding", std::vector<int64_t>{1, 1}}, {"count_include_pad", include_pad}};
    const Tensor in = random_tensor({2, 3, 5, 6}, 4, -1, 1, DType::Float64);
    const Tensor y = run_op("avg_pool2d", {in}, a);
    const Tensor dy = random_tensor(y.shape(), 5, -1, 1, DType::Float64);
    EXPECT_NEAR(dot(run_op("avg_pool2d_grad", {dy, in}, a), in), dot(dy, y), 1e-9);
  }
  expect_error([&] { eval_only("max_pool2d_grad", {x, tensor<double>({5, 6}, {1, 1, 1, 2})}, k2); },
               "the output gradient has shape [1, 1, 1, 2], expected [1, 1, 1, 1]");
}

}  // namespace
}  // namespace ingot::testing
