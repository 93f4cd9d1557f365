// The bundled example networks end to end: the seeds' CNN (Conv2d 3->64 k3, BatchNorm2d, Relu,
// Conv2d 64->128 k3, GlobalAvgPool2d, Linear 128->10) at [32, 3, 224, 224] and with a symbolic
// batch, checked against a hand-written forward pass on small images; and the MLP 784->256->10.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using ingot::testing::random_tensor;
using ingot::testing::shape_of;
using ingot::testing::slow_tests_skipped;

namespace {

using Values = std::vector<double>;

PhysicalModel compile_cnn(ShapeTemplate input, bool inference) {
  CompileOptions o;
  o.shapes = {{"input", std::move(input)}};
  o.inference = inference;
  return compile(ExampleCNN(), ReferenceBackend(), o);
}

void expect_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_TRUE(std::isfinite(t.item(i))) << "element " << i;
}

// The first `n` samples (rows of dim 0) of a contiguous tensor.
Tensor first_samples(const Tensor& t, int64_t n) {
  Shape s = t.shape();
  const int64_t per_sample = t.numel() / s[0];
  s[0] = n;
  Tensor out(t.dtype(), s);
  std::memcpy(out.raw_data(), t.raw_data(),
              static_cast<size_t>(n * per_sample) * dtype_size(t.dtype()));
  return out;
}

// ---- a hand-written forward pass of ExampleCNN in double (training mode: batch statistics)

struct Act {
  Shape shape;  // NCHW
  Values v;
  double& at(int64_t n, int64_t c, int64_t h, int64_t w) {
    return v[static_cast<size_t>(((n * shape[1] + c) * shape[2] + h) * shape[3] + w)];
  }
};

Act conv_valid(Act& x, const Tensor& w, const Tensor& b) {
  const Shape ws = w.shape();
  const Values wv = w.to_vector<double>(), bv = b.to_vector<double>();
  Act y{{x.shape[0], ws[0], x.shape[2] - ws[2] + 1, x.shape[3] - ws[3] + 1}, {}};
  y.v.assign(static_cast<size_t>(numel(y.shape)), 0);
  for (int64_t n = 0; n < y.shape[0]; ++n)
    for (int64_t m = 0; m < ws[0]; ++m)
      for (int64_t h = 0; h < y.shape[2]; ++h)
        for (int64_t q = 0; q < y.shape[3]; ++q) {
          double acc = bv[static_cast<size_t>(m)];
          for (int64_t c = 0; c < ws[1]; ++c)
            for (int64_t i = 0; i < ws[2]; ++i)
              for (int64_t j = 0; j < ws[3]; ++j)
                acc += x.at(n, c, h + i, q + j) *
                       wv[static_cast<size_t>(((m * ws[1] + c) * ws[2] + i) * ws[3] + j)];
          y.at(n, m, h, q) = acc;
        }
  return y;
}

// Batch-statistics normalization (weight ones, bias zeros: the initializers), then relu.
void batch_norm_relu(Act& x) {
  const int64_t n = x.shape[0], c = x.shape[1], hw = x.shape[2] * x.shape[3];
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = 0, var = 0;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < hw; ++i) mean += x.v[static_cast<size_t>((s * c + ch) * hw + i)];
    mean /= static_cast<double>(n * hw);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < hw; ++i)
        var += std::pow(x.v[static_cast<size_t>((s * c + ch) * hw + i)] - mean, 2);
    var /= static_cast<double>(n * hw);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < hw; ++i) {
        double& e = x.v[static_cast<size_t>((s * c + ch) * hw + i)];
        e = std::max((e - mean) / std::sqrt(var + 1e-5), 0.0);
      }
  }
}

