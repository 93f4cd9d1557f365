// The attention family: scaled_dot_product_attention and its gradient (see
// families.h for the contract). One op, so that backends can run attention
// without writing the [Sq, Sk] score matrix to memory (the CPU backend's kernel
// is flash-style: an online softmax over key blocks), and so that front doors
// (lazy arrays, the zoo, ONNX's Attention) meet one definition.
//
// Semantics, for each leading index b and query row i:
//   s_j = scale * <q[b, i], k[b', j]> + mask[b, i, j]   (a bool mask: -inf
//   where false) s_j = -inf where causal and j > i + causal_offset y[b, i] =
//   sum_j softmax(s)_j v[b', j]
// where b' = b, except that a head axis (axis -3, rank >= 3) of k and v may
// divide q's: query head h reads key/value head h / (Hq / Hk) (grouped-query
// attention, ONNX's interleaving). A row whose keys are all masked is NaN, as
// softmax over nothing but -inf is (NumPy, ONNX, PyTorch's math path). The
// reference kernels accumulate in double.
#include <cmath>
#include <limits>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"

namespace ingot::ops {
namespace {

// --- shapes ---------------------------------------------------------------------------------------

// q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> y [..., Sq, Dv]; an optional mask broadcasts
// to [..., Sq, Sk]. Shared by the op (y its output) and its gradient op (y the output gradient).
void attention_operands(ShapeInfer& s, ValueId y, int mask_slot) {
  const ValueId q = s.in(0), k = s.in(1), v = s.in(2);
  if (!s.ready({q, k, v})) return;
  const int r = s.rank(q);
  if (r < 2 || s.rank(k) != r || s.rank(v) != r)
    s.fail(
        "scaled_dot_product_attention needs q, k and v of one rank >= 2 "
        "([..., S, D]), got ranks " +
        std::to_string(r) + ", " + std::to_string(s.rank(k)) + " and " + std::to_string(s.rank(v)));
  s.unify(s.dim(q, -1), s.dim(k, -1));  // D
  s.unify(s.dim(k, -2), s.dim(v, -2));  // Sk
  for (int a = 0; a + 2 < r; ++a) {
    s.unify(s.dim(k, a), s.dim(v, a));
    if (a == r - 3) {  // heads: k's may divide q's (grouped-query attention)
      const auto hq = s.value(s.dim(q, a)), hk = s.value(s.dim(k, a));
      if (hq && hk && (*hk == 0 || *hq % *hk != 0))
        s.fail("scaled_dot_product_attention: q has " + std::to_string(*hq) + " heads (axis -3), k and v " +
               std::to_string(*hk) + ": the key/value heads must divide the query heads");
      // With either unknown nothing is unified: divisibility is no equality (taking them equal
      // refused q with 2 heads beside one k head in a shapeless compile: the program fuzzer,
      // seed 96196); the kernels check it at run time.
    } else {
      s.unify(s.dim(q, a), s.dim(k, a));
    }
  }
  std::vector<DimVar> out = s.dims(q);
  out.back() = s.dim(v, -1);
  s.set_dims(y, out);
  if (s.num_inputs() > mask_slot && s.has_rank(s.in(mask_slot))) {
    const ValueId m = s.in(mask_slot);
    const int rm = s.rank(m);
    if (rm > r)
      s.fail("scaled_dot_product_attention: the mask has rank " + std::to_string(rm) + ", more than q's " +
             std::to_string(r));
    // The mask broadcasts to [..., Sq, Sk]: each of its dims is 1 or the
    // matching one.
    for (int a = 0; a < rm; ++a) {
      const DimVar md = s.dim(m, a - rm);
      const DimVar want = a == rm - 1 ? s.dim(k, -2) : s.dim(q, a - rm);
      const auto mv = s.value(md), wv = s.value(want);
      if (mv && *mv == 1) continue;
      if (mv && wv && *mv != *wv)
        s.fail(
            "scaled_dot_product_attention: the mask's shape does not "
            "broadcast to [..., Sq, Sk] (axis " +
            std::to_string(a - rm) + ": " + std::to_string(*mv) + " against " + std::to_string(*wv) + ")");
      // An unknown mask dim is 1 or the matching one, as in elementwise broadcasting: only the
      // run tells (two unknown ones are assumed equal, and the assumption recorded).
      if (!mv) s.broadcast(md, want, want);
    }
  }
}

void attention_shape(ShapeInfer& s) { attention_operands(s, s.out(), 3); }

// The gradient op: (dq, dk, dv, dmask) shaped like q, k, v and the mask ([0] without one).
void attention_grad_shape(ShapeInfer& s) {
  attention_operands(s, s.in(3), 4);
  for (int i = 0; i < 3; ++i) s.same_shape(s.in(i), s.out(i));
  if (s.num_inputs() > 4) {
    s.same_shape(s.in(4), s.out(3));
  } else {
    s.set_rank(s.out(3), 1);
    s.bind(s.dim(s.out(3), 0), 0);
  }
}

void attention_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  for (int i = 0; i < 3; ++i)
    INGOT_CHECK(is_floating(in[static_cast<size_t>(i)]) && in[static_cast<size_t>(i)] == in[0], n.op,
                ": q, k and v must share one float dtype, got ", dtype_name(in[0]), ", ", dtype_name(in[1]), " and ",
                dtype_name(in[2]));
  const size_t mask = n.op == "scaled_dot_product_attention" ? 3 : 4;
  if (in.size() > mask)
    INGOT_CHECK(in[mask] == DType::Bool || in[mask] == in[0], n.op, ": the mask must be bool (true = attend) or ",
                dtype_name(in[0]), " (added to the scores), got ", dtype_name(in[mask]));
  if (n.op != "scaled_dot_product_attention")
    INGOT_CHECK(in[3] == in[0], n.op, ": the output gradient must be ", dtype_name(in[0]), ", got ", dtype_name(in[3]));
  for (DType& t : out) t = in[0];
}

// --- reference kernels
// ---------------------------------------------------------------------------

// Sizes of one call: q's leading dims flattened to `batch` rows of heads `hq`,
// k/v's heads `hk`.
struct AttentionDims {
  Shape lead;  // q's dims before [Sq, D]
  int64_t batch = 1, hq = 1, hk = 1, sq = 0, sk = 0, d = 0, dv = 0;
  double scale = 1;
  bool causal = false;
  int64_t offset = 0;
  // The k/v row block of q's leading index b.
  int64_t kv(int64_t b) const { return (b / hq) * hk + (b % hq) / (hq / hk); }
};

AttentionDims attention_dims(const Node& n, const Shape& q, const Shape& k, const Shape& v) {
  AttentionDims a;
  const size_t r = q.size();
  INGOT_CHECK(r >= 2 && k.size() == r && v.size() == r, n.op, ": q, k and v need one rank >= 2, got ", to_string(q),
              ", ", to_string(k), " and ", to_string(v));
  a.lead.assign(q.begin(), q.end() - 2);
  for (int64_t x : a.lead) a.batch *= x;
  if (r >= 3) {
    a.hq = q[r - 3];
    a.hk = k[r - 3];
  }
  INGOT_CHECK(a.hk > 0 ? a.hq % a.hk == 0 : a.hq == 0, n.op, ": ", a.hk, " key/value heads do not divide ", a.hq,
              " query heads");
  if (a.hk == 0) a.hk = a.hq = 1;  // no rows at all
  a.sq = q[r - 2];
  a.d = q[r - 1];
  a.sk = k[r - 2];
  a.dv = v[r - 1];
  const double dflt = a.d > 0 ? 1.0 / std::sqrt(static_cast<double>(a.d)) : 1.0;
  a.scale = n.attrs.get_float("scale", 0.0);
  if (a.scale == 0.0) a.scale = dflt;
  a.causal = n.attrs.get_int("causal", 0) != 0;
  a.offset = n.attrs.get_int("causal_offset", 0);
  return a;
}

// The mask (bool or float, broadcast to [lead..., Sq, Sk]) as additive float64
// scores, row b.
struct MaskReader {
  const Tensor* mask = nullptr;
  Tensor scores;    // a float mask in float64
  Strides strides;  // over [lead..., Sq, Sk]
  Shape lead;
  // The masked score: a bool mask replaces a hidden key's score by -inf (as where() and PyTorch
  // do: an inf score there must not make inf + -inf = NaN; found by the program fuzzer, seed
  // 95044), a float mask is added to it.
  double apply(double s, int64_t b, int64_t i, int64_t j) const {
    if (mask == nullptr) return s;
    const double m = at(b, i, j);
    return mask->dtype() == DType::Bool ? (m == 0.0 ? s : m) : s + m;
  }
  double at(int64_t b, int64_t i, int64_t j) const {
    if (mask == nullptr) return 0.0;
    int64_t off = 0, rest = b;
    for (size_t a = lead.size(); a-- > 0;) {
      off += (rest % lead[a]) * strides[a];
      rest /= lead[a];
    }
    off += i * strides[lead.size()] + j * strides[lead.size() + 1];
    if (mask->dtype() == DType::Bool) return mask->data<bool>()[off] ? 0.0 : -std::numeric_limits<double>::infinity();
    return scores.data<double>()[off];
  }
};

MaskReader mask_reader(const Tensor* mask, const AttentionDims& a) {
  MaskReader m;
  m.mask = mask;
  m.lead = a.lead;
  if (mask != nullptr) {
    Shape full = a.lead;
    full.push_back(a.sq);
    full.push_back(a.sk);
    m.strides = broadcast_strides(mask->shape(), full);
    if (mask->dtype() != DType::Bool) m.scores = mask->astype(DType::Float64).contiguous();
  }
  return m;
}

// Row (b, i)'s attention probabilities into p (size Sk), in double.
template <class T>
void probabilities(const T* q, const T* k, const AttentionDims& a, const MaskReader& m, int64_t b, int64_t i,
                   std::vector<double>& p) {
  const T* qi = q + (b * a.sq + i) * a.d;
  const T* kb = k + a.kv(b) * a.sk * a.d;
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < a.sk; ++j) {
    double s = 0;
    for (int64_t e = 0; e < a.d; ++e)
      s += static_cast<double>(compute_t<T>(qi[e])) * static_cast<double>(compute_t<T>(kb[j * a.d + e]));
    // The score as the op's type holds it (as attention written out in that type, and every
    // kernel, does): a q k product past float32's range is inf there, not a finite double
    // (found by the program fuzzer, seed 95044: the CPU kernel's inf where this was finite).
    s = m.apply(static_cast<double>(static_cast<compute_t<T>>(s * a.scale)), b, i, j);
    if (a.causal && j > i + a.offset) s = -std::numeric_limits<double>::infinity();
    p[static_cast<size_t>(j)] = s;
    top = std::max(top, s);
  }
  double sum = 0;
  for (double& x : p) sum += (x = std::exp(x - top));  // all -inf: NaN, as softmax gives
  for (double& x : p) x /= sum;
}

