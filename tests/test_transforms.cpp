// grad / value_and_grad / vjp over array functions: against central finite differences in
// float64, and composed with compile both ways.
#include <gtest/gtest.h>

#include "array_finite_difference.h"
#include "array_mlp.h"
#include "ingot/cpu_backend.h"
#include "ingot/function_compile.h"
#include "ingot/transforms.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using testing::Contains;
using testing::error_of;
using testing::finite_difference;
using testing::random_tensor;

Tensor f64(Shape s, uint64_t seed) { return random_tensor(std::move(s), seed, -1, 1, DType::Float64); }

Array smooth(const Array& x) { return sum(tanh(x) * x + exp(x * 0.5) / (1.0 + square(x))); }

TEST(Transforms, GradMatchesFiniteDifferences) {
  Tensor x = f64({3, 4}, 1);
  Tensor g = grad(UnaryArrayFunction(smooth))(Array(x)).tensor();
  Tensor fd = finite_difference([](const std::vector<Array>& a) { return std::vector<Array>{smooth(a[0])}; }, {x}, 0);
  EXPECT_TRUE(allclose(g, fd, 1e-6, 1e-7)) << max_abs_diff(g, fd);
}

TEST(Transforms, ValueAndGradWithRespectToSeveralArguments) {
  ArrayFunction loss = [](const std::vector<Array>& a) {
    Array pred = softmax(matmul(a[0], a[1]) + a[2], -1);
    return std::vector<Array>{mean(square(pred - a[3])), sum(pred)};  // loss, then an auxiliary value
  };
  std::vector<Tensor> args{f64({5, 3}, 2), f64({3, 4}, 3), f64({4}, 4), f64({5, 4}, 5)};
  std::vector<Array> as(args.begin(), args.end());
  auto [values, grads] = value_and_grad(loss, {1, 2})(as);
  ASSERT_EQ(values.size(), 2u);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_NEAR(values[0].item<double>(), loss(as)[0].item<double>(), 1e-12);
  EXPECT_TRUE(allclose(grads[0].tensor(), finite_difference(loss, args, 1), 1e-6, 1e-8));
  EXPECT_TRUE(allclose(grads[1].tensor(), finite_difference(loss, args, 2), 1e-6, 1e-8));
}

TEST(Transforms, VjpPullsBackTheGivenCotangent) {
  Array x(f64({4}, 6)), c(f64({4}, 7));
  auto [outs, vjps] = vjp([](const std::vector<Array>& a) { return std::vector<Array>{a[0] * a[0]}; }, {x}, {c});
  EXPECT_TRUE(allclose(outs[0].tensor(), (x * x).tensor()));
  EXPECT_TRUE(allclose(vjps[0].tensor(), (x * 2.0 * c).tensor()));
  EXPECT_TRUE(Contains(error_of([&] { vjp([](const std::vector<Array>& a) { return a; }, {x}, {ones({2})}); }),
                       "cotangent 0 must have the output's shape [4]"));
}

TEST(Transforms, HandWrittenMlpBackwardMatchesGrad) {
  testing::MlpParams p = testing::init_mlp(10, 6, 3, 8), stepped = p;
  Array x(random_tensor({4, 10}, 9));
  Array y = one_hot(Array(std::vector<int64_t>{0, 2, 1, 2}, {4}), 3);
  const float lr = 1.0f;
  testing::mlp_sgd_step(stepped, x, y, lr);
  auto g = grad(
      [&](const std::vector<Array>& w) {
        Array h = relu(matmul(x, w[0]) + w[1]);
        return std::vector<Array>{-mean(sum(y * log_softmax(matmul(h, w[2]) + w[3], -1), {1}))};
      },
      {0, 1, 2, 3})({p.w1, p.b1, p.w2, p.b2});
  std::vector<Array> before{p.w1, p.b1, p.w2, p.b2}, after{stepped.w1, stepped.b1, stepped.w2, stepped.b2};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(allclose(g[i].tensor(), ((before[i] - after[i]) / lr).tensor(), 1e-4, 1e-6)) << i;
}

class TransformsWithCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    CompileConfig c;
    c.backend = std::make_shared<CpuBackend>();
    set_compile_config(c);
  }
  void TearDown() override { set_compile_config(CompileConfig::from_env()); }
};

TEST_F(TransformsWithCompile, GradOfCompiledEqualsGradOfUncompiled) {
  auto compiled = compile(smooth);
  Array x(random_tensor({2, 5}, 10));
  const int c0 = compile_count();
  Tensor via_compiled = grad(UnaryArrayFunction(compiled))(x).tensor();
  EXPECT_EQ(compile_count(), c0);  // the compiled function inlined into grad's trace
  EXPECT_TRUE(allclose(via_compiled, grad(UnaryArrayFunction(smooth))(x).tensor(), 1e-5, 1e-6));
}

TEST_F(TransformsWithCompile, CompileOfGradEqualsGrad) {
  auto df = compile(grad(UnaryArrayFunction(smooth)));
  const int c0 = compile_count();
  for (uint64_t seed = 0; seed < 3; ++seed) {
    Array x(random_tensor({2, 5}, 20 + seed));
    EXPECT_TRUE(allclose(df(x).tensor(), grad(UnaryArrayFunction(smooth))(x).tensor(), 1e-5, 1e-6));
  }
  EXPECT_EQ(compile_count(), c0 + 1);
}

