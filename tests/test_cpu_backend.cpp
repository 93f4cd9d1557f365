// CpuBackend against the ReferenceBackend: every native op and fusion pattern, fallbacks to
// reference kernels, broadcasting, odd / size-1 / zero-size shapes, symbolic batch, the zoo
// models, and toolchain errors. Graphs batch many ops so each test builds one library.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <set>
#include <thread>

#include "backends/cpu/codegen.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/executable.h"
#include "compiler/fusion_plan.h"
#include "compiler/memory_plan.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "cpu_test_util.h"
#include "ir/op_registry.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::Contains;
using ingot::testing::error_of;
using ingot::testing::random_tensor;

namespace {

TEST(CpuBackend, UnaryOpsAllNative) {
  const std::vector<std::string> ops = {"exp",  "log",  "sqrt", "rsqrt", "sin",  "cos",  "tanh",  "sigmoid",
                                        "erf",  "gelu", "neg",  "abs",   "relu", "sign", "floor", "ceil",
                                        "asin", "acos", "atan"};
  Graph g = make_graph({{"x", {3, 37}}}, [&](Graph& g, std::vector<ValueId>& in) {
    for (const std::string& op : ops) g.set_output(op, g.add_op(op, {in[0]}));
    g.set_output("gelu_tanh", g.add_op("gelu", {in[0]}, {{"approximate", std::string("tanh")}}));
    g.set_output("cast_i32", g.add_op("cast", {in[0]}, {{"dtype", std::string("int32")}}));
    g.set_output("cast_f16", g.add_op("cast", {in[0]}, {{"dtype", std::string("float16")}}));
    g.set_output("cast_bool", g.add_op("cast", {in[0]}, {{"dtype", std::string("bool")}}));
    g.set_output("cast_f64", g.add_op("cast", {in[0]}, {{"dtype", std::string("float64")}}));
  });
  Tensor x = random_tensor({3, 37}, 1, -3, 3);
  x.data<float>()[0] = 0.0f;
  const std::string src = check(g, {{x}});
  cpu::GeneratedCode code = cpu::generate_cpp(g, unfused_plan(g), nchw_plan(g), {});
  EXPECT_TRUE(code.fallback_nodes.empty());
  EXPECT_EQ(count(src, "run_node(ctx->host->ctx"), 0);
}

// A float cast to an integer and back is +0 where it truncates to zero, also from (-1, 0): an
// integer has no -0. GCC (-fno-trapping-math) fuses the two conversions into one truncation that
// keeps the sign, so 1 / cast(cast(-0.2, int64), float32) came out -inf, not +inf (found by the
// program fuzzer, seed 60068). Fused into one loop and one op per kernel, each integer type.
TEST(CpuBackend, AFloatCastToAnIntegerAndBackHasNoNegativeZero) {
  for (const char* integer : {"int64", "int32", "int8"}) {
    for (const char* back : {"float32", "float64", "float16"}) {
      SCOPED_TRACE(std::string(integer) + " -> " + back);
      Graph g = make_graph({{"x", {2, 9}}}, [&](Graph& g, std::vector<ValueId>& in) {
        const ValueId i = g.add_op("cast", {in[0]}, {{"dtype", std::string(integer)}});
        const ValueId f = g.add_op("cast", {i}, {{"dtype", std::string(back)}});
        g.set_output("reciprocal", g.add_op("div", {g.add_op("cast", {in[0]}, {{"dtype", std::string(back)}}), f}));
        // an op that reads the integer as a float itself, with no cast back (seed 91044)
        g.set_output("rsqrt", g.add_op("rsqrt", {g.add_op("cast", {in[0]}, {{"dtype", std::string(integer)}})}));
      });
      Tensor x = Tensor::from_vector<float>(
          {-0.2f, -0.99f, -0.5f, 0.3f, -1.5f, 2.7f, -0.0f, 0.0f, -3.9f, -0.7f, 0.7f, -0.01f, 1.0f, -1.0f, 5.5f, -0.6f, 0.1f, -0.4f},
          {2, 9});
      check(g, {{x}});
      check(g, {{x}}, grouped({{0, 1, 2, 3}}));
      const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g, {})->run(std::vector<Tensor>{x});
      EXPECT_EQ(got[0].astype(DType::Float64).to_vector<double>()[0], -std::numeric_limits<double>::infinity())
          << "-0.2 / +0";
      EXPECT_EQ(got[1].astype(DType::Float64).to_vector<double>()[0], std::numeric_limits<double>::infinity())
          << "rsqrt(+0)";
    }
  }
}

TEST(CpuBackend, BinaryOpsBroadcastAndMixedDtypes) {
  const std::vector<std::string> ops = {"add",  "sub",     "mul",     "div",   "pow",       "mod",  "fmod",
                                        "maximum", "minimum", "equal",  "not_equal", "less", "less_equal",
                                        "greater", "greater_equal"};
  Graph g = make_graph({{"a", {4, 1, 5}}, {"b", {3, 1}}, {"i", {3, 5}, DType::Int32}, {"j", {5}, DType::Int32}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         for (const std::string& op : ops) g.set_output(op, g.add_op(op, {in[0], in[1]}));
                         for (const char* op : {"add", "sub", "mul", "maximum", "less", "mod", "fmod"})
                           g.set_output(std::string("int_") + op, g.add_op(op, {in[2], in[3]}));
                         g.set_output("mixed", g.add_op("add", {in[2], in[0]}));
                         g.set_output("int_div", g.add_op("div", {in[2], in[3]}));
                         g.set_output("where", g.add_op("where", {in[2], in[0], in[1]}));
                         g.set_output("scalar_mul", g.add_op("mul", {in[0], scalar(g, 2.5)}));
                       });
  Tensor a = random_tensor({4, 1, 5}, 2, 0.1, 2), b = random_tensor({3, 1}, 3, 0.1, 2);
  Tensor i = random_tensor({3, 5}, 4, -2e9, 2e9, DType::Int32), j = random_tensor({5}, 5, -2e9, 2e9, DType::Int32);
  check(g, {{a, b, i, j}});
}

TEST(CpuBackend, HalfAndBFloat16) {
  Graph g = make_graph({{"h", {5, 7}, DType::Float16}, {"b", {7}, DType::BFloat16}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("exp", g.add_op("exp", {in[0]}));
    g.set_output("hh", g.add_op("mul", {g.add_op("add", {in[0], in[0]}), in[0]}));
    g.set_output("hb", g.add_op("add", {in[0], in[1]}));
    g.set_output("bsig", g.add_op("sigmoid", {in[1]}));
    g.set_output("sum", g.add_op("sum", {in[0]}, {{"axes", std::vector<int64_t>{1}}}));
  });
  Tensor h = random_tensor({5, 7}, 6, -2, 2, DType::Float16), b = random_tensor({7}, 7, -2, 2, DType::BFloat16);
  check(g, {{h, b}}, grouped({{1, 2}}), 1e-3, 1e-3);
}

