// Every zoo block, compiled with the reference backend inside a parent model and checked
// against a straightforward computation in double: values, inferred shapes and dtypes,
// parameter names and initializers, and training versus inference behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using ingot::testing::error_of;
using ingot::testing::random_tensor;
using ingot::testing::shape_of;
using ingot::testing::Contains;

namespace {

using Names = std::vector<std::string>;
using Values = std::vector<double>;

// `block` added with += to an empty model, so its parameters are named "<instance>.<name>".
PhysicalModel compile_block(const Model& block, std::map<std::string, ShapeTemplate> shapes,
                            bool inference = false) {
  Model m;
  m += block;
  CompileOptions o;
  o.shapes = std::move(shapes);
  o.inference = inference;
  return compile(m, ReferenceBackend(), o);
}

void expect_all_float32(const PhysicalModel& pm) {
  for (const auto& [name, t] : pm.get_types()) EXPECT_EQ(t, DType::Float32) << name;
}

void expect_values(const Tensor& t, const Values& want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.item(static_cast<int64_t>(i)), want[i], tol) << "element " << i;
}

void expect_within(const Tensor& t, double bound) {
  double largest = 0;
  for (int64_t i = 0; i < t.numel(); ++i) largest = std::max(largest, std::abs(t.item(i)));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, bound / 2) << "values should spread over the initializer's range";
}

void expect_filled(const Tensor& t, double value) {
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.item(i), value) << "element " << i;
}

Values map_values(const Tensor& t, const std::function<double(double)>& f) {
  Values out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(f(t.item(i)));
  return out;
}

// Row-major index into a 4-D shape.
int64_t at4(const Shape& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

// NCHW convolution in double; `bias` may be empty.
Values conv2d_ref(const Tensor& x, const Tensor& w, const Values& bias, int64_t stride, int64_t pad,
                  int64_t dil, int64_t groups) {
  const Shape xs = x.shape(), ws = w.shape();
  const Values xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const int64_t ho = (xs[2] + 2 * pad - dil * (ws[2] - 1) - 1) / stride + 1;
  const int64_t wo = (xs[3] + 2 * pad - dil * (ws[3] - 1) - 1) / stride + 1;
  const int64_t per_group = ws[0] / groups;
  Values y;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t m = 0; m < ws[0]; ++m)
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          double acc = bias.empty() ? 0 : bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < ws[1]; ++c)
            for (int64_t kh = 0; kh < ws[2]; ++kh)
              for (int64_t kw = 0; kw < ws[3]; ++kw) {
                const int64_t ih = oh * stride - pad + kh * dil, iw = ow * stride - pad + kw * dil;
                if (ih < 0 || iw < 0 || ih >= xs[2] || iw >= xs[3]) continue;
                const int64_t ic = m / per_group * ws[1] + c;
                acc += xv[static_cast<size_t>(at4(xs, n, ic, ih, iw))] *
                       wv[static_cast<size_t>(at4(ws, m, c, kh, kw))];
              }
          y.push_back(acc);
        }
  return y;
}

// Square-window pooling in double; average pools count the padding (count_include_pad).
// ceil: PyTorch's ceil_mode, a last window past the padded end that starts inside the input.
Values pool_ref(const Tensor& x, int64_t k, int64_t stride, int64_t pad, bool max, bool ceil = false) {
  const Shape xs = x.shape();
  const Values xv = x.to_vector<double>();
  auto count = [&](int64_t n) {
    const int64_t floor = (n + 2 * pad - k) / stride + 1;
    return ceil && (n + 2 * pad - k) % stride != 0 && floor * stride < n + pad ? floor + 1 : floor;
  };
  const int64_t ho = count(xs[2]), wo = count(xs[3]);
  Values y;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t oh = 0; oh < ho; ++oh)
        for (int64_t ow = 0; ow < wo; ++ow) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0;
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < k; ++j) {
              const int64_t ih = oh * stride - pad + i, iw = ow * stride - pad + j;
              if (ih < 0 || iw < 0 || ih >= xs[2] || iw >= xs[3]) continue;
              const double v = xv[static_cast<size_t>(at4(xs, n, c, ih, iw))];
              acc = max ? std::max(acc, v) : acc + v;
            }
          y.push_back(max ? acc : acc / static_cast<double>(k * k));
        }
  return y;
}

// x @ w + b for x [n, k], w [k, m], b [m] (empty: no bias).
Values affine_ref(const Values& x, int64_t n, const Tensor& w, const Values& b) {
  const int64_t k = w.dim(0), m = w.dim(1);
  const Values wv = w.to_vector<double>();
  Values y(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = b.empty() ? 0 : b[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p)
        acc += x[static_cast<size_t>(i * k + p)] * wv[static_cast<size_t>(p * m + j)];
      y[static_cast<size_t>(i * m + j)] = acc;
    }
  return y;
}

// log_softmax over the rows of logits [n, c].
Values log_softmax_rows(const Values& logits, int64_t n, int64_t c) {
  Values out(logits.size());
  for (int64_t i = 0; i < n; ++i) {
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, logits[static_cast<size_t>(i * c + j)]);
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits[static_cast<size_t>(i * c + j)] - mx);
    for (int64_t j = 0; j < c; ++j)
      out[static_cast<size_t>(i * c + j)] =
          logits[static_cast<size_t>(i * c + j)] - mx - std::log(sum);
  }
  return out;
}

