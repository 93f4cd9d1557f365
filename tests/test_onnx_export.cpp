// ONNX export (ingot::onnx::save): models and random programs written as ONNX, read back with
// the importer (itself judged by ONNX's official node suite), and compared with the original on
// the reference interpreter; the exported graph's interface (names, types, symbolic dims);
// every forward op of the catalogue has an ONNX form, control flow's if / while / scan as ONNX's
// If / Loop / Scan; bad requests are clear errors.
// (python/tests/test_onnx_export.py checks the files with onnx.checker and ONNX Runtime.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>

#include "../fuzz/programs.h"
#include "autodiff_test_util.h"
#include "cpu_test_util.h"
#include "frontends/onnx/exporter.h"
#include "ingot/compile.h"
#include "ingot/control_blocks.h"
#include "ingot/cpu_backend.h"
#include "ingot/models.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "ir/op_registry.h"
#include "onnx/onnx_pb.h"
#include "op_test_util.h"

using namespace ingot;

namespace {

// Largest |a - b| over max(1, largest |b|); NaN matches NaN, inf matches itself.
double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(to_string(got.shape()), to_string(want.shape()));
  EXPECT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype()));
  const std::vector<double> a = got.astype(DType::Float64).to_vector<double>(), b = want.astype(DType::Float64).to_vector<double>();
  double scale = 1, err = 0;
  for (double v : b)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;
    err = std::max(err, std::isfinite(a[i] - b[i]) ? std::abs(a[i] - b[i]) / scale : INFINITY);
  }
  return err;
}

// Exports `m` with `params`, imports the file, and compares both on `inputs` (reference) and the
// import on the CPU backend too.
void expect_round_trip(const Model& m, const CompileOptions& o, const TensorMap& inputs, double tol = 1e-5) {
  const PhysicalModel original = compile(m, ReferenceBackend(), o);
  const TensorMap params = original.randomize_params(7);
  ingot::onnx::SaveOptions so;
  so.shapes = o.shapes;
  so.types = o.types;
  so.params = params;
  const TensorMap want = original.evaluate(params, inputs);
  for (bool optimized : {false, true}) {
    SCOPED_TRACE(optimized ? "optimized" : "as written");
    so.optimized = optimized;
    const Model back = ingot::onnx::load_bytes(ingot::onnx::save_bytes(m, so));
    CompileOptions bo;  // the file gives shapes and types; control flow decides at run time as it did
    bo.dynamic_control_flow = o.dynamic_control_flow;
    for (int b = 0; b < 2; ++b) {
      SCOPED_TRACE(b == 0 ? "reference" : "cpu");
      const PhysicalModel pm = b == 0 ? compile(back, ReferenceBackend(), bo) : compile(back, CpuBackend(cpu_test::cpu_options()), bo);
      const TensorMap got = pm.evaluate({}, inputs);
      for (const auto& [name, w] : want) {
        ASSERT_TRUE(got.count(name)) << name;
        EXPECT_LE(relative_error(got.at(name), w), tol) << name;
      }
    }
  }
}

}  // namespace

