// max_pool2d and avg_pool2d as native kernels of the CPU backend against the reference kernels:
// NCHW, and channels-last after a convolution under every layout target (a pool keeps its input's
// layout, so a ResNet stem stays blocked; so does a channel concat, so DenseNet's blocks do);
// padding, strides, odd sizes, NaN, integer and float64 inputs, a symbolic batch.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::random_tensor;
using V = std::vector<int64_t>;

TEST(CpuPooling, MaxPoolIsNativeAndMatchesReference) {
  Graph g = make_graph({{"x", {"N", 5, 9, 7}}, {"xd", {"N", 3, 6, 6}, DType::Float64}, {"xi", {2, 3, 5, 5}, DType::Int32}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("k3s2p1", g.add_op("max_pool2d", {in[0]}, {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}}));
                         g.set_output("k2", g.add_op("max_pool2d", {in[0]}, {{"kernel", V{2, 2}}}));
                         g.set_output("rect", g.add_op("max_pool2d", {in[0]}, {{"kernel", V{3, 2}}, {"stride", V{1, 3}}, {"padding", V{1, 0}}}));
                         g.set_output("f64", g.add_op("max_pool2d", {in[1]}, {{"kernel", V{2, 2}}, {"stride", V{1, 1}}}));
                         g.set_output("i32", g.add_op("max_pool2d", {in[2]}, {{"kernel", V{2, 2}}, {"padding", V{1, 1}}}));
                       });
  auto inputs = [&](int64_t n, uint64_t seed) {
    Tensor x = random_tensor({n, 5, 9, 7}, seed, -1, 1);
    if (n > 0) x.data<float>()[17] = NAN;  // NaN wins its windows, as in the reference
    Tensor xi = random_tensor({2, 3, 5, 5}, seed + 2, -100, 100).astype(DType::Int32);
    return std::vector<Tensor>{x, random_tensor({n, 3, 6, 6}, seed + 1, -1, 1).astype(DType::Float64), xi};
  };
  const std::string src = check(g, {inputs(2, 10), inputs(1, 20), inputs(0, 30)}, plan_fusion);
  EXPECT_EQ(count(src, "ig_max_pool2d("), 5 + 1) << "five native calls and the prelude's definition";
  EXPECT_EQ(count(src, "host->run_node"), 0) << src;
}

TEST(CpuPooling, MaxPoolKeepsAConvolutionsLayout) {
  // ResNet's stem: conv 7x7 stride 2, relu, max pool 3x3 stride 2 padding 1, then a conv reading
  // the pool and an add of the pool (the shortcut): 16 channels fill 8- and 16-channel blocks.
  Graph g = make_graph({{"x", {"N", 3, 23, 23}}, {"w", {16, 3, 7, 7}}, {"w2", {16, 16, 3, 3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         ValueId c = g.add_op("relu", {g.add_op("conv2d", {in[0], in[1]}, {{"stride", V{2, 2}}, {"padding", V{3, 3}}})});
                         ValueId p = g.add_op("max_pool2d", {c}, {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}});
                         g.set_output("y", g.add_op("add", {g.add_op("conv2d", {p, in[2]}, {{"padding", V{1, 1}}}), p}));
                       });
  auto inputs = [&](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 3, 23, 23}, seed), random_tensor({16, 3, 7, 7}, seed + 1),
                               random_tensor({16, 16, 3, 3}, seed + 2)};
  };
  for (const Layout target : all_layout_targets()) {
    check(g, {inputs(2, 40), inputs(1, 50)}, plan_fusion, 1e-4, 1e-4, target);
    if (target == Layout::Nchw) continue;
    const LayoutPlan plan = plan_layouts(g, cpu::cpu_layout_target(true, target));
    const ValueId pooled = g.node(2).outputs[0];
    ASSERT_EQ(g.node(2).op, "max_pool2d");
    EXPECT_EQ(plan.at(pooled), target) << "the pool stays in " << layout_name(target);
    EXPECT_EQ(plan.at(g.node(2).inputs[0]), target);
  }
}

