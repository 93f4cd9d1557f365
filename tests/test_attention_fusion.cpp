// The attention pass (src/compiler/passes/attention_fusion.cpp): attention written out the ways
// BERT's and GPT-2's PyTorch exports and hand-written code write it becomes one
// scaled_dot_product_attention node, with the same results on the reference and CPU backends;
// what does not fit the pattern stays as it is.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "compiler/passes/passes.h"
#include "cpu_test_util.h"
#include "op_test_util.h"

namespace ingot::testing {
namespace {

struct Built {
  Graph g;
  std::vector<Tensor> feed;
};

// q, k, v as [B, H, S, D] (or k as [B, S, H, D] with `raw_k`), written out by `write`.
Built attention(const std::function<ValueId(Graph&, ValueId q, ValueId k, ValueId v)>& write, bool raw_k = false) {
  Built b;
  std::vector<ValueId> in;
  std::vector<ShapeConstraint> cs;
  const Shape heads = {2, 4, 8, 16}, seq_first = {2, 8, 4, 16};
  for (int i = 0; i < 3; ++i) {
    const Shape s = raw_k && i == 1 ? seq_first : heads;
    in.push_back(b.g.add_input(std::string(1, "qkv"[i])));
    b.g.value(in.back()).dtype = DType::Float32;
    cs.push_back({in.back(), template_of(s), "", "test"});
    b.feed.push_back(random_tensor(s, 30 + static_cast<uint64_t>(i), -2, 2));
  }
  b.g.set_output("y", write(b.g, in[0], in[1], in[2]));
  infer_shapes(b.g, cs);
  infer_types(b.g);
  return b;
}

ValueId transpose(Graph& g, ValueId x, std::vector<int64_t> perm) { return g.add_op("transpose", {x}, {{"perm", perm}}); }
ValueId constant(Graph& g, const Tensor& t) { return g.add_constant("c", t); }
ValueId softmax_v(Graph& g, ValueId s, ValueId v) {
  return g.add_op("matmul", {g.add_op("softmax", {s}, {{"axis", int64_t{-1}}}), v});
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& x : g.nodes()) n += x.op == op;
  return n;
}

// Optimized at `medium`: fused (or not), and the CPU backend's result on the optimized graph
// matches the reference interpreter's on the original.
Graph expect_fused(const Built& b, bool fused) {
  Graph opt = b.g;
  CompileOptions o;
  const OptimizeResult r = optimize(opt, o);
  EXPECT_EQ(count_op(opt, "scaled_dot_product_attention"), fused ? 1 : 0) << print_graph(opt);
  EXPECT_EQ(count_op(opt, "softmax"), fused ? 0 : 1) << print_graph(opt);
  const Tensor want = ReferenceBackend().lower(b.g, {})->run(b.feed).at(0);
  const Tensor got_ref = ReferenceBackend().lower(opt, {})->run(b.feed).at(0);
  const Tensor got_cpu = CpuBackend(cpu_test::cpu_options()).lower(opt, o)->run(b.feed).at(0);
  EXPECT_TRUE(allclose(got_ref, want, 1e-5, 1e-6)) << "max |diff| " << max_abs_diff(got_ref, want);
  EXPECT_TRUE(allclose(got_cpu, want, 1e-5, 1e-5)) << "max |diff| " << max_abs_diff(got_cpu, want);
  bool reported = false;
  for (const PassReport& p : r.reports)
    if (p.pass == "attention") reported = p.changes == (fused ? 1 : 0);
  EXPECT_TRUE(reported) << "the pass reports what it matched";
  return opt;
}

const Node& fused_node(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == "scaled_dot_product_attention") return n;
  throw Error("no scaled_dot_product_attention");
}

// [Sq, Sk] with cond[i][j] = j <= i + offset, one entry flipped when `flip` >= 0.
Tensor lower_triangle(int64_t offset, int64_t flip = -1) {
  Tensor t(DType::Bool, {8, 8});
  for (int64_t i = 0; i < 64; ++i) t.data<bool>()[i] = (i % 8 <= i / 8 + offset) != (i == flip);
  return t;
}

