// Whole zoo models differentiated end to end (PhysicalModel::evaluate with output gradients)
// against central finite differences in float64, and the CPU backend against the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "autodiff_test_util.h"
#include "ingot/cpu_backend.h"
#include "ingot/ingot.h"

namespace ingot::testing {
namespace {

PhysicalModel compile64(const Model& m, CompileOptions o, const Backend& backend = ReferenceBackend()) {
  return compile(m, backend, float64_options(m, std::move(o)));
}

// An MLP classifier with its loss: logits -> CrossEntropyLoss against integer targets.
Model classifier(const Model& body) {
  Model m;
  m += body({{"output", IOKey("logits").expose()}});
  m |= CrossEntropyLoss()({{"input", "logits"}, {"target", "target"}, {"output", IOKey("loss").expose()}});
  return m;
}

// A small CNN: conv (stride, padding) -> BatchNorm (training: batch statistics) -> relu ->
// max pool -> grouped conv -> avg pool -> flatten -> linear.
Model small_cnn() {
  Model m;
  m += Conv2d(4, 3, 1, 1);
  m += BatchNorm2d();
  m += Relu();
  m += MaxPool2d(2);
  Conv2dOptions g;
  g.out_channels = 4;
  g.kernel_size = 3;
  g.padding = 1;
  g.groups = 2;
  m += Conv2d(g);
  m += AvgPool2d(2);
  m += Flatten();
  m += Linear(3);
  return m;
}

// A transformer-style block: layer norm, self-attention (softmax of scaled q k^T), residual,
// layer norm, gelu MLP, residual.
Model transformer_block(int64_t dim, int64_t hidden) {
  Model m;
  Connection x = m.input("input");
  Connection ln1 = m.add(LayerNorm(), {{"input", x}}).at("output");
  Connection q = m.add(Linear(dim), {{"input", ln1}}).at("output");
  Connection k = m.add(Linear(dim), {{"input", ln1}}).at("output");
  Connection v = m.add(Linear(dim), {{"input", ln1}}).at("output");
  Connection scores = matmul(q, k.transpose({0, 2, 1})) * (1.0 / std::sqrt(static_cast<double>(dim)));
  Connection attn = apply("softmax", scores, {{"axis", int64_t{-1}}});
  Connection o = m.add(Linear(dim), {{"input", matmul(attn, v)}}).at("output");
  Connection h = x + o;
  Connection ln2 = m.add(LayerNorm(), {{"input", h}}).at("output");
  Connection f1 = m.add(Linear(hidden), {{"input", ln2}}).at("output");
  Connection f2 = m.add(Linear(dim), {{"input", apply("gelu", f1)}}).at("output");
  m.expose((h + f2).mean(), "loss");
  return m;
}

TEST(AutodiffModels, MlpWithCrossEntropy) {
  CompileOptions o;
  o.shapes = {{"input", {"N", 6}}};
  o.types = {{"target", DType::Int64}};
  PhysicalModel pm = compile64(classifier(MLP({8, 8, 4}, "tanh")), o);
  const TensorMap params = pm.randomize_params(1);
  const TensorMap inputs{{"input", rnd({5, 6}, 2)}, {"target", tensor<int64_t>({0, 3, 1, 1, 2}, {5})}};
  check_model_gradients(pm, params, inputs, {{"loss", Tensor::scalar<double>(1)}});
}

TEST(AutodiffModels, CnnWithBatchNormInTrainingMode) {
  CompileOptions o;
  o.shapes = {{"input", {"N", 2, 6, 6}}};
  PhysicalModel pm = compile64(small_cnn(), o);
  // Training mode: the batch statistics are computed, the running ones are not read.
  for (const std::string& name : pm.parameter_names()) EXPECT_EQ(name.find("running"), std::string::npos) << name;
  const TensorMap params = pm.randomize_params(3);
  const TensorMap inputs{{"input", rnd({3, 2, 6, 6}, 4)}};
  check_model_gradients(pm, params, inputs, {{"output", rnd({3, 3}, 5)}}, 1e-6, 1e-5, 8);
}

TEST(AutodiffModels, TransformerBlock) {
  CompileOptions o;
  o.shapes = {{"input", {"B", "T", 4}}};
  PhysicalModel pm = compile64(transformer_block(4, 8), o);
  const TensorMap params = pm.randomize_params(6);
  check_model_gradients(pm, params, {{"input", rnd({2, 3, 4}, 7)}}, {{"loss", Tensor::scalar<double>(1)}},
                        1e-6, 1e-5, 6);
}

TEST(AutodiffModels, EmbeddingDropoutAndMseLoss) {
  // Embedding rows picked more than once accumulate; dropout keeps its mask in the backward pass.
  Model m;
  m += Embedding(5, 3);
  m += Dropout(0.4, 11);
  m += Linear(2)({{"output", IOKey("pred").expose()}});
  m |= MSELoss()({{"input", "pred"}, {"target", "target"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"input", {"N"}}, {"target", {"N", 2}}};
  PhysicalModel pm = compile64(m, o);
  const TensorMap params = pm.randomize_params(8);
  const TensorMap inputs{{"input", tensor<int64_t>({1, 4, 1, 0, 1, 2}, {6})}, {"target", rnd({6, 2}, 9)}};
  check_model_gradients(pm, params, inputs, {{"loss", Tensor::scalar<double>(1)}});
}

TEST(AutodiffModels, CpuBackendMatchesReferenceOnTheCnn) {
  for (const bool symbolic : {false, true}) {
    SCOPED_TRACE(symbolic ? "symbolic batch" : "static batch");
    CompileOptions o;
    o.shapes = {{"input", {symbolic ? Dim("N") : Dim(4), 2, 8, 8}}};
    Model m = small_cnn();
    PhysicalModel ref = compile(m, ReferenceBackend(), o);
    PhysicalModel cpu = compile(m, CpuBackend(), o);
    const TensorMap params = ref.randomize_params(10);
    const TensorMap inputs{{"input", random_tensor({4, 2, 8, 8}, 11)}};
    const TensorMap seeds{{"output", random_tensor({4, 3}, 12)}};
    const Evaluation a = ref.evaluate(params, inputs, seeds), b = cpu.evaluate(params, inputs, seeds);
    ASSERT_EQ(a.gradients.size(), b.gradients.size());
    for (const auto& [name, g] : a.gradients)
      EXPECT_LT(max_abs_diff(b.gradients.at(name), g), 1e-4) << name;
  }
}

TEST(AutodiffModels, CpuBackendMatchesReferenceOnTheTransformerBlock) {
  CompileOptions o;
  o.shapes = {{"input", {2, 5, 8}}};
  Model m = transformer_block(8, 16);
  PhysicalModel ref = compile(m, ReferenceBackend(), o);
  PhysicalModel cpu = compile(m, CpuBackend(), o);
  const TensorMap params = ref.randomize_params(13);
  const TensorMap inputs{{"input", random_tensor({2, 5, 8}, 14)}};
  const TensorMap seeds{{"loss", Tensor::scalar<float>(1)}};
  const Evaluation a = ref.evaluate(params, inputs, seeds), b = cpu.evaluate(params, inputs, seeds);
  for (const auto& [name, g] : a.gradients) EXPECT_LT(max_abs_diff(b.gradients.at(name), g), 1e-5) << name;
}

}  // namespace
}  // namespace ingot::testing