double sum_of(const Values& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}

bool has_op(const PhysicalModel& pm, const std::string& op) {
  for (const Node& n : pm.graph().nodes())
    if (n.op == op) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------- layers

TEST(Zoo, LinearMatchesLoopsAndInitializers) {
  PhysicalModel pm = compile_block(Linear(4), {{"input", {5, 3}}});
  EXPECT_EQ(pm.parameter_names(), (Names{"linear_0.weight", "linear_0.bias"}));
  EXPECT_EQ(shape_of(pm, "linear_0.weight"), "[3, 4]");
  EXPECT_EQ(shape_of(pm, "linear_0.bias"), "[4]");
  EXPECT_EQ(shape_of(pm, "output"), "[5, 4]");
  expect_all_float32(pm);

  TensorMap params = pm.randomize_params(0);
  expect_within(params.at("linear_0.weight"), 1 / std::sqrt(3.0));
  expect_filled(params.at("linear_0.bias"), 0);
  params["linear_0.bias"] = random_tensor({4}, 1);
  Tensor x = random_tensor({5, 3}, 2);
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"),
                affine_ref(x.to_vector<double>(), 5, params.at("linear_0.weight"),
                           params.at("linear_0.bias").to_vector<double>()));

  PhysicalModel wide = compile_block(Linear(8, /*use_bias=*/false), {{"input", {"N", 100}}});
  EXPECT_EQ(wide.parameter_names(), (Names{"linear_0.weight"}));
  expect_within(wide.randomize_params(3).at("linear_0.weight"), 0.1);
  EXPECT_TRUE(Contains(error_of([] { Linear(0); }), "out_features must be positive"));
}

TEST(Zoo, Conv2dMatchesNaiveLoopsWithStridePaddingAndGroups) {
  Conv2dOptions o;
  o.out_channels = 6;
  o.kernel_size = 3;
  o.stride = 2;
  o.padding = 1;
  o.groups = 2;
  PhysicalModel pm = compile_block(Conv2d(o), {{"input", {2, 4, 7, 7}}});
  EXPECT_EQ(pm.parameter_names(), (Names{"conv2d_0.weight", "conv2d_0.bias"}));
  EXPECT_EQ(shape_of(pm, "conv2d_0.weight"), "[6, 2, 3, 3]");
  EXPECT_EQ(shape_of(pm, "conv2d_0.bias"), "[6]");
  EXPECT_EQ(shape_of(pm, "output"), "[2, 6, 4, 4]");
  expect_all_float32(pm);

  TensorMap params = pm.randomize_params(0);
  expect_within(params.at("conv2d_0.weight"), 1 / std::sqrt(2.0 * 3 * 3));
  expect_filled(params.at("conv2d_0.bias"), 0);
  params["conv2d_0.bias"] = random_tensor({6}, 1);
  Tensor x = random_tensor({2, 4, 7, 7}, 2);
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"),
                conv2d_ref(x, params.at("conv2d_0.weight"),
                           params.at("conv2d_0.bias").to_vector<double>(), 2, 1, 1, 2));
}

TEST(Zoo, Conv2dRectangularDilatedWithoutBias) {
  Conv2dOptions o;
  o.out_channels = 5;
  o.kernel_h = 2;
  o.kernel_w = 3;
  o.dilation = 2;
  o.use_bias = false;
  o.in_channels = 3;
  Model m;
  m += Conv2d(o);
  // in_channels fixes the weight, and through it the input's channels.
  CompileOptions opts;
  opts.shapes = {{"input", {1, nullptr, 6, 8}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), opts);
  EXPECT_EQ(shape_of(pm, "input"), "[1, 3, 6, 8]");
  EXPECT_EQ(pm.parameter_names(), (Names{"conv2d_0.weight"}));
  EXPECT_EQ(shape_of(pm, "conv2d_0.weight"), "[5, 3, 2, 3]");
  EXPECT_EQ(shape_of(pm, "output"), "[1, 5, 4, 4]");
  TensorMap params = pm.randomize_params(4);
  Tensor x = random_tensor({1, 3, 6, 8}, 5);
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"),
                conv2d_ref(x, params.at("conv2d_0.weight"), {}, 1, 0, 2, 1));
}

TEST(Zoo, Conv2dShortFormAndArgumentChecks) {
  PhysicalModel pm = compile_block(Conv2d(4, 3, 1, 1), {{"input", {"N", 2, 5, 5}}});
  EXPECT_EQ(shape_of(pm, "conv2d_0.weight"), "[4, 2, 3, 3]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 4, 5, 5]");
  Conv2dOptions bad;
  bad.out_channels = 6;
  bad.groups = 4;
  EXPECT_TRUE(Contains(error_of([&] { Conv2d(bad); }),
                       "groups (4) must be positive and divide out_channels (6)"));
  EXPECT_TRUE(Contains(error_of([] { Conv2d(0, 3); }), "out_channels must be positive"));
  // Input channels that the groups do not divide are a compile error.
  Conv2dOptions grouped;
  grouped.out_channels = 4;
  grouped.groups = 2;
  EXPECT_TRUE(Contains(error_of([&] {
                         compile_block(Conv2d(grouped), {{"input", {1, 3, 5, 5}}});
                       }),
                       "groups"));
}