// Inside compile's trace the arguments not differentiated are placeholders of the outer trace:
// the gradient's graph takes them as inputs too.
TEST_F(TransformsWithCompile, CompileOfValueAndGradWithRespectToSomeArguments) {
  ArrayFunction loss = [](const std::vector<Array>& a) { return std::vector<Array>{sum(tanh(matmul(a[0], a[1])) * a[2])}; };
  auto step = compile([&](const Array& x, const Array& w, const Array& t) {
    auto [values, grads] = value_and_grad(loss, {1})({x, w, t});
    return std::vector<Array>{values[0], grads[0]};
  });
  Array x(random_tensor({3, 4}, 30)), w(random_tensor({4, 2}, 31)), t(random_tensor({3, 2}, 32));
  std::vector<Array> got = step(x, w, t);
  auto [values, grads] = value_and_grad(loss, {1})({x, w, t});
  EXPECT_TRUE(allclose(got[0].tensor(), values[0].tensor(), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(got[1].tensor(), grads[0].tensor(), 1e-5, 1e-6));
}

TEST(Transforms, ErrorsNameTheProblem) {
  EXPECT_TRUE(Contains(error_of([] { grad(UnaryArrayFunction([](const Array& x) { return x * 2.0f; }))(ones({3})); }),
                       "first output must hold one element"));
  EXPECT_TRUE(Contains(error_of([] {
                         grad(UnaryArrayFunction([](const Array& x) { return sum(astype(x, DType::Float32)); }))(
                             Array(std::vector<int32_t>{1, 2}, {2}));
                       }),
                       "floating-point arguments only"));
  EXPECT_TRUE(Contains(error_of([] { grad(UnaryArrayFunction([](const Array& x) { return sum(x * x.item<float>()); }))(ones({2})); }),
                       "placeholders"));
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// Second order: grad of grad works through ops whose gradient rules are made of differentiable
// ops (x^3 -> 6x; conv2d with respect to its input, whose gradient op conv2d_input_grad has a
// rule of its own), and stops with an error naming the op at the gradient ops without one
// (conv2d_weight_grad, the pools').
TEST(Transforms, GradOfGrad) {
  const UnaryArrayFunction cube = [](const Array& x) { return sum(x * x * x); };
  const UnaryArrayFunction first = grad(cube);
  const Tensor x = f64({3}, 5);
  const Tensor second = grad(UnaryArrayFunction([&](const Array& v) { return sum(first(v)); }))(Array(x)).tensor();
  for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(second.item(i), 6 * x.item(i), 1e-9);

  const Tensor w = f64({2, 1, 2, 2}, 6), img = f64({1, 1, 4, 4}, 7);
  // d/dx sum(d/dx sum(conv(x, w)^2)): the inner gradient is linear in x, so central differences
  // of its sum are exact up to rounding.
  {
    const ArrayFunction loss = [](const std::vector<Array>& a) {
      const Array y = conv2d(a[0], a[1]);
      return std::vector<Array>{sum(y * y)};
    };
    const auto inner = grad(loss, {0});
    const ArrayFunction total = [&](const std::vector<Array>& a) { return std::vector<Array>{sum(inner(a)[0])}; };
    const Tensor outer = grad(total, {0})({Array(img), Array(w)})[0].tensor();
    for (int64_t i = 0; i < img.numel(); i += 3) {
      Tensor up = img.astype(DType::Float64), down = img.astype(DType::Float64);
      up.data<double>()[i] += 0.5;
      down.data<double>()[i] -= 0.5;
      const double fd = total({Array(up), Array(w)})[0].tensor().item() - total({Array(down), Array(w)})[0].tensor().item();
      EXPECT_NEAR(outer.item(i), fd, 1e-9) << i;
    }
  }
  struct Case {
    std::string op;
    std::function<Array(const Array&, const Array&)> f;
    int wrt;
  };
  for (const Case& c : {Case{"conv2d_weight_grad", [](const Array& v, const Array& k) { return conv2d(v, k); }, 1},
                        Case{"max_pool2d_grad", [](const Array& v, const Array&) { return max_pool2d(v, {2, 2}); }, 0}}) {
    const ArrayFunction loss = [&](const std::vector<Array>& a) {
      const Array y = c.f(a[0], a[1]);
      return std::vector<Array>{sum(y * y)};
    };
    const auto inner = grad(loss, {c.wrt});
    const auto outer = grad(ArrayFunction([&](const std::vector<Array>& a) { return std::vector<Array>{sum(inner(a)[0])}; }),
                            {c.wrt});
    const std::string e = error_of([&] { outer({Array(img), Array(w)})[0].tensor(); });
    EXPECT_TRUE(Contains(e, "Cannot differentiate through '" + c.op + "'")) << e;
    EXPECT_TRUE(Contains(e, "has no second-order rule")) << e;
  }
}

}  // namespace
}  // namespace ingot
