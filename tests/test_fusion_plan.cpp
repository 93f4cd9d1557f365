// The fusion plan: grouping rules, exactly-one-group coverage and a valid group order.
#include <gtest/gtest.h>

#include "compiler/fusion_plan.h"
#include "compiler/passes/passes.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "random_graph.h"

namespace ingot {
namespace {

using testing::annotate;

// Every node in exactly one group; groups read only values produced by earlier groups (or
// themselves, in node order); nodes in each group in topological order.
void expect_valid_plan(const Graph& g, const FusionPlan& plan) {
  std::vector<int> group_of(g.nodes().size(), -1);
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    ASSERT_FALSE(plan.groups[gi].nodes.empty());
    for (size_t k = 0; k < plan.groups[gi].nodes.size(); ++k) {
      NodeId n = plan.groups[gi].nodes[k];
      EXPECT_EQ(group_of[n], -1) << "node " << n << " in two groups";
      group_of[n] = static_cast<int>(gi);
      if (k > 0) {
        EXPECT_LT(plan.groups[gi].nodes[k - 1], n);
      }
    }
  }
  for (const Node& n : g.nodes()) {
    ASSERT_GE(group_of[n.id], 0) << "node " << n.id << " in no group";
    for (ValueId v : n.inputs) {
      NodeId p = g.value(v).producer;
      if (p >= 0) {
        EXPECT_LE(group_of[p], group_of[n.id]) << "group order broken at node " << n.id;
      }
    }
  }
}

Graph mlp_graph() {
  CompileOptions o;
  o.shapes["input"] = {8, 784};
  return build_graph(ExampleMLP(), o);
}

TEST(FusionPlan, MLPGroupsDenseWithEpilogue) {
  Graph g = mlp_graph();
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  ASSERT_EQ(plan.groups.size(), 2u) << plan.str(g);
  EXPECT_EQ(plan.str(g), "group 0 [dense]: matmul add relu\ngroup 1 [dense]: matmul add\n");
  EXPECT_EQ(g.node(plan.groups[0].anchor).op, "matmul");
  // The first group's only output is the relu; its inputs the data, weight and bias.
  ASSERT_EQ(plan.groups[0].outputs.size(), 1u);
  EXPECT_EQ(g.node(g.value(plan.groups[0].outputs[0]).producer).op, "relu");
  EXPECT_EQ(plan.groups[0].inputs.size(), 3u);
}

TEST(FusionPlan, SoftmaxIsARowKernelWithEpilogue) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId s = g.add_op("softmax", {x}, {{"axis", int64_t{-1}}});
  ValueId two = g.add_constant("two", Tensor::full(DType::Float32, {}, 2));
  g.set_output("y", g.add_op("mul", {s, two}));
  annotate(g, {{x, {4, 5}}});
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  EXPECT_EQ(plan.str(g), "group 0 [row-kernel]: softmax mul\n");
}

// A layer_norm / rms_norm takes the elementwise nodes that compute its input and nothing else as
// its prologue, out of the matmul's epilogue (post-norm transformer) or a whole elementwise group,
// but not a value read again after it (pre-norm's residual stream) nor its own weight.
TEST(FusionPlan, NormTakesTheElementwiseNodesComputingItsInput) {
  Graph g;
  ValueId x = g.add_input("x"), w = g.add_input("w"), b = g.add_input("b"), gamma = g.add_input("gamma");
  ValueId h = g.add_op("add", {g.add_op("add", {g.add_op("matmul", {x, w}), b}), x});
  ValueId post = g.add_op("layer_norm", {h, gamma});
  g.set_output("post", g.add_op("relu", {post}));
  ValueId t = g.add_op("mul", {x, x});
  g.set_output("pre", g.add_op("add", {t, g.add_op("layer_norm", {t})}));
  ValueId sq = g.add_op("exp", {gamma});
  g.set_output("weight", g.add_op("rms_norm", {g.add_op("neg", {x}), sq}));
  annotate(g, {{x, {4, 8}}, {w, {8, 8}}, {b, {8}}, {gamma, {8}}});
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  EXPECT_EQ(plan.str(g),
            "group 0 [dense]: matmul\n"
            "group 1 [row-kernel]: add add layer_norm relu\n"
            "group 2 [elementwise]: mul\n"
            "group 3 [row-kernel]: layer_norm add\n"
            "group 4 [elementwise]: exp\n"
            "group 5 [row-kernel]: neg rms_norm\n");
}

TEST(FusionPlan, ElementwiseProducersFuseIntoReduction) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId e = g.add_op("exp", {x});
  ValueId m = g.add_op("mul", {e, x});
  ValueId s = g.add_op("sum", {m}, {{"axes", std::vector<int64_t>{1}}});
  g.set_output("y", g.add_op("sqrt", {s}));
  annotate(g, {{x, {4, 5}}});
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  EXPECT_EQ(plan.str(g), "group 0 [reduction]: exp mul sum\ngroup 1 [elementwise]: sqrt\n");
}