TEST(Zoo, BatchNorm2dTrainingUsesBatchStatistics) {
  const Shape xs = {3, 2, 4, 5};
  PhysicalModel pm = compile_block(BatchNorm2d(), {{"input", {3, 2, 4, 5}}});
  // Training normalizes with batch statistics; the running ones are state it updates, not trains.
  EXPECT_EQ(pm.gradient_names(), (Names{"batch_norm2d_0.weight", "batch_norm2d_0.bias"}));
  EXPECT_TRUE(pm.graph().find_output("state:batch_norm2d_0.running_mean"));
  EXPECT_EQ(shape_of(pm, "batch_norm2d_0.weight"), "[2]");
  EXPECT_EQ(shape_of(pm, "output"), "[3, 2, 4, 5]");
  EXPECT_TRUE(has_op(pm, "moments"));
  expect_all_float32(pm);

  TensorMap params = pm.randomize_params(0);
  expect_filled(params.at("batch_norm2d_0.weight"), 1);
  expect_filled(params.at("batch_norm2d_0.bias"), 0);
  params["batch_norm2d_0.weight"] = random_tensor({2}, 1, 0.5, 2);
  params["batch_norm2d_0.bias"] = random_tensor({2}, 2);
  Tensor x = random_tensor(xs, 3, -2, 3);
  const Values xv = x.to_vector<double>();
  Values want(xv.size());
  for (int64_t c = 0; c < 2; ++c) {
    double mean = 0, var = 0, count = 3 * 4 * 5;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 20; ++i) mean += xv[static_cast<size_t>((n * 2 + c) * 20 + i)];
    mean /= count;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 20; ++i)
        var += std::pow(xv[static_cast<size_t>((n * 2 + c) * 20 + i)] - mean, 2);
    var /= count;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 20; ++i) {
        const size_t k = static_cast<size_t>((n * 2 + c) * 20 + i);
        want[k] =
            (xv[k] - mean) / std::sqrt(var + 1e-5) * params.at("batch_norm2d_0.weight").item(c) +
            params.at("batch_norm2d_0.bias").item(c);
      }
  }
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"), want, 1e-4);
}

TEST(Zoo, BatchNorm2dInferenceUsesRunningStatistics) {
  PhysicalModel pm =
      compile_block(BatchNorm2d(1e-3), {{"input", {"N", 3, 2, 2}}}, /*inference=*/true);
  EXPECT_EQ(pm.parameter_names(),
            (Names{"batch_norm2d_0.weight", "batch_norm2d_0.bias", "batch_norm2d_0.running_mean",
                   "batch_norm2d_0.running_var"}));
  EXPECT_EQ(shape_of(pm, "batch_norm2d_0.running_var"), "[3]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 3, 2, 2]");
  EXPECT_FALSE(has_op(pm, "moments"));

  TensorMap params = pm.randomize_params(0);
  expect_filled(params.at("batch_norm2d_0.running_mean"), 0);
  expect_filled(params.at("batch_norm2d_0.running_var"), 1);
  params["batch_norm2d_0.weight"] = random_tensor({3}, 1);
  params["batch_norm2d_0.bias"] = random_tensor({3}, 2);
  params["batch_norm2d_0.running_mean"] = random_tensor({3}, 3);
  params["batch_norm2d_0.running_var"] = random_tensor({3}, 4, 0.5, 2);
  Tensor x = random_tensor({2, 3, 2, 2}, 5);
  Values want;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = i / 4 % 3;
    auto p = [&](const char* name) {
      return params.at(std::string("batch_norm2d_0.") + name).item(c);
    };
    want.push_back((x.item(i) - p("running_mean")) / std::sqrt(p("running_var") + 1e-3) *
                       p("weight") +
                   p("bias"));
  }
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"), want);
}

TEST(Zoo, BatchNorm2dRunningStatisticsCanBeData) {
  Model m;
  m += BatchNorm2d();
  CompileOptions o;
  o.shapes = {{"input", {1, 2, 1, 1}}};
  o.inference = true;
  o.data_keys = {"batch_norm2d_0.running_mean", "batch_norm2d_0.running_var"};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(pm.input_names(),
            (Names{"input", "batch_norm2d_0.running_mean", "batch_norm2d_0.running_var"}));
  TensorMap out =
      pm.evaluate(pm.randomize_params(0),
                  {{"input", Tensor::from_vector<float>({3, 5}, {1, 2, 1, 1})},
                   {"batch_norm2d_0.running_mean", Tensor::from_vector<float>({1, 1}, {2})},
                   {"batch_norm2d_0.running_var", Tensor::from_vector<float>({4, 16}, {2})}});
  expect_values(out.at("output"), {2 / std::sqrt(4 + 1e-5), 4 / std::sqrt(16 + 1e-5)});
}

