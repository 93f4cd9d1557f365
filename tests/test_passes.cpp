// Graph optimization passes: what each removes / merges / folds and what it leaves alone, the
// optimization controls and their errors, and semantic equivalence on random graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "compiler/memory_plan.h"
#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "ir/op_registry.h"
#include "random_graph.h"

namespace ingot {
namespace {

using testing::annotate;
using testing::random_tensor;
using testing::run_graph;

using testing::count_op;

Tensor scalar_f32(double x) { return Tensor::full(DType::Float32, {}, x); }

// ---------------------------------------------------------------- constant folding

TEST(ConstantFolding, FoldsAllConstantChains) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId a = g.add_constant("a", random_tensor({2, 3}, 1));
  ValueId b = g.add_constant("b", random_tensor({2, 3}, 2));
  ValueId s = g.add_op("add", {a, b});
  ValueId t = g.add_op("tanh", {s});
  g.set_output("y", g.add_op("mul", {x, t}));
  annotate(g, {{x, {2, 3}}});
  Tensor xin = random_tensor({2, 3}, 3);
  auto before = run_graph(g, {{"x", xin}});
  PassReport r = fold_constants(g);
  EXPECT_EQ(r.changes, 2);
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "mul");
  check_annotated(g, "test");
  EXPECT_TRUE(allclose(run_graph(g, {{"x", xin}})[0], before[0], 0, 0));
}

TEST(ConstantFolding, KeepsWeakScalarResultTypes) {
  // (2.0 + 3.0) with two weak literals is float32; float16 x * that promotes to float32, and the
  // folded constant must keep it that way.
  Graph g;
  ValueId x = g.add_input("x");
  g.value(x).dtype = DType::Float16;
  ValueId w1 = g.add_constant("w1", scalar_f32(2.0));
  ValueId w2 = g.add_constant("w2", scalar_f32(3.0));
  g.value(w1).weak_type = g.value(w2).weak_type = true;
  ValueId s = g.add_op("add", {w1, w2});
  ValueId y = g.add_op("mul", {x, s});
  g.set_output("y", y);
  annotate(g, {{x, {4}}});
  const DType before = g.value(y).dtype;
  Tensor xin = random_tensor({4}, 5).astype(DType::Float16);
  auto ref = run_graph(g, {{"x", xin}});
  fold_constants(g);
  EXPECT_EQ(count_op(g, "add"), 0);
  EXPECT_EQ(g.value(g.outputs()[0].second).dtype, before);
  auto got = run_graph(g, {{"x", xin}});
  EXPECT_TRUE(equal(got[0], ref[0])) << got[0].str() << " vs " << ref[0].str();
}

TEST(ConstantFolding, LeavesRandomSourcesAndRunTimeValues) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId r = g.add_op("random_uniform", {}, {{"shape", std::vector<int64_t>{4}}, {"seed", int64_t{1}}});
  g.set_output("y", g.add_op("add", {x, r}));
  annotate(g, {{x, {4}}});
  EXPECT_EQ(fold_constants(g).changes, 0);
  EXPECT_EQ(g.nodes().size(), 2u);
}

TEST(ConstantFolding, ConstantKeysFoldThroughCompile) {
  // A model whose weights are all fixed with constant_keys: the weight-only part folds.
  Model m;
  Connection x = m.input("x");
  Connection w = m.parameter("w", Init::normal(0.1), ShapeTemplate{4, 3});
  m.expose(matmul(x, w.T().T()) * 1.0, "y");
  CompileOptions o;
  o.shapes["x"] = {2, 4};
  o.constant_keys["w"] = random_tensor({4, 3}, 9);
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(count_op(pm.graph(), "transpose"), 0);
  EXPECT_EQ(count_op(pm.graph(), "mul"), 0);
  EXPECT_EQ(pm.graph().nodes().size(), 1u);
  CompileOptions none = o;
  none.optimization_level = "none";
  PhysicalModel ref = compile(m, ReferenceBackend(), none);
  Tensor xin = random_tensor({2, 4}, 4);
  EXPECT_TRUE(allclose(pm.evaluate({}, {{"x", xin}}).at("y"), ref.evaluate({}, {{"x", xin}}).at("y")));
}

// ---------------------------------------------------------------- simplification

TEST(Simplify, RemovesNeutralArithmetic) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId one = g.add_constant("one", scalar_f32(1));
  ValueId zero = g.add_constant("zero", scalar_f32(0));
  ValueId a = g.add_op("mul", {x, one});
  ValueId b = g.add_op("add", {zero, a});
  ValueId c = g.add_op("sub", {b, zero});
  ValueId d = g.add_op("div", {c, one});
  g.set_output("y", g.add_op("tanh", {d}));
  annotate(g, {{x, {2, 3}}});
  PassReport r = simplify(g);
  EXPECT_EQ(r.changes, 4);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "tanh");
  EXPECT_EQ(g.nodes()[0].inputs[0], *g.find_leaf("x"));
}

// pow(x, 1) is x and pow(x, 2) is x*x (what sum(x**2) and its gradient make); an integer base,
// another exponent or an exponent that is data keep their pow. Values against the reference,
// NaN, inf and -0 included, before and after.
TEST(Simplify, SquaresAndFirstPowersBecomeMultipliesAndCopies) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId e = g.add_input("e");
  ValueId k = g.add_input("k");
  g.value(k).dtype = DType::Int32;
  g.set_output("square", g.add_op("pow", {x, g.add_constant("two", scalar_f32(2))}));
  g.set_output("first", g.add_op("tanh", {g.add_op("pow", {x, g.add_constant("one", scalar_f32(1))})}));
  g.set_output("cube", g.add_op("pow", {x, g.add_constant("three", scalar_f32(3))}));  // kept
  g.set_output("data", g.add_op("pow", {x, e}));                                       // kept
  g.set_output("int", g.add_op("pow", {k, g.add_constant("two_i", Tensor::scalar<int32_t>(2))}));  // kept
  annotate(g, {{x, {6}}, {e, {6}}, {k, {6}}});
  Tensor xv = Tensor::from_vector<float>({1.5f, -0.0f, NAN, -INFINITY, 3e20f, -2.25f}, {6});
  const std::vector<Tensor> in = {xv, random_tensor({6}, 5), Tensor::from_vector<int32_t>({1, -2, 3, 0, 5, -7}, {6})};
  const std::vector<Tensor> before = ReferenceBackend().lower(g, {})->run(in);
  const PassReport r = simplify(g);
  EXPECT_EQ(r.changes, 2);
  int pows = 0, muls = 0;
  for (const Node& n : g.nodes()) {
    pows += n.op == "pow";
    muls += n.op == "mul";
  }
  EXPECT_EQ(pows, 3);
  EXPECT_EQ(muls, 1);
  const std::vector<Tensor> after = ReferenceBackend().lower(g, {})->run(in);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(allclose(after[i], before[i], 0, 0)) << g.outputs()[i].first;
}

