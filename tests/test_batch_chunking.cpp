// The batch_chunking pass: which nodes form the per-sample region, the rewrite into chunks, what
// it leaves alone, equivalence on the reference and CPU backends, and the memory plan's peak.
#include <gtest/gtest.h>

#include "compiler/memory_plan.h"
#include "compiler/passes/passes.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "random_graph.h"

namespace ingot {
namespace {

using testing::count_op;
using testing::GraphWithInputs;
using testing::run_graph;
using V = std::vector<int64_t>;

// x [batch, 3, 10, 10] -> conv(8) -> relu -> conv(16) -> global_avg_pool2d -> matmul -> y; the
// weights are parameters. `feedback`: y also scales relu's output by a full reduction of it (a
// node that depends on the region through one outside it).
GraphWithInputs small_cnn(int64_t batch, bool feedback) {
  GraphWithInputs c;
  Graph& g = c.g;
  const ValueId x = c.leaf("x", ValueKind::Input, {batch, 3, 10, 10});
  const ValueId w1 = c.leaf("w1", ValueKind::Parameter, {8, 3, 3, 3}), w2 = c.leaf("w2", ValueKind::Parameter, {16, 8, 3, 3}),
                fc = c.leaf("fc", ValueKind::Parameter, {16, 4});
  const ValueId r = g.add_op("relu", {g.add_op("conv2d", {x, w1}, {{"padding", V{1, 1}}})});
  const ValueId pool = g.add_op("global_avg_pool2d", {g.add_op("conv2d", {r, w2})});
  g.set_output("y", g.add_op("matmul", {pool, fc}));
  if (feedback) g.set_output("scaled", g.add_op("mul", {r, g.add_op("sum", {r})}));
  c.annotate_from_inputs();
  return c;
}

PassContext inference(int64_t chunk_bytes) {
  PassContext ctx;
  ctx.inference = true;
  ctx.chunk_bytes = chunk_bytes;
  return ctx;
}

// One sample's largest live set in small_cnn: conv2's input (8x10x10) and output (16x8x8) floats.
constexpr int64_t kSampleBytes = (8 * 10 * 10 + 16 * 8 * 8) * 4;

TEST(BatchChunking, SplitsThePerSampleRegion) {
  GraphWithInputs c = small_cnn(8, false);
  const auto before = run_graph(c.g, c.inputs);
  const MemoryPlan plan_before = plan_memory(c.g);
  const PassReport r = chunk_batch(c.g, inference(2 * kSampleBytes));  // chunks of 2 samples
  EXPECT_EQ(r.changes, 4);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].rfind("batch 8 in 4 chunks of 2 through conv2d relu conv2d global_avg_pool2d", 0), 0u) << r.notes[0];
  check_annotated(c.g, "test");
  EXPECT_EQ(count_op(c.g, "slice"), 4);
  EXPECT_EQ(count_op(c.g, "conv2d"), 8);
  EXPECT_EQ(count_op(c.g, "concat"), 1);
  EXPECT_EQ(count_op(c.g, "matmul"), 1) << "the matmul after the pooling is not per-sample here";
  for (const Node& n : c.g.nodes()) {
    if (n.op != "conv2d") continue;
    EXPECT_EQ(c.g.value(n.outputs[0]).shape[0].value, 2);
  }
  const auto after = run_graph(c.g, c.inputs);
  EXPECT_TRUE(allclose(after[0], before[0], 1e-5, 1e-6)) << max_abs_diff(after[0], before[0]);
  const MemoryPlan plan_after = plan_memory(c.g);
  EXPECT_LT(plan_after.planned_peak_bytes * 2, plan_before.planned_peak_bytes);
}

TEST(BatchChunking, LeavesTrainingSmallAndSymbolicBatchesAlone) {
  GraphWithInputs c = small_cnn(8, false);
  EXPECT_EQ(chunk_batch(c.g, PassContext{}).changes, 0) << "training mode";
  EXPECT_EQ(chunk_batch(c.g, inference(8 * kSampleBytes)).changes, 0) << "the whole batch fits";
  EXPECT_EQ(chunk_batch(c.g, inference(4 * kSampleBytes)).changes, 0) << "less than twice the budget";
  Graph g;
  const ValueId x = g.add_input("x"), w = g.add_input("w", ValueKind::Parameter);
  g.set_output("y", g.add_op("relu", {g.add_op("conv2d", {x, w})}));
  infer_shapes(g, {{x, {"N", 3, 10, 10}, "", "x"}, {w, {4, 3, 3, 3}, "", "w"}});
  infer_types(g);
  EXPECT_EQ(chunk_batch(g, inference(1)).changes, 0) << "symbolic batch";
}

TEST(BatchChunking, ANodeReadingTheRegionThroughAnotherStaysWhole) {
  // scaled = relu_out * sum(relu_out): sum reduces over the batch, so the mul cannot run per
  // chunk; relu's output is concatenated for it.
  GraphWithInputs c = small_cnn(4, true);
  const auto before = run_graph(c.g, c.inputs);
  EXPECT_GT(chunk_batch(c.g, inference(kSampleBytes)).changes, 0);
  check_annotated(c.g, "test");
  EXPECT_EQ(count_op(c.g, "mul"), 1);
  EXPECT_EQ(count_op(c.g, "concat"), 2) << "the pooled features and relu's output";
  const auto after = run_graph(c.g, c.inputs);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(allclose(after[i], before[i], 1e-5, 1e-5)) << i << ": " << max_abs_diff(after[i], before[i]);
}

TEST(BatchChunking, CpuBackendRunsTheChunkedGraph) {
  GraphWithInputs c = small_cnn(6, false);
  const auto want = run_graph(c.g, c.inputs);
  ASSERT_GT(chunk_batch(c.g, inference(3 * kSampleBytes / 2)).changes, 0);  // 6 chunks of 1
  std::vector<Tensor> ins;
  for (ValueId id : c.g.leaves()) ins.push_back(c.inputs.at(c.g.value(id).name));
  const std::vector<Tensor> got = CpuBackend().lower(c.g, {})->run(ins);
  EXPECT_TRUE(allclose(got[0], want[0], 1e-4, 1e-5)) << max_abs_diff(got[0], want[0]);
}

TEST(BatchChunking, ExampleCNNPlannedPeakIsWellUnderHalfOfUnplanned) {
  CompileOptions o;
  o.inference = true;
  o.shapes["input"] = {32, 3, 224, 224};
  const PhysicalModel pm = compile(ExampleCNN(), ReferenceBackend(), o);
  const MemoryPlan& p = pm.memory_plan();
  ASSERT_TRUE(p.planned);
  EXPECT_LT(p.planned_peak_bytes * 4, p.unplanned_bytes) << p.str();
  EXPECT_LE(static_cast<double>(p.planned_peak_bytes), 1.1 * static_cast<double>(p.lower_bound_bytes)) << p.str();
}

}  // namespace
}  // namespace ingot
