// conv2d through oneDNN with its elementwise epilogue folded into the primitive as post-ops
// (codegen_conv.h): every foldable pattern against the reference backend, what is folded and
// what is left to the pass after, and the cut to what oneDNN accepts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cpu/codegen.h"
#include "backends/cpu/codegen_conv.h"
#include "backends/cpu/conv_post_ops.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/dnnl_gemm.h"
#include "compiler/passes/passes.h"
#include "cpu_post_ops_test_util.h"
#include "cpu_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::random_tensor;
using V = std::vector<int64_t>;
using Kind = cpu::ConvPostOp::Kind;

TEST(CpuConvPostOps, EveryFoldablePatternMatchesReference) {
  // x: odd spatial sizes; each conv has its own epilogue, fused by the fusion pass.
  Graph g = make_graph(
      {{"x", {"N", 4, 9, 7}}, {"w", {6, 4, 3, 3}}, {"b", {6}}, {"pc", {6, 1, 1}}, {"pc4", {1, 6, 1, 1}},
       {"wg", {6, 2, 3, 3}}, {"res", {"N", 6, 5, 4}}, {"w1", {6, 4, 1, 1}}},
      [&](Graph& g, std::vector<ValueId>& in) {
        const ValueId x = in[0], w = in[1], b = in[2], pc = in[3], pc4 = in[4], wg = in[5], res = in[6], w1 = in[7];
        // 0: bias + relu, padding 1
        ValueId c0 = g.add_op("conv2d", {x, w, b}, {{"padding", V{1, 1}}});
        g.set_output("relu", g.add_op("relu", {c0}));
        // 1: per-channel add, tanh, scalar mul, scalar subtracted from (1 - y), neg
        ValueId c1 = g.add_op("conv2d", {x, w}, {{"padding", V{1, 1}}});
        ValueId t1 = g.add_op("tanh", {g.add_op("add", {c1, pc})});
        t1 = g.add_op("sub", {scalar(g, 1.0), g.add_op("mul", {t1, scalar(g, 0.5)})});
        g.set_output("affine", g.add_op("neg", {t1}));
        // 2: grouped, strided, dilated; sigmoid, per-channel mul ([1, C, 1, 1]), residual add, gelu
        ValueId c2 = g.add_op("conv2d", {x, wg, b},
                              {{"stride", V{2, 2}}, {"padding", V{1, 2}}, {"dilation", V{1, 2}}, {"groups", int64_t{2}}});
        ValueId t2 = g.add_op("mul", {pc4, g.add_op("sigmoid", {c2})});
        g.set_output("residual", g.add_op("gelu", {g.add_op("add", {res, t2})}));
        // 3: residual minus y, abs, per-channel max, residual min, exp, sqrt, log
        ValueId c3 = g.add_op("conv2d", {x, wg, b},
                              {{"stride", V{2, 2}}, {"padding", V{1, 2}}, {"dilation", V{1, 2}}, {"groups", int64_t{2}}});
        ValueId t3 = g.add_op("abs", {g.add_op("sub", {res, c3})});
        t3 = g.add_op("minimum", {g.add_op("maximum", {t3, pc}), res});
        g.set_output("minmax", g.add_op("log", {g.add_op("sqrt", {g.add_op("exp", {t3})})}));
        // 4: pointwise; per-channel div, tanh-form gelu, scalar add and subtract
        ValueId c4 = g.add_op("conv2d", {x, w1, b});
        ValueId t4 = g.add_op("gelu", {g.add_op("div", {c4, pc})}, {{"approximate", std::string("tanh")}});
        g.set_output("div", g.add_op("sub", {g.add_op("add", {t4, scalar(g, 2.0)}), scalar(g, 0.25)}));
      });
  auto inputs = [&](int64_t n, uint64_t seed) {
    std::vector<Tensor> ins = random_inputs(g, n, seed);
    ins[3] = random_tensor({6, 1, 1}, seed + 50, 0.5, 1.5);  // divisor away from 0
    return ins;
  };
  const std::string src = check(g, {inputs(2, 10), inputs(1, 20), inputs(0, 30), inputs(3, 40)}, plan_fusion, 1e-4, 1e-5);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g);
  ASSERT_EQ(code.dnnl_convs.size(), 5u);
  EXPECT_EQ(kinds(code.dnnl_convs[0]), (std::vector<Kind>{Kind::Relu}));
  // one linear post-op per chain (oneDNN 2.6): 1 - y and the negation run after
  EXPECT_EQ(kinds(code.dnnl_convs[1]), (std::vector<Kind>{Kind::Add, Kind::Tanh, Kind::Linear}));
  EXPECT_EQ(kinds(code.dnnl_convs[2]), (std::vector<Kind>{Kind::Sigmoid, Kind::Mul, Kind::Add, Kind::GeluErf}));
  EXPECT_EQ(kinds(code.dnnl_convs[3]), (std::vector<Kind>{Kind::Sub, Kind::Linear, Kind::Abs, Kind::Max, Kind::Min,
                                                          Kind::Exp, Kind::Sqrt, Kind::Log}));
  EXPECT_EQ(kinds(code.dnnl_convs[4]), (std::vector<Kind>{Kind::Div, Kind::GeluTanh, Kind::Linear}));
  // 0.5 t and t + 2: alpha * y + beta with the constants as given.
  EXPECT_EQ(code.dnnl_convs[1].post_ops[2].alpha, 0.5f);
  EXPECT_EQ(code.dnnl_convs[1].post_ops[2].beta, 0.0f);
  EXPECT_EQ(code.dnnl_convs[4].post_ops[2].alpha, 1.0f);
  EXPECT_EQ(code.dnnl_convs[4].post_ops[2].beta, 2.0f);
  EXPECT_TRUE(code.dnnl_convs[1].post_ops[0].per_channel);
  EXPECT_FALSE(code.dnnl_convs[2].post_ops[2].per_channel);
  // Only the chains' tails past a second linear step run after their primitive.
  EXPECT_EQ(count(code.source, "[elementwise]"), 2) << code.source;
  EXPECT_EQ(count(src, "ctx->host->conv2d_args("), 4);
}