TEST(Zoo, LayerNormNormalizesTrailingDims) {
  PhysicalModel pm = compile_block(LayerNorm(2), {{"input", {3, 4, 5}}});
  EXPECT_EQ(pm.parameter_names(), (Names{"layer_norm_0.weight", "layer_norm_0.bias"}));
  EXPECT_EQ(shape_of(pm, "layer_norm_0.weight"), "[4, 5]");
  EXPECT_EQ(shape_of(pm, "layer_norm_0.bias"), "[4, 5]");
  TensorMap params = pm.randomize_params(0);
  expect_filled(params.at("layer_norm_0.weight"), 1);
  expect_filled(params.at("layer_norm_0.bias"), 0);
  params["layer_norm_0.weight"] = random_tensor({4, 5}, 1);
  params["layer_norm_0.bias"] = random_tensor({4, 5}, 2);
  Tensor x = random_tensor({3, 4, 5}, 3, -3, 3);
  const Values xv = x.to_vector<double>();
  Values want;
  for (size_t r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (size_t k = 0; k < 20; ++k) mean += xv[r * 20 + k] / 20;
    for (size_t k = 0; k < 20; ++k) var += std::pow(xv[r * 20 + k] - mean, 2) / 20;
    for (size_t k = 0; k < 20; ++k)
      want.push_back((xv[r * 20 + k] - mean) / std::sqrt(var + 1e-5) *
                         params.at("layer_norm_0.weight").item(static_cast<int64_t>(k)) +
                     params.at("layer_norm_0.bias").item(static_cast<int64_t>(k)));
  }
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"), want, 1e-4);

  PhysicalModel plain = compile_block(LayerNorm(1, 1e-5, /*affine=*/false), {{"input", {2, 6}}});
  EXPECT_TRUE(plain.parameter_names().empty());
  Tensor out = plain.evaluate({}, {{"input", random_tensor({2, 6}, 4)}}).at("output");
  for (int64_t r = 0; r < 2; ++r) {
    double mean = 0;
    for (int64_t k = 0; k < 6; ++k) mean += out.item(r * 6 + k) / 6;
    EXPECT_NEAR(mean, 0, 1e-6);
  }
}

// Input sizes given as PyTorch does (Linear(in, out), BatchNorm2d(C), LayerNorm({sizes})): the
// same parameters as when inferred, and an input of another size is a shape error naming it.
TEST(Zoo, GivenInputSizesAreCheckedAgainstTheInput) {
  LinearOptions lo;
  lo.in_features = 6;
  lo.out_features = 3;
  EXPECT_EQ(shape_of(compile_block(Linear(lo), {{"input", {2, 6}}}), "linear_0.weight"), "[6, 3]");
  EXPECT_THROW(compile_block(Linear(lo), {{"input", {2, 5}}}), Error);
  BatchNorm2dOptions bo;
  bo.num_features = 4;
  EXPECT_EQ(shape_of(compile_block(BatchNorm2d(bo), {{"input", {2, 4, 3, 3}}}), "batch_norm2d_0.running_mean"), "[4]");
  EXPECT_THROW(compile_block(BatchNorm2d(bo), {{"input", {2, 5, 3, 3}}}), Error);
  NormOptions no;
  no.normalized_shape = {4, 5};
  const PhysicalModel ln = compile_block(LayerNorm(no), {{"input", {3, 4, 5}}});
  EXPECT_EQ(shape_of(ln, "layer_norm_0.weight"), "[4, 5]");
  EXPECT_EQ(shape_of(ln, "layer_norm_0.bias"), "[4, 5]");
  EXPECT_EQ(shape_of(compile_block(RMSNorm(no), {{"input", {3, 4, 5}}}), "rms_norm_0.weight"), "[4, 5]");
  EXPECT_THROW(compile_block(LayerNorm(no), {{"input", {3, 5, 5}}}), Error);
  no.normalized_shape = {0};
  EXPECT_THROW(LayerNorm(no), Error);
}

// ---------------------------------------------------------------- activations

