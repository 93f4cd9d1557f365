// The zoo's transformer blocks (RMSNorm, MultiHeadAttention, TransformerEncoderLayer) against
// straightforward loops in double: values for every variant (grouped-query heads, causal, a
// float mask, no bias, pre- and post-norm, RMSNorm), parameter names and shapes, argument
// errors; and the CPU backend against the reference interpreter on a layer's outputs and
// gradients, with the attention running as the one fused op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/fusion_plan.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using ingot::testing::Contains;
using ingot::testing::error_of;
using ingot::testing::random_tensor;
using ingot::testing::shape_of;

namespace {

using Values = std::vector<double>;

PhysicalModel compile_block(const Model& block, std::map<std::string, ShapeTemplate> shapes,
                            const Backend& backend = ReferenceBackend()) {
  Model m;
  m += block;
  CompileOptions o;
  o.shapes = std::move(shapes);
  return compile(m, backend, o);
}

void expect_close(const Tensor& t, const Values& want, double tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(t.item(static_cast<int64_t>(i)), want[i], tol) << "element " << i;
}

// rows [n, k] @ w [k, m] + b; b may be absent from `params`.
Values linear(const Values& x, int64_t n, const TensorMap& params, const std::string& prefix) {
  const Tensor& w = params.at(prefix + ".weight");
  const int64_t k = w.dim(0), m = w.dim(1);
  const bool bias = params.count(prefix + ".bias") > 0;
  Values y(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = bias ? params.at(prefix + ".bias").item(j) : 0;
      for (int64_t p = 0; p < k; ++p) acc += x[static_cast<size_t>(i * k + p)] * w.item(p * m + j);
      y[static_cast<size_t>(i * m + j)] = acc;
    }
  return y;
}

// Normalizes each row of `len` (centered: layer norm; else RMS) and scales by `prefix`.weight
// (plus .bias when present).
Values norm_rows(const Values& x, int64_t len, const TensorMap& params, const std::string& prefix, bool centered) {
  Values y(x.size());
  const auto n = static_cast<size_t>(len);
  for (size_t r = 0; r * n < x.size(); ++r) {
    double mean = 0, ms = 0;
    if (centered)
      for (size_t k = 0; k < n; ++k) mean += x[r * n + k] / static_cast<double>(n);
    for (size_t k = 0; k < n; ++k) ms += std::pow(x[r * n + k] - mean, 2) / static_cast<double>(n);
    for (size_t k = 0; k < n; ++k) {
      const auto kk = static_cast<int64_t>(k);
      double v = (x[r * n + k] - mean) / std::sqrt(ms + 1e-5) * params.at(prefix + ".weight").item(kk);
      if (params.count(prefix + ".bias")) v += params.at(prefix + ".bias").item(kk);
      y[r * n + k] = v;
    }
  }
  return y;
}

struct Attention {
  int64_t heads = 1, kv_heads = 1;
  bool causal = false;
  const Tensor* mask = nullptr;  // float [S, S], added to the scores
};

// Multi-head self-attention of x [B, S, E] with the projections under `prefix`.
Values attention(const Values& x, int64_t B, int64_t S, int64_t E, const TensorMap& params, const std::string& prefix,
                 const Attention& a) {
  const int64_t hd = E / a.heads, group = a.heads / a.kv_heads;
  const Values q = linear(x, B * S, params, prefix + ".q_proj"), k = linear(x, B * S, params, prefix + ".k_proj"),
               v = linear(x, B * S, params, prefix + ".v_proj");
  Values merged(static_cast<size_t>(B * S * E));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < S; ++i) {
        Values s(static_cast<size_t>(S));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d)
            dot += q[static_cast<size_t>((b * S + i) * E + h * hd + d)] *
                   k[static_cast<size_t>((b * S + j) * a.kv_heads * hd + kh * hd + d)];
          double score = dot / std::sqrt(static_cast<double>(hd));
          if (a.mask) score += a.mask->item(i * S + j);
          if (a.causal && j > i) score = -std::numeric_limits<double>::infinity();
          s[static_cast<size_t>(j)] = score;
          mx = std::max(mx, score);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j)
            acc += s[static_cast<size_t>(j)] / sum * v[static_cast<size_t>((b * S + j) * a.kv_heads * hd + kh * hd + d)];
          merged[static_cast<size_t>((b * S + i) * E + h * hd + d)] = acc;
        }
      }
    }
  return linear(merged, B * S, params, prefix + ".out_proj");
}

Values add(Values a, const Values& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// Random parameters of a model: weights small, norms' weights near 1.
TensorMap random_params(const PhysicalModel& pm) {
  TensorMap params = pm.randomize_params(0);
  uint64_t seed = 10;
  for (auto& [name, t] : params)
    t = name.find("norm") != std::string::npos ? random_tensor(t.shape(), seed++, 0.5, 1.5)
                                               : random_tensor(t.shape(), seed++, -0.4, 0.4);
  return params;
}

}  // namespace