TEST(CpuBackend, FusedGeluChainIsOneLoop) {
  Graph g = make_graph({{"x", {"N", 129}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId x = in[0];
    ValueId t = g.add_op("div", {x, scalar(g, 1.4142135623730951)});
    t = g.add_op("add", {scalar(g, 1.0), g.add_op("erf", {t})});
    g.set_output("y", g.add_op("mul", {g.add_op("mul", {scalar(g, 0.5), x}), t}));
  });
  // The real plan: `0.5 * x` reads only the input, yet joins the erf chain's loop.
  const std::string src = check(g, {{random_tensor({3, 129}, 8)}, {random_tensor({700, 129}, 9)}}, plan_fusion);
  const std::string kernels = src.substr(src.find("// ---- kernels ----"));
  if (std::getenv("INGOT_CPU_TEST_DUMP")) std::cerr << src;
  EXPECT_EQ(count(kernels, "static int k"), 1) << kernels;
  EXPECT_EQ(count(kernels, "for (int64_t i = 0;"), 1) << kernels;
}

TEST(CpuBackend, FusedGroupsWithBroadcastAndSeveralOutputs) {
  Graph g = make_graph({{"x", {2, 3, 33}}, {"bias", {33}}, {"s", {3, 1}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId b2 = g.add_op("mul", {in[1], scalar(g, 2.0)});   // node 0: [33]
    ValueId y = g.add_op("add", {in[0], b2});                // node 1: [2,3,33]
    ValueId r = g.add_op("relu", {y});                       // node 2
    ValueId z = g.add_op("mul", {r, in[2]});                 // node 3
    g.set_output("b2", b2);
    g.set_output("r", r);
    g.set_output("z", z);
    g.set_output("z_again", z);
    g.set_output("x_passthrough", in[0]);
  });
  check(g, {{random_tensor({2, 3, 33}, 10), random_tensor({33}, 11), random_tensor({3, 1}, 12)}}, grouped({{0, 1, 2, 3}}));
}

TEST(CpuBackend, OddSizeOneAndZeroSizeDims) {
  Graph g = make_graph({{"x", {"A", "B", 1}}, {"y", {1, "B", 7}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId s = g.add_op("add", {in[0], in[1]});
    g.set_output("s", g.add_op("tanh", {s}));
    g.set_output("sum", g.add_op("sum", {s}, {{"axes", std::vector<int64_t>{-1}}}));
    g.set_output("mean", g.add_op("mean", {s}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{1}}}));
    g.set_output("smax", g.add_op("softmax", {s}));
  });
  check(g, {{random_tensor({4, 3, 1}, 13), random_tensor({1, 3, 7}, 14)},
            {random_tensor({1, 1, 1}, 15), random_tensor({1, 1, 7}, 16)},
            {random_tensor({0, 5, 1}, 17), random_tensor({1, 5, 7}, 18)},
            {random_tensor({2, 0, 1}, 19), random_tensor({1, 0, 7}, 20)}},
        grouped({{0, 1}}));
}

TEST(CpuBackend, Reductions) {
  Graph g = make_graph({{"x", {3, 4, 5}}, {"i", {3, 4}, DType::Int32}}, [&](Graph& g, std::vector<ValueId>& in) {
    using V = std::vector<int64_t>;
    for (const char* op : {"sum", "mean", "max", "min"}) {
      g.set_output(std::string(op) + "_last", g.add_op(op, {in[0]}, {{"axes", V{-1}}}));
      g.set_output(std::string(op) + "_first", g.add_op(op, {in[0]}, {{"axes", V{0}}}));
      g.set_output(std::string(op) + "_mid_keep", g.add_op(op, {in[0]}, {{"axes", V{1, 2}}, {"keepdims", int64_t{1}}}));
      g.set_output(std::string(op) + "_all", g.add_op(op, {in[0]}));
      g.set_output(std::string(op) + "_gap", g.add_op(op, {in[0]}, {{"axes", V{0, 2}}}));  // fallback
    }
    g.set_output("isum", g.add_op("sum", {in[1]}, {{"axes", V{1}}}));
    g.set_output("imean", g.add_op("mean", {in[1]}));
    g.set_output("argmax", g.add_op("argmax", {in[0]}, {{"axis", int64_t{1}}}));
    auto m = g.add_node("moments", {in[0]}, {{"axes", V{2}}}, 2);
    g.set_output("mom_mean", m[0]);
    g.set_output("mom_var", m[1]);
    // a reduction with an elementwise prologue: sum((x * 2) ^ 2)
    ValueId sq = g.add_op("mul", {in[0], in[0]});
    g.set_output("sumsq", g.add_op("sum", {g.add_op("mul", {sq, scalar(g, 2.0)})}, {{"axes", V{-1}}}));
  });
  const NodeId n = static_cast<NodeId>(g.nodes().size());
  check(g, {{random_tensor({3, 4, 5}, 21), random_tensor({3, 4}, 22, -100, 100, DType::Int32)}}, grouped({{n - 3, n - 2, n - 1}}));
}

// Reductions whose reduced block has 16 or more elements after it (inner >= 16) run down the
// rows in blocks of 128 columns: inner 300 is two whole blocks and a partial one. NaNs must
// propagate through max/min/sum, and a fused prologue reads a bool mask from a buffer (a relu
// backward's), as does an elementwise `where`.
TEST(CpuBackend, ReductionsDownTheRowsInColumnBlocks) {
  Graph g = make_graph({{"x", {3, 37, 300}}, {"i", {5, 40}, DType::Int32}}, [&](Graph& g, std::vector<ValueId>& in) {
    using V = std::vector<int64_t>;
    g.set_output("sum", g.add_op("sum", {in[0]}, {{"axes", V{1}}}));                 // node 0
    g.set_output("max", g.add_op("max", {in[0]}, {{"axes", V{0, 1}}}));              // node 1
    g.set_output("min", g.add_op("min", {in[0]}, {{"axes", V{1}}}));                 // node 2
    g.set_output("mean", g.add_op("mean", {in[0]}, {{"axes", V{1}}, {"keepdims", int64_t{1}}}));  // node 3
    g.set_output("isum", g.add_op("sum", {in[1]}, {{"axes", V{0}}}));                // node 4
    const ValueId mask = g.add_op("greater", {in[0], scalar(g, 0.25)});             // node 5
    const ValueId kept = g.add_op("where", {mask, in[0], scalar(g, 0.0)});          // node 6
    g.set_output("masked_sum", g.add_op("sum", {kept}, {{"axes", V{0}}}));           // node 7
    g.set_output("masked", g.add_op("where", {mask, in[0], scalar(g, -1.0)}));       // node 8
  });
  Tensor x = random_tensor({3, 37, 300}, 31, -1, 1);
  x.data<float>()[(1 * 37 + 5) * 300 + 7] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[(2 * 37 + 0) * 300 + 299] = std::numeric_limits<float>::quiet_NaN();
  const std::string src =
      check(g, {{x, random_tensor({5, 40}, 32, -1000, 1000, DType::Int32)}}, grouped({{6, 7}}), 1e-5, 1e-5);
  // The mask is read as bytes (a `bool` load keeps GCC from vectorizing the loop).
  EXPECT_GE(count(src, "reinterpret_cast<const unsigned char*>"), 2) << src;
}

// Sums and means along contiguous rows run in sixteen lanes of double (ig_sum_run), a whole
// input of more than 16,384 elements in fixed chunks summed in parallel and added in chunk order:
// the reference's values (a loss's mean, a layer norm gradient's row means; rows of 37 leave a
// tail past the lanes; a NaN propagates; a fused prologue feeds the lanes), and the same bits
// on one thread as on two.
TEST(CpuBackend, ContiguousSumsRunInLanesAndChunks) {
  Graph g = make_graph({{"x", {3, 70001}}, {"r", {1000, 37}}}, [&](Graph& g, std::vector<ValueId>& in) {
    using V = std::vector<int64_t>;
    g.set_output("mean_all", g.add_op("mean", {in[0]}));                               // node 0
    g.set_output("sum_rows", g.add_op("sum", {in[0]}, {{"axes", V{1}}}));              // node 1
    g.set_output("row_means", g.add_op("mean", {in[1]}, {{"axes", V{-1}}}));          // node 2
    g.set_output("sumsq", g.add_op("sum", {g.add_op("mul", {in[0], in[0]})}));         // nodes 3, 4
  });
  Tensor x = random_tensor({3, 70001}, 41, -1, 1), r = random_tensor({1000, 37}, 42, -1, 1);
  r.data<float>()[500 * 37 + 36] = std::numeric_limits<float>::quiet_NaN();
  check(g, {{x, r}}, grouped({{3, 4}}), 1e-6, 1e-6);
  CpuBackend::CpuOptions one = cpu_options(), two = cpu_options();
  one.num_threads = 1;
  two.num_threads = 2;
  const std::vector<Tensor> feed = {x, r};
  const std::vector<Tensor> a = cpu::lower_with_plan(g, grouped({{3, 4}})(g), one, false, "greedy", host_layout())->run(feed);
  const std::vector<Tensor> b = cpu::lower_with_plan(g, grouped({{3, 4}})(g), two, false, "greedy", host_layout())->run(feed);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].nbytes()), 0) << "output " << i << " depends on the threads";
}

