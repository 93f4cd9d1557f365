// ONNX operators the importer writes with several catalogue ops (padding, windows with ONNX's
// asymmetric pads and ceil_mode, 1-D windows, LRN, the losses, Hardmax, Trilu, Tile, ScatterND, ArgMax's
// select_last_index, the recurrent layers, Shape of an intermediate value): values against loops
// in double on both backends, and gradients through them against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "autodiff_test_util.h"
#include "cpu_test_util.h"
#include "ingot/compile.h"
#include "ingot/cpu_backend.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "onnx_test_util.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::onnx_test;

namespace {

std::vector<double> values(const Tensor& t) { return t.astype(DType::Float64).to_vector<double>(); }

// Evaluates `m` on both backends; expects output `out` within `tol` of `want`.
void expect_both_backends(const Model& m, const TensorMap& inputs, const std::string& out, const std::vector<double>& want,
                          double tol = 1e-5) {
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = b == 0 ? compile(m, ReferenceBackend()) : compile(m, CpuBackend(cpu_test::cpu_options()));
    const std::vector<double> got = values(pm.evaluate({}, inputs).at(out));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << i;
  }
}

// The gradient of every output (random cotangents) with respect to input `x`, against finite
// differences, on the reference backend in float64.
void expect_input_gradients(const Model& m, const TensorMap& inputs, const std::vector<std::string>& outs) {
  CompileOptions o;
  o.trainable_keys = {"x"};  // x becomes a parameter
  const PhysicalModel pm = compile(m, ReferenceBackend(), o);
  TensorMap params = {{"x", inputs.at("x")}}, rest = inputs;
  rest.erase("x");
  const TensorMap fwd = pm.evaluate(params, rest);
  TensorMap seeds;
  uint64_t seed = 500;
  for (const std::string& name : outs)
    seeds[name] = ingot::testing::random_tensor(fwd.at(name).shape(), seed++, -1, 1, DType::Float64);
  ingot::testing::check_model_gradients(pm, params, rest, seeds, 1e-6, 1e-5, 40);
}

// Loading `bytes` fails with an error that contains `why`; `what` names the case.
void expect_refused(const std::string& bytes, const std::string& why, const std::string& what) {
  try {
    (void)ingot::onnx::load_bytes(bytes);
    ADD_FAILURE() << what << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

// X[c][y][x] of an [1, C, H, W] tensor in double.
struct Image {
  std::vector<double> v;
  int64_t h, w;
  double at(int64_t c, int64_t y, int64_t x) const { return v[static_cast<size_t>((c * h + y) * w + x)]; }
};

}  // namespace

// MaxPool and AveragePool with asymmetric pads and ceil_mode (both count_include_pad values):
// each window of the ONNX definition, computed directly.
TEST(OnnxImportOps, AsymmetricPadsAndCeilModePooling) {
  const Tensor x = ingot::testing::random_tensor({1, 2, 5, 6}, 3, -1, 1, DType::Float64);
  const Image X{values(x), 5, 6};
  const std::vector<int64_t> pads = {0, 1, 1, 0}, kernel = {3, 2}, strides = {2, 2};
  OnnxModel o(17);
  o.input("x", DType::Float64, {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{6}});
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (int64_t include : {0, 1}) {
      if (std::string(op) == "MaxPool" && include == 1) continue;
      const std::string out = std::string(op) + std::to_string(include);
      auto& n = o.node(op, {"x"}, {out});
      attr(n, "kernel_shape", kernel);
      attr(n, "pads", pads);
      attr(n, "strides", strides);
      attr(n, "ceil_mode", int64_t{1});
      if (std::string(op) == "AveragePool") attr(n, "count_include_pad", include);
      o.output(out);
    }
  }
  const Model m = ingot::onnx::load_bytes(o.bytes());
  // ceil_mode: output sizes ceil((5 + 1 - 3) / 2) + 1 = 3 and ceil((6 + 1 - 2) / 2) + 1 = 4, every
  // window starting inside the input or its left/top padding.
  std::vector<double> want_max, want_avg0, want_avg1;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t oy = 0; oy < 3; ++oy)
      for (int64_t ox = 0; ox < 4; ++ox) {
        double mx = -1e300, s = 0;
        int n_in = 0, n_padded = 0;
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 2; ++kx) {
            const int64_t iy = oy * 2 - pads[0] + ky, ix = ox * 2 - pads[1] + kx;
            // Inside the ONNX-padded extent [-top, H + bottom) x [-left, W + right).
            if (iy >= -pads[0] && iy < 5 + pads[2] && ix >= -pads[1] && ix < 6 + pads[3]) ++n_padded;
            if (iy < 0 || iy >= 5 || ix < 0 || ix >= 6) continue;
            mx = std::max(mx, X.at(c, iy, ix));
            s += X.at(c, iy, ix);
            ++n_in;
          }
        want_max.push_back(mx);
        want_avg0.push_back(s / n_in);
        want_avg1.push_back(s / n_padded);
      }
  expect_both_backends(m, {{"x", x}}, "MaxPool0", want_max);
  expect_both_backends(m, {{"x", x}}, "AveragePool0", want_avg0);
  expect_both_backends(m, {{"x", x}}, "AveragePool1", want_avg1);
  expect_input_gradients(m, {{"x", x}}, {"MaxPool0", "AveragePool0", "AveragePool1"});
}

