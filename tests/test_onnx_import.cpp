// ONNX import (ingot::onnx::load): models written here with the protobuf API, imported, compiled
// for the reference interpreter and the CPU backend, and checked against values computed by hand
// in double; shape arithmetic folded while importing; every kind of bad file a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "autodiff_test_util.h"
#include "cpu_test_util.h"
#include "ingot/compile.h"
#include "ingot/cpu_backend.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "onnx_test_util.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::onnx_test;

namespace {

// Evaluates `m` on both backends; expects both within `tol` (relative to max(1, |want|)) of `want`.
void expect_both_backends(const Model& m, const TensorMap& inputs, const std::string& out, const std::vector<double>& want,
                          double tol = 1e-5) {
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = b == 0 ? compile(m, ReferenceBackend()) : compile(m, CpuBackend(cpu_test::cpu_options()));
    const TensorMap r = pm.evaluate({}, inputs);
    const std::vector<double> got = r.at(out).astype(DType::Float64).to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << i;
  }
}

std::vector<double> values(const Tensor& t) { return t.astype(DType::Float64).to_vector<double>(); }

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("ingot-onnx-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

void expect_error(const std::string& bytes, const std::string& fragment) {
  try {
    ingot::onnx::load_bytes(bytes);
    ADD_FAILURE() << "no error; expected one containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(OnnxImport, Available) { EXPECT_TRUE(ingot::onnx::available()); }

// MatMul, Add (broadcast), Relu, Gemm (transB, alpha, beta), Softmax: against loops in double.
TEST(OnnxImport, MlpMatchesHandComputation) {
  const Tensor x = ingot::testing::random_tensor({2, 3}, 1), w1 = ingot::testing::random_tensor({3, 4}, 2),
               b1 = ingot::testing::random_tensor({4}, 3), w2 = ingot::testing::random_tensor({5, 4}, 4), c2 = ingot::testing::random_tensor({5}, 5);
  OnnxModel o(13);
  o.input("x", DType::Float32, {std::string("N"), int64_t{3}});
  o.initializer("w1", w1);
  o.initializer("b1", b1);
  o.initializer("w2", w2);
  o.initializer("c2", c2);
  o.node("MatMul", {"x", "w1"}, {"h0"});
  o.node("Add", {"h0", "b1"}, {"h1"});
  o.node("Relu", {"h1"}, {"h2"});
  auto& gemm = o.node("Gemm", {"h2", "w2", "c2"}, {"logits"});
  attr(gemm, "transB", int64_t{1});
  attr(gemm, "alpha", 0.5f);
  attr(gemm, "beta", 2.0f);
  attr(o.node("Softmax", {"logits"}, {"probs"}), "axis", int64_t{-1});
  o.output("probs");
  o.output("logits");
  const Model m = ingot::onnx::load_bytes(o.bytes());

  const std::vector<double> X = values(x), W1 = values(w1), B1 = values(b1), W2 = values(w2), C2 = values(c2);
  std::vector<double> logits(10), probs(10);
  for (int n = 0; n < 2; ++n) {
    std::vector<double> h(4);
    for (int j = 0; j < 4; ++j) {
      double s = B1[j];
      for (int k = 0; k < 3; ++k) s += X[n * 3 + k] * W1[k * 4 + j];
      h[j] = std::max(s, 0.0);
    }
    double mx = -1e300, z = 0;
    for (int o2 = 0; o2 < 5; ++o2) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += h[j] * W2[o2 * 4 + j];
      logits[n * 5 + o2] = 0.5 * s + 2.0 * C2[o2];
      mx = std::max(mx, logits[n * 5 + o2]);
    }
    for (int o2 = 0; o2 < 5; ++o2) z += std::exp(logits[n * 5 + o2] - mx);
    for (int o2 = 0; o2 < 5; ++o2) probs[n * 5 + o2] = std::exp(logits[n * 5 + o2] - mx) / z;
  }
  expect_both_backends(m, {{"x", x}}, "logits", logits);
  expect_both_backends(m, {{"x", x}}, "probs", probs);
}

// Conv with padding, stride and groups, then BatchNormalization: against loops in double.
TEST(OnnxImport, ConvAndBatchNormMatchHandComputation) {
  const Tensor x = ingot::testing::random_tensor({1, 4, 5, 5}, 11), w = ingot::testing::random_tensor({6, 2, 3, 3}, 12),
               b = ingot::testing::random_tensor({6}, 13), scale = ingot::testing::random_tensor({6}, 14),
               bias = ingot::testing::random_tensor({6}, 15), mean = ingot::testing::random_tensor({6}, 16),
               var = ingot::testing::random_tensor({6}, 17, 0.5, 2.0);
  OnnxModel o(15);
  o.input("x", DType::Float32, {int64_t{1}, int64_t{4}, int64_t{5}, int64_t{5}});
  for (const auto& [n, t] : std::vector<std::pair<std::string, Tensor>>{
           {"w", w}, {"b", b}, {"scale", scale}, {"bias", bias}, {"mean", mean}, {"var", var}})
    o.initializer(n, t);
  auto& conv = o.node("Conv", {"x", "w", "b"}, {"c"});
  attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  attr(conv, "strides", std::vector<int64_t>{2, 2});
  attr(conv, "group", int64_t{2});
  attr(o.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"}), "epsilon", 1e-3f);
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());

  const std::vector<double> X = values(x), W = values(w), B = values(b), S = values(scale), BI = values(bias),
                            M = values(mean), V = values(var);
  std::vector<double> want;
  for (int co = 0; co < 6; ++co)
    for (int oy = 0; oy < 3; ++oy)
      for (int ox = 0; ox < 3; ++ox) {
        double s = B[co];
        const int g = co / 3;
        for (int ci = 0; ci < 2; ++ci)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
              if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
              s += X[((g * 2 + ci) * 5 + iy) * 5 + ix] * W[((co * 2 + ci) * 3 + ky) * 3 + kx];
            }
        want.push_back((s - M[co]) / std::sqrt(V[co] + 1e-3) * S[co] + BI[co]);
      }
  expect_both_backends(m, {{"x", x}}, "y", want, 1e-4);
}

// Pooling and the head of a CNN: MaxPool (padding), AveragePool (count_include_pad 0, ONNX's
// default), GlobalAveragePool, Flatten.
TEST(OnnxImport, PoolingMatchesHandComputation) {
  const Tensor x = ingot::testing::random_tensor({1, 2, 4, 4}, 21);
  OnnxModel o(13);
  o.input("x", DType::Float32, {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{4}});
  auto& mp = o.node("MaxPool", {"x"}, {"m"});
  attr(mp, "kernel_shape", std::vector<int64_t>{3, 3});
  attr(mp, "pads", std::vector<int64_t>{1, 1, 1, 1});
  attr(mp, "strides", std::vector<int64_t>{2, 2});
  auto& ap = o.node("AveragePool", {"x"}, {"a"});
  attr(ap, "kernel_shape", std::vector<int64_t>{3, 3});
  attr(ap, "pads", std::vector<int64_t>{1, 1, 1, 1});
  attr(ap, "strides", std::vector<int64_t>{2, 2});
  o.node("GlobalAveragePool", {"x"}, {"g"});
  o.node("Flatten", {"g"}, {"f"});
  o.output("m");
  o.output("a");
  o.output("f");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> X = values(x);
  std::vector<double> want_max, want_avg, want_flat;
  for (int c = 0; c < 2; ++c) {
    double total = 0;
    for (int i = 0; i < 16; ++i) total += X[c * 16 + i];
    want_flat.push_back(total / 16);
    for (int oy = 0; oy < 2; ++oy)
      for (int ox = 0; ox < 2; ++ox) {
        double mx = -1e300, s = 0;
        int n = 0;
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
            if (iy < 0 || iy >= 4 || ix < 0 || ix >= 4) continue;
            mx = std::max(mx, X[(c * 4 + iy) * 4 + ix]);
            s += X[(c * 4 + iy) * 4 + ix];
            ++n;
          }
        want_max.push_back(mx);
        want_avg.push_back(s / n);
      }
  }
  expect_both_backends(m, {{"x", x}}, "m", want_max);
  expect_both_backends(m, {{"x", x}}, "a", want_avg);
  expect_both_backends(m, {{"x", x}}, "f", want_flat);
}

