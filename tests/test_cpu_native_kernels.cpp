// The CPU backend's native kernels for the ops gradient rules emit, against the reference: slice
// with any axes and negative steps, slice_scatter, concat along any axis, concat_part,
// take_along_axis, scatter_add and index_add (prelude_movement.cpp), moments over any axes and
// numel (prelude_reduce.cpp), avg_pool2d and its gradient (prelude_pool.cpp), over the element
// types they take, odd, size-1, zero-size and symbolic shapes and sizes past the parallel
// threshold; index errors with the reference's message; and representative training graphs (a
// transformer layer's, the zoo's networks' steps) that run with no reference callback at all.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/autodiff.h"
#include "compiler/shape_inference.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::Contains;
using ingot::testing::error_of;
using ingot::testing::random_tensor;

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
constexpr int64_t kBegin = std::numeric_limits<int64_t>::min();

Tensor random_of(DType t, const Shape& s, uint64_t seed) {
  const Tensor x = random_tensor(s, seed, -60, 60);
  return t == DType::Bool ? x.astype(DType::Int32).astype(DType::Bool) : x.astype(t);
}

int callbacks(const std::string& src) { return count(src, "run_node(ctx->host->ctx"); }

TEST(CpuMovement, SliceSliceScatterConcatAndConcatPartAreNative) {
  struct SliceCase {
    ShapeTemplate x;
    Shape run;
    Attrs attrs;
  };
  const std::vector<SliceCase> slices = {
      {{5, 7}, {5, 7}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{6}}, {"axes", std::vector<int64_t>{1}}}},
      {{4, 6, 9}, {4, 6, 9},
       {{"starts", std::vector<int64_t>{-1, 1}}, {"ends", std::vector<int64_t>{kBegin, 8}},
        {"axes", std::vector<int64_t>{0, 2}}, {"steps", std::vector<int64_t>{-2, 3}}}},
      {{3, 1, 17}, {3, 1, 17},
       {{"starts", std::vector<int64_t>{16}}, {"ends", std::vector<int64_t>{kBegin}}, {"axes", std::vector<int64_t>{-1}},
        {"steps", std::vector<int64_t>{-1}}}},
      {{"N", 8}, {6, 8}, {{"starts", std::vector<int64_t>{-5}}, {"ends", std::vector<int64_t>{kEnd}}}},
      {{4, 0, 3}, {4, 0, 3}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{2}}, {"axes", std::vector<int64_t>{2}}}},
      {{6, 5}, {6, 5}, {{"starts", std::vector<int64_t>{7}}, {"ends", std::vector<int64_t>{9}}}},  // empty: past the end
      {{64, 300, 40}, {64, 300, 40},
       {{"starts", std::vector<int64_t>{2, 0}}, {"ends", std::vector<int64_t>{299, 40}}, {"axes", std::vector<int64_t>{1, 2}},
        {"steps", std::vector<int64_t>{1, 2}}}},
  };
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::Int64, DType::Int8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<Input> inputs;
    std::vector<Tensor> feed;
    for (size_t c = 0; c < slices.size(); ++c) {
      inputs.push_back({"x" + std::to_string(c), slices[c].x, t});
      feed.push_back(random_of(t, slices[c].run, 30 + c));
    }
    inputs.push_back({"a", {3, "M", 5}, t});
    inputs.push_back({"b", {3, 2, 5}, t});
    feed.push_back(random_of(t, {3, 4, 5}, 50));
    feed.push_back(random_of(t, {3, 2, 5}, 51));
    Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
      for (size_t c = 0; c < slices.size(); ++c) {
        const ValueId s = g.add_op("slice", {in[c]}, slices[c].attrs);
        g.set_output("slice" + std::to_string(c), s);
        // The gradient of the slice: the slice written back into zeros of x's shape.
        g.set_output("scatter" + std::to_string(c), g.add_op("slice_scatter", {s, in[c]}, slices[c].attrs));
      }
      const ValueId a = in[slices.size()], b = in[slices.size() + 1];
      const ValueId cat = g.add_op("concat", {a, b, a}, {{"axis", int64_t{1}}});
      g.set_output("concat", cat);
      g.set_output("last_axis", g.add_op("concat", {b, b}, {{"axis", int64_t{-1}}}));
      for (int64_t i = 0; i < 3; ++i)
        g.set_output("part" + std::to_string(i),
                     g.add_op("concat_part", {cat, a, b, a}, {{"axis", int64_t{1}}, {"index", i}}));
    });
    const std::string src = check(g, {feed}, unfused, 0, 0);
    EXPECT_EQ(callbacks(src), 0) << "no reference callback";
    EXPECT_GE(count(src, "ig_slice_copy<"), static_cast<int>(2 * slices.size()));
  }
}

