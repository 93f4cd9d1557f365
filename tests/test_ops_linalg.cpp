// matmul, conv2d and the pools against naive double-precision loops, plus their shape and
// dtype rules.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "ops/kernel_util.h"

using namespace ingot;
using namespace ingot::testing;

namespace {

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  ASSERT_EQ(to_string(got.shape()), to_string(want.shape()));
  EXPECT_TRUE(allclose(got.astype(DType::Float64), want, rtol, atol))
      << "max abs diff " << max_abs_diff(got.astype(DType::Float64), want);
}

// --- matmul reference ---

Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = ops::broadcast_shapes(ab, bb);
  Shape out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  Tensor y(DType::Float64, out);
  double* py = y.data<double>();
  Strides sa = ops::broadcast_strides(ab, batch), sb = ops::broadcast_strides(bb, batch);
  ops::for_each_strided<2>(batch, {sa, sb}, [&](int64_t i, int64_t oa, int64_t ob) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += av[(oa * M + m) * K + k] * bv[(ob * K + k) * N + n];
        py[(i * M + m) * N + n] = s;
      }
  });
  return y;
}

// --- conv reference ---

struct ConvCase {
  Shape x;  // [N, C, H, W]
  int64_t cout, kh, kw;
  std::array<int64_t, 2> stride{1, 1}, pad{0, 0}, dil{1, 1};
  int64_t groups = 1;
  bool bias = false;

  Attrs attrs() const {
    return {{"stride", std::vector<int64_t>{stride[0], stride[1]}},
            {"padding", std::vector<int64_t>{pad[0], pad[1]}},
            {"dilation", std::vector<int64_t>{dil[0], dil[1]}},
            {"groups", groups}};
  }
  Shape weight() const { return {cout, x[1] / groups, kh, kw}; }
};

Tensor naive_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor* bias) {
  const int64_t N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3], Cg = C / c.groups;
  const int64_t Mg = c.cout / c.groups;
  const int64_t Ho = (H + 2 * c.pad[0] - c.dil[0] * (c.kh - 1) - 1) / c.stride[0] + 1;
  const int64_t Wo = (W + 2 * c.pad[1] - c.dil[1] * (c.kw - 1) - 1) / c.stride[1] + 1;
  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> bv = bias ? bias->to_vector<double>() : std::vector<double>();
  Tensor y(DType::Float64, {N, c.cout, Ho, Wo});
  double* py = y.data<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = bias ? bv[o] : 0;
          const int64_t g = o / Mg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t ih = oh * c.stride[0] - c.pad[0] + i * c.dil[0];
                const int64_t iw = ow * c.stride[1] - c.pad[1] + j * c.dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xv[((n * C + g * Cg + ci) * H + ih) * W + iw] *
                     wv[((o * Cg + ci) * c.kh + i) * c.kw + j];
              }
          py[((n * c.cout + o) * Ho + oh) * Wo + ow] = s;
        }
  return y;
}

void check_conv(const ConvCase& c, DType dtype = DType::Float32, double rtol = 1e-4,
                double atol = 1e-4) {
  SCOPED_TRACE("conv input " + to_string(c.x) + " weight " + to_string(c.weight()));
  Tensor x = random_tensor(c.x, 1, -1, 1, dtype), w = random_tensor(c.weight(), 2, -1, 1, dtype);
  Tensor b = random_tensor({c.cout}, 3, -1, 1, dtype);
  std::vector<Tensor> in{x, w};
  if (c.bias) in.push_back(b);
  Tensor y = run_op("conv2d", in, c.attrs());
  EXPECT_EQ(y.dtype(), dtype);
  expect_close(y, naive_conv(c, x, w, c.bias ? &b : nullptr), rtol, atol);
}

// --- pool reference ---