TEST(OnnxExport, MlpRoundTrips) {
  Model m;
  m += MLP({16, 16, 5}, "gelu")({{"input", "x"}, {"output", IOKey("logits").expose()}});
  m += Softmax()({{"output", IOKey("probs").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {"N", 8}}};
  expect_round_trip(m, o, {{"x", ingot::testing::random_tensor({3, 8}, 1)}});
}

// top_k as ONNX's TopK (K an initializer): values and indices come back the same, ties and a NaN
// included (ONNX orders them as ingot does).
TEST(OnnxExport, TopKRoundTrips) {
  Model m;
  m |= Model::primitive("top_k", {"input"}, {"values", "indices"}, {{"k", int64_t{3}}, {"axis", int64_t{0}}})(
      {{"input", "x"}, {"values", IOKey("values").expose()}, {"indices", IOKey("indices").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {5, 4}}};
  Tensor x = ingot::testing::random_tensor({5, 4}, 3);
  x.data<float>()[0] = x.data<float>()[4];  // a tie in column 0
  x.data<float>()[9] = NAN;
  expect_round_trip(m, o, {{"x", x}});
}

TEST(OnnxExport, ResidualCnnRoundTrips) {
  Model m;
  m += Conv2d(8, 3, 1, 1)({{"input", "x"}});
  m += BatchNorm2d();
  m += Relu();
  m += BasicBlock(8);
  m += MaxPool2d(3, 2, 0, true);  // 12 -> 6 (ceil_mode; floor: 5)
  m += Bottleneck(4, 2, true);
  m += GlobalAvgPool2d();
  m += Linear(3)({{"output", IOKey("y").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {2, 3, 12, 12}}};
  o.inference = true;
  expect_round_trip(m, o, {{"x", ingot::testing::random_tensor({2, 3, 12, 12}, 2)}}, 1e-4);
}

TEST(OnnxExport, NormalizationsAndLossesRoundTrip) {
  Model m;
  m += LayerNorm()({{"input", "x"}});
  m += Linear(6);
  m += LayerNorm(1, 1e-5, false);
  m += LogSoftmax()({{"output", IOKey("logp").expose()}});
  m |= CrossEntropyLoss()({{"input", "logp"}, {"target", "t"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {4, 10}}};
  o.types = {{"t", DType::Int64}};
  expect_round_trip(m, o, {{"x", ingot::testing::random_tensor({4, 10}, 3)}, {"t", Tensor::from_vector<int64_t>({0, 5, 2, 1}, {4})}});
}

// The zoo's transformer layers: rms_norm and the attention op have no opset-17 form and are
// written out; read back, the attention pattern pass makes the attention one op again.
TEST(OnnxExport, TransformerLayersRoundTrip) {
  TransformerEncoderLayerOptions llama;
  llama.d_model = 16;
  llama.num_heads = 4;
  llama.num_kv_heads = 2;
  llama.ffn_dim = 32;
  llama.norm_first = llama.rms_norm = llama.causal = true;
  TransformerEncoderLayerOptions bert = llama;
  bert.num_kv_heads.reset();
  bert.norm_first = bert.rms_norm = bert.causal = false;
  Model m;
  m += TransformerEncoderLayer(llama)({{"input", "x"}});
  m += TransformerEncoderLayer(bert);
  m += RMSNorm(1, 1e-6, false)({{"output", IOKey("y").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {2, 7, 16}}};
  o.inference = true;
  expect_round_trip(m, o, {{"x", ingot::testing::random_tensor({2, 7, 16}, 4)}}, 1e-4);
}

// Random programs from the differential fuzzer's generator (fuzz/programs.h): every op it
// draws, with every dtype, exported and read back; the reference interpreter runs both. A quarter
// are wrapped in an if, while or scan (the generator's default), whose bodies read the graph's
// inputs by name: reading those back once lost the captured values' element types (a Div or Pow
// in a branch could not be converted; seeds 6, 8, 110, 157, 185, 279).
TEST(OnnxExport, RandomProgramsRoundTrip) {
  int exported = 0, skipped = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    fuzz::ProgramOptions po;
    po.ops = 6;
    po.programs_per_graph = 1;
    const fuzz::Batch b = fuzz::random_batch(seed, po);
    std::string bytes;
    try {
      bytes = onnx_export::Exporter(b.graph, {}).run().SerializeAsString();
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("has no ONNX form"), std::string::npos) << e.what();
      ++skipped;
      continue;
    }
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(b.graph));
    TensorMap got;
    try {  // a failure names the seed and its program
      const Model back = ingot::onnx::load_bytes(bytes);
      const PhysicalModel pm = compile(back, ReferenceBackend());
      TensorMap in;
      for (const std::string& n : pm.input_names()) in[n] = b.inputs.at(n);
      got = pm.evaluate({}, in);
    } catch (const Error& e) {
      ADD_FAILURE() << "reading the export back failed: " << e.what();
      continue;
    }
    std::vector<Tensor> args;
    for (ValueId v : b.graph.leaves())
      if (b.graph.value(v).kind == ValueKind::Input) args.push_back(b.inputs.at(b.graph.value(v).name));
    const std::vector<Tensor> want = ingot::testing::run_graph(b.graph, args);
    // Written differently in ONNX (gelu through erf, rsqrt as 1 / sqrt, moments in steps): a
    // few units of rounding of the narrowest float type the program computes in.
    double tol = 1e-4;
    for (const Value& v : b.graph.values())
      tol = std::max(tol, v.dtype == DType::BFloat16 ? 3e-2 : v.dtype == DType::Float16 ? 4e-3 : 0.0);
    // Attention written out rounds after its matmul, scale and softmax where ingot's kernel
    // rounds once; a division by a result near 0 then shows it (seed 11: 1.3e-4).
    for (const Node& n : b.graph.nodes())
      if (n.op == "scaled_dot_product_attention") tol = std::max(tol, 1e-3);
    for (size_t k = 0; k < b.graph.outputs().size(); ++k) {
      const std::string& name = b.graph.outputs()[k].first;
      EXPECT_LE(relative_error(got.at(name), want[k]), tol) << name;
    }
    ++exported;
  }
  std::cout << exported << " random programs exported and read back; " << skipped
            << " held an op without an ONNX form\n";
  EXPECT_GE(exported, 150);
}

// What the file declares: inputs and outputs under the model's names, dtypes, symbolic dims as
// dim_params, parameters as initializers.
TEST(OnnxExport, InterfaceNamesTypesAndSymbols) {
  Model m;
  m += Linear(4)({{"input", "features"}, {"output", IOKey("scores").expose()}});
  const PhysicalModel pm = compile(m, ReferenceBackend(), [] {
    CompileOptions o;
    o.shapes = {{"features", {"batch", 3}}};
    return o;
  }());
  const TensorMap params = pm.randomize_params(1);
  ::onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(ingot::onnx::save_bytes(pm, params)));
  EXPECT_EQ(proto.opset_import(0).version(), 17);
  ASSERT_EQ(proto.graph().input_size(), 1);
  EXPECT_EQ(proto.graph().input(0).name(), "features");
  const auto& dims = proto.graph().input(0).type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 2);
  EXPECT_EQ(dims[0].dim_param(), "batch");
  EXPECT_EQ(dims[1].dim_value(), 3);
  EXPECT_EQ(proto.graph().output(0).name(), "scores");
  EXPECT_EQ(proto.graph().output(0).type().tensor_type().elem_type(), ::onnx::TensorProto::FLOAT);
  std::set<std::string> inits;
  for (const auto& t : proto.graph().initializer()) inits.insert(t.name());
  for (const auto& [name, value] : params) EXPECT_TRUE(inits.count(name)) << name;
  // The file on disk is the same bytes.
  const std::string path = (std::filesystem::temp_directory_path() / ("ingot-export-" + std::to_string(::getpid()) + ".onnx")).string();
  ingot::onnx::save(pm, path, params);
  const Model back = ingot::onnx::load(path);
  std::filesystem::remove(path);
  const Tensor x = ingot::testing::random_tensor({5, 3}, 4);
  EXPECT_LE(relative_error(compile(back, ReferenceBackend()).evaluate({}, {{"features", x}}).at("scores"),
                           pm.evaluate(params, {{"features", x}}).at("scores")),
            1e-6);
}