// GoogLeNet's pools: MaxPool with ceil_mode and symmetric pads is one max_pool2d in ceil_mode (so
// the CPU backend's layout plan keeps it in the convolutions' layout), not a -inf concat along H
// and W; each window of the ONNX definition, computed directly, and the gradient.
TEST(OnnxImportOps, CeilModeMaxPoolIsOneOp) {
  const Tensor x = ingot::testing::random_tensor({1, 2, 8, 7}, 4, -1, 1, DType::Float64);
  const Image X{values(x), 8, 7};
  OnnxModel o(17);
  o.input("x", DType::Float64, {int64_t{1}, int64_t{2}, int64_t{8}, int64_t{7}});
  auto& n = o.node("MaxPool", {"x"}, {"y"});
  attr(n, "kernel_shape", std::vector<int64_t>{3, 3});
  attr(n, "strides", std::vector<int64_t>{2, 2});
  attr(n, "pads", std::vector<int64_t>{1, 0, 1, 0});
  attr(n, "ceil_mode", int64_t{1});
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  PhysicalModel pm = compile(m, ReferenceBackend());
  std::vector<std::string> ops;
  for (const Node& node : pm.graph().nodes()) ops.push_back(node.op);
  EXPECT_EQ(ops, std::vector<std::string>{"max_pool2d"});
  // H: floor (8 + 2 - 3) / 2 + 1 = 4, ceil 5 (the last window holds row 7); W: (7 - 3) / 2 + 1 = 3.
  std::vector<double> want;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t oy = 0; oy < 5; ++oy)
      for (int64_t ox = 0; ox < 3; ++ox) {
        double mx = -1e300;
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 3; ++kx) {
            const int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 + kx;
            if (iy >= 0 && iy < 8 && ix < 7) mx = std::max(mx, X.at(c, iy, ix));
          }
        want.push_back(mx);
      }
  expect_both_backends(m, {{"x", x}}, "y", want);
  expect_input_gradients(m, {{"x", x}}, {"y"});
}

// Pad in each mode, over two axes at once, with a crop (negative pad) in constant mode.
TEST(OnnxImportOps, PadModes) {
  const Tensor x = ingot::testing::random_tensor({3, 4}, 5, -1, 1, DType::Float64);
  const std::vector<double> X = values(x);
  OnnxModel o(19);
  o.input("x", DType::Float64, {int64_t{3}, int64_t{4}});
  o.initializer("pads", Tensor::from_vector<int64_t>({2, 1, 1, 3}, {4}));
  o.initializer("crop", Tensor::from_vector<int64_t>({1, -1, 0, 2}, {4}));
  o.initializer("value", Tensor::from_vector<double>({0.5}, {}));
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    auto& n = o.node("Pad", {"x", "pads", "value"}, {mode});
    attr(n, "mode", std::string(mode));
    o.output(mode);
  }
  o.node("Pad", {"x", "crop", "value"}, {"cropped"});
  o.output("cropped");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  auto source = [](const std::string& mode, int64_t i, int64_t n) -> int64_t {
    if (i >= 0 && i < n) return i;
    if (mode == "constant") return -1;
    if (mode == "edge") return i < 0 ? 0 : n - 1;
    if (mode == "wrap") return ((i % n) + n) % n;
    return i < 0 ? -i : 2 * (n - 1) - i;  // reflect (pads below n)
  };
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    SCOPED_TRACE(mode);
    std::vector<double> want;
    for (int64_t r = -2; r < 3 + 1; ++r)
      for (int64_t c = -1; c < 4 + 3; ++c) {
        const int64_t sr = source(mode, r, 3), sc = source(mode, c, 4);
        want.push_back(sr < 0 || sc < 0 ? 0.5 : X[static_cast<size_t>(sr * 4 + sc)]);
      }
    expect_both_backends(m, {{"x", x}}, mode, want);
  }
  std::vector<double> cropped;  // rows: 1 before, none after; columns: 1 cropped before, 2 after
  for (int64_t r = -1; r < 3; ++r)
    for (int64_t c = 1; c < 4 + 2; ++c) cropped.push_back(r < 0 || c >= 4 ? 0.5 : X[static_cast<size_t>(r * 4 + c)]);
  expect_both_backends(m, {{"x", x}}, "cropped", cropped);
  expect_input_gradients(m, {{"x", x}}, {"constant", "edge", "reflect", "wrap", "cropped"});
}