TEST(Simplify, KeepsNeutralArithmeticThatChangesTypeOrShape) {
  Graph g;
  ValueId x = g.add_input("x");
  g.value(x).dtype = DType::Int32;
  ValueId y = g.add_input("y");
  ValueId one = g.add_constant("one", scalar_f32(1));
  ValueId ones = g.add_constant("ones", Tensor::full(DType::Float32, {2, 3}, 1));
  ValueId zero = g.add_constant("zero", scalar_f32(0));
  g.set_output("a", g.add_op("mul", {x, one}));     // int32 * float32 -> float32: kept
  g.set_output("b", g.add_op("mul", {y, ones}));    // [3] * [2, 3] broadcasts: kept
  g.set_output("c", g.add_op("sub", {zero, y}));    // 0 - y is not y: kept
  annotate(g, {{x, {3}}, {y, {3}}});
  EXPECT_EQ(simplify(g).changes, 0);
  EXPECT_EQ(g.nodes().size(), 3u);
}

TEST(Simplify, ComposesTransposesAndRemovesIdentityPerms) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId t1 = g.add_op("transpose", {x}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  ValueId t2 = g.add_op("transpose", {t1}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  g.set_output("y", g.add_op("relu", {t2}));
  ValueId u1 = g.add_op("transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  ValueId u2 = g.add_op("transpose", {u1}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  g.set_output("z", u2);
  annotate(g, {{x, {2, 3, 4}}});
  Tensor xin = random_tensor({2, 3, 4}, 1);
  auto before = run_graph(g, {{"x", xin}});
  simplify(g);
  EXPECT_EQ(count_op(g, "transpose"), 1);
  EXPECT_EQ(g.outputs()[1].second, *g.find_leaf("x"));  // identity composition removed
  auto after = run_graph(g, {{"x", xin}});
  EXPECT_TRUE(equal(before[0], after[0]));
  EXPECT_TRUE(equal(before[1], after[1]));
}

TEST(Simplify, ReshapeChainsCastsAndIdentities) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId r1 = g.add_op("reshape", {x}, {{"shape", std::vector<int64_t>{6, 4}}});
  ValueId r2 = g.add_op("reshape", {r1}, {{"shape", std::vector<int64_t>{4, -1}}});
  g.set_output("a", g.add_op("relu", {r2}));
  ValueId same = g.add_op("reshape", {x}, {{"shape", std::vector<int64_t>{2, 3, 4}}});
  ValueId c = g.add_op("cast", {same}, {{"dtype", std::string("float32")}});
  ValueId i = g.add_op("identity", {c});
  g.set_output("b", g.add_op("neg", {i}));
  annotate(g, {{x, {2, 3, 4}}});
  Tensor xin = random_tensor({2, 3, 4}, 2);
  auto before = run_graph(g, {{"x", xin}});
  simplify(g);
  EXPECT_EQ(count_op(g, "reshape"), 1);
  EXPECT_EQ(count_op(g, "cast"), 0);
  EXPECT_EQ(count_op(g, "identity"), 0);
  EXPECT_EQ(g.nodes().size(), 3u);
  auto after = run_graph(g, {{"x", xin}});
  EXPECT_TRUE(equal(before[0], after[0]));
  EXPECT_TRUE(equal(before[1], after[1]));
}

TEST(Simplify, KeepsCastsThatChangeType) {
  Graph g;
  ValueId x = g.add_input("x");
  g.set_output("y", g.add_op("cast", {x}, {{"dtype", std::string("float16")}}));
  annotate(g, {{x, {3}}});
  EXPECT_EQ(simplify(g).changes, 0);
}

// ---------------------------------------------------------------- CSE

TEST(CSE, TwoBranchesReadingOneLinearComputeItOnce) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId w = g.add_input("w", ValueKind::Parameter);
  ValueId b = g.add_input("b", ValueKind::Parameter);
  ValueId l1 = g.add_op("add", {g.add_op("matmul", {x, w}), b});
  ValueId l2 = g.add_op("add", {g.add_op("matmul", {x, w}), b});
  g.set_output("y", g.add_op("add", {g.add_op("relu", {l1}), g.add_op("tanh", {l2})}));
  annotate(g, {{x, {2, 4}}, {w, {4, 3}}, {b, {3}}});
  PassReport r = eliminate_common_subexpressions(g);
  EXPECT_EQ(r.changes, 2);
  EXPECT_EQ(count_op(g, "matmul"), 1);
  EXPECT_EQ(count_op(g, "add"), 2);
}

TEST(CSE, DoesNotMergeDifferentAttrsOrSeeds) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId s0 = g.add_op("sum", {x}, {{"axes", std::vector<int64_t>{0}}});
  ValueId s1 = g.add_op("sum", {x}, {{"axes", std::vector<int64_t>{1}}});
  Attrs r1{{"shape", std::vector<int64_t>{3}}, {"seed", int64_t{1}}};
  Attrs r2{{"shape", std::vector<int64_t>{3}}, {"seed", int64_t{2}}};
  ValueId a = g.add_op("random_uniform", {}, r1);
  ValueId b = g.add_op("random_uniform", {}, r2);
  ValueId c = g.add_op("random_uniform", {}, r1);  // same seed: identical numbers
  g.set_output("y", g.add_op("add", {g.add_op("add", {s0, s1}), g.add_op("add", {a, g.add_op("add", {b, c})})}));
  annotate(g, {{x, {3, 3}}});
  Tensor xin = random_tensor({3, 3}, 1);
  auto before = run_graph(g, {{"x", xin}});
  PassReport r = eliminate_common_subexpressions(g);
  EXPECT_EQ(r.changes, 1);  // only the same-seed random op
  EXPECT_EQ(count_op(g, "sum"), 2);
  EXPECT_EQ(count_op(g, "random_uniform"), 2);
  EXPECT_TRUE(equal(before[0], run_graph(g, {{"x", xin}})[0]));
}

