// Attention fusion: attention written out by hand (in compile(fn), a logical model or an imported
// ONNX graph) becomes one scaled_dot_product_attention node, which the CPU backend runs without
// writing the score matrix.
//
//   matmul(softmax(masks(scale(matmul(q, kT))), axis=-1), v)
//
// scale: x * c, c * x or x / c with c a constant of one element (or nothing: scale 1).
// masks: a chain of add(s, m) and where(cond, s, fill) around the scores (PyTorch's exports
//   write a causal where() and an additive attention_mask). The chain is rewritten in place with
//   the scores replaced by 0, which turns it into one additive mask: add(0, m) = m,
//   where(cond, 0, fill). s + where(cond, 0, fill) equals where(cond, s, fill) exactly for fill
//   -inf, and for a huge negative fill (float32's lowest, as PyTorch writes) wherever |s| is below
//   half a unit of it (1e31); the mask keeps its own broadcast shape.
// A where whose condition is a constant lower-triangular bool [1..., Sq, Sk], cond[i][j] =
//   j <= i + offset with offset >= 0 (GPT-2's causal mask, bottom-right for a KV cache), becomes
//   the op's causal flag and causal_offset instead of a mask, so the kernel skips the hidden
//   keys rather than scoring them. Exact: every row still sees a key, and a hidden key's
//   probability is 0 either way (exp of -inf, or of float32's lowest minus a score). With
//   another mask in the chain only for a fill of -inf (see below).
// kT: transpose(x, perm) read by nothing else; the transpose is rewritten in place to give k
//   [..., Sk, D] (or dropped when that is x itself).
// Every intermediate (the scores, each masked step, the probabilities) must have no other reader,
// q, k and v one float dtype and equal leading dims, and the masks must not broadcast the
// scores to a larger shape. Anything else is left as it is. Runs before DCE, which removes the
// nodes the match leaves unread.
#include <cmath>
#include <optional>

#include "compiler/passes/passes.h"

