// simplify's broadcasting of scalars: an elementwise op reads a broadcast one-element value
// directly (it broadcasts by itself), and x*1, x+0, x-0, x/1 fire when the 1 or 0 is broadcast;
// and what it must leave alone (a broadcast that shapes the result, a graph output, a weak
// literal, a non-elementwise reader).
#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "ingot/ingot.h"
#include "random_graph.h"

namespace ingot {
namespace {

using testing::annotate;
using testing::count_op;
using testing::random_tensor;
using testing::run_graph;

Tensor scalar_f32(double x) { return Tensor::full(DType::Float32, {}, x); }

ValueId broadcast(Graph& g, ValueId v, std::vector<int64_t> shape) {
  return g.add_op("broadcast_to", {v}, {{"shape", std::move(shape)}});
}

TEST(SimplifyBroadcast, ElementwiseOpsReadTheScalarDirectly) {
  Graph g;
  const ValueId x = g.add_input("x");
  const ValueId s = g.add_input("s");  // a run-time scalar
  const ValueId half = g.add_constant("half", scalar_f32(0.5));
  const ValueId one11 = g.add_constant("one11", Tensor::full(DType::Float32, {1, 1}, 3));  // size-1
  const ValueId a = g.add_op("mul", {x, broadcast(g, half, {2, 3})});
  const ValueId b = g.add_op("maximum", {broadcast(g, s, {2, 3}), a});  // the broadcast first
  const ValueId c = g.add_op("sub", {b, broadcast(g, one11, {2, 3})});
  g.set_output("y", c);
  annotate(g, {{x, {2, 3}}, {s, {}}});
  const std::map<std::string, Tensor> in = {{"x", random_tensor({2, 3}, 1)}, {"s", scalar_f32(0.1)}};
  const auto before = run_graph(g, in);
  const PassReport r = simplify(g);
  EXPECT_EQ(r.changes, 3);
  EXPECT_EQ(count_op(g, "broadcast_to"), 0);
  EXPECT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].inputs[1], *g.find_leaf("half"));
  EXPECT_EQ(g.nodes()[1].inputs[0], *g.find_leaf("s"));
  const auto after = run_graph(g, in);
  EXPECT_EQ(after[0].shape(), (Shape{2, 3}));
  EXPECT_TRUE(equal(before[0], after[0]));
}

TEST(SimplifyBroadcast, NeutralArithmeticThroughBroadcastUnits) {
  Graph g;
  const ValueId x = g.add_input("x");
  const ValueId one = g.add_constant("one", scalar_f32(1));
  const ValueId zero = g.add_constant("zero", scalar_f32(0));
  // Ones of shape [3], not one element: only the x*1 rule, seeing through the broadcast, removes it.
  const ValueId ones3 = g.add_constant("ones3", Tensor::full(DType::Float32, {3}, 1));
  ValueId v = g.add_op("mul", {broadcast(g, one, {2, 3}), x});
  v = g.add_op("add", {v, broadcast(g, zero, {2, 3})});
  v = g.add_op("sub", {v, broadcast(g, zero, {2, 3})});
  v = g.add_op("div", {v, broadcast(g, one, {2, 3})});
  v = g.add_op("mul", {v, broadcast(g, ones3, {2, 3})});
  g.set_output("y", g.add_op("tanh", {v}));
  annotate(g, {{x, {2, 3}}});
  simplify(g);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "tanh");
  EXPECT_EQ(g.nodes()[0].inputs[0], *g.find_leaf("x"));
}

TEST(SimplifyBroadcast, KeepsBroadcastsThatShapeTheResultOrAreNeeded) {
  Graph g;
  const ValueId x = g.add_input("x");   // [3]
  const ValueId m = g.add_input("m");   // [3, 4]
  const ValueId s = g.add_constant("s", scalar_f32(2));
  const ValueId one = g.add_constant("one", scalar_f32(1));
  const ValueId lit = g.add_constant("lit", scalar_f32(0.5));
  g.value(lit).weak_type = true;
  // x[3] * s broadcast to [2, 3]: the broadcast gives the result its shape.
  g.set_output("shaped", g.add_op("mul", {x, broadcast(g, s, {2, 3})}));
  // x[3] * 1 broadcast to [2, 3]: x is not the result's shape, so x*1 is kept too.
  g.set_output("shaped_one", g.add_op("mul", {x, broadcast(g, one, {2, 3})}));
  // A broadcast that is a graph output stays one (its reader may still take the scalar).
  const ValueId out = broadcast(g, s, {3});
  g.set_output("broadcast", out);
  g.set_output("sum", g.add_op("add", {x, out}));
  // A weak literal: its broadcast fixed its dtype.
  g.set_output("weak", g.add_op("add", {x, broadcast(g, lit, {3})}));
  // matmul is not elementwise.
  g.set_output("mm", g.add_op("matmul", {broadcast(g, s, {2, 3}), m}));
  annotate(g, {{x, {3}}, {m, {3, 4}}});
  const std::map<std::string, Tensor> in = {{"x", random_tensor({3}, 2)}, {"m", random_tensor({3, 4}, 3)}};
  const auto before = run_graph(g, in);
  const PassReport r = simplify(g);
  EXPECT_EQ(r.changes, 1);  // only "sum" reads s directly
  EXPECT_EQ(count_op(g, "broadcast_to"), 5);
  EXPECT_EQ(g.value(g.outputs()[2].second).shape, (SymShape{3}));
  EXPECT_EQ(g.node(g.value(g.outputs()[2].second).producer).op, "broadcast_to");
  const auto after = run_graph(g, in);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].shape(), after[i].shape()) << g.outputs()[i].first;
    EXPECT_TRUE(equal(before[i], after[i])) << g.outputs()[i].first;
  }
}

TEST(SimplifyBroadcast, ThroughThePipelineOnAModel) {
  // A logical model's broadcast scalar, as users write it: y = x * broadcast_to(2).
  Model m;
  Connection x = m.input("x");
  Connection two = m.constant("two", Tensor::full(DType::Float32, {}, 2));
  m.expose(x * apply("broadcast_to", two, {{"shape", std::vector<int64_t>{4, 5}}}), "y");
  CompileOptions o;
  o.shapes["x"] = {4, 5};
  const Graph g = build_graph(m, o);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "mul");
  // It reads the scalar: neither the broadcast nor a folded [4, 5] copy of it is left.
  for (ValueId v : g.nodes()[0].inputs)
    if (g.value(v).kind == ValueKind::Constant) {
      EXPECT_TRUE(g.value(v).shape.empty()) << to_string(g.value(v).shape);
    }
  o.optimization_level = "none";
  EXPECT_EQ(count_op(build_graph(m, o), "broadcast_to"), 1);
}

}  // namespace
}  // namespace ingot