TEST(ZooTransformer, RMSNormScalesByTheRootMeanSquare) {
  PhysicalModel pm = compile_block(RMSNorm(2), {{"input", {3, 4, 5}}});
  EXPECT_EQ(pm.parameter_names(), std::vector<std::string>{"rms_norm_0.weight"});
  EXPECT_EQ(shape_of(pm, "rms_norm_0.weight"), "[4, 5]");
  TensorMap params = pm.randomize_params(0);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(params.at("rms_norm_0.weight").item(i), 1.0);
  params["rms_norm_0.weight"] = random_tensor({4, 5}, 1);
  const Tensor x = random_tensor({3, 4, 5}, 2, -3, 3);
  TensorMap named = {{"x.weight", params.at("rms_norm_0.weight")}};
  expect_close(pm.evaluate(params, {{"input", x}}).at("output"), norm_rows(x.to_vector<double>(), 20, named, "x", false),
               1e-5);
  PhysicalModel plain = compile_block(RMSNorm(1, 1e-5, /*affine=*/false), {{"input", {2, 6}}});
  EXPECT_TRUE(plain.parameter_names().empty());
  EXPECT_TRUE(Contains(error_of([] { RMSNorm(0); }), "RMSNorm: normalized_dims must be >= 1, got 0"));
  EXPECT_TRUE(Contains(error_of([] { RMSNorm(1, 0.0); }), "RMSNorm: eps must be positive"));
}

TEST(ZooTransformer, MultiHeadAttentionMatchesLoopsForEveryVariant) {
  const int64_t B = 2, S = 7, E = 12;
  const Tensor mask = random_tensor({S, S}, 3, -2, 2);
  struct Case {
    int64_t heads, kv_heads;
    bool causal, masked, bias;
  };
  for (const Case& c : std::vector<Case>{{3, 3, false, false, true},
                                         {4, 2, true, false, true},   // grouped-query, causal
                                         {2, 1, false, true, false},  // one kv head, a float mask, no bias
                                         {6, 3, true, true, true}}) {
    SCOPED_TRACE("heads " + std::to_string(c.heads) + " kv " + std::to_string(c.kv_heads));
    MultiHeadAttentionOptions o;
    o.embed_dim = E;
    o.num_heads = c.heads;
    o.num_kv_heads = c.kv_heads;
    o.causal = c.causal;
    o.masked = c.masked;
    o.use_bias = c.bias;
    const std::string p = "multi_head_attention_0";
    std::map<std::string, ShapeTemplate> shapes = {{"input", {B, S, E}}};
    if (c.masked) shapes[p + ".mask"] = {S, S};
    PhysicalModel pm = compile_block(MultiHeadAttention(o), shapes);
    EXPECT_EQ(shape_of(pm, p + ".q_proj.weight"), "[12, 12]");
    EXPECT_EQ(shape_of(pm, p + ".k_proj.weight"), "[12, " + std::to_string(c.kv_heads * E / c.heads) + "]");
    EXPECT_EQ(pm.parameter_names().size(), c.bias ? 8u : 4u);
    const TensorMap params = random_params(pm);
    const Tensor x = random_tensor({B, S, E}, 4, -1, 1);
    TensorMap inputs = {{"input", x}};
    if (c.masked) inputs[p + ".mask"] = mask;
    const Values want = attention(x.to_vector<double>(), B, S, E, params, p,
                                  {c.heads, c.kv_heads, c.causal, c.masked ? &mask : nullptr});
    expect_close(pm.evaluate(params, inputs).at("output"), want, 1e-5);
  }
  EXPECT_TRUE(Contains(error_of([] { MultiHeadAttention(10, 4); }), "embed_dim 10 is not divisible by num_heads 4"));
  MultiHeadAttentionOptions bad;
  bad.embed_dim = 12;
  bad.num_heads = 4;
  bad.num_kv_heads = 3;
  EXPECT_TRUE(Contains(error_of([&] { MultiHeadAttention(bad); }), "num_kv_heads 3 must be positive and divide num_heads 4"));
}

TEST(ZooTransformer, EncoderLayerPostAndPreNormMatchLoops) {
  const int64_t B = 2, S = 5, E = 8, F = 16;
  for (const bool pre : {false, true}) {
    SCOPED_TRACE(pre ? "pre-norm RMSNorm, causal" : "post-norm LayerNorm");
    TransformerEncoderLayerOptions o;
    o.d_model = E;
    o.num_heads = 2;
    o.ffn_dim = F;
    o.norm_first = pre;
    o.rms_norm = pre;
    o.causal = pre;
    o.activation = pre ? "relu" : "gelu";
    PhysicalModel pm = compile_block(TransformerEncoderLayer(o), {{"input", {B, S, E}}});
    const std::string p = "transformer_encoder_layer_0";
    EXPECT_EQ(shape_of(pm, p + ".linear1.weight"), "[8, 16]");
    EXPECT_EQ(pm.parameter_names().size(), pre ? 14u : 16u);  // RMSNorm has no bias
    const TensorMap params = random_params(pm);
    const Tensor x = random_tensor({B, S, E}, 5, -1, 1);
    const Values xv = x.to_vector<double>();
    auto ffn = [&](const Values& h) {
      Values a = linear(h, B * S, params, p + ".linear1");
      for (double& e : a) e = pre ? std::max(e, 0.0) : 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
      return linear(a, B * S, params, p + ".linear2");
    };
    auto attend = [&](const Values& h) { return attention(h, B, S, E, params, p + ".self_attn", {2, 2, pre, nullptr}); };
    auto norm = [&](const Values& h, const char* which) { return norm_rows(h, E, params, p + "." + which, !pre); };
    Values want;
    if (pre) {
      const Values h = add(xv, attend(norm(xv, "norm1")));
      want = add(h, ffn(norm(h, "norm2")));
    } else {
      const Values h = norm(add(xv, attend(xv)), "norm1");
      want = norm(add(h, ffn(h)), "norm2");
    }
    expect_close(pm.evaluate(params, {{"input", x}}).at("output"), want, 2e-5);
  }
  TransformerEncoderLayerOptions bad;
  bad.d_model = 8;
  bad.ffn_dim = 16;
  bad.activation = "swish";
  EXPECT_TRUE(Contains(error_of([&] { TransformerEncoderLayer(bad); }), "unknown activation 'swish'"));
}

