// Logical models: composition (|= and +=), shared wires, nesting and hierarchical names,
// exposed outputs, functional expressions, IOKey and set_* settings, symbolic and bidirectional
// shapes, key sets, and the errors a user can cause while building or compiling a model.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using ingot::testing::error_of;
using ingot::testing::random_tensor;
using ingot::testing::shape_of;
using ingot::testing::Contains;

namespace {

using Names = std::vector<std::string>;

CompileOptions with_shapes(std::map<std::string, ShapeTemplate> shapes, bool inference = false) {
  CompileOptions o;
  o.shapes = std::move(shapes);
  o.inference = inference;
  return o;
}

PhysicalModel compile_ref(const Model& m, const CompileOptions& o = {}) {
  return compile(m, ReferenceBackend(), o);
}

// y = x @ w + b in double, x [n, k], w [k, m], b [m].
std::vector<double> affine(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t n = x.dim(0), k = x.dim(1), m = w.dim(1);
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> y(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = bv[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p)
        acc += xv[static_cast<size_t>(i * k + p)] * wv[static_cast<size_t>(p * m + j)];
      y[static_cast<size_t>(i * m + j)] = acc;
    }
  return y;
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.item(static_cast<int64_t>(i)), want[i], tol) << "element " << i;
}

}  // namespace

// ---------------------------------------------------------------- composition

TEST(Model, PlusEqualsChainsCanonicalTerminals) {
  Model m;
  m += Linear(4);
  m += Relu();
  m += Linear(2);
  EXPECT_EQ(m.input_keys(), (Names{"input", "linear_0.weight", "linear_0.bias", "linear_1.weight",
                                   "linear_1.bias"}));
  EXPECT_EQ(m.output_keys(), (Names{"output"}));
  PhysicalModel pm = compile_ref(m, with_shapes({{"input", {"N", 3}}}));
  EXPECT_EQ(pm.input_names(), (Names{"input"}));
  EXPECT_EQ(shape_of(pm, "linear_0.weight"), "[3, 4]");
  EXPECT_EQ(shape_of(pm, "linear_1.weight"), "[4, 2]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 2]");
}

TEST(Model, PipeEqualsLinksOnlyWhatTheCallNames) {
  // Without links, |= leaves the new block's input unconnected: it becomes a model input.
  Model m;
  m |= Linear(4);
  m |= Linear(2);
  EXPECT_EQ(m.input_keys(), (Names{"input", "linear_0.weight", "linear_0.bias", "linear_1.input",
                                   "linear_1.weight", "linear_1.bias"}));
  EXPECT_EQ(m.output_keys(), (Names{"output"}));
  // The canonical output moved to linear_1, so linear_0 feeds nothing and is not compiled.
  PhysicalModel pm = compile_ref(m, with_shapes({{"linear_1.input", {5, 3}}}));
  EXPECT_EQ(pm.input_names(), (Names{"linear_1.input"}));
  EXPECT_EQ(pm.parameter_names(), (Names{"linear_1.weight", "linear_1.bias"}));
  EXPECT_EQ(shape_of(pm, "output"), "[5, 2]");
}

TEST(Model, TerminalsLinkedToOneNameShareAWire) {
  // Both Linears read "x" and share the weight "w": tied weights, one parameter.
  Model m;
  m |= Linear(4)({{"input", "x"}, {"weight", "w"}, {"output", IOKey("y1").expose()}});
  m |= Linear(4)({{"input", "x"}, {"weight", "w"}, {"output", IOKey("y2").expose()}});
  EXPECT_EQ(m.output_keys(), (Names{"y1", "y2"}));
  PhysicalModel pm = compile_ref(m, with_shapes({{"x", {2, 3}}}));
  EXPECT_EQ(pm.input_names(), (Names{"x"}));
  EXPECT_EQ(pm.parameter_names(), (Names{"w", "linear_0.bias", "linear_1.bias"}));
  EXPECT_EQ(shape_of(pm, "w"), "[3, 4]");

  TensorMap params = pm.randomize_params(3);
  params["linear_1.bias"] = random_tensor({4}, 4);
  Tensor x = random_tensor({2, 3}, 5);
  TensorMap out = pm.evaluate(params, {{"x", x}});
  expect_values(out.at("y1"), affine(x, params.at("w"), params.at("linear_0.bias")));
  expect_values(out.at("y2"), affine(x, params.at("w"), params.at("linear_1.bias")));
}