// ---------------------------------------------------------------- DCE

TEST(DCE, RemovesUnreachableNodesAndTheirParameters) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId w = g.add_input("w", ValueKind::Parameter);
  g.add_op("matmul", {x, w});  // nobody reads it
  g.set_output("y", g.add_op("relu", {x}));
  annotate(g, {{x, {2, 2}}, {w, {2, 2}}});
  PassReport r = eliminate_dead_code(g);
  EXPECT_EQ(r.changes, 1);
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_FALSE(g.find_leaf("w").has_value());
  EXPECT_EQ(eliminate_dead_code(g).changes, 0);
}

// ---------------------------------------------------------------- Conv + BN

TEST(ConvBnFolding, FoldsConstantBatchNormIntoConv) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId w = g.add_constant("w", random_tensor({4, 3, 3, 3}, 1));
  ValueId b = g.add_constant("b", random_tensor({4}, 2));
  ValueId gamma = g.add_constant("gamma", random_tensor({4}, 3, 0.5, 1.5));
  ValueId beta = g.add_constant("beta", random_tensor({4}, 4));
  ValueId mean = g.add_constant("mean", random_tensor({4}, 5));
  ValueId var = g.add_constant("var", random_tensor({4}, 6, 0.5, 2));
  ValueId c = g.add_op("conv2d", {x, w, b}, {{"padding", std::vector<int64_t>{1, 1}}});
  g.set_output("y", g.add_op("relu", {g.add_op("batch_norm", {c, gamma, beta, mean, var})}));
  annotate(g, {{x, {2, 3, 5, 5}}});
  Tensor xin = random_tensor({2, 3, 5, 5}, 7);
  auto before = run_graph(g, {{"x", xin}});
  PassReport r = fold_conv_batch_norm(g);
  EXPECT_EQ(r.changes, 1);
  EXPECT_EQ(count_op(g, "batch_norm"), 0);
  check_annotated(g, "test");
  auto after = run_graph(g, {{"x", xin}});
  EXPECT_TRUE(allclose(after[0], before[0], 1e-4, 1e-5)) << max_abs_diff(after[0], before[0]);
}

// conv2d(x, w, [b]) -> batch_norm with every weight and statistic a Parameter; `reader`: the conv
// output is also a graph output.
testing::GraphWithInputs conv_bn_graph(bool bias, bool reader) {
  testing::GraphWithInputs r;
  Graph& g = r.g;
  auto param = [&](const std::string& name, Shape shape, double lo, double hi) {
    return r.leaf(name, ValueKind::Parameter, shape, lo, hi);
  };
  const ValueId x = r.leaf("x", ValueKind::Input, {2, 3, 5, 7});
  std::vector<ValueId> conv_in = {x, param("w", {4, 3, 3, 3}, -1, 1)};
  if (bias) conv_in.push_back(param("b", {4}, -1, 1));
  ValueId gamma = param("gamma", {4}, 0.5, 1.5), beta = param("beta", {4}, -1, 1), mean = param("mean", {4}, -1, 1),
          var = param("var", {4}, 0.5, 2);
  ValueId c = g.add_op("conv2d", conv_in, {{"padding", std::vector<int64_t>{1, 1}}});
  g.set_output("y", g.add_op("relu", {g.add_op("batch_norm", {c, gamma, beta, mean, var}, {{"eps", 1e-3}})}));
  if (reader) g.set_output("conv", c);
  r.annotate_from_inputs();
  return r;
}

TEST(ConvBnFolding, FoldsRunTimeParametersInInference) {
  for (bool bias : {true, false}) {
    testing::GraphWithInputs cb = conv_bn_graph(bias, false);
    const auto before = run_graph(cb.g, cb.inputs);
    PassContext ctx;
    ctx.inference = true;
    PassReport r = fold_conv_batch_norm(cb.g, ctx);
    EXPECT_EQ(r.changes, 1);
    ASSERT_EQ(r.notes.size(), 1u);
    EXPECT_EQ(r.notes[0], "folded batch_norm into conv2d (weights and bias rescaled per call from run-time parameters)");
    EXPECT_EQ(count_op(cb.g, "batch_norm"), 0);
    check_annotated(cb.g, "test");
    // the weight-sized ops come before the conv, which reads them
    const Node& conv = cb.g.nodes()[cb.g.nodes().size() - 2];
    ASSERT_EQ(conv.op, "conv2d");
    ASSERT_EQ(conv.inputs.size(), 3u);
    EXPECT_EQ(cb.g.node(cb.g.value(conv.inputs[1]).producer).op, "mul");
    const auto after = run_graph(cb.g, cb.inputs);
    EXPECT_TRUE(allclose(after[0], before[0], 1e-5, 1e-5)) << max_abs_diff(after[0], before[0]);
  }
}

TEST(ConvBnFolding, LeavesTrainingModeAndOtherReadersAlone) {
  testing::GraphWithInputs training = conv_bn_graph(true, false);
  PassReport r = fold_conv_batch_norm(training.g, PassContext{});
  EXPECT_EQ(r.changes, 0);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0], "conv2d + batch_norm left as is: training mode (batch statistics, gradients)");
  EXPECT_EQ(count_op(training.g, "batch_norm"), 1);
  testing::GraphWithInputs read = conv_bn_graph(true, true);
  PassContext ctx;
  ctx.inference = true;
  EXPECT_EQ(fold_conv_batch_norm(read.g, ctx).changes, 0);
  EXPECT_EQ(count_op(read.g, "batch_norm"), 1);
}

