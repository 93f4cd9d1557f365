// Reverse-mode autodiff: the transform (append_backward) and gradients from
// PhysicalModel::evaluate(params, inputs, output_gradients): key sets, caching, both backends,
// and every error a user can cause.
#include <gtest/gtest.h>

#include "autodiff_test_util.h"
#include "ingot/cpu_backend.h"
#include "ingot/ingot.h"

namespace ingot::testing {
namespace {

// Linear -> Relu -> Linear -> sum: the smallest model with a loss.
Model small_mlp() {
  Model m;
  m += Linear(5);
  m += Relu();
  m += Linear(3)({{"output", IOKey("logits").expose()}});
  m.expose(m.connection("logits").sum(), "loss");
  return m;
}

TEST(Autodiff, SmallMlpMatchesFiniteDifferences) {
  Model m = small_mlp();
  CompileOptions o;
  o.shapes = {{"input", {"N", 4}}};
  o = float64_options(m, o);
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(pm.gradient_names(), (std::vector<std::string>{"linear_0.weight", "linear_0.bias",
                                                             "linear_1.weight", "linear_1.bias"}));
  TensorMap params = pm.randomize_params(3);
  TensorMap inputs{{"input", rnd({6, 4}, 7)}};
  check_model_gradients(pm, params, inputs, {{"loss", Tensor::scalar<double>(1.0)}});
  // A batch of another size reuses the same joint graph (symbolic N).
  check_model_gradients(pm, params, {{"input", rnd({2, 4}, 8)}}, {{"logits", rnd({2, 3}, 9)}});
}

TEST(Autodiff, KeySetsDecideWhatIsDifferentiated) {
  // y = x @ w + b with x trainable, b a constant (folded, no gradient) and s data.
  Model m;
  Connection x = m.input("x");
  Connection s = m.input("s");
  Connection w = m.parameter("w", Init::normal(1), ShapeTemplate{3, 2});
  Connection b = m.input("b");
  m.expose((matmul(x, w) + b) * s, "y");
  CompileOptions o;
  o.shapes = {{"x", {4, 3}}, {"s", {4, 2}}};
  o.trainable_keys = {"x"};
  o.data_keys = {"s"};
  o.constant_keys = {{"b", rnd({2}, 1)}};
  o = float64_options(m, o);
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(pm.gradient_names(), (std::vector<std::string>{"x", "w"}));
  TensorMap params = pm.randomize_params(0);
  params["x"] = rnd({4, 3}, 2);
  check_model_gradients(pm, params, {{"s", rnd({4, 2}, 3)}}, {{"y", rnd({4, 2}, 4)}});
}

TEST(Autodiff, UnconnectedParametersGetZeros) {
  // loss reads only `a`; `b` feeds another output that is not seeded.
  Model m;
  Connection x = m.input("x", ShapeTemplate{2});
  Connection a = m.parameter("a", Init::ones(), ShapeTemplate{2});
  Connection b = m.parameter("b", Init::ones(), ShapeTemplate{2});
  m.expose((x * a).sum(), "loss");
  m.expose(x * b, "other");
  PhysicalModel pm = compile(m, ReferenceBackend(), float64_options(m, {}));
  TensorMap params = pm.randomize_params(0);
  Evaluation r = pm.evaluate(params, {{"x", tensor<double>({3, 4}, {2})}}, {{"loss", Tensor::scalar<double>(2)}});
  EXPECT_EQ(r.gradients.at("a").to_vector<double>(), (std::vector<double>{6, 8}));
  EXPECT_EQ(r.gradients.at("b").to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(r.outputs.at("other").to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(r.outputs.at("loss").item(), 7);
}

TEST(Autodiff, JointGraphIsBuiltOncePerSeedSet) {
  Model m = small_mlp();
  CompileOptions o;
  o.shapes = {{"input", {"N", 4}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  const Graph& a = pm.gradient_graph({"loss"});
  const Graph& b = pm.gradient_graph({"loss", "loss"});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &pm.gradient_graph({"logits"}));
  EXPECT_TRUE(a.find_output("grad:linear_0.weight").has_value());
  EXPECT_TRUE(a.find_leaf("cotangent:loss").has_value());
  // Plain evaluate runs the forward graph alone.
  EXPECT_FALSE(pm.graph().find_output("grad:linear_0.weight").has_value());
}

TEST(Autodiff, VerboseShowsTheAutodiffStage) {
  Model m = small_mlp();
  CompileOptions o;
  o.shapes = {{"input", {2, 4}}};
  o.verbose = true;
  ::testing::internal::CaptureStderr();
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  pm.evaluate(pm.randomize_params(0), {{"input", Tensor::full(DType::Float32, {2, 4}, 1)}},
              {{"loss", Tensor::scalar<float>(1)}});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(Contains(log, "[ingot] autodiff"));
  EXPECT_TRUE(Contains(log, "seeded outputs: loss; 4 gradients"));
}

TEST(Autodiff, CpuBackendMatchesReference) {
  for (const bool symbolic : {false, true}) {
    Model m = small_mlp();
    CompileOptions o;
    o.shapes = {{"input", {symbolic ? Dim("N") : Dim(6), 4}}};
    PhysicalModel ref = compile(m, ReferenceBackend(), o);
    PhysicalModel cpu = compile(m, CpuBackend(), o);
    TensorMap params = ref.randomize_params(1);
    TensorMap inputs{{"input", random_tensor({6, 4}, 2)}};
    TensorMap seeds{{"loss", Tensor::scalar<float>(1)}, {"logits", random_tensor({6, 3}, 3)}};
    Evaluation a = ref.evaluate(params, inputs, seeds), b = cpu.evaluate(params, inputs, seeds);
    for (const auto& [name, g] : a.gradients) EXPECT_TRUE(allclose(b.gradients.at(name), g, 1e-5, 1e-6)) << name;
    for (const auto& [name, t] : a.outputs) EXPECT_TRUE(allclose(b.outputs.at(name), t, 1e-5, 1e-6)) << name;
  }
}

TEST(Autodiff, InferenceModelsRefuseGradients) {
  CompileOptions o;
  o.shapes = {{"input", {2, 4}}};
  o.inference = true;
  PhysicalModel pm = compile(small_mlp(), ReferenceBackend(), o);
  expect_error([&] {
    pm.evaluate(pm.randomize_params(0), {{"input", Tensor(DType::Float32, {2, 4})}}, {{"loss", Tensor::scalar<float>(1)}});
  }, "compiled with inference = true");
}

TEST(Autodiff, BadOutputGradientsNameTheTerminal) {
  CompileOptions o;
  o.shapes = {{"input", {"N", 4}}};
  PhysicalModel pm = compile(small_mlp(), ReferenceBackend(), o);
  const TensorMap params = pm.randomize_params(0);
  const TensorMap inputs{{"input", Tensor(DType::Float32, {2, 4})}};
  expect_error([&] { pm.evaluate(params, inputs, {{"los", Tensor::scalar<float>(1)}}); },
               "output_gradients: 'los' is not an output of the model (outputs: ");
  expect_error([&] { pm.evaluate(params, inputs, {{"loss", Tensor::scalar<double>(1)}}); },
               "output_gradients: Type mismatch at 'loss': expected float32, got float64");
  expect_error([&] { pm.evaluate(params, inputs, {{"logits", Tensor(DType::Float32, {2, 4})}}); },
               "output_gradients: Shape mismatch at 'logits': expected [N, 3], got [2, 4]");
  // N is 2 in the inputs, so a cotangent with N = 3 is inconsistent with the forward run.
  expect_error([&] { pm.evaluate(params, inputs, {{"logits", Tensor(DType::Float32, {3, 3})}}); },
               "dimension 'N' is 3 here but 2 at 'input'");
}

TEST(Autodiff, IntegerOutputsAndDiscardedOutputsCannotBeSeeded) {
  Model m = small_mlp();
  m.expose(apply("argmax", m.connection("logits"), {{"axis", int64_t{1}}}), "label");
  CompileOptions o;
  o.shapes = {{"input", {2, 4}}};
  o.discard_keys = {"logits"};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  const TensorMap params = pm.randomize_params(0);
  const TensorMap inputs{{"input", Tensor(DType::Float32, {2, 4})}};
  expect_error([&] { pm.evaluate(params, inputs, {{"label", Tensor(DType::Int64, {2})}}); },
               "output_gradients: output 'label' is int64 and cannot be differentiated");
  expect_error([&] { pm.evaluate(params, inputs, {{"logits", Tensor(DType::Float32, {2, 3})}}); },
               "'logits' is not an output of the model (outputs: loss, label)");
  // The discarded output is gone, the loss still differentiates through the wire it named.
  Evaluation r = pm.evaluate(params, inputs, {{"loss", Tensor::scalar<float>(1)}});
  EXPECT_EQ(r.gradients.size(), 4u);
  EXPECT_EQ(r.outputs.count("logits"), 0u);
}

// An op without a gradient rule, for the error test.
void register_op_without_gradient() {
  static bool done = [] {
    OpDef def = get_op("relu");
    def.name = "test_no_gradient_rule";
    def.vjp = nullptr;
    // Not relu's elementwise forms: their C++ definition (ig_relu) would be pasted a second time
    // into every program the CPU backend generates later in this process.
    def.elementwise = std::nullopt;
    def.fusion = FusionClass::Opaque;
    register_op(def);
    return true;
  }();
  (void)done;
}

TEST(Autodiff, OpWithoutRuleIsAnErrorNamingItAndItsScope) {
  register_op_without_gradient();
  Model m;
  m += Linear(3);
  m += Model::primitive("test_no_gradient_rule", {"input"}, {"output"});
  CompileOptions o;
  o.shapes = {{"input", {2, 4}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  expect_error([&] {
    pm.evaluate(pm.randomize_params(0), {{"input", Tensor(DType::Float32, {2, 4})}},
                {{"output", Tensor(DType::Float32, {2, 3})}});
  }, "Cannot differentiate through 'test_no_gradient_rule' in '");
  // With no parameter upstream of it, nothing needs to cross it.
  Model d;
  d += Model::primitive("test_no_gradient_rule", {"input"}, {"output"});
  d += Linear(3);
  PhysicalModel ok = compile(d, ReferenceBackend(), o);
  Evaluation r = ok.evaluate(ok.randomize_params(0), {{"input", Tensor(DType::Float32, {2, 4})}},
                             {{"output", Tensor::full(DType::Float32, {2, 3}, 1)}});
  EXPECT_EQ(r.gradients.size(), 2u);
}

TEST(Autodiff, GrownGraphReinfersToTheSameShapes) {
  // append_backward infers each node it adds; whole-graph inference from the leaves agrees.
  CompileOptions o;
  o.shapes = {{"input", {"N", 4}}};
  PhysicalModel pm = compile(small_mlp(), ReferenceBackend(), o);
  Graph g = pm.gradient_graph({"loss", "logits"});
  std::vector<std::string> before;
  for (const Value& v : g.values()) before.push_back(to_string(v.shape) + " " + std::string(dtype_name(v.dtype)));
  std::vector<ShapeConstraint> cs;
  for (ValueId id : g.leaves()) {
    if (g.value(id).kind == ValueKind::Constant) continue;
    ShapeTemplate t;
    for (const SymDim& d : g.value(id).shape) t.push_back(d.known() ? Dim(d.value) : Dim(d.symbol));
    cs.push_back({id, t, "", g.value(id).name});
  }
  for (Value& v : g.values())
    if (v.producer >= 0) v.shape_known = false;
  infer_shapes(g, cs);
  infer_types(g);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(to_string(g.values()[i].shape) + " " + std::string(dtype_name(g.values()[i].dtype)), before[i])
        << describe_value(g, static_cast<ValueId>(i));
}

TEST(Autodiff, AppendBackwardChecksItsArguments) {
  Graph g;
  const ValueId x = g.add_input("x");
  const ValueId y = g.add_op("exp", {x});
  infer_shapes(g, {{x, {3}, "", "x"}});
  infer_types(g);
  expect_error([&] { append_backward(g, {{y, 99}}, {x}); }, "cotangent %99 is not a value of the graph");
  expect_error([&] { append_backward(g, {{y, x}}, {42}); }, "wrt value %42");
  const ValueId c = g.add_constant("c", Tensor(DType::Float32, {4}));
  expect_error([&] { append_backward(g, {{y, c}}, {x}); }, "the cotangent of 'exp output' has shape [4], expected [3]");
}

TEST(Autodiff, SameValueSeededTwiceAddsItsCotangents) {
  // Two outputs naming one value each seed it; the cotangents add before any node is
  // differentiated (this used to read the current node before there was one).
  Graph g;
  const ValueId x = g.add_input("x");
  const ValueId y = g.add_op("exp", {x});
  const ValueId c1 = g.add_input("c1"), c2 = g.add_input("c2");
  infer_shapes(g, {{x, {3}, "", "x"}, {c1, {3}, "", "c1"}, {c2, {3}, "", "c2"}});
  infer_types(g);
  const std::vector<ValueId> grads = append_backward(g, {{y, c1}, {y, c2}}, {x});
  g.set_output("dx", grads.at(0));
  verify(g);
  const Tensor xs = Tensor::full(DType::Float32, {3}, 0.5), a = Tensor::full(DType::Float32, {3}, 1),
               b = Tensor::full(DType::Float32, {3}, 2);
  const std::vector<Tensor> out = ReferenceBackend().lower(g, CompileOptions{})->run(std::vector<Tensor>{xs, a, b});
  for (float v : out.at(0).to_vector<float>()) EXPECT_NEAR(v, 3 * std::exp(0.5), 1e-5);
}

}  // namespace
}  // namespace ingot::testing