TEST(Model, HandlesFromAddLinkLaterBlocks) {
  Model m;
  auto first = m.add(Linear(3), {{"input", "x"}});
  ASSERT_TRUE(first.count("output"));
  m.add(Tanh(), {{"input", first.at("output")}, {"output", "y"}});
  PhysicalModel pm = compile_ref(m, with_shapes({{"x", {1, 2}}}));
  EXPECT_EQ(pm.output_names(), (Names{"y"}));
  TensorMap params = pm.randomize_params(0);
  Tensor x = random_tensor({1, 2}, 1);
  std::vector<double> want = affine(x, params.at("linear_0.weight"), params.at("linear_0.bias"));
  for (double& v : want) v = std::tanh(v);
  expect_values(pm.evaluate(params, {{"x", x}}).at("y"), want);
}

TEST(Model, NestedModelsNameParametersByPath) {
  Model encoder;
  encoder += MLP({8, 4});
  encoder += Relu();
  Model m;
  m += encoder;                                     // a plain Model is named "model_0"
  m += MLP({2});                                    // "mlp_0"
  m.add(Linear(2), {{"input", m.cout()}}, "head");  // an explicit instance name
  Model named = Linear(3);
  m += named.set_name("proj");
  EXPECT_EQ(m.input_keys(),
            (Names{"input", "model_0.mlp_0.linear_0.weight", "model_0.mlp_0.linear_0.bias",
                   "model_0.mlp_0.linear_1.weight", "model_0.mlp_0.linear_1.bias",
                   "mlp_0.linear_0.weight", "mlp_0.linear_0.bias", "head.weight", "head.bias",
                   "proj.weight", "proj.bias"}));
  PhysicalModel pm = compile_ref(m, with_shapes({{"input", {"N", 5}}}));
  EXPECT_EQ(shape_of(pm, "model_0.mlp_0.linear_0.weight"), "[5, 8]");
  EXPECT_EQ(shape_of(pm, "model_0.mlp_0.linear_1.weight"), "[8, 4]");
  EXPECT_EQ(shape_of(pm, "mlp_0.linear_0.weight"), "[4, 2]");
  EXPECT_EQ(shape_of(pm, "proj.weight"), "[2, 3]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 3]");
  // Nodes keep the block path they came from.
  bool found = false;
  for (const Node& n : pm.graph().nodes())
    found = found || n.scope == "model_0.mlp_0.linear_1.matmul_0";
  EXPECT_TRUE(found);
  EXPECT_TRUE(Contains(error_of([&] { m.add(Relu(), {}, "head"); }),
                       "A block named 'head' is already in this model"));
}