TEST(ConvBnFolding, ZooBatchNormFoldsInInferenceOnly) {
  Model m;
  m += Conv2d(4, 3);
  m += BatchNorm2d();
  CompileOptions o;
  o.shapes["input"] = {2, 3, 6, 6};
  o.inference = true;
  PhysicalModel folded = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(count_op(folded.graph(), "batch_norm"), 0);
  o.optimizations["conv_bn_folding"] = false;
  PhysicalModel plain = compile(m, ReferenceBackend(), o);
  EXPECT_EQ(count_op(plain.graph(), "batch_norm"), 1);
  TensorMap params = plain.randomize_params(5);
  params.at("batch_norm2d_0.running_var") = random_tensor({4}, 9, 0.5, 2);
  params.at("batch_norm2d_0.running_mean") = random_tensor({4}, 10);
  params.at("batch_norm2d_0.weight") = random_tensor({4}, 11, 0.5, 1.5);
  const Tensor xin = random_tensor({2, 3, 6, 6}, 12);
  const Tensor a = plain.evaluate(params, {{"input", xin}}).at("output");
  const Tensor b = folded.evaluate(params, {{"input", xin}}).at("output");
  EXPECT_TRUE(allclose(a, b, 1e-5, 1e-5)) << max_abs_diff(a, b);
  CompileOptions train = o;
  train.inference = false;
  train.optimizations.clear();
  const Graph trained = compile(m, ReferenceBackend(), train).graph();
  EXPECT_EQ(count_op(trained, "batch_norm"), 1);  // normalizes with the batch's moments: not folded
  EXPECT_EQ(count_op(trained, "moments"), 1);
}

TEST(ConvBnFolding, ExampleCNNWithConstantWeightsThroughCompile) {
  CompileOptions o;
  o.inference = true;
  o.shapes["input"] = {2, 3, 8, 8};
  PhysicalModel plain = compile(ExampleCNN(), ReferenceBackend(), o);
  TensorMap params = plain.randomize_params(3);
  for (const auto& [k, t] : params)
    if (k.find("conv2d_0") != std::string::npos || k.find("batch_norm") != std::string::npos)
      o.constant_keys[k] = t;
  TensorMap rest;
  for (const auto& [k, t] : params)
    if (!o.constant_keys.count(k)) rest[k] = t;
  ASSERT_GE(o.constant_keys.size(), 6u);
  PhysicalModel folded = compile(ExampleCNN(), ReferenceBackend(), o);
  EXPECT_EQ(count_op(folded.graph(), "batch_norm"), 0);
  Tensor xin = random_tensor({2, 3, 8, 8}, 11);
  Tensor a = plain.evaluate(params, {{"input", xin}}).at("output");
  Tensor b = folded.evaluate(rest, {{"input", xin}}).at("output");
  EXPECT_TRUE(allclose(a, b, 1e-4, 1e-5)) << max_abs_diff(a, b);
}

// ---------------------------------------------------------------- mixed precision, layout

TEST(MixedPrecision, CastsDenseOpsAndKeepsFloat32Outputs) {
  CompileOptions o;
  o.shapes["input"] = {16, 784};
  PhysicalModel ref = compile(ExampleMLP(), ReferenceBackend(), o);
  for (std::string low : {"bfloat16", "float16"}) {
    CompileOptions m = o;
    m.mixed_precision = low;
    PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend(), m);
    EXPECT_EQ(count_op(pm.graph(), "cast"), 6) << low;  // 2 matmuls x (2 inputs + 1 result)
    EXPECT_EQ(pm.get_types().at("output"), DType::Float32);
    TensorMap params = ref.randomize_params(1);
    Tensor xin = random_tensor({16, 784}, 2);
    Tensor a = ref.evaluate(params, {{"input", xin}}).at("output");
    Tensor b = pm.evaluate(params, {{"input", xin}}).at("output");
    EXPECT_LT(max_abs_diff(a, b), low == "bfloat16" ? 5e-2 : 5e-3) << low;
  }
}

// A convolution's gradients take their two operands in the low type but keep their third input,
// `like` (which types the result): the result stays float32, with no cast after it, and equals
// the float32 gradient of the operands rounded to the low type (the same float32 sums).
TEST(MixedPrecision, ConvGradientsTakeLowOperandsAndKeepFloat32Results) {
  Graph g;
  const ValueId x = g.add_input("x"), w = g.add_input("w"), dy = g.add_input("dy");
  const Attrs a = {{"padding", std::vector<int64_t>{1, 1}}};
  g.set_output("dx", g.add_op("conv2d_input_grad", {dy, w, x}, a));
  g.set_output("dw", g.add_op("conv2d_weight_grad", {x, dy, w}, a));
  annotate(g, {{x, {2, 4, 6, 6}}, {w, {8, 4, 3, 3}}, {dy, {2, 8, 6, 6}}});
  const std::vector<Tensor> ins = {random_tensor({2, 4, 6, 6}, 1), random_tensor({8, 4, 3, 3}, 2),
                                   random_tensor({2, 8, 6, 6}, 3)};
  std::vector<Tensor> rounded;
  for (const Tensor& t : ins) rounded.push_back(t.astype(DType::BFloat16).astype(DType::Float32));
  const std::vector<Tensor> want = run_graph(g, {{"x", rounded[0]}, {"w", rounded[1]}, {"dy", rounded[2]}});
  PassContext ctx;
  ctx.mixed_precision = "bfloat16";
  const PassReport r = apply_mixed_precision(g, ctx);
  EXPECT_EQ(r.changes, 2);
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_EQ(r.notes[0], "conv2d_input_grad on bfloat16 operands");
  for (const Node& n : g.nodes()) {
    if (n.op == "cast") {
      EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::BFloat16) << "only operands are cast";
      continue;
    }
    EXPECT_EQ(g.value(n.inputs[0]).dtype, DType::BFloat16) << n.op;
    EXPECT_EQ(g.value(n.inputs[1]).dtype, DType::BFloat16) << n.op;
    EXPECT_EQ(g.value(n.inputs[2]).kind, ValueKind::Input) << n.op << ": `like` is not cast";
    EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::Float32) << n.op;
  }
  check_annotated(g, "test");
  const std::vector<Tensor> got = run_graph(g, {{"x", ins[0]}, {"w", ins[1]}, {"dy", ins[2]}});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(equal(got[i], want[i])) << g.outputs()[i].first;
}

