// The differential fuzzer's smoke budget (fuzz/programs.h): a fixed seed of random programs from
// the op registry, each batch compiled under every variation and checked against the reference
// interpreter; and proof that the check catches a compiler that computes something else.
#include <gtest/gtest.h>

#include "cpu_test_util.h"
#include "ir/op_registry.h"
#include "programs.h"

using namespace ingot;

TEST(ProgramFuzz, SmokeBudgetFindsNothing) {
  const int graphs = ingot::testing::slow_tests_skipped() ? 1 : 3;
  for (int k = 0; k < graphs; ++k) {
    const fuzz::Batch b = fuzz::random_batch(static_cast<uint64_t>(100 + k));
    EXPECT_GT(b.graph.nodes().size(), 10u);
    for (const fuzz::Variation& v : fuzz::variations()) {
      const std::optional<fuzz::Finding> f = fuzz::check(b, v, cpu_test::cpu_options());
      EXPECT_FALSE(f.has_value()) << (f ? f->str() : "");
    }
  }
  const std::map<std::string, int> c = fuzz::coverage();
  int covered = 0;
  for (const auto& [op, n] : c) covered += n > 0;
  EXPECT_GT(covered, 15) << "the registry's ops are drawn";
}

// A "compiler bug" planted as a custom pass that turns every add into a subtract: the check
// reports it with the seed and the variation.
TEST(ProgramFuzz, CatchesAMiscompilation) {
  fuzz::Batch b;
  bool has_add = false;
  for (uint64_t seed = 200; !has_add && seed < 260; ++seed) {
    b = fuzz::random_batch(seed);
    for (const Node& n : b.graph.nodes()) has_add = has_add || n.op == "add";
  }
  ASSERT_TRUE(has_add);
  fuzz::Variation broken{"add becomes sub", {}};
  broken.options.custom_passes.push_back({"plant_bug", "end", [](Graph& g) {
                                            for (Node& n : g.nodes())
                                              if (n.op == "add") n.op = "sub";
                                          }});
  const std::optional<fuzz::Finding> f = fuzz::check(b, broken, cpu_test::cpu_options());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->seed, b.seed);
  EXPECT_NE(f->str().find("add becomes sub"), std::string::npos) << f->str();
}

// Every op's attribute sampler (OpDef::sample_attrs) draws attributes the op's own shape and
// dtype rules accept, for an operand of rank 1 to 4, and its reference kernel runs on them.
TEST(ProgramFuzz, AttrSamplersDrawValidAttributes) {
  int with_sampler = 0;
  for (const OpDef* op : all_ops()) {
    if (op->sample_attrs == nullptr || op->min_inputs != 1) continue;
    ++with_sampler;
    for (uint64_t seed = 0; seed < 24; ++seed) {
      Shape s;
      for (uint64_t d = 0; d < 1 + seed % 4; ++d) s.push_back(static_cast<int64_t>(1 + (seed + 3 * d) % 5));
      if (op->name.find("pool2d") != std::string::npos && s.size() != 4) continue;  // pools take NCHW only
      const Attrs a = op->sample_attrs({&s, 1}, seed);
      SCOPED_TRACE(op->name + " on " + to_string(s) + ", seed " + std::to_string(seed));
      Graph g;
      const ValueId x = g.add_input("x");
      g.value(x).dtype = DType::Float32;
      g.add_node(op->name, {x}, a, op->num_outputs);
      EXPECT_NO_THROW({
        infer_shapes(g, {{x, ingot::testing::template_of(s), "", "test"}});
        infer_types(g);
        std::vector<Tensor> outs(static_cast<size_t>(op->num_outputs));
        const std::vector<Tensor> ins = {Tensor::full(DType::Float32, s, 1.0)};
        op->eval(g.nodes().back(), ins, outs);
      });
    }
  }
  EXPECT_GE(with_sampler, 17) << "reductions, row kernels, movement ops and pools have samplers";
}
