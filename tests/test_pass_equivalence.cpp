// Every optimization pass, alone and as the pipeline at every optimization_level, leaves the
// results of random model-like graphs unchanged (tests/random_graph.h with model_ops: conv2d,
// batch_norm, pooling, softmax, matmul with bias, transposes, reshapes, broadcast scalars and
// constants, parameters), on the reference backend. Inference graphs compare their outputs;
// training graphs are the joint forward + backward graph the pipeline optimizes (autodiff runs
// before the passes), so the gradients of every input and parameter are compared too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "compiler/autodiff.h"
#include "compiler/passes/passes.h"
#include "ingot/ingot.h"
#include "random_graph.h"

namespace ingot {
namespace {

constexpr uint64_t kSeeds = 300;

// The graph the passes see: the forward graph in inference; in training, the forward graph plus
// the backward graph of every output (a random cotangent each) with respect to every input and
// parameter, whose gradients become outputs "grad:<leaf>".
testing::RandomGraph graph_for_mode(uint64_t seed, bool training) {
  testing::RandomGraph rg = testing::random_graph(seed, testing::RandomGraphOptions{.num_ops = 24, .model_ops = true});
  if (!training) return rg;
  Graph& g = rg.graph;
  std::vector<std::pair<ValueId, ValueId>> seeds;
  const auto outputs = g.outputs();
  for (const auto& [name, v] : outputs) {
    if (g.value(v).kind == ValueKind::Constant) continue;  // nothing to differentiate
    const Shape s = to_shape(g.value(v).shape);
    const std::string cot = "cotangent:" + name;
    const ValueId c = g.add_input(cot);
    g.value(c).shape = g.value(v).shape;
    g.value(c).dtype = g.value(v).dtype;
    g.value(c).shape_known = true;
    rg.inputs[cot] = testing::random_tensor(s, seed * 7 + seeds.size() + 1);
    seeds.emplace_back(v, c);
  }
  std::vector<ValueId> wrt;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    if (v.kind != ValueKind::Constant && v.name.rfind("cotangent:", 0) != 0) wrt.push_back(id);
  }
  const std::vector<ValueId> grads = append_backward(g, seeds, wrt);
  for (size_t i = 0; i < wrt.size(); ++i) g.set_output("grad:" + g.value(wrt[i]).name, grads[i]);
  verify(g);
  return rg;
}

// max |a - b| <= tol * max(1, max |b|): the scale-relative check of a low-precision result.
bool close_to_scale(const Tensor& a, const Tensor& b, double tol) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.astype(DType::Float64).to_vector<double>();
  const std::vector<double> y = b.astype(DType::Float64).to_vector<double>();
  double diff = 0, scale = 1;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff <= tol * scale;
}

struct Checker {
  const testing::RandomGraph& rg;
  std::vector<Tensor> expected;
  uint64_t seed;
  bool training;

  // Runs `g` and compares every output with the unoptimized graph's; `what` names the run.
  void compare(const Graph& g, const std::string& what, double low_precision_tol = 0) const {
    check_annotated(g, what);
    std::vector<Tensor> got = testing::run_graph(g, rg.inputs);
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string name = g.outputs()[i].first;
      EXPECT_EQ(got[i].dtype(), expected[i].dtype()) << what << " seed " << seed << " output " << name;
      const bool ok = low_precision_tol > 0 ? close_to_scale(got[i], expected[i], low_precision_tol)
                                            : allclose(got[i], expected[i], 1e-4, 1e-5);
      EXPECT_TRUE(ok) << what << ", " << (training ? "training" : "inference") << ", seed " << seed << ", output "
                      << name << "\n"
                      << print_graph(rg.graph) << "\n"
                      << print_graph(g);
    }
  }
};

// Per pass, how many seeds it changed something on (so "every pass" is not vacuous).
using Fired = std::map<std::string, int>;

void check_seed(uint64_t seed, bool training, Fired& fired) {
  const testing::RandomGraph rg = graph_for_mode(seed, training);
  const Checker check{rg, testing::run_graph(rg.graph, rg.inputs), seed, training};
  PassContext ctx;
  ctx.inference = !training;
  // Small enough that batch_chunking splits these tiny batches (its real threshold is 512 MiB).
  ctx.chunk_bytes = 64;
  for (const PassInfo& p : builtin_passes()) {
    Graph one = rg.graph;
    PassContext c = ctx;
    if (p.name == "mixed_precision") c.mixed_precision = "float16";
    const PassReport r = p.fn(one, c);
    if (p.name == "layout" || p.name == "fusion") {
      // Decisions for backends, not rewrites: the graph must come back unchanged, and "fired"
      // means the plan decided something (a channels-last buffer, a group of several nodes).
      EXPECT_EQ(print_graph(one), print_graph(rg.graph)) << p.name << " seed " << seed;
      bool decided = false;
      if (p.name == "layout")
        for (Layout l : plan_layouts(one).of_value) decided = decided || l != Layout::Nchw;
      else
        for (const FusionGroup& grp : plan_fusion(one).groups) decided = decided || grp.nodes.size() > 1;
      fired[p.name] += decided;
    } else {
      fired[p.name] += r.changes > 0;
    }
    // float16 matmul / conv2d inputs: compared against the output's scale.
    check.compare(one, "pass " + p.name, p.name == "mixed_precision" ? 3e-2 : 0);
  }
  for (const char* level : {"none", "low", "medium", "high"}) {
    CompileOptions o;
    o.inference = !training;
    o.optimization_level = level;
    Graph g = rg.graph;
    optimize(g, o);
    check.compare(g, std::string("optimize at level ") + level);
    // The same passes with the small chunk size, so batch chunking runs inside the pipeline too.
    Graph chunked = rg.graph;
    for (const PassInfo& p : builtin_passes())
      if (pass_enabled(o, p.name)) p.fn(chunked, ctx);
    check.compare(chunked, std::string("passes of level ") + level + " with small batch chunks");
  }
  CompileOptions mp;
  mp.inference = !training;
  mp.mixed_precision = "bfloat16";
  Graph g = rg.graph;
  optimize(g, mp);
  check.compare(g, "optimize with mixed_precision bfloat16", 6e-2);
}

void check_mode(bool training) {
  Fired fired;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    check_seed(seed, training, fired);
    if (::testing::Test::HasFailure()) return;  // one seed's report is enough to read
  }
  for (const PassInfo& p : builtin_passes()) {
    // Training graphs are never batch-chunked (the pass is inference-only, by design).
    if (training && p.name == "batch_chunking") {
      EXPECT_EQ(fired[p.name], 0);
      continue;
    }
    // The model graphs hold no control flow: tests/test_control_flow.cpp checks that pass.
    if (p.name == "control_flow") continue;
    // Nor data-parallel gradient all-reduces: tests/test_data_parallel.cpp checks that pass (the
    // buckets' placement, and training against no buckets in a group of one and on 2 and 4 ranks).
    if (p.name == "gradient_buckets") continue;
    EXPECT_GT(fired[p.name], 0) << p.name << " changed nothing on " << kSeeds << " seeds";
  }
}

TEST(PassEquivalence, ModelGraphsInferenceEveryPassAndLevel) { check_mode(false); }

TEST(PassEquivalence, ModelGraphsTrainingEveryPassAndLevelWithGradients) { check_mode(true); }

}  // namespace
}  // namespace ingot