TEST(CpuPooling, MaxPoolGradientIsNativeAndMatchesReference) {
  // dy goes to each window's first maximum: ties (values rounded to a coarse grid repeat), a NaN
  // (the window's maximum from where it is seen; also a window's first element, and -inf beside
  // it), overlapping windows adding into one element, padding on every side, and a row of 75
  // outputs (the kernel finds the maxima of up to 64 windows at once). "xf" runs the windows
  // wholly inside the plane through the vectorized search (ig_window_argmax: 3x3 at strides 2
  // and 1, 2x2 at stride 2), each row's 74-150 windows in chunks of 64, with ties, NaNs (one a
  // window's first element) and an inf inside them; float64 ("xd") takes the 2x2 one too.
  Graph g = make_graph({{"x", {"N", 3, 9, 7}}, {"xd", {2, 2, 6, 6}, DType::Float64}, {"xw", {1, 2, 5, 150}},
                        {"xf", {2, 2, 8, 150}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
    const Attrs a{{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}}, b{{"kernel", V{2, 2}}},
        c{{"kernel", V{2, 3}}, {"stride", V{1, 2}}, {"padding", V{1, 1}}};
    const ValueId y = g.add_op("max_pool2d", {in[0]}, a);
    g.set_output("dx", g.add_op("max_pool2d_grad", {in[0], g.add_op("sin", {y})}, a));
    const ValueId yd = g.add_op("max_pool2d", {in[1]}, b);
    g.set_output("dxd", g.add_op("max_pool2d_grad", {in[1], g.add_op("cos", {yd})}, b));
    const ValueId yw = g.add_op("max_pool2d", {in[2]}, c);
    g.set_output("dxw", g.add_op("max_pool2d_grad", {in[2], g.add_op("sin", {yw})}, c));
    const Attrs s1{{"kernel", V{3, 3}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}};
    for (const auto& [name, at] : {std::pair{"dxf_3s2", a}, std::pair{"dxf_2s2", b}, std::pair{"dxf_3s1", s1}}) {
      const ValueId yf = g.add_op("max_pool2d", {in[3]}, at);
      g.set_output(name, g.add_op("max_pool2d_grad", {in[3], g.add_op("sin", {yf})}, at));
    }
  });
  auto inputs = [&](int64_t n, uint64_t seed) {
    Tensor x = random_tensor({n, 3, 9, 7}, seed, -2, 2);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i] * 2) / 2;  // ties
    if (n > 0) x.data<float>()[23] = NAN;
    Tensor xw = random_tensor({1, 2, 5, 150}, seed + 2, -2, 2);
    float* w = xw.data<float>();
    for (int64_t i = 0; i < xw.numel(); ++i) w[i] = std::round(w[i] * 2) / 2;
    w[0] = NAN;  // the first window's first element
    w[1] = -INFINITY;
    w[150 + 141] = NAN;  // row 1, in a window past the first 64
    w[4 * 150 + 149] = INFINITY;  // the last column: a window over the right padding
    Tensor xf = random_tensor({2, 2, 8, 150}, seed + 3, -2, 2);
    float* f = xf.data<float>();
    for (int64_t i = 0; i < xf.numel(); ++i) f[i] = std::round(f[i] * 2) / 2;
    f[2 * 150 + 40] = NAN;        // inside windows of every pool
    f[3 * 150 + 101] = NAN;       // past the first 64 windows
    f[5 * 150 + 20] = NAN;        // a window's first element: 2x2 stride 2 (window 10), 3x3 stride 1 (21)
    f[5 * 150 + 21] = NAN;        // and 3x3 stride 2 padded (window 11)
    f[5 * 150 + 22] = INFINITY;   // after them in the same windows: the first NaN still wins
    f[1200 + 6 * 150 + 77] = -INFINITY;
    return std::vector<Tensor>{x, random_tensor({2, 2, 6, 6}, seed + 1, -1, 1).astype(DType::Float64), xw, xf};
  };
  const std::string src = check(g, {inputs(2, 60), inputs(1, 70), inputs(0, 80)}, plan_fusion, 1e-6, 1e-6);
  EXPECT_EQ(count(src, "ig_max_pool2d_grad("), 6 + 1) << "six native calls and the prelude's definition";
  EXPECT_EQ(count(src, "host->run_node"), 0) << src;
}

// An input without rows or columns: every window is padding, so the max is -inf (the integer
// type's lowest), and the gradient reaches nothing. The kernel once read the first element of the
// empty window, out of bounds (found by the program fuzzer, seed 50238: 1.26e33 instead of -inf).
TEST(CpuPooling, WindowsOfAnEmptyInputAreAllPadding) {
  Graph g = make_graph({{"x", {2, 3, 4, 0}}, {"xh", {1, 2, 0, 3}}, {"xi", {1, 2, 3, 0}, DType::Int32}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const Attrs a{{"kernel", V{2, 2}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}};
                         const ValueId y = g.add_op("max_pool2d", {in[0]}, a);
                         g.set_output("y", y);
                         g.set_output("yh", g.add_op("max_pool2d", {in[1]}, a));
                         g.set_output("yi", g.add_op("max_pool2d", {in[2]}, a));
                         g.set_output("dx", g.add_op("max_pool2d_grad", {in[0], g.add_op("sin", {y})}, a));
                       });
  check(g, {{random_tensor({2, 3, 4, 0}, 1), random_tensor({1, 2, 0, 3}, 2), random_tensor({1, 2, 3, 0}, 3).astype(DType::Int32)}},
        plan_fusion);
}