// A graph output inside an elementwise region is one more store of its loop; the transpose and
// the reduction end the region.
TEST(FusionPlan, OutputsStayInElementwiseRegionsOtherOpsEndThem) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId a = g.add_op("exp", {x});
  ValueId b = g.add_op("neg", {a});
  g.set_output("a", a);  // a graph output: still fused with b
  ValueId t = g.add_op("transpose", {b});
  g.set_output("y", g.add_op("relu", {t}));
  ValueId s = g.add_op("sum", {b});  // b has a second reader
  g.set_output("s", s);
  annotate(g, {{x, {3, 3}}});
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  EXPECT_EQ(plan.str(g),
            "group 0 [elementwise]: exp neg\ngroup 1 [injective]: transpose\n"
            "group 2 [elementwise]: relu\ngroup 3 [reduction]: sum\n");
}

TEST(FusionPlan, BroadcastingInputsJoinButBiggerShapesDoNot) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId b = g.add_input("b");
  ValueId a = g.add_op("add", {x, b});    // [4, 5] + [5]
  ValueId r = g.add_op("relu", {a});
  ValueId big = g.add_input("big");
  g.set_output("y", g.add_op("mul", {r, big}));  // [4, 5] * [3, 4, 5] -> bigger: new group
  annotate(g, {{x, {4, 5}}, {b, {5}}, {big, {3, 4, 5}}});
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  EXPECT_EQ(plan.str(g), "group 0 [elementwise]: add relu\ngroup 1 [elementwise]: mul\n");
}

TEST(FusionPlan, TransformerBlockAndCNN) {
  CompileOptions o;
  o.inference = true;
  o.shapes["input"] = {2, 3, 8, 8};
  Graph g = build_graph(ExampleCNN(), o);
  FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  EXPECT_LT(plan.groups.size(), g.nodes().size());
}

// A long chain where every step brings a branch that reads only a leaf (t = c * tanh(c)): each
// branch joins the chain's group. Every tenth t also feeds a reduction that the chain reads right
// after (t -> sum -> chain): one group holding both sides of the sum would be a cycle, so the
// chain is cut there. Thousands of nodes, to exercise the merge step's bookkeeping.
TEST(FusionPlan, BranchesJoinALongChainWhichIsCutAtEachReductionItReads) {
  Graph g;
  std::map<ValueId, Shape> shapes;
  const ValueId x = g.add_input("x");
  shapes[x] = {4, 8};
  ValueId acc = g.add_op("exp", {x});
  const int steps = 1500;
  std::vector<NodeId> branch_heads, chain_adds, after_sum;
  for (int i = 0; i < steps; ++i) {
    const ValueId c = g.add_input("c" + std::to_string(i));
    shapes[c] = {4, 8};
    const ValueId tanh_c = g.add_op("tanh", {c});
    branch_heads.push_back(g.value(tanh_c).producer);
    const ValueId t = g.add_op("mul", {c, tanh_c});
    acc = g.add_op("add", {acc, t});
    chain_adds.push_back(g.value(acc).producer);
    if (i % 10 == 0) {
      acc = g.add_op("add", {acc, g.add_op("sum", {t}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}})});
      after_sum.push_back(g.value(acc).producer);
    }
  }
  g.set_output("y", acc);
  annotate(g, shapes);
  const FusionPlan plan = plan_fusion(g);
  expect_valid_plan(g, plan);
  std::vector<int> group_of(g.nodes().size(), -1);
  for (size_t gi = 0; gi < plan.groups.size(); ++gi)
    for (NodeId n : plan.groups[gi].nodes) group_of[n] = static_cast<int>(gi);
  for (int i = 0; i < steps; ++i) {
    EXPECT_EQ(group_of[branch_heads[i]], group_of[chain_adds[i]]) << "step " << i;
    if (i % 10 == 0) {
      EXPECT_NE(group_of[chain_adds[i]], group_of[after_sum[i / 10]]) << "step " << i << ": one group would be a cycle";
    } else {
      const NodeId previous = i % 10 == 1 ? after_sum[i / 10] : chain_adds[i - 1];
      EXPECT_EQ(group_of[chain_adds[i]], group_of[previous]) << "step " << i;
    }
  }
  EXPECT_EQ(plan.groups.size(), 2u * (steps / 10) + 1);  // a chain piece and a sum per cut, and the last piece
}

TEST(FusionPlan, RandomGraphsGiveValidPlans) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    testing::RandomGraph rg = testing::random_graph(seed, 20);
    FusionPlan plan = plan_fusion(rg.graph);
    expect_valid_plan(rg.graph, plan);
    FusionPlan un = unfused_plan(rg.graph);
    EXPECT_EQ(un.groups.size(), rg.graph.nodes().size());
  }
}

TEST(FusionPlan, OptionSelectsThePlanBackendsGet) {
  Graph g = mlp_graph();
  CompileOptions o;
  EXPECT_EQ(fusion_plan_for(g, o).groups.size(), 2u);
  o.optimizations["fusion"] = false;
  EXPECT_EQ(fusion_plan_for(g, o).groups.size(), g.nodes().size());
}

}  // namespace
}  // namespace ingot