// The CPU backend on a two-layer encoder (one post-norm, one pre-norm RMSNorm with grouped-query
// causal attention and a mask): outputs and every parameter's gradient equal the reference's.
TEST(ZooTransformer, CpuBackendMatchesTheReferenceOnOutputsAndGradients) {
  const int64_t B = 2, S = 9, E = 16;
  TransformerEncoderLayerOptions bert;
  bert.d_model = E;
  bert.num_heads = 4;
  bert.ffn_dim = 32;
  TransformerEncoderLayerOptions llama = bert;
  llama.num_kv_heads = 2;
  llama.norm_first = llama.rms_norm = llama.causal = llama.masked = true;
  llama.activation = "gelu_tanh";
  Model m;
  m += TransformerEncoderLayer(bert);
  m += TransformerEncoderLayer(llama)({{"mask", "mask"}});
  m += Linear(1)({{"output", IOKey("y").expose()}});
  m |= MSELoss()({{"input", "y"}, {"target", "target"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"input", {"N", S, E}}, {"mask", {S, S}}, {"target", {"N", S, 1}}};
  const PhysicalModel ref = compile(m, ReferenceBackend(), o), cpu = compile(m, CpuBackend(), o);
  bool fused = false;
  for (const Node& n : cpu.graph().nodes()) fused = fused || n.op == "scaled_dot_product_attention";
  EXPECT_TRUE(fused);
  const TensorMap params = random_params(ref);
  const TensorMap inputs = {{"input", random_tensor({B, S, E}, 6, -1, 1)},
                            {"mask", random_tensor({S, S}, 7, -1, 1)},
                            {"target", random_tensor({B, S, 1}, 8, -1, 1)}};
  const TensorMap seed = {{"loss", Tensor::scalar(1.0f)}};
  const Evaluation want = ref.evaluate(params, inputs, seed), got = cpu.evaluate(params, inputs, seed);
  expect_close(got.outputs.at("y"), want.outputs.at("y").to_vector<double>(), 1e-4);
  ASSERT_EQ(got.gradients.size(), want.gradients.size());
  for (const auto& [name, g] : want.gradients) {
    SCOPED_TRACE(name);
    expect_close(got.gradients.at(name), g.to_vector<double>(), 1e-4);
  }
}

// Forward only (inference), the post-norm layer's residual and bias adds become its layer_norms'
// prologues (FusionPlan: take_norm_prologues) and the pre-norm layer's stay materialized (the
// residual stream is read again): the CPU backend's outputs still equal the reference's.
TEST(ZooTransformer, InferenceFusesThePostNormResidualIntoTheNorm) {
  const int64_t S = 7, E = 16;
  TransformerEncoderLayerOptions bert;
  bert.d_model = E;
  bert.num_heads = 4;
  bert.ffn_dim = 32;
  TransformerEncoderLayerOptions gpt = bert;
  gpt.norm_first = gpt.causal = true;
  Model m;
  m += TransformerEncoderLayer(bert);
  m += TransformerEncoderLayer(gpt)({{"output", IOKey("y").expose()}});
  CompileOptions o;
  o.shapes = {{"input", {"N", S, E}}};
  o.inference = true;
  const PhysicalModel ref = compile(m, ReferenceBackend(), o), cpu = compile(m, CpuBackend(), o);
  const std::string groups = plan_fusion(cpu.graph()).str(cpu.graph());
  size_t taken = 0;
  for (size_t p = groups.find("add add layer_norm"); p != std::string::npos; p = groups.find("add add layer_norm", p + 1))
    ++taken;
  EXPECT_EQ(taken, 2u) << groups;  // norm1 and norm2 of the post-norm layer
  const TensorMap params = random_params(ref);
  for (int64_t batch : {3, 1}) {
    const TensorMap inputs = {{"input", random_tensor({batch, S, E}, 9 + static_cast<uint64_t>(batch), -1, 1)}};
    expect_close(cpu.evaluate(params, inputs).at("y"), ref.evaluate(params, inputs).at("y").to_vector<double>(), 1e-4);
  }
}
