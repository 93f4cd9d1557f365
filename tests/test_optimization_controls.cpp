// Optimization controls that must never silently do nothing: max_memory_gb without a bounded
// plan, the mixed_precision pass without a type, dump_after_each_pass without dump_graph, and
// what optimization_level "high" adds over "medium".
#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "random_graph.h"

namespace ingot {
namespace {

using testing::count_op;
using testing::expect_error;
using testing::GraphWithInputs;
using testing::run_graph;

// ---------------------------------------------------------------- max_memory_gb

TEST(OptimizationControls, MaxMemoryWithSymbolicShapesIsAnErrorSayingHowToBoundIt) {
  CompileOptions o;
  o.shapes["input"] = {"N", 784};
  o.max_memory_gb = 1;
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), o); },
               "Option 'max_memory_gb' (1 GiB) cannot be checked for the model: its memory plan has no size "
               "(symbolic");
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), o); },
               "give every symbolic dimension a size in `shapes` (or set static_shapes) to bound it, bound the "
               "batch with hints input_batch_size_range, or set max_memory_gb to 0");
  o.max_memory_gb = 0;  // no limit: symbolic shapes compile as before
  EXPECT_NO_THROW(compile(ExampleMLP(), ReferenceBackend(), o));
  o.max_memory_gb = 1;
  o.shapes["input"] = {128, 784};  // bounded: checked and within the limit
  EXPECT_NO_THROW(compile(ExampleMLP(), ReferenceBackend(), o));
}

TEST(OptimizationControls, MaxMemoryAlsoBoundsTheGradientGraph) {
  // The forward plan fits, the joint forward + backward plan (gradients) does not.
  CompileOptions o;
  o.shapes["input"] = {128, 784};
  o.max_memory_gb = 0.5 / 1024;  // 512 KiB: the MLP's forward plan is 133 KiB, its gradients' 1.3 MiB
  PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend(), o);
  expect_error([&] { (void)pm.gradient_memory({"output"}); },
               "Memory plan exceeds max_memory_gb: the planned peak is");
}

// ---------------------------------------------------------------- option combinations

TEST(OptimizationControls, MixedPrecisionPassWithoutATypeIsAnError) {
  CompileOptions o;
  o.shapes["input"] = {4, 784};
  o.optimizations["mixed_precision"] = true;
  const std::string msg =
      "Option 'optimizations': the mixed_precision pass is enabled but option 'mixed_precision' is \"none\"";
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), o); }, msg);
  expect_error([&] { o.validate(); }, "set mixed_precision to bfloat16 or float16");
  // Through set(), in either order: only validate() (compile) judges the combination.
  CompileOptions s;
  s.set("optimizations", "mixed_precision");
  expect_error([&] { s.validate(); }, msg);
  s.set("mixed_precision", "bfloat16");
  EXPECT_NO_THROW(s.validate());
  o.mixed_precision = "float16";
  EXPECT_NO_THROW(compile(ExampleMLP(), ReferenceBackend(), o));
  o.mixed_precision = "none";
  o.optimizations["mixed_precision"] = false;  // off stays fine
  EXPECT_NO_THROW(compile(ExampleMLP(), ReferenceBackend(), o));
}

TEST(OptimizationControls, DumpAfterEachPassNeedsDumpGraph) {
  CompileOptions o;
  o.shapes["input"] = {4, 784};
  o.dump_after_each_pass = true;
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), o); },
               "Option 'dump_after_each_pass' is set but 'dump_graph' is empty");
  CompileOptions s;
  s.set("dump_after_each_pass", "true");
  expect_error([&] { s.validate(); }, "set dump_graph to a path (or \"-\" for stdout)");
}

// ---------------------------------------------------------------- optimization_level high

