// Maximal elementwise fusion through the normal pipeline: models compiled with CpuBackend and
// default options, asserting on the fusion plan the backend was given (fusion_plan_for on the
// optimized graph), on the generated source (how many loop nests) and on the outputs against
// the reference backend.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/fusion_plan.h"
#include "compiler/passes/passes.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using cpu_test::count;
using cpu_test::cpu_options;
using testing::random_tensor;

struct Compiled {
  std::string plan;     // FusionPlan::str of the plan the backend lowered
  std::string kernels;  // the generated source's kernel section
};

// Compiles `m` with CpuBackend and with ReferenceBackend (default options but the input shapes),
// checks every output against the reference, and returns the plan and the kernels.
Compiled compile_and_check(const Model& m, const std::map<std::string, Tensor>& inputs) {
  CompileOptions o;
  for (const auto& [name, t] : inputs) {
    ShapeTemplate s;
    for (int64_t d : t.shape()) s.push_back(d);
    o.shapes[name] = s;
  }
  PhysicalModel cpu = compile(m, CpuBackend(cpu_options()), o);
  PhysicalModel ref = compile(m, ReferenceBackend(), o);
  TensorMap params = ref.randomize_params(1);
  TensorMap want = ref.evaluate(params, inputs), got = cpu.evaluate(params, inputs);
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) cpu_test::expect_same(got.at(name), w, "output '" + name + "'", 1e-5, 1e-6);
  // The executable compile made is private: lowering the same graph again is a cache hit.
  const std::string src = CpuBackend(cpu_options()).lower(cpu.graph(), o)->source();
  return {fusion_plan_for(cpu.graph(), o).str(cpu.graph()), src.substr(src.find("// ---- kernels ----"))};
}

Tensor input(std::vector<int64_t> shape, uint64_t seed) { return random_tensor(shape, seed, -3, 3); }

// 0.5*x*(1+tanh(c*(x+0.044715*x^3))) from primitives: `0.5 * x` reads only the input, so the
// greedy walk alone started a second group for it.
TEST(FusionRegions, GeluCompositeIsOneLoop) {
  Model m;
  Connection x = m.input("x");
  const double c = std::sqrt(2.0 / M_PI);
  m.expose(0.5 * x * (1.0 + apply("tanh", c * (x + 0.044715 * (x * x * x)))), "y");
  Compiled r = compile_and_check(m, {{"x", input({7, 129}, 1)}});
  EXPECT_EQ(count(r.plan, "group "), 1) << r.plan;
  EXPECT_EQ(count(r.plan, "[elementwise]"), 1) << r.plan;
  EXPECT_EQ(count(r.kernels, "static int k"), 1) << r.kernels;
  EXPECT_EQ(count(r.kernels, "[elementwise]"), 1) << r.kernels;
}

// Two chains that meet at their last node: relu(a) and tanh(b) each start from an input.
TEST(FusionRegions, SiblingChainsMeetingInOneNodeAreOneLoop) {
  Model m;
  Connection a = m.input("a"), b = m.input("b");
  m.expose(apply("relu", a) + apply("tanh", b), "y");
  Compiled r = compile_and_check(m, {{"a", input({5, 33}, 2)}, {"b", input({5, 33}, 3)}});
  EXPECT_EQ(count(r.plan, "group "), 1) << r.plan;
  EXPECT_EQ(count(r.plan, "[elementwise]"), 1) << r.plan;
  EXPECT_EQ(count(r.kernels, "static int k"), 1) << r.kernels;
}

// Operands of every size broadcast into one [5, 33] iteration space; a side output is one more
// store of the same loop.
TEST(FusionRegions, BroadcastingChainIsOneLoop) {
  Model m;
  Connection x = m.input("x"), bias = m.input("bias"), scale = m.input("scale"), shift = m.input("shift");
  Connection h = apply("relu", x + bias);
  m.expose(h, "h");
  m.expose(apply("sigmoid", h * scale - shift) * apply("exp", shift), "y");
  Compiled r = compile_and_check(
      m, {{"x", input({5, 33}, 4)}, {"bias", input({33}, 5)}, {"scale", input({1, 33}, 6)}, {"shift", input({5, 1}, 7)}});
  EXPECT_EQ(count(r.plan, "group "), 2) << r.plan;  // exp(shift) is [5, 1]: its own loop
  EXPECT_EQ(count(r.plan, "add relu mul sub sigmoid mul"), 1) << r.plan;
  EXPECT_EQ(count(r.kernels, "static int k"), 2) << r.kernels;
}

// x - sum(relu(x)) needs the whole sum before its first element, so the subtraction cannot run in
// relu's loop: merging relu's group with exp/sub's would put the reduction both before and after
// the merged loop (a cycle through a non-fused node), so there are two elementwise loops.
TEST(FusionRegions, ElementwiseAcrossAReductionDoesNotFuse) {
  Model m;
  Connection x = m.input("x");
  Connection y = apply("relu", x);
  // Built in this order on purpose: the operands of `-` are evaluated in an order C++ leaves
  // open (GCC and clang differ), and with exp before the sum exp may join relu's loop instead.
  Connection total = y.sum({-1}, true);
  Connection e = apply("exp", y);
  m.expose(e - total, "z");
  Compiled r = compile_and_check(m, {{"x", input({6, 17}, 8)}});
  EXPECT_EQ(r.plan, "group 0 [elementwise]: relu\ngroup 1 [reduction]: sum\ngroup 2 [elementwise]: exp sub\n");
  EXPECT_EQ(count(r.kernels, "[elementwise]"), 2) << r.kernels;
}

}  // namespace
}  // namespace ingot
