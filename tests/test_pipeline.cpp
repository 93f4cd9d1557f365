// The compile pipeline end to end on small functional models: options and their errors, the
// visible stages, graph dumps, lazy lowering, weak scalars, model JSON, parameter files and
// evaluate-time checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ingot/ingot.h"
#include "op_test_util.h"
#include "runtime/atomic_file.h"

using namespace ingot;
using ingot::testing::error_of;
using ingot::testing::random_tensor;

namespace {

// y = relu(x @ w + b) * 2 + 1, written as expressions on connections.
Model affine_model() {
  Model m;
  Connection x = m.input("x");
  Connection w = m.parameter("w", Init::fan_in(0), ShapeTemplate{"d_in", 4});
  Connection b = m.parameter("b", Init::zeros(), ShapeTemplate{4});
  Connection h = apply("relu", matmul(x, w) + b);
  m.expose(h * 2.0 + 1.0, "y");
  return m;
}

CompileOptions opts_with_shapes() {
  CompileOptions o;
  o.shapes = {{"x", {"N", 3}}};
  return o;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ingot_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST(Pipeline, CompilesExpressionsAndMatchesHandComputation) {
  PhysicalModel pm = compile(affine_model(), ReferenceBackend(), opts_with_shapes());
  EXPECT_EQ(pm.input_names(), (std::vector<std::string>{"x"}));
  EXPECT_EQ(pm.parameter_names(), (std::vector<std::string>{"w", "b"}));
  EXPECT_EQ(pm.output_names(), (std::vector<std::string>{"y"}));
  auto shapes = pm.get_shapes();
  EXPECT_EQ(to_string(shapes.at("x")), "[N, 3]");
  EXPECT_EQ(to_string(shapes.at("w")), "[3, 4]");
  EXPECT_EQ(to_string(shapes.at("b")), "[4]");
  EXPECT_EQ(to_string(shapes.at("y")), "[N, 4]");
  EXPECT_EQ(pm.get_types().at("y"), DType::Float32);

  TensorMap params = pm.randomize_params(7);
  Tensor x = random_tensor({5, 3}, 1);
  Tensor y = pm.evaluate(params, {{"x", x}}).at("y");
  ASSERT_EQ(y.shape(), (Shape{5, 4}));
  auto xv = x.to_vector<double>(), wv = params.at("w").to_vector<double>(), bv = params.at("b").to_vector<double>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = bv[j];
      for (int k = 0; k < 3; ++k) acc += xv[i * 3 + k] * wv[k * 4 + j];
      EXPECT_NEAR(y.item(i * 4 + j), std::max(acc, 0.0) * 2 + 1, 1e-5);
    }
}

TEST(Pipeline, RandomizeParamsIsSeededAndUsesInitializers) {
  PhysicalModel pm = compile(affine_model(), ReferenceBackend(), opts_with_shapes());
  TensorMap a = pm.randomize_params(1), b = pm.randomize_params(1), c = pm.randomize_params(2);
  EXPECT_TRUE(equal(a.at("w"), b.at("w")));
  EXPECT_FALSE(equal(a.at("w"), c.at("w")));
  for (double v : a.at("w").to_vector<double>()) EXPECT_LE(std::abs(v), 1 / std::sqrt(3.0) + 1e-7);
  for (double v : a.at("b").to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(Pipeline, EvaluateChecksNamesTypesAndShapes) {
  PhysicalModel pm = compile(affine_model(), ReferenceBackend(), opts_with_shapes());
  TensorMap p = pm.randomize_params(0);
  Tensor x = random_tensor({2, 3}, 1);
  EXPECT_NE(error_of([&] { pm.evaluate(p, {}); }).find("Missing input 'x'"), std::string::npos);
  EXPECT_NE(error_of([&] { pm.evaluate(p, {{"x", x}, {"z", x}}); }).find("Unknown input 'z'"), std::string::npos);
  EXPECT_NE(error_of([&] { pm.evaluate({}, {{"x", x}}); }).find("Missing parameter 'w'"), std::string::npos);
  EXPECT_NE(error_of([&] { pm.evaluate(p, {{"x", x.astype(DType::Float64)}}); })
                .find("Type mismatch at 'x': expected float32, got float64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { pm.evaluate(p, {{"x", random_tensor({2, 5}, 1)}}); })
                .find("Shape mismatch at 'x': expected [N, 3], got [2, 5]"),
            std::string::npos);
  TensorMap wrong = p;
  wrong["w"] = random_tensor({3, 5}, 1);
  EXPECT_NE(error_of([&] { pm.evaluate(wrong, {{"x", x}}); }).find("Shape mismatch at 'w'"), std::string::npos);
  EXPECT_NE(error_of([&] { pm.evaluate(p, {{"w", x}}); }).find("it is a parameter"), std::string::npos);
}

TEST(Pipeline, SymbolsMustAgreeAcrossInputs) {
  Model m;
  Connection a = m.input("a"), b = m.input("b");
  m.expose(a + b, "c");
  CompileOptions o;
  o.shapes = {{"a", {"N", 2}}, {"b", {"N", 2}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  std::string msg = error_of([&] { pm.evaluate({}, {{"a", random_tensor({3, 2}, 1)}, {"b", random_tensor({4, 2}, 2)}}); });
  EXPECT_NE(msg.find("dimension 'N' is"), std::string::npos) << msg;
}

TEST(Pipeline, WeakScalarsTakeTheOperandType) {
  Model m;
  Connection x = m.input("x", ShapeTemplate{3}, DType::Float64);
  m.expose(x * 0.5 + 1.0, "y");
  Connection i = m.input("i", ShapeTemplate{3}, DType::Int32);
  m.expose(i * 2.0, "j");
  PhysicalModel pm = compile(m, ReferenceBackend());
  EXPECT_EQ(pm.get_types().at("y"), DType::Float64);
  EXPECT_EQ(pm.get_types().at("j"), DType::Int32);
  TensorMap out = pm.evaluate({}, {{"x", Tensor::from_vector<double>({1, 2, 3}, {3})},
                                   {"i", Tensor::from_vector<int32_t>({1, 2, 3}, {3})}});
  EXPECT_EQ(out.at("y").to_vector<double>(), (std::vector<double>{1.5, 2, 2.5}));
  EXPECT_EQ(out.at("j").to_vector<int32_t>(), (std::vector<int32_t>{2, 4, 6}));
}

TEST(Pipeline, OptionsRejectUnknownNamesAndValues) {
  CompileOptions o;
  o.set("verbose", "true");
  EXPECT_TRUE(o.verbose);
  o.set("data_keys", "a,b");
  EXPECT_EQ(o.data_keys, (std::vector<std::string>{"a", "b"}));
  std::string msg = error_of([&] { o.set("optimisation", "1"); });
  EXPECT_NE(msg.find("Unknown compile option 'optimisation'"), std::string::npos);
  EXPECT_NE(msg.find("static_shapes"), std::string::npos);  // lists the valid ones
  EXPECT_NE(error_of([&] { o.set("jit", "maybe"); }).find("Option 'jit'"), std::string::npos);
  EXPECT_NE(error_of([&] { o.set("dump_format", "xml"); }).find("xml"), std::string::npos);
  CompileOptions bad;
  bad.dump_format = "xml";
  EXPECT_NE(error_of([&] { compile(affine_model(), ReferenceBackend(), bad); }).find("Option 'dump_format'"),
            std::string::npos);
}

TEST(Pipeline, StaticShapesRejectsSymbols) {
  CompileOptions o = opts_with_shapes();
  o.static_shapes = true;
  std::string msg = error_of([&] { compile(affine_model(), ReferenceBackend(), o); });
  EXPECT_NE(msg.find("static_shapes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  o.shapes = {{"x", {8, 3}}};
  PhysicalModel pm = compile(affine_model(), ReferenceBackend(), o);
  EXPECT_EQ(to_string(pm.get_shapes().at("y")), "[8, 4]");
}

TEST(Pipeline, VerbosePrintsEveryStage) {
  CompileOptions o = opts_with_shapes();
  o.verbose = true;
  ::testing::internal::CaptureStderr();
  compile(affine_model(), ReferenceBackend(), o);
  std::string log = ::testing::internal::GetCapturedStderr();
  for (const char* stage : {"flatten", "resolve terminals", "shape inference", "type inference",
                            "verify", "lower", "function generation"})
    EXPECT_NE(log.find(std::string("[ingot] ") + stage), std::string::npos) << stage << "\n" << log;
  EXPECT_NE(log.find("'y': [N, 4]"), std::string::npos) << log;
}

TEST(Pipeline, DumpGraphAndFilePath) {
  for (std::string format : {"text", "json", "dot"}) {
    CompileOptions o = opts_with_shapes();
    o.dump_graph = temp_path("graph." + format);
    o.dump_format = format;
    o.file_path = temp_path("plan.txt");
    compile(affine_model(), ReferenceBackend(), o);
    std::string dumped = read_file(o.dump_graph);
    EXPECT_NE(dumped.find("matmul"), std::string::npos) << format;
    if (format == "json") {
      EXPECT_EQ(dumped.front(), '{');
    }
    if (format == "dot") {
      EXPECT_NE(dumped.find("digraph"), std::string::npos);
    }
    EXPECT_NE(read_file(o.file_path).find("reference backend"), std::string::npos);
    std::remove(o.dump_graph.c_str());
    std::remove(o.file_path.c_str());
  }
}

TEST(Pipeline, JitFalseLowersOnFirstEvaluate) {
  CompileOptions o = opts_with_shapes();
  o.jit = false;
  o.file_path = temp_path("never_written.txt");
  PhysicalModel pm = compile(affine_model(), ReferenceBackend(), o);
  EXPECT_FALSE(std::filesystem::exists(o.file_path));
  Tensor y = pm.evaluate(pm.randomize_params(0), {{"x", random_tensor({2, 3}, 1)}}).at("y");
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
}

TEST(Pipeline, ModelJsonRoundTrip) {
  Model m = affine_model();
  std::string json = m.to_json();
  Model back = Model::from_json(json);
  EXPECT_EQ(back.to_json(), json);
  PhysicalModel a = compile(m, ReferenceBackend(), opts_with_shapes());
  PhysicalModel b = compile(back, ReferenceBackend(), opts_with_shapes());
  TensorMap p = a.randomize_params(3);
  Tensor x = random_tensor({4, 3}, 9);
  EXPECT_TRUE(equal(a.evaluate(p, {{"x", x}}).at("y"), b.evaluate(p, {{"x", x}}).at("y")));

  std::string path = temp_path("model.json");
  m.save(path);
  EXPECT_EQ(Model::load(path).to_json(), json);
  std::remove(path.c_str());
}

TEST(Pipeline, ModelJsonErrors) {
  EXPECT_NE(error_of([] { Model::from_json("{not json"); }).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { Model::from_json(R"({"format": "onnx"})"); }).find("Not an ingot model"), std::string::npos);
  // Fields of the wrong type are errors, not a crash (found by fuzz_model_json).
  EXPECT_NE(error_of([] { Model::from_json(R"({"format": {}})"); }).find("Not an ingot model"), std::string::npos);
  EXPECT_NE(error_of([] { Model::from_json(R"({"format": "ingot.model", "version": 18446744073709551615})"); })
                .find("Unsupported model format version 18446744073709551615"),
            std::string::npos);
  EXPECT_NE(error_of([] { Model::from_json(R"({"format": "ingot.model", "version": 99, "model": {}})"); })
                .find("Unsupported model format version 99"),
            std::string::npos);
  EXPECT_NE(error_of([] { Model::from_json(R"({"format": "ingot.model", "version": 1, "model": {"wires": 3}})"); })
                .find("Malformed model JSON"),
            std::string::npos);
  std::string json = affine_model().to_json();
  std::string broken = json;
  broken.replace(broken.find("\"links\": {"), 10, "\"links\": {\"bogus\": 99, ");
  EXPECT_NE(error_of([&] { Model::from_json(broken); }), "(no error)");
  EXPECT_NE(error_of([] { Model::load("/nonexistent/model.json"); }).find("/nonexistent/model.json"), std::string::npos);
}

TEST(Pipeline, ParameterFilesRoundTripAndAreChecked) {
  PhysicalModel pm = compile(affine_model(), ReferenceBackend(), opts_with_shapes());
  TensorMap p = pm.randomize_params(5);
  std::string path = temp_path("params.safetensors");
  pm.save_params(path, p);
  TensorMap q = pm.load_params(path);
  for (const auto& [k, t] : p) EXPECT_TRUE(equal(t, q.at(k))) << k;

  CompileOptions wider = opts_with_shapes();
  Model m2;
  Connection x = m2.input("x");
  Connection w = m2.parameter("w", Init::fan_in(0), ShapeTemplate{"d_in", 5});
  m2.expose(matmul(x, w), "y");
  PhysicalModel other = compile(m2, ReferenceBackend(), wider);
  std::string msg = error_of([&] { other.load_params(path); });
  EXPECT_NE(msg.find("Shape mismatch at 'w'"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { pm.save_params(path, {}); }).find("missing parameter"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Pipeline, SummaryListsBlocks) {
  std::string s = affine_model().summary({{"x", {"N", 3}}});
  EXPECT_NE(s.find("matmul_0"), std::string::npos) << s;
  EXPECT_NE(s.find("total parameters: 16"), std::string::npos) << s;
  EXPECT_NE(s.find("output 'y': float32[N, 4]"), std::string::npos) << s;
}

TEST(AtomicFile, WritesAndReports) {
  std::string path = temp_path("atomic.txt");
  write_file_atomic(path, "first");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  std::remove(path.c_str());
  EXPECT_NE(error_of([] { write_file_atomic("/nonexistent/dir/x", "a"); }).find("/nonexistent/dir/x"), std::string::npos);
  EXPECT_NE(error_of([] { read_file("/nonexistent/file"); }).find("/nonexistent/file"), std::string::npos);
}

TEST(Pipeline, UnconnectedBlockInputIsNamedAtCompile) {
  Model m;
  m |= Linear(4)({{"input", "x"}, {"output", "h"}});
  m |= Relu()({{"output", IOKey("y").expose()}});  // its input was never linked
  CompileOptions o;
  o.shapes = {{"x", {2, 3}}};
  std::string msg = error_of([&] { compile(m, ReferenceBackend(), o); });
  EXPECT_NE(msg.find("unconnected input of block 'relu_0'"), std::string::npos) << msg;
}
