// ONNX If, Loop and Scan imported (src/frontends/onnx/convert_control_flow.cpp): models written
// with the protobuf API, run on the reference interpreter and the CPU backend against values
// computed by hand in double; which ingot construct each becomes (an if / while / scan node, a
// branch taken while importing, an unrolled loop); nesting; and the clear errors for what ingot
// cannot run or a malformed file.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_util.h"
#include "ingot/compile.h"
#include "ingot/cpu_backend.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "onnx_test_util.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::onnx_test;
using ingot::testing::expect_error;
using ingot::testing::random_tensor;

namespace {

CompileOptions dynamic() {
  CompileOptions o;
  o.dynamic_control_flow = true;
  return o;
}

PhysicalModel compile_on(const Model& m, int backend, const CompileOptions& o = dynamic()) {
  return backend == 0 ? compile(m, ReferenceBackend(), o) : compile(m, CpuBackend(cpu_test::cpu_options()), o);
}

std::vector<double> values(const Tensor& t) { return t.astype(DType::Float64).to_vector<double>(); }

void expect_values(const Tensor& got, const std::vector<double>& want, const Shape& shape, double tol = 1e-5) {
  EXPECT_EQ(to_string(got.shape()), to_string(shape));
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << i;
}

// How many nodes of `op` the compiled graph holds at its top level.
int count_ops(const PhysicalModel& pm, const std::string& op) {
  int n = 0;
  for (const Node& node : pm.graph().nodes()) n += node.op == op;
  return n;
}

Tensor scalar_bool(bool b) { return Tensor::scalar<bool>(b); }

}  // namespace

// ------------------------------------------------------------------------------------- If

// then: 2 (x + w), reading x and w of the enclosing graph and an initializer of its own; else:
// x - w. The result is read again outside the If.
void write_if_model(OnnxModel& o) {
  o.input("cond", DType::Bool, {});
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}});
  o.initializer("w", Tensor::from_vector<float>({1, 2, 3}, {3}));
  OnnxSubgraph then_branch("then_body"), else_branch("else_body");
  then_branch.initializer("two", Tensor::scalar<float>(2));
  then_branch.node("Add", {"x", "w"}, {"then_sum"});
  then_branch.node("Mul", {"then_sum", "two"}, {"then_out"});
  then_branch.output("then_out");
  else_branch.node("Sub", {"x", "w"}, {"else_out"});
  else_branch.output("else_out");
  auto& node = o.node("If", {"cond"}, {"y"});
  attr(node, "then_branch", then_branch.proto);
  attr(node, "else_branch", else_branch.proto);
  o.node("Add", {"y", "x"}, {"z"});
  o.output("z");
}

TEST(OnnxImportControlFlow, IfOnARunTimeConditionRunsTheTakenBranch) {
  OnnxModel o(13);
  write_if_model(o);
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Tensor x = random_tensor({2, 3}, 1);
  const std::vector<double> X = values(x), W = {1, 2, 3};
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = compile_on(m, b);
    EXPECT_EQ(count_ops(pm, "if"), 1);
    for (const bool cond : {true, false}) {
      std::vector<double> want(6);
      for (size_t i = 0; i < 6; ++i) want[i] = (cond ? 2 * (X[i] + W[i % 3]) : X[i] - W[i % 3]) + X[i];
      expect_values(pm.evaluate({}, {{"cond", scalar_bool(cond)}, {"x", x}}).at("z"), want, {2, 3});
    }
  }
  // ONNX's If is a run-time choice by definition: the imported model compiles without the
  // dynamic_control_flow option logical models need, and still branches per call.
  const PhysicalModel plain = compile(m, ReferenceBackend());
  EXPECT_EQ(count_ops(plain, "if"), 1);
  expect_values(plain.evaluate({}, {{"cond", scalar_bool(false)}, {"x", x}}).at("z"),
                [&] {
                  std::vector<double> want(6);
                  for (size_t i = 0; i < 6; ++i) want[i] = X[i] - W[i % 3] + X[i];
                  return want;
                }(),
                {2, 3});
  // Saved and loaded, the model keeps that mark.
  EXPECT_EQ(count_ops(compile(Model::from_json(m.to_json()), ReferenceBackend()), "if"), 1);
}

