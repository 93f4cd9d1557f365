// ONNX's Attention (opset 23) as ingot's scaled_dot_product_attention: 4-D [batch, heads, seq,
// head size] operands as they are, 3-D [batch, seq, heads * head size] ones split into heads
// (q_num_heads, kv_num_heads) and joined back after; a KV cache (past_key, past_value) joins the
// new keys along the sequence, its length becoming the causal offset, and the joined keys and
// values are the present_key and present_value outputs; a mask shorter than the keys is padded
// with hidden positions, as ONNX's reference does. With softcap or the qk_matmul_output output
// it is written out with ingot's ops instead. Refused with a clear error: nonpad_kv_seqlen. And
// RotaryEmbedding, written out.
#include <cmath>
#include <limits>

#include "frontends/onnx/importer.h"
#include "ingot/error.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

// `x` [batch, kv_heads, seq, size] with each head repeated `times` times in place (grouped-query
// attention): [batch, kv_heads * times, seq, size].
Connection repeat_heads(NodeContext& c, const Connection& x, const Shape& shape, int64_t times) {
  if (times == 1) return x;
  const Connection five = c.op("expand_dims", {x}, {{"axes", std::vector<int64_t>{2}}});
  const std::vector<int64_t> wide = {shape[0], shape[1], times, shape[2], shape[3]};
  return c.op("broadcast_to", {five}, {{"shape", wide}}).reshape({shape[0], shape[1] * times, shape[2], shape[3]});
}

Outs attention(NodeContext& c) {
  if (c.has_input(6)) c.fail("nonpad_kv_seqlen is not supported");
  const float softcap = c.attr_float("softcap", 0.0f);
  const bool scores_output = c.node.output_size() > 3 && !c.node.output(3).empty();
  const std::optional<Shape> qs = c.static_shape(0), ks = c.static_shape(1), vs = c.static_shape(2);
  if (!qs || !ks || !vs) c.fail("needs the shapes of Q, K and V while importing");
  const size_t rank = qs->size();
  if ((rank != 3 && rank != 4) || ks->size() != rank || vs->size() != rank)
    c.fail("Q, K and V must be all 3-D or all 4-D, got Q of rank " + std::to_string(rank));
  // [batch, seq, heads * size] -> [batch, heads, seq, size]
  auto head_count = [&](const char* attr) {
    const int64_t h = c.attr_int(attr, 0);
    if (h <= 0) c.fail(std::string("3-D inputs need the attribute ") + attr);
    return h;
  };
  auto heads = [&](const Connection& x, const char* attr) {
    return c.op("reshape", {x}, {{"shape", std::vector<int64_t>{0, 0, head_count(attr), -1}}}).transpose({0, 2, 1, 3});
  };
  auto four_d = [&](const Shape& s, const char* attr) {  // the [batch, heads, seq, size] shape of a 3-D operand
    if (rank == 4) return s;
    const int64_t h = head_count(attr);
    if (s[2] % h != 0) c.fail(std::string("the hidden size is not a multiple of ") + attr);
    return Shape{s[0], h, s[1], s[2] / h};
  };
  const Shape q4 = four_d(*qs, "q_num_heads");
  Shape k4 = four_d(*ks, "kv_num_heads"), v4 = four_d(*vs, "kv_num_heads");
  Connection q = rank == 3 ? heads(c.in(0), "q_num_heads") : c.in(0);
  Connection k = rank == 3 ? heads(c.in(1), "kv_num_heads") : c.in(1);
  Connection v = rank == 3 ? heads(c.in(2), "kv_num_heads") : c.in(2);
  int64_t past = 0;
  if (c.has_input(4) != c.has_input(5)) c.fail("past_key and past_value come together");
  if (c.has_input(4)) {
    const std::optional<Shape> ps = c.static_shape(4);
    if (!ps || ps->size() != 4) c.fail("past_key needs a static 4-D shape while importing");
    past = (*ps)[2];
    k = c.op("concat", {c.in(4), k}, {{"axis", int64_t{2}}});
    v = c.op("concat", {c.in(5), v}, {{"axis", int64_t{2}}});
  }
  const int64_t total = k4[2] + past;
  k4[2] = v4[2] = total;
  const std::optional<DType> t = c.dtype(0);
  if (!t) c.fail("the element type of Q is unknown");
  const double hidden = -std::numeric_limits<double>::infinity();
  std::optional<Connection> mask;
  if (c.has_input(3)) {
    mask = c.in(3);
    const std::optional<Shape> ms = c.static_shape(3);
    if (!ms || ms->empty()) c.fail("attn_mask needs a static shape while importing");
    const bool written_out = softcap != 0.0f || scores_output;
    // A bool mask becomes scores where it is padded or added by hand (the fused op takes it as is).
    if (c.dtype(3) == DType::Bool && (ms->back() < total || written_out))
      mask = c.op("where", {*mask, c.scalar(0.0, *t), c.scalar(hidden, *t)});
    if (ms->back() < total)  // shorter than the keys: the rest hidden
      mask = pad_axis(c, *mask, static_cast<int>(ms->size()), static_cast<int64_t>(ms->size()) - 1, 0,
                      total - ms->back(), hidden);
  }
  const bool causal = c.attr_int("is_causal", 0) != 0;
  auto three_d = [&](const Connection& y) {
    return rank == 3 ? c.op("reshape", {y.transpose({0, 2, 1, 3})}, {{"shape", std::vector<int64_t>{0, 0, -1}}}) : y;
  };
  if (softcap == 0.0f && !scores_output) {
    std::vector<IOKey> ins = {q, k, v};
    if (mask) ins.push_back(*mask);
    Attrs attrs = {{"causal", int64_t{causal}}, {"causal_offset", past}};
    if (c.has_attr("scale")) attrs.set("scale", static_cast<double>(c.attr_float("scale", 0.0f)));
    return {three_d(c.op("scaled_dot_product_attention", ins, attrs)), k, v};
  }
  // Written out, in the order of ONNX's reference: scores = (q sqrt(scale)) (k sqrt(scale))^T,
  // softcapped (before the mask, so hidden positions stay -inf), plus the mask and the causal
  // term, softmax, times v. The qk_matmul_output modes: 0 and 1 the (softcapped) scores, 2 with
  // the mask added, 3 the probabilities (1 is 0 in the reference, which the tests follow).
  if (q4[1] % k4[1] != 0 || k4[1] != v4[1]) c.fail("the query heads must be a multiple of the key/value heads");
  const double scale = c.has_attr("scale") ? c.attr_float("scale", 0.0f) : 1.0 / std::sqrt(static_cast<double>(q4[3]));
  const Connection root = c.scalar(std::sqrt(scale), *t);
  const Connection keys = repeat_heads(c, k, k4, q4[1] / k4[1]), values = repeat_heads(c, v, v4, q4[1] / v4[1]);
  Connection scores = matmul(q * root, keys.transpose({0, 1, 3, 2}) * root);
  if (softcap != 0.0f) {
    const Connection cap = c.scalar(softcap, *t);
    scores = apply("tanh", scores / cap) * cap;
  }
  Connection with_bias = scores;
  if (mask) with_bias = with_bias + *mask;
  if (causal) {  // -inf above the diagonal shifted right by the past length
    Tensor term = Tensor::full(DType::Float64, {q4[2], total}, 0.0);
    for (int64_t i = 0; i < q4[2]; ++i)
      for (int64_t j = past + i + 1; j < total; ++j) term.data<double>()[i * total + j] = hidden;
    with_bias = with_bias + c.model.constant("attention_causal_" + c.node.output(0), term.astype(*t));
  }
  const Connection probabilities = c.op("softmax", {with_bias}, {{"axis", int64_t{-1}}});
  const int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) c.fail("qk_matmul_output_mode " + std::to_string(mode) + " is not one of 0 to 3");
  const Connection scores_out = mode == 3 ? probabilities : mode == 2 ? with_bias : scores;
  return {three_d(matmul(probabilities, values)), k, v, scores_out};
}