TEST(Zoo, ActivationsMatchTheirFormulas) {
  const double kSqrt2OverPi = std::sqrt(2 / std::numbers::pi);
  const std::vector<std::tuple<std::string, Model, std::function<double(double)>>> cases = {
      {"relu", Relu(), [](double v) { return std::max(v, 0.0); }},
      {"gelu", Gelu(), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"gelu_tanh", Gelu(true),
       [&](double v) {
         return 0.5 * v * (1 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
       }},
      {"sigmoid", Sigmoid(), [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"tanh", Tanh(), [](double v) { return std::tanh(v); }},
      {"identity", Identity(), [](double v) { return v; }},
  };
  Tensor x = random_tensor({3, 7}, 1, -4, 4);
  for (const auto& [name, block, f] : cases) {
    SCOPED_TRACE(name);
    PhysicalModel pm = compile_block(block, {{"input", {"N", 7}}});
    EXPECT_EQ(shape_of(pm, "output"), "[N, 7]");
    expect_all_float32(pm);
    expect_values(pm.evaluate({}, {{"input", x}}).at("output"), map_values(x, f));
  }
}

TEST(Zoo, SoftmaxRowsSumToOne) {
  Tensor x = random_tensor({4, 6}, 2, -5, 5);
  PhysicalModel pm = compile_block(Softmax(), {{"input", {4, 6}}});
  Tensor y = pm.evaluate({}, {{"input", x}}).at("output");
  const Values logp = log_softmax_rows(x.to_vector<double>(), 4, 6);
  expect_values(y, map_values(Tensor::from_vector<double>(logp, {4, 6}),
                              [](double v) { return std::exp(v); }));
  for (int64_t r = 0; r < 4; ++r) {
    double s = 0;
    for (int64_t k = 0; k < 6; ++k) s += y.item(r * 6 + k);
    EXPECT_NEAR(s, 1, 1e-6);
  }
  PhysicalModel log = compile_block(LogSoftmax(), {{"input", {4, 6}}});
  expect_values(log.evaluate({}, {{"input", x}}).at("output"), logp);
  // Along axis 0 the columns sum to one.
  Tensor cols =
      compile_block(Softmax(0), {{"input", {4, 6}}}).evaluate({}, {{"input", x}}).at("output");
  for (int64_t k = 0; k < 6; ++k) {
    double s = 0;
    for (int64_t r = 0; r < 4; ++r) s += cols.item(r * 6 + k);
    EXPECT_NEAR(s, 1, 1e-6);
  }
}

TEST(Zoo, DropoutTrainingVersusInference) {
  const double p = 0.25;
  Tensor x = random_tensor({40, 50}, 3, 0.5, 1.5);
  Tensor y =
      compile_block(Dropout(p, 7), {{"input", {40, 50}}}).evaluate({}, {{"input", x}}).at("output");
  int64_t zeros = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (y.item(i) == 0) {
      ++zeros;
      continue;
    }
    EXPECT_NEAR(y.item(i), x.item(i) / (1 - p), 1e-6) << "element " << i;
  }
  EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(x.numel()), p, 0.05);
  // Seeded: the same seed drops the same elements, another seed others.
  Tensor again =
      compile_block(Dropout(p, 7), {{"input", {40, 50}}}).evaluate({}, {{"input", x}}).at("output");
  Tensor other =
      compile_block(Dropout(p, 8), {{"input", {40, 50}}}).evaluate({}, {{"input", x}}).at("output");
  EXPECT_TRUE(equal(y, again));
  EXPECT_FALSE(equal(y, other));
  // Inference: identity, and no dropout node is left.
  PhysicalModel inference = compile_block(Dropout(p, 7), {{"input", {40, 50}}}, /*inference=*/true);
  EXPECT_FALSE(has_op(inference, "dropout"));
  EXPECT_TRUE(equal(inference.evaluate({}, {{"input", x}}).at("output"), x));
  EXPECT_TRUE(Contains(error_of([] { Dropout(1.5); }), "p must be in [0, 1]"));
}

// ---------------------------------------------------------------- pooling and reshaping

TEST(Zoo, PoolsMatchNaiveLoops) {
  Tensor x = random_tensor({2, 3, 7, 7}, 4, -2, 2);
  struct Case {
    std::string name;
    Model block;
    int64_t k, stride, pad;
    bool max;
    std::string shape;
    bool ceil = false;
  };
  const std::vector<Case> cases = {
      {"max k2", MaxPool2d(2), 2, 2, 0, true, "[2, 3, 3, 3]"},
      {"max k3 s2 p1", MaxPool2d(3, 2, 1), 3, 2, 1, true, "[2, 3, 4, 4]"},
      {"max k2 ceil", MaxPool2d(2, 2, 0, true), 2, 2, 0, true, "[2, 3, 4, 4]", true},
      {"max k3 s2 ceil", MaxPool2d(3, 2, 0, true), 3, 2, 0, true, "[2, 3, 3, 3]", true},
      {"avg k2", AvgPool2d(2), 2, 2, 0, false, "[2, 3, 3, 3]"},
      {"avg k3 s1 p1", AvgPool2d(3, 1, 1), 3, 1, 1, false, "[2, 3, 7, 7]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PhysicalModel pm = compile_block(c.block, {{"input", {2, 3, 7, 7}}});
    EXPECT_EQ(shape_of(pm, "output"), c.shape);
    EXPECT_TRUE(pm.parameter_names().empty());
    expect_values(pm.evaluate({}, {{"input", x}}).at("output"),
                  pool_ref(x, c.k, c.stride, c.pad, c.max, c.ceil));
  }
  EXPECT_TRUE(Contains(error_of([] { MaxPool2d(0); }), "kernel_size must be positive"));
}

TEST(Zoo, GlobalAvgPool2dAndFlatten) {
  Tensor x = random_tensor({2, 3, 4, 5}, 5);
  PhysicalModel gap = compile_block(GlobalAvgPool2d(), {{"input", {"N", 3, 4, 5}}});
  EXPECT_EQ(shape_of(gap, "output"), "[N, 3]");
  Values means;
  for (int64_t nc = 0; nc < 6; ++nc) {
    double s = 0;
    for (int64_t i = 0; i < 20; ++i) s += x.item(nc * 20 + i);
    means.push_back(s / 20);
  }
  expect_values(gap.evaluate({}, {{"input", x}}).at("output"), means);

  PhysicalModel flat = compile_block(Flatten(), {{"input", {"N", 3, 4, 5}}});
  EXPECT_EQ(shape_of(flat, "output"), "[N, 60]");
  Tensor y = flat.evaluate({}, {{"input", x}}).at("output");
  EXPECT_EQ(y.shape(), (Shape{2, 60}));
  EXPECT_TRUE(equal(y, x.reshape({2, 60})));
}

TEST(Zoo, EmbeddingGathersRows) {
  PhysicalModel pm = compile_block(Embedding(10, 4), {{"input", {2, 3}}});
  EXPECT_EQ(pm.get_types().at("input"), DType::Int64);
  EXPECT_EQ(pm.get_types().at("output"), DType::Float32);
  EXPECT_EQ(shape_of(pm, "embedding_0.weight"), "[10, 4]");
  EXPECT_EQ(shape_of(pm, "output"), "[2, 3, 4]");
  TensorMap params = pm.randomize_params(0);
  const std::vector<int64_t> ids = {0, 9, 3, 3, -1, 7};  // negative indices count from the end
  Tensor out =
      pm.evaluate(params, {{"input", Tensor::from_vector<int64_t>(ids, {2, 3})}}).at("output");
  const Tensor& w = params.at("embedding_0.weight");
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t d = 0; d < 4; ++d)
      EXPECT_EQ(out.item(static_cast<int64_t>(i) * 4 + d), w.item(((ids[i] + 10) % 10) * 4 + d));

  // int32 indices through the `types` option.
  Model m;
  m += Embedding(10, 4);
  CompileOptions o;
  o.shapes = {{"input", {"B", "T"}}};
  o.types = {{"input", DType::Int32}};
  PhysicalModel p32 = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(shape_of(p32, "output"), "[B, T, 4]");
  Tensor out32 =
      p32.evaluate(params, {{"input", Tensor::from_vector<int32_t>({0, 9, 3, 3, -1, 7}, {2, 3})}})
          .at("output");
  EXPECT_TRUE(equal(out32, out));
  o.types = {{"input", DType::Float32}};
  EXPECT_TRUE(Contains(error_of([&] { compile(m, ReferenceBackend(), o); }), "integer dtype"));
}

