// Which convolution inputs the CPU backend scans for NaN and inf (conv_post_ops.h): only those no
// earlier convolution of the same call proves finite. The proof comes from the code generator
// (DnnlConvCall::finite_when: a value is a conv's result, or max pooling / relu / slice / concat of
// such results) and from each conv's run (its inputs were finite and its post-ops keep finite
// values finite). These tests check the proofs, that the proven inputs are not scanned, and that
// a NaN or inf made between convolutions by an op that can make one is still seen.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/codegen.h"
#include "backends/cpu/conv_post_ops.h"
#include "backends/cpu/dnnl_conv.h"
#include "compiler/passes/passes.h"
#include "cpu_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::random_tensor;
using V = std::vector<int64_t>;
using Kind = cpu::ConvPostOp::Kind;
using Proof = std::optional<std::vector<int32_t>>;

namespace {

// x -> conv0 + relu -> max pool -> conv1 + relu -> conv2 + (the pool's output) + relu ->
// conv3 + log -> conv4 + relu: a ResNet stem and block, then a conv whose post-op (log) can make
// a NaN from finite values, then one that reads it. Weights are constants, as with constant_keys.
Graph chain() {
  return make_graph({{"x", {2, 8, 10, 10}}}, [&](Graph& g, std::vector<ValueId>& in) {
    auto w = [&](uint64_t seed) { return g.add_constant("w" + std::to_string(seed), random_tensor({8, 8, 3, 3}, seed, -0.3, 0.3)); };
    auto conv = [&](ValueId x, uint64_t seed) { return g.add_op("conv2d", {x, w(seed)}, {{"padding", V{1, 1}}}); };
    const ValueId a = g.add_op("relu", {conv(in[0], 300)});
    const ValueId pooled = g.add_op("max_pool2d", {a}, {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}});
    const ValueId b = g.add_op("relu", {conv(pooled, 301)});
    const ValueId c = g.add_op("relu", {g.add_op("add", {conv(b, 302), pooled})});
    const ValueId d = g.add_op("log", {conv(c, 303)});
    g.set_output("y", g.add_op("relu", {conv(d, 304)}));
  });
}

cpu::GeneratedCode generated(const Graph& g, Layout layout) {
  cpu::CodegenOptions o;
  o.dnnl = true;
  const LayoutPlan layouts = layout == Layout::Nchw ? nchw_plan(g) : plan_layouts(g, cpu::cpu_layout_target(true, layout));
  return cpu::generate_cpp(g, plan_fusion(g), layouts, o);
}

std::vector<Tensor> input(uint64_t seed, std::optional<float> poison = std::nullopt) {
  Tensor x = random_tensor({2, 8, 10, 10}, seed, -1, 1);
  if (poison) x.data<float>()[123] = *poison;
  return {x};
}

}  // namespace

TEST(ConvFiniteness, ProducersProveTheirReadersFinite) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "built without oneDNN";
  const Graph g = chain();
  for (const Layout target : all_layout_targets()) {
    SCOPED_TRACE(layout_name(target));
    const cpu::GeneratedCode code = generated(g, target);
    ASSERT_EQ(code.dnnl_convs.size(), 5u);
    const std::vector<cpu::DnnlConvCall>& c = code.dnnl_convs;
    EXPECT_EQ(c[0].finite_when, (std::vector<Proof>{std::nullopt, std::vector<int32_t>{}}))
        << "the graph's input is unknown; finite constant weights need no proof";
    EXPECT_EQ(c[1].finite_when[0], Proof(std::vector<int32_t>{0})) << "max pooling of conv 0's result";
    ASSERT_EQ(c[2].finite_when.size(), 3u) << "x, w and the residual operand";
    EXPECT_EQ(c[2].finite_when[0], Proof(std::vector<int32_t>{1}));
    EXPECT_EQ(c[2].finite_when[2], Proof(std::vector<int32_t>{0})) << "the residual is the pooled conv 0";
    EXPECT_EQ(c[4].finite_when[0], Proof(std::vector<int32_t>{3})) << "conv 3's result, finite only if its run says so";
    EXPECT_EQ(c[3].post_ops.back().kind, Kind::Log);
  }
}