// The attention's gradient: q, k, v and dy cast to the low type, a bool mask left alone, and each
// of its four results cast back to float32 where its readers (here graph outputs) want it; the
// results are the bfloat16 gradients of the rounded operands, widened.
TEST(MixedPrecision, AttentionGradientRunsLowAndCastsEachResultBack) {
  Graph g;
  const ValueId q = g.add_input("q"), k = g.add_input("k"), v = g.add_input("v"), dy = g.add_input("dy"),
                mask = g.add_input("mask");
  g.value(mask).dtype = DType::Bool;
  const std::vector<ValueId> grads =
      g.add_node("scaled_dot_product_attention_grad", {q, k, v, dy, mask}, {{"causal", int64_t{1}}}, 4);
  for (size_t i = 0; i < 4; ++i) g.set_output("d" + std::to_string(i), grads[i]);
  annotate(g, {{q, {2, 5, 8}}, {k, {2, 6, 8}}, {v, {2, 6, 4}}, {dy, {2, 5, 4}}, {mask, {5, 6}}});
  Tensor m(DType::Bool, {5, 6});
  for (int64_t i = 0; i < m.numel(); ++i) m.data<bool>()[i] = i % 3 != 1;
  const std::vector<Tensor> ins = {random_tensor({2, 5, 8}, 1), random_tensor({2, 6, 8}, 2),
                                   random_tensor({2, 6, 4}, 3), random_tensor({2, 5, 4}, 4)};
  const auto feed = [&](const std::vector<Tensor>& t) {
    return std::map<std::string, Tensor>{{"q", t[0]}, {"k", t[1]}, {"v", t[2]}, {"dy", t[3]}, {"mask", m}};
  };
  std::vector<Tensor> low;
  for (const Tensor& t : ins) low.push_back(t.astype(DType::BFloat16));
  Graph low_graph = g;
  for (ValueId in : {q, k, v, dy}) low_graph.value(in).dtype = DType::BFloat16;
  infer_types(low_graph);
  std::vector<Tensor> want = run_graph(low_graph, feed(low));
  PassContext ctx;
  ctx.mixed_precision = "bfloat16";
  const PassReport r = apply_mixed_precision(g, ctx);
  EXPECT_EQ(r.changes, 1);
  int casts_back = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == "cast") {
      casts_back += g.value(n.outputs[0]).dtype == DType::Float32;
      continue;
    }
    ASSERT_EQ(n.op, "scaled_dot_product_attention_grad");
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(g.value(n.inputs[i]).dtype, DType::BFloat16) << i;
    EXPECT_EQ(n.inputs[4], mask) << "the bool mask is not cast";
    for (ValueId o : n.outputs) EXPECT_EQ(g.value(o).dtype, DType::BFloat16);
  }
  EXPECT_EQ(casts_back, 4) << "every result back to float32";
  for (const auto& [name, out] : g.outputs()) EXPECT_EQ(g.value(out).dtype, DType::Float32) << name;
  check_annotated(g, "test");
  const std::vector<Tensor> got = run_graph(g, feed(ins));
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(equal(got[i], want[i].astype(DType::Float32))) << g.outputs()[i].first;
}

// Weights compiled in as constants (constant_keys) are converted to the low type once, at compile
// time: no cast node reads a constant, and the results are the per-call casts' exactly.
TEST(MixedPrecision, ConstantWeightsAreConvertedOnceAtCompileTime) {
  CompileOptions o;
  o.shapes["input"] = {16, 784};
  o.mixed_precision = "bfloat16";
  PhysicalModel per_call = compile(ExampleMLP(), ReferenceBackend(), o);
  const TensorMap params = per_call.randomize_params(1);
  CompileOptions c = o;
  c.constant_keys = params;
  PhysicalModel constant = compile(ExampleMLP(), ReferenceBackend(), c);
  const Graph& g = constant.graph();
  for (const Node& n : g.nodes())
    if (n.op == "cast") {
      EXPECT_NE(g.value(n.inputs[0]).kind, ValueKind::Constant) << "a constant is cast per call";
    }
  EXPECT_EQ(count_op(g, "cast"), 4);  // 2 matmuls x (the activation + the result)
  const Tensor xin = random_tensor({16, 784}, 2);
  const Tensor a = per_call.evaluate(params, {{"input", xin}}).at("output");
  const Tensor b = constant.evaluate({}, {{"input", xin}}).at("output");
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
}

// An attention runs in the low type with its float operands cast and its bool mask left a bool
// mask (a mask cast to bfloat16 would be added to the scores, no longer hide keys).
TEST(MixedPrecision, CastsAttentionAndKeepsItsBoolMask) {
  MultiHeadAttentionOptions mo;
  mo.embed_dim = 8;
  mo.num_heads = 2;
  mo.masked = true;
  CompileOptions o;
  o.shapes["input"] = {2, 5, 8};
  o.shapes["mask"] = {5, 5};
  o.types["mask"] = DType::Bool;
  o.mixed_precision = "bfloat16";
  PhysicalModel pm = compile(MultiHeadAttention(mo), ReferenceBackend(), o);
  const Graph& g = pm.graph();
  int attentions = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != "scaled_dot_product_attention") continue;
    ++attentions;
    ASSERT_EQ(n.inputs.size(), 4u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(g.value(n.inputs[i]).dtype, DType::BFloat16) << i;
    EXPECT_EQ(g.value(n.inputs[3]).dtype, DType::Bool);
    const auto mask_producer = g.value(n.inputs[3]).producer;
    EXPECT_TRUE(mask_producer < 0 || g.node(mask_producer).op != "cast") << "the mask is not cast";
    EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::BFloat16);
  }
  EXPECT_EQ(attentions, 1);
  EXPECT_EQ(pm.get_types().at("output"), DType::Float32);
}