TEST(Zoo, EmbeddingInitializerIsStandardNormal) {
  PhysicalModel pm = compile_block(Embedding(100, 50), {{"input", {1}}});
  Tensor w = pm.randomize_params(0).at("embedding_0.weight");
  double mean = 0, sq = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    mean += w.item(i) / static_cast<double>(w.numel());
    sq += w.item(i) * w.item(i) / static_cast<double>(w.numel());
  }
  EXPECT_NEAR(mean, 0, 0.05);
  EXPECT_NEAR(std::sqrt(sq - mean * mean), 1, 0.05);
}

// ---------------------------------------------------------------- combinators

TEST(Zoo, AddAndMultiplyTakeLeftAndRight) {
  for (bool add : {true, false}) {
    SCOPED_TRACE(add ? "Add" : "Multiply");
    Model m;
    m |= (add ? Add() : Multiply())({{"left", "a"}, {"right", "b"}, {"output", "c"}});
    CompileOptions o;
    o.shapes = {{"a", {2, 3}}, {"b", {3}}};  // broadcast
    PhysicalModel pm = compile(m, ReferenceBackend(), o);
    EXPECT_EQ(shape_of(pm, "c"), "[2, 3]");
    Tensor a = random_tensor({2, 3}, 1), b = random_tensor({3}, 2);
    Tensor c = pm.evaluate({}, {{"a", a}, {"b", b}}).at("c");
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_NEAR(c.item(i), add ? a.item(i) + b.item(i % 3) : a.item(i) * b.item(i % 3), 1e-6);
  }
  // += chains into "left"; "right" stays an input of the model.
  Model chained;
  chained += Relu();
  chained += Add();
  EXPECT_EQ(chained.input_keys(), (Names{"input", "add_0.right"}));
}

TEST(Zoo, MLPChainsLinearsWithActivations) {
  PhysicalModel pm = compile_block(MLP({8, 4, 2}, "tanh"), {{"input", {"N", 3}}});
  EXPECT_EQ(pm.parameter_names(),
            (Names{"mlp_0.linear_0.weight", "mlp_0.linear_0.bias", "mlp_0.linear_1.weight",
                   "mlp_0.linear_1.bias", "mlp_0.linear_2.weight", "mlp_0.linear_2.bias"}));
  EXPECT_EQ(shape_of(pm, "mlp_0.linear_1.weight"), "[8, 4]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 2]");
  TensorMap params = pm.randomize_params(0);
  for (const char* b : {"mlp_0.linear_0.bias", "mlp_0.linear_1.bias", "mlp_0.linear_2.bias"})
    params[b] = random_tensor(to_shape(pm.get_shapes().at(b)), 9);
  Tensor x = random_tensor({5, 3}, 1);
  Values h = x.to_vector<double>();
  for (int l = 0; l < 3; ++l) {
    const std::string p = "mlp_0.linear_" + std::to_string(l);
    h = affine_ref(h, 5, params.at(p + ".weight"), params.at(p + ".bias").to_vector<double>());
    if (l < 2)
      for (double& v : h) v = std::tanh(v);
  }
  expect_values(pm.evaluate(params, {{"input", x}}).at("output"), h);

  Model linear_only = MLP({3, 3}, "none");
  EXPECT_EQ(linear_only.input_keys(), (Names{"input", "linear_0.weight", "linear_0.bias",
                                             "linear_1.weight", "linear_1.bias"}));
  EXPECT_TRUE(Contains(error_of([] { MLP({4}, "swish"); }),
                       "Unknown activation 'swish' (expected relu, gelu, tanh, sigmoid or none)"));
  EXPECT_TRUE(Contains(error_of([] { MLP({}); }), "at least one width"));
}