TEST(CpuBackend, RowKernels) {
  Graph g = make_graph({{"x", {2, 3, 17}}, {"w", {17}}, {"b", {17}}, {"c", {3}}, {"v", {3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("softmax", g.add_op("softmax", {in[0]}));
                         g.set_output("softmax1", g.add_op("softmax", {in[0]}, {{"axis", int64_t{1}}}));
                         g.set_output("log_softmax", g.add_op("log_softmax", {in[0]}));
                         g.set_output("ln", g.add_op("layer_norm", {in[0], in[1], in[2]}));
                         g.set_output("ln2", g.add_op("layer_norm", {in[0]}, {{"axis", int64_t{1}}}));
                         g.set_output("rms", g.add_op("rms_norm", {in[0], in[1]}));
                         g.set_output("rms2", g.add_op("rms_norm", {in[0]}, {{"axis", int64_t{1}}, {"eps", 0.25}}));
                         g.set_output("bn", g.add_op("batch_norm", {in[0], in[3], in[3], in[3], in[4]}));
                         // row kernel + epilogue
                         ValueId s = g.add_op("softmax", {in[0]});
                         g.set_output("epi", g.add_op("mul", {s, in[1]}));
                       });
  const NodeId n = static_cast<NodeId>(g.nodes().size());
  check(g, {{random_tensor({2, 3, 17}, 23, -3, 3), random_tensor({17}, 24), random_tensor({17}, 25),
             random_tensor({3}, 26), random_tensor({3}, 27, 0.5, 2)}},
        grouped({{n - 2, n - 1}}));
}

// The row kernels reduce a contiguous row in four interleaved streams over its quarters plus a
// tail (ig_row_max, ig_row_sum): every row length from 1 up past a few vector widths, with the
// row's maximum in each quarter and in the tail, a row of equal values, a row holding -inf and
// one holding a NaN, against the reference. Rows 8-10 take layer_norm / rms_norm's float path
// and its way back to double (ig_norm_row_float): a row far from 0 with a spread of a few units
// (its mean must come from the sum of x - x0, not of x: summed as is in float it was off by up
// to 1e-3 of the output), a row of 1e20s (squares past float's range) and a row spread by 1e-22 (squares
// under it).
TEST(CpuBackend, RowKernelsOverEveryRowLengthAndMaxPosition) {
  const std::vector<int64_t> lengths = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64, 67, 130, 1027};
  const int64_t rows = 11;
  std::vector<Input> inputs;  // every length in one graph: one compile
  std::vector<Tensor> feed;
  for (int64_t len : lengths) {
    const std::string n = std::to_string(len);
    inputs.insert(inputs.end(), {{"x" + n, {rows, len}}, {"w" + n, {len}}, {"b" + n, {len}}});
    Tensor x = random_tensor({rows, len}, 40 + len, -4, 4);
    float* p = x.data<float>();
    // Rows 0-3: the maximum in quarter r; row 4: in the last element (the tail when len % 4 !=
    // 0); large enough that softmax overflows unless it is the maximum subtracted. Row 5 all
    // equal, far from 0 (layer_norm's mean must cancel it); row 6 with a -inf; row 7 a NaN.
    for (int64_t r = 0; r < 4; ++r) p[r * len + std::min(len - 1, r * (len / 4) + len / 8)] = 200.0f;
    p[4 * len + len - 1] = 200.0f;
    for (int64_t k = 0; k < len; ++k) p[5 * len + k] = 101.5f;
    p[6 * len + len / 2] = -std::numeric_limits<float>::infinity();
    p[7 * len + len / 3] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t k = 0; k < len; ++k) {
      p[8 * len + k] = 1e4f + 0.75f * p[k];        // row 0's spread (-4..4, one 200) around 1e4
      p[9 * len + k] = 1e20f * (1.0f + p[k] / 8);  // |x - mean| ~1e20: x^2 overflows float
      p[10 * len + k] = 1e-22f * p[k];             // (x - mean)^2 ~1e-44: float denormals
    }
    feed.insert(feed.end(), {x, random_tensor({len}, 7, 0.5, 2), random_tensor({len}, 8)});
  }
  Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
    for (size_t i = 0; i < lengths.size(); ++i) {
      const std::string n = std::to_string(lengths[i]);
      const ValueId x = in[3 * i], w = in[3 * i + 1], b = in[3 * i + 2];
      g.set_output("softmax" + n, g.add_op("softmax", {x}));
      g.set_output("log_softmax" + n, g.add_op("log_softmax", {x}));
      g.set_output("ln" + n, g.add_op("layer_norm", {x, w, b}));
      g.set_output("rms" + n, g.add_op("rms_norm", {x, w}));
    }
  });
  check(g, {feed}, unfused, 1e-5, 1e-6);
}