// A 1-D convolution with asymmetric pads and stride, and a 1-D max pool.
TEST(OnnxImportOps, OneDimensionalWindows) {
  const Tensor x = ingot::testing::random_tensor({2, 3, 7}, 8, -1, 1, DType::Float64);
  const Tensor w = ingot::testing::random_tensor({4, 3, 3}, 9, -1, 1, DType::Float64);
  const std::vector<double> X = values(x), W = values(w);
  OnnxModel o(17);
  o.input("x", DType::Float64, {int64_t{2}, int64_t{3}, int64_t{7}});
  o.initializer("w", w);
  auto& conv = o.node("Conv", {"x", "w"}, {"y"});
  attr(conv, "pads", std::vector<int64_t>{2, 0});
  attr(conv, "strides", std::vector<int64_t>{2});
  auto& pool = o.node("MaxPool", {"x"}, {"p"});
  attr(pool, "kernel_shape", std::vector<int64_t>{2});
  o.output("y");
  o.output("p");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  std::vector<double> want_y, want_p;
  const int64_t out_len = (7 + 2 - 3) / 2 + 1;  // 4
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t co = 0; co < 4; ++co)
      for (int64_t t = 0; t < out_len; ++t) {
        double s = 0;
        for (int64_t ci = 0; ci < 3; ++ci)
          for (int64_t k = 0; k < 3; ++k) {
            const int64_t i = t * 2 - 2 + k;
            if (i >= 0 && i < 7) s += X[static_cast<size_t>((n * 3 + ci) * 7 + i)] * W[static_cast<size_t>((co * 3 + ci) * 3 + k)];
          }
        want_y.push_back(s);
      }
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t t = 0; t < 6; ++t) want_p.push_back(std::max(X[static_cast<size_t>(r * 7 + t)], X[static_cast<size_t>(r * 7 + t + 1)]));
  expect_both_backends(m, {{"x", x}}, "y", want_y);
  expect_both_backends(m, {{"x", x}}, "p", want_p);
  expect_input_gradients(m, {{"x", x}}, {"y", "p"});
}

// LRN across channels: x / (bias + alpha / size * sum over the window of x^2)^beta.
TEST(OnnxImportOps, LocalResponseNormalization) {
  const Tensor x = ingot::testing::random_tensor({1, 6, 2, 3}, 11, -2, 2, DType::Float64);
  const std::vector<double> X = values(x);
  OnnxModel o(13);
  o.input("x", DType::Float64, {int64_t{1}, int64_t{6}, int64_t{2}, int64_t{3}});
  auto& n = o.node("LRN", {"x"}, {"y"});
  attr(n, "size", int64_t{3});
  attr(n, "alpha", 0.3f);
  attr(n, "beta", 0.75f);
  attr(n, "bias", 1.5f);
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  std::vector<double> want;
  for (int64_t c = 0; c < 6; ++c)
    for (int64_t p = 0; p < 6; ++p) {
      double s = 0;
      for (int64_t j = std::max<int64_t>(0, c - 1); j <= std::min<int64_t>(5, c + 1); ++j) s += X[static_cast<size_t>(j * 6 + p)] * X[static_cast<size_t>(j * 6 + p)];
      want.push_back(X[static_cast<size_t>(c * 6 + p)] / std::pow(1.5 + double{0.3f} / 3 * s, double{0.75f}));
    }
  expect_both_backends(m, {{"x", x}}, "y", want);
  expect_input_gradients(m, {{"x", x}}, {"y"});
}

// NegativeLogLikelihoodLoss (class weights, ignore_index, mean over the counted weights) and
// SoftmaxCrossEntropyLoss (sum, and its log-probability output) over [N, C, d].
TEST(OnnxImportOps, Losses) {
  const Tensor x = ingot::testing::random_tensor({2, 3, 2}, 13, -2, 2, DType::Float64);
  const Tensor target = Tensor::from_vector<int64_t>({0, 2, 1, 1}, {2, 2});
  const Tensor weight = Tensor::from_vector<double>({0.5, 2.0, 1.5}, {3});
  OnnxModel o(13);
  o.input("x", DType::Float64, {int64_t{2}, int64_t{3}, int64_t{2}});
  o.input("t", DType::Int64, {int64_t{2}, int64_t{2}});
  o.initializer("w", weight);
  auto& nll = o.node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"nll"});
  attr(nll, "ignore_index", int64_t{2});
  auto& sce = o.node("SoftmaxCrossEntropyLoss", {"x", "t"}, {"sce", "logp"});
  attr(sce, "reduction", std::string("sum"));
  o.output("nll");
  o.output("sce");
  o.output("logp");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> X = values(x), W = {0.5, 2.0, 1.5};
  const std::vector<int64_t> T = {0, 2, 1, 1};
  double num = 0, den = 0, sce_sum = 0;
  std::vector<double> logp(12);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t d = 0; d < 2; ++d) {
      const auto at = [&](int64_t c) { return X[static_cast<size_t>((n * 3 + c) * 2 + d)]; };
      const double lse = std::log(std::exp(at(0)) + std::exp(at(1)) + std::exp(at(2)));
      for (int64_t c = 0; c < 3; ++c) logp[static_cast<size_t>((n * 3 + c) * 2 + d)] = at(c) - lse;
      const int64_t t = T[static_cast<size_t>(n * 2 + d)];
      sce_sum += lse - at(t);
      if (t == 2) continue;  // ignored by the NLL loss
      num += -at(t) * W[static_cast<size_t>(t)];
      den += W[static_cast<size_t>(t)];
    }
  const TensorMap in = {{"x", x}, {"t", target}};
  expect_both_backends(m, in, "nll", {num / den});
  expect_both_backends(m, in, "sce", {sce_sum});
  expect_both_backends(m, in, "logp", logp);
  expect_input_gradients(m, in, {"nll", "sce"});
}