// ---------------------------------------------------------------- losses

namespace {
// A loss block with its terminals linked to "pred", "target" and "loss".
Model loss_model(const Model& loss) {
  Model m;
  m |= loss({{"input", "pred"}, {"target", "target"}, {"output", "loss"}});
  return m;
}

PhysicalModel compile_loss(const Model& loss, ShapeTemplate pred, ShapeTemplate target,
                           std::map<std::string, DType> types = {}) {
  CompileOptions o;
  o.shapes = {{"pred", std::move(pred)}, {"target", std::move(target)}};
  o.types = std::move(types);
  return compile(loss_model(loss), ReferenceBackend(), o);
}
}  // namespace

TEST(Zoo, MSELossReductions) {
  Tensor pred = random_tensor({3, 4}, 1), target = random_tensor({3, 4}, 2);
  Values sq;
  for (int64_t i = 0; i < 12; ++i) sq.push_back(std::pow(pred.item(i) - target.item(i), 2));
  const TensorMap inputs = {{"pred", pred}, {"target", target}};
  PhysicalModel mean = compile_loss(MSELoss(), {3, 4}, {3, 4});
  EXPECT_EQ(shape_of(mean, "loss"), "[]");
  expect_values(mean.evaluate({}, inputs).at("loss"), {sum_of(sq) / 12});
  expect_values(compile_loss(MSELoss("sum"), {3, 4}, {3, 4}).evaluate({}, inputs).at("loss"),
                {sum_of(sq)});
  PhysicalModel none = compile_loss(MSELoss("none"), {3, 4}, {3, 4});
  EXPECT_EQ(shape_of(none, "loss"), "[3, 4]");
  expect_values(none.evaluate({}, inputs).at("loss"), sq);
  EXPECT_TRUE(Contains(error_of([] { MSELoss("avg"); }),
                       "Unknown reduction 'avg' (expected mean, sum or none)"));
}

TEST(Zoo, CrossEntropyWithIntegerTargets) {
  // Repeated classes in one batch must each pick their own row.
  const std::vector<int64_t> classes = {2, 0, 2, 3, 2};
  Tensor logits = random_tensor({5, 4}, 3, -3, 3);
  Tensor target = Tensor::from_vector<int64_t>(classes, {5});
  const Values logp = log_softmax_rows(logits.to_vector<double>(), 5, 4);
  Values per_sample;
  for (size_t i = 0; i < classes.size(); ++i)
    per_sample.push_back(-logp[i * 4 + static_cast<size_t>(classes[i])]);
  const TensorMap inputs = {{"pred", logits}, {"target", target}};

  PhysicalModel mean = compile_loss(CrossEntropyLoss(), {5, 4}, {5});
  EXPECT_EQ(mean.get_types().at("target"), DType::Int64);
  EXPECT_EQ(mean.get_types().at("loss"), DType::Float32);
  EXPECT_EQ(shape_of(mean, "loss"), "[]");
  expect_values(mean.evaluate({}, inputs).at("loss"), {sum_of(per_sample) / 5});
  expect_values(compile_loss(CrossEntropyLoss("sum"), {5, 4}, {5}).evaluate({}, inputs).at("loss"),
                {sum_of(per_sample)});
  PhysicalModel none = compile_loss(CrossEntropyLoss("none"), {"N", 4}, {"N"});
  EXPECT_EQ(shape_of(none, "loss"), "[N]");
  expect_values(none.evaluate({}, inputs).at("loss"), per_sample);
  // int32 targets through the `types` option.
  PhysicalModel i32 =
      compile_loss(CrossEntropyLoss("none"), {5, 4}, {5}, {{"target", DType::Int32}});
  expect_values(
      i32.evaluate({}, {{"pred", logits}, {"target", target.astype(DType::Int32)}}).at("loss"),
      per_sample);
}

TEST(Zoo, CrossEntropyIgnoresMinusInfinityOfOtherClasses) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor logits = Tensor::from_vector<float>(
      {1, static_cast<float>(-inf), 0, 0, 2, static_cast<float>(-inf)}, {2, 3});
  Tensor target = Tensor::from_vector<int64_t>({0, 1}, {2});
  Tensor loss = compile_loss(CrossEntropyLoss("none"), {2, 3}, {2})
                    .evaluate({}, {{"pred", logits}, {"target", target}})
                    .at("loss");
  expect_values(loss, {std::log(1 + std::exp(-1.0)), std::log(1 + std::exp(2.0)) - 2});
}