// A branch that reads the enclosing graph's input x (no value_info, as exporters write them) and
// divides it and raises it to a power: Div and Pow convert by their operands' element type,
// which the branch knows from x's declaration in the enclosing graph (it once lost it there).
TEST(OnnxImportControlFlow, BranchesKnowTheElementTypesOfTheValuesTheyRead) {
  OnnxModel o(13);
  o.input("cond", DType::Bool, {});
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}});
  OnnxSubgraph then_branch("then_body"), else_branch("else_body");
  then_branch.node("Sqrt", {"x"}, {"root"});
  then_branch.node("Div", {"x", "root"}, {"then_out"});
  then_branch.output("then_out");
  else_branch.node("Pow", {"x", "x"}, {"else_out"});
  else_branch.output("else_out");
  auto& node = o.node("If", {"cond"}, {"y"});
  attr(node, "then_branch", then_branch.proto);
  attr(node, "else_branch", else_branch.proto);
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  Tensor x = random_tensor({2, 3}, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::abs(x.data<float>()[i]) + 0.5f;
  const std::vector<double> X = values(x);
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = compile_on(m, b);
    for (const bool cond : {true, false}) {
      std::vector<double> want(6);
      for (size_t i = 0; i < 6; ++i) want[i] = cond ? X[i] / std::sqrt(X[i]) : std::pow(X[i], X[i]);
      expect_values(pm.evaluate({}, {{"cond", scalar_bool(cond)}, {"x", x}}).at("y"), want, {2, 3});
    }
  }
}

TEST(OnnxImportControlFlow, IfOnAKnownConditionTakesItsBranchWhileImporting) {
  // The branch's values fold too: the taken branch gives a Reshape its target.
  OnnxModel o(13);
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}});
  o.initializer("flag", scalar_bool(false));
  OnnxSubgraph then_branch("then_body"), else_branch("else_body");
  then_branch.initializer("rows", Tensor::from_vector<int64_t>({6}, {1}));
  then_branch.node("Identity", {"rows"}, {"then_shape"});
  then_branch.output("then_shape");
  else_branch.initializer("grid", Tensor::from_vector<int64_t>({3, 2}, {2}));
  else_branch.node("Identity", {"grid"}, {"else_shape"});
  else_branch.output("else_shape");
  auto& node = o.node("If", {"flag"}, {"shape"});
  attr(node, "then_branch", then_branch.proto);
  attr(node, "else_branch", else_branch.proto);
  o.node("Reshape", {"x", "shape"}, {"y"});
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Tensor x = random_tensor({2, 3}, 2);
  for (int b = 0; b < 2; ++b) {
    const PhysicalModel pm = compile_on(m, b, {});
    EXPECT_EQ(count_ops(pm, "if"), 0);
    expect_values(pm.evaluate({}, {{"x", x}}).at("y"), values(x), {3, 2});
  }
}

// ----------------------------------------------------------------------------------- Loop

// for (i = 0; i < M && cond; ++i) { y = 2 y + x + i; cond = sum(y) < 40; }
void write_while_loop(OnnxModel& o) {
  o.input("M", DType::Int64, {});
  o.input("cond", DType::Bool, {});
  o.input("x", DType::Float32, {int64_t{2}});
  o.input("y0", DType::Float32, {int64_t{2}});
  o.initializer("limit", Tensor::scalar<float>(40));
  OnnxSubgraph body("loop_body");
  body.input("i", DType::Int64, {});
  body.input("cond_in", DType::Bool, {});
  body.input("y_in", DType::Float32, {int64_t{2}});
  body.initializer("two", Tensor::scalar<float>(2));
  body.node("Mul", {"y_in", "two"}, {"doubled"});
  body.node("Add", {"doubled", "x"}, {"plus_x"});
  attr(body.node("Cast", {"i"}, {"i_float"}), "to", int64_t{::onnx::TensorProto::FLOAT});
  body.node("Add", {"plus_x", "i_float"}, {"y_out"});
  attr(body.node("ReduceSum", {"y_out"}, {"total"}), "keepdims", int64_t{0});
  body.node("Less", {"total", "limit"}, {"cond_out"});
  body.output("cond_out");
  body.output("y_out");
  attr(o.node("Loop", {"M", "cond", "y0"}, {"y"}), "body", body.proto);
  o.output("y");
}