std::set<Layout> layouts_of(const LayoutPlan& p, const Graph& g, const std::string& op) {
  std::set<Layout> s;
  for (const Node& n : g.nodes())
    if (n.op == op) s.insert(p.at(n.outputs[0]));
  return s;
}

TEST(Layout, ExampleCNNConvChainIsChannelsLastAndTheGraphUnchanged) {
  CompileOptions o;
  o.inference = true;
  o.shapes["input"] = {1, 3, 16, 16};
  PhysicalModel pm = compile(ExampleCNN(), ReferenceBackend(), o);
  Graph g = pm.graph();
  const std::string before = print_graph(g);
  PassContext ctx;
  ctx.layout_target = "nchw8c";  // not "auto": $INGOT_LAYOUT_TARGET may say nchw
  const PassReport r = choose_layout(g, ctx);
  EXPECT_EQ(print_graph(g), before) << "the layout pass decides; it does not rewrite";
  EXPECT_EQ(r.changes, 0);
  ASSERT_FALSE(r.notes.empty());
  // conv1 (batch_norm folded into it), relu, conv2
  EXPECT_EQ(r.notes[0].rfind("3 buffers channels-last", 0), 0u) << r.notes[0];
  const LayoutPlan p = plan_layouts(g);
  EXPECT_EQ(layouts_of(p, g, "conv2d"), std::set<Layout>{Layout::Nchw8c});  // 64 and 128 channels
  EXPECT_EQ(layouts_of(p, g, "relu"), std::set<Layout>{Layout::Nchw8c});
  for (ValueId v : g.leaves()) EXPECT_EQ(p.at(v), Layout::Nchw);
  for (const auto& [name, v] : g.outputs()) EXPECT_EQ(p.at(v), Layout::Nchw);
  o.optimizations["layout"] = false;
  const LayoutPlan off = layout_plan_for(g, o, LayoutTarget{});
  for (Layout l : off.of_value) EXPECT_EQ(l, Layout::Nchw);
}

TEST(Layout, DecisionsOnSmallGraphs) {
  using V = std::vector<int64_t>;
  // x -> conv(8) -> relu -> conv(6) -> batch_norm -> max_pool2d;  conv(16) graph output;
  // conv(8) over symbolic spatial sizes
  Graph g;
  ValueId x = g.add_input("x"), xs = g.add_input("xs");
  auto param = [&](const std::string& name) { return g.add_input(name, ValueKind::Parameter); };
  ValueId w8 = param("w8"), w6 = param("w6"), w16 = param("w16"), gm = param("g"), ws = param("ws");
  ValueId c8 = g.add_op("conv2d", {x, w8}, {{"padding", V{1, 1}}});
  ValueId r = g.add_op("relu", {c8});
  ValueId c6 = g.add_op("conv2d", {r, w6});
  ValueId bn = g.add_op("batch_norm", {c6, gm, gm, gm, gm});
  g.set_output("pool", g.add_op("max_pool2d", {bn}, {{"kernel", V{2, 2}}}));
  g.set_output("c16", g.add_op("conv2d", {r, w16}));
  g.set_output("sym", g.add_op("global_avg_pool2d", {g.add_op("conv2d", {xs, ws})}));
  std::vector<ShapeConstraint> cs = {{x, {2, 3, 9, 9}, "", "t"},    {xs, {2, 3, "H", "W"}, "", "t"},
                                     {w8, {8, 3, 3, 3}, "", "t"},    {w6, {6, 8, 3, 3}, "", "t"},
                                     {w16, {16, 8, 1, 1}, "", "t"},  {gm, {6}, "", "t"},
                                     {ws, {8, 3, 3, 3}, "", "t"}};
  infer_shapes(g, cs);
  infer_types(g);
  const LayoutPlan p = plan_layouts(g);
  EXPECT_EQ(p.at(c8), Layout::Nchw8c);
  EXPECT_EQ(p.at(r), Layout::Nchw8c) << "relu carries its input's layout";
  EXPECT_EQ(p.at(c6), Layout::Nchw) << "batch_norm feeds max_pool2d, whose output is a graph output (NCHW), so the chain stays NCHW";
  EXPECT_EQ(p.at(bn), Layout::Nchw);
  EXPECT_EQ(p.at(g.outputs()[1].second), Layout::Nchw) << "a graph output";
  EXPECT_EQ(layouts_of(p, g, "conv2d").count(Layout::Nhwc), 0u);
  EXPECT_EQ(p.at(g.node(g.value(g.outputs()[2].second).producer).inputs[0]), Layout::Nchw) << "symbolic spatial sizes";
  // 16-channel blocks: 8 channels no longer fill one, so NHWC; a backend that runs relu its
  // own way keeps relu's input and output NCHW.
  LayoutTarget wide;
  wide.channel_block = 16;
  EXPECT_EQ(plan_layouts(g, wide).at(c8), Layout::Nhwc);
  LayoutTarget no_relu;
  no_relu.handles_layouts = [](const Graph&, const Node& n) { return n.op != "relu"; };
  const LayoutPlan q = plan_layouts(g, no_relu);
  EXPECT_EQ(q.at(c8), Layout::Nchw);
  EXPECT_EQ(q.at(r), Layout::Nchw);
}