TEST(Model, ExposedWiresAreOutputs) {
  Model m;
  m += Linear(4)({{"output", IOKey("hidden").expose()}});
  m += Relu();
  EXPECT_EQ(m.output_keys(), (Names{"hidden", "output"}));
  // The canonical output follows the last block added, functional ones included: relu's
  // unnamed output stops being an output once the sigmoid is added after it.
  m.expose(apply("sigmoid", m.connection("hidden")), "gate");
  EXPECT_EQ(m.output_keys(), (Names{"hidden", "gate"}));
  m.expose(m.add(Relu(), {{"input", "hidden"}}).at("output"), "act");
  PhysicalModel pm = compile_ref(m, with_shapes({{"input", {2, 3}}}));
  EXPECT_EQ(pm.output_names(), (Names{"hidden", "gate", "act"}));
  TensorMap params = pm.randomize_params(1);
  TensorMap out = pm.evaluate(params, {{"input", random_tensor({2, 3}, 2)}});
  for (int64_t i = 0; i < 8; ++i) {
    double h = out.at("hidden").item(i);
    EXPECT_NEAR(out.at("act").item(i), std::max(h, 0.0), 1e-6);
    EXPECT_NEAR(out.at("gate").item(i), 1 / (1 + std::exp(-h)), 1e-6);
  }
  // A named wire that a later block reads stops being an output unless exposed.
  Model n;
  n += Linear(4)({{"output", "hidden"}});
  n += Relu();
  EXPECT_EQ(n.output_keys(), (Names{"output"}));
}

// The seed's example: a Linear writes to "unused", which nothing reads and nobody exposed. As a
// block the model still has it as an output terminal; compiled, it is eliminated with its
// parameters, unless CompileOptions::outputs asks for it.
TEST(Model, UnexposedDanglingWiresAreEliminated) {
  Model m;
  m |= Linear(3)({{"input", "x"}, {"output", "unused"}});
  m |= Linear(4)({{"input", "x"}, {"output", "y"}});
  EXPECT_EQ(m.output_keys(), (Names{"unused", "y"}));  // terminals when nested in another model

  CompileOptions o = with_shapes({{"x", {2, 5}}});
  o.verbose = true;
  ::testing::internal::CaptureStderr();
  PhysicalModel pm = compile_ref(m, o);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(pm.output_names(), (Names{"y"}));
  EXPECT_EQ(pm.parameter_names(), (Names{"linear_1.weight", "linear_1.bias"}));
  EXPECT_TRUE(Contains(log, "output 'unused' not exposed: eliminated (ask for it with outputs=[...])")) << log;
  TensorMap params = pm.randomize_params(1);
  EXPECT_EQ(params.count("linear_0.weight"), 0u);
  const Tensor x = random_tensor({2, 5}, 2);
  TensorMap out = pm.evaluate(params, {{"x", x}});
  expect_values(out.at("y"), affine(x, params.at("linear_1.weight"), params.at("linear_1.bias")));

  // Asked for by name (an internal wire too), it is an output again and needs its parameters.
  CompileOptions keep = with_shapes({{"x", {2, 5}}});
  keep.set("outputs", "unused,linear_1.weight");
  PhysicalModel all = compile_ref(m, keep);
  EXPECT_EQ(all.output_names(), (Names{"unused", "linear_1.weight", "y"}));  // in wire order
  EXPECT_EQ(all.parameter_names(), (Names{"linear_0.weight", "linear_0.bias", "linear_1.weight", "linear_1.bias"}));

  // Exposing a wire makes the exposed wires the outputs: the canonical output is one only when exposed.
  Model e;
  e |= Linear(3)({{"input", "x"}, {"output", IOKey("unused").expose()}});
  e |= Linear(4)({{"input", "x"}, {"output", "y"}});
  EXPECT_EQ(compile_ref(e, with_shapes({{"x", {2, 5}}})).output_names(), (Names{"unused"}));
}

TEST(ModelErrors, UnknownExtraOutputListsTheWires) {
  Model m;
  m |= Linear(3)({{"input", "x"}, {"output", "y"}});
  CompileOptions o = with_shapes({{"x", {2, 5}}});
  o.outputs = {"nope"};
  const std::string msg = error_of([&] { compile_ref(m, o); });
  EXPECT_TRUE(Contains(msg, "outputs: 'nope' is not a wire of the model (wires: x, linear_0.weight, linear_0.bias, y"))
      << msg;
  CompileOptions parsed;
  parsed.set("outputs", "a,b");
  EXPECT_EQ(parsed.outputs, (Names{"a", "b"}));
}

