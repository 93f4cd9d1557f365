#include "backends/cpu/codegen_conv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "backends/cpu/conv_post_ops.h"

namespace ingot::cpu {
namespace {

using Kind = ConvPostOp::Kind;

// How one node continues the chain from value `y`: its post-ops and its operand (or -1).
struct Step {
  std::vector<ConvPostOp> ops;
  ValueId operand = -1;
};

std::optional<float> scalar_constant(const Value& v) {
  if (v.kind != ValueKind::Constant || !v.constant.defined() || v.constant.numel() != 1 || !is_static(v.shape) ||
      v.dtype != DType::Float32)
    return std::nullopt;
  return static_cast<float>(v.constant.item(0));
}

// [C, 1, 1] or [1, C, 1, 1] against y = [N, C, H, W] (all sizes known), or y's own shape. For a
// matmul's y = [..., N] (`channels_last`): [N], [1, N], ... up to y's rank.
enum class Broadcast { None, PerChannel, Full };
Broadcast operand_broadcast(const Value& o, const Value& y, bool channels_last) {
  if (o.dtype != DType::Float32) return Broadcast::None;
  if (o.shape == y.shape) return Broadcast::Full;
  if (channels_last) {
    if (o.shape.empty() || o.shape.size() > y.shape.size() || !is_static(o.shape) || !y.shape.back().known())
      return Broadcast::None;
    for (size_t d = 0; d + 1 < o.shape.size(); ++d)
      if (o.shape[d].value != 1) return Broadcast::None;
    return o.shape.back().value == y.shape.back().value ? Broadcast::PerChannel : Broadcast::None;
  }
  if (o.shape.size() < 3 || o.shape.size() > 4 || !is_static(o.shape) || !y.shape[1].known()) return Broadcast::None;
  const size_t off = 4 - o.shape.size();
  for (size_t d = 0; d < o.shape.size(); ++d) {
    const int64_t want = d + off == 1 ? y.shape[1].value : 1;
    if (o.shape[d].value != want) return Broadcast::None;
  }
  return Broadcast::PerChannel;
}

// A post-op with coefficients: Linear (alpha * y + beta) or Clip (min(beta, max(alpha, y)): a
// NaN y comes out as a bound, vmaxps / vminps, which DnnlConv's exact path covers: a NaN conv
// output needs a NaN or an inf among its inputs, conv_post_ops.h).
ConvPostOp with_coefficients(Kind kind, float alpha, float beta) {
  ConvPostOp p;
  p.kind = kind;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}
ConvPostOp linear(float alpha, float beta) { return with_coefficients(Kind::Linear, alpha, beta); }
// alpha * y exactly, signed zeros included: + (-0) leaves every value as it is, where + (+0)
// would turn the product -0 (y * c of a zero y and a negative c, or neg(+0)) into +0 (the
// reference's mul and neg give -0).
ConvPostOp scaled(float alpha) { return linear(alpha, -0.0f); }
ConvPostOp clip(float lo, float hi) { return with_coefficients(Kind::Clip, lo, hi); }

// Whether node n has one output, float32 and of y's shape: what every step of a chain writes.
bool writes_like(const Graph& g, const Node& n, ValueId y) {
  return n.outputs.size() == 1 && g.value(n.outputs[0]).dtype == DType::Float32 &&
         g.value(n.outputs[0]).shape == g.value(y).shape;
}

// Whether n is y * v or v * y, written like y (the last node of hardswish and of SiLU).
bool product_of(const Graph& g, const Node& n, ValueId y, ValueId v) {
  const bool reads = n.inputs.size() == 2 && ((n.inputs[0] == y && n.inputs[1] == v) || (n.inputs[0] == v && n.inputs[1] == y));
  return n.op == "mul" && reads && writes_like(g, n, y);
}

std::optional<Step> step_for(const Graph& g, const Node& n, ValueId y, bool channels_last) {
  static const std::map<std::string, Kind> unary = {{"relu", Kind::Relu}, {"tanh", Kind::Tanh}, {"sigmoid", Kind::Sigmoid},
                                                    {"exp", Kind::Exp},   {"log", Kind::Log},   {"sqrt", Kind::Sqrt},
                                                    {"abs", Kind::Abs}};
  static const std::map<std::string, Kind> binary = {{"add", Kind::Add}, {"sub", Kind::Sub}, {"mul", Kind::Mul},
                                                     {"div", Kind::Div}, {"maximum", Kind::Max}, {"minimum", Kind::Min}};
  if (!writes_like(g, n, y)) return std::nullopt;
  Step s;
  if (n.inputs.size() == 1) {
    if (auto it = unary.find(n.op); it != unary.end()) {
      s.ops.push_back({it->second});
    } else if (n.op == "gelu") {
      const std::string form = n.attrs.get_string("approximate", "none");
      if (form != "none" && form != "tanh") return std::nullopt;
      s.ops.push_back({form == "none" ? Kind::GeluErf : Kind::GeluTanh});
    } else if (n.op == "neg") {
      s.ops.push_back(scaled(-1.0f));
    } else {
      return std::nullopt;
    }
    return s;
  }
  auto it = binary.find(n.op);
  if (it == binary.end() || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
  const bool y_first = n.inputs[0] == y;
  const ValueId o = y_first ? n.inputs[1] : n.inputs[0];
  const Kind kind = it->second;
  if (const std::optional<float> c = scalar_constant(g.value(o))) {
    // alpha * y + beta is exact for these (one rounding, as the reference's add or mul).
    if (kind == Kind::Add) s.ops.push_back(linear(1.0f, *c));
    else if (kind == Kind::Mul) s.ops.push_back(scaled(*c));
    else if (kind == Kind::Sub) s.ops.push_back(y_first ? linear(1.0f, -*c) : linear(-1.0f, *c));
    else if (kind == Kind::Min) s.ops.push_back(clip(-std::numeric_limits<float>::infinity(), *c));  // ReLU6's clamp
    else if (kind == Kind::Max) s.ops.push_back(clip(*c, std::numeric_limits<float>::infinity()));
    else return std::nullopt;
    return s;
  }
  const Broadcast b = operand_broadcast(g.value(o), g.value(y), channels_last);
  if (b == Broadcast::None || (!y_first && kind == Kind::Div)) return std::nullopt;
  ConvPostOp p;
  p.kind = kind;
  p.per_channel = b == Broadcast::PerChannel;
  s.ops.push_back(p);
  // o - y = -(y - o) + 0: the + (+0) makes o - y of equal values +0, as the reference's sub does.
  if (!y_first && kind == Kind::Sub) s.ops.push_back(linear(-1.0f, 0.0f));
  s.operand = o;
  return s;
}

// MobileNetV3's hardswish as ONNX import writes it from y (HardSwish, or x times a HardSigmoid
// of alpha 1/6): a = y * (1/6), b = a + 0.5, b clamped to [0, 1] (min then max, or max then
// min), then y times that. It reads y twice, so the one-step chain below cannot take it: the next
// five nodes of the group from `i`, y read by the first and the last only, each value between
// read once, make one HardSwish post-op (oneDNN's eltwise_hardswish, y * clip(y + 3, 0, 6) / 6,
// within float32 rounding of the reference's form). How many nodes it takes: 5, or 0.
size_t hardswish_nodes(const Graph& g, const std::vector<NodeId>& after, size_t i, ValueId y,
                       const std::vector<int>& uses) {
  if (i + 5 > after.size() || uses[static_cast<size_t>(y)] != 2) return 0;
  // m = op(v, c) or op(c, v) of a float32 scalar constant c, read by one node: c.
  auto constant_with = [&](const Node& m, ValueId v) -> std::optional<float> {
    if (m.inputs.size() != 2 || !writes_like(g, m, y) || uses[static_cast<size_t>(m.outputs[0])] != 1)
      return std::nullopt;
    const ValueId o = m.inputs[0] == v ? m.inputs[1] : m.inputs[1] == v ? m.inputs[0] : ValueId{-1};
    return o < 0 ? std::nullopt : scalar_constant(g.value(o));
  };
  const Node& scale = g.node(after[i]);
  if (scale.op != "mul" || constant_with(scale, y) != static_cast<float>(1.0 / 6)) return 0;
  const Node& shift = g.node(after[i + 1]);
  if (shift.op != "add" || constant_with(shift, scale.outputs[0]) != 0.5f) return 0;
  ValueId v = shift.outputs[0];
  bool low = false, high = false;
  for (size_t k = 2; k < 4; ++k) {
    const Node& clamp = g.node(after[i + k]);
    const std::optional<float> c = constant_with(clamp, v);
    if (clamp.op == "minimum" && c == 1.0f && !high) high = true;
    else if (clamp.op == "maximum" && c == 0.0f && !low) low = true;
    else return 0;
    v = clamp.outputs[0];
  }
  return product_of(g, g.node(after[i + 4]), y, v) ? 5 : 0;
}

// SiLU (swish) as ONNX import writes it from y: s = sigmoid(y), read once, then y * s or s * y,
// the two nodes reading y. Like hardswish it reads y twice: one Swish post-op (oneDNN's
// eltwise_swish with alpha 1, y * sigmoid(y), within float32 rounding of the reference's
// sigmoid and product). How many nodes it takes: 2, or 0.
size_t swish_nodes(const Graph& g, const std::vector<NodeId>& after, size_t i, ValueId y, const std::vector<int>& uses) {
  if (i + 2 > after.size() || uses[static_cast<size_t>(y)] != 2) return 0;
  const Node& gate = g.node(after[i]);
  if (gate.op != "sigmoid" || gate.inputs.size() != 1 || gate.inputs[0] != y || !writes_like(g, gate, y) ||
      uses[static_cast<size_t>(gate.outputs[0])] != 1)
    return 0;
  return product_of(g, g.node(after[i + 1]), y, gate.outputs[0]) ? 2 : 0;
}

// Signed zeros. The reference's relu is `y < 0 ? 0 : y` and its maximum and minimum pass y on
// when it equals the bound, so a -0 y stays -0. oneDNN computes them as vmaxps / vminps (relu in
// its GEMM-based kernels as y * 0, which DnnlConv replaces by a clip: dnnl_conv.cpp): +0 for
// every y < 0 and y for y > 0, as the reference, but +0 for a -0 y. That differs only where a -0
// reaches them, and rsqrt or a division after it turns the zero's sign into an infinity's
// (program fuzzer seed 320829: rsqrt(relu(conv2d(x, w))) was -inf where a negative conv output
// gives +inf). A convolution's sum is never -0 (its accumulator starts at +0 and (+0) + (-0) is
// +0), nor is a sum with it; products, quotients and most functions can be. So a relu or a
// clamp is folded only after a chain that cannot make -0.
bool needs_a_signless_zero(const ConvPostOp& op) { return op.kind == Kind::Relu || op.kind == Kind::Clip; }

bool may_be_negative_zero(const ConvPostOp& op, bool before) {
  switch (op.kind) {
    case Kind::Add:
    case Kind::Sub: return before;  // y + o or y - o is -0 only when y is -0
    case Kind::Linear:
      // y + c is -0 only for -0 + -0; c * y + b only for a b of -0 (a product -0 plus +0 is +0).
      return op.beta == 0.0f && std::signbit(op.beta) && (before || op.alpha != 1.0f);
    case Kind::Relu: return before;
    case Kind::Clip:
      return before || (op.alpha == 0.0f && std::signbit(op.alpha)) || (op.beta == 0.0f && std::signbit(op.beta));
    case Kind::Exp:
    case Kind::Sigmoid:
    case Kind::Log:
    case Kind::Abs: return false;
    default: return true;  // products, quotients, tanh(-0), sqrt(-0), gelu of a tiny negative, max/min with an operand
  }
}

// The chain `chain` continued by `step`, or nullopt where oneDNN would not run it as written.
std::optional<std::vector<ConvPostOp>> extended(const std::vector<ConvPostOp>& chain, const std::vector<ConvPostOp>& step) {
  std::vector<ConvPostOp> ops = chain;
  for (const ConvPostOp& op : step) {
    // Two clamps in a row are one where their ranges meet: min(relu(y), 6) (ReLU6 as the zoo
    // writes it) and min(max(y, 0), 6) (as PyTorch's ONNX exporter writes Clip) are clip(y, 0, 6).
    // relu is clip(y, 0, inf) here (a NaN passes through both; -0 cannot reach a fused clamp).
    const bool clamp_before = !ops.empty() && (ops.back().kind == Kind::Relu || ops.back().kind == Kind::Clip);
    if (op.kind == Kind::Clip && clamp_before) {
      const bool relu = ops.back().kind == Kind::Relu;
      const float lo = std::max(relu ? 0.0f : ops.back().alpha, op.alpha);
      const float hi = std::min(relu ? std::numeric_limits<float>::infinity() : ops.back().beta, op.beta);
      if (lo <= hi) {
        ops.back() = clip(lo, hi);
        continue;
      }
    }
    ops.push_back(op);
  }
  // oneDNN 2.6's kernels give every post-op of one algorithm the coefficients of its first
  // (measured: a second linear took the first's alpha and beta), so a chain holds one linear,
  // and clips with one pair of bounds (a relu may run as clip(y, 0, inf): dnnl_conv.cpp).
  std::optional<std::pair<float, float>> bounds;
  int linears = 0;
  for (const ConvPostOp& op : ops) {
    linears += op.kind == Kind::Linear;
    if (op.kind != Kind::Relu && op.kind != Kind::Clip) continue;
    const std::pair<float, float> b = op.kind == Kind::Relu
                                          ? std::pair{0.0f, std::numeric_limits<float>::infinity()}
                                          : std::pair{op.alpha, op.beta};
    if (bounds && *bounds != b) return std::nullopt;
    bounds = b;
  }
  if (linears > 1) return std::nullopt;
  bool negative_zero = false;
  for (const ConvPostOp& op : ops) {
    if (needs_a_signless_zero(op) && negative_zero) return std::nullopt;
    negative_zero = may_be_negative_zero(op, negative_zero);
  }
  return ops;
}

}  // namespace

ConvEpilogue fold_conv_epilogue(const Graph& g, NodeId conv, const std::vector<NodeId>& after,
                                const std::function<bool(const ConvEpilogue&)>& accepts) {
  const std::vector<int> uses = g.use_counts();
  // Candidate chain, then its longest accepted prefix (probing the whole chain first: usually
  // oneDNN takes it all).
  std::vector<ConvEpilogue> prefixes(1);
  prefixes[0].result = g.node(conv).outputs[0];
  for (size_t i = 0; i < after.size();) {
    const ValueId y = prefixes.back().result;
    std::optional<Step> s;
    size_t taken = 0;
    if ((taken = hardswish_nodes(g, after, i, y, uses)) > 0) {
      s = Step{{ConvPostOp{Kind::HardSwish}}};
    } else if ((taken = swish_nodes(g, after, i, y, uses)) > 0) {
      s = Step{{ConvPostOp{Kind::Swish}}};
    } else {
      const Node& n = g.node(after[i]);
      bool reads_y = false;
      for (ValueId v : n.inputs) reads_y = reads_y || v == y;
      if (!reads_y || uses[static_cast<size_t>(y)] != 1) break;
      s = step_for(g, n, y, g.node(conv).op == "matmul");
      taken = 1;
    }
    // An operand computed inside the group would not exist yet when the primitive runs.
    if (!s || (s->operand >= 0 && std::find(after.begin(), after.end(), g.value(s->operand).producer) != after.end()))
      break;
    const std::optional<std::vector<ConvPostOp>> ops = extended(prefixes.back().post_ops, s->ops);
    if (!ops) break;
    ConvEpilogue next = prefixes.back();
    next.nodes.insert(next.nodes.end(), after.begin() + static_cast<std::ptrdiff_t>(i),
                      after.begin() + static_cast<std::ptrdiff_t>(i + taken));
    next.post_ops = *ops;
    if (s->operand >= 0) next.operands.push_back(s->operand);
    next.result = g.node(after[i + taken - 1]).outputs[0];
    prefixes.push_back(std::move(next));
    i += taken;
  }
  for (size_t k = prefixes.size(); k-- > 1;)
    if (accepts(prefixes[k])) return prefixes[k];
  return prefixes[0];
}

bool matmul_runs_as_conv(const Graph& g, const Node& n) {
  if (n.op != "matmul" || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const Value &a = g.value(n.inputs[0]), &b = g.value(n.inputs[1]), &y = g.value(n.outputs[0]);
  if (a.dtype != DType::Float32 || b.dtype != DType::Float32 || y.dtype != DType::Float32) return false;
  if (b.kind != ValueKind::Constant || b.shape.size() != 2 || !is_static(b.shape) || a.shape.empty()) return false;
  const int64_t k = b.shape[0].value, cols = b.shape[1].value;
  if (k < 1 || !(a.shape.back() == b.shape[0]) || y.shape.size() != std::max<size_t>(a.shape.size(), 1)) return false;
  for (size_t d = 0; d + 1 < a.shape.size(); ++d)
    if (!(y.shape[d] == a.shape[d])) return false;
  return y.shape.back().known() && y.shape.back().value == cols;
}

ConvSpec dense_spec(const Node& node, const Shape& x, const Shape& w, const Shape& y, Layout src, Layout dst) {
  if (node.op == "matmul") {  // a matmul's buffers are row-major matrices: its spec's NHWC
    const int64_t k = w[0], rows = k > 0 ? numel(x) / k : 0;
    return matmul_conv_spec(rows, k, w[1]);
  }
  ConvSpec spec = conv_spec(node, x, w, y);
  spec.src_layout = src;
  spec.dst_layout = dst;
  return spec;
}

bool dnnl_runs_fast(const Graph& g, const Node& conv, const ConvEpilogue& e, Layout src, Layout dst,
                    bool residual_in_dst) {
  auto concrete = [](const SymShape& s) {
    Shape r;
    for (const SymDim& d : s) r.push_back(d.known() ? d.value : 1);
    return r;
  };
  ConvSpec spec = dense_spec(conv, concrete(g.value(conv.inputs[0]).shape), concrete(g.value(conv.inputs[1]).shape),
                             concrete(g.value(conv.outputs[0]).shape), src, dst);
  spec.post_ops = e.post_ops;
  spec.residual_in_dst = residual_in_dst;
  spec.bf16 = g.value(conv.outputs[0]).dtype == DType::BFloat16;
  return dnnl_conv_is_fast(spec);
}

std::string dnnl_conv_kernel_body(const Node& conv, const ConvEpilogue& e, size_t index, Layout src, Layout dst,
                                  bool in_place) {
  std::ostringstream k;
  k << "  // oneDNN primitive, created by the host at load (x " << layout_name(src) << ", y " << layout_name(dst) << ", "
    << e.post_ops.size() << " post-ops" << (in_place ? "; y holds the residual, added in place" : "") << ")\n";
  const std::string bias = conv.inputs.size() > 2 ? "x2" : "nullptr";
  if (e.operands.empty()) {
    k << "  return ctx->host->conv2d(ctx->host->ctx, " << index << ", x0, x1, " << bias
      << ", y, ctx->error, ctx->error_size);\n";
  } else {
    k << "  const void* args[] = {x0, x1, " << bias;
    for (size_t i = 0; i < e.operands.size(); ++i) k << ", x" << conv.inputs.size() + i;
    k << "};\n  return ctx->host->conv2d_args(ctx->host->ctx, " << index << ", args, y, ctx->error, ctx->error_size);\n";
  }
  return k.str();
}

std::optional<std::vector<int32_t>> finite_when(const Graph& g, ValueId v, const std::map<ValueId, int32_t>& conv_results) {
  if (const auto it = conv_results.find(v); it != conv_results.end()) return std::vector<int32_t>{it->second};
  const Value& value = g.value(v);
  if (value.kind == ValueKind::Constant) {
    const Tensor& c = value.constant;
    if (!c.defined() || c.dtype() != DType::Float32) return std::nullopt;
    const Tensor dense = c.contiguous();
    if (has_non_finite(dense.data<float>(), dense.numel())) return std::nullopt;
    return std::vector<int32_t>{};
  }
  if (value.producer < 0) return std::nullopt;
  const Node& n = g.node(value.producer);
  // Each of these outputs only copies, selects or takes the maximum of its inputs' elements (or
  // zero): finite inputs give a finite output. max_pool2d writes -inf for a window of padding
  // alone, which needs an input without rows or columns.
  static const std::set<std::string> selecting = {"relu", "reshape", "slice", "concat", "max_pool2d"};
  if (!selecting.contains(n.op) || n.outputs.size() != 1) return std::nullopt;
  if (n.op == "max_pool2d") {
    const SymShape& x = g.value(n.inputs[0]).shape;
    if (x.size() != 4 || !x[2].known() || !x[3].known() || x[2].value < 1 || x[3].value < 1) return std::nullopt;
  }
  std::vector<int32_t> all;
  const size_t data_inputs = n.op == "concat" ? n.inputs.size() : 1;  // slice / reshape: the rest are shapes
  for (size_t i = 0; i < data_inputs; ++i) {
    const std::optional<std::vector<int32_t>> each = finite_when(g, n.inputs[i], conv_results);
    if (!each) return std::nullopt;
    all.insert(all.end(), each->begin(), each->end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

}  // namespace ingot::cpu