// In training a conv's input is often NCHW (a batch_norm backward or a relu wrote it) while the
// layout plan blocks its output: the primitive then runs blocked on both sides, reordering only
// the input, and matches the reference.
TEST(CpuConvLayouts, NchwInputIntoABlockedOutputRunsBlocked) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "built without oneDNN";
  const int block = host_channel_block();
  const Layout blocked = block == 16 ? Layout::Nchw16c : Layout::Nchw8c;
  cpu::ConvSpec s;
  s.n = 2, s.cin = 2 * block, s.h = 9, s.w = 7, s.cout = block, s.kh = 3, s.kw = 3, s.oh = 7, s.ow = 5;
  s.src_layout = Layout::Nchw;
  s.dst_layout = blocked;
  const cpu::DnnlConv conv(s);
  const std::string b(layout_name(blocked));
  EXPECT_EQ(conv.layouts(), "src " + b + " (reordered from nchw), dst " + b) << conv.implementation();
  EXPECT_EQ(conv.implementation().find("gemm"), std::string::npos) << conv.implementation();
  // y = conv(x, w) against the reference, read back from the blocked output.
  const Tensor x = random_tensor({2, s.cin, 9, 7}, 80, -1, 1), w = random_tensor({s.cout, s.cin, 3, 3}, 81, -1, 1);
  std::vector<float> y(static_cast<size_t>(2 * s.cout * 7 * 5));
  conv.run(x.data<float>(), w.data<float>(), nullptr, nullptr, y.data());
  Graph g = make_graph({{"x", {2, s.cin, 9, 7}}, {"w", {s.cout, s.cin, 3, 3}}},
                       [&](Graph& g, std::vector<ValueId>& in) { g.set_output("y", g.add_op("conv2d", {in[0], in[1]})); });
  const std::vector<Tensor> ins = {x, w};
  const Tensor want = ReferenceBackend().lower(g, {})->run(ins)[0];
  double worst = 0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < s.cout; ++c)
      for (int64_t p = 0; p < 35; ++p) {
        const float got = y[static_cast<size_t>(((n * (s.cout / block) + c / block) * 35 + p) * block + c % block)];
        worst = std::max(worst, std::abs(static_cast<double>(got) - want.data<float>()[(n * s.cout + c) * 35 + p]));
      }
  EXPECT_LT(worst, 1e-4);
}

// MobileNetV3's hardswish, y * clip(y / 6 + 0.5, 0, 1), as ONNX import writes it (and with the
// clamps the other way round and the product's operands swapped), folds as one post-op, also
// before a residual add; not where y has a third reader or the constants are not hardswish's.
// NaN and inf inputs take the exact path, which follows the reference's form.
TEST(CpuConvPostOps, HardSwishFoldsAsOnePostOp) {
  Graph g = make_graph({{"x", {"N", 8, 9, 7}}, {"w", {16, 8, 3, 3}}, {"b", {16}}, {"res", {"N", 16, 9, 7}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], w = in[1], b = in[2], res = in[3];
                         auto conv = [&] { return g.add_op("conv2d", {x, w, b}, {{"padding", V{1, 1}}}); };
                         auto hardswish = [&](ValueId y, double scale, bool min_first, bool y_first) {
                           ValueId t = g.add_op("add", {g.add_op("mul", {y, scalar(g, scale)}), scalar(g, 0.5)});
                           t = min_first ? g.add_op("maximum", {g.add_op("minimum", {t, scalar(g, 1.0)}), scalar(g, 0.0)})
                                         : g.add_op("minimum", {g.add_op("maximum", {t, scalar(g, 0.0)}), scalar(g, 1.0)});
                           return y_first ? g.add_op("mul", {y, t}) : g.add_op("mul", {t, y});
                         };
                         g.set_output("hs", hardswish(conv(), 1.0 / 6, true, true));
                         g.set_output("hs_res", g.add_op("add", {hardswish(conv(), 1.0 / 6, false, false), res}));
                         const ValueId c2 = conv();
                         g.set_output("c2", c2);
                         g.set_output("hs_read", hardswish(c2, 1.0 / 6, true, true));
                         g.set_output("fifth", hardswish(conv(), 0.2, true, true));
                       });
  std::vector<Tensor> nan = random_inputs(g, 2, 235);
  nan[0].data<float>()[50] = NAN;
  nan[0].data<float>()[400] = -INFINITY;
  for (const Layout target : all_layout_targets())
    check(g, {random_inputs(g, 2, 230), random_inputs(g, 1, 240), nan}, plan_fusion, 1e-5, 1e-5, target);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g);
  ASSERT_EQ(code.dnnl_convs.size(), 4u);
  EXPECT_EQ(kinds(code.dnnl_convs[0]), (std::vector<Kind>{Kind::HardSwish}));
  EXPECT_EQ(kinds(code.dnnl_convs[1]), (std::vector<Kind>{Kind::HardSwish, Kind::Add}));
  EXPECT_TRUE(code.dnnl_convs[2].post_ops.empty());
  EXPECT_TRUE(code.dnnl_convs[3].post_ops.empty());
  EXPECT_EQ(count(code.source, "[elementwise]"), 2) << code.source;
}