TEST(CpuMovement, TakeAlongAxisAndTheScattersAreNative) {
  struct Case {
    Shape x, idx;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{6, 10}, {6, 1}, 1},          // one class per row: a loss's pick
      {{4, 5, 3}, {4, 7, 3}, 1},     // more picks than rows, repeats adding up
      {{5, 3}, {2, 3}, 0},
      {{3, 0, 2}, {3, 0, 2}, -1},    // empty
      {{512, 300}, {512, 300}, 1},   // past the parallel threshold
  };
  for (DType t : {DType::Float32, DType::Float64}) {
    for (DType it : {DType::Int64, DType::Int32}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " with " + std::string(dtype_name(it)) + " indices");
      std::vector<Input> inputs;
      std::vector<Tensor> feed;
      for (size_t c = 0; c < cases.size(); ++c) {
        const Case& k = cases[c];
        const int64_t ax = k.axis < 0 ? k.axis + static_cast<int64_t>(k.x.size()) : k.axis;
        const int64_t size = k.x[static_cast<size_t>(ax)];
        Tensor idx(DType::Int64, k.idx);
        const Tensor u = random_tensor(k.idx, 60 + c, 0, 1);
        for (int64_t i = 0; i < idx.numel(); ++i)  // negative ones too (from the end)
          idx.data<int64_t>()[i] = static_cast<int64_t>(u.item(i) * 2 * static_cast<double>(size)) - size;
        inputs.push_back({"x" + std::to_string(c), ingot::testing::template_of(k.x), t});
        inputs.push_back({"i" + std::to_string(c), ingot::testing::template_of(k.idx), it});
        inputs.push_back({"u" + std::to_string(c), ingot::testing::template_of(k.idx), t});
        feed.push_back(random_tensor(k.x, 70 + c).astype(t));
        feed.push_back(idx.astype(it));
        feed.push_back(random_tensor(k.idx, 80 + c).astype(t));
      }
      // index_add: the gradient of gather, rows of a [7, 4] table picked by [2, 3] indices.
      inputs.push_back({"table", {7, 4}, t});
      inputs.push_back({"rows", {2, 3}, it});
      inputs.push_back({"grads", {2, 3, 4}, t});
      feed.push_back(random_tensor({7, 4}, 90).astype(t));
      feed.push_back(Tensor::from_vector<int64_t>({0, 6, -1, 3, 0, 0}, {2, 3}).astype(it));
      feed.push_back(random_tensor({2, 3, 4}, 91).astype(t));
      Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
        for (size_t c = 0; c < cases.size(); ++c) {
          const Attrs axis{{"axis", cases[c].axis}};
          g.set_output("take" + std::to_string(c), g.add_op("take_along_axis", {in[3 * c], in[3 * c + 1]}, axis));
          g.set_output("scatter" + std::to_string(c),
                       g.add_op("scatter_add", {in[3 * c], in[3 * c + 1], in[3 * c + 2]}, axis));
        }
        const size_t e = 3 * cases.size();
        g.set_output("index_add", g.add_op("index_add", {in[e], in[e + 1], in[e + 2]}, {{"axis", int64_t{0}}}));
      });
      // The scatters sum in double in the reference's order: the same numbers exactly.
      const std::string src = check(g, {feed}, unfused, 0, 0);
      EXPECT_EQ(callbacks(src), 0) << "no reference callback";
      EXPECT_EQ(count(src, "ig_take_along_axis(ctx, "), static_cast<int>(cases.size()));
      EXPECT_EQ(count(src, "ig_scatter_add<"), static_cast<int>(cases.size()) + 1);
    }
  }
}