TEST(OnnxImportControlFlow, LoopWithARunTimeConditionIsAWhileLoop) {
  OnnxModel o(13);
  write_while_loop(o);
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const std::vector<double> x = {1.5, -0.5}, y0 = {0.25, 2};
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = compile_on(m, b);
    EXPECT_EQ(count_ops(pm, "while"), 1);
    for (const auto& [trip, cond] : std::vector<std::pair<int64_t, bool>>{{10, true}, {2, true}, {10, false}, {0, true}}) {
      std::vector<double> y = y0;
      bool c = cond;
      for (int64_t i = 0; i < trip && c; ++i) {
        for (size_t k = 0; k < 2; ++k) y[k] = 2 * y[k] + x[k] + static_cast<double>(i);
        c = y[0] + y[1] < 40;
      }
      const TensorMap got = pm.evaluate(
          {}, {{"M", Tensor::scalar<int64_t>(trip)}, {"cond", scalar_bool(cond)},
               {"x", Tensor::from_vector<float>({1.5f, -0.5f}, {2})}, {"y0", Tensor::from_vector<float>({0.25f, 2}, {2})}});
      expect_values(got.at("y"), y, {2});
    }
  }
}

TEST(OnnxImportControlFlow, LoopWithAKnownTripCountAndNoConditionNeedsNoOption) {
  // M an initializer, cond omitted: a fixed trip count, which compiles without
  // dynamic_control_flow (the body's condition output is ignored, as ONNX says).
  OnnxModel o(13);
  o.input("y0", DType::Float32, {int64_t{2}});
  o.initializer("M", Tensor::scalar<int64_t>(3));
  OnnxSubgraph body("loop_body");
  body.input("i", DType::Int64, {});
  body.input("cond_in", DType::Bool, {});
  body.input("y_in", DType::Float32, {int64_t{2}});
  body.initializer("three", Tensor::scalar<float>(3));
  body.node("Mul", {"y_in", "three"}, {"y_out"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("y_out");
  attr(o.node("Loop", {"M", "", "y0"}, {"y"}), "body", body.proto);
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  for (int b = 0; b < 2; ++b)
    expect_values(compile_on(m, b, {}).evaluate({}, {{"y0", Tensor::from_vector<float>({1, -2}, {2})}}).at("y"),
                  {27, -54}, {2});
}

// A Loop with scan outputs, M = 4 and cond true known: y = y + i (or y + 1 in a body that does
// not read i); stacked y * x. The iteration number is a value of the body (a scan over 0..3).
TEST(OnnxImportControlFlow, LoopScanOutputsStackOverAKnownTripCount) {
  for (const bool reads_i : {true, false}) {
    SCOPED_TRACE(reads_i ? "y + i" : "y + 1");
    OnnxModel o(13);
    o.input("x", DType::Float32, {int64_t{2}});
    o.input("y0", DType::Float32, {int64_t{2}});
    o.initializer("M", Tensor::scalar<int64_t>(4));
    o.initializer("cond", scalar_bool(true));
    OnnxSubgraph body("loop_body");
    body.input("i", DType::Int64, {});
    body.input("cond_in", DType::Bool, {});
    body.input("y_in", DType::Float32, {int64_t{2}});
    body.initializer("one", Tensor::scalar<float>(1));
    if (reads_i) attr(body.node("Cast", {"i"}, {"step"}), "to", int64_t{::onnx::TensorProto::FLOAT});
    body.node("Add", {"y_in", reads_i ? "step" : "one"}, {"y_out"});
    body.node("Mul", {"y_out", "x"}, {"scan_out"});
    body.node("Identity", {"cond_in"}, {"cond_out"});
    body.output("cond_out");
    body.output("y_out");
    body.output("scan_out");
    attr(o.node("Loop", {"M", "cond", "y0"}, {"y", "ys"}), "body", body.proto);
    o.output("y");
    o.output("ys");
    const Model m = ingot::onnx::load_bytes(o.bytes());
    const std::vector<double> x = {2, -1};
    std::vector<double> y = {0.5, 1}, ys;
    for (int i = 0; i < 4; ++i)
      for (size_t k = 0; k < 2; ++k) {
        y[k] += reads_i ? i : 1;
        ys.push_back(y[k] * x[k]);
      }
    for (int b = 0; b < 2; ++b) {
      const PhysicalModel pm = compile_on(m, b, {});
      EXPECT_EQ(count_ops(pm, "scan"), 1);
      const TensorMap got = pm.evaluate({}, {{"x", Tensor::from_vector<float>({2, -1}, {2})},
                                             {"y0", Tensor::from_vector<float>({0.5f, 1}, {2})}});
      expect_values(got.at("y"), y, {2});
      expect_values(got.at("ys"), ys, {4, 2});
    }
  }
}

// ONNX's test_loop11 pattern: the body slices a tensor at [i, i + 1), which ingot sizes while
// importing, so each iteration is imported with its number known (the loop unrolled).
TEST(OnnxImportControlFlow, ALoopWhoseBodyNeedsItsIterationNumberUnrolls) {
  OnnxModel o(13);
  o.input("y0", DType::Float32, {int64_t{1}});
  o.initializer("M", Tensor::scalar<int64_t>(3));
  o.initializer("table", Tensor::from_vector<float>({5, 7, 11, 13}, {4}));
  OnnxSubgraph body("loop_body");
  body.input("i", DType::Int64, {});
  body.input("cond_in", DType::Bool, {});
  body.input("y_in", DType::Float32, {int64_t{1}});
  body.initializer("one", Tensor::scalar<int64_t>(1));
  body.initializer("axes", Tensor::from_vector<int64_t>({0}, {1}));
  body.node("Add", {"i", "one"}, {"end"});
  body.node("Unsqueeze", {"i", "axes"}, {"start_1d"});
  body.node("Unsqueeze", {"end", "axes"}, {"end_1d"});
  body.node("Slice", {"table", "start_1d", "end_1d"}, {"row"});
  body.node("Add", {"y_in", "row"}, {"y_out"});
  body.node("Identity", {"y_out"}, {"scan_out"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("y_out");
  body.output("scan_out");
  attr(o.node("Loop", {"M", "", "y0"}, {"y", "ys"}), "body", body.proto);
  o.output("y");
  o.output("ys");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  for (int b = 0; b < 2; ++b) {
    const PhysicalModel pm = compile_on(m, b, {});
    EXPECT_EQ(count_ops(pm, "scan") + count_ops(pm, "while"), 0);
    const TensorMap got = pm.evaluate({}, {{"y0", Tensor::from_vector<float>({1}, {1})}});
    expect_values(got.at("y"), {24}, {1});
    expect_values(got.at("ys"), {6, 13, 24}, {3, 1});
  }
}

// ----------------------------------------------------------------------------------- Scan

// s += a[:, t] * b[2 - t, :] for t = 0..2: `a` scanned along axis 1, `b` in reverse; the
// stacked s is written along axis 1, last step first.
TEST(OnnxImportControlFlow, ScanWithAxesAndDirections) {
  OnnxModel o(16);
  o.input("s0", DType::Float32, {int64_t{2}});
  o.input("a", DType::Float32, {int64_t{2}, int64_t{3}});
  o.input("b", DType::Float32, {int64_t{3}, int64_t{2}});
  OnnxSubgraph body("scan_body");
  body.input("s_in", DType::Float32, {int64_t{2}});
  body.input("a_t", DType::Float32, {int64_t{2}});
  body.input("b_t", DType::Float32, {int64_t{2}});
  body.node("Mul", {"a_t", "b_t"}, {"ab"});
  body.node("Add", {"s_in", "ab"}, {"s_out"});
  body.node("Identity", {"s_out"}, {"y"});
  body.output("s_out");
  body.output("y");
  auto& node = o.node("Scan", {"s0", "a", "b"}, {"s", "ys"});
  attr(node, "body", body.proto);
  attr(node, "num_scan_inputs", int64_t{2});
  attr(node, "scan_input_axes", std::vector<int64_t>{-1, 0});
  attr(node, "scan_input_directions", std::vector<int64_t>{0, 1});
  attr(node, "scan_output_directions", std::vector<int64_t>{1});
  attr(node, "scan_output_axes", std::vector<int64_t>{1});
  o.output("s");
  o.output("ys");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Tensor s0 = random_tensor({2}, 3), a = random_tensor({2, 3}, 4), bt = random_tensor({3, 2}, 5);
  const std::vector<double> A = values(a), B = values(bt);
  std::vector<double> s = values(s0), ys(6);
  for (int t = 0; t < 3; ++t)
    for (int k = 0; k < 2; ++k) {
      s[static_cast<size_t>(k)] += A[static_cast<size_t>(k * 3 + t)] * B[static_cast<size_t>((2 - t) * 2 + k)];
      ys[static_cast<size_t>(k * 3 + (2 - t))] = s[static_cast<size_t>(k)];
    }
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = compile_on(m, b, {});
    EXPECT_EQ(count_ops(pm, "scan"), 1);
    const TensorMap got = pm.evaluate({}, {{"s0", s0}, {"a", a}, {"b", bt}});
    expect_values(got.at("s"), s, {2});
    expect_values(got.at("ys"), ys, {2, 3});
  }
}

// Opset 8: sequence_lens first (omitted) and a batch axis; each batch entry scans on its own.
TEST(OnnxImportControlFlow, BatchedScanOfOpset8) {
  OnnxModel o(8);
  o.input("s0", DType::Float32, {int64_t{2}, int64_t{2}});
  o.input("x", DType::Float32, {int64_t{2}, int64_t{3}, int64_t{2}});
  OnnxSubgraph body("scan_body");
  body.input("s_in", DType::Float32, {int64_t{2}});
  body.input("x_t", DType::Float32, {int64_t{2}});
  body.node("Mul", {"s_in", "x_t"}, {"s_out"});
  body.node("Identity", {"s_out"}, {"y"});
  body.output("s_out");
  body.output("y");
  auto& node = o.node("Scan", {"", "s0", "x"}, {"s", "ys"});
  attr(node, "body", body.proto);
  attr(node, "num_scan_inputs", int64_t{1});
  attr(node, "directions", std::vector<int64_t>{1});
  o.output("s");
  o.output("ys");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Tensor s0 = random_tensor({2, 2}, 6), x = random_tensor({2, 3, 2}, 7);
  const std::vector<double> S0 = values(s0), X = values(x);
  std::vector<double> s(4), ys(12);
  for (int e = 0; e < 2; ++e)
    for (int k = 0; k < 2; ++k) {
      double v = S0[static_cast<size_t>(e * 2 + k)];
      for (int step = 0; step < 3; ++step) {
        const int t = 2 - step;  // reverse: the last element first, its output where it came from
        v *= X[static_cast<size_t>((e * 3 + t) * 2 + k)];
        ys[static_cast<size_t>((e * 3 + step) * 2 + k)] = v;
      }
      s[static_cast<size_t>(e * 2 + k)] = v;
    }
  for (int b = 0; b < 2; ++b) {
    const TensorMap got = compile_on(m, b, {}).evaluate({}, {{"s0", s0}, {"x", x}});
    expect_values(got.at("s"), s, {2, 2});
    expect_values(got.at("ys"), ys, {2, 3, 2});
  }
}

// ---------------------------------------------------------------------------------- Nesting

// An If on a run-time condition whose then_branch holds a Scan (a cumulative sum of x, its last
// value) and whose else_branch holds a Loop of three doublings; the Scan's body reads a value of
// the outermost graph through both levels.
TEST(OnnxImportControlFlow, LoopsNestedInBranchesReadTheOutermostGraph) {
  OnnxModel o(13);
  o.input("cond", DType::Bool, {});
  o.input("x", DType::Float32, {int64_t{3}, int64_t{2}});
  o.input("bias", DType::Float32, {int64_t{2}});
  o.initializer("zeros", Tensor::from_vector<float>({0, 0}, {2}));
  o.initializer("M", Tensor::scalar<int64_t>(3));

  OnnxSubgraph scan_body("scan_body");
  scan_body.input("acc_in", DType::Float32, {int64_t{2}});
  scan_body.input("x_t", DType::Float32, {int64_t{2}});
  scan_body.node("Add", {"acc_in", "x_t"}, {"acc_sum"});
  scan_body.node("Add", {"acc_sum", "bias"}, {"acc_out"});
  scan_body.output("acc_out");
  OnnxSubgraph then_branch("then_body");
  auto& scan = then_branch.node("Scan", {"zeros", "x"}, {"then_out"});
  attr(scan, "body", scan_body.proto);
  attr(scan, "num_scan_inputs", int64_t{1});
  then_branch.output("then_out");

  OnnxSubgraph loop_body("loop_body");
  loop_body.input("i", DType::Int64, {});
  loop_body.input("c_in", DType::Bool, {});
  loop_body.input("v_in", DType::Float32, {int64_t{2}});
  loop_body.node("Add", {"v_in", "v_in"}, {"v_out"});
  loop_body.node("Identity", {"c_in"}, {"c_out"});
  loop_body.output("c_out");
  loop_body.output("v_out");
  OnnxSubgraph else_branch("else_body");
  attr(else_branch.node("Loop", {"M", "", "bias"}, {"else_out"}), "body", loop_body.proto);
  else_branch.output("else_out");

  auto& node = o.node("If", {"cond"}, {"y"});
  attr(node, "then_branch", then_branch.proto);
  attr(node, "else_branch", else_branch.proto);
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Tensor x = random_tensor({3, 2}, 8), bias = random_tensor({2}, 9);
  const std::vector<double> X = values(x), Bias = values(bias);
  std::vector<double> then_want(2), else_want(2);
  for (size_t k = 0; k < 2; ++k) {
    for (size_t t = 0; t < 3; ++t) then_want[k] += X[t * 2 + k] + Bias[k];
    else_want[k] = Bias[k] * 8;
  }
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = compile_on(m, b);
    for (const bool cond : {true, false})
      expect_values(pm.evaluate({}, {{"cond", scalar_bool(cond)}, {"x", x}, {"bias", bias}}).at("y"),
                    cond ? then_want : else_want, {2});
  }
}

// An If on a condition of the outermost graph inside a Loop's body (negate three times, or not).
TEST(OnnxImportControlFlow, AnIfOnARunTimeConditionInsideALoopBody) {
  OnnxModel o(13);
  o.input("flip", DType::Bool, {});
  o.input("y0", DType::Float32, {int64_t{2}});
  o.initializer("M", Tensor::scalar<int64_t>(3));
  OnnxSubgraph then_branch("then_body"), else_branch("else_body"), body("loop_body");
  then_branch.node("Neg", {"y_in"}, {"t_out"});
  then_branch.output("t_out");
  else_branch.node("Identity", {"y_in"}, {"e_out"});
  else_branch.output("e_out");
  body.input("i", DType::Int64, {});
  body.input("c_in", DType::Bool, {});
  body.input("y_in", DType::Float32, {int64_t{2}});
  auto& branch = body.node("If", {"flip"}, {"y_out"});
  attr(branch, "then_branch", then_branch.proto);
  attr(branch, "else_branch", else_branch.proto);
  body.node("Identity", {"c_in"}, {"c_out"});
  body.output("c_out");
  body.output("y_out");
  attr(o.node("Loop", {"M", "", "y0"}, {"y"}), "body", body.proto);
  o.output("y");
  const Model m = ingot::onnx::load_bytes(o.bytes());
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b == 0 ? "reference" : "cpu");
    const PhysicalModel pm = compile_on(m, b);
    for (const bool flip : {true, false})
      expect_values(pm.evaluate({}, {{"flip", scalar_bool(flip)}, {"y0", Tensor::from_vector<float>({1, -2}, {2})}}).at("y"),
                    flip ? std::vector<double>{-1, 2} : std::vector<double>{1, -2}, {2});
  }
}