Tensor naive_pool(const Tensor& x, std::array<int64_t, 2> k, std::array<int64_t, 2> s,
                  std::array<int64_t, 2> p, bool is_max, bool include_pad) {
  const Shape& xs = x.shape();
  const int64_t Ho = (xs[2] + 2 * p[0] - k[0]) / s[0] + 1, Wo = (xs[3] + 2 * p[1] - k[1]) / s[1] + 1;
  std::vector<double> xv = x.to_vector<double>();
  Tensor y(DType::Float64, {xs[0], xs[1], Ho, Wo});
  double* py = y.data<double>();
  for (int64_t pl = 0; pl < xs[0] * xs[1]; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double acc = is_max ? -INFINITY : 0;
        int64_t count = 0;
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            const int64_t h = oh * s[0] - p[0] + i, w = ow * s[1] - p[1] + j;
            if (h < 0 || h >= xs[2] || w < 0 || w >= xs[3]) continue;
            const double v = xv[(pl * xs[2] + h) * xs[3] + w];
            acc = is_max ? std::max(acc, v) : acc + v;
            ++count;
          }
        py[(pl * Ho + oh) * Wo + ow] =
            is_max ? acc : acc / static_cast<double>(include_pad ? k[0] * k[1] : count);
      }
  return y;
}

Attrs pool_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
  return {{"kernel", k}, {"stride", s}, {"padding", p}};
}

}  // namespace

// ================================ matmul ================================

TEST(LinalgOps, MatmulShapeRule) {
  EXPECT_EQ(infer_op_shape("matmul", {{"B", "M", "K"}, {"K", 5}}), "[B, M, 5]");
  EXPECT_EQ(infer_op_shape("matmul", {{3, 4}, {4, 5}}), "[3, 5]");
  EXPECT_EQ(infer_op_shape("matmul", {{2, 1, 3, 4}, {5, 4, 6}}), "[2, 5, 3, 6]");
  // 1-D operands: promoted, then the added dim is squeezed away.
  EXPECT_EQ(infer_op_shape("matmul", {{4}, {4}}), "[]");
  EXPECT_EQ(infer_op_shape("matmul", {{4}, {2, 4, 5}}), "[2, 5]");
  EXPECT_EQ(infer_op_shape("matmul", {{"N", 3, 4}, {4}}), "[N, 3]");
}

TEST(LinalgOps, MatmulContractedDimsFlowBothWays) {
  // A known K reaches the unknown one, whichever operand holds it.
  EXPECT_EQ(infer_all("matmul", {{2, 3}, {nullptr, 5}})[1], "[3, 5]");
  EXPECT_EQ(infer_all("matmul", {{2, nullptr}, {7, 5}})[0], "[2, 7]");
  EXPECT_EQ(infer_all("matmul", {{"M", "K"}, {"J", "N"}})[1], "[K, N]");
  // Batch dims broadcast: 1 against a symbol gives the symbol.
  EXPECT_EQ(infer_op_shape("matmul", {{1, 3, 4}, {"B", 4, 5}}), "[B, 3, 5]");
}

TEST(LinalgOps, MatmulShapeErrors) {
  expect_error([] { infer_op_shape("matmul", {{2, 3}, {4, 5}}); }, "contracted dimensions differ");
  expect_error([] { infer_op_shape("matmul", {{2, 3}, {}}); }, "rank >= 1");
  expect_error([] { infer_op_shape("matmul", {{2, 2, 3}, {3, 3, 4}}); }, "do not broadcast");
  expect_error([] { eval_only("matmul", {random_tensor({2, 3}, 1), random_tensor({4, 5}, 2)}); },
               "contracted dimensions differ");
  expect_error([] { eval_only("matmul", {random_tensor({2, 2, 3}, 1), random_tensor({3, 3, 4}, 2)}); },
               "do not broadcast");
}

TEST(LinalgOps, MatmulDTypeRule) {
  Tensor i32 = tensor<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor f32 = tensor<float>({1, 0, 0, 1}, {2, 2});
  EXPECT_EQ(run_op("matmul", {i32, f32}).dtype(), DType::Float32);
  EXPECT_EQ(run_op("matmul", {i32, i32.astype(DType::Int64)}).dtype(), DType::Int64);
  EXPECT_EQ(run_op("matmul", {f32.astype(DType::Float16), f32.astype(DType::BFloat16)}).dtype(),
            DType::Float32);
  Tensor b = tensor<bool>({true, false, false, true}, {2, 2});
  expect_error([&] { run_op("matmul", {b, b}); }, "bool");
}

