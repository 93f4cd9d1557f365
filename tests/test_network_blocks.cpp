// The blocks real CNNs are made of, on the CPU backend against the reference interpreter at
// every optimization level and under every layout target (8- and 16-channel blocks, NHWC,
// NCHW), so one machine covers what AVX2 and AVX-512 machines pick. A residual that arrives in
// another layout than the convolution that adds it (a model input, a pooling output, a
// downsample branch) is what the layout plan once got wrong: the CPU backend returned ResNet
// logits off by 70% without an error.
#include <gtest/gtest.h>

#include "backends/cpu/codegen.h"
#include "backends/cpu/dnnl_conv.h"
#include "network_test_util.h"

using namespace ingot;
using namespace ingot::network_test;
using ingot::testing::random_tensor;
using V = std::vector<int64_t>;

namespace {

// A "same"-padded conv (with a bias: random_params gives it non-zero values).
Model conv(int64_t out, int64_t kernel, int64_t stride = 1) { return Conv2d(out, kernel, stride, (kernel - 1) / 2); }

Connection then(Model& m, const Model& b, const Connection& x) { return m.add(b, {{"input", x}}).at("output"); }

Connection concat_channels(Model& m, const Connection& a, const Connection& b) {
  return m.add(Model::primitive("concat", {"a", "b"}, {"output"}, {{"axis", int64_t{1}}}), {{"a", a}, {"b", b}})
      .at("output");
}

void every_case(const Model& m, const Shape& shape, double tol = 1e-4) {
  const Expected want = reference_run(m, shape, false);
  for (const Case& c : every_level_and_layout()) expect_matches(m, shape, c, want, tol);
}

}  // namespace

// The reproducer of the residual-block bug: conv, conv, plus the model's input.
TEST(NetworkBlocks, TwoConvolutionsPlusTheInput) {
  for (const int64_t c : {4, 16}) {
    Model m;
    Connection x = m.input("input");
    m.set_cout(then(m, conv(c, 3), then(m, conv(c, 3), x)) + x);
    every_case(m, {2, c, 8, 8});
  }
}

TEST(NetworkBlocks, ResNetBasicBlock) {
  every_case(BasicBlock(16), {2, 16, 8, 8});
  // strided, with the 1x1 downsample shortcut (16 -> 32 channels)
  every_case(BasicBlock(32, 2, true), {2, 16, 9, 9});
}

TEST(NetworkBlocks, ResNetBottleneck) {
  every_case(Bottleneck(8), {2, 32, 8, 8});                  // shortcut: the input itself
  every_case(Bottleneck(8, 2, true), {2, 16, 8, 8});         // strided 1x1 downsample
}

TEST(NetworkBlocks, ShortcutFromAPoolingOutput) {
  // ResNet's stem: conv, bn, relu, max pool; the first block's shortcut is the pool's output.
  Model m;
  Connection y = then(m, Relu(), then(m, BatchNorm2d(), then(m, conv(16, 7, 2), m.input("input"))));
  y = then(m, MaxPool2d(3, 2, 1), y);
  m.set_cout(then(m, BasicBlock(16), y));
  every_case(m, {2, 3, 24, 24});
}

TEST(NetworkBlocks, MobileNetV2InvertedResidual) {
  every_case(InvertedResidual(16, 16, 1, 6), {2, 16, 8, 8});  // residual, depthwise over 96 channels
  every_case(InvertedResidual(16, 24, 2, 6), {2, 16, 9, 9});  // strided, no residual
  every_case(InvertedResidual(32, 16, 1, 1), {2, 32, 8, 8});  // no expansion
}

TEST(NetworkBlocks, ResNeXtGroupedBottleneck) {
  every_case(Bottleneck(16, 1, false, 4, 8), {2, 64, 8, 8});  // width 8 * 4 = 32 in 4 groups
}

