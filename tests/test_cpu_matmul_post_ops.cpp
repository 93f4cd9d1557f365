// float32 matmuls by constant weights run as oneDNN 1x1 convolutions with their epilogue (bias,
// activation, residual add) computed inside as post-ops (CpuOptions::dnnl_matmul,
// matmul_runs_as_conv in codegen_conv.h): each epilogue against the reference backend, non-finite
// inputs passed on as the reference passes them, and the cases that keep dnnl_sgemm and a pass
// (weights passed each call, rows past the limit or unknown, a transposed left operand, the option
// off).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cpu_post_ops_test_util.h"
#include "cpu_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::random_tensor;
using Kind = cpu::ConvPostOp::Kind;

namespace {

ValueId weights(Graph& g, const std::string& name, Shape shape, uint64_t seed) {
  return g.add_constant(name, random_tensor(std::move(shape), seed, -0.5, 0.5));
}

std::vector<Tensor> inputs(const Graph& g, uint64_t seed) { return random_inputs(g, 1, seed); }

}  // namespace

// x [2, 5, 12] (10 rows) and a 2-D [9, 12] by constant weights with odd output widths; each
// product has its own epilogue, which the fusion pass groups with it and the primitive takes.
TEST(CpuMatmulPostOps, EveryEpilogueMatchesReference) {
  Graph g = make_graph({{"x", {2, 5, 12}}, {"x2", {9, 12}}, {"res", {2, 5, 7}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], x2 = in[1], res = in[2];
                         const ValueId w = weights(g, "w", {12, 7}, 1), b = weights(g, "b", {7}, 2);
                         const ValueId w2 = weights(g, "w2", {12, 33}, 3), b2 = weights(g, "b2", {1, 33}, 4);
                         // 0: bias + erf GELU (a feed-forward's first product)
                         g.set_output("gelu", g.add_op("gelu", {g.add_op("add", {g.add_op("matmul", {x, w}), b})}));
                         // 1: bias + residual + tanh
                         const ValueId y1 = g.add_op("add", {g.add_op("matmul", {x, w}), b});
                         g.set_output("residual", g.add_op("tanh", {g.add_op("add", {y1, res})}));
                         // 2: 2-D, bias as [1, N], relu
                         g.set_output("relu", g.add_op("relu", {g.add_op("add", {g.add_op("matmul", {x2, w2}), b2})}));
                         // 3: tanh-form GELU, then a scalar scale
                         const ValueId y3 = g.add_op("gelu", {g.add_op("add", {g.add_op("matmul", {x2, w2}), b2})},
                                                     {{"approximate", std::string("tanh")}});
                         g.set_output("scaled", g.add_op("mul", {y3, scalar(g, 0.5)}));
                         // 4: no epilogue
                         g.set_output("plain", g.add_op("matmul", {x2, w2}));
                       });
  const std::string src = check(g, {inputs(g, 10), inputs(g, 20)}, plan_fusion, 1e-5, 1e-5);
  if (!cpu::dnnl_available()) return;
  EXPECT_EQ(count(src, "ctx->host->conv2d"), 5) << src;  // what ran above: the primitives
  const cpu::GeneratedCode code = generated_with_dnnl(g, Layout::Nchw, true);
  ASSERT_EQ(code.dnnl_convs.size(), 5u) << code.source;
  EXPECT_EQ(kinds(code.dnnl_convs[0]), (std::vector<Kind>{Kind::Add, Kind::GeluErf}));
  EXPECT_EQ(kinds(code.dnnl_convs[1]), (std::vector<Kind>{Kind::Add, Kind::Add, Kind::Tanh}));
  EXPECT_EQ(kinds(code.dnnl_convs[2]), (std::vector<Kind>{Kind::Add, Kind::Relu}));
  EXPECT_EQ(kinds(code.dnnl_convs[3]), (std::vector<Kind>{Kind::Add, Kind::GeluTanh, Kind::Linear}));
  EXPECT_TRUE(code.dnnl_convs[4].post_ops.empty());
  EXPECT_TRUE(code.dnnl_convs[0].post_ops[0].per_channel);   // the bias: one value per output column
  EXPECT_FALSE(code.dnnl_convs[1].post_ops[1].per_channel);  // the residual: y's shape
  EXPECT_EQ(count(code.source, "[elementwise]"), 0) << code.source;
}