TEST(Model, FunctionalExpressionsMatchHandComputation) {
  Model m;
  Connection x = m.input("x", ShapeTemplate{2, 3});
  Connection w = m.parameter("w", Init::normal(0.5), ShapeTemplate{3, 4});
  m.expose(matmul(x, w) * 2.0 - 1.0, "affine");
  m.expose(x.T(), "xt");
  m.expose(x.reshape({3, 2}), "reshaped");
  m.expose(x.sum({1}), "row_sum");
  m.expose(x.mean(), "mean");
  m.expose(x.max({0}, true), "col_max");
  m.expose(x[1], "row1");
  m.expose(x.slice(1, 0, 3, 2), "cols_0_2");
  m.expose(pow(x, 2.0) / (x * x + 1.0), "ratio");
  m.expose(1.0 - apply("exp", -x), "one_minus_exp");
  PhysicalModel pm = compile_ref(m);
  EXPECT_EQ(shape_of(pm, "affine"), "[2, 4]");
  EXPECT_EQ(shape_of(pm, "xt"), "[3, 2]");
  EXPECT_EQ(shape_of(pm, "reshaped"), "[3, 2]");
  EXPECT_EQ(shape_of(pm, "row_sum"), "[2]");
  EXPECT_EQ(shape_of(pm, "mean"), "[]");
  EXPECT_EQ(shape_of(pm, "col_max"), "[1, 3]");
  EXPECT_EQ(shape_of(pm, "row1"), "[3]");
  EXPECT_EQ(shape_of(pm, "cols_0_2"), "[2, 2]");

  TensorMap params = pm.randomize_params(2);
  Tensor xt = random_tensor({2, 3}, 7);
  TensorMap out = pm.evaluate(params, {{"x", xt}});
  auto v = xt.to_vector<double>();
  auto at = [&](int i, int j) { return v[static_cast<size_t>(i * 3 + j)]; };
  std::vector<double> aff = affine(xt, params.at("w"), Tensor::full(DType::Float32, {4}, 0));
  for (double& a : aff) a = a * 2 - 1;
  expect_values(out.at("affine"), aff);
  expect_values(out.at("xt"), {at(0, 0), at(1, 0), at(0, 1), at(1, 1), at(0, 2), at(1, 2)});
  expect_values(out.at("reshaped"), v);
  expect_values(out.at("row_sum"),
                {at(0, 0) + at(0, 1) + at(0, 2), at(1, 0) + at(1, 1) + at(1, 2)});
  double total = 0;
  for (double e : v) total += e;
  expect_values(out.at("mean"), {total / 6});
  expect_values(out.at("col_max"), {std::max(at(0, 0), at(1, 0)), std::max(at(0, 1), at(1, 1)),
                                    std::max(at(0, 2), at(1, 2))});
  expect_values(out.at("row1"), {at(1, 0), at(1, 1), at(1, 2)});
  expect_values(out.at("cols_0_2"), {at(0, 0), at(0, 2), at(1, 0), at(1, 2)});
  std::vector<double> ratio, ome;
  for (double e : v) {
    ratio.push_back(e * e / (e * e + 1));
    ome.push_back(1 - std::exp(-e));
  }
  expect_values(out.at("ratio"), ratio);
  expect_values(out.at("one_minus_exp"), ome);
}

TEST(Model, TerminalsReportRolesShapesAndTypes) {
  Model m = Embedding(10, 4);
  std::vector<TerminalInfo> ts = m.terminals();
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].name, "input");
  EXPECT_EQ(ts[0].role, TerminalInfo::Role::Input);
  EXPECT_EQ(ts[0].dtype, DType::Int64);
  EXPECT_EQ(ts[1].name, "weight");
  EXPECT_EQ(ts[1].role, TerminalInfo::Role::Parameter);
  ASSERT_TRUE(ts[1].shape.has_value());
  EXPECT_EQ(to_string(*ts[1].shape), "[10, 4]");
  EXPECT_EQ(ts[2].name, "output");
  EXPECT_EQ(ts[2].role, TerminalInfo::Role::Output);
  EXPECT_EQ(m.type_name(), "Embedding");
  EXPECT_FALSE(m.is_primitive());
}