TEST(CpuMovement, MomentsNumelArgmaxAndAveragePoolingAreNative) {
  struct Reduce {
    ShapeTemplate x;
    Shape run;
    std::vector<int64_t> axes;
    int64_t keepdims;
  };
  const std::vector<Reduce> reduces = {
      {{8, 6, 5, 7}, {8, 6, 5, 7}, {0, 2, 3}, 1},  // a training batch norm's statistics
      {{4, 9}, {4, 9}, {0}, 0},
      {{3, 1, 17}, {3, 1, 17}, {-1}, 1},            // layer_norm's (contiguous)
      {{"N", 5, 6}, {2, 5, 6}, {0, 2}, 0},
      {{2, 3}, {2, 3}, {}, 0},                      // all
      {{4, 0, 3}, {4, 0, 3}, {1}, 0},               // over nothing: NaN
      {{64, 33, 128}, {64, 33, 128}, {0, 2}, 1},    // past the parallel threshold
  };
  struct Pool {
    Shape x;
    std::vector<int64_t> kernel, stride, padding;
    int64_t include_pad;
  };
  const std::vector<Pool> pools = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, 1},
      {{1, 4, 7, 9}, {3, 3}, {2, 2}, {1, 1}, 1},
      {{2, 2, 7, 9}, {3, 2}, {1, 2}, {1, 1}, 0},    // the divisor: the part inside the input
      {{3, 1, 1, 5}, {1, 3}, {1, 1}, {0, 1}, 0},
      {{8, 16, 33, 33}, {2, 2}, {2, 2}, {0, 0}, 1},
  };
  for (DType t : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<Input> inputs;
    std::vector<Tensor> feed;
    for (size_t c = 0; c < reduces.size(); ++c) {
      inputs.push_back({"r" + std::to_string(c), reduces[c].x, t});
      feed.push_back(random_tensor(reduces[c].run, 100 + c, -3, 5).astype(t));
    }
    {  // argmax: NaN counts as the maximum
      Tensor nan = feed[1].astype(DType::Float64);
      nan.data<double>()[13] = std::numeric_limits<double>::quiet_NaN();
      feed[1] = nan.astype(t);
    }
    for (size_t c = 0; c < pools.size(); ++c) {
      inputs.push_back({"p" + std::to_string(c), ingot::testing::template_of(pools[c].x), t});
      feed.push_back(random_tensor(pools[c].x, 200 + c).astype(t));
    }
    Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
      for (size_t c = 0; c < reduces.size(); ++c) {
        const Attrs a{{"axes", reduces[c].axes}, {"keepdims", reduces[c].keepdims}};
        const std::vector<ValueId> mv = g.add_node("moments", {in[c]}, a, 2);
        g.set_output("mean" + std::to_string(c), mv[0]);
        g.set_output("var" + std::to_string(c), mv[1]);
        g.set_output("count" + std::to_string(c),
                     g.add_op("numel", {in[c]}, {{"axes", reduces[c].axes}, {"dtype", std::string(c % 2 ? "int64" : "float32")}}));
      }
      // argmax over each case's first reduced axis, of the values floored (ties: the first wins).
      for (size_t c = 0; c + 1 < reduces.size(); ++c) {
        if (reduces[c].axes.empty() || numel(reduces[c].run) == 0) continue;  // no maximum: an error
        g.set_output("argmax" + std::to_string(c),
                     g.add_op("argmax", {g.add_op("floor", {in[c]})}, {{"axis", reduces[c].axes[0]}, {"keepdims", reduces[c].keepdims}}));
      }
      for (size_t c = 0; c < pools.size(); ++c) {
        const ValueId x = in[reduces.size() + c];
        const Attrs a{{"kernel", pools[c].kernel}, {"stride", pools[c].stride}, {"padding", pools[c].padding},
                      {"count_include_pad", pools[c].include_pad}};
        const ValueId y = g.add_op("avg_pool2d", {x}, a);
        g.set_output("pool" + std::to_string(c), y);
        g.set_output("pool_grad" + std::to_string(c), g.add_op("avg_pool2d_grad", {g.add_op("sin", {y}), x}, a));
      }
    });
    const std::string src = check(g, {feed}, unfused, 1e-6, 1e-7);
    EXPECT_EQ(callbacks(src), 0) << "no reference callback";
    EXPECT_EQ(count(src, "ig_moments_axes(x0"), 3) << "axes {0, 2, 3} and twice {0, 2}";
  }
}

