// Attention as a transformer writes it: the projections split into heads by a transpose
// ([outer, S, H, D] -> [outer, H, S, D]) before scaled_dot_product_attention and merged back by
// another after it. The CPU backend folds those transposes into the attention kernels (the
// kernels read and write each head's rows H x D apart: fold_transposes, fold_head_swaps in
// codegen_plan.cpp): checked against the reference interpreter forward and backward, with masks,
// causal offsets, grouped-query heads, ranks 3 and 4, past the kernels' blocks and through the
// double-precision path a non-finite v takes; and the transposes it must not fold (another reader,
// a graph output) still materialized and right.
#include <gtest/gtest.h>

#include <limits>

#include "autodiff_test_util.h"
#include "cpu_test_util.h"

namespace ingot::testing {
namespace {

struct HeadCase {
  Shape q, k, v;  // as the projections give them: [outer..., S, H, D]
  std::optional<Tensor> mask;
  Attrs attrs;
};

// The permutation swapping the sequence and head axes (the last but one and the last but two).
std::vector<int64_t> head_swap(size_t rank) {
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[rank - 2], perm[rank - 3]);
  return perm;
}

struct Variant {
  bool grad = false;
  bool q_read_elsewhere = false;   // q's split is also an exp's input: it must be written out
  bool result_is_output = false;   // the attention's own result is a graph output too
};

// Inputs x0.. shaped as `feed` (q, k, v, [dy], [mask]); every operand but the mask goes through the
// head split; each result through the merge ([..., S, H, D] -> [..., S, H x D]) to an output.
Graph head_split_graph(const HeadCase& c, const std::vector<Tensor>& feed, const Variant& var) {
  Graph g;
  std::vector<ShapeConstraint> cs;
  const std::vector<ValueId> in = add_inputs_like(g, feed, cs);
  const size_t r = c.q.size(), operands = var.grad ? 4 : 3;
  std::vector<ValueId> args;
  for (size_t i = 0; i < in.size(); ++i)
    args.push_back(i < operands ? g.add_op("transpose", {in[i]}, {{"perm", head_swap(r)}}) : in[i]);
  std::vector<ValueId> results;
  if (var.grad) {
    const std::vector<ValueId> grads = g.add_node("scaled_dot_product_attention_grad", args, c.attrs, 4);
    results.assign(grads.begin(), grads.begin() + 3);
  } else {
    results.push_back(g.add_op("scaled_dot_product_attention", args, c.attrs));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ValueId merged = g.add_op("transpose", {results[i]}, {{"perm", head_swap(r)}});
    // Shaped as q (y: with v's width; dq), k (dk) or v (dv), heads merged.
    const Shape& split = feed[var.grad ? i : 0].shape();
    Shape heads_merged(split.begin(), split.end() - 2);
    heads_merged.push_back(split[r - 2] * (var.grad ? split[r - 1] : c.v[r - 1]));
    g.set_output("r" + std::to_string(i), g.add_op("reshape", {merged}, {{"shape", heads_merged}}));
    if (var.result_is_output) g.set_output("raw" + std::to_string(i), results[i]);
  }
  if (var.q_read_elsewhere) g.set_output("exp_q", g.add_op("exp", {args[0]}));
  infer_shapes(g, cs);
  infer_types(g);
  return g;
}

std::vector<HeadCase> cases() {
  Tensor late(DType::Bool, {130, 520});  // rows that see nothing in the first key block
  for (int64_t i = 0; i < 130; ++i)
    for (int64_t j = 0; j < 520; ++j) late.data<bool>()[i * 520 + j] = j >= 2 * i;
  return {
      {{2, 6, 3, 8}, {2, 6, 3, 8}, {2, 6, 3, 8}, std::nullopt, {{"causal", int64_t{1}}}},
      {{1, 6, 4, 5}, {1, 9, 2, 5}, {1, 9, 2, 7}, std::nullopt, {{"scale", 0.25}}},  // grouped-query heads
      {{2, 4, 2, 3}, {2, 5, 2, 3}, {2, 5, 2, 2}, rnd({2, 1, 4, 5}, 4), {{"causal", int64_t{1}}, {"causal_offset", int64_t{1}}}},
      {{6, 3, 4}, {7, 3, 4}, {7, 3, 4}, rnd({3, 6, 7}, 5), {}},  // rank 3: [S, H, D]
      {{1, 150, 2, 64}, {1, 600, 2, 64}, {1, 600, 2, 48}, rnd({1, 1, 150, 600}, 8),
       {{"causal", int64_t{1}}, {"causal_offset", int64_t{450}}}},  // past the kernels' blocks
      {{1, 130, 2, 40}, {1, 520, 2, 40}, {1, 520, 2, 40}, late, {}},
  };
}

std::vector<Tensor> feed_for(const HeadCase& c, bool grad, DType t, uint64_t seed) {
  std::vector<Tensor> feed = {rnd(c.q, seed, -2, 2).astype(t), rnd(c.k, seed + 1, -2, 2).astype(t),
                              rnd(c.v, seed + 2, -2, 2).astype(t)};
  if (grad) {
    Shape dy = c.q;
    dy.back() = c.v.back();
    feed.push_back(rnd(dy, seed + 3, -1, 1).astype(t));
  }
  if (c.mask) feed.push_back(c.mask->dtype() == DType::Bool ? *c.mask : c.mask->astype(t));
  return feed;
}

TEST(AttentionHeads, TheHeadSplitAndMergeFoldIntoTheKernels) {
  const std::vector<HeadCase> all = cases();
  for (size_t n = 0; n < all.size(); ++n)
    for (DType t : {DType::Float32, DType::Float64})
      for (bool grad : {false, true}) {
        SCOPED_TRACE("case " + std::to_string(n) + ", " + std::string(dtype_name(t)) + (grad ? ", backward" : ", forward"));
        const std::vector<Tensor> feed = feed_for(all[n], grad, t, 10 * n + 1);
        const std::string src =
            cpu_test::check(head_split_graph(all[n], feed, {grad}), {feed}, cpu_test::unfused, 2e-5, 2e-5);
        EXPECT_EQ(cpu_test::count(src, "ig_transpose(x0"), 0) << "no transpose is written out";
        EXPECT_EQ(cpu_test::count(src, grad ? "lead, mstride, 127);" : "lead, mstride, 15);"), 1)
            << "every operand and result read or written through its head split";
      }
}

// A transpose another op reads, and an attention result that is a graph output, are written out
// as before; the other operands still fold.
TEST(AttentionHeads, SplitsWithOtherReadersAndResultsThatAreOutputsAreWrittenOut) {
  const HeadCase c = cases()[1];
  for (bool grad : {false, true}) {
    SCOPED_TRACE(grad ? "backward" : "forward");
    const std::vector<Tensor> feed = feed_for(c, grad, DType::Float32, 77);
    const std::string shared =
        cpu_test::check(head_split_graph(c, feed, {grad, true, false}), {feed}, cpu_test::unfused, 2e-5, 2e-5);
    EXPECT_EQ(cpu_test::count(shared, "lead, mstride, " + std::to_string(grad ? 126 : 14) + ");"), 1)
        << "q's split is materialized, the rest fold";
    const std::string exposed =
        cpu_test::check(head_split_graph(c, feed, {grad, false, true}), {feed}, cpu_test::unfused, 2e-5, 2e-5);
    EXPECT_EQ(cpu_test::count(exposed, "lead, mstride, " + std::to_string(grad ? 15 : 7) + ");"), 1)
        << "results that are graph outputs are written [.., H, S, D]";
  }
}

// An inf in v sends float32 attention to double (ig_attention_widened), whose copies read and
// write through the same head-split views.
TEST(AttentionHeads, TheDoublePrecisionPathReadsAndWritesThroughTheViews) {
  const HeadCase c = cases()[1];
  for (bool grad : {false, true}) {
    SCOPED_TRACE(grad ? "backward" : "forward");
    std::vector<Tensor> feed = feed_for(c, grad, DType::Float64, 91);
    feed[2].data<double>()[5] = std::numeric_limits<double>::infinity();
    for (Tensor& f : feed) f = f.astype(DType::Float32);
    const std::string src =
        cpu_test::check(head_split_graph(c, feed, {grad}), {feed}, cpu_test::unfused, 2e-5, 2e-5);
    EXPECT_EQ(cpu_test::count(src, "ig_transpose(x0"), 0);
  }
}

}  // namespace
}  // namespace ingot::testing