// ---------------------------------------------------------------- settings

TEST(Model, IOKeyShapeDtypeValueAndExpose) {
  Model m;
  m += Linear(2)({{"input", IOKey("x").shape({"B", 3}).dtype(DType::Float64)},
                  {"bias", IOKey("b").value(Tensor::from_vector<double>({10, 20}, {2}))},
                  {"output", IOKey("y").expose()}});
  m += Relu();
  m.expose(m.cout(), "");  // with "y" exposed, the canonical output is an output only when exposed too
  CompileOptions o;
  o.shapes = {{"x", {4, nullptr}}};
  o.types = {{"linear_0.weight", DType::Float64}};
  PhysicalModel pm = compile_ref(m, o);
  EXPECT_EQ(shape_of(pm, "x"), "[4, 3]");
  EXPECT_EQ(pm.get_types().at("x"), DType::Float64);
  EXPECT_EQ(pm.get_types().at("y"), DType::Float64);
  EXPECT_EQ(pm.constant_names(), (Names{"b"}));
  EXPECT_EQ(pm.parameter_names(), (Names{"linear_0.weight"}));
  EXPECT_EQ(pm.output_names(), (Names{"y", "output"}));
  TensorMap params = pm.randomize_params(0);
  Tensor x = random_tensor({4, 3}, 1, -1, 1, DType::Float64);
  TensorMap out = pm.evaluate(params, {{"x", x}});
  expect_values(out.at("y"),
                affine(x, params.at("linear_0.weight"), Tensor::from_vector<double>({10, 20}, {2})),
                1e-12);
}

TEST(Model, SetShapesTypesAndValues) {
  Model m;
  m += Linear(2);
  m.set_shapes({{"input", {"N", 3}}});
  m.set_types({{"input", DType::Float64},
               {"linear_0.weight", DType::Float64},
               {"linear_0.bias", DType::Float64}});
  m.set_values({{"linear_0.bias", Tensor::from_vector<double>({1, -1}, {2})}});
  PhysicalModel pm = compile_ref(m);
  EXPECT_EQ(shape_of(pm, "input"), "[N, 3]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 2]");
  EXPECT_EQ(pm.get_types().at("output"), DType::Float64);
  EXPECT_EQ(pm.constant_names(), (Names{"linear_0.bias"}));
  EXPECT_TRUE(Contains(error_of([&] {
                         m.set_shapes({{"nope", {1}}});
                       }),
                       "set_shapes: model has no terminal 'nope'"));
  EXPECT_TRUE(Contains(error_of([&] {
                         m.set_values({{"output", Tensor::scalar<float>(1)}});
                       }),
                       "only inputs can hold values"));
}

// ---------------------------------------------------------------- shapes

TEST(ModelShapes, SymbolicBatchSurvivesTheWholeModel) {
  Model m;
  m += MLP({256, 10});
  PhysicalModel pm = compile_ref(m, with_shapes({{"input", {"N", 784}}}));
  EXPECT_EQ(shape_of(pm, "input"), "[N, 784]");
  EXPECT_EQ(shape_of(pm, "mlp_0.linear_0.weight"), "[784, 256]");
  EXPECT_EQ(shape_of(pm, "output"), "[N, 10]");
  // Leading dims pass through matmul's batch dims.
  PhysicalModel pv = compile_ref(m, with_shapes({{"input", {"B", "T", 784}}}));
  EXPECT_EQ(shape_of(pv, "output"), "[B, T, 10]");
  Tensor out =
      pv.evaluate(pv.randomize_params(0), {{"input", random_tensor({2, 3, 784}, 1)}}).at("output");
  EXPECT_EQ(out.shape(), (Shape{2, 3, 10}));
}