// The shape arithmetic exporters write (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, a
// Div of sizes) folds while importing: the compiled graph reshapes by a fixed target.
TEST(OnnxImport, ShapeArithmeticFoldsWhileImporting) {
  const Tensor x = ingot::testing::random_tensor({2, 3, 4}, 31);
  OnnxModel o(13);
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}, int64_t{4}});
  o.initializer("zero", Tensor::from_vector<int64_t>({0}, {}));
  o.initializer("axes0", Tensor::from_vector<int64_t>({0}, {1}));
  o.initializer("minus1", Tensor::from_vector<int64_t>({-1}, {1}));
  o.initializer("two", Tensor::from_vector<int64_t>({2}, {}));
  o.node("Shape", {"x"}, {"s"});
  o.node("Gather", {"s", "zero"}, {"n"});
  o.node("Div", {"n", "two"}, {"half"});        // 2 / 2 = 1, an integer quotient
  o.node("Mul", {"n", "two"}, {"n2"});
  o.node("Div", {"n2", "two"}, {"n3"});
  o.node("Add", {"n3", "half"}, {"n4"});        // 3
  o.node("Sub", {"n4", "half"}, {"n5"});        // 2
  o.node("Unsqueeze", {"n5", "axes0"}, {"n6"});
  o.node("Concat", {"n6", "minus1"}, {"target"}).add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(::onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  o.node("Reshape", {"x", "target"}, {"y"});
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::string json = m.to_json();
  EXPECT_EQ(json.find("\"gather\""), std::string::npos) << "the shape arithmetic is folded";
  const TensorMap r = compile(m, ReferenceBackend()).evaluate({}, {{"x", x}});
  EXPECT_EQ(r.at("y").shape(), (Shape{2, 12}));
  EXPECT_EQ(values(r.at("y")), values(x));
}