// Moments over [outer, channels, inner] keeping the channels, with rows of 64 values or more, add
// each row in memory order and combine the rows per channel (ig_moments_rows): values far from
// zero with a small spread, infinities and NaNs come out as the reference's.
TEST(CpuMovement, ChannelMomentsRowByRowMatchTheReference) {
  for (DType t : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = random_tensor({5, 4, 70}, 7, -1, 1).astype(DType::Float64);
    double* p = x.data<double>();
    for (int64_t o = 0; o < 5; ++o)
      for (int64_t j = 0; j < 70; ++j) {
        p[(o * 4 + 0) * 70 + j] += 1e4;  // channel 0: mean 1e4, spread 1
        if (o == 2 && j == 5) p[(o * 4 + 1) * 70 + j] = std::numeric_limits<double>::infinity();  // channel 1: inf, NaN
        if (o == 4 && j == 69) p[(o * 4 + 2) * 70 + j] = std::numeric_limits<double>::quiet_NaN();
      }
    p[(0 * 4 + 3) * 70] = std::numeric_limits<double>::infinity();  // channel 3: +inf and -inf, NaN
    p[(3 * 4 + 3) * 70 + 1] = -std::numeric_limits<double>::infinity();
    const Tensor feed = x.astype(t);
    Graph g = make_graph({{"x", {"N", 4, 70}, t}}, [&](Graph& g, std::vector<ValueId>& in) {
      const std::vector<ValueId> mv = g.add_node("moments", {in[0]}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{1}}}, 2);
      g.set_output("mean", mv[0]);
      g.set_output("var", mv[1]);
    });
    const std::string src = check(g, {{feed}}, unfused, 1e-7, 1e-9);
    EXPECT_EQ(count(src, "ig_moments_axes(x0"), 1);
    const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g, {})->run(std::vector<Tensor>{feed});
    const Tensor mean = got[0].astype(DType::Float64), var = got[1].astype(DType::Float64);
    EXPECT_NEAR(mean.data<double>()[0], 1e4, 1.0);
    EXPECT_TRUE(std::isinf(mean.data<double>()[1]) && std::isnan(var.data<double>()[1]));
    EXPECT_TRUE(std::isnan(mean.data<double>()[2]) && std::isnan(var.data<double>()[2]));
    EXPECT_TRUE(std::isnan(mean.data<double>()[3]) && std::isnan(var.data<double>()[3]));
  }
}