// transpose is a native kernel (ig_transpose) for every element type, rank and permutation:
// contiguous rows and tiled strided copies, merged and dropped axes, the default (reversed)
// order, negative axes, a symbolic size, an empty tensor and sizes past the parallel threshold;
// never a reference callback.
TEST(CpuBackend, TransposeIsNativeForEveryTypeRankAndPermutation) {
  struct Case {
    ShapeTemplate in;
    std::vector<int64_t> perm;  // empty: no attribute (the axes reversed)
    Shape run;
  };
  const std::vector<Case> cases = {
      {{7}, {0}, {7}},
      {{5, 9}, {1, 0}, {5, 9}},
      {{3, 4, 5}, {}, {3, 4, 5}},
      {{"N", 3, 4, 5}, {0, 2, 1, 3}, {2, 3, 4, 5}},
      {{2, 3, 4, 5}, {3, 1, -4, 2}, {2, 3, 4, 5}},
      {{2, 1, 3, 4, 2}, {4, 2, 0, 3, 1}, {2, 1, 3, 4, 2}},
      {{"M", 4}, {1, 0}, {0, 4}},
      {{64, 33, 40}, {2, 0, 1}, {64, 33, 40}},
      {{2, 128, 4, 64}, {0, 2, 1, 3}, {2, 128, 4, 64}},
      // Axes that stay neighbours merge; size-1 axes drop out: ShuffleNet's channel shuffle,
      // a permutation that only moves size-1 axes (a copy), merged runs on both sides.
      {{1, 2, 116, 14, 14}, {0, 2, 1, 3, 4}, {1, 2, 116, 14, 14}},
      {{3, 1, 4, 1, 5}, {1, 0, 3, 2, 4}, {3, 1, 4, 1, 5}},
      {{2, 3, 1, 5, 7, 2}, {3, 4, 2, 0, 1, 5}, {2, 3, 1, 5, 7, 2}},
      // Tiled: y's last axis strided in x, sizes off the 32-element tile (NCHW -> NHWC, 2-D).
      {{2, 37, 9, 11}, {0, 2, 3, 1}, {2, 37, 9, 11}},
      {{67, 131}, {1, 0}, {67, 131}},
      {{"K", 33, 65}, {2, 1, 0}, {3, 33, 65}},
      {{300, 301}, {1, 0}, {300, 301}},
  };
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                  DType::Int8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<Input> inputs;  // every case in one graph: one compile per type
    std::vector<Tensor> feed;
    for (size_t c = 0; c < cases.size(); ++c) {
      inputs.push_back({"x" + std::to_string(c), cases[c].in, t});
      Tensor x = random_tensor(cases[c].run, 11 + c, -60, 60);
      feed.push_back(t == DType::Bool ? x.astype(DType::Int32).astype(DType::Bool) : x.astype(t));
    }
    Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
      for (size_t c = 0; c < cases.size(); ++c) {
        Attrs attrs;
        if (!cases[c].perm.empty()) attrs.set("perm", cases[c].perm);
        g.set_output("y" + std::to_string(c), g.add_op("transpose", {in[c]}, attrs));
      }
    });
    const std::string src = check(g, {feed}, unfused, 0, 0);
    EXPECT_EQ(count(src, "run_node(ctx->host->ctx"), 0) << "no reference callback";
    EXPECT_EQ(count(src, "ig_transpose(x0, y, "), static_cast<int>(cases.size()) - 1) << "rank 1 is a copy";
  }
}

// gather is a native kernel (ig_gather) for every element type and index type: each axis,
// negative indices, repeated ones, a symbolic size, an empty index set, a size past the parallel
// threshold; an index out of range is the reference's error, not a read out of bounds.
TEST(CpuBackend, GatherIsNativeAndChecksItsIndices) {
  struct Case {
    ShapeTemplate x;
    int64_t axis;
    Shape run;
    std::vector<int64_t> idx;
    Shape idx_shape;
  };
  const std::vector<Case> cases = {
      {{10}, 0, {10}, {3, -1, 0, 3}, {4}},
      {{"N", 6, 5}, 1, {3, 6, 5}, {5, -6, 2, 2, 0, 1}, {2, 3}},
      {{4, 3, 7}, -1, {4, 3, 7}, {6}, {1}},
      {{4, 3, 7}, 0, {4, 3, 7}, {}, {0}},
      {{300, 600}, 0, {300, 600}, {299, 0, 150, -2}, {4}},
  };
  for (DType t : {DType::Float32, DType::Float16, DType::Int64, DType::Bool}) {
    for (DType it : {DType::Int64, DType::Int32}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " with " + std::string(dtype_name(it)) + " indices");
      std::vector<Input> inputs;
      std::vector<Tensor> feed;
      for (size_t c = 0; c < cases.size(); ++c) {
        inputs.push_back({"x" + std::to_string(c), cases[c].x, t});
        inputs.push_back({"i" + std::to_string(c), ingot::testing::template_of(cases[c].idx_shape), it});
        Tensor x = random_tensor(cases[c].run, 21 + c, -60, 60);
        feed.push_back(t == DType::Bool ? x.astype(DType::Int32).astype(DType::Bool) : x.astype(t));
        feed.push_back(Tensor::from_vector<int64_t>(cases[c].idx, cases[c].idx_shape).astype(it));
      }
      Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
        for (size_t c = 0; c < cases.size(); ++c)
          g.set_output("y" + std::to_string(c),
                       g.add_op("gather", {in[2 * c], in[2 * c + 1]}, {{"axis", cases[c].axis}}));
      });
      const std::string src = check(g, {feed}, unfused, 0, 0);
      EXPECT_EQ(count(src, "run_node(ctx->host->ctx"), 0) << "no reference callback";
      EXPECT_EQ(count(src, "ig_gather(ctx, "), static_cast<int>(cases.size()));
    }
  }
  // Out of range, either way: the reference's message from the generated code.
  Graph g = make_graph({{"x", {4, 3}}, {"i", {2}, DType::Int64}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", g.add_op("gather", {in[0], in[1]}, {{"axis", int64_t{1}}}));
  });
  const std::unique_ptr<Executable> exe = CpuBackend(cpu_options()).lower(g, {});
  for (int64_t bad : {3, -4}) {
    const std::vector<Tensor> feed = {random_tensor({4, 3}, 1), Tensor::from_vector<int64_t>({0, bad}, {2})};
    const std::string want = "gather: index " + std::to_string(bad) + " is out of range for axis 1 of size 3";
    EXPECT_TRUE(Contains(error_of([&] { exe->run(feed); }), want));
    EXPECT_TRUE(Contains(error_of([&] { ReferenceBackend().lower(g, {})->run(feed); }), want));
  }
}