// A dim_param is a symbol: one compiled model runs any batch size.
TEST(OnnxImport, SymbolicBatchRunsAnySize) {
  OnnxModel o(17);
  o.input("x", DType::Float32, {std::string("batch"), int64_t{3}});
  o.initializer("w", Tensor::full(DType::Float32, {3, 2}, 1.0));
  o.node("MatMul", {"x", "w"}, {"y"});
  o.output("y");
  const PhysicalModel pm = compile(ingot::onnx::load_bytes(o.bytes()), CpuBackend(cpu_test::cpu_options()));
  for (int64_t n : {1, 4, 7}) {
    const TensorMap r = pm.evaluate({}, {{"x", Tensor::full(DType::Float32, {n, 3}, 2.0)}});
    EXPECT_EQ(r.at("y").shape(), (Shape{n, 2}));
    EXPECT_EQ(r.at("y").item(0), 6.0);
  }
}

// Older exporters list initializers among the graph inputs: they stay constants; an output that
// is an input gets a copy of its own; Constant, Clip bounds as inputs, Transpose, Slice, Cast.
TEST(OnnxImport, InitializersListedAsInputsAndMovementOps) {
  OnnxModel o(13);
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}});
  o.input("w", DType::Float32, {int64_t{2}, int64_t{3}});  // also an initializer below
  o.initializer("w", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  o.initializer("lo", Tensor::from_vector<float>({2.5f}, {}));
  o.initializer("starts", Tensor::from_vector<int64_t>({1}, {1}));
  o.initializer("ends", Tensor::from_vector<int64_t>({INT64_MAX}, {1}));
  o.initializer("axes", Tensor::from_vector<int64_t>({1}, {1}));
  o.node("Add", {"x", "w"}, {"s"});
  o.node("Clip", {"s", "lo", ""}, {"c"});
  attr(o.node("Transpose", {"c"}, {"t"}), "perm", std::vector<int64_t>{1, 0});
  o.node("Slice", {"t", "starts", "ends", "axes"}, {"sl"});
  attr(o.node("Cast", {"sl"}, {"i"}), "to", int64_t{::onnx::TensorProto::INT64});
  o.output("i");
  o.output("w");  // an initializer as an output: a copy of its own
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const TensorMap r = compile(m, ReferenceBackend()).evaluate({}, {{"x", Tensor::full(DType::Float32, {2, 3}, 0.25)}});
  EXPECT_EQ(r.at("i").dtype(), DType::Int64);
  // s = [[1.25, 2.25, 3.25], [4.25, 5.25, 6.25]], clipped below at 2.5, transposed, column 1, truncated
  EXPECT_EQ(r.at("i").to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(r.at("i").shape(), (Shape{3, 1}));
  EXPECT_EQ(values(r.at("w")), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

// Weights stored as external data beside the model load from there; a location that leaves the
// model's folder, a missing file or a range past its end is a clear error.
TEST(OnnxImport, ExternalDataLoadsFromBesideTheModel) {
  const std::string dir = temp_dir("external");
  const Tensor w = ingot::testing::random_tensor({3, 2}, 41);
  {
    std::ofstream f(dir + "/weights.bin", std::ios::binary);
    f << "padding!";  // the tensor starts at offset 8
    f.write(static_cast<const char*>(w.raw_data()), static_cast<std::streamsize>(w.nbytes()));
  }
  auto model_with = [&](const std::string& location, const std::string& offset, const std::string& length) {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{1}, int64_t{3}});
    auto* t = o.graph().add_initializer();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(3);
    t->add_dims(2);
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"location", location}, {"offset", offset}, {"length", length}}) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    o.node("MatMul", {"x", "w"}, {"y"});
    o.output("y");
    const std::string path = dir + "/model.onnx";
    std::ofstream(path, std::ios::binary) << o.bytes();
    return path;
  };
  const Model m = ingot::onnx::load(model_with("weights.bin", "8", "24"));
  const TensorMap r = compile(m, ReferenceBackend()).evaluate({}, {{"x", Tensor::from_vector<float>({1, 0, 0}, {1, 3})}});
  const std::vector<double> wv = values(w);
  EXPECT_EQ(values(r.at("y")), std::vector<double>(wv.begin(), wv.begin() + 2));  // row 0 of w
  for (const auto& [loc, off, len, fragment] : std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"../weights.bin", "8", "24", "leaves the model's folder"},
           {"/etc/passwd", "0", "24", "must be relative"},
           {"missing.bin", "0", "24", "cannot open"},
           {"weights.bin", "16", "24", "lies outside"},
           {"weights.bin", "x", "24", "is not a size"},
           {"weights.bin", "0", "20", "bytes of data for 6 elements"}}) {
    try {
      ingot::onnx::load(model_with(loc, off, len));
      ADD_FAILURE() << loc << " " << off << " " << len << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

// Bad files and unsupported models: clear errors naming what is wrong.
TEST(OnnxImport, BadModelsAreClearErrors) {
  expect_error("this is not a protobuf", "not a valid ONNX ModelProto");
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    o.node("Frobnicate", {"x"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "no conversion for ONNX operator Frobnicate (1 node)");
  }
  {
    // Every missing operator at once, with counts.
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    o.node("Frobnicate", {"x"}, {"a"});
    o.node("Zorch", {"a"}, {"b"});
    o.node("Frobnicate", {"b"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "no conversion for ONNX operators Frobnicate (2 nodes), Zorch (1 node)");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    o.node("Relu", {"x"}, {"y"}).set_domain("com.microsoft");
    o.output("y");
    expect_error(o.bytes(), "domain 'com.microsoft': Relu (1 node)");
  }
  {
    OnnxModel o(3);
    o.input("x", DType::Float32, {int64_t{2}});
    o.node("Relu", {"x"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "opset 3");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    o.node("Relu", {"nowhere"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "'nowhere' is read before any node produces it");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    auto* t = o.graph().add_initializer();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_raw_data(std::string(8, '\0'));  // 2 floats for 4 elements
    o.node("Add", {"x", "w"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "8 bytes of data for 4 elements");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    auto* t = o.graph().add_initializer();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto::UINT32);
    t->add_dims(1);
    t->add_uint64_data(1);
    o.node("Add", {"x", "w"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "UINT32 has no ingot dtype");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    o.output("x");
    expect_error(o.bytes(), "graph output 'x' is also a graph input");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {std::string("N"), int64_t{3}});
    o.node("Shape", {"x"}, {"s"});
    o.node("Reshape", {"x", "s"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "only known at run time");
  }
  {
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}, int64_t{4}});
    o.initializer("w", Tensor::full(DType::Float32, {1, 1, 3, 3, 3}, 1.0));
    o.node("Conv", {"x", "w"}, {"y"});
    o.output("y");
    expect_error(o.bytes(), "only 1-D and 2-D windows are supported");
  }
}

// trainable: float initializers become parameters with their values returned; the model
// computes what the constant import computes, its parameters get gradients (checked against
// finite differences), and an integer initializer (a Reshape target) stays a constant.
TEST(OnnxImport, TrainableInitializersBecomeParameters) {
  OnnxModel o(17);
  o.input("x", DType::Float64, {std::string("N"), int64_t{3}});
  o.initializer("w", ingot::testing::random_tensor({3, 4}, 1, -1, 1, DType::Float64));
  o.initializer("b", ingot::testing::random_tensor({4}, 2, -1, 1, DType::Float64));
  o.initializer("shape", Tensor::from_vector<int64_t>({-1, 2, 2}, {3}));
  o.node("MatMul", {"x", "w"}, {"h"});
  o.node("Add", {"h", "b"}, {"h1"});
  o.node("Tanh", {"h1"}, {"h2"});
  o.node("Reshape", {"h2", "shape"}, {"y"});
  o.output("y");
  const ingot::onnx::TrainableModel t = ingot::onnx::load_trainable_bytes(o.bytes());
  ASSERT_EQ(t.params.size(), 2u);
  EXPECT_TRUE(t.params.count("w") && t.params.count("b"));
  const Tensor x = ingot::testing::random_tensor({5, 3}, 3, -1, 1, DType::Float64);
  const PhysicalModel pm = compile(t.model, ReferenceBackend());
  const std::vector<std::string> names = pm.parameter_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), (std::set<std::string>{"w", "b"}));
  const PhysicalModel frozen = compile(ingot::onnx::load_bytes(o.bytes()), ReferenceBackend());
  EXPECT_EQ(max_abs_diff(pm.evaluate(t.params, {{"x", x}}).at("y"), frozen.evaluate({}, {{"x", x}}).at("y")), 0);
  ingot::testing::check_model_gradients(pm, t.params, {{"x", x}},
                                        {{"y", ingot::testing::random_tensor({5, 2, 2}, 4, -1, 1, DType::Float64)}});
}