TEST(CpuMovement, AnArgmaxOverNothingIsAnError) {
  Graph g = make_graph({{"x", {4, "K", 3}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", g.add_op("argmax", {in[0]}, {{"axis", int64_t{1}}}));
  });
  const std::vector<Tensor> empty = {random_tensor({4, 0, 3}, 1)};
  EXPECT_TRUE(Contains(error_of([&] { CpuBackend(cpu_options()).lower(g, {})->run(empty); }), "argmax: the axis has size 0"));
  EXPECT_TRUE(Contains(error_of([&] { ReferenceBackend().lower(g, {})->run(empty); }), "has size 0, so there is no maximum"));
}

TEST(CpuMovement, IndicesOutOfRangeAreTheReferencesError) {
  Graph g = make_graph({{"x", {4, 3}}, {"i", {4, 1}, DType::Int64}, {"u", {4, 1}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("take", g.add_op("take_along_axis", {in[0], in[1]}, {{"axis", int64_t{1}}}));
    g.set_output("scatter", g.add_op("scatter_add", {in[0], in[1], in[2]}, {{"axis", int64_t{1}}}));
  });
  const std::unique_ptr<Executable> exe = CpuBackend(cpu_options()).lower(g, {});
  for (int64_t bad : {3, -4}) {
    const std::vector<Tensor> feed = {random_tensor({4, 3}, 1), Tensor::from_vector<int64_t>({0, 1, bad, 2}, {4, 1}),
                                      random_tensor({4, 1}, 2)};
    const std::string want = "gather: index " + std::to_string(bad) + " is out of range for axis 1 of size 3";
    EXPECT_TRUE(Contains(error_of([&] { exe->run(feed); }), want));
    EXPECT_TRUE(Contains(error_of([&] { ReferenceBackend().lower(g, {})->run(feed); }), want));
  }
}

}  // namespace

namespace {

// The ops of the generated code's reference callbacks ("// <op>: reference kernel in the host").
std::vector<std::string> callback_ops(const std::string& src) {
  std::vector<std::string> ops;
  const std::string tail = ": reference kernel in the host";
  for (size_t p = src.find(tail); p != std::string::npos; p = src.find(tail, p + 1)) {
    const size_t start = src.rfind("// ", p) + 3;
    ops.push_back(src.substr(start, p - start));
  }
  return ops;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// A transformer layer's training graph written with the graph API: an embedding lookup, layer
// norms, q/k/v sliced from one projection, causal attention, GELU, log_softmax and the loss's
// pick of each target class, then its backward graph (append_backward): every op of the forward
// and backward runs natively, and the gradients match the reference's.
TEST(CpuNativeCoverage, ATransformerTrainingGraphHasNoReferenceCallback) {
  const int64_t B = 2, S = 20, D = 32, H = 4, V = 50;
  Graph g;
  std::vector<ShapeConstraint> cs;
  auto input = [&](const std::string& name, ShapeTemplate t, DType dt = DType::Float32) {
    const ValueId v = g.add_input(name);
    g.value(v).dtype = dt;
    cs.push_back({v, std::move(t), "", "test"});
    return v;
  };
  const ValueId emb = input("emb", {V, D}), wqkv = input("wqkv", {D, 3 * D}), wo = input("wo", {D, D}),
                w1 = input("w1", {D, 4 * D}), w2 = input("w2", {4 * D, V}), gamma = input("gamma", {D}),
                beta = input("beta", {D}), tok = input("tok", {B, S}, DType::Int64),
                tgt = input("tgt", {B, S, 1}, DType::Int64), seed = input("seed", {});
  auto op = [&](const std::string& name, std::vector<ValueId> in, Attrs a = {}) { return g.add_op(name, in, a); };
  auto heads = [&](ValueId qkv, int64_t part) {
    const ValueId s = op("slice", {qkv}, {{"starts", std::vector<int64_t>{part * D}}, {"ends", std::vector<int64_t>{(part + 1) * D}},
                                          {"axes", std::vector<int64_t>{2}}});
    return op("transpose", {op("reshape", {s}, {{"shape", std::vector<int64_t>{B, S, H, D / H}}})},
              {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  const ValueId x = op("gather", {emb, tok}, {{"axis", int64_t{0}}});
  const ValueId qkv = op("matmul", {op("layer_norm", {x, gamma, beta}), wqkv});
  const ValueId att = op("scaled_dot_product_attention", {heads(qkv, 0), heads(qkv, 1), heads(qkv, 2)},
                         {{"causal", int64_t{1}}});
  const ValueId merged = op("reshape", {op("transpose", {att}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}})},
                            {{"shape", std::vector<int64_t>{B, S, D}}});
  const ValueId h = op("add", {x, op("matmul", {merged, wo})});
  const ValueId logits = op("matmul", {op("gelu", {op("matmul", {op("layer_norm", {h, gamma, beta}), w1})}), w2});
  const ValueId picked = op("take_along_axis", {op("log_softmax", {logits}, {{"axis", int64_t{-1}}}), tgt}, {{"axis", int64_t{-1}}});
  const ValueId loss = op("neg", {op("mean", {picked})});
  g.set_output("loss", loss);
  infer_shapes(g, cs);
  infer_types(g);
  const std::vector<ValueId> grads = append_backward(g, {{loss, seed}}, {emb, wqkv, wo, w1, w2, gamma, beta});
  const std::vector<std::string> names = {"emb", "wqkv", "wo", "w1", "w2", "gamma", "beta"};
  for (size_t i = 0; i < grads.size(); ++i) g.set_output("grad_" + names[i], grads[i]);
  verify(g);
  Tensor tokens(DType::Int64, {B, S}), targets(DType::Int64, {B, S, 1});
  for (int64_t i = 0; i < B * S; ++i) {
    tokens.data<int64_t>()[i] = (i * 7) % V;
    targets.data<int64_t>()[i] = (i * 13 + 5) % V;
  }
  const std::vector<Tensor> feed = {random_tensor({V, D}, 1, -1, 1),     random_tensor({D, 3 * D}, 2, -0.3, 0.3),
                                    random_tensor({D, D}, 3, -0.3, 0.3), random_tensor({D, 4 * D}, 4, -0.3, 0.3),
                                    random_tensor({4 * D, V}, 5, -0.3, 0.3), random_tensor({D}, 6, 0.5, 1.5),
                                    random_tensor({D}, 7, -0.1, 0.1),    tokens,
                                    targets,                             Tensor::scalar<float>(1.0f)};
  const std::string src = check(g, {feed}, unfused, 2e-4, 1e-5);
  EXPECT_TRUE(callback_ops(src).empty()) << "reference callbacks for: " << joined(callback_ops(src));
}

// Training steps of the zoo's networks (forward, backward and SGD update in one graph): no
// reference callback either, the transformer layers' included (rms_norm, attention).
TEST(CpuNativeCoverage, ZooTrainingStepsHaveNoReferenceCallback) {
  Model cnn;
  cnn += Conv2d(8, 3, 1, 1);
  cnn += BatchNorm2d();
  cnn += Relu();
  cnn += BasicBlock(16, 2, true);
  cnn += MaxPool2d(2);
  cnn += AvgPool2d(2);
  cnn += Flatten();
  cnn += Linear(10);
  TransformerEncoderLayerOptions layer;  // LLaMA-like: pre-norm RMSNorm, grouped-query causal attention
  layer.d_model = 16;
  layer.num_heads = 4;
  layer.num_kv_heads = 2;
  layer.ffn_dim = 32;
  layer.norm_first = layer.rms_norm = layer.causal = true;
  Model transformer;
  transformer += TransformerEncoderLayer(layer);
  TransformerEncoderLayerOptions bert;  // post-norm LayerNorm
  bert.d_model = 16;
  bert.num_heads = 2;
  bert.ffn_dim = 24;
  transformer += TransformerEncoderLayer(bert);
  transformer += Flatten();
  transformer += Linear(10);
  const std::vector<std::pair<Model, Shape>> models = {{ExampleMLP(), {8, 784}},
                                                       {ExampleCNN(), {4, 3, 32, 32}},
                                                       {cnn, {4, 3, 16, 16}},
                                                       {transformer, {4, 6, 16}}};
  for (const auto& [model, shape] : models) {
    TrainModel tm(model);
    tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
    CompileOptions o;
    ShapeTemplate t(shape.begin(), shape.end());
    o.shapes = {{"input", t}};
    const TrainStep step = compile_train_step(tm, CpuBackend(cpu_options()), SGD({.lr = 0.1}), o);
    const std::string src = CpuBackend(cpu_options()).lower(step.graph(), o)->source();
    EXPECT_TRUE(callback_ops(src).empty()) << "input " << to_string(shape) << ": reference callbacks for: "
                                           << joined(callback_ops(src));
  }
}

}  // namespace