TEST(CpuBackend, MatmulAndConv) {
  Graph g = make_graph({{"a", {5, 7}}, {"b", {7, 3}}, {"a3", {2, 5, 7}}, {"b3", {2, 7, 3}}, {"a4", {2, 1, 5, 7}},
                        {"b4", {3, 7, 4}}, {"v", {7}}, {"ad", {4, 6}, DType::Float64}, {"bd", {6, 2}, DType::Float64},
                        {"ai", {2, 3}, DType::Int32}, {"bi", {3, 2}, DType::Int32}, {"x", {2, 4, 9, 8}},
                        {"w", {6, 2, 3, 3}}, {"cb", {6}}, {"bias", {3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("mm", g.add_op("matmul", {in[0], in[1]}));
                         g.set_output("mm_fold", g.add_op("matmul", {in[2], in[1]}));
                         g.set_output("mm_batch", g.add_op("matmul", {in[2], in[3]}));
                         g.set_output("mm_bcast", g.add_op("matmul", {in[4], in[5]}));
                         g.set_output("mv", g.add_op("matmul", {in[0], in[6]}));
                         g.set_output("vm", g.add_op("matmul", {in[6], in[1]}));
                         g.set_output("vv", g.add_op("matmul", {in[6], in[6]}));
                         g.set_output("mm_f64", g.add_op("matmul", {in[7], in[8]}));
                         g.set_output("mm_int", g.add_op("matmul", {in[9], in[10]}));  // fallback
                         g.set_output("conv", g.add_op("conv2d", {in[11], in[12], in[13]},
                                                       {{"stride", std::vector<int64_t>{2, 1}},
                                                        {"padding", std::vector<int64_t>{1, 2}},
                                                        {"dilation", std::vector<int64_t>{1, 2}},
                                                        {"groups", int64_t{2}}}));
                         g.set_output("conv_nobias", g.add_op("conv2d", {in[11], g.add_op("reshape", {in[12]}, {{"shape", std::vector<int64_t>{6, 2, 3, 3}}})},
                                                              {{"groups", int64_t{2}}}));
                         // dense + epilogue: relu(a @ b + bias)
                         ValueId mm = g.add_op("matmul", {in[0], in[1]});
                         g.set_output("dense_epi", g.add_op("relu", {g.add_op("add", {mm, in[14]})}));
                       });
  std::vector<Tensor> ins;
  for (ValueId id : g.leaves_of(ValueKind::Input)) {
    const Value& v = g.value(id);
    ins.push_back(random_tensor(to_shape(v.shape), static_cast<uint64_t>(30 + id), -1, 1, v.dtype));
  }
  const NodeId n = static_cast<NodeId>(g.nodes().size());
  check(g, {ins}, grouped({{n - 3, n - 2, n - 1}}), 1e-4, 1e-5);
  cpu::GeneratedCode code = cpu::generate_cpp(g, unfused_plan(g), nchw_plan(g), {});
  ASSERT_EQ(code.fallback_nodes.size(), 1u);
  EXPECT_EQ(g.node(code.fallback_nodes[0]).op, "matmul");
}

TEST(CpuBackend, FallbackOpsRunThroughReferenceKernels) {
  Graph g = make_graph({{"x", {2, 3, 4}}, {"idx", {2}, DType::Int64}}, [&](Graph& g, std::vector<ValueId>& in) {
    using V = std::vector<int64_t>;
    ValueId t = g.add_op("transpose", {in[0]}, {{"perm", V{2, 0, 1}}});
    g.set_output("t", g.add_op("exp", {t}));
    g.set_output("cat", g.add_op("concat", {in[0], in[0]}, {{"axis", int64_t{1}}}));
    g.set_output("gather", g.add_op("gather", {in[0], in[1]}, {{"axis", int64_t{1}}}));
    g.set_output("slice", g.add_op("slice", {in[0]}, {{"starts", V{1}}, {"ends", V{4}}, {"axes", V{2}}}));
    g.set_output("rand", g.add_op("add", {in[0], g.add_op("random_uniform", {}, {{"shape", V{2, 3, 4}}, {"seed", int64_t{3}}})}));
    g.set_output("drop", g.add_op("dropout", {in[0]}, {{"p", 0.5}, {"seed", int64_t{1}}, {"training", int64_t{1}}}));
  });
  check(g, {{random_tensor({2, 3, 4}, 40), Tensor::from_vector<int64_t>({2, 0}, {2})}});
}

TEST(CpuBackend, ExampleMLPSymbolicBatch) {
  CompileOptions o;
  o.shapes = {{"input", {"N", 784}}};
  PhysicalModel ref = compile(ExampleMLP(), ReferenceBackend(), o);
  PhysicalModel cpu = compile(ExampleMLP(), CpuBackend(cpu_options()), o);
  TensorMap params = ref.randomize_params(0);
  for (int64_t n : {1, 7, 64}) {
    TensorMap in = {{"input", random_tensor({n, 784}, static_cast<uint64_t>(n))}};
    TensorMap want = ref.evaluate(params, in), got = cpu.evaluate(params, in);
    for (const auto& [name, t] : want) expect_same(got.at(name), t, name + " batch " + std::to_string(n), 1e-4, 1e-5);
  }
}

// An unknown dim broadcast against a size is 'that size or 1' until the run (the reference
// broadcasts either way); compiled code reads it whole, so a run where it is 1 stops with a clear
// error (before, [N, M] + [4] run with a [3, 1] input read it as [3, 4]: wrong values, past its
// end). The same for attention's mask and matmul's batch dims.
TEST(CpuBackend, AnUnknownDimThatBroadcastsAtRunTimeIsAnErrorNotAWrongResult) {
  const Graph g = make_graph({{"a", {"N", "M"}}, {"b", {4}}, {"c", {"K"}}, {"q", {2, 3, 5}}, {"k", {2, 6, 5}},
                              {"mask", {"P", "Q"}}, {"x", {"B", 3, 5}}, {"w", {2, 5, 4}}},
                             [](Graph& g, std::vector<ValueId>& in) {
                               g.set_output("sum", g.add_op("add", {in[0], in[1]}));
                               g.set_output("wide", g.add_op("broadcast_to", {in[2]}, {{"shape", std::vector<int64_t>{2, 4}}}));
                               g.set_output("att", g.add_op("scaled_dot_product_attention", {in[3], in[4], in[4], in[5]}));
                               g.set_output("mm", g.add_op("matmul", {in[6], in[7]}));
                             });
  EXPECT_EQ(to_string(g.value(g.leaves()[0]).shape), "[N, M]");
  const Tensor b = random_tensor({4}, 1), c = random_tensor({4}, 2), q = random_tensor({2, 3, 5}, 3),
               k = random_tensor({2, 6, 5}, 4), mask = random_tensor({3, 6}, 5), x = random_tensor({2, 3, 5}, 6),
               w = random_tensor({2, 5, 4}, 7);
  // broadcast_to runs the reference's kernel (not native), which broadcasts a [1] too.
  check(g, {{random_tensor({3, 4}, 8), b, c, q, k, mask, x, w}, {random_tensor({1, 4}, 9), b, c, q, k, mask, x, w},
            {random_tensor({3, 4}, 8), b, random_tensor({1}, 11), q, k, mask, x, w}});
  std::unique_ptr<Executable> ref = ReferenceBackend().lower(g, {});
  std::unique_ptr<Executable> cpu = CpuBackend(cpu_options()).lower(g, {});
  auto refused = [&](const std::string& what, const std::vector<Tensor>& feed) {
    SCOPED_TRACE(what);
    EXPECT_NO_THROW(ref->run(feed)) << "the reference broadcasts";
    try {
      cpu->run(feed);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("compiled as unknown is 1 at run time"), std::string::npos) << e.what();
    }
  };
  refused("add", {random_tensor({3, 1}, 10), b, c, q, k, mask, x, w});
  refused("mask", {random_tensor({3, 4}, 10), b, c, q, k, random_tensor({1, 6}, 12), x, w});
  refused("matmul", {random_tensor({3, 4}, 10), b, c, q, k, mask, random_tensor({1, 3, 5}, 13), w});
}

TEST(CpuBackend, ExampleCNNSmallImages) {
  for (bool inference : {true, false}) {
    CompileOptions o;
    o.shapes = {{"input", {"N", 3, 12, 10}}};
    o.inference = inference;
    PhysicalModel ref = compile(ExampleCNN(), ReferenceBackend(), o);
    PhysicalModel cpu = compile(ExampleCNN(), CpuBackend(cpu_options()), o);
    TensorMap params = ref.randomize_params(1);
    for (int64_t n : {1, 3}) {
      TensorMap in = {{"input", random_tensor({n, 3, 12, 10}, static_cast<uint64_t>(50 + n))}};
      TensorMap want = ref.evaluate(params, in), got = cpu.evaluate(params, in);
      for (const auto& [name, t] : want) expect_same(got.at(name), t, name, 1e-4, 1e-4);
    }
  }
}

// User names reach the generated code only in comments (inputs, outputs, dimension symbols,
// scopes). Each name here would, pasted raw, splice the next line of code into its comment (a
// trailing backslash, "?\?/" under -trigraphs), end a block comment, or start a new line: the
// library must still build and compute the right outputs.
TEST(CpuBackend, UserNamesNeverEscapeComments) {
  Graph g = make_graph({{"x */ int evil; /*\nmore\\", {"N\\", 4}}, {"b?\?/", {4}}, {"c\\\r\n", {4}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("y */ #error \\\nnope\\", g.add_op("relu", {in[0]}, {}, "scope*/\n#error x\\"));
                         g.set_output("z?\?/", g.add_op("add", {in[0], in[1]}, {}, "s2?\?/"));
                         g.set_output("w\\", g.add_op("mul", {in[1], in[2]}));
                       });
  const std::string src = check(g, {{random_tensor({3, 4}, 60), random_tensor({4}, 61), random_tensor({4}, 62)}});
  EXPECT_EQ(count(src, "*/ int evil"), 0);
  EXPECT_EQ(count(src, "?\?/"), 0);
  for (size_t p = src.find("#error"); p != std::string::npos; p = src.find("#error", p + 1))
    EXPECT_NE(src.rfind("//", p), std::string::npos);
  for (size_t p = src.find("\\\n"); p != std::string::npos; p = src.find("\\\n", p + 1))
    EXPECT_EQ(src.substr(src.rfind('\n', p) + 1, p - src.rfind('\n', p)).find("//"), std::string::npos)
        << "a comment ends in a backslash";
}

TEST(CpuBackend, MissingCompilerIsAClearError) {
  CpuBackend::CpuOptions o = cpu_options();
  o.compiler = "/nonexistent/c++";
  CompileOptions co;
  co.shapes = {{"input", {2, 784}}};
  try {
    compile(ExampleMLP(), CpuBackend(o), co);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/nonexistent/c++"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ReferenceBackend()"), std::string::npos) << msg;
  }
}