namespace ingot {
namespace {

bool scalar_constant(const Graph& g, ValueId v, double* value) {
  const Value& x = g.value(v);
  if (x.kind != ValueKind::Constant || x.constant.numel() != 1 || !is_floating(x.constant.dtype())) return false;
  *value = x.constant.item(0);
  return true;
}

// Whether `fill` (where's third operand) hides a score: a constant of -inf or of values at most
// -1e30 (float32's lowest, as PyTorch writes for masked_fill).
bool hides(const Graph& g, ValueId fill) {
  const Value& x = g.value(fill);
  if (x.kind != ValueKind::Constant || x.constant.numel() == 0 || !is_floating(x.constant.dtype())) return false;
  for (double v : x.constant.to_vector<double>())
    if (!(v <= -1e30)) return false;
  return true;
}

// Whether `fill` is -inf throughout.
bool hides_exactly(const Graph& g, ValueId fill) {
  const Value& x = g.value(fill);
  if (x.kind != ValueKind::Constant || x.constant.numel() == 0 || !is_floating(x.constant.dtype())) return false;
  for (double v : x.constant.to_vector<double>())
    if (!(std::isinf(v) && v < 0)) return false;
  return true;
}

// NumPy broadcasting of two symbolic shapes (1 takes the other's size).
SymShape broadcast(const SymShape& a, const SymShape& b) {
  const size_t r = std::max(a.size(), b.size());
  SymShape out(r, SymDim(1));
  for (size_t i = 0; i < r; ++i) {
    const bool ha = i >= r - a.size(), hb = i >= r - b.size();
    const SymDim da = ha ? a[i - (r - a.size())] : SymDim(1), db = hb ? b[i - (r - b.size())] : SymDim(1);
    out[i] = da.known() && da.value == 1 ? db : da;
  }
  return out;
}

// The offset of `cond` as a causal mask over scores of shape `scores`: a constant bool of shape
// [1..., Sq, Sk] with cond[i][j] == (j <= i + offset) everywhere and offset >= 0.
std::optional<int64_t> causal_offset(const Graph& g, ValueId cond, const SymShape& scores) {
  const Value& c = g.value(cond);
  const size_t r = scores.size();
  if (c.kind != ValueKind::Constant || c.constant.dtype() != DType::Bool || c.constant.shape().size() < 2 ||
      c.constant.shape().size() > r || r < 2 || !scores[r - 2].known() || !scores[r - 1].known())
    return std::nullopt;
  const Shape& cs = c.constant.shape();
  const int64_t sq = scores[r - 2].value, sk = scores[r - 1].value;
  if (cs[cs.size() - 2] != sq || cs[cs.size() - 1] != sk || sq == 0 || sk == 0) return std::nullopt;
  for (size_t a = 0; a + 2 < cs.size(); ++a)
    if (cs[a] != 1) return std::nullopt;
  const Tensor t = c.constant.contiguous();
  const bool* m = t.data<bool>();
  int64_t first_row = 0;  // row 0 sees keys 0..offset
  while (first_row < sk && m[first_row]) ++first_row;
  const int64_t offset = first_row - 1;
  if (offset < 0) return std::nullopt;
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      if (m[i * sk + j] != (j <= i + offset)) return std::nullopt;
  return offset;
}

struct Match {
  NodeId qk = -1, transpose = -1;
  std::vector<std::pair<NodeId, size_t>> masks;  // from the softmax inward, with the scores' operand slot
  NodeId causal_where = -1;                      // one of the masks: the causal flag instead
  int64_t causal_offset = 0;
  double scale = 1.0;
};

}  // namespace

PassReport fuse_attention(Graph& g, const PassContext&) {
  PassReport report;
  report.pass = "attention";
  std::vector<int> readers(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) ++readers[static_cast<size_t>(v)];
  for (const auto& [name, v] : g.outputs()) readers[static_cast<size_t>(v)] += 2;  // an output is kept
  auto only_reader = [&](ValueId v) { return readers[static_cast<size_t>(v)] == 1; };
  auto producer = [&](ValueId v) -> const Node* {
    const NodeId p = g.value(v).producer;
    return p < 0 ? nullptr : &g.node(p);
  };
  const size_t count = g.nodes().size();
  for (size_t id = 0; id < count; ++id) {
    const Node& out = g.nodes()[id];
    if (out.op != "matmul" || out.inputs.size() != 2) continue;
    const ValueId p = out.inputs[0], v = out.inputs[1];
    const Node* sm = producer(p);
    if (sm == nullptr || sm->op != "softmax" || !only_reader(p)) continue;
    const int r = static_cast<int>(g.value(p).shape.size());
    if (r < 2 || (sm->attrs.get_int("axis", -1) != -1 && sm->attrs.get_int("axis", -1) != r - 1)) continue;
    // Down the mask chain to the scale and the q k^T matmul.
    Match m;
    ValueId s = sm->inputs[0];
    bool ok = only_reader(s);
    bool scaled = false;  // a scale ends the masks: below it only the matmul may come
    while (ok) {
      const Node* n = producer(s);
      if (n == nullptr) {
        ok = false;
        break;
      }
      double c = 0;
      if (n->op == "matmul") {
        m.qk = n->id;
        break;
      }
      if (!scaled && n->op == "mul" && scalar_constant(g, n->inputs[1], &c)) {
        m.scale = c, s = n->inputs[0], scaled = true;
      } else if (!scaled && n->op == "mul" && scalar_constant(g, n->inputs[0], &c)) {
        m.scale = c, s = n->inputs[1], scaled = true;
      } else if (!scaled && n->op == "div" && scalar_constant(g, n->inputs[1], &c) && c != 0) {
        m.scale = 1.0 / c, s = n->inputs[0], scaled = true;
      } else if (!scaled && n->op == "add") {
        // Either operand of the scores' full shape may be taken for the scores: s + m is the
        // same identity whichever it is.
        const SymShape& full = g.value(n->outputs[0]).shape;
        const int side = g.value(n->inputs[0]).shape == full ? 0 : 1;
        ok = g.value(n->inputs[static_cast<size_t>(side)]).shape == full;
        m.masks.push_back({n->id, static_cast<size_t>(side)});
        s = n->inputs[static_cast<size_t>(side)];
      } else if (!scaled && n->op == "where" && g.value(n->inputs[1]).shape == g.value(n->outputs[0]).shape &&
                 hides(g, n->inputs[2])) {
        m.masks.push_back({n->id, 1});
        if (m.causal_where < 0)
          if (const std::optional<int64_t> off = causal_offset(g, n->inputs[0], g.value(n->outputs[0]).shape)) {
            m.causal_where = n->id;
            m.causal_offset = *off;
          }
        s = n->inputs[1];
      } else {
        ok = false;
      }
      ok = ok && only_reader(s);
    }
    if (!ok || m.qk < 0) continue;
    // With a finite fill and another mask, a row whose visible keys that mask hides as well gets
    // a softmax over every key from the where (all at the fill) but over its visible keys only
    // from the causal flag: then the where stays a mask.
    if (m.causal_where >= 0 && m.masks.size() > 1 && !hides_exactly(g, g.node(m.causal_where).inputs[2]))
      m.causal_where = -1;
    const Node& qk = g.node(m.qk);
    if (qk.inputs.size() != 2) continue;
    const ValueId q = qk.inputs[0], kt = qk.inputs[1];
    const Node* tr = producer(kt);
    if (tr == nullptr || tr->op != "transpose" || !only_reader(kt)) continue;
    const SymShape &qs = g.value(q).shape, &vs = g.value(v).shape, &xs = g.value(tr->inputs[0]).shape;
    if (static_cast<int>(qs.size()) != r || static_cast<int>(vs.size()) != r || static_cast<int>(xs.size()) != r) continue;
    std::vector<int64_t> perm = tr->attrs.get_ints("perm", {});
    if (perm.empty())
      for (int i = r - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int>(perm.size()) != r) continue;
    std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - 2)]);
    SymShape ks;
    bool identity = true;
    for (int i = 0; i < r; ++i) {
      const int64_t a = perm[static_cast<size_t>(i)] < 0 ? perm[static_cast<size_t>(i)] + r : perm[static_cast<size_t>(i)];
      identity = identity && a == i;
      ks.push_back(xs[static_cast<size_t>(a)]);
    }
    const DType t = g.value(q).dtype;
    bool fits = (t == DType::Float32 || t == DType::Float64) && g.value(kt).dtype == t && g.value(v).dtype == t &&
                ks[static_cast<size_t>(r - 1)] == qs[static_cast<size_t>(r - 1)] &&
                ks[static_cast<size_t>(r - 2)] == vs[static_cast<size_t>(r - 2)];
    for (int i = 0; i + 2 < r; ++i)
      fits = fits && qs[static_cast<size_t>(i)] == ks[static_cast<size_t>(i)] && qs[static_cast<size_t>(i)] == vs[static_cast<size_t>(i)];
    for (const auto& mask : m.masks) fits = fits && g.value(g.node(mask.first).outputs[0]).dtype == t;
    if (!fits) continue;

    // Rewrite: k, the masks as one additive mask, and the final matmul as the op.
    ValueId k = tr->inputs[0];
    if (!identity) {
      Node& trn = g.node(tr->id);
      trn.attrs.set("perm", perm);
      g.value(kt).shape = ks;
      k = kt;
    }
    std::vector<ValueId> operands = {q, k, v};
    std::string what = "softmax(q k^T";
    if (m.scale != 1.0) what += " * " + std::to_string(m.scale);
    if (m.causal_where >= 0) what += ", causal";
    if (m.masks.size() > (m.causal_where >= 0 ? 1u : 0u)) {
      // Innermost first: the scores operand becomes 0, each step's shape its other operands'.
      ValueId below = -1;
      for (size_t i = m.masks.size(); i-- > 0;) {
        if (m.masks[i].first == m.causal_where) continue;  // left unread for DCE
        Node& mn = g.node(m.masks[i].first);
        mn.inputs[m.masks[i].second] = below >= 0 ? below : g.add_constant("attention.zero", Tensor::full(t, {}, 0.0));
        SymShape shape;
        for (ValueId in : mn.inputs) shape = broadcast(shape, g.value(in).shape);
        g.value(mn.outputs[0]).shape = shape;
        below = mn.outputs[0];
        what += mn.op == "where" ? ", where" : " + mask";
      }
      operands.push_back(below);
    }
    Node& fused = g.node(static_cast<NodeId>(id));
    fused.op = "scaled_dot_product_attention";
    fused.inputs = operands;
    fused.attrs = Attrs{};
    fused.attrs.set("scale", m.scale);
    if (m.causal_where >= 0) {
      fused.attrs.set("causal", int64_t{1});
      fused.attrs.set("causal_offset", m.causal_offset);
    }
    ++report.changes;
    report.notes.push_back(what + ") v" + (fused.scope.empty() ? "" : " in '" + fused.scope + "'") +
                           " -> scaled_dot_product_attention");
    // The nodes now unread keep their reader counts; DCE removes them.
  }
  return report;
}

}  // namespace ingot
