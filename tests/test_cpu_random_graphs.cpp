// Random graphs of mixed ops (tests/random_graph.h) through the real CPU pipeline: the default
// optimization passes, then CpuBackend with the fusion plan it picks itself (default options),
// every output compared with the reference backend running the unoptimized graph.
#include <gtest/gtest.h>

#include "compiler/passes/passes.h"
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

}  // namespace
}  // namespace ingot