// Every op of the catalogue that a forward model can hold has an ONNX form; the rest are the
// gradient ops (an exported model is a forward model), the random sources and the collectives
// (ONNX has no operator that talks to other processes).
TEST(OnnxExport, EveryForwardOpHasAnOnnxForm) {
  const std::set<std::string> without = {"conv2d_weight_grad", "max_pool2d_grad", "avg_pool2d_grad",
                                         "scaled_dot_product_attention_grad", "slice_scatter", "random_normal",
                                         "random_uniform"};
  for (const OpDef* op : all_ops()) {
    if (without.count(op->name) || op->collective) {
      EXPECT_FALSE(onnx_export::emitters().count(op->name)) << op->name << " has a form now: take it off the list";
      continue;
    }
    EXPECT_TRUE(onnx_export::emitters().count(op->name)) << "op '" << op->name << "' has no ONNX export";
  }
}

// ------------------------------------------------------------------- control flow

namespace {

Tensor flag(bool b) { return Tensor::scalar<bool>(b); }

// new = tanh(state W + b), the cell the loops below run.
Model cell(const std::string& in, const std::string& out) {
  Model m;
  m |= Linear(4)({{"input", in}, {"output", out + ".pre"}, {"weight", "W"}, {"bias", "b"}});
  m |= Tanh()({{"input", out + ".pre"}, {"output", out}});
  return m;
}

// The ONNX ops of the file's main graph.
std::multiset<std::string> onnx_ops(const Model& m, const ingot::onnx::SaveOptions& o) {
  ::onnx::ModelProto proto;
  EXPECT_TRUE(proto.ParseFromString(ingot::onnx::save_bytes(m, o)));
  std::multiset<std::string> ops;
  for (const auto& n : proto.graph().node()) ops.insert(n.op_type());
  return ops;
}

}  // namespace

// An If on a run-time condition (its then_branch holding parameters) as ONNX's If: both branches
// come back and run.
TEST(OnnxExport, IfRoundTrips) {
  Model m;
  m |= If("p", Linear(3)({{"input", "x"}, {"output", "y"}}),
          Model::primitive("neg", {"input"}, {"output"})({{"input", "x"}, {"output", "y"}}));
  CompileOptions o;
  o.shapes = {{"x", {2, 3}}, {"p", {}}};
  o.types = {{"p", DType::Bool}};
  o.dynamic_control_flow = true;
  const Tensor x = ingot::testing::random_tensor({2, 3}, 5);
  for (const bool p : {true, false}) {
    SCOPED_TRACE(p ? "then" : "else");
    expect_round_trip(m, o, {{"x", x}, {"p", flag(p)}});
  }
  ingot::onnx::SaveOptions so;
  so.shapes = o.shapes;
  so.types = o.types;
  so.params = compile(m, ReferenceBackend(), o).randomize_params(1);
  EXPECT_EQ(onnx_ops(m, so).count("If"), 1u);
}