// DenseNet's pattern: a stem (conv, max pool), then layers whose outputs join their input along
// the channels (batch norm, relu and conv read each concatenation), then a transition (1x1 conv,
// 2x2 average pool) and one more layer. The concats and the pools keep the convolutions' layout
// under every target whose blocks divide each input's channels (growth 16: whole 8- and
// 16-channel blocks), so no activation crosses layouts; with growth 8, blocks of 8 and NHWC keep
// them, and under 16-channel blocks they go back to NCHW (with the transition conv the pools
// read: a pool reads its input in its own layout). A symbolic batch, and avg_pool2d's
// count_include_pad 0 over padding.
TEST(CpuPooling, ChannelConcatsAndAveragePoolsKeepTheLayout) {
  for (const int64_t growth : {16, 8}) {
    const int64_t c2 = 16 + 2 * growth;
    Graph g = make_graph({{"x", {"N", 3, 19, 19}}, {"w0", {16, 3, 3, 3}}, {"w1", {growth, 16, 3, 3}},
                          {"w2", {growth, 16 + growth, 3, 3}}, {"wt", {16, c2, 1, 1}}, {"w3", {growth, 16, 3, 3}},
                          {"w4", {16, 16 + growth, 1, 1}}, {"w5", {16, 16, 1, 1}}, {"s", {c2}}, {"m", {c2}}, {"v", {c2}}},
                         [&](Graph& g, std::vector<ValueId>& in) {
                           const Attrs same{{"padding", V{1, 1}}};
                           auto join = [&](ValueId a, ValueId b, int64_t axis) { return g.add_op("concat", {a, b}, {{"axis", axis}}); };
                           ValueId stem = g.add_op("relu", {g.add_op("conv2d", {in[0], in[1]}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}})});
                           ValueId x0 = g.add_op("max_pool2d", {stem}, {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}});
                           ValueId c1 = join(x0, g.add_op("conv2d", {g.add_op("relu", {x0}), in[2]}, same), 1);
                           ValueId c2v = join(c1, g.add_op("conv2d", {g.add_op("relu", {c1}), in[3]}, same), -3);
                           ValueId bn = g.add_op("batch_norm", {c2v, in[8], in[8], in[9], in[10]});  // weight = bias = s
                           ValueId t = g.add_op("conv2d", {g.add_op("relu", {bn}), in[4]});
                           ValueId p = g.add_op("avg_pool2d", {t}, {{"kernel", V{2, 2}}, {"stride", V{2, 2}}});
                           ValueId q = g.add_op("avg_pool2d", {t}, {{"kernel", V{3, 3}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}, {"count_include_pad", int64_t{0}}});
                           g.set_output("y", g.add_op("conv2d", {join(p, g.add_op("conv2d", {p, in[5]}, same), 1), in[6]}));
                           g.set_output("z", g.add_op("conv2d", {q, in[7]}));
                         });
    auto inputs = [&](int64_t n, uint64_t seed) {
      return std::vector<Tensor>{random_tensor({n, 3, 19, 19}, seed), random_tensor({16, 3, 3, 3}, seed + 1, -0.4, 0.4),
                                 random_tensor({growth, 16, 3, 3}, seed + 2, -0.2, 0.2), random_tensor({growth, 16 + growth, 3, 3}, seed + 3, -0.2, 0.2),
                                 random_tensor({16, c2, 1, 1}, seed + 4, -0.3, 0.3), random_tensor({growth, 16, 3, 3}, seed + 5, -0.2, 0.2),
                                 random_tensor({16, 16 + growth, 1, 1}, seed + 6, -0.3, 0.3), random_tensor({16, 16, 1, 1}, seed + 7, -0.3, 0.3),
                                 random_tensor({c2}, seed + 8, 0.5, 1.5), random_tensor({c2}, seed + 9),
                                 random_tensor({c2}, seed + 10, 0.5, 1.5)};
    };
    for (const Layout target : all_layout_targets()) {
      SCOPED_TRACE("growth " + std::to_string(growth) + ", layout target " + std::string(layout_name(target)));
      check(g, {inputs(2, 90), inputs(1, 100)}, plan_fusion, 1e-4, 1e-4, target);
      if (target == Layout::Nchw) continue;
      const LayoutPlan plan = plan_layouts(g, cpu::cpu_layout_target(true, target));
      const int block = layout_channel_block(target);
      const Layout want = block == 0 || growth % block == 0 ? target : Layout::Nchw;
      int checked = 0;
      for (const Node& n : g.nodes()) {
        if (n.op != "concat" && n.op != "avg_pool2d" && n.op != "max_pool2d") continue;
        EXPECT_EQ(plan.at(n.outputs[0]), want) << n.op << " (node " << n.id << ")\n" << plan.str(g);
        ++checked;
      }
      EXPECT_EQ(checked, 6) << "three concats, two average pools, a max pool";
    }
  }
}