void attention_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const AttentionDims a = attention_dims(n, in[0].shape(), in[1].shape(), in[2].shape());
  Shape ys = in[0].shape();
  ys.back() = a.dv;
  out[0] = Tensor(in[0].dtype(), ys);
  const MaskReader m = mask_reader(in.size() > 3 ? &in[3] : nullptr, a);
  dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const T *q = in[0].data<T>(), *k = in[1].data<T>(), *v = in[2].data<T>();
      T* y = out[0].data<T>();
      std::vector<double> p(static_cast<size_t>(a.sk)), acc(static_cast<size_t>(a.dv));
      for (int64_t b = 0; b < a.batch; ++b)
        for (int64_t i = 0; i < a.sq; ++i) {
          probabilities(q, k, a, m, b, i, p);
          std::fill(acc.begin(), acc.end(), 0.0);
          const T* vb = v + a.kv(b) * a.sk * a.dv;
          for (int64_t j = 0; j < a.sk; ++j)
            for (int64_t e = 0; e < a.dv; ++e)
              acc[static_cast<size_t>(e)] +=
                  p[static_cast<size_t>(j)] * static_cast<double>(compute_t<T>(vb[j * a.dv + e]));
          for (int64_t e = 0; e < a.dv; ++e)
            y[(b * a.sq + i) * a.dv + e] = T(static_cast<compute_t<T>>(acc[static_cast<size_t>(e)]));
        }
    }
  });
}