TEST(CpuBackend, BuildFailureShowsCommandAndDiagnostics) {
  CpuBackend::CpuOptions o = cpu_options();
  o.extra_flags = {"-DINGOT_TEST_BREAK=1", "-include", "/nonexistent/header.h"};
  Graph g = make_graph({{"x", {4}}}, [&](Graph& g, std::vector<ValueId>& in) { g.set_output("y", g.add_op("neg", {in[0]})); });
  try {
    CpuBackend(o).lower(g, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("-DINGOT_TEST_BREAK=1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("header.h"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ReferenceBackend()"), std::string::npos) << msg;
  }
}

}  // namespace

// ---- oneDNN conv2d, the channels-last layout around it, and the arena -------------------------

namespace {

// Lowers `g` with the fusion pass's plan and checks the arena plan for its (static) input shapes.
cpu::ExecutionPlan checked_plan(const Graph& g, const std::vector<Tensor>& inputs, const std::string& strategy = "greedy",
                                Layout layout = host_layout()) {
  std::unique_ptr<Executable> cpu = cpu::lower_with_plan(g, plan_fusion(g), cpu_options(), false, strategy, layout);
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  cpu::ExecutionPlan p = cpu::execution_plan(*cpu, shapes);
  check_buffer_placement(p.requests, p.placement);
  return p;
}

int inplace_count(const cpu::ExecutionPlan& p) {
  int n = 0;
  for (const BufferRequest& r : p.requests) n += r.reuses >= 0;
  return n;
}

}  // namespace

TEST(CpuBackend, ConvThroughOneDnnAllConfigurations) {
  using V = std::vector<int64_t>;
  Graph g = make_graph({{"x", {"N", 4, 9, 8}}, {"w", {6, 2, 3, 3}}, {"b", {6}}, {"w1", {5, 4, 1, 1}}, {"w2", {3, 4, 2, 3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("grouped", g.add_op("conv2d", {in[0], in[1], in[2]},
                                                          {{"stride", V{2, 1}}, {"padding", V{1, 2}},
                                                           {"dilation", V{1, 2}}, {"groups", int64_t{2}}}));
                         g.set_output("pointwise", g.add_op("conv2d", {in[0], in[3]}));
                         g.set_output("strided_nobias", g.add_op("conv2d", {in[0], in[4]},
                                                                 {{"stride", V{3, 1}}, {"padding", V{1, 0}}}));
                         // stride 2 without padding drops the last row (9 -> 4): oneDNN runs it
                         // with right padding 0 (its floor division gives the same size)
                         g.set_output("drops_row", g.add_op("conv2d", {in[0], in[3]}, {{"stride", V{2, 2}}}));
                         // stride 3 over 8 columns with a 3-wide kernel: the last 2 columns unread
                         g.set_output("drops_two", g.add_op("conv2d", {in[0], in[4]}, {{"stride", V{3, 3}}}));
                       });
  auto inputs = [&](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 4, 9, 8}, seed), random_tensor({6, 2, 3, 3}, seed + 1),
                               random_tensor({6}, seed + 2), random_tensor({5, 4, 1, 1}, seed + 3),
                               random_tensor({3, 4, 2, 3}, seed + 4)};
  };
  const std::string src = check(g, {inputs(2, 70), inputs(1, 80), inputs(0, 90), inputs(3, 100)}, unfused, 1e-4, 1e-5);
  if (cpu::dnnl_available()) {
    EXPECT_EQ(count(src, "ctx->host->conv2d("), 5) << src;
  }
}