// NCHW planes (ig_max_pool2d_rows: tasks of 8 output rows, the input rows copied into a buffer
// padded with -inf, 16 output columns at a time): rows of 150 columns and of 1 to 3, planes of
// one row block and of several (a last block of fewer rows), strides 1, 2 (compiled in) and 3,
// padding 0 and 1, ceil_mode, NaNs and runs of equal values, float32, float64 and int32, against
// the reference.
TEST(CpuPooling, WideNchwRowsMatchReference) {
  Graph g = make_graph({{"x", {"N", 2, 5, 150}}, {"xd", {1, 3, 4, 131}, DType::Float64}, {"xi", {1, 2, 3, 140}, DType::Int32},
                        {"tall", {"N", 3, 37, 3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("s1p1", g.add_op("max_pool2d", {in[0]}, {{"kernel", V{3, 3}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}}));
                         g.set_output("s2p1", g.add_op("max_pool2d", {in[0]}, {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}}));
                         g.set_output("s3c", g.add_op("max_pool2d", {in[0]}, {{"kernel", V{3, 3}}, {"stride", V{3, 3}}, {"ceil_mode", int64_t{1}}}));
                         g.set_output("d", g.add_op("max_pool2d", {in[1]}, {{"kernel", V{2, 3}}, {"stride", V{1, 2}}}));
                         g.set_output("i", g.add_op("max_pool2d", {in[2]}, {{"kernel", V{3, 2}}, {"stride", V{2, 1}}, {"padding", V{1, 1}}}));
                         g.set_output("t1", g.add_op("max_pool2d", {in[3]}, {{"kernel", V{3, 3}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}}));
                         g.set_output("t2c", g.add_op("max_pool2d", {in[3]}, {{"kernel", V{2, 2}}, {"stride", V{2, 2}}, {"ceil_mode", int64_t{1}}}));
                         g.set_output("t1x2", g.add_op("max_pool2d", {in[3]}, {{"kernel", V{1, 2}}, {"stride", V{1, 1}}}));
                       });
  auto inputs = [&](int64_t n, uint64_t seed) {
    Tensor x = random_tensor({n, 2, 5, 150}, seed, -2, 2);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i] * 2) / 2;  // ties
    if (n > 0) x.data<float>()[77] = x.data<float>()[400] = x.data<float>()[1499] = NAN;
    Tensor tall = random_tensor({n, 3, 37, 3}, seed + 3, -2, 2);
    if (n > 0) tall.data<float>()[3 * 30 + 2] = NAN;
    return std::vector<Tensor>{x, random_tensor({1, 3, 4, 131}, seed + 1, -1, 1).astype(DType::Float64),
                               random_tensor({1, 2, 3, 140}, seed + 2, -100, 100).astype(DType::Int32), tall};
  };
  check(g, {inputs(2, 110), inputs(1, 120), inputs(0, 130)}, plan_fusion);
  // Without scratch memory (as when its allocation fails) the NCHW rows take the clipped loop.
  check(g, {inputs(2, 110), inputs(1, 120), inputs(0, 130)}, plan_fusion, 1e-5, 1e-6, host_layout(),
        cpu_options_without_scratch());
}