TEST(ModelShapes, SizesFlowBackwardsFromParametersAndOutputs) {
  Model m;
  m += Linear(4);
  m += Tanh();
  // The input width comes from the weight; the batch from the output.
  PhysicalModel pm = compile_ref(
      m,
      with_shapes({{"input", {"N", nullptr}}, {"linear_0.weight", {16, 4}}, {"output", {8, 4}}}));
  EXPECT_EQ(shape_of(pm, "input"), "[8, 16]");
  EXPECT_EQ(shape_of(pm, "linear_0.bias"), "[4]");
  // An elementwise chain given only its output shape.
  Model chain;
  chain += Relu();
  chain += Sigmoid();
  PhysicalModel pc = compile_ref(chain, with_shapes({{"output", {3, 5}}}));
  EXPECT_EQ(shape_of(pc, "input"), "[3, 5]");
  // One side of an add fixes the other through a shared symbol.
  Model add;
  add |= Add()({{"left", IOKey("a").shape({"R", "C"})}, {"right", IOKey("b").shape({"R", "C"})}});
  PhysicalModel pa = compile_ref(add, with_shapes({{"a", {2, 7}}}));
  EXPECT_EQ(shape_of(pa, "b"), "[2, 7]");
}

TEST(ModelShapes, ConflictingTemplatesCannotBeInferred) {
  Model m;
  m += Relu()({{"input", IOKey("x").shape({2, 3})}});
  m.set_shapes({{"x", {2, 4}}});
  std::string msg = error_of([&] { compile_ref(m); });
  EXPECT_TRUE(Contains(msg, "Cannot infer shape for 'x'"));
  EXPECT_TRUE(Contains(msg, "3"));
  EXPECT_TRUE(Contains(msg, "4"));
  // Widths that disagree across a Linear.
  Model lin;
  lin += Linear(4);
  std::string msg2 = error_of([&] {
    compile_ref(lin, with_shapes({{"input", {2, 3}}, {"linear_0.weight", {5, 4}}}));
  });
  EXPECT_TRUE(Contains(msg2, "Cannot infer shape for"));
}

TEST(ModelShapes, StaticShapesRejectsSymbolicDims) {
  Model m;
  m += Linear(2);
  CompileOptions o = with_shapes({{"input", {"N", 3}}});
  o.static_shapes = true;
  EXPECT_TRUE(Contains(error_of([&] { compile_ref(m, o); }), "static_shapes is set"));
  o.shapes = {{"input", {4, 3}}};
  EXPECT_EQ(shape_of(compile_ref(m, o), "output"), "[4, 2]");
}

// ---------------------------------------------------------------- errors

TEST(ModelErrors, UnknownTerminalInLinksListsTheTerminals) {
  Model m;
  EXPECT_TRUE(Contains(error_of([&] {
                         m |= Linear(4)({{"inptu", "x"}});
                       }),
                       "Linear has no terminal 'inptu' (terminals: input, weight, bias, output)"));
}

TEST(ModelErrors, AWireCannotBeProducedTwice) {
  Model m;
  m |= Relu()({{"input", "a"}, {"output", "y"}});
  std::string msg = error_of([&] { m |= Tanh()({{"input", "b"}, {"output", "y"}}); });
  EXPECT_TRUE(Contains(msg, "Wire 'y' is already produced by block 'relu_0'"));
}

TEST(ModelErrors, ConnectionsBelongToOneModel) {
  Model a, b;
  Connection x = a.input("x");
  EXPECT_TRUE(Contains(error_of([&] { b |= Relu()({{"input", x}}); }), "belongs to another model"));
  Connection y = b.input("y");
  EXPECT_TRUE(Contains(error_of([&] { (void)(x + y); }), "two different models"));
  EXPECT_TRUE(Contains(error_of([&] { b.expose(x, "z"); }), "belongs to another model"));
}