// Per call, only the graph's input (conv 0) and conv 4's input (after conv 3's log, which may
// make a NaN) are scanned; before, every conv with a relu scanned x and its residual: six.
TEST(ConvFiniteness, OnlyUnprovenInputsAreScanned) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "built without oneDNN";
  const Graph g = chain();
  for (const Layout target : all_layout_targets()) {
    SCOPED_TRACE(layout_name(target));
    std::unique_ptr<Executable> cpu = cpu::lower_with_plan(g, plan_fusion(g), cpu_options(), false, "greedy", target);
    for (int call = 0; call < 2; ++call) {
      const int64_t before = cpu::non_finite_scans();
      cpu->run(input(400));
      EXPECT_EQ(cpu::non_finite_scans() - before, 2) << "call " << call;
    }
  }
}

// A NaN or inf entering at the input, or made between convs (by conv 3's log of a negative
// value, by 1 / relu(...) of a zero, by sqrt of a negative value), reaches the output as the
// reference computes it, in every layout; the same executable is right on finite inputs before
// and after (the proofs are per call).
TEST(ConvFiniteness, NonFiniteValuesMadeBetweenConvsAreStillSeen) {
  const Graph logs = chain();
  const Graph between = make_graph({{"x", {2, 8, 10, 10}}}, [&](Graph& g, std::vector<ValueId>& in) {
    auto conv = [&](ValueId x, uint64_t seed) {
      return g.add_op("conv2d", {x, g.add_constant("w" + std::to_string(seed), random_tensor({8, 8, 3, 3}, seed, -0.3, 0.3))},
                      {{"padding", V{1, 1}}});
    };
    const ValueId a = g.add_op("relu", {conv(in[0], 310)});
    const ValueId inverse = g.add_op("div", {scalar(g, 1.0), a});  // inf where relu gave 0
    const ValueId b = g.add_op("relu", {conv(inverse, 311)});
    const ValueId root = g.add_op("sqrt", {g.add_op("sub", {b, scalar(g, 0.2)})});  // NaN below 0.2
    g.set_output("y", g.add_op("minimum", {g.add_op("relu", {conv(root, 312)}), scalar(g, 6.0)}));
  });
  for (const Graph* g : {&logs, &between})
    for (const Layout target : all_layout_targets())
      check(*g, {input(410), input(411, NAN), input(412, INFINITY), input(413, -INFINITY), input(414)}, plan_fusion, 1e-4,
            1e-4, target);
}

TEST(ConvFiniteness, WhichPostOpsKeepFiniteValuesFinite) {
  using cpu::ConvPostOp;
  auto keeps = [](std::vector<ConvPostOp> ops) { return cpu::post_ops_keep_finite(ops); };
  auto op = [](Kind k, float alpha = 1.0f, float beta = 0.0f) {
    ConvPostOp p;
    p.kind = k;
    p.alpha = alpha;
    p.beta = beta;
    return p;
  };
  EXPECT_TRUE(keeps({}));
  EXPECT_TRUE(keeps({op(Kind::Add), op(Kind::Relu)})) << "a residual block's epilogue";
  EXPECT_TRUE(keeps({op(Kind::Clip, 0.0f, 6.0f)}));
  EXPECT_TRUE(keeps({op(Kind::Clip, -INFINITY, 6.0f)})) << "a minimum alone";
  EXPECT_TRUE(keeps({op(Kind::Tanh), op(Kind::Sigmoid), op(Kind::GeluErf), op(Kind::Mul), op(Kind::Max)}));
  for (const Kind k : {Kind::Exp, Kind::Log, Kind::Sqrt, Kind::Div}) EXPECT_FALSE(keeps({op(Kind::Relu), op(k)}));
  EXPECT_FALSE(keeps({op(Kind::Linear, 1.0f, INFINITY)})) << "y + inf";
  EXPECT_FALSE(keeps({op(Kind::Linear, NAN, 0.0f)}));
  EXPECT_FALSE(keeps({op(Kind::Clip, INFINITY, INFINITY)})) << "maximum(y, inf)";
  EXPECT_FALSE(keeps({op(Kind::Clip, -INFINITY, -INFINITY)})) << "minimum(y, -inf)";
}
