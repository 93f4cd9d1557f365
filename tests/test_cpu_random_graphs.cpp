// Random graphs of mixed ops (tests/random_graph.h) through the real CPU pipeline: the default
// optimization passes, then CpuBackend with the fusion plan it picks itself (default options),
// every output compared with the reference backend running the unoptimized graph.
#include <gtest/gtest.h>

#include <random>

#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "random_graph.h"

namespace ingot {
namespace {

// Odd sizes and size-1 dims; each shape's suffixes are in the list too, so binary ops broadcast.
const std::vector<Shape> kShapes = {{5, 7}, {1, 7}, {3, 1, 7}, {7}, {3, 5, 7}};

// Tolerances: float32 throughout; the generated code's vector tanh / sigmoid / sin and its
// reduction order differ from the reference kernels by a few ulp (summing at most 35 terms).
constexpr double kRtol = 1e-5, kAtol = 1e-5;

TEST(CpuRandomGraphs, MatchReferenceWithDefaultOptions) {
  if (testing::slow_tests_skipped()) GTEST_SKIP() << "INGOT_SKIP_SLOW=1: skipping 30 native builds";
  int fused = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    testing::RandomGraph rg = testing::random_graph(1000 + seed, 24, kShapes);
    const std::vector<Tensor> want = testing::run_graph(rg.graph, rg.inputs);
    Graph g = rg.graph;
    const CompileOptions o;
    optimize(g, o);
    for (const FusionGroup& grp : fusion_plan_for(g, o).groups) fused += grp.nodes.size() > 1;
    std::vector<Tensor> ins;
    for (ValueId id : g.leaves())
      if (g.value(id).kind != ValueKind::Constant) ins.push_back(rg.inputs.at(g.value(id).name));
    const std::vector<Tensor> got = CpuBackend(cpu_test::cpu_options()).lower(g, o)->run(ins);
    ASSERT_EQ(got.size(), want.size()) << "seed " << seed;
    for (size_t i = 0; i < want.size(); ++i)
      cpu_test::expect_same(got[i], want[i], "seed " + std::to_string(seed) + " output " + std::to_string(i) + "\n" +
                                                 print_graph(rg.graph),
                            kRtol, kAtol);
  }
  EXPECT_GT(fused, 5);  // the graphs exercise fused groups, not only single nodes
}

// Random elementwise chains feeding layer_norm / rms_norm (take_norm_prologues and the CPU
// backend's fused row kernel): operands of the input's shape, of the normalized dims, one value
// per row (not fusable) and scalar constants, random axes, sometimes the chain's value read
// again or made an output (not fusable either). Twelve blocks a graph, three graphs, batch 3
// and 1 of a symbolic leading dim, against the reference under the real fusion plan.
TEST(CpuRandomGraphs, NormProloguesMatchReference) {
  int fused = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    std::mt19937_64 rng(7000 + seed);
    Graph g;
    std::vector<ShapeConstraint> cs;
    std::vector<std::pair<std::string, Shape>> leaves;  // name, shape with the batch as 0
    auto input = [&](const std::string& name, Shape s) {
      const ValueId v = g.add_input(name);
      ShapeTemplate t;
      for (int64_t d : s) {
        if (d == 0) t.emplace_back(std::string("N"));
        else t.emplace_back(d);
      }
      cs.push_back({v, t, "", "test input"});
      leaves.emplace_back(name, s);
      return v;
    };
    for (int b = 0; b < 12; ++b) {
      const std::string p = "b" + std::to_string(b) + "_";
      const Shape xs = rng() % 2 ? Shape{0, 4, 6} : Shape{0, 10};
      const int rank = static_cast<int>(xs.size());
      const int axis = 1 + static_cast<int>(rng() % static_cast<uint64_t>(rank - 1));  // 1 .. rank-1
      const Shape normalized(xs.begin() + axis, xs.end());
      Shape per_row(xs.begin(), xs.begin() + axis);
      per_row.resize(xs.size(), 1);
      ValueId v = input(p + "x", xs);
      const int steps = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < steps; ++k) {
        const std::string name = p + std::to_string(k);
        const int what = static_cast<int>(rng() % 6);
        if (what == 0) {
          v = g.add_op("tanh", {v});
          continue;
        }
        const ValueId o = what == 1   ? input(name, xs)
                          : what == 2 ? input(name, normalized)
                          : what == 3 ? input(name, per_row)
                                      : cpu_test::scalar(g, 0.25 + 0.5 * k);
        static const char* kOps[] = {"add", "sub", "mul", "maximum"};
        const char* op = kOps[rng() % 4];
        v = rng() % 2 ? g.add_op(op, {v, o}) : g.add_op(op, {o, v});
      }
      const bool rms = rng() % 3 == 0;
      std::vector<ValueId> args{v};
      if (rng() % 2) args.push_back(input(p + "w", normalized));
      if (!rms && args.size() == 2 && rng() % 2) args.push_back(input(p + "bias", normalized));
      const ValueId y = g.add_op(rms ? "rms_norm" : "layer_norm", args, {{"axis", int64_t{axis}}});
      const int reuse = static_cast<int>(rng() % 5);
      if (reuse == 0) g.set_output(p + "sum", v);
      g.set_output(p + "y", reuse == 1 ? g.add_op("add", {y, v}) : y);
    }
    infer_shapes(g, cs);
    infer_types(g);
    verify(g);
    const FusionPlan plan = plan_fusion(g);
    for (const FusionGroup& grp : plan.groups) fused += grp.kind == GroupKind::RowKernel && grp.nodes.front() != grp.anchor;
    for (int64_t batch : {3, 1}) {
      std::vector<Tensor> ins;
      uint64_t k = 0;
      for (auto [name, s] : leaves) {
        for (int64_t& d : s)
          if (d == 0) d = batch;
        ins.push_back(testing::random_tensor(s, 100 * seed + 10 * static_cast<uint64_t>(batch) + k++, -2, 2));
      }
      SCOPED_TRACE("seed " + std::to_string(seed) + ", batch " + std::to_string(batch) + "\n" + print_graph(g));
      cpu_test::check(g, {ins}, [](const Graph& g) { return plan_fusion(g); }, 1e-5, 1e-5);
    }
  }
  EXPECT_GT(fused, 6);  // most chains become prologues
}

}  // namespace
}  // namespace ingot