TEST(ModelErrors, CyclesAreReportedAtCompile) {
  Model m;
  m |= Relu()({{"input", "a"}, {"output", "b"}});
  m |= Tanh()({{"input", "b"}, {"output", "a"}});
  m |= Sigmoid()({{"input", "b"}, {"output", IOKey("y").expose()}});
  std::string msg = error_of([&] { compile_ref(m, with_shapes({{"a", {2}}})); });
  EXPECT_TRUE(Contains(msg, "cycle"));
  EXPECT_TRUE(Contains(msg, "relu_0"));
}

TEST(ModelErrors, CompileOptionsAreChecked) {
  CompileOptions o;
  EXPECT_TRUE(Contains(error_of([&] { o.set("optimisation", "1"); }),
                       "Unknown compile option 'optimisation'"));
  Model m;
  m += Relu();
  EXPECT_TRUE(Contains(error_of([&] {
                         compile_ref(m, with_shapes({{"inptu", {2}}}));
                       }),
                       "shapes: 'inptu' is not a terminal of the model"));
  CompileOptions t;
  t.types = {{"nope", DType::Float64}};
  EXPECT_TRUE(Contains(error_of([&] { compile_ref(m, t); }), "types: 'nope'"));
}

TEST(ModelErrors, DtypeMismatchNamesTheTerminal) {
  Model m;
  m |= Relu()({{"input", IOKey("x").dtype(DType::Float32)}, {"output", "y"}});
  EXPECT_TRUE(Contains(error_of([&] {
                         m |= Tanh()({{"input", IOKey("x").dtype(DType::Int64)}, {"output", "z"}});
                       }),
                       "Type mismatch at 'x'"));
  // Across levels: Embedding wants int64 indices where the parent says float32.
  Model n;
  n |= Embedding(5, 2)({{"input", IOKey("x").dtype(DType::Float32)}});
  EXPECT_TRUE(Contains(error_of([&] {
                         compile_ref(n, with_shapes({{"x", {3}}}));
                       }),
                       "Type mismatch at 'x'"));
}

TEST(ModelErrors, EvaluateChecksInputs) {
  Model m;
  m |= Add()({{"left", IOKey("a").shape({"N", 2})}, {"right", IOKey("b").shape({"N", 2})}});
  PhysicalModel pm = compile_ref(m);
  Tensor a = random_tensor({3, 2}, 1);
  EXPECT_TRUE(Contains(error_of([&] { pm.evaluate({}, {{"a", a}}); }), "Missing input 'b'"));
  EXPECT_TRUE(Contains(error_of([&] {
                         pm.evaluate({}, {{"a", a}, {"b", a.astype(DType::Float64)}});
                       }),
                       "Type mismatch at 'b': expected float32, got float64"));
  EXPECT_TRUE(Contains(error_of([&] {
                         pm.evaluate({}, {{"a", a}, {"b", random_tensor({3, 5}, 2)}});
                       }),
                       "Shape mismatch at 'b'"));
  EXPECT_TRUE(Contains(error_of([&] {
                         pm.evaluate({}, {{"a", a}, {"b", random_tensor({4, 2}, 2)}});
                       }),
                       "dimension 'N' is 4"));
  EXPECT_TRUE(Contains(error_of([&] {
                         pm.evaluate({}, {{"a", a}, {"b", a}, {"c", a}});
                       }),
                       "Unknown input 'c'"));
  TensorMap out = pm.evaluate({}, {{"a", a}, {"b", a}});
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(out.at("output").item(i)),
                    static_cast<float>(2 * a.item(i)));
}

// ---------------------------------------------------------------- key sets