// SiLU (swish), y * sigmoid(y) as ONNX import writes it (Sigmoid, then Mul with y on either
// side), folds as one post-op, also before a residual add and after a per-channel scale (batch
// norm's); not where y has a third reader, the sigmoid's output another reader, or the product
// is not with y. Large |y| (the sigmoid's saturated ends) and NaN / inf inputs (the exact path,
// which follows the reference's form) are checked under every layout target.
TEST(CpuConvPostOps, SwishFoldsAsOnePostOp) {
  Graph g = make_graph({{"x", {"N", 8, 9, 7}}, {"w", {16, 8, 3, 3}}, {"b", {16}}, {"res", {"N", 16, 9, 7}},
                        {"scale", {1, 16, 1, 1}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], w = in[1], b = in[2], res = in[3], scale = in[4];
                         auto conv = [&] { return g.add_op("conv2d", {x, w, b}, {{"padding", V{1, 1}}}); };
                         auto swish = [&](ValueId y, bool y_first) {
                           const ValueId s = g.add_op("sigmoid", {y});
                           return y_first ? g.add_op("mul", {y, s}) : g.add_op("mul", {s, y});
                         };
                         g.set_output("silu", swish(conv(), true));
                         g.set_output("silu_res", g.add_op("add", {swish(conv(), false), res}));
                         g.set_output("scaled", swish(g.add_op("mul", {conv(), scale}), true));
                         const ValueId c3 = conv();
                         g.set_output("c3", c3);
                         g.set_output("silu_read", swish(c3, true));
                         const ValueId c4 = conv(), s4 = g.add_op("sigmoid", {c4});
                         g.set_output("gate", s4);
                         g.set_output("gate_read", g.add_op("mul", {c4, s4}));
                         const ValueId c5 = conv();
                         g.set_output("other", g.add_op("mul", {g.add_op("sigmoid", {c5}), g.add_op("tanh", {c5})}));
                       });
  std::vector<Tensor> big = random_inputs(g, 2, 255);
  for (int64_t c = 0; c < 16; ++c) big[2].data<float>()[c] = static_cast<float>(c % 2 ? 6 * c : -6 * c);  // y to +-90
  std::vector<Tensor> nan = random_inputs(g, 2, 265);
  nan[0].data<float>()[50] = NAN;
  nan[0].data<float>()[400] = -INFINITY;
  nan[0].data<float>()[700] = INFINITY;
  for (const Layout target : all_layout_targets())
    check(g, {random_inputs(g, 2, 250), random_inputs(g, 1, 260), big, nan}, plan_fusion, 1e-5, 1e-5, target);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g);
  ASSERT_EQ(code.dnnl_convs.size(), 6u);
  EXPECT_EQ(kinds(code.dnnl_convs[0]), (std::vector<Kind>{Kind::Swish}));
  EXPECT_EQ(kinds(code.dnnl_convs[1]), (std::vector<Kind>{Kind::Swish, Kind::Add}));
  EXPECT_EQ(kinds(code.dnnl_convs[2]), (std::vector<Kind>{Kind::Mul, Kind::Swish}));
  for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(code.dnnl_convs[i].post_ops.empty()) << i;
}

TEST(CpuConvPostOps, WhatCannotBeFoldedRunsAfter) {
  Graph g = make_graph({{"x", {"N", 3, 8, 8}}, {"w", {5, 3, 3, 3}}, {"row", {8}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], w = in[1], row = in[2];
                         // division by a scalar is not exact as alpha * y: relu folds only after it
                         ValueId c0 = g.add_op("conv2d", {x, w}, {{"padding", V{1, 1}}});
                         g.set_output("div", g.add_op("relu", {g.add_op("div", {c0, scalar(g, 3.0)})}));
                         // the conv output is also a graph output: nothing folds
                         ValueId c1 = g.add_op("conv2d", {x, w}, {{"padding", V{1, 1}}});
                         g.set_output("c1", c1);
                         g.set_output("c1_relu", g.add_op("relu", {c1}));
                         // broadcast along the last axis is neither per channel nor full; y * y reads y twice
                         ValueId c2 = g.add_op("conv2d", {x, w}, {{"padding", V{1, 1}}});
                         ValueId t2 = g.add_op("tanh", {c2});
                         g.set_output("row", g.add_op("mul", {g.add_op("add", {t2, row}), t2}));
                       });
  check(g, {random_inputs(g, 2, 60), random_inputs(g, 1, 70)}, plan_fusion, 1e-4, 1e-5);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g);
  ASSERT_EQ(code.dnnl_convs.size(), 3u);
  EXPECT_TRUE(code.dnnl_convs[0].post_ops.empty());
  EXPECT_TRUE(code.dnnl_convs[1].post_ops.empty());
  EXPECT_EQ(kinds(code.dnnl_convs[2]), (std::vector<Kind>{Kind::Tanh}));  // tanh's output has two readers
  EXPECT_EQ(count(code.source, "[elementwise]"), 3) << code.source;
}

TEST(CpuConvPostOps, ChainIsCutToWhatOneDnnAccepts) {
  Graph g = make_graph({{"x", {2, 3, 6, 6}}, {"w", {4, 3, 3, 3}}, {"pc", {4, 1, 1}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         ValueId c = g.add_op("conv2d", {in[0], in[1]});
                         ValueId t = g.add_op("relu", {g.add_op("add", {c, in[2]})});
                         g.set_output("y", g.add_op("exp", {t}));
                       });
  const std::vector<NodeId> after = {1, 2, 3};
  for (size_t limit = 0; limit <= 3; ++limit) {
    const cpu::ConvEpilogue e =
        cpu::fold_conv_epilogue(g, 0, after, [&](const cpu::ConvEpilogue& c) { return c.post_ops.size() <= limit; });
    EXPECT_EQ(e.nodes.size(), limit);
    EXPECT_EQ(e.post_ops.size(), limit);
    EXPECT_EQ(e.operands.size(), limit >= 1 ? 1u : 0u);
    EXPECT_EQ(e.result, limit == 0 ? g.node(0).outputs[0] : g.node(after[limit - 1]).outputs[0]);
  }
}

TEST(CpuConvPostOps, ResidualFromAnotherConvSharesItsLayout) {
  // conv_b(a) + a, a = conv_a(x): the residual operand is read in the layout of conv_b's output,
  // so both stay channels-last together. conv_c(a) + a as a graph output (NCHW) does not fold
  // the add: its residual is channels-last; the add runs after, reading both blocked buffers.
  // Under every layout target, with 16 channels (which fill 8- and 16-channel blocks) and 8.
  for (const int64_t c : {16, 8}) {
    Graph g = make_graph({{"x", {"N", c, 10, 10}}, {"wa", {c, c, 3, 3}}, {"wb", {c, c, 3, 3}}, {"wc", {4, c, 1, 1}}},
                         [&](Graph& g, std::vector<ValueId>& in) {
                           ValueId a = g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}});
                           ValueId b = g.add_op("conv2d", {a, in[2]}, {{"padding", V{1, 1}}});
                           ValueId r = g.add_op("relu", {g.add_op("add", {b, a})});
                           g.set_output("y", g.add_op("conv2d", {r, in[3]}));
                           g.set_output("out_sum",
                                        g.add_op("add", {g.add_op("conv2d", {a, in[2]}, {{"padding", V{1, 1}}}), a}));
                         });
    for (const Layout target : all_layout_targets()) {
      SCOPED_TRACE("c = " + std::to_string(c) + ", target " + std::string(layout_name(target)));
      // |values| reach ~30 after two 144-term convolutions: float32 rounding of sums in another order.
      check(g, {random_inputs(g, 2, 80), random_inputs(g, 1, 90)}, plan_fusion, 1e-4, 5e-4, target);
      if (!cpu::dnnl_available()) continue;
      const cpu::GeneratedCode code = generated_with_dnnl(g, target);
      ASSERT_EQ(code.dnnl_convs.size(), 4u);
      EXPECT_EQ(kinds(code.dnnl_convs[1]), (std::vector<Kind>{Kind::Add, Kind::Relu}));
      const Layout want = conv_layout_under(target, c);
      EXPECT_EQ(code.dnnl_convs[0].dst_layout, want);
      EXPECT_EQ(code.dnnl_convs[1].dst_layout, want) << "the residual and the result share the layout";
      if (want != Layout::Nchw)
        EXPECT_TRUE(code.dnnl_convs[3].post_ops.empty()) << "an NCHW result cannot take a channels-last residual";
      else
        EXPECT_EQ(kinds(code.dnnl_convs[3]), (std::vector<Kind>{Kind::Add})) << "all NCHW: the residual folds";
    }
  }
}