// ceil_mode (GoogLeNet's pools, which its ONNX file carries as ceil_mode = 1): a last window past
// the padded end. A max pool in ceil_mode between convolutions keeps their layout under every
// target (ONNX import once wrote it as a -inf concat along H and W, which sent the network back
// to NCHW), on sizes where the ceil and floor rules differ and where they agree; its gradient,
// native, where the last window holds one row or column of the input.
TEST(CpuPooling, CeilModeKeepsTheLayoutAndMatchesReference) {
  Graph g = make_graph({{"x", {"N", 3, 18, 17}}, {"w", {16, 3, 3, 3}}, {"w2", {16, 16, 1, 1}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const Attrs s2{{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"ceil_mode", int64_t{1}}};
                         const Attrs s1{{"kernel", V{3, 3}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}, {"ceil_mode", int64_t{1}}};
                         ValueId c = g.add_op("relu", {g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}})});
                         ValueId p = g.add_op("max_pool2d", {c}, s2);  // 18 x 17 -> 9 x 8 (floor: 8 x 8)
                         ValueId q = g.add_op("max_pool2d", {p}, s1);
                         ValueId r = g.add_op("max_pool2d", {q}, s2);  // 9 x 8 -> 4 x 4 (floor: 4 x 3)
                         g.set_output("y", g.add_op("relu", {g.add_op("conv2d", {r, in[2]})}));
                       });
  auto inputs = [&](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 3, 18, 17}, seed), random_tensor({16, 3, 3, 3}, seed + 1),
                               random_tensor({16, 16, 1, 1}, seed + 2)};
  };
  for (const Layout target : all_layout_targets()) {
    SCOPED_TRACE(layout_name(target));
    check(g, {inputs(2, 140), inputs(1, 150)}, plan_fusion, 1e-4, 1e-4, target);
    if (target == Layout::Nchw) continue;
    const LayoutPlan plan = plan_layouts(g, cpu::cpu_layout_target(true, target));
    for (const Node& n : g.nodes()) {
      if (n.op != "max_pool2d") continue;
      EXPECT_EQ(plan.at(n.outputs[0]), target) << "each pool stays in the convolutions' layout";
    }
  }
  Graph grad = make_graph({{"x", {2, 3, 8, 7}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const Attrs a{{"kernel", V{3, 3}}, {"stride", V{2, 3}}, {"padding", V{1, 0}}, {"ceil_mode", int64_t{1}}};
    const ValueId y = g.add_op("max_pool2d", {in[0]}, a);  // 8 x 7 -> 5 x 3 (floor: 4 x 2)
    g.set_output("dx", g.add_op("max_pool2d_grad", {in[0], g.add_op("sin", {y})}, a));
  });
  const std::string src = check(grad, {{random_tensor({2, 3, 8, 7}, 160, -2, 2)}}, plan_fusion, 1e-6, 1e-6);
  EXPECT_EQ(count(src, "host->run_node"), 0) << src;
}

// global_avg_pool2d of a convolution's output, in the layout the plan stores it (ig_avg_pool_cl:
// pieces of 16 channels x up to 1,024 pixels, their sums added in pixel order): channel counts of
// whole 16-channel blocks, of 8-channel blocks only and of neither (NHWC, a last piece of 8 or 5
// channels), planes of one piece and of several (37 x 41 = 1,517 pixels, a short last piece),
// batch 1 (the pixels split across threads) and 3, NaN and inf in one image, under every layout
// target, against the reference (which sums each channel in pixel order).
TEST(CpuPooling, GlobalAveragePoolOfEveryLayoutMatchesReference) {
  for (const int64_t c : {32, 24, 40, 5}) {
    Graph g = make_graph({{"x", {"N", 3, 37, 41}}, {"w", {c, 3, 3, 3}}, {"small", {"N", 3, 3, 3}}},
                         [&](Graph& g, std::vector<ValueId>& in) {
                           const ValueId y = g.add_op("conv2d", {in[0], in[1]}, {{"padding", V{1, 1}}});
                           g.set_output("pool", g.add_op("global_avg_pool2d", {g.add_op("relu", {y})}));
                           const ValueId s = g.add_op("conv2d", {in[2], in[1]}, {{"padding", V{1, 1}}});
                           g.set_output("small_pool", g.add_op("global_avg_pool2d", {g.add_op("relu", {s})}));
                         });
    auto inputs = [&](int64_t n, uint64_t seed, bool special) {
      Tensor x = random_tensor({n, 3, 37, 41}, seed);
      if (special) {
        x.data<float>()[1000] = NAN;  // image 0
        x.data<float>()[3 * 37 * 41 + 77] = INFINITY;  // image 1
      }
      return std::vector<Tensor>{x, random_tensor({c, 3, 3, 3}, seed + 1), random_tensor({n, 3, 3, 3}, seed + 2)};
    };
    // Without scratch memory (as when its allocation fails) the pieces run one at a time on one
    // thread, added in the same order.
    for (const Layout target : all_layout_targets())
      for (const bool scratch : {true, false}) {
        SCOPED_TRACE(std::to_string(c) + " channels, layout target " + std::string(layout_name(target)) +
                     (scratch ? "" : ", no scratch"));
        check(g, {inputs(1, 300, false), inputs(3, 310, false), inputs(3, 320, true)}, plan_fusion, 1e-5, 1e-6, target,
              scratch ? cpu_options() : cpu_options_without_scratch());
      }
  }
}