namespace {
// y = x * scale + linear(x); aux = tanh(x) * mask.
Model two_branch_model() {
  Model m;
  Connection x = m.input("x", ShapeTemplate{"N", 3});
  Connection scale = m.input("scale", ShapeTemplate{});
  auto lin = m.add(Linear(3), {{"input", x}});
  m.expose(x * scale + lin.at("output"), "y");
  m.expose(apply("tanh", x) * m.input("mask", ShapeTemplate{}), "aux");
  return m;
}

bool has_op(const PhysicalModel& pm, const std::string& op) {
  for (const Node& n : pm.graph().nodes())
    if (n.op == op) return true;
  return false;
}
}  // namespace

TEST(KeySets, ConstantKeysFoldAValueIn) {
  CompileOptions o;
  o.constant_keys = {{"scale", Tensor::scalar<float>(3)}};
  PhysicalModel pm = compile_ref(two_branch_model(), o);
  EXPECT_EQ(pm.input_names(), (Names{"x", "mask"}));
  EXPECT_EQ(pm.constant_names(), (Names{"scale"}));
  TensorMap params = pm.randomize_params(0);
  Tensor x = random_tensor({2, 3}, 1);
  TensorMap out = pm.evaluate(params, {{"x", x}, {"mask", Tensor::scalar<float>(1)}});
  std::vector<double> want = affine(x, params.at("linear_0.weight"), params.at("linear_0.bias"));
  for (size_t i = 0; i < want.size(); ++i) want[i] += 3 * x.item(static_cast<int64_t>(i));
  expect_values(out.at("y"), want);
}

TEST(KeySets, DataAndTrainableKeysChangeTheKind) {
  CompileOptions o;
  o.data_keys = {"linear_0.weight"};
  o.trainable_keys = {"scale"};
  PhysicalModel pm = compile_ref(two_branch_model(), o);
  EXPECT_EQ(pm.input_names(), (Names{"x", "linear_0.weight", "mask"}));
  EXPECT_EQ(pm.parameter_names(), (Names{"linear_0.bias", "scale"}));
  const Graph& g = pm.graph();
  EXPECT_TRUE(g.value(*g.find_leaf("scale")).differentiable);
  EXPECT_FALSE(g.value(*g.find_leaf("linear_0.weight")).differentiable);
}

TEST(KeySets, OverlappingSetsNameTheKey) {
  CompileOptions o;
  o.data_keys = {"scale"};
  o.trainable_keys = {"scale"};
  std::string msg = error_of([&] { compile_ref(two_branch_model(), o); });
  EXPECT_TRUE(Contains(msg, "Key 'scale' is in both data_keys and trainable_keys"));
  CompileOptions c;
  c.constant_keys = {{"y", Tensor::scalar<float>(1)}};
  EXPECT_TRUE(Contains(error_of([&] { compile_ref(two_branch_model(), c); }),
                       "constant_keys: 'y' is produced by block"));
}

TEST(KeySets, DiscardingAnOutputRemovesWhatOnlyItNeeds) {
  CompileOptions o;
  o.discard_keys = {"aux"};
  PhysicalModel pm = compile_ref(two_branch_model(), o);
  EXPECT_EQ(pm.output_names(), (Names{"y"}));
  EXPECT_EQ(pm.input_names(), (Names{"x", "scale"}));  // mask fed only aux
  EXPECT_FALSE(has_op(pm, "tanh"));
  EXPECT_TRUE(has_op(pm, "matmul"));
}

TEST(KeySets, DiscardingAnInputRemovesWhatDependsOnIt) {
  CompileOptions o;
  o.discard_keys = {"scale"};
  PhysicalModel pm = compile_ref(two_branch_model(), o);
  EXPECT_EQ(pm.output_names(), (Names{"aux"}));
  EXPECT_EQ(pm.input_names(), (Names{"x", "mask"}));
  EXPECT_TRUE(pm.parameter_names().empty());  // the Linear fed only y
  EXPECT_FALSE(has_op(pm, "matmul"));
  EXPECT_TRUE(has_op(pm, "tanh"));
}
