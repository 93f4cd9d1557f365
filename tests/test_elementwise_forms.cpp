// An elementwise op is one definition: its OpDef carries the forms (ElementwiseForms) that the
// CPU code generator, the Python emitters and ONNX import/export read. These tests check that
// every registered form is complete and reaches each layer, and that an op defined only here,
// in one place, runs natively on the CPU backend with the reference's results.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/codegen.h"
#include "backends/cpu/prelude.h"
#include "compiler/fusion_plan.h"
#include "cpu_test_util.h"
#include "ir/op_registry.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;

namespace {

using K = ElementwiseForms::Kind;

// softsign(x) = x / (1 + |x|), written once: reference kernel, rules, gradient and forms.
void softsign_kernel(const Node&, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor x = in[0].astype(DType::Float64);
  Tensor y(DType::Float64, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = x.data<double>()[i] / (1 + std::abs(x.data<double>()[i]));
  out[0] = y.astype(to_floating(in[0].dtype()));
}

const OpDef& softsign() {
  static const bool registered = [] {
    OpDef def{"test_softsign", 1, 1, 1, FusionClass::Elementwise,
              [](ShapeInfer& s) { s.same_shape(s.in(0), s.out()); },
              [](const Node&, std::span<const DType> in, std::span<DType> out) { out[0] = to_floating(in[0]); },
              softsign_kernel, "x / (1 + |x|)", nullptr};
    def.elementwise = ElementwiseForms{
        .kind = K::UnaryFloat,
        .cpu_function = "ig_test_softsign",
        .cpu_source = "template <class C> inline C ig_test_softsign(C x) { return x / (C(1) + std::abs(x)); }",
        .python = "x / (1 + abs(x))",
        .onnx = "Softsign"};
    register_op(std::move(def));
    return true;
  }();
  (void)registered;
  return get_op("test_softsign");
}

TEST(ElementwiseForms, EveryFormIsComplete) {
  int count = 0;
  for (const OpDef* op : all_ops()) {
    if (!op->elementwise) continue;
    SCOPED_TRACE(op->name);
    ++count;
    const ElementwiseForms& f = *op->elementwise;
    EXPECT_EQ(op->fusion, FusionClass::Elementwise);
    switch (f.kind) {
      case K::UnaryFloat:
      case K::UnarySame:
      case K::Binary:
        EXPECT_EQ(op->min_inputs, f.kind == K::Binary ? 2 : 1);
        EXPECT_EQ(f.cpu_function.rfind("ig_", 0), 0u);
        // The source defines the function it names (and the vector math it calls exists).
        EXPECT_NE(f.cpu_source.find("inline C " + f.cpu_function + "("), std::string::npos);
        if (f.cpu_vector_math) {
          EXPECT_NE(cpu::prelude(false).find("float ig_v" + f.cpu_function.substr(3) + "("), std::string::npos);
        }
        break;
      case K::Compare:
        EXPECT_TRUE(f.cpu_function == "==" || f.cpu_function == "!=" || f.cpu_function == "<" ||
                    f.cpu_function == "<=" || f.cpu_function == ">" || f.cpu_function == ">=");
        EXPECT_TRUE(f.cpu_source.empty());
        break;
      default: EXPECT_TRUE(f.cpu_source.empty() && f.python.empty() && f.onnx.empty());
    }
  }
  EXPECT_GE(count, 35);
}

TEST(ElementwiseForms, ThePreludeHoldsEveryOpsFunctionInRegistrationOrder) {
  const std::string prelude = cpu::prelude(false);
  size_t last = 0;
  for (const OpDef* op : ops_in_registration_order()) {
    if (!op->elementwise || op->elementwise->cpu_source.empty()) continue;
    const size_t at = prelude.find(op->elementwise->cpu_source);
    ASSERT_NE(at, std::string::npos) << op->name;
    EXPECT_GT(at, last) << op->name;  // abs calls neg: a function follows what it calls
    last = at;
  }
  // Before the run-time support that calls them (softmax's ig_exp).
  EXPECT_LT(last, prelude.find("---- run-time support ----"));
}

TEST(ElementwiseForms, AnOpDefinedInOnePlaceRunsNativelyOnTheCpuBackend) {
  softsign();
  Graph g = make_graph({{"x", {4, 33}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const ValueId s = g.add_op("test_softsign", {in[0]});
    g.set_output("y", s);
    g.set_output("z", g.add_op("mul", {g.add_op("test_softsign", {g.add_op("exp", {s})}), in[0]}));
  });
  Tensor x = ingot::testing::random_tensor({4, 33}, 7, -6, 6);
  // Against the reference kernel, one op per kernel and fused into one loop.
  EXPECT_NE(check(g, {{x}}).find("ig_test_softsign<float>"), std::string::npos);
  const std::string fused = check(g, {{x}}, [](const Graph& g) { return plan_fusion(g); });
  EXPECT_NE(fused.find("_fused_"), std::string::npos);
  cpu::GeneratedCode code = cpu::generate_cpp(g, unfused_plan(g), nchw_plan(g), {});
  EXPECT_TRUE(code.fallback_nodes.empty());
  // float64 and an integer input (computed in float32, as the dtype rule says).
  Graph g64 = make_graph({{"x", {5}, DType::Float64}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", g.add_op("test_softsign", {in[0]}));
  });
  check(g64, {{ingot::testing::random_tensor({5}, 8, -3, 3, DType::Float64)}});
}

}  // namespace