// Hardmax (first maximum wins ties), Trilu (upper with k = 1; lower), Tile, and ArgMax with
// select_last_index (the last of tied maxima).
TEST(OnnxImportOps, HardmaxTriluTileArgMaxLast) {
  const Tensor x = Tensor::from_vector<float>({1, 3, 3, 0, 2, 2, 2, 1}, {2, 4});
  OnnxModel o(14);
  o.input("x", DType::Float32, {int64_t{2}, int64_t{4}});
  o.initializer("k", Tensor::from_vector<int64_t>({1}, {}));
  o.initializer("reps", Tensor::from_vector<int64_t>({2, 1}, {2}));
  o.node("Hardmax", {"x"}, {"h"});
  o.node("Trilu", {"x", "k"}, {"up"});
  attr(o.node("Trilu", {"x"}, {"low"}), "upper", int64_t{0});
  o.node("Tile", {"x", "reps"}, {"tiled"});
  auto& am = o.node("ArgMax", {"x"}, {"last"});
  attr(am, "axis", int64_t{1});
  attr(am, "select_last_index", int64_t{1});
  for (const char* out : {"h", "up", "low", "tiled", "last"}) o.output(out);
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const TensorMap in = {{"x", x}};
  expect_both_backends(m, in, "h", {0, 1, 0, 0, 1, 0, 0, 0});
  expect_both_backends(m, in, "up", {0, 3, 3, 0, 0, 0, 2, 1});
  expect_both_backends(m, in, "low", {1, 0, 0, 0, 2, 2, 0, 0});
  expect_both_backends(m, in, "tiled", {1, 3, 3, 0, 2, 2, 2, 1, 1, 3, 3, 0, 2, 2, 2, 1});
  expect_both_backends(m, in, "last", {2, 2});
}

// Flatten and Softmax (opset 11) of inputs with no elements: the shape is written out, since a
// reshape to [0, -1] has no answer ([0, 2, 1, 1]: OnnxExport.RandomProgramsRoundTrip, seed 274).
TEST(OnnxImportOps, FlattenAndOldSoftmaxOfEmptyInputs) {
  OnnxModel o(11);
  o.input("x", DType::Float32, {int64_t{0}, int64_t{2}, int64_t{1}, int64_t{3}});
  o.input("y", DType::Float32, {int64_t{2}, int64_t{0}, int64_t{3}});
  o.node("Flatten", {"x"}, {"f1"});
  attr(o.node("Flatten", {"y"}, {"f2"}), "axis", int64_t{2});
  attr(o.node("Softmax", {"y"}, {"s"}), "axis", int64_t{1});
  o.node("Flatten", {"y"}, {"f_nonempty_batch"});
  for (const char* out : {"f1", "f2", "s", "f_nonempty_batch"}) o.output(out);
  const Model m = ingot::onnx::load_bytes(o.bytes());
  for (int b = 0; b < 2; ++b) {
    const PhysicalModel pm = b == 0 ? compile(m, ReferenceBackend()) : compile(m, CpuBackend(cpu_test::cpu_options()));
    EXPECT_TRUE(pm.input_names().empty());  // nothing to read: every result is known while importing
    const TensorMap out = pm.evaluate({}, {});
    EXPECT_EQ(out.at("f1").shape(), (Shape{0, 6}));
    EXPECT_EQ(out.at("f2").shape(), (Shape{0, 3}));
    EXPECT_EQ(out.at("s").shape(), (Shape{2, 0, 3}));
    EXPECT_EQ(out.at("f_nonempty_batch").shape(), (Shape{2, 0}));
  }
}

// Resize (values are judged by ONNX's own 39 Resize tests in the conformance run): linear and
// cubic interpolation are matmuls with constant matrices, nearest a gather, so gradients flow;
// checked against finite differences, and nearest upsampling by 2 against a hand expansion.
TEST(OnnxImportOps, ResizeDifferentiatesAndNearestRepeats) {
  const Tensor x = ingot::testing::random_tensor({1, 2, 3, 4}, 17, -1, 1, DType::Float64);
  OnnxModel o(19);
  o.input("x", DType::Float64, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}});
  o.initializer("roi", Tensor::from_vector<float>({}, {0}));
  o.initializer("scales", Tensor::from_vector<float>({1, 1, 2, 1.5f}, {4}));
  o.initializer("up2", Tensor::from_vector<float>({1, 1, 2, 2}, {4}));
  for (const char* mode : {"linear", "cubic"}) attr(o.node("Resize", {"x", "roi", "scales"}, {mode}), "mode", std::string(mode));
  attr(o.node("Resize", {"x", "roi", "up2"}, {"nearest"}), "coordinate_transformation_mode", std::string("asymmetric"));
  for (const char* out : {"linear", "cubic", "nearest"}) o.output(out);
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> X = values(x);
  std::vector<double> want;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 8; ++j) want.push_back(X[static_cast<size_t>((c * 3 + i / 2) * 4 + j / 2)]);
  expect_both_backends(m, {{"x", x}}, "nearest", want);
  expect_input_gradients(m, {{"x", x}}, {"linear", "cubic", "nearest"});
}