// A model with control flow saves to JSON and loads again (what fuzz_onnx checks of every
// model that imports), computing the same.
TEST(OnnxImportControlFlow, ImportedControlFlowSurvivesJson) {
  OnnxModel o(13);
  write_while_loop(o);
  const Model m = ingot::onnx::load_bytes(o.bytes());
  const Model back = Model::from_json(m.to_json());
  const TensorMap in = {{"M", Tensor::scalar<int64_t>(5)}, {"cond", scalar_bool(true)},
                        {"x", Tensor::from_vector<float>({1, 2}, {2})}, {"y0", Tensor::from_vector<float>({0, 1}, {2})}};
  const Tensor want = compile_on(m, 0).evaluate({}, in).at("y");
  expect_values(compile_on(back, 0).evaluate({}, in).at("y"), values(want), want.shape(), 0);
}

// ----------------------------------------------------------------------------------- Errors

namespace {

std::string error_of_import(const OnnxModel& o) {
  return ingot::testing::error_of([&] { ingot::onnx::load_bytes(o.bytes()); });
}

void expect_import_error(const OnnxModel& o, const std::vector<std::string>& fragments) {
  const std::string e = error_of_import(o);
  for (const std::string& f : fragments) EXPECT_NE(e.find(f), std::string::npos) << "'" << f << "' not in: " << e;
}

// A Loop over y0 with `body`; M and cond as given.
void loop_model(OnnxModel& o, const ::onnx::GraphProto& body, const std::string& m, int outputs = 1) {
  o.input("M", DType::Int64, {});
  o.input("y0", DType::Float32, {int64_t{2}});
  std::vector<std::string> outs = {"y"};
  if (outputs > 1) outs.push_back("ys");
  auto& n = o.node("Loop", {m, "", "y0"}, outs);
  n.set_name("the_loop");
  attr(n, "body", body);
  for (const auto& out : outs) o.output(out);
}

void plain_loop_body(OnnxSubgraph& body, bool scan_output) {
  body.input("i", DType::Int64, {});
  body.input("c_in", DType::Bool, {});
  body.input("y_in", DType::Float32, {int64_t{2}});
  body.node("Neg", {"y_in"}, {"y_out"});
  body.node("Identity", {"c_in"}, {"c_out"});
  body.output("c_out");
  body.output("y_out");
  if (scan_output) body.output("y_out");
}

}  // namespace