TEST(LinalgOps, MatmulValuesAgainstNaiveLoops) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},       {{1, 1}, {1, 1}},          {{4}, {4}},
      {{4}, {4, 3}},          {{3, 4}, {4}},             {{2, 3, 4}, {4}},
      {{5}, {2, 5, 3}},       {{2, 1, 3, 4}, {5, 4, 2}}, {{3, 2, 5}, {3, 5, 7}},
      {{2, 3, 4}, {1, 4, 6}}, {{1, 3, 4}, {5, 4, 6}},    {{150, 300}, {300, 41}},
      {{7, 600}, {600, 530}}, {{2, 70, 9}, {9, 33}},
  };
  uint64_t seed = 10;
  for (const auto& [as, bs] : cases) {
    SCOPED_TRACE(to_string(as) + " x " + to_string(bs));
    Tensor a = random_tensor(as, seed++), b = random_tensor(bs, seed++);
    expect_close(run_op("matmul", {a, b}), naive_matmul(a, b), 1e-4, 1e-4);
  }
}

TEST(LinalgOps, MatmulOtherDTypes) {
  Tensor a = random_tensor({5, 37}, 1, -2, 2, DType::Float64);
  Tensor b = random_tensor({37, 9}, 2, -2, 2, DType::Float64);
  expect_close(run_op("matmul", {a, b}), naive_matmul(a, b), 1e-12, 1e-12);
  // Half and bfloat16 accumulate in float: only the final rounding is lost.
  for (DType t : {DType::Float16, DType::BFloat16}) {
    Tensor ah = a.astype(t), bh = b.astype(t);
    Tensor y = run_op("matmul", {ah, bh});
    EXPECT_EQ(y.dtype(), t);
    expect_close(y, naive_matmul(ah, bh), t == DType::Float16 ? 2e-3 : 1e-2, 2e-2);
  }
  // Integers are exact; int8 results wrap like the int64 accumulation cast to int8.
  Tensor ai = tensor<int32_t>({1, -2, 3, 4, 5, -6}, {2, 3});
  Tensor bi = tensor<int32_t>({7, 8, -9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(run_op("matmul", {ai, bi}).to_vector<int32_t>(),
            (std::vector<int32_t>{58, 24, -83, 10}));
  Tensor a8 = tensor<int8_t>({100, 100}, {1, 2}), b8 = tensor<int8_t>({2, 1}, {2, 1});
  EXPECT_EQ(run_op("matmul", {a8, b8}).to_vector<int64_t>(), (std::vector<int64_t>{44}));
  Tensor big = tensor<int64_t>({int64_t{1} << 40, 3}, {1, 2});
  EXPECT_EQ(run_op("matmul", {big, tensor<int64_t>({4, 5}, {2, 1})}).to_vector<int64_t>(),
            (std::vector<int64_t>{(int64_t{1} << 42) + 15}));
}

TEST(LinalgOps, MatmulZeroSizeDims) {
  EXPECT_EQ(run_op("matmul", {random_tensor({0, 4}, 1), random_tensor({4, 3}, 2)}).shape(),
            (Shape{0, 3}));
  Tensor y = run_op("matmul", {random_tensor({3, 0}, 1), random_tensor({0, 2}, 2)});
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(run_op("matmul", {random_tensor({0, 3, 4}, 1), random_tensor({4, 2}, 2)}).shape(),
            (Shape{0, 3, 2}));
}

// ================================ conv2d ================================

TEST(ConvOps, ShapeRuleSymbolic) {
  EXPECT_EQ(infer_op_shape("conv2d", {{"N", 3, 32, 32}, {16, 3, 3, 3}}), "[N, 16, 30, 30]");
  EXPECT_EQ(infer_op_shape("conv2d", {{"N", 3, 32, 32}, {16, 3, 5, 5}},
                           {{"stride", std::vector<int64_t>{2, 2}},
                            {"padding", std::vector<int64_t>{1, 1}},
                            {"dilation", std::vector<int64_t>{2, 2}}}),
            "[N, 16, 13, 13]");
  // Symbolic H stays unknown (a fresh dim), except for 1x1 stride-1 unpadded kernels.
  std::vector<SymShape> s = infer_op_shapes("conv2d", {{"N", 3, "H", "W"}, {8, 3, 3, 3}});
  EXPECT_FALSE(s[0][2].known());
  EXPECT_NE(s[0][2].symbol, "H");
  EXPECT_EQ(infer_op_shape("conv2d", {{"N", 3, "H", "W"}, {8, 3, 1, 1}}), "[N, 8, H, W]");
  // An unknown kernel size leaves H, W unknown too.
  s = infer_op_shapes("conv2d", {{1, 3, 8, 8}, {8, 3, "k", "k"}});
  EXPECT_FALSE(s[0][2].known());
}

TEST(ConvOps, ShapeRuleChannelsAndBias) {
  // groups = 1: input channels and weight dim 1 are the same dim, in both directions.
  EXPECT_EQ(infer_all("conv2d", {{"N", "C", 8, 8}, {4, 3, 3, 3}})[0], "[N, 3, 8, 8]");
  EXPECT_EQ(infer_all("conv2d", {{1, 6, 8, 8}, {4, "Cin", 3, 3}})[1], "[4, 6, 3, 3]");
  // groups = 2: C = 2 * weight dim 1.
  Attrs g2{{"groups", int64_t{2}}};
  EXPECT_EQ(infer_all("conv2d", {{"N", "C", 8, 8}, {4, 3, 3, 3}}, g2)[0], "[N, 6, 8, 8]");
  EXPECT_EQ(infer_all("conv2d", {{1, 6, 8, 8}, {4, "Cg", 3, 3}}, g2)[1], "[4, 3, 3, 3]");
  EXPECT_EQ(infer_op_shape("conv2d", {{"N", 6, 8, 8}, {4, 3, 3, 3}}, g2), "[N, 4, 6, 6]");
  // The bias is [Cout]: its size flows from the weight, and Cout from the bias.
  EXPECT_EQ(infer_all("conv2d", {{1, 3, 8, 8}, {16, 3, 3, 3}, {nullptr}})[2], "[16]");
  EXPECT_EQ(infer_all("conv2d", {{1, 3, 8, 8}, {"O", 3, 3, 3}, {5}})[3], "[1, 5, 6, 6]");
}

TEST(ConvOps, ShapeRuleErrors) {
  expect_error([] { infer_op_shape("conv2d", {{1, 4, 8, 8}, {8, 3, 3, 3}}); }, "channels mismatch");
  expect_error([] { infer_op_shape("conv2d", {{1, 3, 2, 2}, {8, 3, 3, 3}}); },
               "larger than the padded input");
  expect_error([] { infer_op_shape("conv2d", {{1, 6, 8, 8}, {5, 3, 3, 3}}, {{"groups", int64_t{2}}}); },
               "not divisible by groups");
  expect_error([] { infer_op_shape("conv2d", {{"C", 8, 8}, {8, 3, 3, 3}}); }, "rank 4");
  expect_error([] { infer_op_shape("conv2d", {{1, 3, 8, 8}, {8, 3, 3, 0}}); }, "empty kernel");
  expect_error([] { infer_op_shape("conv2d", {{1, 3, 8, 8}, {8, 3, 3, 3}, {7}}); },
               "must also be");
  expect_error([] {
    infer_op_shape("conv2d", {{1, 3, 8, 8}, {8, 3, 3, 3}}, {{"stride", std::vector<int64_t>{0, 1}}});
  }, "'stride' must be >= 1");
  expect_error([] {
    infer_op_shape("conv2d", {{1, 3, 8, 8}, {8, 3, 3, 3}}, {{"padding", std::vector<int64_t>{1, 1, 1}}});
  }, "needs 2 values");
}

TEST(ConvOps, KernelChecksRunTimeShapes) {
  expect_error([] { eval_only("conv2d", {random_tensor({1, 4, 8, 8}, 1), random_tensor({8, 3, 3, 3}, 2)}); },
               "channels mismatch");
  expect_error([] {
    eval_only("conv2d", {random_tensor({1, 3, 8, 8}, 1), random_tensor({8, 3, 3, 3}, 2),
                         random_tensor({7}, 3)});
  }, "bias must have shape [8]");
  expect_error([] { eval_only("conv2d", {random_tensor({1, 3, 2, 8}, 1), random_tensor({8, 3, 3, 3}, 2)}); },
               "larger than the padded input");
  expect_error([] { eval_only("conv2d", {random_tensor({3, 8, 8}, 1), random_tensor({8, 3, 3, 3}, 2)}); },
               "rank 4");
  expect_error([] { eval_only("conv2d", {random_tensor({1, 3, 8, 8}, 1), random_tensor({8, 3, 0, 3}, 2)}); },
               "empty kernel");
}

TEST(ConvOps, ValuesAgainstNaiveLoops) {
  const std::vector<ConvCase> cases = {
      {.x = {1, 3, 7, 7}, .cout = 4, .kh = 3, .kw = 3},
      {.x = {2, 3, 9, 8}, .cout = 5, .kh = 3, .kw = 3, .stride = {2, 2}, .pad = {1, 1}, .bias = true},
      {.x = {1, 2, 11, 10}, .cout = 3, .kh = 3, .kw = 2, .dil = {2, 1}},
      {.x = {2, 4, 6, 7}, .cout = 6, .kh = 3, .kw = 3, .groups = 2, .bias = true},
      {.x = {1, 5, 8, 8}, .cout = 5, .kh = 3, .kw = 3, .pad = {1, 1}, .groups = 5},   // depthwise
      {.x = {1, 4, 9, 9}, .cout = 8, .kh = 3, .kw = 3, .pad = {1, 1}, .groups = 4},   // multiplier 2
      {.x = {3, 2, 5, 9}, .cout = 3, .kh = 1, .kw = 1, .stride = {2, 1}, .pad = {0, 2}},
      {.x = {1, 1, 13, 5}, .cout = 1, .kh = 4, .kw = 2, .stride = {3, 2}, .pad = {2, 1}, .dil = {2, 2}},
      // Over the GEMM blocks: Cout > MC, K = 270 > KC, 1156 output columns > one tile.
      {.x = {1, 30, 34, 34}, .cout = 150, .kh = 3, .kw = 3, .pad = {1, 1}, .bias = true},
  };
  for (const ConvCase& c : cases) check_conv(c);
}

TEST(ConvOps, OtherDTypes) {
  const ConvCase c{.x = {2, 4, 7, 6}, .cout = 6, .kh = 3, .kw = 2, .pad = {1, 0}, .groups = 2, .bias = true};
  check_conv(c, DType::Float64, 1e-12, 1e-12);
  check_conv(c, DType::Float16, 5e-3, 2e-2);
  check_conv(c, DType::BFloat16, 2e-2, 5e-2);
  // Integers are exact.
  Tensor x = tensor<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = tensor<int32_t>({1, -1, 2, 0}, {1, 1, 2, 2});
  Tensor y = run_op("conv2d", {x, w, tensor<int32_t>({10}, {1})});
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{17, 19, 23, 25}));
  // Mixed input dtypes promote.
  EXPECT_EQ(run_op("conv2d", {x, w.astype(DType::Float32)}).dtype(), DType::Float32);
  expect_error([&] { run_op("conv2d", {x.astype(DType::Bool), w.astype(DType::Bool)}); }, "bool");
}