// ConvTranspose (values judged by ONNX's own tests in the conformance run) differentiates: the
// transposed convolution's gradient rule, against finite differences, with stride, pads,
// output_padding and groups.
TEST(OnnxImportOps, ConvTransposeDifferentiates) {
  const Tensor x = ingot::testing::random_tensor({1, 4, 3, 3}, 19, -1, 1, DType::Float64);
  OnnxModel o(17);
  o.input("x", DType::Float64, {int64_t{1}, int64_t{4}, int64_t{3}, int64_t{3}});
  o.initializer("w", ingot::testing::random_tensor({4, 3, 3, 2}, 20, -1, 1, DType::Float64));
  o.initializer("b", ingot::testing::random_tensor({6}, 21, -1, 1, DType::Float64));
  auto& n = o.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  attr(n, "strides", std::vector<int64_t>{2, 1});
  attr(n, "pads", std::vector<int64_t>{1, 0, 0, 1});
  attr(n, "output_padding", std::vector<int64_t>{1, 0});
  attr(n, "group", int64_t{2});
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  // Output: H = 2 (3 - 1) + 3 + 1 - 1 - 0 = 7, W = (3 - 1) + 2 - 0 - 1 = 3, channels 3 x 2 groups.
  const PhysicalModel pm = compile(m, ReferenceBackend());
  EXPECT_EQ(to_string(pm.evaluate({}, {{"x", x}}).at("y").shape()), "[1, 6, 7, 3]");
  expect_input_gradients(m, {{"x", x}}, {"y"});
}

namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double clipped(double x, double c) { return c > 0 ? std::clamp(x, -c, c) : x; }
// W [rows, cols] (row-major) times v, plus the bias rows [offset, offset + rows) of b (if any).
std::vector<double> affine(const std::vector<double>& w, int64_t row0, int64_t rows, int64_t cols, const std::vector<double>& v,
                           const std::vector<double>* b = nullptr, int64_t boff = 0) {
  std::vector<double> y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) y[r] += w[static_cast<size_t>((row0 + r) * cols + k)] * v[static_cast<size_t>(k)];
    if (b) y[r] += (*b)[static_cast<size_t>(boff + row0 + r)];
  }
  return y;
}

}  // namespace

// GRU with everything the node suite leaves out: batch-first layout, linear_before_reset, clip,
// a non-default activation list with its alpha and beta (one entry per function), an initial
// state, and sequence_lens with one batch entry shorter than the sequence (its state stays and Y
// is 0 past its length). Against ONNX's equations in double, on both backends.
TEST(OnnxImportOps, GruWithEveryOptionAgainstItsEquations) {
  const int64_t batch = 2, steps = 3, in = 2, hid = 3;
  const Tensor x = ingot::testing::random_tensor({batch, steps, in}, 31, -1, 1, DType::Float64);
  const Tensor w = ingot::testing::random_tensor({1, 3 * hid, in}, 32, -1, 1, DType::Float64);
  const Tensor r = ingot::testing::random_tensor({1, 3 * hid, hid}, 33, -1, 1, DType::Float64);
  const Tensor b = ingot::testing::random_tensor({1, 6 * hid}, 34, -1, 1, DType::Float64);
  const Tensor h0 = ingot::testing::random_tensor({batch, 1, hid}, 35, -1, 1, DType::Float64);
  const Tensor lens = Tensor::from_vector<int32_t>({3, 2}, {2});
  OnnxModel o(22);
  o.input("x", DType::Float64, {batch, steps, in});
  o.input("w", DType::Float64, {int64_t{1}, 3 * hid, in});
  o.input("r", DType::Float64, {int64_t{1}, 3 * hid, hid});
  o.input("b", DType::Float64, {int64_t{1}, 6 * hid});
  o.input("lens", DType::Int32, {batch});
  o.input("h0", DType::Float64, {batch, int64_t{1}, hid});
  auto& n = o.node("GRU", {"x", "w", "r", "b", "lens", "h0"}, {"y", "y_h"});
  attr(n, "hidden_size", hid);
  attr(n, "layout", int64_t{1});
  attr(n, "linear_before_reset", int64_t{1});
  attr(n, "clip", 0.8f);
  attr(n, "activations", std::vector<std::string>{"HardSigmoid", "Tanh"});
  attr(n, "activation_alpha", std::vector<float>{0.3f, 0.0f});
  attr(n, "activation_beta", std::vector<float>{0.4f, 0.0f});
  o.output("y");
  o.output("y_h");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> X = values(x), W = values(w), R = values(r), B = values(b), H0 = values(h0);
  std::vector<double> want_y(static_cast<size_t>(batch * steps * hid), 0.0), want_h;
  for (int64_t bi = 0; bi < batch; ++bi) {
    std::vector<double> h(H0.begin() + bi * hid, H0.begin() + (bi + 1) * hid);
    for (int64_t t = 0; t < (bi == 0 ? 3 : 2); ++t) {
      const std::vector<double> xt(X.begin() + (bi * steps + t) * in, X.begin() + (bi * steps + t + 1) * in);
      const std::vector<double> gx = affine(W, 0, 3 * hid, in, xt, &B, 0), gh = affine(R, 0, 3 * hid, hid, h, &B, 3 * hid);
      std::vector<double> next(static_cast<size_t>(hid));
      for (int64_t j = 0; j < hid; ++j) {
        auto hard = [](double v) { return std::clamp(double{0.3f} * v + double{0.4f}, 0.0, 1.0); };
        const double c = double{0.8f};
        const double z = hard(clipped(gx[j] + gh[j], c)), rr = hard(clipped(gx[hid + j] + gh[hid + j], c));
        const double cand = std::tanh(clipped(gx[2 * hid + j] + rr * gh[2 * hid + j], c));
        next[j] = (1 - z) * cand + z * h[j];
      }
      h = next;
      for (int64_t j = 0; j < hid; ++j) want_y[static_cast<size_t>((bi * steps + t) * hid + j)] = h[j];
    }
    want_h.insert(want_h.end(), h.begin(), h.end());
  }
  const TensorMap inputs = {{"x", x}, {"w", w}, {"r", r}, {"b", b}, {"lens", lens}, {"h0", h0}};
  expect_both_backends(m, inputs, "y", want_y, 1e-9);
  expect_both_backends(m, inputs, "y_h", want_h, 1e-9);
}