TEST(OnnxImportControlFlow, WhatIngotCannotRunIsAClearError) {
  {
    // Scan outputs over a trip count fed at run time: their size is not known.
    OnnxSubgraph body("loop_body");
    plain_loop_body(body, true);
    OnnxModel o(13);
    loop_model(o, body.proto, "M", 2);
    expect_import_error(o, {"ONNX node 'the_loop' (Loop)", "its trip count M ('M') is only known at run time",
                            "stack no outputs"});
  }
  {
    OnnxSubgraph body("loop_body");
    plain_loop_body(body, false);
    OnnxModel o(13);
    o.input("y0", DType::Float32, {int64_t{2}});
    attr(o.node("Loop", {"", "", "y0"}, {"y"}), "body", body.proto);
    o.output("y");
    expect_import_error(o, {"neither a trip count M nor a condition"});
  }
  {
    // A sequence-typed loop variable (test_loop13_seq): ingot has tensors only.
    OnnxSubgraph body("loop_body");
    body.input("i", DType::Int64, {});
    body.input("c_in", DType::Bool, {});
    body.g->add_input()->set_name("seq_in");
    body.g->mutable_input(2)->mutable_type()->mutable_sequence_type();
    body.node("Identity", {"c_in"}, {"c_out"});
    body.node("Identity", {"seq_in"}, {"seq_out"});
    body.output("c_out");
    body.output("seq_out");
    OnnxModel o(13);
    loop_model(o, body.proto, "M");
    expect_import_error(o, {"loop_body", "'seq_in' is not a tensor"});
  }
}