// The seed's While (a counter against a run-time bound) as ONNX's Loop, with and without
// max_iterations (its M).
TEST(OnnxExport, WhileRoundTripsAsLoop) {
  for (const std::optional<int64_t> max_iterations : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    SCOPED_TRACE(max_iterations ? "max_iterations 2" : "no max_iterations");
    Model m;
    m |= While("step < max_steps", BlockCall{cell("state", "new_state"), {}},
               {{"state", "initial_state"}, {"step", 0.0}}, {{"state", "new_state"}, {"step", "step + 1"}},
               {{"final_state", "state"}, {"steps", "step"}}, max_iterations);
    CompileOptions o;
    o.shapes = {{"initial_state", {2, 4}}, {"max_steps", {}}};
    o.dynamic_control_flow = true;
    for (const float steps : {0.0f, 1.0f, 3.0f})
      expect_round_trip(m, o, {{"initial_state", ingot::testing::random_tensor({2, 4}, 6)},
                               {"max_steps", Tensor::scalar<float>(steps)}});
    ingot::onnx::SaveOptions so;
    so.shapes = o.shapes;
    so.params = compile(m, ReferenceBackend(), o).randomize_params(1);
    EXPECT_EQ(onnx_ops(m, so).count("Loop"), 1u);
  }
}

// A recurrence as ONNX's Scan, both ways round, with a run-time If inside its body.
TEST(OnnxExport, ScanRoundTripsWithAnIfInItsBody) {
  for (const bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    Model body;
    body |= Linear(4, false)({{"input", "x_t"}, {"output", "xw"}, {"weight", "Wx"}});
    body |= Linear(4)({{"input", "h"}, {"output", "hw"}, {"weight", "W"}, {"bias", "b"}});
    body |= Model::primitive("add", {"left", "right"}, {"output"})({{"left", "xw"}, {"right", "hw"}, {"output", "pre"}});
    body |= If("flip", Tanh()({{"input", "pre"}, {"output", "h_next"}}),
               Model::primitive("neg", {"input"}, {"output"})({{"input", "pre"}, {"output", "h_next"}}));
    ScanOptions s;
    s.xs = {{"x_t", "xs"}};
    s.initial_state = {{"h", "h0"}};
    s.loop_vars = {{"h", "h_next"}};
    s.ys = {{"hs", "h_next"}};
    s.output_vars = {{"last", "h"}};
    s.reverse = reverse;
    Model m;
    m |= Scan(BlockCall{body, {}}, s);
    CompileOptions o;
    o.shapes = {{"xs", {5, 2, 3}}, {"h0", {2, 4}}, {"flip", {}}};
    o.types = {{"flip", DType::Bool}};
    o.dynamic_control_flow = true;
    for (const bool flip : {true, false})
      expect_round_trip(m, o, {{"xs", ingot::testing::random_tensor({5, 2, 3}, 7)},
                               {"h0", ingot::testing::random_tensor({2, 4}, 8)}, {"flip", flag(flip)}});
    ingot::onnx::SaveOptions so;
    so.shapes = o.shapes;
    so.types = o.types;
    so.params = compile(m, ReferenceBackend(), o).randomize_params(1);
    EXPECT_EQ(onnx_ops(m, so).count("Scan"), 1u);
  }
}

TEST(OnnxExport, BadRequestsAreClearErrors) {
  Model m;
  m += Linear(2)({{"input", "x"}, {"output", IOKey("y").expose()}});
  ingot::onnx::SaveOptions o;
  o.shapes = {{"x", {1, 3}}};
  ingot::testing::expect_error([&] { ingot::onnx::save_bytes(m, o); }, "no values for the parameters");
  CompileOptions co;
  co.shapes = o.shapes;
  o.params = compile(m, ReferenceBackend(), co).randomize_params(1);
  o.params.begin()->second = Tensor::full(DType::Float32, {7, 7}, 1);
  ingot::testing::expect_error([&] { ingot::onnx::save_bytes(m, o); }, "has shape");
  Graph g;
  const ValueId x = g.add_input("x");
  g.value(x).shape = {2};
  g.value(x).shape_known = true;
  g.set_output("y", g.add_op("random_normal", {}, {{"shape", std::vector<int64_t>{2}}, {"seed", int64_t{1}}}));
  ingot::testing::expect_error([&] { onnx_export::Exporter(g, {}).run(); }, "'random_normal' has no ONNX form");
}
