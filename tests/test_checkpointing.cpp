// Gradient checkpointing: checkpointed and plain gradient graphs give the same gradients
// (reference and CPU backends, and through the compiled training step), the recomputed nodes
// survive the optimizer (CSE does not merge them back), the planned peak drops on a deep MLP and
// a deep CNN, and bad option values are errors naming the option.
#include <gtest/gtest.h>

#include "backends/cpu/executable.h"
#include "compiler/checkpointing.h"
#include "compiler/memory_plan.h"
#include "ingot/cpu_backend.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

namespace ingot::testing {
namespace {

// With a dropout in every other layer: recomputed masks must be the forward's (seeded streams).
Model deep_mlp(int layers, int64_t width) {
  Model m;
  for (int i = 0; i < layers; ++i) {
    m += Linear(width);
    m += i % 2 ? Tanh() : Relu();
    if (i % 2) m += Dropout(0.25, static_cast<uint64_t>(i));
  }
  m += Linear(5);
  return m;
}

Model deep_cnn(int blocks) {
  Model m;
  for (int i = 0; i < blocks; ++i) {
    m += Conv2d(8, 3, 1, 1);
    m += BatchNorm2d();
    m += Relu();
  }
  m += GlobalAvgPool2d();
  m += Linear(5);
  return m;
}

TrainModel with_loss(const Model& body) {
  TrainModel tm(body);
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  return tm;
}

CompileOptions options_for(const Shape& input, DType t, bool checkpointing, int segments = 3) {
  CompileOptions o;
  o.shapes = {{"input", template_of(input)}};
  o.gradient_checkpointing = checkpointing;
  o.checkpoint_segments = segments;
  if (t != DType::Float32) {
    o.types = {{"input", t}};
  }
  return o;
}

TensorMap batch(const Shape& input, DType t, uint64_t seed) {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < input[0]; ++i) labels.push_back(static_cast<int64_t>((i * 3 + seed) % 5));
  return {{"input", random_tensor(input, seed, -1, 1, t)}, {"target", Tensor::from_vector<int64_t>(labels, {input[0]})}};
}

// Every parameter's dtype follows the input's when compiling in float64.
CompileOptions typed(CompileOptions o, const PhysicalModel& probe, DType t) {
  if (t == DType::Float32) return o;
  for (const std::string& p : probe.parameter_names()) o.types[p] = t;
  return o;
}

// `recomputed_op`: an op the checkpointed graph must recompute.
void expect_same_gradients(const Model& body, const Shape& input, const Backend& backend, DType t, double tol,
                           const std::string& recomputed_op) {
  const TrainModel tm = with_loss(body);
  const PhysicalModel probe = compile(tm, ReferenceBackend(), options_for(input, DType::Float32, false));
  const PhysicalModel plain = compile(tm, backend, typed(options_for(input, t, false), probe, t));
  const PhysicalModel checkpointed = compile(tm, backend, typed(options_for(input, t, true), probe, t));
  const TensorMap params = plain.randomize_params(1);
  for (uint64_t seed : {2, 3}) {
    const TensorMap data = batch(input, t, seed);
    const Evaluation a = evaluate_loss(plain, params, data), b = evaluate_loss(checkpointed, params, data);
    EXPECT_NEAR(a.outputs.at(kFinalCost).item(), b.outputs.at(kFinalCost).item(), tol);
    ASSERT_EQ(a.gradients.size(), b.gradients.size());
    for (const auto& [name, g] : a.gradients) EXPECT_LE(max_abs_diff(g, b.gradients.at(name)), tol) << name;
  }
  const GradientMemory m = checkpointed.gradient_memory({kFinalCost});
  EXPECT_GT(m.recomputed_nodes, 0);
  // The duplicates are still in the optimized graph: CSE left them apart from the forward nodes.
  int marked = 0;
  for (const Node& n : checkpointed.gradient_graph({kFinalCost}).nodes())
    marked += n.attrs.has(kRecomputeAttr) && n.op == recomputed_op;
  EXPECT_GT(marked, 0) << recomputed_op;
  EXPECT_EQ(plain.gradient_memory({kFinalCost}).recomputed_nodes, 0);
}

TEST(GradientCheckpointing, SameGradientsOnTheReferenceBackend) {
  expect_same_gradients(deep_mlp(6, 16), {8, 12}, ReferenceBackend(), DType::Float64, 1e-12, "dropout");
  expect_same_gradients(deep_cnn(3), {4, 3, 6, 6}, ReferenceBackend(), DType::Float64, 1e-12, "conv2d");
}

TEST(GradientCheckpointing, SameGradientsOnTheCpuBackend) {
  expect_same_gradients(deep_mlp(6, 16), {8, 12}, CpuBackend(), DType::Float32, 1e-6, "dropout");
  expect_same_gradients(deep_cnn(3), {4, 3, 6, 6}, CpuBackend(), DType::Float32, 1e-5, "conv2d");
}

TEST(GradientCheckpointing, PlannedPeakIsLowerOnDeepModels) {
  struct Case {
    Model body;
    Shape input;
  };
  // Activations (batch x width) outweigh the weight gradients, which are outputs and live to the end.
  for (const Case& c : {Case{deep_mlp(12, 64), {1024, 32}}, Case{deep_cnn(6), {8, 3, 16, 16}}}) {
    const PhysicalModel pm = compile(with_loss(c.body), ReferenceBackend(), options_for(c.input, DType::Float32, true, 4));
    const GradientMemory m = pm.gradient_memory({kFinalCost});
    EXPECT_GT(m.planned_peak_bytes, 0);
    EXPECT_LT(m.planned_peak_bytes, m.without_checkpointing_bytes)
        << human_bytes(m.planned_peak_bytes) << " vs " << human_bytes(m.without_checkpointing_bytes);
  }
}

// The CPU backend's arena (what its executable holds for intermediates, after its own fusion and
// in-place reuse, not the compiler's plan) drops too, and arena_bytes is what a lowered
// executable of the gradient graph holds.
TEST(GradientCheckpointing, CpuArenaIsSmallerOnADeepMlp) {
  const CompileOptions o = options_for({1024, 32}, DType::Float32, true, 4);
  const PhysicalModel pm = compile(with_loss(deep_mlp(12, 64)), CpuBackend(), o);
  const GradientMemory m = pm.gradient_memory({kFinalCost});
  EXPECT_GT(m.arena_bytes, 0);
  EXPECT_LT(m.arena_bytes, m.without_checkpointing_arena_bytes)
      << human_bytes(m.arena_bytes) << " vs " << human_bytes(m.without_checkpointing_arena_bytes);
  const Graph& g = pm.gradient_graph({kFinalCost});
  std::vector<Shape> inputs;
  for (ValueId id : g.leaves())
    if (g.value(id).kind != ValueKind::Constant) inputs.push_back(to_shape(g.value(id).shape));
  EXPECT_EQ(cpu::execution_plan(*CpuBackend().lower(g, o), inputs).placement.arena_bytes, m.arena_bytes);
  // Without checkpointing both figures are the one arena; the reference backend has none.
  const GradientMemory plain =
      compile(with_loss(deep_mlp(12, 64)), CpuBackend(), options_for({1024, 32}, DType::Float32, false))
          .gradient_memory({kFinalCost});
  EXPECT_EQ(plain.arena_bytes, m.without_checkpointing_arena_bytes);
  EXPECT_EQ(compile(with_loss(deep_mlp(2, 4)), ReferenceBackend(), options_for({4, 6}, DType::Float32, true))
                .gradient_memory({kFinalCost})
                .arena_bytes,
            0);
}

TEST(GradientCheckpointing, OneSegmentRecomputesNothing) {
  const PhysicalModel pm = compile(with_loss(deep_mlp(4, 8)), ReferenceBackend(), options_for({4, 6}, DType::Float32, true, 1));
  const GradientMemory m = pm.gradient_memory({kFinalCost});
  EXPECT_EQ(m.recomputed_nodes, 0);
  EXPECT_EQ(m.planned_peak_bytes, m.without_checkpointing_bytes);
}

TEST(GradientCheckpointing, TrainStepMatchesThePlainStep) {
  const TrainModel tm = with_loss(deep_mlp(4, 16));
  const Shape input{8, 12};
  const SGD sgd({.lr = 0.1, .momentum = 0.9});
  const TrainStep plain = compile_train_step(tm, CpuBackend(), sgd, options_for(input, DType::Float32, false));
  const TrainStep checkpointed = compile_train_step(tm, CpuBackend(), sgd, options_for(input, DType::Float32, true, 2));
  EXPECT_GT(checkpointed.gradient_memory().recomputed_nodes, 0);
  EXPECT_EQ(plain.gradient_memory().without_checkpointing_bytes, plain.gradient_memory().planned_peak_bytes);
  TensorMap p1 = plain.randomize_params(4), p2 = checkpointed.randomize_params(4);
  OptimizerState s1 = plain.init_state(p1), s2 = checkpointed.init_state(p2);
  for (uint64_t i = 0; i < 3; ++i) {
    const TensorMap data = batch(input, DType::Float32, i);
    EXPECT_NEAR(plain.run(p1, s1, data).loss, checkpointed.run(p2, s2, data).loss, 1e-6);
  }
  for (const auto& [name, v] : p1) EXPECT_LE(max_abs_diff(v, p2.at(name)), 1e-6) << name;
}

TEST(GradientCheckpointing, OptionErrorsNameTheOption) {
  CompileOptions o;
  o.set("gradient_checkpointing", "on");
  o.set("checkpoint_segments", "4");
  EXPECT_TRUE(o.gradient_checkpointing);
  EXPECT_EQ(o.checkpoint_segments, 4);
  EXPECT_TRUE(Contains(error_of([&] { o.set("checkpoint_segments", "0"); }),
                       "Option 'checkpoint_segments': must be at least 1, got 0"));
  EXPECT_TRUE(Contains(error_of([&] { o.set("checkpoint_segments", "two"); }),
                       "Option 'checkpoint_segments': expected a whole number of segments, got 'two'"));
  EXPECT_TRUE(Contains(error_of([&] { o.set("checkpoint_segments", "2.5"); }), "got '2.5'"));
  EXPECT_TRUE(Contains(error_of([&] { o.set("gradient_checkpointing", "maybe"); }), "Option 'gradient_checkpointing'"));
  EXPECT_EQ(o.checkpoint_segments, 4) << "a rejected value leaves the option as it was";
  CompileOptions bad = options_for({4, 6}, DType::Float32, true, -1);
  EXPECT_TRUE(Contains(error_of([&] { compile(with_loss(deep_mlp(2, 4)), ReferenceBackend(), bad); }),
                       "Option 'checkpoint_segments': must be at least 1, got -1"));
}

}  // namespace
}  // namespace ingot::testing