TEST(ConvOps, ZeroSizeDims) {
  EXPECT_EQ(run_op("conv2d", {random_tensor({0, 3, 5, 5}, 1), random_tensor({4, 3, 3, 3}, 2)}).shape(),
            (Shape{0, 4, 3, 3}));
  EXPECT_EQ(run_op("conv2d", {random_tensor({2, 3, 5, 5}, 1), random_tensor({0, 3, 3, 3}, 2)}).shape(),
            (Shape{2, 0, 3, 3}));
  // No input channels: the output is just the bias.
  Tensor y = run_op("conv2d", {random_tensor({1, 0, 4, 4}, 1), random_tensor({2, 0, 3, 3}, 2),
                               tensor<float>({1.5f, -2}, {2})});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, -2, -2, -2, -2}));
}

// Time of the end-to-end model's big conv through the reference kernel. Not run by default.
TEST(ConvOps, DISABLED_Timing) {
  Tensor x = random_tensor({32, 64, 222, 222}, 1);
  Tensor w = random_tensor({128, 64, 3, 3}, 2);
  for (int rep = 0; rep < 2; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor y = eval_only("conv2d", {x, w});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double flops = 2.0 * 32 * 128 * 220 * 220 * 64 * 9;
    std::printf("conv2d [32,64,222,222] x [128,64,3,3]: %.3f s, %.1f GFLOP/s\n", s, flops / s / 1e9);
  }
}