// RotaryEmbedding (opset 23): the first rotary_embedding_dim features of each head rotated by
// the cached cos and sin of its position (the caches indexed by position_ids where given), in
// halves or interleaved pairs; the rest of the head unchanged. 4-D input is [batch, heads, seq,
// head size], 3-D [batch, seq, heads * head size] (num_heads).
Outs rotary_embedding(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || (s->size() != 3 && s->size() != 4)) c.fail("RotaryEmbedding needs the input's size (rank 3 or 4) while importing");
  const bool four = s->size() == 4;
  Connection x;  // [batch, seq, heads, head size]
  int64_t head = 0;
  if (four) {
    x = c.in(0).transpose({0, 2, 1, 3});
    head = (*s)[3];
  } else {
    const int64_t heads = c.attr_int("num_heads", 0);
    if (heads <= 0 || (*s)[2] % heads != 0) c.fail("3-D input needs num_heads dividing its last dimension");
    head = (*s)[2] / heads;
    x = c.in(0).reshape({0, 0, heads, head});
  }
  int64_t rot = c.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot < 0 || rot > head || rot % 2 != 0)
    c.fail("rotary_embedding_dim " + std::to_string(rot) + " must be even and at most the head size " + std::to_string(head));
  Connection cosine = c.in(1), sine = c.in(2);
  if (c.has_input(3)) {
    cosine = c.op("gather", {cosine, c.in(3)}, {{"axis", int64_t{0}}});
    sine = c.op("gather", {sine, c.in(3)}, {{"axis", int64_t{0}}});
  }
  const Attrs heads_axis = {{"axes", std::vector<int64_t>{2}}};  // [batch, seq, 1, rot / 2]
  cosine = c.op("expand_dims", {cosine}, heads_axis);
  sine = c.op("expand_dims", {sine}, heads_axis);
  const bool interleaved = c.attr_int("interleaved", 0) != 0;
  const Connection x_rot = x.slice(3, 0, rot);
  const Connection x1 = interleaved ? x_rot.slice(3, 0, rot, 2) : x_rot.slice(3, 0, rot / 2);
  const Connection x2 = interleaved ? x_rot.slice(3, 1, rot, 2) : x_rot.slice(3, rot / 2, rot);
  const Connection real = cosine * x1 - sine * x2, imag = sine * x1 + cosine * x2;
  Connection rotated;
  if (interleaved) {  // pairs (real_i, imag_i) side by side
    const Attrs last = {{"axes", std::vector<int64_t>{4}}};
    rotated = c.op("concat", {c.op("expand_dims", {real}, last), c.op("expand_dims", {imag}, last)}, {{"axis", int64_t{4}}})
                  .reshape({0, 0, 0, rot});
  } else {
    rotated = c.op("concat", {real, imag}, {{"axis", int64_t{3}}});
  }
  const Connection y = rot == head ? rotated : c.op("concat", {rotated, x.slice(3, rot, head)}, {{"axis", int64_t{3}}});
  return {four ? y.transpose({0, 2, 1, 3}) : y.reshape({0, 0, -1})};
}

}  // namespace

void register_attention_conversions() {
  register_conversion("Attention", attention);
  register_conversion("RotaryEmbedding", rotary_embedding);
}

}  // namespace ingot::onnx_import
