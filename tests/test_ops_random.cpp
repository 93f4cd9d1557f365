// random_uniform, random_normal and dropout: determinism, distribution moments, shape and
// dtype rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/random.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::testing;

namespace {

Attrs source(std::vector<int64_t> shape, int64_t seed) { return {{"shape", shape}, {"seed", seed}}; }

struct Moments {
  double mean, var;
};

Moments moments(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double mean = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - mean) * (x - mean);
  return {mean, s2 / static_cast<double>(v.size())};
}

Attrs dropout_attrs(double p, int64_t seed, int64_t training) {
  return {{"p", p}, {"seed", seed}, {"training", training}};
}

}  // namespace

TEST(RandomOps, ShapeAndDTypeRules) {
  EXPECT_EQ(infer_op_shape("random_uniform", {}, source({2, 3}, 1)), "[2, 3]");
  EXPECT_EQ(infer_op_shape("random_normal", {}, source({}, 1)), "[]");
  Tensor h = run_op("random_normal", {}, {{"shape", std::vector<int64_t>{4}}, {"seed", int64_t{1}},
                                          {"dtype", std::string("float16")}});
  EXPECT_EQ(h.dtype(), DType::Float16);
  EXPECT_EQ(run_op("random_uniform", {}, source({3}, 1)).dtype(), DType::Float32);
  expect_error([] { run_op("random_uniform", {}, {{"shape", std::vector<int64_t>{2}}}); }, "'seed'");
  expect_error([] {
    run_op("random_uniform", {}, {{"shape", std::vector<int64_t>{2}}, {"seed", int64_t{1}},
                                  {"dtype", std::string("int32")}});
  }, "dtype must be a float type");
  expect_error([] { infer_op_shape("random_uniform", {}, source({2, -1}, 1)); }, "negative dimension");
  EXPECT_EQ(run_op("random_uniform", {}, source({0, 5}, 1)).numel(), 0);
}

TEST(RandomOps, SameSeedSameNumbersDifferentSeedDifferent) {
  for (const char* op : {"random_uniform", "random_normal"}) {
    Tensor a = run_op(op, {}, source({1000}, 42)), b = run_op(op, {}, source({1000}, 42));
    Tensor c = run_op(op, {}, source({1000}, 43));
    EXPECT_TRUE(equal(a, b)) << op;
    EXPECT_FALSE(equal(a, c)) << op;
    // Element i is counter i of the stream, whatever the shape.
    Tensor d = run_op(op, {}, source({10, 100}, 42));
    EXPECT_EQ(d.to_vector<float>(), a.to_vector<float>()) << op;
  }
  EXPECT_FLOAT_EQ(run_op("random_uniform", {}, source({1}, 7)).item(), rng::uniform01(7, 0));
}

TEST(RandomOps, UniformMoments) {
  // 1e5 samples: the mean's standard error is 0.0009, the variance's ~0.0003; allow ~5 sigma.
  Moments m = moments(run_op("random_uniform", {}, source({100000}, 1)));
  EXPECT_NEAR(m.mean, 0.5, 0.005);
  EXPECT_NEAR(m.var, 1.0 / 12, 0.0015);
  Attrs a = source({100000}, 2);
  a.set("low", -2.0);
  a.set("high", 4.0);
  Tensor t = run_op("random_uniform", {}, a);
  m = moments(t);
  EXPECT_NEAR(m.mean, 1.0, 0.03);
  EXPECT_NEAR(m.var, 3.0, 0.05);
  std::vector<float> v = t.to_vector<float>();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0f);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 4.0f);
}

TEST(RandomOps, NormalMoments) {
  // Mean standard error 0.003, variance ~0.0045; allow ~5 sigma.
  Moments m = moments(run_op("random_normal", {}, source({100000}, 3)));
  EXPECT_NEAR(m.mean, 0.0, 0.015);
  EXPECT_NEAR(m.var, 1.0, 0.025);
  Attrs a = source({100000}, 4);
  a.set("mean", 5.0);
  a.set("std", 0.5);
  a.set("dtype", std::string("float64"));
  m = moments(run_op("random_normal", {}, a));
  EXPECT_NEAR(m.mean, 5.0, 0.01);
  EXPECT_NEAR(m.var, 0.25, 0.01);
}

TEST(RandomOps, DropoutKeepsAndScales) {
  Tensor x = Tensor::full(DType::Float32, {100, 1000}, 2.0);
  const double p = 0.3;
  Tensor y = run_op("dropout", {x}, dropout_attrs(p, 9, 1));
  std::vector<float> v = y.to_vector<float>();
  int64_t kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool keep = rng::uniform01(9, i) >= p;
    ASSERT_FLOAT_EQ(v[i], keep ? static_cast<float>(2.0 / (1 - p)) : 0.0f) << i;
    kept += keep;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 1e5, 1 - p, 0.01);
  EXPECT_TRUE(equal(y, run_op("dropout", {x}, dropout_attrs(p, 9, 1))));
  EXPECT_FALSE(equal(y, run_op("dropout", {x}, dropout_attrs(p, 10, 1))));
  // Extremes and the other float dtypes.
  EXPECT_TRUE(equal(run_op("dropout", {x}, dropout_attrs(0, 1, 1)), x));
  EXPECT_EQ(moments(run_op("dropout", {x}, dropout_attrs(1, 1, 1))).mean, 0);
  Tensor h = run_op("dropout", {x.astype(DType::BFloat16)}, dropout_attrs(0.5, 9, 1));
  EXPECT_EQ(h.dtype(), DType::BFloat16);
}

TEST(RandomOps, DropoutNotTrainingIsIdentity) {
  Tensor x = random_tensor({3, 4}, 5);
  EXPECT_EQ(infer_op_shape("dropout", {{"N", 4}}, dropout_attrs(0.5, 1, 0)), "[N, 4]");
  Tensor y = run_op("dropout", {x}, dropout_attrs(0.5, 1, 0));
  EXPECT_TRUE(equal(x, y));
}

TEST(RandomOps, DropoutErrors) {
  Tensor x = random_tensor({3}, 5);
  expect_error([&] { run_op("dropout", {x}, dropout_attrs(1.5, 1, 1)); }, "p must be in [0, 1]");
  expect_error([&] { run_op("dropout", {x}, {{"p", 0.5}, {"seed", int64_t{1}}}); }, "'training'");
  expect_error([&] { run_op("dropout", {x.astype(DType::Int32)}, dropout_attrs(0.5, 1, 1)); },
               "float input");
}