// LSTM with peepholes, a bias, initial hidden and cell states and sequence_lens (layout 0), and
// Y_c: against ONNX's equations (gates i, o, f, c; peepholes i, o, f) in double, both backends.
TEST(OnnxImportOps, LstmWithPeepholesAndSequenceLengthsAgainstItsEquations) {
  const int64_t batch = 2, steps = 3, in = 3, hid = 2;
  auto rnd = [](Shape s, uint64_t seed) { return ingot::testing::random_tensor(s, seed, -1, 1, DType::Float64); };
  const Tensor x = rnd({steps, batch, in}, 41), w = rnd({1, 4 * hid, in}, 42), r = rnd({1, 4 * hid, hid}, 43),
               b = rnd({1, 8 * hid}, 44), h0 = rnd({1, batch, hid}, 45), c0 = rnd({1, batch, hid}, 46), p = rnd({1, 3 * hid}, 47);
  const Tensor lens = Tensor::from_vector<int32_t>({1, 3}, {2});
  OnnxModel o(22);
  o.input("x", DType::Float64, {steps, batch, in});
  o.input("w", DType::Float64, {int64_t{1}, 4 * hid, in});
  o.input("r", DType::Float64, {int64_t{1}, 4 * hid, hid});
  o.input("b", DType::Float64, {int64_t{1}, 8 * hid});
  o.input("lens", DType::Int32, {batch});
  o.input("h0", DType::Float64, {int64_t{1}, batch, hid});
  o.input("c0", DType::Float64, {int64_t{1}, batch, hid});
  o.input("p", DType::Float64, {int64_t{1}, 3 * hid});
  auto& n = o.node("LSTM", {"x", "w", "r", "b", "lens", "h0", "c0", "p"}, {"y", "y_h", "y_c"});
  attr(n, "hidden_size", hid);
  o.output("y");
  o.output("y_h");
  o.output("y_c");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> X = values(x), W = values(w), R = values(r), B = values(b), H0 = values(h0), C0 = values(c0),
                            P = values(p);
  std::vector<double> want_y(static_cast<size_t>(steps * batch * hid), 0.0), want_h, want_c;
  for (int64_t bi = 0; bi < batch; ++bi) {
    std::vector<double> h(H0.begin() + bi * hid, H0.begin() + (bi + 1) * hid), cs(C0.begin() + bi * hid, C0.begin() + (bi + 1) * hid);
    for (int64_t t = 0; t < (bi == 0 ? 1 : 3); ++t) {
      const std::vector<double> xt(X.begin() + (t * batch + bi) * in, X.begin() + (t * batch + bi + 1) * in);
      const std::vector<double> gx = affine(W, 0, 4 * hid, in, xt, &B, 0), gh = affine(R, 0, 4 * hid, hid, h, &B, 4 * hid);
      for (int64_t j = 0; j < hid; ++j) {
        const double i = sigmoid(gx[j] + gh[j] + P[j] * cs[j]);
        const double f = sigmoid(gx[2 * hid + j] + gh[2 * hid + j] + P[2 * hid + j] * cs[j]);
        const double c = f * cs[j] + i * std::tanh(gx[3 * hid + j] + gh[3 * hid + j]);
        const double og = sigmoid(gx[hid + j] + gh[hid + j] + P[hid + j] * c);
        cs[j] = c;
        h[j] = og * std::tanh(c);
        want_y[static_cast<size_t>((t * batch + bi) * hid + j)] = h[j];
      }
    }
    want_h.insert(want_h.end(), h.begin(), h.end());
    want_c.insert(want_c.end(), cs.begin(), cs.end());
  }
  const TensorMap inputs = {{"x", x}, {"w", w}, {"r", r}, {"b", b}, {"lens", lens}, {"h0", h0}, {"c0", c0}, {"p", p}};
  expect_both_backends(m, inputs, "y", want_y, 1e-9);
  expect_both_backends(m, inputs, "y_h", want_h, 1e-9);
  expect_both_backends(m, inputs, "y_c", want_c, 1e-9);
}