// oneDNN's post-ops turn a NaN into a number (relu as vmaxps, GELU's clamped argument); the
// primitive then runs without them on a non-finite input and applies them with the reference's
// rules (conv_post_ops.h), as for a convolution.
TEST(CpuMatmulPostOps, NonFiniteInputsPassThroughAsTheReferenceDoes) {
  Graph g = make_graph({{"x", {6, 16}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const ValueId w = weights(g, "w", {16, 20}, 5), b = weights(g, "b", {20}, 6);
    const ValueId y = g.add_op("add", {g.add_op("matmul", {in[0], w}), b});
    g.set_output("relu", g.add_op("relu", {y}));
    g.set_output("gelu", g.add_op("gelu", {g.add_op("add", {g.add_op("matmul", {in[0], w}), b})}));
  });
  std::vector<Tensor> nan = inputs(g, 30);
  nan[0].data<float>()[3] = NAN;
  nan[0].data<float>()[40] = INFINITY;
  nan[0].data<float>()[81] = -INFINITY;
  check(g, {inputs(g, 31), nan, inputs(g, 32)}, plan_fusion, 1e-5, 1e-5);
  if (cpu::dnnl_available()) {
    EXPECT_EQ(generated_with_dnnl(g, Layout::Nchw, true).dnnl_convs.size(), 2u);
  }
}

// What keeps dnnl_sgemm and a pass: weights passed every call, more rows than the limit (256), rows
// unknown at compile time, a left operand read through a folded transpose, and the option off.
// Every case still matches the reference.
TEST(CpuMatmulPostOps, OtherProductsKeepTheLibraryGemm) {
  auto bias_gelu = [](Graph& g, ValueId x, ValueId w, ValueId b) {
    return g.add_op("gelu", {g.add_op("add", {g.add_op("matmul", {x, w}), b})});
  };
  Graph passed = make_graph({{"x", {4, 8}}, {"w", {8, 6}}, {"b", {6}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", bias_gelu(g, in[0], in[1], in[2]));
  });
  Graph tall = make_graph({{"x", {257, 8}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", bias_gelu(g, in[0], weights(g, "w", {8, 6}, 7), weights(g, "b", {6}, 8)));
  });
  Graph at_limit = make_graph({{"x", {2, 128, 8}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", bias_gelu(g, in[0], weights(g, "w", {8, 6}, 15), weights(g, "b", {6}, 16)));
  });
  Graph symbolic = make_graph({{"x", {"N", 8}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", bias_gelu(g, in[0], weights(g, "w", {8, 6}, 9), weights(g, "b", {6}, 10)));
  });
  Graph transposed = make_graph({{"x", {8, 5}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const ValueId xt = g.add_op("transpose", {in[0]}, {{"perm", std::vector<int64_t>{1, 0}}});
    g.set_output("y", bias_gelu(g, xt, weights(g, "w", {8, 6}, 11), weights(g, "b", {6}, 12)));
  });
  Graph constant = make_graph({{"x", {4, 8}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", bias_gelu(g, in[0], weights(g, "w", {8, 6}, 13), weights(g, "b", {6}, 14)));
  });
  for (const Graph* g : {&passed, &tall, &symbolic, &transposed, &constant, &at_limit}) {
    check(*g, {random_inputs(*g, 3, 40)}, plan_fusion, 1e-5, 1e-5);
    CpuBackend::CpuOptions off = cpu_options();
    off.dnnl_matmul = false;
    check(*g, {random_inputs(*g, 3, 41)}, plan_fusion, 1e-5, 1e-5, host_layout(), off);
  }
  if (!cpu::dnnl_available()) return;
  EXPECT_TRUE(generated_with_dnnl(passed, Layout::Nchw, true).dnnl_convs.empty());
  EXPECT_TRUE(generated_with_dnnl(tall, Layout::Nchw, true).dnnl_convs.empty());
  EXPECT_TRUE(generated_with_dnnl(symbolic, Layout::Nchw, true).dnnl_convs.empty());
  EXPECT_TRUE(generated_with_dnnl(transposed, Layout::Nchw, true).dnnl_convs.empty());
  EXPECT_EQ(generated_with_dnnl(constant, Layout::Nchw, true).dnnl_convs.size(), 1u);
  // 256 rows: the most that run fused
  EXPECT_EQ(generated_with_dnnl(at_limit, Layout::Nchw, true).dnnl_convs.size(), 1u);
  EXPECT_TRUE(generated_with_dnnl(constant, Layout::Nchw, false).dnnl_convs.empty());
}