// Two images through one shared (siamese) conv2d + batch_norm, parameters at run time: in
// inference conv_bn_folding folds the statistics into each conv's weight, computing W·s twice.
GraphWithInputs siamese_conv_bn() {
  GraphWithInputs t;
  Graph& g = t.g;
  const ValueId x1 = t.leaf("x1", ValueKind::Input, {2, 3, 6, 6}), x2 = t.leaf("x2", ValueKind::Input, {2, 3, 6, 6});
  const ValueId w = t.leaf("w", ValueKind::Parameter, {4, 3, 3, 3}), b = t.leaf("b", ValueKind::Parameter, {4});
  const ValueId gamma = t.leaf("gamma", ValueKind::Parameter, {4}, 0.5, 1.5), beta = t.leaf("beta", ValueKind::Parameter, {4});
  const ValueId mean = t.leaf("mean", ValueKind::Parameter, {4}), var = t.leaf("var", ValueKind::Parameter, {4}, 0.5, 1.5);
  for (const auto& [x, name] : {std::pair{x1, "y1"}, std::pair{x2, "y2"}})
    g.set_output(name, g.add_op("batch_norm", {g.add_op("conv2d", {x, w, b}), gamma, beta, mean, var}));
  t.annotate_from_inputs();
  return t;
}

int optimized_nodes(const GraphWithInputs& t, const std::string& level, Graph* out = nullptr) {
  Graph g = t.g;
  CompileOptions o;
  o.inference = true;
  o.optimization_level = level;
  optimize(g, o);
  if (out) *out = g;
  return static_cast<int>(g.nodes().size());
}

TEST(OptimizationControls, HighRepeatsTheCleanupPassesAfterFolding) {
  const GraphWithInputs t = siamese_conv_bn();
  Graph medium, high;
  const int at_medium = optimized_nodes(t, "medium", &medium), at_high = optimized_nodes(t, "high", &high);
  EXPECT_EQ(count_op(medium, "batch_norm"), 0);  // folded at both levels
  EXPECT_EQ(count_op(high, "conv2d"), 2);
  // medium computes the folded weight and bias once per conv; high merges the copies.
  EXPECT_LT(at_high, at_medium);
  EXPECT_EQ(count_op(high, "sqrt"), 1);
  EXPECT_EQ(count_op(medium, "sqrt"), 2);
  const auto want = run_graph(t.g, t.inputs);
  for (const Graph* g : {&medium, &high}) {
    const auto got = run_graph(*g, t.inputs);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(allclose(got[i], want[i], 1e-4, 1e-5));
  }
}

// mixed_precision converts a value once for all its readers (run_in_dtype), so a shared weight has
// one cast at every level; high's cleanup rounds find nothing of it left to merge.
TEST(OptimizationControls, MixedPrecisionCastsASharedWeightOnceAtEveryLevel) {
  GraphWithInputs t;
  const ValueId x1 = t.leaf("x1", ValueKind::Input, {2, 8}), x2 = t.leaf("x2", ValueKind::Input, {2, 8});
  const ValueId w = t.leaf("w", ValueKind::Parameter, {8, 4});
  t.g.set_output("y1", t.g.add_op("matmul", {x1, w}));
  t.g.set_output("y2", t.g.add_op("matmul", {x2, w}));
  t.annotate_from_inputs();
  for (const char* level : {"medium", "high"}) {
    Graph g = t.g;
    CompileOptions o;
    o.optimization_level = level;
    o.mixed_precision = "bfloat16";
    optimize(g, o);
    // 2 input casts, the shared weight's cast, 2 casts back.
    EXPECT_EQ(count_op(g, "cast"), 5) << level;
  }
}

TEST(OptimizationControls, HighReportsItsCleanupRoundsAndIsTheOnlyLevelThatRepeats) {
  const GraphWithInputs t = siamese_conv_bn();
  for (const char* level : {"low", "medium", "high"}) {
    Graph g = t.g;
    CompileOptions o;
    o.inference = true;
    o.optimization_level = level;
    std::string log;
    optimize(g, o, [&](const std::string& line) { log += line + "\n"; });
    EXPECT_EQ(log.find("cleanup round 1") != std::string::npos, std::string(level) == "high") << level << "\n" << log;
  }
}

}  // namespace
}  // namespace ingot