TEST(NetworkBlocks, SqueezeAndExcitation) {
  // conv, then channel weights from the global pool through two linears and a sigmoid, times
  // the conv output, plus the input.
  Model m;
  Connection x = m.input("input");
  Connection y = then(m, Relu(), then(m, BatchNorm2d(), then(m, conv(16, 3), x)));
  Connection s = then(m, Sigmoid(), then(m, Linear(16), then(m, Relu(), then(m, Linear(4), then(m, GlobalAvgPool2d(), y)))));
  m.set_cout(y * s.reshape({0, 0, 1, 1}) + x);
  every_case(m, {2, 16, 8, 8});
}

TEST(NetworkBlocks, DenseNetConcatenation) {
  // Each layer's output joins the input along the channels; the next reads the concatenation.
  Model m;
  Connection x = m.input("input");
  Connection a = concat_channels(m, x, then(m, conv(8, 3), then(m, Relu(), then(m, BatchNorm2d(), x))));
  Connection b = concat_channels(m, a, then(m, conv(8, 3), then(m, Relu(), then(m, BatchNorm2d(), a))));
  m.set_cout(then(m, conv(16, 1), b));
  every_case(m, {2, 16, 8, 8});
}

TEST(NetworkBlocks, UNetSkipAcrossDownAndUpsampling) {
  // down: conv, max pool, conv; up: nearest 2x upsampling (reshape, broadcast, reshape), joined
  // with the skip along the channels, conv.
  Model m;
  Connection skip = then(m, Relu(), then(m, conv(16, 3), m.input("input")));
  Connection low = then(m, Relu(), then(m, conv(16, 3), then(m, MaxPool2d(2), skip)));
  Connection up = apply("broadcast_to", low.reshape({2, 16, 4, 1, 4, 1}), {{"shape", V{2, 16, 4, 2, 4, 2}}})
                      .reshape({2, 16, 8, 8});
  m.set_cout(then(m, conv(16, 3), concat_channels(m, up, skip)));
  every_case(m, {2, 8, 8, 8});
}

// Training graphs go through the same layout plan: gradients of the residual blocks under every
// layout target.
TEST(NetworkBlocks, GradientsOfResidualBlocks) {
  const Model basic = BasicBlock(16, 2, true), inverted = InvertedResidual(16, 16, 1, 2);
  const Expected want_basic = reference_run(basic, {2, 16, 8, 8}, true),
                 want_inverted = reference_run(inverted, {2, 16, 8, 8}, true);
  for (Layout l : cpu_test::all_layout_targets()) {
    expect_matches(basic, {2, 16, 8, 8}, {"medium", l, true}, want_basic);
    expect_matches(inverted, {2, 16, 8, 8}, {"medium", l, true}, want_inverted);
  }
}

