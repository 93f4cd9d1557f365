// Transformer blocks of the zoo (include/ingot/models.h): RMSNorm, MultiHeadAttention and the
// encoder layer built from them. Attention is the catalogue's scaled_dot_product_attention op,
// so the CPU backend runs it as its fused flash-style kernel (forward and backward) and no
// [S, S] score matrix is written; sub-blocks carry Hugging Face's projection names
// ("self_attn.q_proj.weight"), Linear weights stored [in, out].
#include <optional>
#include <string>

#include "ingot/error.h"
#include "ingot/models.h"
#include "models/zoo_util.h"

namespace ingot {

using zoo::add_op;
using zoo::block;
using zoo::then;

namespace {

// [B, S, heads * head_dim] -> [B, heads, S, head_dim]
Connection split_heads(const Connection& x, int64_t heads, int64_t head_dim) {
  return x.reshape({0, 0, heads, head_dim}).transpose({0, 2, 1, 3});
}

Model feed_forward_activation(const std::string& name) {
  if (name == "gelu") return Gelu();
  if (name == "gelu_tanh") return Gelu(true);
  if (name == "relu") return Relu();
  INGOT_FAIL("TransformerEncoderLayer: unknown activation '", name, "' (expected gelu, gelu_tanh or relu)");
}

}  // namespace

Model RMSNorm(const NormOptions& o) { return zoo::trailing_norm("RMSNorm", "rms_norm", o, false); }

Model RMSNorm(int normalized_dims, double eps, bool affine) {
  NormOptions o;
  o.normalized_dims = normalized_dims;
  o.eps = eps;
  o.affine = affine;
  return RMSNorm(o);
}

Model MultiHeadAttention(const MultiHeadAttentionOptions& o) {
  const char* name = "MultiHeadAttention";
  INGOT_CHECK(o.embed_dim > 0, name, ": embed_dim must be positive, got ", o.embed_dim);
  INGOT_CHECK(o.num_heads > 0, name, ": num_heads must be positive, got ", o.num_heads);
  INGOT_CHECK(o.embed_dim % o.num_heads == 0, name, ": embed_dim ", o.embed_dim, " is not divisible by num_heads ",
              o.num_heads);
  const int64_t kv_heads = o.num_kv_heads.value_or(o.num_heads);
  INGOT_CHECK(kv_heads > 0 && o.num_heads % kv_heads == 0, name, ": num_kv_heads ", kv_heads,
              " must be positive and divide num_heads ", o.num_heads);
  const int64_t head_dim = o.embed_dim / o.num_heads;
  Model m = block(name);
  const Connection x = m.input("input");
  const Connection q = split_heads(then(m, Linear(o.embed_dim, o.use_bias), x, "q_proj"), o.num_heads, head_dim);
  const Connection k = split_heads(then(m, Linear(kv_heads * head_dim, o.use_bias), x, "k_proj"), kv_heads, head_dim);
  const Connection v = split_heads(then(m, Linear(kv_heads * head_dim, o.use_bias), x, "v_proj"), kv_heads, head_dim);
  Links operands = {{"q", q}, {"k", k}, {"v", v}};
  if (o.masked) operands.emplace_back("mask", m.input("mask"));
  const Connection heads = add_op(m, "scaled_dot_product_attention", operands,
                                  {{"scale", 0.0}, {"causal", int64_t{o.causal}}, {"causal_offset", int64_t{0}}});
  const Connection merged = heads.transpose({0, 2, 1, 3}).reshape({0, 0, o.embed_dim});
  m.set_cout(then(m, Linear(o.embed_dim, o.use_bias), merged, "out_proj"));
  return m;
}

Model MultiHeadAttention(int64_t embed_dim, int64_t num_heads, bool causal) {
  MultiHeadAttentionOptions o;
  o.embed_dim = embed_dim;
  o.num_heads = num_heads;
  o.causal = causal;
  return MultiHeadAttention(o);
}

Model TransformerEncoderLayer(const TransformerEncoderLayerOptions& o) {
  INGOT_CHECK(o.ffn_dim > 0, "TransformerEncoderLayer: ffn_dim must be positive, got ", o.ffn_dim);
  const Model act = feed_forward_activation(o.activation);
  MultiHeadAttentionOptions a;
  a.embed_dim = o.d_model;
  a.num_heads = o.num_heads;
  a.num_kv_heads = o.num_kv_heads;
  a.causal = o.causal;
  a.masked = o.masked;
  const Model attention = MultiHeadAttention(a);  // checks d_model and the head counts
  auto norm = [&] { return o.rms_norm ? RMSNorm(1, o.eps) : LayerNorm(1, o.eps); };
  Model m = block("TransformerEncoderLayer");
  const Connection x = m.input("input");
  auto attend = [&](const Connection& h) {
    Links links = {{"input", h}};
    if (o.masked) links.emplace_back("mask", m.input("mask"));
    return m.add(attention, links, "self_attn").at("output");
  };
  auto feed_forward = [&](const Connection& h) {
    return then(m, Linear(o.d_model), then(m, act, then(m, Linear(o.ffn_dim), h, "linear1"), "act"), "linear2");
  };
  if (o.norm_first) {  // GPT-2, LLaMA: x + f(norm(x))
    const Connection h = x + attend(then(m, norm(), x, "norm1"));
    m.set_cout(h + feed_forward(then(m, norm(), h, "norm2")));
  } else {  // BERT: norm(x + f(x))
    const Connection h = then(m, norm(), x + attend(x), "norm1");
    m.set_cout(then(m, norm(), h + feed_forward(h), "norm2"));
  }
  return m;
}

}  // namespace ingot