TEST(CpuBackend, ChannelsLastChainMatchesReference) {
  // The layout plan's buffers through every kernel that handles them: conv (oneDNN) ->
  // batch_norm -> relu -> conv -> global_avg_pool2d, elementwise loops reading a channels-last
  // buffer with broadcasting into an NCHW output, between two channels-last buffers, and mixing
  // one with an NCHW input. Under each forced layout target: 16 channels fill 8- and 16-channel
  // blocks, 8 channels only 8-channel ones (NHWC under nchw16c), 6 channels neither (NHWC).
  for (const int64_t c1 : {16, 8, 6}) {
    const int64_t c2 = 2 * c1;
    Graph g = make_graph({{"x", {"N", 3, 11, 11}}, {"w1", {c1, 3, 3, 3}}, {"b1", {c1}}, {"g", {c1}}, {"m", {c1}},
                          {"v", {c1}}, {"w2", {c2, c1, 3, 3}}, {"cb", {c2, 1, 1}}, {"s", {1, c1, 1, 1}},
                          {"full", {"N", c1, 11, 11}}},
                         [&](Graph& g, std::vector<ValueId>& in) {
                           ValueId c = g.add_op("conv2d", {in[0], in[1], in[2]}, {{"padding", std::vector<int64_t>{1, 1}}});
                           ValueId bn = g.add_op("batch_norm", {c, in[3], in[3], in[4], in[5]});
                           ValueId r = g.add_op("relu", {bn});
                           g.set_output("pool", g.add_op("global_avg_pool2d", {g.add_op("conv2d", {r, in[6]})}));
                           g.set_output("strided", g.add_op("conv2d", {r, in[6]}, {{"stride", std::vector<int64_t>{2, 2}}}));
                           g.set_output("bias", g.add_op("add", {g.add_op("conv2d", {r, in[6]}), in[7]}));
                           g.set_output("scaled", g.add_op("tanh", {g.add_op("mul", {r, in[8]})}));
                           ValueId both = g.add_op("sub", {r, bn});
                           g.set_output("pool2", g.add_op("global_avg_pool2d", {g.add_op("conv2d", {both, in[6]})}));
                           ValueId mixed = g.add_op("add", {r, in[9]});
                           g.set_output("mixed", g.add_op("conv2d", {mixed, in[6]}));
                         });
    auto inputs = [&](int64_t n, uint64_t seed) {
      return std::vector<Tensor>{random_tensor({n, 3, 11, 11}, seed),   random_tensor({c1, 3, 3, 3}, seed + 1),
                                 random_tensor({c1}, seed + 2),         random_tensor({c1}, seed + 3, 0.5, 1.5),
                                 random_tensor({c1}, seed + 4),         random_tensor({c1}, seed + 5, 0.5, 2),
                                 random_tensor({c2, c1, 3, 3}, seed + 6), random_tensor({c2, 1, 1}, seed + 7),
                                 random_tensor({1, c1, 1, 1}, seed + 8), random_tensor({n, c1, 11, 11}, seed + 9)};
    };
    for (const Layout target : all_layout_targets()) {
      SCOPED_TRACE("c1 = " + std::to_string(c1) + ", target " + std::string(layout_name(target)));
      check(g, {inputs(2, 110), inputs(1, 120)}, plan_fusion, 1e-4, 1e-5, target);
      if (!cpu::dnnl_available() || target == Layout::Nchw) continue;
      const cpu::ExecutionPlan p = checked_plan(g, inputs(2, 110), "greedy", target);
      const std::set<ValueId> moved(p.channels_last_values.begin(), p.channels_last_values.end());
      const LayoutPlan layouts = plan_layouts(g, cpu::cpu_layout_target(true, target));
      const Layout want = conv_layout_under(target, c1);
      const Node& bn = g.node(1);
      EXPECT_EQ(layouts.at(bn.inputs[0]), want) << "conv";
      EXPECT_EQ(layouts.at(bn.outputs[0]), want) << "batch_norm";
      EXPECT_EQ(layouts.at(g.node(2).outputs[0]), want) << "relu";
      EXPECT_TRUE(moved.count(bn.outputs[0]));
      for (const auto& [name, v] : g.outputs()) EXPECT_FALSE(moved.count(v)) << name;
      const ValueId mixed = g.node(g.value(g.outputs().back().second).producer).inputs[0];
      EXPECT_EQ(layouts.at(mixed), Layout::Nchw) << "an add of a channels-last buffer and an NCHW input";
    }
  }
}

TEST(CpuBackend, ArenaPlanIsValidAndRunsInPlace) {
  // exp -> (tanh | sum) -> ...: with the unfused plan every value needs a buffer.
  Graph g = make_graph({{"x", {"N", 37}}, {"y", {"N", 37}}}, [&](Graph& g, std::vector<ValueId>& in) {
    ValueId a = g.add_op("exp", {in[0]});
    ValueId b = g.add_op("tanh", {a});           // in place over a
    ValueId c = g.add_op("mul", {b, in[1]});     // in place over b
    ValueId s = g.add_op("softmax", {c});        // a row kernel: never in place
    ValueId d = g.add_op("add", {s, c});         // over s or c
    g.set_output("out", g.add_op("sum", {d}, {{"axes", std::vector<int64_t>{1}}}));
  });
  auto inputs = [](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 37}, seed), random_tensor({n, 37}, seed + 1)};
  };
  check(g, {inputs(5, 130), inputs(1, 131), inputs(0, 132), inputs(300, 133)});
  std::unique_ptr<Executable> exe = cpu::lower_with_plan(g, unfused_plan(g), cpu_options(), false);
  const cpu::ExecutionPlan p = cpu::execution_plan(*exe, {{5, 37}, {5, 37}});
  check_buffer_placement(p.requests, p.placement);
  EXPECT_EQ(p.requests.size(), 5u);
  EXPECT_EQ(inplace_count(p), 3);
  // 5 x 37 floats, 64-byte aligned: tanh/mul run in a's buffer; softmax and add need a second.
  EXPECT_EQ(p.placement.arena_bytes, 2 * 768);
  // memory_planning = none: every buffer its own region, nothing in place, same results.
  std::unique_ptr<Executable> none = cpu::lower_with_plan(g, unfused_plan(g), cpu_options(), false, "none");
  const cpu::ExecutionPlan pn = cpu::execution_plan(*none, {{5, 37}, {5, 37}});
  check_buffer_placement(pn.requests, pn.placement);
  EXPECT_EQ(pn.placement.arena_bytes, 5 * 768);
  EXPECT_EQ(inplace_count(pn), 0);
  const std::vector<Tensor> in = inputs(5, 134);
  EXPECT_TRUE(allclose(exe->run(in)[0], none->run(in)[0], 1e-6, 1e-6));
}