// A residual that dies at the convolution adding it (a ResNet bottleneck's block input) is
// overwritten in place: the result takes the residual's arena slot and the primitive adds it as a
// sum post-op onto what the buffer holds. Not where the conv reads the residual as its input too
// (it would write what it still reads), nor where a later op reads the residual. Under every
// layout target; and with a NaN or an inf reaching the residual, the exact path (conv alone,
// then the post-ops) must read the residual from before the conv overwrote it.
TEST(CpuConvPostOps, ResidualIsOverwrittenInPlaceWhereItDies) {
  const int64_t c = 32;  // two blocks of 16 channels, four of 8
  Graph g = make_graph({{"x", {"N", c, 8, 8}}, {"wa", {c, c, 1, 1}}, {"wb", {c, c, 3, 3}}, {"wc", {c, c, 1, 1}},
                        {"wd", {4, c, 1, 1}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], wa = in[1], wb = in[2], wc = in[3], wd = in[4];
                         const ValueId a = g.add_op("relu", {g.add_op("conv2d", {x, wa})});
                         const ValueId b = g.add_op("relu", {g.add_op("conv2d", {a, wb}, {{"padding", V{1, 1}}})});
                         // a dies here: in place
                         const ValueId r = g.add_op("relu", {g.add_op("add", {g.add_op("conv2d", {b, wc}), a})});
                         // r is this conv's input as well as its residual: not in place
                         const ValueId s =
                             g.add_op("relu", {g.add_op("add", {g.add_op("conv2d", {r, wb}, {{"padding", V{1, 1}}}), r})});
                         // s is read again after, by the last conv: not in place
                         const ValueId t = g.add_op("add", {g.add_op("conv2d", {b, wc}), s});
                         g.set_output("y", g.add_op("conv2d", {t, wd}));
                         g.set_output("z", g.add_op("conv2d", {s, wd}));
                       });
  auto with = [&](int64_t at, float value) {
    std::vector<Tensor> ins = random_inputs(g, 2, 230);
    if (at >= 0) ins[0].data<float>()[at] = value;
    return ins;
  };
  for (const Layout target : all_layout_targets()) {
    // |values| reach ~100 through four convolutions: float32 rounding of sums in another order.
    check(g, {with(-1, 0), with(77, NAN), with(300, INFINITY), with(-1, 0)}, plan_fusion, 1e-4, 1e-3, target);
    if (!cpu::dnnl_available()) continue;
    const cpu::GeneratedCode code = generated_with_dnnl(g, target);
    ASSERT_EQ(code.dnnl_convs.size(), 7u);
    EXPECT_FALSE(code.dnnl_convs[3].residual_in_place) << "the residual is the conv's input";
    EXPECT_FALSE(code.dnnl_convs[4].residual_in_place) << "the residual is read after";
    int reuses = 0;
    for (const cpu::ArenaSlot& slot : code.arena_slots) reuses += slot.reuses >= 0;
    if (target == Layout::Nchw) continue;  // whether oneDNN's NCHW kernels take the sum is its choice
    EXPECT_EQ(kinds(code.dnnl_convs[2]), (std::vector<Kind>{Kind::Add, Kind::Relu}));
    EXPECT_TRUE(code.dnnl_convs[2].residual_in_place) << code.source;
    EXPECT_EQ(reuses, 1) << code.source;
    EXPECT_EQ(count(code.source, "y holds the residual, added in place"), 1) << code.source;
  }
}