// (q, k, v, dy, [mask]) -> (dq, dk, dv, dmask): with P the probabilities and
// dP_ij = <dy_i, v_j>, dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'); dq_i = scale
// sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P_ij dy_i (both
// summed over the query heads sharing a key/value head), dmask = dS summed over
// the axes the mask broadcasts along (zeros for a bool mask).
void attention_grad_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const AttentionDims a = attention_dims(n, in[0].shape(), in[1].shape(), in[2].shape());
  const Tensor* mask = in.size() > 4 ? &in[4] : nullptr;
  const MaskReader m = mask_reader(mask, a);
  const DType t = in[0].dtype();
  std::vector<double> dq(static_cast<size_t>(in[0].numel())), dk(static_cast<size_t>(in[1].numel())),
      dv(static_cast<size_t>(in[2].numel())), dm(mask ? static_cast<size_t>(mask->numel()) : 0);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      auto f = [](T x) { return static_cast<double>(compute_t<T>(x)); };
      const T *q = in[0].data<T>(), *k = in[1].data<T>(), *v = in[2].data<T>(), *dy = in[3].data<T>();
      std::vector<double> p(static_cast<size_t>(a.sk)), dp(static_cast<size_t>(a.sk));
      for (int64_t b = 0; b < a.batch; ++b) {
        const int64_t kvb = a.kv(b);
        for (int64_t i = 0; i < a.sq; ++i) {
          probabilities(q, k, a, m, b, i, p);
          const int64_t row = b * a.sq + i;
          double dot = 0;
          for (int64_t j = 0; j < a.sk; ++j) {
            double s = 0;
            for (int64_t e = 0; e < a.dv; ++e) s += f(dy[row * a.dv + e]) * f(v[(kvb * a.sk + j) * a.dv + e]);
            dp[static_cast<size_t>(j)] = s;
            dot += p[static_cast<size_t>(j)] * s;
          }
          for (int64_t j = 0; j < a.sk; ++j) {
            const double pj = p[static_cast<size_t>(j)], ds = pj * (dp[static_cast<size_t>(j)] - dot);
            for (int64_t e = 0; e < a.dv; ++e)
              dv[static_cast<size_t>((kvb * a.sk + j) * a.dv + e)] += pj * f(dy[row * a.dv + e]);
            for (int64_t e = 0; e < a.d; ++e) {
              dq[static_cast<size_t>(row * a.d + e)] += a.scale * ds * f(k[(kvb * a.sk + j) * a.d + e]);
              dk[static_cast<size_t>((kvb * a.sk + j) * a.d + e)] += a.scale * ds * f(q[row * a.d + e]);
            }
            if (mask != nullptr && mask->dtype() != DType::Bool && !(a.causal && j > i + a.offset)) {
              int64_t off = 0, rest = b;
              for (size_t x = a.lead.size(); x-- > 0;) {
                off += (rest % a.lead[x]) * m.strides[x];
                rest /= a.lead[x];
              }
              dm[static_cast<size_t>(off + i * m.strides[a.lead.size()] + j * m.strides[a.lead.size() + 1])] += ds;
            }
          }
        }
      }
    }
  });
  auto emit = [&](const std::vector<double>& g, const Shape& s) {
    Tensor d(DType::Float64, s);
    std::copy(g.begin(), g.end(), d.data<double>());
    return d.astype(t);
  };
  out[0] = emit(dq, in[0].shape());
  out[1] = emit(dk, in[1].shape());
  out[2] = emit(dv, in[2].shape());
  out[3] = mask ? emit(dm, mask->shape()) : Tensor(t, Shape{0});
}

