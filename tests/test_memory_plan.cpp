// The memory planner: arena invariants, in-place safety, lower bound, max_memory_gb.
#include <gtest/gtest.h>

#include "compiler/memory_plan.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "ir/op_registry.h"
#include "random_graph.h"

namespace ingot {
namespace {

using testing::annotate;

void expect_in_place_safe(const Graph& g, const MemoryPlan& plan) {
  std::map<ValueId, const PlannedTensor*> by_value;
  for (const PlannedTensor& t : plan.tensors) by_value[t.value] = &t;
  std::vector<int> last(g.values().size(), -1);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) last[v] = n.id;
  for (const auto& [name, v] : g.outputs()) last[v] = static_cast<int>(g.nodes().size());
  for (const PlannedTensor& t : plan.tensors) {
    if (t.reuses < 0) continue;
    const Node& n = g.node(t.first);
    EXPECT_EQ(get_op(n.op).fusion, FusionClass::Elementwise) << n.op;
    EXPECT_NE(std::find(n.inputs.begin(), n.inputs.end(), t.reuses), n.inputs.end());
    EXPECT_EQ(last[t.reuses], t.first) << "in-place over a value read later";
    EXPECT_EQ(by_value.at(t.reuses)->bytes, t.bytes);
    EXPECT_EQ(by_value.at(t.reuses)->offset, t.offset);
  }
}

TEST(MemoryPlan, ChainReusesBuffersAndRunsInPlace) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId a = g.add_op("exp", {x});
  ValueId b = g.add_op("tanh", {a});       // in place over a
  ValueId s = g.add_op("sum", {b}, {{"axes", std::vector<int64_t>{1}}});
  ValueId c = g.add_op("neg", {s});
  g.set_output("y", c);
  annotate(g, {{x, {256, 256}}});
  MemoryPlan p = plan_memory(g, "greedy");
  ASSERT_TRUE(p.planned);
  check_memory_plan(g, p);
  expect_in_place_safe(g, p);
  EXPECT_EQ(p.inplace_count, 2);  // tanh over exp, neg over sum
  EXPECT_EQ(p.unplanned_bytes, 2 * 256 * 256 * 4 + 2 * 256 * 4);
  EXPECT_EQ(p.lower_bound_bytes, 256 * 256 * 4 + 256 * 4);
  EXPECT_GE(p.planned_peak_bytes, p.lower_bound_bytes);
  EXPECT_LE(p.planned_peak_bytes, p.lower_bound_bytes + 128);
  MemoryPlan none = plan_memory(g, "none");
  check_memory_plan(g, none);
  EXPECT_EQ(none.inplace_count, 0);
  EXPECT_GE(none.planned_peak_bytes, none.unplanned_bytes);
}

TEST(MemoryPlan, NoInPlaceWhenTheInputLivesOnOrSizesDiffer) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId a = g.add_op("exp", {x});
  ValueId b = g.add_op("tanh", {a});          // a is read again below: not in place
  ValueId c = g.add_op("add", {a, b});        // a dies here, same size: in place ok
  ValueId h = g.add_op("cast", {c}, {{"dtype", std::string("float16")}});  // smaller: not in place
  g.set_output("y", h);
  g.set_output("b", b);                      // b is an output: never overwritten
  annotate(g, {{x, {8, 8}}});
  MemoryPlan p = plan_memory(g, "greedy");
  check_memory_plan(g, p);
  expect_in_place_safe(g, p);
  for (const PlannedTensor& t : p.tensors) {
    if (t.value == b || t.value == h) {
      EXPECT_EQ(t.reuses, -1);
    }
    if (t.value == c) {
      EXPECT_EQ(t.reuses, a);
    }
  }
}

TEST(MemoryPlan, SymbolicShapesAreNotPlanned) {
  PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend());
  EXPECT_FALSE(pm.memory_plan().planned);
  EXPECT_NE(pm.memory_plan().str().find("not planned (symbolic"), std::string::npos) << pm.memory_plan().str();
}

TEST(MemoryPlan, PhysicalModelReportsThePlan) {
  CompileOptions o;
  o.shapes["input"] = {128, 784};
  PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend(), o);
  const MemoryPlan& p = pm.memory_plan();
  ASSERT_TRUE(p.planned);
  check_memory_plan(pm.graph(), p);
  EXPECT_GE(p.planned_peak_bytes, p.lower_bound_bytes);
  EXPECT_LT(p.planned_peak_bytes, p.unplanned_bytes);
  o.memory_planning = "none";
  PhysicalModel un = compile(ExampleMLP(), ReferenceBackend(), o);
  EXPECT_EQ(un.memory_plan().strategy, "none");
  EXPECT_GE(un.memory_plan().planned_peak_bytes, un.memory_plan().unplanned_bytes);
}

TEST(MemoryPlan, MaxMemoryErrorNamesPlanAndLimit) {
  CompileOptions o;
  o.shapes["input"] = {128, 784};
  o.max_memory_gb = 1e-6;  // ~1 KiB
  try {
    compile(ExampleMLP(), ReferenceBackend(), o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("max_memory_gb"), std::string::npos) << m;
    EXPECT_NE(m.find("planned peak"), std::string::npos) << m;
    EXPECT_NE(m.find("1e-06 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  }
  o.max_memory_gb = 1;
  EXPECT_NO_THROW(compile(ExampleMLP(), ReferenceBackend(), o));
}

TEST(MemoryPlan, RandomGraphInvariants) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    testing::RandomGraph rg = testing::random_graph(seed, 24);
    for (const char* strategy : {"greedy", "none"}) {
      MemoryPlan p = plan_memory(rg.graph, strategy);
      ASSERT_TRUE(p.planned);
      check_memory_plan(rg.graph, p);
      expect_in_place_safe(rg.graph, p);
      EXPECT_GE(p.planned_peak_bytes, p.lower_bound_bytes) << seed;
      EXPECT_LE(p.lower_bound_bytes, p.unplanned_bytes) << seed;
    }
  }
}

}  // namespace
}  // namespace ingot