TEST(CpuConvPostOps, ChannelsLastBufferIntoAFusedReduction) {
  // A reduction's fused prologue addresses its operands by one flat index, so it must not read
  // a channel-blocked buffer: relu(conv) then sum, grouped by hand, keeps two passes.
  Graph g = make_graph({{"x", {"N", 3, 7, 7}}, {"w", {8, 3, 3, 3}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId c = g.add_op("conv2d", {in[0], in[1]});                                             // node 0
    g.set_output("s", g.add_op("sum", {g.add_op("relu", {c})}, {{"axes", V{1, 2, 3}}}));        // nodes 1, 2
  });
  const std::string src = check(g, {random_inputs(g, 2, 120), random_inputs(g, 1, 130)}, grouped({{1, 2}}), 1e-4, 1e-5);
  if (!cpu::dnnl_available()) return;
  EXPECT_EQ(count(src, "prologue fused"), 0) << src;
}

TEST(CpuConvPostOps, ReorderedWeightsAreKeptPerValueNotPerAddress) {
  // w * 2 dies at the first conv, so w * 3 may take its arena slot: the second conv must not
  // reuse the weights reordered for the first (the host keeps reordered weights for a call, for
  // batch chunks, keyed by graph value).
  Graph g = make_graph({{"x", {"N", 8, 7, 7}}, {"w", {8, 8, 3, 3}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId c1 = g.add_op("conv2d", {in[0], g.add_op("mul", {in[1], scalar(g, 2.0)})}, {{"padding", V{1, 1}}});
    ValueId c2 = g.add_op("conv2d", {c1, g.add_op("mul", {in[1], scalar(g, 3.0)})}, {{"padding", V{1, 1}}});
    g.set_output("y", c2);
  });
  check(g, {random_inputs(g, 2, 100), random_inputs(g, 3, 110)}, plan_fusion, 1e-4, 1e-4);
  if (!cpu::dnnl_available()) return;
  std::unique_ptr<Executable> exe = cpu::lower_with_plan(g, plan_fusion(g), cpu_options(), false);
  const cpu::ExecutionPlan p = cpu::execution_plan(*exe, {{2, 8, 7, 7}, {8, 8, 3, 3}});
  const Node& conv2 = g.nodes()[3];
  ASSERT_EQ(conv2.op, "conv2d");
  // The two scaled weights share memory (else this test would not test the key).
  std::vector<int64_t> weight_offsets;
  for (size_t i = 0; i < p.requests.size(); ++i)
    if (p.requests[i].bytes == 8 * 8 * 9 * 4) weight_offsets.push_back(p.placement.offsets[i]);
  ASSERT_EQ(weight_offsets.size(), 2u);
  EXPECT_EQ(weight_offsets[0], weight_offsets[1]);
}

namespace {

// The layout pass's report (verbose) states the channel block the CPU backend uses for the
// compile's layout target and the same decisions: 16 channels are nchw16c under nchw16c (an
// AVX-512 machine's choice) and nchw8c under nchw8c (AVX2's); "auto" resolves as the backend does.
TEST(CpuLayoutReport, StatesTheBlockTheBackendUses) {
  Graph g = make_graph({{"x", {2, 3, 9, 9}}, {"w", {16, 3, 3, 3}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId c = g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}});
    g.set_output("y", g.add_op("global_avg_pool2d", {g.add_op("relu", {c})}));
  });
  for (const std::string target : {"auto", "nchw8c", "nchw16c"}) {
    const Layout want = parse_layout_target(target);  // auto: $INGOT_LAYOUT_TARGET, else this machine's
    if (want == Layout::Nchw || want == Layout::Nhwc) continue;  // $INGOT_LAYOUT_TARGET forces no blocks
    const LayoutTarget backend = cpu::cpu_layout_target(true, want);
    PassContext ctx;
    ctx.layout_target = target;
    const PassReport report = choose_layout(g, ctx);
    ASSERT_GE(report.notes.size(), 2u);
    EXPECT_NE(report.notes[0].find(", " + std::to_string(backend.channel_block) + "-channel blocks)"), std::string::npos)
        << report.notes[0];
    std::string reported;
    for (size_t i = 1; i < report.notes.size(); ++i) reported += report.notes[i] + "\n";
    EXPECT_EQ(reported, plan_layouts(g, backend).str(g));
    EXPECT_NE(reported.find(layout_name(want)), std::string::npos) << reported;
  }
  EXPECT_EQ(cpu::cpu_layout_target(true).channel_block, host_channel_block()) << "the default is this machine's";
}

}  // namespace

// Constant weights are reordered into oneDNN's layout once, when the executable is planned, and
// read from there by every call (a parameter is reordered per call, since it may change): the
// results stay right call after call, two convs sharing one constant included.
TEST(CpuConvLayouts, ConstantWeightsAreReorderedOnceForEveryCall) {
  const Tensor w = random_tensor({16, 16, 3, 3}, 140, -0.3, 0.3);
  Graph g = make_graph({{"x", {"N", 16, 8, 8}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const ValueId wc = g.add_constant("w", w);
    ValueId a = g.add_op("relu", {g.add_op("conv2d", {in[0], wc}, {{"padding", V{1, 1}}})});
    g.set_output("y", g.add_op("add", {g.add_op("conv2d", {a, wc}, {{"padding", V{1, 1}}}), a}));
  });
  for (const Layout target : all_layout_targets())
    check(g, {random_inputs(g, 2, 150), random_inputs(g, 2, 160), random_inputs(g, 1, 170)}, plan_fusion, 1e-4, 1e-4,
          target);
}

namespace {

// Convs with the epilogues real networks fold: relu, maximum / minimum with a per-channel operand
// on either side, ReLU6 (minimum(relu(y), 6): relu and a clip), a scalar floor (a clip).
Graph clamped_convs() {
  return make_graph({{"x", {2, 16, 6, 6}}, {"w", {16, 16, 3, 3}}, {"pc", {16, 1, 1}}},
                    [&](Graph& g, std::vector<ValueId>& in) {
                      auto conv = [&] { return g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}}); };
                      g.set_output("relu", g.add_op("relu", {conv()}));
                      g.set_output("max_pc", g.add_op("maximum", {conv(), in[2]}));
                      g.set_output("min_pc", g.add_op("minimum", {in[2], conv()}));
                      g.set_output("relu6", g.add_op("minimum", {g.add_op("relu", {conv()}), scalar(g, 6.0)}));
                      g.set_output("floor", g.add_op("maximum", {conv(), scalar(g, -0.5)}));
                      // ONNX's Clip(0, 6) as PyTorch exports it, either way round, and two clamps
                      // whose ranges do not meet (always 0.5; one clip cannot say it).
                      g.set_output("clip", g.add_op("minimum", {g.add_op("maximum", {conv(), scalar(g, 0.0)}),
                                                                scalar(g, 6.0)}));
                      g.set_output("clip_reversed", g.add_op("maximum", {scalar(g, 0.0),
                                                                         g.add_op("minimum", {conv(), scalar(g, 6.0)})}));
                      g.set_output("disjoint", g.add_op("minimum", {g.add_op("maximum", {conv(), scalar(g, 1.0)}),
                                                                    scalar(g, 0.5)}));
                    });
}

}  // namespace

TEST(CpuConvPostOps, ClampingEpiloguesInEveryLayout) {
  const Graph g = clamped_convs();
  for (const Layout target : all_layout_targets())
    check(g, {random_inputs(g, 2, 180), random_inputs(g, 2, 190)}, plan_fusion, 1e-4, 1e-4, target);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g);
  ASSERT_EQ(code.dnnl_convs.size(), 8u);  // relu, max_pc, min_pc, relu6, floor, clip, clip_reversed, disjoint
  EXPECT_EQ(kinds(code.dnnl_convs[1]), (std::vector<Kind>{Kind::Max}));
  EXPECT_EQ(kinds(code.dnnl_convs[2]), (std::vector<Kind>{Kind::Min}));
  EXPECT_EQ(kinds(code.dnnl_convs[3]), (std::vector<Kind>{Kind::Clip})) << "ReLU6 folds whole, as one clip";
  EXPECT_EQ(code.dnnl_convs[3].post_ops[0].alpha, 0.0f);
  EXPECT_EQ(code.dnnl_convs[3].post_ops[0].beta, 6.0f);
  // A lone floor folds too: the clip's NaN and inf behaviour is the exact path's (conv_post_ops.h).
  EXPECT_EQ(kinds(code.dnnl_convs[4]), (std::vector<Kind>{Kind::Clip}));
  EXPECT_EQ(code.dnnl_convs[4].post_ops[0].alpha, -0.5f);
  for (const size_t clip : {5, 6}) {
    EXPECT_EQ(kinds(code.dnnl_convs[clip]), (std::vector<Kind>{Kind::Clip})) << "a max and a min fold as one clip";
    EXPECT_EQ(code.dnnl_convs[clip].post_ops[0].alpha, 0.0f);
    EXPECT_EQ(code.dnnl_convs[clip].post_ops[0].beta, 6.0f);
  }
  EXPECT_EQ(kinds(code.dnnl_convs[7]), (std::vector<Kind>{Kind::Clip})) << "only the first of two disjoint clamps";
  EXPECT_EQ(code.dnnl_convs[7].post_ops[0].alpha, 1.0f);
}