TEST(OnnxImportControlFlow, MalformedSubgraphsAreClearErrors) {
  {
    OnnxSubgraph body("loop_body");  // takes no carried value, but the Loop passes one
    body.input("i", DType::Int64, {});
    body.input("c_in", DType::Bool, {});
    body.node("Identity", {"c_in"}, {"c_out"});
    body.output("c_out");
    OnnxModel o(13);
    loop_model(o, body.proto, "M");
    expect_import_error(o, {"the_loop", "its body takes 2 inputs; with 1 loop-carried values it must take 3"});
  }
  {
    OnnxModel o(13);
    o.input("M", DType::Int64, {});
    o.input("y0", DType::Float32, {int64_t{2}});
    o.node("Loop", {"M", "", "y0"}, {"y"});
    o.output("y");
    expect_import_error(o, {"its subgraph attribute 'body' is missing"});
  }
  {
    OnnxModel o(13);
    write_if_model(o);
    auto* then_branch = o.graph().mutable_node(0)->mutable_attribute(0)->mutable_g();
    then_branch->add_input()->set_name("extra");
    expect_import_error(o, {"(If)", "then_branch takes 1 inputs; an If's branches take none"});
  }
  {
    OnnxModel o(13);
    write_if_model(o);
    o.graph().mutable_node(0)->mutable_attribute(1)->mutable_g()->add_output()->set_name("else_out");
    expect_import_error(o, {"else_branch returns 2 values for its 1 outputs"});
  }
  {
    OnnxModel o(13);
    write_if_model(o);
    o.graph().mutable_node(0)->mutable_attribute(1)->mutable_g()->mutable_node(0)->set_output(0, "then_typo");
    expect_import_error(o, {"else_body", "'else_out' is read before any node produces it"});
  }
  {
    OnnxModel o(16);
    o.input("s0", DType::Float32, {int64_t{2}});
    o.input("x", DType::Float32, {int64_t{3}, int64_t{2}});
    OnnxSubgraph body("scan_body");
    plain_loop_body(body, false);
    attr(o.node("Scan", {"s0", "x"}, {"s"}), "body", body.proto);
    o.output("s");
    expect_import_error(o, {"(Scan)", "num_scan_inputs must be given"});
    attr(*o.graph().mutable_node(0), "num_scan_inputs", int64_t{1});
    expect_import_error(o, {"its body takes 3 inputs; with 1 states and 1 scan inputs it must take 2"});
  }
  {
    // Ifs nested past the limit (and within what protobuf parses, about 30): refused before
    // anything recurses that deep.
    ::onnx::GraphProto leaf;
    leaf.set_name("leaf");
    leaf.add_output()->set_name("leaf_out");
    auto* copy = leaf.add_node();
    copy->set_op_type("Identity");
    copy->add_input("x");
    copy->add_output("leaf_out");
    ::onnx::GraphProto inner = leaf;
    for (int level = 0; level < 20; ++level) {
      ::onnx::GraphProto outer;
      outer.set_name("level" + std::to_string(level));
      const std::string out = "out" + std::to_string(level);
      outer.add_output()->set_name(out);
      auto* n = outer.add_node();
      n->set_op_type("If");
      n->add_input("cond");
      n->add_output(out);
      attr(*n, "then_branch", inner);
      attr(*n, "else_branch", leaf);
      inner = outer;
    }
    OnnxModel o(13);
    o.input("cond", DType::Bool, {});
    o.input("x", DType::Float32, {int64_t{2}});
    *o.graph().add_node() = inner.node(0);
    o.output(inner.output(0).name());
    expect_import_error(o, {"subgraphs nest more than 16 deep"});
  }
}