void attention_vjp(VjpContext& c) {
  std::vector<ValueId> ins = {c.in(0), c.in(1), c.in(2), c.grad_out()};
  const bool float_mask = c.num_inputs() > 3 && is_floating(c.dtype(c.in(3)));
  if (c.num_inputs() > 3) ins.push_back(c.in(3));
  const std::vector<ValueId> g = c.op_n("scaled_dot_product_attention_grad", ins, c.attrs(), 4);
  for (int i = 0; i < 3; ++i)
    if (c.needs_grad(i)) c.set_grad(i, g[static_cast<size_t>(i)]);
  if (float_mask && c.needs_grad(3)) c.set_grad(3, g[3]);
}

// The fuzzer's operands: k and v fed to fit the drawn q ([..., Sq, D], rank >=
// 2), half the time with fewer key/value heads; a bool or float mask now and
// then; causal half the time.
SampledOperands sample_attention(std::span<const Shape> in, uint64_t seed) {
  Draw d{seed};
  const Shape& q = in[0];
  if (q.size() < 2) return {};
  const size_t r = q.size();
  const int64_t sk = 1 + d.below(9);
  Shape ks = q, vs = q;
  ks[r - 2] = vs[r - 2] = sk;
  vs[r - 1] = 1 + d.below(6);
  if (r >= 3 && q[r - 3] % 2 == 0 && d.coin()) ks[r - 3] = vs[r - 3] = q[r - 3] / 2;
  SampledOperands out;
  out.attrs = {{"causal", int64_t{d.coin()}}, {"causal_offset", d.below(3) - 1}};
  if (d.coin()) out.attrs.set("scale", 0.5);
  out.operands = {std::nullopt, d.uniform(ks, -1.5, 1.5), d.uniform(vs, -2.0, 2.0)};
  if (in.size() > 3) {
    Shape ms = {q[r - 2], sk};
    if (d.coin()) {
      Tensor bits = d.uniform(ms, 0.0, 1.0);
      Tensor mask(DType::Bool, ms);
      for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = i % sk == 0 || bits.data<float>()[i] > 0.3f;
      out.operands.push_back(mask);
    } else {
      out.operands.push_back(d.uniform(ms, -1.0, 1.0));
    }
  }
  return out;
}

}  // namespace

void register_attention_ops() {
  register_op(OpDef{.name = "scaled_dot_product_attention",
                    .min_inputs = 3,
                    .max_inputs = 4,
                    .fusion = FusionClass::Opaque,
                    .shape = attention_shape,
                    .dtype = attention_dtype,
                    .eval = attention_eval,
                    .doc = "softmax(q k^T * {scale} + mask, causal below "
                           "{causal_offset}) v; [..., S, D] operands, "
                           "grouped-query heads on axis -3",
                    .vjp = attention_vjp});
  register_op(OpDef{.name = "scaled_dot_product_attention_grad",
                    .min_inputs = 4,
                    .max_inputs = 5,
                    .num_outputs = 4,
                    .fusion = FusionClass::Opaque,
                    .shape = attention_grad_shape,
                    .dtype = attention_dtype,
                    .eval = attention_grad_eval,
                    .doc = "(q, k, v, dy, [mask]) -> (dq, dk, dv, dmask): the "
                           "attention's gradients"});
  set_operand_sampler("scaled_dot_product_attention", sample_attention);
}

}  // namespace ingot::ops