// bfloat16 convs (LayoutTarget::bf16_convs: the CPU backend on an AMX host) store their outputs
// NHWC whatever the channel block, and the layout carries on through what reads them (a cast to
// float32 and a relu here); a float32 conv in the same graph keeps its blocks. Without
// bf16_convs a bfloat16 conv is no channels-last conv (its values stay NCHW). Host-independent:
// this is the plan an AMX host makes, checked on any host.
TEST(Layout, Bfloat16ConvsStoreTheirOutputsNhwc) {
  using V = std::vector<int64_t>;
  Graph g;
  const ValueId x = g.add_input("x"), xf = g.add_input("xf");
  const ValueId w = g.add_input("w", ValueKind::Parameter), wf = g.add_input("wf", ValueKind::Parameter);
  for (ValueId v : {x, w}) g.value(v).dtype = DType::BFloat16;
  const ValueId c = g.add_op("conv2d", {x, w}, {{"padding", V{1, 1}}});
  const ValueId c2 = g.add_op("conv2d", {c, w}, {{"padding", V{1, 1}}});
  const ValueId widened = g.add_op("relu", {g.add_op("cast", {c2}, {{"dtype", std::string("float32")}})});
  const ValueId cf = g.add_op("conv2d", {xf, wf});
  g.set_output("y", g.add_op("global_avg_pool2d", {widened}));
  g.set_output("f", g.add_op("global_avg_pool2d", {g.add_op("relu", {cf})}));
  infer_shapes(g, {{x, {2, 16, 6, 6}, "", "t"}, {w, {16, 16, 3, 3}, "", "t"}, {xf, {2, 16, 6, 6}, "", "t"},
                   {wf, {16, 16, 1, 1}, "", "t"}});
  infer_types(g);
  LayoutTarget bf16;
  bf16.channel_block = 16;
  bf16.bf16_convs = true;
  const LayoutPlan p = plan_layouts(g, bf16);
  EXPECT_EQ(p.at(c), Layout::Nhwc);
  EXPECT_EQ(p.at(c2), Layout::Nhwc);
  EXPECT_EQ(p.at(widened), Layout::Nhwc) << "the cast and relu carry the layout";
  EXPECT_EQ(p.at(cf), Layout::Nchw16c) << "a float32 conv keeps its blocks";
  bf16.bf16_convs = false;
  const LayoutPlan q = plan_layouts(g, bf16);
  EXPECT_EQ(q.at(c), Layout::Nchw);
  EXPECT_EQ(q.at(c2), Layout::Nchw);
  EXPECT_EQ(q.at(cf), Layout::Nchw16c);
}

// "auto" runs a plan that would mix blocked and NHWC buffers (a channel count that is not a
// multiple of the block) NHWC throughout, unless a conv gains from blocks (a dense 3x3 stride-1
// conv: oneDNN's Winograd kernels). MobileNetV2's inverted residual at 24 channels, expanded to
// 144: mixed under 16-channel blocks, all blocked under 8-channel ones. A target named explicitly
// is kept.
TEST(Layout, AutoRunsAMixedPlanChannelsLastUnlessAConvGainsFromBlocks) {
  using V = std::vector<int64_t>;
  auto block = [](bool dense_3x3) {
    Graph g;
    ValueId x = g.add_input("x");
    auto param = [&](const std::string& name) { return g.add_input(name, ValueKind::Parameter); };
    ValueId w_in = param("w_in"), w_expand = param("w_expand"), w_dw = param("w_dw"), w_project = param("w_project"),
            w_dense = param("w_dense"), w_out = param("w_out");
    ValueId a = g.add_op("relu", {g.add_op("conv2d", {x, w_in}, {{"padding", V{1, 1}}, {"stride", V{2, 2}}})});  // 24
    ValueId e = g.add_op("relu", {g.add_op("conv2d", {a, w_expand})});                                             // 144
    ValueId d = g.add_op("relu", {g.add_op("conv2d", {e, w_dw}, {{"padding", V{1, 1}}, {"groups", int64_t{144}}})});
    ValueId r = g.add_op("add", {g.add_op("conv2d", {d, w_project}), a});  // 24, the residual
    if (dense_3x3) r = g.add_op("conv2d", {r, w_dense}, {{"padding", V{1, 1}}});
    g.set_output("y", g.add_op("global_avg_pool2d", {g.add_op("conv2d", {r, w_out})}));  // 32
    std::vector<ShapeConstraint> cs = {{x, {2, 3, 16, 16}, "", "t"},       {w_in, {24, 3, 3, 3}, "", "t"},
                                       {w_expand, {144, 24, 1, 1}, "", "t"}, {w_dw, {144, 1, 3, 3}, "", "t"},
                                       {w_project, {24, 144, 1, 1}, "", "t"}, {w_dense, {24, 24, 3, 3}, "", "t"},
                                       {w_out, {32, 24, 1, 1}, "", "t"}};
    infer_shapes(g, cs);
    infer_types(g);
    return g;
  };
  const Graph mixed = block(false), winograd = block(true);
  LayoutTarget b16;
  b16.channel_block = 16;
  std::set<Layout> planned;
  for (Layout l : plan_layouts(mixed, b16).of_value) planned.insert(l);
  EXPECT_EQ(planned, (std::set<Layout>{Layout::Nchw, Layout::Nhwc, Layout::Nchw16c})) << "the host's plan is mixed";
  EXPECT_EQ(auto_layout(mixed, {}, Layout::Nchw16c), Layout::Nhwc);
  EXPECT_EQ(auto_layout(winograd, {}, Layout::Nchw16c), Layout::Nchw16c) << "a dense 3x3 stride-1 conv keeps blocks";
  EXPECT_EQ(auto_layout(mixed, {}, Layout::Nchw8c), Layout::Nchw8c) << "24 and 144 fill 8-channel blocks";
  // The compile's request: "auto" resolves per graph, a named target is kept, the pass off is NCHW.
  CompileOptions o;
  o.layout_target = "nchw16c";
  EXPECT_EQ(requested_layout(mixed, o, {}), Layout::Nchw16c);
  o.layout_target = "auto";
  if (layout_target_is_auto("auto")) {  // $INGOT_LAYOUT_TARGET names none
    EXPECT_EQ(requested_layout(mixed, o, {}), auto_layout(mixed));
  }
  o.optimizations["layout"] = false;
  EXPECT_EQ(requested_layout(mixed, o, {}), Layout::Nchw);
}

// ---------------------------------------------------------------- controls