Values cnn_reference(const Tensor& input, const TensorMap& p) {
  Act x{input.shape(), input.to_vector<double>()};
  Act h = conv_valid(x, p.at("conv2d_0.weight"), p.at("conv2d_0.bias"));
  batch_norm_relu(h);
  Act y = conv_valid(h, p.at("conv2d_1.weight"), p.at("conv2d_1.bias"));
  const int64_t n = y.shape[0], c = y.shape[1], hw = y.shape[2] * y.shape[3];
  const Values w = p.at("linear_0.weight").to_vector<double>(),
               b = p.at("linear_0.bias").to_vector<double>();
  const int64_t classes = static_cast<int64_t>(b.size());
  Values out;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < classes; ++k) {
      double acc = b[static_cast<size_t>(k)];
      for (int64_t ch = 0; ch < c; ++ch) {
        double pooled = 0;
        for (int64_t i = 0; i < hw; ++i) pooled += y.v[static_cast<size_t>((s * c + ch) * hw + i)];
        acc += pooled / static_cast<double>(hw) * w[static_cast<size_t>(ch * classes + k)];
      }
      out.push_back(acc);
    }
  return out;
}

}  // namespace

TEST(E2E, ExampleCNNShapesAndTypesAtBatch32) {
  PhysicalModel pm = compile_cnn({32, 3, 224, 224}, /*inference=*/false);
  EXPECT_EQ(shape_of(pm, "input"), "[32, 3, 224, 224]");
  EXPECT_EQ(shape_of(pm, "conv1"), "[32, 64, 222, 222]");
  EXPECT_EQ(shape_of(pm, "relu1"), "[32, 64, 222, 222]");
  EXPECT_EQ(shape_of(pm, "conv2"), "[32, 128, 220, 220]");
  EXPECT_EQ(shape_of(pm, "pool"), "[32, 128]");
  EXPECT_EQ(shape_of(pm, "output"), "[32, 10]");
  EXPECT_EQ(shape_of(pm, "conv2d_0.weight"), "[64, 3, 3, 3]");
  EXPECT_EQ(shape_of(pm, "conv2d_1.weight"), "[128, 64, 3, 3]");
  EXPECT_EQ(shape_of(pm, "batch_norm2d_0.weight"), "[64]");
  EXPECT_EQ(shape_of(pm, "linear_0.weight"), "[128, 10]");
  for (const auto& [name, t] : pm.get_types()) EXPECT_EQ(t, DType::Float32) << name;
  // Training reads the running statistics too (non-trainable state it updates): 64 + 64 more.
  EXPECT_EQ(pm.parameter_count(), (64 * 27 + 64) + (64 + 64) + (64 + 64) + (128 * 576 + 128) + (128 * 10 + 10));
}

TEST(E2E, ExampleCNNSymbolicBatch) {
  PhysicalModel pm = compile_cnn({"N", 3, 224, 224}, /*inference=*/true);
  EXPECT_EQ(shape_of(pm, "conv1"), "[N, 64, 222, 222]");
  EXPECT_EQ(shape_of(pm, "conv2"), "[N, 128, 220, 220]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 10]");
  EXPECT_EQ(pm.parameter_names().size(), 10u);  // inference reads the running statistics
  for (const auto& [name, t] : pm.get_types()) EXPECT_EQ(t, DType::Float32) << name;
}

TEST(E2E, ExampleCNNMatchesAHandWrittenForwardPass) {
  PhysicalModel pm = compile_cnn({"N", 3, 8, 8}, /*inference=*/false);
  EXPECT_EQ(shape_of(pm, "output"), "[N, 10]");
  TensorMap params = pm.randomize_params(0);
  params["conv2d_0.bias"] = random_tensor({64}, 11, -0.1, 0.1);
  params["linear_0.bias"] = random_tensor({10}, 12, -0.1, 0.1);
  Tensor x = random_tensor({3, 3, 8, 8}, 1);
  Tensor y = pm.evaluate(params, {{"input", x}}).at("output");
  ASSERT_EQ(y.shape(), (Shape{3, 10}));
  const Values want = cnn_reference(x, params);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(y.item(static_cast<int64_t>(i)), want[i], 1e-4) << i;
}

