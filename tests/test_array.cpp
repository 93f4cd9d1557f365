// Lazy arrays: recording, record-time shape/dtype errors, evaluation through the reference
// backend, literals, multi-output ops and the random state.
#include <gtest/gtest.h>

#include "ingot/array.h"
#include "ingot/function_compile.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::random_tensor;
using testing::run_op;

TEST(Array, RecordsLazilyAndEvaluatesOnRead) {
  Array x(random_tensor({3, 4}, 1));
  Array y = exp(x) * 2.0f + 1.0f;
  EXPECT_FALSE(y.is_evaluated());
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.dtype(), DType::Float32);
  const Tensor expect = run_op("add", {run_op("mul", {run_op("exp", {x.tensor()}), Tensor::scalar<float>(2)}),
                                       Tensor::scalar<float>(1)});
  EXPECT_TRUE(allclose(y.tensor(), expect));
  EXPECT_TRUE(y.is_evaluated());
}

TEST(Array, OpsMatchTheirReferenceKernels) {
  Tensor a = random_tensor({2, 3, 4}, 2), b = random_tensor({4, 5}, 3);
  Array x(a), w(b);
  EXPECT_TRUE(allclose(matmul(x, w).tensor(), run_op("matmul", {a, b})));
  EXPECT_TRUE(allclose(gelu(x).tensor(), run_op("gelu", {a}, {{"approximate", std::string("none")}})));
  EXPECT_TRUE(allclose(softmax(x, 1).tensor(), run_op("softmax", {a}, {{"axis", int64_t{1}}})));
  EXPECT_TRUE(allclose(sum(x, {0, 2}, true).tensor(),
                       run_op("sum", {a}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{1}}})));
  EXPECT_TRUE(allclose(transpose(x, {2, 0, 1}).tensor(), a.transpose({2, 0, 1}).contiguous()));
  EXPECT_EQ(reshape(x, {6, -1}).shape(), (Shape{6, 4}));
  EXPECT_EQ(concatenate({x, x}, 1).shape(), (Shape{2, 6, 4}));
  EXPECT_EQ(slice(x, {0, 1}, {1, 3}).shape(), (Shape{1, 2, 4}));
  EXPECT_EQ(argmax(x, -1).dtype(), DType::Int64);
  auto [m, v] = moments(x, {2});
  EXPECT_TRUE(allclose(m.tensor(), mean(x, {2}).tensor(), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(v.tensor(), mean(square(x - mean(x, {2}, true)), {2}).tensor(), 1e-4, 1e-6));
  Array labels(std::vector<int64_t>{2, 0}, {2});
  EXPECT_EQ(one_hot(labels, 3).to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(take(labels, Array(std::vector<int64_t>{1}, {1})).to_vector<int64_t>(), (std::vector<int64_t>{0}));
}

TEST(Array, OneHotOfALabelOutOfRangeIsARowOfZeros) {
  Array labels(std::vector<int64_t>{1, 3, -1}, {3});
  EXPECT_EQ(one_hot(labels, 3).to_vector<float>(), (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 0, 0}));
  ingot::testing::expect_error([&] { (void)one_hot(labels, 0); }, "classes must be positive, got 0");
}

TEST(Array, LiteralsTakeTheOperandsDtype) {
  Array d(random_tensor({2}, 4, -1, 1, DType::Float64));
  EXPECT_EQ((d * 2.0f).dtype(), DType::Float64);
  Array i(std::vector<int32_t>{1, 2}, {2});
  EXPECT_EQ((i + 1).dtype(), DType::Int32);
  EXPECT_EQ((i + 0.5).dtype(), DType::Float32);  // a fractional literal does not truncate
  EXPECT_EQ((i + 1).to_vector<int32_t>(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(where(i > 1, d, 0.0f).dtype(), DType::Float64);
  // A double literal meeting float64 keeps every digit (not 0.1 rounded to float32 first).
  Array one(Tensor::full(DType::Float64, {1}, 1.0));
  EXPECT_EQ((one * 0.1).to_vector<double>(), (std::vector<double>{0.1}));
}

TEST(Array, ShapeAndDtypeErrorsAtRecordTime) {
  Array a = zeros({2, 3}), b = zeros({4, 5});
  expect_error([&] { matmul(a, b); }, "ingot::matmul");
  expect_error([&] { a + zeros({4}); }, "broadcast");
  expect_error([&] { reshape(a, {5}); }, "ingot::reshape");
  expect_error([&] { Array() + a; }, "undefined");
  expect_error([&] { op("no_such_op", {a}); }, "no_such_op");
  expect_error([&] { softmax(a, 5); }, "out of range");
}

TEST(Array, EvalMaterializesIntermediatesSomeoneHolds) {
  Array x(random_tensor({4}, 5));
  Array h = exp(x);
  Array y = sum(h * 3.0f);
  eval(y);
  EXPECT_TRUE(y.is_evaluated());
  EXPECT_TRUE(h.is_evaluated());  // held here, so computed once with y, not again later
  EXPECT_TRUE(allclose(h.tensor(), run_op("exp", {x.tensor()})));
}

TEST(Array, RandomStateAdvancesAndSeedResets) {
  random::seed(7);
  Array a = random::normal({8});
  Array b = random::normal({8});
  EXPECT_FALSE(equal(a.tensor(), b.tensor()));
  random::seed(7);
  EXPECT_TRUE(equal(random::normal({8}).tensor(), a.tensor()));
  Array key(Tensor::scalar<int64_t>(3));
  EXPECT_TRUE(equal(random::uniform({5}, 0, 1, DType::Float32, key).tensor(),
                    random::uniform({5}, 0, 1, DType::Float32, key).tensor()));
  Array u = random::uniform({1000}, -2, 3);
  EXPECT_GE(min(u).item<float>(), -2.0f);
  EXPECT_LT(max(u).item<float>(), 3.0f);
  Array kept = dropout(ones({1000}), 0.5);
  const float m = mean(kept).item<float>();
  EXPECT_NEAR(m, 1.0f, 0.15f);
}

}  // namespace
}  // namespace ingot