// ================================ pools ================================

TEST(PoolOps, ShapeRules) {
  EXPECT_EQ(infer_op_shape("max_pool2d", {{"N", 3, 32, 32}}, {{"kernel", std::vector<int64_t>{2, 2}}}),
            "[N, 3, 16, 16]");
  EXPECT_EQ(infer_op_shape("avg_pool2d", {{"N", "C", 7, 8}}, pool_attrs({3, 3}, {2, 2}, {1, 1})),
            "[N, C, 4, 4]");
  EXPECT_FALSE(infer_op_shapes("max_pool2d", {{1, 3, "H", 8}}, {{"kernel", int64_t{2}}})[0][2].known());
  EXPECT_EQ(infer_op_shape("global_avg_pool2d", {{"N", 64, "H", "W"}}), "[N, 64]");
  EXPECT_EQ(infer_op_shape("global_avg_pool2d", {{"N", 64, "H", "W"}}, {{"keepdims", int64_t{1}}}),
            "[N, 64, 1, 1]");
}

TEST(PoolOps, ShapeErrors) {
  expect_error([] { infer_op_shape("max_pool2d", {{1, 3, 8, 8}}); }, "missing attribute 'kernel'");
  expect_error([] { infer_op_shape("max_pool2d", {{1, 3, 8, 8}}, pool_attrs({2, 2}, {1, 1}, {2, 0})); },
               "more than half the kernel");
  expect_error([] { infer_op_shape("avg_pool2d", {{3, 8, 8}}, {{"kernel", int64_t{2}}}); }, "rank 4");
  expect_error([] { infer_op_shape("max_pool2d", {{1, 1, 1, 8}}, {{"kernel", int64_t{2}}}); },
               "larger than the padded input");
  expect_error([] { infer_op_shape("global_avg_pool2d", {{3, 8}}); }, "rank 4");
  expect_error([] { eval_only("max_pool2d", {random_tensor({4, 4}, 1)}, {{"kernel", int64_t{2}}}); },
               "rank 4");
}