// The reference (like PyTorch) passes a NaN through relu, maximum and minimum, but oneDNN's
// post-ops implement them with vmaxps / vminps, which return the other operand for a NaN, and
// clamp the arguments of their transcendental ones: a NaN conv output came out as 0 (relu) or
// the operand. With a NaN or an inf in x, the weights, the bias or an operand, the conv now runs
// alone and its post-ops run exactly (conv_post_ops.h): every folded chain passes the NaN on.
TEST(CpuConvPostOps, NaNPassesThroughFoldedEpilogues) {
  const Graph g = clamped_convs();
  std::vector<Tensor> ins = random_inputs(g, 2, 180);
  ins[0].data<float>()[40] = NAN;
  ins[0].data<float>()[300] = INFINITY;
  std::vector<Tensor> nan_operand = random_inputs(g, 2, 185);
  nan_operand[2].data<float>()[3] = NAN;  // a per-channel operand of maximum / minimum
  for (const Layout target : all_layout_targets())
    check(g, {ins, nan_operand, random_inputs(g, 2, 190)}, plan_fusion, 1e-4, 1e-4, target);
}

// Every kind of folded step, with a NaN or an inf in each input a conv reads: x, the weights,
// the bias, a per-channel operand and a residual; and the same executable right again on finite
// inputs afterwards.
TEST(CpuConvPostOps, NonFiniteInputsInEveryFoldedChain) {
  Graph g = make_graph({{"x", {2, 8, 6, 6}}, {"w", {8, 8, 3, 3}}, {"b", {8}}, {"pc", {8, 1, 1}}, {"res", {2, 8, 6, 6}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], w = in[1], b = in[2], pc = in[3], res = in[4];
                         auto conv = [&] { return g.add_op("conv2d", {x, w, b}, {{"padding", V{1, 1}}}); };
                         g.set_output("tanh", g.add_op("tanh", {g.add_op("add", {conv(), pc})}));
                         g.set_output("sigmoid", g.add_op("sigmoid", {conv()}));
                         g.set_output("exp", g.add_op("exp", {g.add_op("mul", {conv(), scalar(g, 0.1)})}));
                         g.set_output("gelu", g.add_op("gelu", {conv()}));
                         g.set_output("residual_relu", g.add_op("relu", {g.add_op("add", {conv(), res})}));
                         g.set_output("max_residual", g.add_op("maximum", {conv(), res}));
                       });
  auto with = [&](size_t input, int64_t at, float value) {
    std::vector<Tensor> ins = random_inputs(g, 2, 210);
    ins[input].data<float>()[at] = value;
    return ins;
  };
  // Weights: centre taps (4: out 0, in 0; 301: out 4, in 1), which every output position
  // multiplies with real input. A non-finite tap that meets only the zero padding is left open:
  // whether 0 x NaN enters the sum there differs between the reference and oneDNN, which skips
  // the padding (as PyTorch's oneDNN path does).
  const std::vector<std::vector<Tensor>> sets = {with(0, 17, NAN),      with(0, 100, INFINITY), with(1, 4, NAN),
                                                 with(1, 301, -INFINITY), with(2, 3, NAN),       with(3, 6, NAN),
                                                 with(4, 250, NAN),     random_inputs(g, 2, 220)};
  for (const Layout target : all_layout_targets()) check(g, sets, plan_fusion, 1e-4, 1e-4, target);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g);
  ASSERT_EQ(code.dnnl_convs.size(), 6u);
  for (const cpu::DnnlConvCall& c : code.dnnl_convs) EXPECT_FALSE(c.post_ops.empty()) << "every chain folds";
}