TEST(CpuBackend, ConcurrentCallsGetTheirOwnArena) {
  CompileOptions o;
  o.shapes = {{"input", {"N", 3, 12, 10}}};
  o.inference = true;
  PhysicalModel ref = compile(ExampleCNN(), ReferenceBackend(), o);
  PhysicalModel cpu = compile(ExampleCNN(), CpuBackend(cpu_options()), o);
  const TensorMap params = ref.randomize_params(2);
  std::vector<TensorMap> ins, want;
  for (int t = 0; t < 4; ++t) {
    ins.push_back({{"input", random_tensor({1 + t % 2, 3, 12, 10}, static_cast<uint64_t>(140 + t))}});
    want.push_back(ref.evaluate(params, ins.back()));
  }
  std::vector<std::thread> threads;
  std::vector<int> bad(ins.size(), 0);
  for (size_t t = 0; t < ins.size(); ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        const TensorMap got = cpu.evaluate(params, ins[t]);
        for (const auto& [name, w] : want[t]) bad[t] += !allclose(got.at(name), w, 1e-4, 1e-4);
      }
    });
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < ins.size(); ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST(CpuBackend, ReductionPrologueFusesIntoOnePass) {
  using V = std::vector<int64_t>;
  Graph g = make_graph({{"x", {"N", 5, 7}}, {"y", {"N", 5, 7}}, {"b", {7}}, {"h", {"N", 5, 7}, DType::Float16}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         // fused: sum(exp(x - y) * 2) over the last axis, max over axes 1..2
                         ValueId d = g.add_op("exp", {g.add_op("sub", {in[0], in[1]})});   // nodes 0, 1
                         g.set_output("sum", g.add_op("sum", {g.add_op("mul", {d, scalar(g, 2.0)})}, {{"axes", V{-1}}}));
                         ValueId sq = g.add_op("mul", {in[0], in[0]});                      // node 4
                         g.set_output("max", g.add_op("max", {g.add_op("neg", {sq})}, {{"axes", V{1, 2}}}));
                         // not fused: the prologue broadcasts b
                         g.set_output("bcast", g.add_op("mean", {g.add_op("add", {in[0], in[2]})}, {{"axes", V{0}}}));
                         // not fused: the prologue's value is also an output
                         ValueId t = g.add_op("tanh", {in[1]});                               // node 9
                         g.set_output("t", t);
                         g.set_output("min", g.add_op("min", {t}, {{"axes", V{2}}}));
                         // fused, float16 input computed in float
                         g.set_output("hsum", g.add_op("sum", {g.add_op("abs", {in[3]})}));   // nodes 11, 12
                       });
  auto inputs = [](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 5, 7}, seed), random_tensor({n, 5, 7}, seed + 1),
                               random_tensor({7}, seed + 2), random_tensor({n, 5, 7}, seed + 3, -2, 2, DType::Float16)};
  };
  const PlanFn plan = grouped({{0, 1, 2, 3}, {4, 5, 6}, {7, 8}, {9, 10}, {11, 12}});
  const std::string src = check(g, {inputs(3, 150), inputs(1, 151), inputs(0, 152)}, plan, 1e-4, 1e-4);
  EXPECT_EQ(count(src, "prologue fused"), 3) << src;
  EXPECT_EQ(count(src, "ig_reduce_fn<"), 3 + 1);  // + the prelude's ig_reduce wrapper
}

// A layer_norm / rms_norm whose input only its elementwise producers compute (a post-norm
// transformer's bias and residual adds after the matmul) takes them as a prologue (the fusion
// plan's take_norm_prologues), and the CPU backend computes each row in a thread's buffer and
// normalizes it there: the sum is never written out. Checked against the reference under the
// real fusion plan and every layout target, with a symbolic batch of 3, 1 and 0 rows.
TEST(CpuBackend, NormPrologueComputesEachRowInPlace) {
  Graph g = make_graph({{"x", {"N", 5, 16}}, {"w", {16, 24}}, {"b", {24}}, {"r", {"N", 5, 24}}, {"gamma", {24}},
                        {"beta", {24}}, {"c", {5, 24}}, {"d", {"N", 5, 1}}, {"z", {"N", 5, 24}, DType::Float64}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         // fused: layer_norm(x @ w + b + r), the bias a row operand
                         ValueId h = g.add_op("add", {g.add_op("add", {g.add_op("matmul", {in[0], in[1]}), in[2]}), in[3]});
                         g.set_output("post_norm", g.add_op("layer_norm", {h, in[4], in[5]}, {{"axis", int64_t{-1}}}));
                         // fused: rms_norm over the last two axes of r * 0.5 + c, c of the normalized dims
                         ValueId s = g.add_op("add", {g.add_op("mul", {in[3], scalar(g, 0.5)}), in[6]});
                         g.set_output("rms", g.add_op("rms_norm", {s, in[6]}, {{"axis", int64_t{1}}, {"eps", 1e-3}}));
                         // fused: float64, no weight or bias
                         g.set_output("f64", g.add_op("layer_norm", {g.add_op("tanh", {in[8]})}));
                         // not fused: d broadcasts along the rows (one value per row)
                         g.set_output("per_row", g.add_op("layer_norm", {g.add_op("sub", {in[3], in[7]})}));
                         // not fused: the sum is read again after the norm (pre-norm's residual stream)
                         ValueId t = g.add_op("add", {in[3], in[3]});
                         g.set_output("stream", g.add_op("add", {t, g.add_op("layer_norm", {t})}));
                       });
  const FusionPlan plan = plan_fusion(g);
  const std::string groups = plan.str(g);
  EXPECT_NE(groups.find("[row-kernel]: add add layer_norm"), std::string::npos) << groups;
  EXPECT_NE(groups.find("[row-kernel]: mul add rms_norm"), std::string::npos) << groups;
  EXPECT_NE(groups.find("[row-kernel]: tanh layer_norm"), std::string::npos) << groups;
  auto inputs = [](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 5, 16}, seed),     random_tensor({16, 24}, seed + 1),
                               random_tensor({24}, seed + 2),        random_tensor({n, 5, 24}, seed + 3),
                               random_tensor({24}, seed + 4),        random_tensor({24}, seed + 5),
                               random_tensor({5, 24}, seed + 6),     random_tensor({n, 5, 1}, seed + 7),
                               random_tensor({n, 5, 24}, seed + 8, -2, 2, DType::Float64)};
  };
  // Under every layout target (a transformer's values stay NCHW, so the fusion is the same).
  for (Layout layout : all_layout_targets()) {
    const std::string src = check(g, {inputs(3, 160), inputs(1, 161), inputs(0, 162)},
                                  [](const Graph& g) { return plan_fusion(g); }, 1e-5, 1e-5, layout);
    EXPECT_EQ(count(src, "[row-kernel, prologue fused]"), 3) << src;
    EXPECT_EQ(count(src, "ig_trailing_norm_rows<"), 3) << src;
  }
}