TEST(AttentionFusion, BertStyleScaleAndAdditiveMask) {
  Tensor mask(DType::Float32, {2, 1, 1, 8});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = i % 8 >= 6 ? -10000.0f : 0.0f;
  expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                 ValueId s = g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})});
                 s = g.add_op("div", {s, constant(g, Tensor::scalar<float>(4.0f))});
                 return softmax_v(g, g.add_op("add", {s, constant(g, mask)}), v);
               }),
               true);
}

TEST(AttentionFusion, Gpt2StyleCausalWhereWithLowestFillThenMask) {
  Tensor causal(DType::Bool, {1, 1, 8, 8});
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 8; ++j) causal.data<bool>()[i * 8 + j] = j <= i;
  Tensor pad(DType::Float32, {2, 1, 1, 8});
  for (int64_t i = 0; i < pad.numel(); ++i) pad.data<float>()[i] = i == 3 ? std::numeric_limits<float>::lowest() : 0.0f;
  expect_fused(attention(
                   [&](Graph& g, ValueId q, ValueId k, ValueId v) {
                     // k arrives [B, S, H, D]: transposed to [B, H, D, S] in one step, as GPT-2 exports do
                     ValueId s = g.add_op("matmul", {q, transpose(g, k, {0, 2, 3, 1})});
                     s = g.add_op("mul", {constant(g, Tensor::scalar<float>(0.25f)), s});
                     s = g.add_op("where", {constant(g, causal), s,
                                            constant(g, Tensor::scalar<float>(std::numeric_limits<float>::lowest()))});
                     return softmax_v(g, g.add_op("add", {s, constant(g, pad)}), v);
                   },
                   true),
               true);
}

// A constant lower-triangular where becomes the op's causal flag (and offset), so the kernel
// skips the hidden keys; alone with either fill, or beside another mask when its fill is -inf.
TEST(AttentionFusion, ATriangularWhereBecomesTheCausalFlag) {
  const float lowest = std::numeric_limits<float>::lowest(), inf = std::numeric_limits<float>::infinity();
  Tensor pad(DType::Float32, {2, 1, 1, 8});
  for (int64_t i = 0; i < pad.numel(); ++i) pad.data<float>()[i] = i == 3 ? lowest : 0.0f;
  for (const std::tuple<int64_t, float, bool>& c : std::vector<std::tuple<int64_t, float, bool>>{
           {0, lowest, false}, {2, lowest, false}, {0, -inf, false}, {0, -inf, true}, {5, -inf, true}}) {
    // (named copies, not a structured binding: clang 14 cannot capture one in the lambda)
    const int64_t offset = std::get<0>(c);
    const float fill = std::get<1>(c);
    const bool padded = std::get<2>(c);
    SCOPED_TRACE("offset " + std::to_string(offset) + (padded ? ", padded" : ""));
    const Graph opt = expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                                     ValueId s = g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})});
                                     s = g.add_op("where", {constant(g, lower_triangle(offset)), s,
                                                            constant(g, Tensor::scalar<float>(fill))});
                                     if (padded) s = g.add_op("add", {s, constant(g, pad)});
                                     return softmax_v(g, s, v);
                                   }),
                                   true);
    const Node& n = fused_node(opt);
    EXPECT_EQ(n.attrs.get_int("causal", 0), 1);
    EXPECT_EQ(n.attrs.get_int("causal_offset", 0), offset);
    EXPECT_EQ(n.inputs.size(), padded ? 4u : 3u) << print_graph(opt);
    EXPECT_EQ(count_op(opt, "where"), 0) << print_graph(opt);
  }
}