// A Shape of an intermediate value the file gives no value_info for (ONNX's expanded functions
// and exporters write this: Shape(Transpose(x)) feeding a Reshape): the importer sizes it with
// ingot's shape inference over the model built so far. A size that stays symbolic is refused.
TEST(OnnxImportOps, ShapeOfAnIntermediateValue) {
  OnnxModel o(17);
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}, int64_t{4}});
  attr(o.node("Transpose", {"x"}, {"t"}), "perm", std::vector<int64_t>{2, 0, 1});
  o.node("Shape", {"t"}, {"s"});
  o.node("Reshape", {"x", "s"}, {"y"});
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Tensor x = ingot::testing::random_tensor({2, 3, 4}, 51, -1, 1);
  const TensorMap got = compile(m, ReferenceBackend()).evaluate({}, {{"x", x}});
  EXPECT_EQ(to_string(got.at("y").shape()), "[4, 2, 3]");
  EXPECT_TRUE(equal(got.at("y"), x.reshape({4, 2, 3})));

  OnnxModel symbolic(17);
  symbolic.input("x", DType::Float32, {std::string("N"), int64_t{3}});
  attr(symbolic.node("Transpose", {"x"}, {"t"}), "perm", std::vector<int64_t>{1, 0});
  symbolic.node("Shape", {"t"}, {"s"});
  symbolic.node("Reshape", {"x", "s"}, {"y"});
  symbolic.output("y");
  try {
    (void)ingot::onnx::load_bytes(symbolic.bytes());
    FAIL() << "a symbolic size was folded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only known at run time"), std::string::npos) << e.what();
  }
}

namespace {

// einsum by brute force in double: every assignment of the letters, an operand's size-1 axis
// read at 0 (broadcast). `terms` and `output` spell every axis (no "...").
std::vector<double> brute_einsum(const std::vector<std::string>& terms, const std::string& output,
                                 const std::vector<Tensor>& xs) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t k = 0; k < terms[i].size(); ++k) size[terms[i][k]] = std::max(size[terms[i][k]], xs[i].shape()[k]);
  std::vector<char> letters;
  for (const auto& [ch, n] : size) letters.push_back(ch);
  int64_t out_count = 1;
  for (char ch : output) out_count *= size[ch];
  std::vector<double> out(static_cast<size_t>(out_count), 0.0);
  std::map<char, int64_t> at;
  std::function<void(size_t)> walk = [&](size_t d) {
    if (d == letters.size()) {
      double p = 1;
      for (size_t i = 0; i < terms.size(); ++i) {
        int64_t flat = 0;
        for (size_t k = 0; k < terms[i].size(); ++k) {
          const int64_t n = xs[i].shape()[k];
          flat = flat * n + (n == 1 ? 0 : at[terms[i][k]]);
        }
        p *= xs[i].astype(DType::Float64).item(flat);
      }
      int64_t o = 0;
      for (char ch : output) o = o * size[ch] + at[ch];
      out[static_cast<size_t>(o)] += p;
      return;
    }
    for (at[letters[d]] = 0; at[letters[d]] < size[letters[d]]; ++at[letters[d]]) walk(d + 1);
  };
  walk(0);
  return out;
}

}  // namespace

