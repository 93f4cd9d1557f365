// ONNX's Attention (opset 23) as ingot's scaled_dot_product_attention: 4-D [batch, heads, seq,
// head size] operands as they are, 3-D [batch, seq, heads * head size] ones split into heads
// (q_num_heads, kv_num_heads) and joined back after; a KV cache (past_key, past_value) joins the
// new keys along the sequence, its length becoming the causal offset, and the joined keys and
// values are the present_key and present_value outputs; a mask shorter than the keys is padded
// with hidden positions, as ONNX's reference does. Refused with a clear error: softcap,
// nonpad_kv_seqlen and the qk_matmul_output output.
#include <limits>

#include "frontends/onnx/importer.h"
#include "ingot/error.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

Outs attention(NodeContext& c) {
  if (c.has_input(6)) c.fail("nonpad_kv_seqlen is not supported");
  if (c.attr_float("softcap", 0.0f) != 0.0f) c.fail("softcap is not supported");
  if (c.node.output_size() > 3 && !c.node.output(3).empty()) c.fail("the qk_matmul_output output is not supported");
  const std::optional<Shape> qs = c.static_shape(0), ks = c.static_shape(1);
  if (!qs || !ks) c.fail("needs the shapes of Q and K while importing");
  const size_t rank = qs->size();
  if ((rank != 3 && rank != 4) || ks->size() != rank)
    c.fail("Q, K and V must be all 3-D or all 4-D, got Q of rank " + std::to_string(rank));
  // [batch, seq, heads * size] -> [batch, heads, seq, size]
  auto heads = [&](const Connection& x, const char* attr) {
    const int64_t h = c.attr_int(attr, 0);
    if (h <= 0) c.fail(std::string("3-D inputs need the attribute ") + attr);
    return c.op("reshape", {x}, {{"shape", std::vector<int64_t>{0, 0, h, -1}}}).transpose({0, 2, 1, 3});
  };
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
  const int64_t total = (rank == 3 ? (*ks)[1] : (*ks)[2]) + past;
  std::vector<IOKey> ins = {q, k, v};
  if (c.has_input(3)) {
    Connection mask = c.in(3);
    const std::optional<Shape> ms = c.static_shape(3);
    if (!ms || ms->empty()) c.fail("attn_mask needs a static shape while importing");
    if (ms->back() < total) {  // shorter than the keys: the rest hidden (a bool mask as scores first)
      const double hidden = -std::numeric_limits<double>::infinity();
      if (c.dtype(3) == DType::Bool) {
        const std::optional<DType> t = c.dtype(0);
        if (!t) c.fail("the element type of Q is unknown");
        mask = c.op("where", {mask, c.scalar(0.0, *t), c.scalar(hidden, *t)});
      }
      mask = pad_axis(c, mask, static_cast<int>(ms->size()), static_cast<int64_t>(ms->size()) - 1, 0,
                      total - ms->back(), hidden);
    }
    ins.push_back(mask);
  }
  Attrs attrs = {{"causal", c.attr_int("is_causal", 0)}, {"causal_offset", past}};
  if (c.has_attr("scale")) attrs.set("scale", static_cast<double>(c.attr_float("scale", 0.0f)));
  Connection y = c.op("scaled_dot_product_attention", ins, attrs);
  if (rank == 3) y = c.op("reshape", {y.transpose({0, 2, 1, 3})}, {{"shape", std::vector<int64_t>{0, 0, -1}}});
  return {y, k, v};
}

}  // namespace

void register_attention_conversions() { register_conversion("Attention", attention); }

}  // namespace ingot::onnx_import