TEST(PoolOps, MaxPoolValues) {
  Tensor x = random_tensor({2, 3, 7, 6}, 5);
  for (auto [k, s, p] : std::vector<std::array<std::vector<int64_t>, 3>>{
           {{{2, 2}, {2, 2}, {0, 0}}}, {{{3, 2}, {2, 1}, {1, 1}}}, {{{3, 3}, {1, 1}, {1, 1}}}}) {
    Tensor y = run_op("max_pool2d", {x}, pool_attrs(k, s, p));
    expect_close(y, naive_pool(x, {k[0], k[1]}, {s[0], s[1]}, {p[0], p[1]}, true, true), 0, 0);
  }
  // Stride defaults to the kernel; integers keep their dtype; padding never wins.
  Tensor xi = tensor<int32_t>({-5, -6, -7, -8, -1, -2, -3, -4}, {1, 2, 2, 2});
  Tensor yi = run_op("max_pool2d", {xi}, {{"kernel", int64_t{2}}});
  EXPECT_EQ(yi.to_vector<int32_t>(), (std::vector<int32_t>{-5, -1}));
  Tensor yp = run_op("max_pool2d", {xi}, pool_attrs({2, 2}, {1, 1}, {1, 1}));
  EXPECT_EQ(yp.shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(yp.to_vector<int32_t>()[0], -5);
  Tensor nan = tensor<float>({1, NAN, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(run_op("max_pool2d", {nan}, {{"kernel", int64_t{2}}}).item()));
}

// ceil_mode: PyTorch's and ONNX's rule, one more window where the floor rule stops short unless
// it would start in the end padding; its values are those of the input padded with -inf far
// enough for the floor rule to reach that window.
TEST(PoolOps, CeilModeAddsTheWindowTheFloorRuleDrops) {
  auto ceil = [](std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p) {
    Attrs a = pool_attrs(std::move(k), std::move(s), std::move(p));
    a.set("ceil_mode", int64_t{1});
    return a;
  };
  // 8: floor (8 - 3) / 2 + 1 = 3, ceil 4; 7: (7 - 3) / 2 is whole, 3 either way.
  EXPECT_EQ(infer_op_shape("max_pool2d", {{"N", 3, 8, 7}}, ceil({3, 3}, {2, 2}, {0, 0})), "[N, 3, 4, 3]");
  // 5, kernel 2, stride 2, padding 1: the fourth window would start at row 5, in the end padding.
  EXPECT_EQ(infer_op_shape("max_pool2d", {{1, 1, 5, 6}}, ceil({2, 2}, {2, 2}, {1, 1})), "[1, 1, 3, 4]");
  EXPECT_EQ(infer_op_shape("max_pool2d", {{1, 1, 8, 8}}, ceil({3, 3}, {1, 1}, {1, 1})), "[1, 1, 8, 8]");
  expect_error([&] { infer_op_shape("avg_pool2d", {{1, 1, 8, 8}}, ceil({3, 3}, {2, 2}, {0, 0})); },
               "ceil_mode = 1 is max_pool2d's only");
  Attrs two = pool_attrs({2, 2}, {2, 2}, {0, 0});
  two.set("ceil_mode", int64_t{2});
  expect_error([&] { infer_op_shape("max_pool2d", {{1, 1, 8, 8}}, two); }, "ceil_mode must be 0 or 1");

  const Tensor x = random_tensor({2, 3, 8, 7}, 9, -2, 2);
  for (auto [k, s, p] : std::vector<std::array<std::vector<int64_t>, 3>>{
           {{{3, 3}, {2, 2}, {0, 0}}}, {{{2, 3}, {2, 3}, {1, 1}}}, {{{3, 2}, {3, 2}, {1, 0}}}}) {
    const Tensor y = run_op("max_pool2d", {x}, ceil(k, s, p));
    // The input with -inf below and to the right, as many rows and columns as the last window needs.
    const int64_t hp = (y.dim(2) - 1) * s[0] + k[0] - p[0], wp = (y.dim(3) - 1) * s[1] + k[1] - p[1];
    Tensor padded = Tensor::full(DType::Float32, {2, 3, std::max<int64_t>(hp, 8), std::max<int64_t>(wp, 7)},
                                 -std::numeric_limits<double>::infinity());
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t h = 0; h < 8; ++h)
        for (int64_t w = 0; w < 7; ++w)
          padded.data<float>()[(i * padded.dim(2) + h) * padded.dim(3) + w] = x.data<float>()[(i * 8 + h) * 7 + w];
    const Tensor want = run_op("max_pool2d", {padded}, pool_attrs(k, s, p));
    ASSERT_EQ(y.shape(), want.shape());
    expect_close(y, want, 0, 0);
    // The gradient reaches the element each window picked, the extra windows' too.
    const Tensor dy = random_tensor(y.shape(), 10);
    const Tensor dx = run_op("max_pool2d_grad", {x, dy}, ceil(k, s, p));
    const Tensor dpad = run_op("max_pool2d_grad", {padded, dy}, pool_attrs(k, s, p));
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t h = 0; h < 8; ++h)
        for (int64_t w = 0; w < 7; ++w)
          EXPECT_EQ(dx.data<float>()[(i * 8 + h) * 7 + w], dpad.data<float>()[(i * padded.dim(2) + h) * padded.dim(3) + w]);
  }
}