// Einsum beyond the node suite's six: three operands, a contraction over transposed operands, a
// trace, a diagonal feeding a contraction, the implicit output, "..." axes broadcast between
// operands; against brute force in double on both backends. And the errors.
TEST(OnnxImportOps, EinsumAgainstBruteForce) {
  struct Case {
    std::string equation;
    std::vector<Shape> shapes;
    std::vector<std::string> terms;  // the equation spelled out for brute_einsum
    std::string output;
  };
  const std::vector<Case> cases = {
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {"ij", "jk", "kl"}, "il"},
      {"bij,bkj->bik", {{2, 3, 4}, {2, 5, 4}}, {"bij", "bkj"}, "bik"},
      {"ii->", {{4, 4}}, {"ii"}, ""},
      {"iij,jk->ik", {{3, 3, 2}, {2, 4}}, {"iij", "jk"}, "ik"},
      {"ij,jk", {{2, 3}, {3, 4}}, {"ij", "jk"}, "ik"},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 2}}, {"xyij", "yjk"}, "xyik"},
      {"ab , ba -> ", {{3, 2}, {2, 3}}, {"ab", "ba"}, ""},
  };
  uint64_t seed = 70;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.equation);
    OnnxModel o(12);
    std::vector<std::string> names;
    std::vector<Tensor> xs;
    TensorMap inputs;
    for (size_t i = 0; i < k.shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      std::vector<DimSpec> dims(k.shapes[i].begin(), k.shapes[i].end());
      o.input(names.back(), DType::Float64, dims);
      xs.push_back(ingot::testing::random_tensor(k.shapes[i], seed++, -1, 1, DType::Float64));
      inputs[names.back()] = xs.back();
    }
    attr(o.node("Einsum", names, {"y"}), "equation", k.equation);
    o.output("y");
    expect_both_backends(ingot::onnx::load_bytes(o.bytes()), inputs, "y", brute_einsum(k.terms, k.output, xs), 1e-9);
  }
  auto refused = [](const std::string& equation, const std::vector<Shape>& shapes, const std::string& why) {
    OnnxModel o(12);
    std::vector<std::string> names;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      o.input(names.back(), DType::Float32, std::vector<DimSpec>(shapes[i].begin(), shapes[i].end()));
    }
    attr(o.node("Einsum", names, {"y"}), "equation", equation);
    o.output("y");
    expect_refused(o.bytes(), why, equation);
  };
  refused("ij,jk->ik", {{2, 3}}, "the equation has 2 operands, the node 1");
  refused("ij->ik", {{2, 3}}, "output letter 'k' is in no operand");
  refused("ijk->i", {{2, 3}}, "has rank 2 but 'ijk' names 3 axes");
  refused("ii->i", {{2, 3}}, "stands for axes of sizes 2 and 3");
  refused("ij,jk->ik", {{2, 3}, {4, 5}}, "letter 'j' has sizes 3 and 4");
}

// ScatterND: tuples of two indices (one negative) replacing rows of a [3, 4, 2] tensor, tuples of
// one index adding whole [4, 2] slices (a repeated tuple adds twice), as update tensors given at
// run time; both against the ONNX definition's loop. Refused with a clear error: a reduction
// other than none/add, updates of the wrong shape.
TEST(OnnxImportOps, ScatterNDReplacesOrAddsTheSlicesItsTuplesName) {
  const Shape ds = {3, 4, 2};
  const Tensor data = ingot::testing::random_tensor(ds, 41, -1, 1, DType::Float64);
  const Tensor pairs = Tensor::from_vector<int64_t>({0, 1, 2, -1, 1, 0}, {3, 2});
  const Tensor rows = Tensor::from_vector<int64_t>({2, 0, 2}, {3, 1});
  const Tensor u2 = ingot::testing::random_tensor({3, 2}, 42, -1, 1, DType::Float64);
  const Tensor u1 = ingot::testing::random_tensor({3, 4, 2}, 43, -1, 1, DType::Float64);
  OnnxModel o(16);
  o.input("x", DType::Float64, {int64_t{3}, int64_t{4}, int64_t{2}});
  o.input("u2", DType::Float64, {int64_t{3}, int64_t{2}});
  o.input("u1", DType::Float64, {int64_t{3}, int64_t{4}, int64_t{2}});
  o.initializer("pairs", pairs);
  o.initializer("rows", rows);
  o.node("ScatterND", {"x", "pairs", "u2"}, {"replaced"});
  attr(o.node("ScatterND", {"x", "rows", "u1"}, {"added"}), "reduction", std::string("add"));
  o.output("replaced");
  o.output("added");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> x = values(data), a = values(u2), b = values(u1);
  std::vector<double> replaced = x, added = x;
  const int64_t p[3][2] = {{0, 1}, {2, 3}, {1, 0}};  // -1 counts from the end of the axis of 4
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t k = 0; k < 2; ++k) replaced[static_cast<size_t>((p[t][0] * 4 + p[t][1]) * 2 + k)] = a[static_cast<size_t>(t * 2 + k)];
  const int64_t r[3] = {2, 0, 2};
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t j = 0; j < 8; ++j) added[static_cast<size_t>(r[t] * 8 + j)] += b[static_cast<size_t>(t * 8 + j)];
  const TensorMap in = {{"x", data}, {"u2", u2}, {"u1", u1}};
  expect_both_backends(m, in, "replaced", replaced, 1e-12);
  expect_both_backends(m, in, "added", added, 1e-12);

  auto refused = [&](const std::string& reduction, const Shape& update_shape, const std::string& why) {
    OnnxModel bad(18);
    bad.input("x", DType::Float32, {int64_t{3}, int64_t{4}, int64_t{2}});
    bad.input("u", DType::Float32, std::vector<DimSpec>(update_shape.begin(), update_shape.end()));
    bad.initializer("pairs", pairs);
    attr(bad.node("ScatterND", {"x", "pairs", "u"}, {"y"}), "reduction", reduction);
    bad.output("y");
    expect_refused(bad.bytes(), why, reduction);
  };
  refused("max", {3, 2}, "reduction 'max' is not supported (none and add are)");
  refused("none", {3, 4}, "updates of shape [3, 4], expected [3, 2]");
}