TEST(OptimizationControls, LevelsSelectPasses) {
  CompileOptions o;
  EXPECT_TRUE(pass_enabled(o, "cse"));
  EXPECT_TRUE(pass_enabled(o, "fusion"));
  EXPECT_TRUE(pass_enabled(o, "layout"));
  EXPECT_FALSE(pass_enabled(o, "mixed_precision"));
  o.optimization_level = "none";
  for (const std::string& p : pass_names()) EXPECT_FALSE(pass_enabled(o, p)) << p;
  o.optimization_level = "low";
  EXPECT_TRUE(pass_enabled(o, "dce"));
  EXPECT_FALSE(pass_enabled(o, "cse"));
  EXPECT_FALSE(pass_enabled(o, "layout"));
  o.optimizations["cse"] = true;
  o.optimizations["dce"] = false;
  EXPECT_TRUE(pass_enabled(o, "cse"));
  EXPECT_FALSE(pass_enabled(o, "dce"));
  o.optimization_level = "high";
  EXPECT_TRUE(pass_enabled(o, "layout"));
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(OptimizationControls, BadValuesAreErrors) {
  CompileOptions o;
  expect_error([&] { o.set("optimization_level", "extreme"); }, {"optimization_level", "extreme", "none, low, medium, high"});
  expect_error([&] { o.set("optimizations", "cse=on,loop_unrolling=off"); }, {"loop_unrolling", "constant_folding", "fusion"});
  expect_error([&] { o.set("memory_planning", "smart"); }, {"memory_planning", "smart", "greedy, none"});
  expect_error([&] { o.set("max_memory_gb", "-1"); }, {"max_memory_gb", "non-negative"});
  expect_error([&] { o.set("max_memory_gb", "lots"); }, {"max_memory_gb", "lots"});
  expect_error([&] { o.set("mixed_precision", "int8"); }, {"mixed_precision", "int8", "bfloat16"});
  EXPECT_EQ(o.optimization_level, "medium");
  EXPECT_EQ(o.memory_planning, "greedy");
  o.set("optimizations", "cse=off,layout");
  EXPECT_FALSE(o.optimizations.at("cse"));
  EXPECT_TRUE(o.optimizations.at("layout"));
  o.set("max_memory_gb", "1.5");
  EXPECT_DOUBLE_EQ(o.max_memory_gb, 1.5);

  CompileOptions c;
  c.custom_passes.push_back({"mine", "after_everything", [](Graph&) {}});
  expect_error([&] { c.validate(); }, {"mine", "after_everything", "start", "end", "cse"});
  CompileOptions d;
  d.optimizations["unknown_pass"] = true;
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), d); }, {"unknown_pass", "valid passes"});
  CompileOptions e;
  e.max_memory_gb = -2;
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), e); }, {"max_memory_gb"});
  for (std::string n : {"optimization_level", "optimizations", "custom_passes", "memory_planning",
                               "max_memory_gb", "mixed_precision", "dump_after_each_pass"}) {
    auto names = CompileOptions::option_names();
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(OptimizationControls, CustomPassesRunAtTheirPoint) {
  CompileOptions o;
  o.shapes["input"] = {4, 784};
  std::vector<std::string> seen;
  o.custom_passes.push_back({"count_start", "start", [&](Graph& g) { seen.push_back("start:" + std::to_string(g.nodes().size())); }});
  o.custom_passes.push_back({"after_cse", "cse", [&](Graph&) { seen.push_back("cse"); }});
  o.custom_passes.push_back({"add_relu", "end", [&](Graph& g) {
                               // Appends a relu on the output: its shape is inferred again.
                               ValueId out = g.outputs()[0].second;
                               g.outputs()[0].second = g.add_op("relu", {out});
                               seen.push_back("end");
                             }});
  PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend(), o);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1], "cse");
  EXPECT_EQ(seen[2], "end");
  EXPECT_EQ(pm.graph().nodes().back().op, "relu");
  EXPECT_EQ(to_string(pm.get_shapes().at("output")), "[4, 10]");
  TensorMap out = pm.evaluate(pm.randomize_params(0), {{"input", random_tensor({4, 784}, 0)}});
  for (float v : out.at("output").to_vector<float>()) EXPECT_GE(v, 0.0f);
}

TEST(OptimizationControls, VerboseReportsAndDumpsAfterEachPass) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "ingot_test_passes_dump";
  fs::remove_all(dir);
  fs::create_directories(dir);
  CompileOptions o;
  o.shapes["input"] = {4, 784};
  o.verbose = true;
  o.dump_graph = (dir / "g").string();
  o.dump_after_each_pass = true;
  ::testing::internal::CaptureStderr();
  compile(ExampleMLP(), ReferenceBackend(), o);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("optimize"), std::string::npos);
  EXPECT_NE(err.find("cse: 0 changes"), std::string::npos) << err;
  EXPECT_NE(err.find("group 0 [dense]: matmul add relu"), std::string::npos) << err;
  EXPECT_NE(err.find("memory planning"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "g"));
  EXPECT_TRUE(fs::exists(dir / "g.1.constant_folding.txt"));
  EXPECT_TRUE(fs::exists(dir / "g.11.fusion.txt"));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- equivalence on random graphs

TEST(PassEquivalence, RandomGraphsMatchUnoptimized) {
  int removed = 0;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    testing::RandomGraph rg = testing::random_graph(seed);
    Graph opt = rg.graph;
    auto before = run_graph(rg.graph, rg.inputs);
    CompileOptions o;
    o.optimization_level = "high";
    optimize(opt, o);
    check_annotated(opt, "optimize");
    removed += static_cast<int>(rg.graph.nodes().size() - opt.nodes().size());
    auto after = run_graph(opt, rg.inputs);
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(before[i].dtype(), after[i].dtype()) << "seed " << seed;
      EXPECT_TRUE(allclose(after[i], before[i], 1e-5, 1e-6))
          << "seed " << seed << " output " << i << "\n" << print_graph(rg.graph) << "\n" << print_graph(opt);
    }
    // Each pass alone also preserves semantics.
    for (const PassInfo& p : builtin_passes()) {
      Graph one = rg.graph;
      p.fn(one, PassContext{});
      check_annotated(one, p.name);
      auto r = run_graph(one, rg.inputs);
      for (size_t i = 0; i < before.size(); ++i)
        EXPECT_TRUE(allclose(r[i], before[i], 1e-5, 1e-6)) << p.name << " seed " << seed;
    }
  }
  EXPECT_GT(removed, 150);  // the generator plants plenty of removable nodes
}

}  // namespace
}  // namespace ingot