TEST(E2E, ExampleCNNInferenceIsPerSampleAndTrainingIsNot) {
  PhysicalModel inference = compile_cnn({"N", 3, 16, 16}, /*inference=*/true);
  PhysicalModel training = compile_cnn({"N", 3, 16, 16}, /*inference=*/false);
  TensorMap params = inference.randomize_params(0);
  Tensor x = random_tensor({4, 3, 16, 16}, 2);
  Tensor all = inference.evaluate(params, {{"input", x}}).at("output");
  Tensor two = inference.evaluate(params, {{"input", first_samples(x, 2)}}).at("output");
  expect_finite(all);
  EXPECT_TRUE(allclose(two, first_samples(all, 2), 1e-5, 1e-6))
      << max_abs_diff(two, first_samples(all, 2));
  // Training normalizes with the batch's statistics, so the batch changes every row.
  TensorMap train_params = training.randomize_params(0);  // running statistics included: state
  EXPECT_EQ(train_params.size(), params.size());
  Tensor all_t = training.evaluate(train_params, {{"input", x}}).at("output");
  Tensor two_t = training.evaluate(train_params, {{"input", first_samples(x, 2)}}).at("output");
  EXPECT_GT(max_abs_diff(two_t, first_samples(all_t, 2)), 1e-4);
}

// The one full-size evaluation: ~2e11 FLOPs in the reference convolution.
TEST(E2E, ExampleCNNFullSizeBatch32) {
  if (slow_tests_skipped())
    GTEST_SKIP() << "INGOT_SKIP_SLOW=1: skipping the [32, 3, 224, 224] CNN evaluation";
  PhysicalModel batch32 = compile_cnn({32, 3, 224, 224}, /*inference=*/true);
  PhysicalModel symbolic = compile_cnn({"N", 3, 224, 224}, /*inference=*/true);
  TensorMap params = batch32.randomize_params(0);
  Tensor x = random_tensor({32, 3, 224, 224}, 3);

  auto t0 = std::chrono::steady_clock::now();
  Tensor y = batch32.evaluate(params, {{"input", x}}).at("output");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ E2E      ] ExampleCNN [32, 3, 224, 224] evaluated in " << seconds << " s\n";
  ASSERT_EQ(y.shape(), (Shape{32, 10}));
  EXPECT_EQ(y.dtype(), DType::Float32);
  expect_finite(y);

  Tensor two = symbolic.evaluate(params, {{"input", first_samples(x, 2)}}).at("output");
  ASSERT_EQ(two.shape(), (Shape{2, 10}));
  EXPECT_TRUE(allclose(two, first_samples(y, 2), 1e-5, 1e-6))
      << max_abs_diff(two, first_samples(y, 2));
}

TEST(E2E, ExampleMLPEndToEnd) {
  CompileOptions o;
  o.shapes = {{"input", {"N", 784}}};
  PhysicalModel pm = compile(example_model("mlp"), ReferenceBackend(), o);
  EXPECT_EQ(pm.parameter_names(), (std::vector<std::string>{"linear_0.weight", "linear_0.bias",
                                                            "linear_1.weight", "linear_1.bias"}));
  EXPECT_EQ(shape_of(pm, "linear_0.weight"), "[784, 256]");
  EXPECT_EQ(shape_of(pm, "linear_1.weight"), "[256, 10]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 10]");
  for (const auto& [name, t] : pm.get_types()) EXPECT_EQ(t, DType::Float32) << name;

  TensorMap params = pm.randomize_params(5);
  params["linear_0.bias"] = random_tensor({256}, 6, -0.1, 0.1);
  Tensor x = random_tensor({3, 784}, 7);
  Tensor y = pm.evaluate(params, {{"input", x}}).at("output");
  ASSERT_EQ(y.shape(), (Shape{3, 10}));
  const Values xv = x.to_vector<double>(), w0 = params.at("linear_0.weight").to_vector<double>(),
               b0 = params.at("linear_0.bias").to_vector<double>(),
               w1 = params.at("linear_1.weight").to_vector<double>();
  for (size_t n = 0; n < 3; ++n) {
    Values hidden(256);
    for (size_t j = 0; j < 256; ++j) {
      double acc = b0[j];
      for (size_t k = 0; k < 784; ++k) acc += xv[n * 784 + k] * w0[k * 256 + j];
      hidden[j] = std::max(acc, 0.0);
    }
    for (size_t c = 0; c < 10; ++c) {
      double acc = 0;  // linear_1.bias is zeros
      for (size_t j = 0; j < 256; ++j) acc += hidden[j] * w1[j * 10 + c];
      EXPECT_NEAR(y.item(static_cast<int64_t>(n * 10 + c)), acc, 1e-4);
    }
  }
}