// Left as a mask: a triangle with one entry flipped, one whose first row sees no key (the causal
// flag would give NaN where float32's lowest gives a uniform row), and GPT-2's export (a fill of
// float32's lowest beside a padding mask that may hide a row's visible keys too).
TEST(AttentionFusion, AWhereThatIsNotExactlyCausalStaysAMask) {
  const float lowest = std::numeric_limits<float>::lowest();
  Tensor pad(DType::Float32, {2, 1, 1, 8});
  for (int64_t i = 0; i < pad.numel(); ++i) pad.data<float>()[i] = i % 8 <= 1 ? lowest : 0.0f;
  for (const std::pair<Tensor, bool>& c : std::vector<std::pair<Tensor, bool>>{
           {lower_triangle(0, 17), false}, {lower_triangle(0, 2), false}, {lower_triangle(-1), false},
           {lower_triangle(0), true}}) {
    const Tensor& cond = c.first;
    const bool padded = c.second;
    const Graph opt = expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                                     ValueId s = g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})});
                                     s = g.add_op("where", {constant(g, cond), s, constant(g, Tensor::scalar<float>(lowest))});
                                     if (padded) s = g.add_op("add", {s, constant(g, pad)});
                                     return softmax_v(g, s, v);
                                   }),
                                   true);
    EXPECT_EQ(fused_node(opt).attrs.get_int("causal", 0), 0) << print_graph(opt);
    EXPECT_EQ(fused_node(opt).inputs.size(), 4u);
  }
}

TEST(AttentionFusion, NoScaleNoMaskAndAMinusInfinityWhere) {
  expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                 return softmax_v(g, g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})}), v);
               }),
               true);
  Tensor keep(DType::Bool, {8, 8});
  for (int64_t i = 0; i < keep.numel(); ++i) keep.data<bool>()[i] = i % 3 != 1;
  expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                 ValueId s = g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})});
                 s = g.add_op("where", {constant(g, keep), s,
                                        constant(g, Tensor::scalar<float>(-std::numeric_limits<float>::infinity()))});
                 return softmax_v(g, s, v);
               }),
               true);
}

TEST(AttentionFusion, LeavesWhatDoesNotFitAlone) {
  auto qkt = [](Graph& g, ValueId q, ValueId k) { return g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})}); };
  // The probabilities are an output too: they must be computed anyway.
  Built shared = attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
    const ValueId p = g.add_op("softmax", {qkt(g, q, k)}, {{"axis", int64_t{-1}}});
    g.set_output("p", p);
    return g.add_op("matmul", {p, v});
  });
  expect_fused(shared, false);
  // Softmax over the queries, not the keys.
  expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                 return g.add_op("matmul", {g.add_op("softmax", {qkt(g, q, k)}, {{"axis", int64_t{-2}}}), v});
               }),
               false);
  // A scale per key is no scalar.
  expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                 return softmax_v(g, g.add_op("mul", {qkt(g, q, k), constant(g, random_tensor({8}, 3, 0.5, 1))}), v);
               }),
               false);
  // A where that fills with 0 does not hide anything: not an additive mask.
  Tensor keep(DType::Bool, {8, 8});
  for (int64_t i = 0; i < keep.numel(); ++i) keep.data<bool>()[i] = i % 2 == 0;
  expect_fused(attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
                 return softmax_v(g, g.add_op("where", {constant(g, keep), qkt(g, q, k), constant(g, Tensor::scalar<float>(0.0f))}), v);
               }),
               false);
}

TEST(AttentionFusion, OffBelowMediumAndWhenSwitchedOff) {
  Built b = attention([&](Graph& g, ValueId q, ValueId k, ValueId v) {
    return softmax_v(g, g.add_op("matmul", {q, transpose(g, k, {0, 1, 3, 2})}), v);
  });
  for (const char* level : {"none", "low"}) {
    Graph opt = b.g;
    CompileOptions o;
    o.optimization_level = level;
    optimize(opt, o);
    EXPECT_EQ(count_op(opt, "scaled_dot_product_attention"), 0) << level;
  }
  Graph opt = b.g;
  CompileOptions o;
  o.optimizations["attention"] = false;
  optimize(opt, o);
  EXPECT_EQ(count_op(opt, "scaled_dot_product_attention"), 0);
}

}  // namespace
}  // namespace ingot::testing