TEST(Zoo, CrossEntropyWithOneHotTargets) {
  Tensor logits = random_tensor({3, 4}, 4, -2, 2);
  Values probs = {0.1, 0.2, 0.3, 0.4, 1, 0, 0, 0, 0, 0.5, 0, 0.5};
  Tensor target = Tensor::from_vector<double>(probs, {3, 4}).astype(DType::Float32);
  const Values logp = log_softmax_rows(logits.to_vector<double>(), 3, 4);
  Values per_sample(3, 0);
  for (size_t i = 0; i < 12; ++i) per_sample[i / 4] -= probs[i] * logp[i];
  const TensorMap inputs = {{"pred", logits}, {"target", target}};
  PhysicalModel none =
      compile_loss(CrossEntropyLoss("none", /*one_hot_target=*/true), {3, 4}, {3, 4});
  expect_values(none.evaluate({}, inputs).at("loss"), per_sample);
  PhysicalModel mean = compile_loss(CrossEntropyLoss("mean", true), {3, 4}, {3, 4});
  expect_values(mean.evaluate({}, inputs).at("loss"), {sum_of(per_sample) / 3});
}

TEST(Zoo, LossOnTopOfANetwork) {
  Model m;
  m += Linear(3)({{"input", "x"}, {"output", IOKey("logits").expose()}});
  m |= CrossEntropyLoss()({{"input", "logits"}, {"target", "labels"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {"N", 5}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(pm.input_names(), (Names{"x", "labels"}));
  EXPECT_EQ(pm.output_names(), (Names{"logits", "loss"}));
  EXPECT_EQ(shape_of(pm, "labels"), "[N]");
  TensorMap out = pm.evaluate(pm.randomize_params(0),
                              {{"x", random_tensor({4, 5}, 1)},
                               {"labels", Tensor::from_vector<int64_t>({0, 1, 2, 1}, {4})}});
  const Values logp = log_softmax_rows(out.at("logits").to_vector<double>(), 4, 3);
  expect_values(out.at("loss"), {-(logp[0] + logp[4] + logp[8] + logp[10]) / 4});
}

// ---------------------------------------------------------------- bundled models and names

TEST(Zoo, BlocksAreNamedAfterTheirType) {
  Model m;
  m += Conv2d(4, 3);
  m += BatchNorm2d();
  m += GlobalAvgPool2d();
  m += Dropout();
  m += Linear(2);
  m |= MSELoss()({{"input", m.cout()}});
  m |= CrossEntropyLoss()({{"input", "z"}});
  m |= ExampleMLP();
  // Scalar literals inside a block are constant wires, so they are terminals too.
  EXPECT_EQ(
      m.input_keys(),
      (Names{"input", "conv2d_0.weight", "conv2d_0.bias", "batch_norm2d_0.weight",
             "batch_norm2d_0.bias", "batch_norm2d_0.running_mean", "batch_norm2d_0.running_var",
             "linear_0.weight", "linear_0.bias", "mse_loss_0.target", "z",
             "cross_entropy_loss_0.target",
             "example_mlp_0.input", "example_mlp_0.linear_0.weight", "example_mlp_0.linear_0.bias",
             "example_mlp_0.linear_1.weight", "example_mlp_0.linear_1.bias"}));
}

TEST(Zoo, ExampleModelsByName) {
  EXPECT_EQ(example_model_names(), (Names{"cnn", "mlp"}));
  EXPECT_EQ(example_model("cnn").type_name(), "ExampleCNN");
  EXPECT_EQ(example_model("mlp").type_name(), "ExampleMLP");
  EXPECT_TRUE(Contains(error_of([] { example_model("resnet"); }),
                       "Unknown example model 'resnet' (bundled: cnn, mlp)"));
  // ExampleMLP fixes its input width.
  CompileOptions o;
  o.shapes = {{"input", {"N", 100}}};
  EXPECT_TRUE(Contains(error_of([&] { compile(ExampleMLP(), ReferenceBackend(), o); }),
                       "Cannot infer shape for 'input'"));
  PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend());
  EXPECT_EQ(pm.parameter_count(), 784 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ(pm.get_shapes().at("output").back(), SymDim(10));
}

TEST(Zoo, BundledModelsSurviveAJsonRoundTrip) {
  for (const std::string& name : example_model_names()) {
    SCOPED_TRACE(name);
    Model original = example_model(name);
    Model loaded = Model::from_json(original.to_json());
    EXPECT_EQ(loaded.type_name(), original.type_name());
    EXPECT_EQ(loaded.input_keys(), original.input_keys());
    CompileOptions o;
    o.shapes = {{"input", name == "cnn" ? ShapeTemplate{2, 3, 8, 8} : ShapeTemplate{2, 784}}};
    o.inference = true;
    PhysicalModel a = compile(original, ReferenceBackend(), o),
                  b = compile(loaded, ReferenceBackend(), o);
    TensorMap params = a.randomize_params(0);
    Tensor x = random_tensor(to_shape(a.get_shapes().at("input")), 1);
    EXPECT_TRUE(equal(a.evaluate(params, {{"input", x}}).at("output"),
                      b.evaluate(params, {{"input", x}}).at("output")));
  }
}