// A full-shape post-op operand (a residual) given in the caller's layout of y is read right
// whichever layouts the primitive itself runs in: every (x, y) layout pair, with a channel
// count that fills 8- and 16-channel blocks.
TEST(NetworkBlocks, OneDnnResidualPostOpInEveryLayoutPair) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "built without oneDNN";
  const int64_t n = 2, c = 16, h = 6, w = 5;
  const Tensor x = random_tensor({n, c, h, w}, 1, -1, 1), wt = random_tensor({c, c, 3, 3}, 2, -1, 1),
               res = random_tensor({n, c, h, w}, 3, -1, 1);
  Graph g = cpu_test::make_graph({{"x", {n, c, h, w}}, {"w", {c, c, 3, 3}}, {"r", {n, c, h, w}}},
                                 [&](Graph& g, std::vector<ValueId>& in) {
                                   g.set_output("y", g.add_op("add", {g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}}), in[2]}));
                                 });
  const Tensor want = ReferenceBackend().lower(g, {})->run(std::vector<Tensor>{x, wt, res})[0];
  // [N, C, H, W] <-> layout l, by index arithmetic.
  auto offset = [&](Layout l, int64_t i, int64_t ch, int64_t p) {
    const int64_t b = layout_channel_block(l);
    if (l == Layout::Nhwc) return (i * h * w + p) * c + ch;
    if (b > 0) return ((i * (c / b) + ch / b) * h * w + p) * b + ch % b;
    return (i * c + ch) * h * w + p;
  };
  auto store = [&](const Tensor& t, Layout l) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < h * w; ++p) out[static_cast<size_t>(offset(l, i, ch, p))] = t.data<float>()[(i * c + ch) * h * w + p];
    return out;
  };
  for (Layout src : cpu_test::all_layout_targets())
    for (Layout dst : cpu_test::all_layout_targets()) {
      cpu::ConvSpec s = cpu::conv_spec(g.node(0), {n, c, h, w}, {c, c, 3, 3}, {n, c, h, w});
      s.src_layout = src;
      s.dst_layout = dst;
      cpu::ConvPostOp add;
      add.kind = cpu::ConvPostOp::Kind::Add;
      s.post_ops = {add};
      const cpu::DnnlConv prim(s);
      const std::vector<float> xs = store(x, src), rs = store(res, dst);
      std::vector<float> y(static_cast<size_t>(want.numel()));
      const void* operands[] = {rs.data()};
      prim.run(xs.data(), wt.data<float>(), nullptr, operands, y.data());
      double worst = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t p = 0; p < h * w; ++p)
            worst = std::max(worst, std::abs(static_cast<double>(y[static_cast<size_t>(offset(dst, i, ch, p))]) -
                                             want.data<float>()[(i * c + ch) * h * w + p]));
      EXPECT_LT(worst, 1e-4) << "x " << layout_name(src) << ", y " << layout_name(dst) << ": " << prim.layouts() << " ("
                             << prim.implementation() << ")";
    }
}

// Lowering checks the layout of every read: a plan that stores a softmax's input channel-blocked
// (which softmax cannot address) is an internal error, not a wrong number.
TEST(NetworkBlocks, ALayoutMismatchIsCaughtAtLowering) {
  Graph g = cpu_test::make_graph({{"x", {2, 16, 4, 4}}, {"w", {16, 16, 3, 3}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", g.add_op("softmax", {g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}})}));
  });
  LayoutPlan forged = nchw_plan(g);
  forged.of_value[static_cast<size_t>(g.node(0).outputs[0])] = Layout::Nchw16c;
  cpu::CodegenOptions o;
  o.dnnl = cpu::dnnl_available();
  try {
    cpu::generate_cpp(g, plan_fusion(g), forged, o);
    FAIL() << "a channel-blocked input of softmax was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("internal error"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nchw16c"), std::string::npos) << e.what();
  }
  // The graph output itself forged channels-last.
  LayoutPlan out_forged = nchw_plan(g);
  out_forged.of_value[static_cast<size_t>(g.outputs()[0].second)] = Layout::Nhwc;
  EXPECT_THROW(cpu::generate_cpp(g, plan_fusion(g), out_forged, o), Error);
}

// The primitive reports the layout it reads a residual in, and where that costs a reorder per
// call: an NCHW residual into a primitive that runs NHWC.
TEST(NetworkBlocks, OneDnnReportsAReorderedResidual) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "built without oneDNN";
  cpu::ConvSpec s;
  s.n = 1, s.cin = 4, s.h = 6, s.w = 6, s.cout = 4, s.kh = 3, s.kw = 3, s.oh = 6, s.ow = 6, s.ph = 1, s.pw = 1;
  s.src_layout = Layout::Nhwc;
  s.dst_layout = Layout::Nchw;
  cpu::ConvPostOp add;
  add.kind = cpu::ConvPostOp::Kind::Add;
  s.post_ops = {add};
  const cpu::DnnlConv prim(s);
  const std::string l = prim.layouts();
  EXPECT_NE(l.find(", residual "), std::string::npos) << l;
  // The residual is read in the layout the primitive writes, reordered exactly when that is not NCHW.
  const bool dst_reordered = l.find("dst nchw,") == std::string::npos;
  EXPECT_EQ(l.find("residual nchw") == std::string::npos, dst_reordered) << l;
}