TEST(PoolOps, AvgPoolValues) {
  Tensor x = random_tensor({2, 2, 7, 8}, 6);
  for (int include : {0, 1}) {
    Attrs a = pool_attrs({3, 2}, {2, 2}, {1, 1});
    a.set("count_include_pad", int64_t{include});
    expect_close(run_op("avg_pool2d", {x}, a),
                 naive_pool(x, {3, 2}, {2, 2}, {1, 1}, false, include != 0), 1e-6, 1e-6);
  }
  // Integers average to float32.
  Tensor xi = tensor<int32_t>({1, 2, 3, 5}, {1, 1, 2, 2});
  Tensor y = run_op("avg_pool2d", {xi}, {{"kernel", int64_t{2}}});
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_FLOAT_EQ(y.item(), 2.75f);
  Tensor h = run_op("avg_pool2d", {x.astype(DType::Float16)}, {{"kernel", int64_t{2}}});
  EXPECT_EQ(h.dtype(), DType::Float16);
}

TEST(PoolOps, GlobalAvgPoolValues) {
  Tensor x = random_tensor({2, 3, 5, 4}, 7);
  std::vector<double> xv = x.to_vector<double>();
  Tensor y = run_op("global_avg_pool2d", {x});
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0;
    for (int64_t i = 0; i < 20; ++i) s += xv[p * 20 + i];
    EXPECT_NEAR(y.item(p), s / 20, 1e-6);
  }
  Tensor k = run_op("global_avg_pool2d", {x}, {{"keepdims", int64_t{1}}});
  EXPECT_EQ(k.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(k.to_vector<float>(), y.to_vector<float>());
  Tensor yi = run_op("global_avg_pool2d", {tensor<int64_t>({1, 2, 3, 4, 5, 6}, {1, 2, 1, 3})});
  EXPECT_EQ(yi.dtype(), DType::Float32);
  EXPECT_EQ(yi.to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(run_op("global_avg_pool2d", {random_tensor({0, 3, 2, 2}, 1)}).shape(), (Shape{0, 3}));
}