// Signed zeros reach the output through a reciprocal: rsqrt(relu(y)) is +inf where a conv output
// y is negative, and 1 / (y * c) of a zero y is -inf for c < 0. oneDNN's relu post-op with slope
// 0 was y * 0 in the kernels it picks for a 1x1 output in NCHW (gemm:jit), -0 for a negative y, so
// the first was -inf (program fuzzer seed 320829); a folded mul by a constant or a neg added +0
// after the product, making the second +inf. A relu or a clamp is not folded after a step that
// can make -0 (the reference's relu keeps a -0), and the folded products add -0. Inputs: random,
// and x all zeros (every conv output +0).
TEST(CpuConvPostOps, SignedZerosFollowTheReference) {
  Graph g = make_graph({{"x", {2, 5, 12, 8}}, {"w", {3, 5, 12, 8}}, {"w3", {3, 5, 3, 3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId x = in[0], w = in[1], w3 = in[2];
                         auto whole = [&] { return g.add_op("conv2d", {x, w}); };  // a 1x1 output
                         auto same = [&] { return g.add_op("conv2d", {x, w3}, {{"padding", V{1, 1}}}); };
                         const std::string names[] = {"whole", "same"};
                         for (int k = 0; k < 2; ++k) {
                           auto c = [&] { return k == 0 ? whole() : same(); };
                           const std::string n = names[k];
                           const ValueId r = g.add_op("relu", {c()});
                           g.set_output(n + "_rsqrt_relu", g.add_op("rsqrt", {r}));
                           g.set_output(n + "_relu_sum", g.add_op("sum", {r}));
                           g.set_output(n + "_recip_scaled",
                                        g.add_op("div", {scalar(g, 1.0), g.add_op("mul", {c(), scalar(g, -2.0)})}));
                           g.set_output(n + "_recip_neg", g.add_op("div", {scalar(g, 1.0), g.add_op("neg", {c()})}));
                           g.set_output(n + "_rsqrt_relu_scaled",
                                        g.add_op("rsqrt", {g.add_op("relu", {g.add_op("mul", {c(), scalar(g, -2.0)})})}));
                         }
                       });
  // x > 0 and w < 0: every conv output negative (and far from 0, so the reciprocals are well
  // conditioned); then x = 0: every conv output +0.
  const std::vector<Tensor> negative = {random_tensor({2, 5, 12, 8}, 230, 0.5, 1.0),
                                        random_tensor({3, 5, 12, 8}, 231, -1.0, -0.5),
                                        random_tensor({3, 5, 3, 3}, 232, -1.0, -0.5)};
  std::vector<Tensor> zeros = negative;
  zeros[0] = Tensor::full(DType::Float32, {2, 5, 12, 8}, 0.0);
  for (const Layout target : all_layout_targets()) check(g, {negative, zeros}, plan_fusion, 1e-5, 1e-6, target);
  if (!cpu::dnnl_available()) return;
  const cpu::GeneratedCode code = generated_with_dnnl(g, Layout::Nchw);
  ASSERT_EQ(code.dnnl_convs.size(), 8u);
  EXPECT_EQ(kinds(code.dnnl_convs[0]), (std::vector<Kind>{Kind::Relu})) << "the relu still folds after the sum";
  EXPECT_EQ(kinds(code.dnnl_convs[3]), (std::vector<Kind>{Kind::Linear})) << "not the relu after y * -2";
  EXPECT_TRUE(std::signbit(code.dnnl_convs[1].post_ops[0].beta)) << "y * c + (-0)";
}

TEST(ConvPostOpsExactly, ScanFindsEveryNonFiniteValue) {
  std::vector<float> v(37, 1.5f);
  EXPECT_FALSE(cpu::has_non_finite(v.data(), 37));
  for (const float bad : {NAN, -NAN, INFINITY, -INFINITY}) {
    for (const size_t at : {size_t{0}, size_t{16}, size_t{36}}) {
      std::vector<float> w = v;
      w[at] = bad;
      EXPECT_TRUE(cpu::has_non_finite(w.data(), 37)) << bad << " at " << at;
    }
  }
  v[3] = 3.4e38f;  // the largest finite values are finite
  v[4] = -3.4e38f;
  EXPECT_FALSE(cpu::has_non_finite(v.data(), 37));
  // Past one block of the threaded scan: the first, a middle and the last element.
  std::vector<float> big(3 * 16384 + 5, -2.5f);
  EXPECT_FALSE(cpu::has_non_finite(big.data(), static_cast<int64_t>(big.size())));
  for (const size_t at : {size_t{0}, size_t{20000}, big.size() - 1}) {
    std::vector<float> w = big;
    w[at] = NAN;
    EXPECT_TRUE(cpu::has_non_finite(w.data(), static_cast<int64_t>(w.size()))) << at;
    EXPECT_FALSE(cpu::has_non_finite(w.data(), static_cast<int64_t>(at))) << "only [0, n) is read";
  }
  EXPECT_FALSE(cpu::post_ops_need_finite_inputs({{Kind::Linear}, {Kind::Add}}));
  EXPECT_TRUE(cpu::post_ops_need_finite_inputs({{Kind::Add}, {Kind::Relu}}));
}

namespace {

// The number of convs of `exe` that run a Winograd kernel, for these input shapes.
int winograd_convs(const Executable& exe, const std::vector<Shape>& shapes, std::string* implementations) {
  if (!cpu::dnnl_available()) return 0;
  const cpu::ExecutionPlan p = cpu::execution_plan(exe, shapes);
  int wino = 0;
  for (const std::string& impl : p.conv_implementations) {
    wino += impl.find("wino") != std::string::npos;
    *implementations += impl + "; ";
  }
  return wino;
}

// Whether oneDNN has Winograd kernels for convs under layout target `target`: f32 ones for
// AVX-512 only, in 16-channel blocks (the layout an AVX-512 machine picks, unless
// ONEDNN_MAX_CPU_ISA caps oneDNN), and never for a strided conv.
bool winograd_under(Layout target) { return host_channel_block() == 16 && target == Layout::Nchw16c; }

}  // namespace

// CpuOptions::winograd (the default): 3x3 stride-1 convs with constant weights run oneDNN's
// Winograd kernel where it has one, the others stay direct, and the results stay within float32
// rounding of the reference (a few times a direct conv's error) under every layout target. With
// the weights passed at every call, or winograd off, every conv runs direct: oneDNN's transform
// of the weights into its Winograd layout costs more than the kernel saves.
TEST(CpuConvLayouts, WinogradWhereOneDnnHasItMatchesReference) {
  const Tensor w = random_tensor({32, 32, 3, 3}, 201, -1, 1), w2 = random_tensor({32, 32, 3, 3}, 202, -1, 1);
  auto body = [](Graph& g, ValueId x, ValueId w, ValueId w2) {
    ValueId a = g.add_op("relu", {g.add_op("conv2d", {x, w}, {{"padding", V{1, 1}}})});
    ValueId b = g.add_op("conv2d", {a, w2}, {{"padding", V{1, 1}}, {"stride", V{2, 2}}});
    g.set_output("y", g.add_op("add", {g.add_op("conv2d", {a, w2}, {{"padding", V{1, 1}}}), a}));
    g.set_output("strided", b);
  };
  const Graph constant = make_graph({{"x", {2, 32, 12, 12}}}, [&](Graph& g, std::vector<ValueId>& in) {
    body(g, in[0], g.add_constant("w", w), g.add_constant("w2", w2));
  });
  const Graph passed = make_graph({{"x", {2, 32, 12, 12}}, {"w", {32, 32, 3, 3}}, {"w2", {32, 32, 3, 3}}},
                                  [&](Graph& g, std::vector<ValueId>& in) { body(g, in[0], in[1], in[2]); });
  const Tensor x = random_tensor({2, 32, 12, 12}, 200, -1, 1);
  const std::vector<Tensor> want = ReferenceBackend().lower(constant, {})->run(std::vector<Tensor>{x});
  CpuBackend::CpuOptions direct = cpu_options();
  direct.winograd = false;
  EXPECT_TRUE(cpu_options().winograd) << "Winograd kernels are the default";
  for (const Layout target : all_layout_targets()) {
    SCOPED_TRACE(layout_name(target));
    auto run = [&](const Graph& g, const CpuBackend::CpuOptions& o, const std::vector<Tensor>& ins, int winograd) {
      std::unique_ptr<Executable> exe = cpu::lower_with_plan(g, plan_fusion(g), o, false, "greedy", target);
      const std::vector<Tensor> got = exe->run(ins);
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LT(max_abs_diff(got[i], want[i]), 1e-4 * std::max(1.0, max_abs_diff(want[i], Tensor::full(want[i].dtype(), want[i].shape(), 0.0))));
      std::vector<Shape> shapes;
      for (const Tensor& t : ins) shapes.push_back(t.shape());
      std::string impls;
      EXPECT_EQ(winograd_convs(*exe, shapes, &impls), cpu::dnnl_available() ? winograd : 0) << impls;
    };
    run(constant, cpu_options(), {x}, winograd_under(target) ? 2 : 0);
    run(constant, direct, {x}, 0);
    run(passed, cpu_options(), {x, w, w2}, 0);
  }
}

// A Winograd kernel mixes each input tile with sums and differences: an inf in x came out as NaN
// beside the reference's inf (inf - inf in the transform), and a NaN spread over its whole tile.
// A Winograd conv whose inputs hold a NaN or an inf runs that call with a direct kernel. A
// residual add folds into a Winograd conv as oneDNN's sum post-op (the residual copied into y
// first); NaN and inf in the residual pass through as in the direct kernels. Non-finite values
// in x, the (constant) weights (a centre tap), the bias and the residual, then finite inputs again.
TEST(CpuConvLayouts, WinogradConvsPutNonFiniteValuesWhereTheReferenceDoes) {
  auto graph = [](const Tensor& w) {
    return make_graph({{"x", {2, 16, 8, 8}}, {"b", {16}}, {"res", {2, 16, 8, 8}}}, [&](Graph& g, std::vector<ValueId>& in) {
      const ValueId x = in[0], b = in[1], res = in[2], wc = g.add_constant("w", w);
      auto conv = [&](ValueId v) { return g.add_op("conv2d", {v, wc, b}, {{"padding", V{1, 1}}}); };
      auto pool = [&](ValueId v) {  // reads v in blocks
        return g.add_op("max_pool2d", {v}, {{"kernel", V{2, 2}}, {"stride", V{2, 2}}});
      };
      const ValueId a = g.add_op("relu", {conv(x)});  // a 16-channel-block buffer
      const ValueId c = conv(a);
      g.set_output("plain", pool(c));
      g.set_output("residual", pool(g.add_op("add", {conv(a), a})));
      g.set_output("relu", g.add_op("relu", {conv(a)}));
      g.set_output("residual_relu", g.add_op("relu", {g.add_op("add", {conv(a), res})}));
      // The block's shape: the residual is the conv's own input, in its layout.
      g.set_output("block", g.add_op("relu", {g.add_op("add", {conv(g.add_op("relu", {c})), a})}));
    });
  };
  const Tensor w = random_tensor({16, 16, 3, 3}, 229, -1, 1);
  const Graph g = graph(w);
  auto with = [&](size_t input, int64_t at, float value) {
    std::vector<Tensor> ins = random_inputs(g, 2, 230);
    ins[input].data<float>()[at] = value;
    return ins;
  };
  // x: one value inside an image (every 3x3 window around it reads it).
  const std::vector<std::vector<Tensor>> sets = {with(0, 2 * 64 + 27, INFINITY), with(0, 9 * 64 + 36, -INFINITY),
                                                 with(0, 20 * 64 + 10, NAN),     with(1, 5, NAN),
                                                 with(2, 100, INFINITY),         with(2, 700, NAN),
                                                 random_inputs(g, 2, 240)};
  // Weights: centre taps (4: out 0, in 0; 301: out 2, in 1), see NonFiniteInputsInEveryFoldedChain.
  std::vector<Graph> graphs = {g};
  for (const auto& [at, value] : std::vector<std::pair<int64_t, float>>{{4, INFINITY}, {301, NAN}}) {
    Tensor bad = w.astype(DType::Float32);
    bad.data<float>()[at] = value;
    graphs.push_back(graph(bad));
  }
  for (const Layout target : all_layout_targets()) {
    for (size_t k = 0; k < graphs.size(); ++k)
      check(graphs[k], k == 0 ? sets : std::vector<std::vector<Tensor>>{sets.back()}, plan_fusion, 1e-4, 1e-4, target);
    const std::unique_ptr<Executable> exe = cpu::lower_with_plan(g, plan_fusion(g), cpu_options(), false, "greedy", target);
    // Where oneDNN has Winograd kernels: `c` and the residual conv, which pooling reads in
    // blocks, and the block's conv, whose residual `a` is in blocks (the two residuals fold as
    // sums: with a binary post-op oneDNN refuses Winograd). The others write graph outputs, or
    // add a residual that is one (NCHW), in plain layouts, and the first reads x in NCHW.
    std::string impls;
    EXPECT_EQ(winograd_convs(*exe, {{2, 16, 8, 8}, {16}, {2, 16, 8, 8}}, &impls),
              cpu::dnnl_available() && winograd_under(target) ? 3 : 0)
        << layout_name(target) << ": " << impls;
  }
}

// oneDNN's kernels run at the host's best instruction set unless ONEDNN_MAX_CPU_ISA caps it.
// ctest runs the layout, post-op and attention kernel tests a second time with
// ONEDNN_MAX_CPU_ISA=AVX2 (cpu_tests_onednn_avx2), so an AVX-512 host checks oneDNN's AVX2
// kernels against the reference too; this test tells that run from a plain one.
TEST(CpuIsa, OneDnnReportsTheInstructionSetItRuns) {
  const std::string isa = cpu::dnnl_cpu_isa();
  if (!cpu::dnnl_available()) {
    EXPECT_EQ(isa, "");
    return;
  }
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap != nullptr && std::string(cap) == "AVX2")
    EXPECT_TRUE(isa == "avx2" || isa == "avx" || isa == "sse41") << "capped at AVX2 but running " << isa;
  else
    EXPECT_NE(isa.find("av"), std::string::npos) << isa;  // avx, avx2, avx512_*: any x86-64 host oneDNN serves
  // bfloat16 matmuls go to oneDNN exactly where its kernels run bf16 instructions.
  EXPECT_EQ(cpu::host_gemm_bf16() != nullptr, isa == "avx512_core_bf16" || isa == "avx512_core_amx") << isa;
}
