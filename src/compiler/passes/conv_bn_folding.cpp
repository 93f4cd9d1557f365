// Conv + BatchNorm folding: batch_norm(conv2d(x, W, [b]), gamma, beta, mean, var) whose conv
// output has no other reader becomes one conv2d(x, W', b') with
//   s = gamma / sqrt(var + eps),  W'[o] = W[o] * s[o],  b' = (b - mean) * s + beta.
// batch_norm with given statistics is an affine map per channel, so the fold is exact up to
// rounding. Two forms:
//   - W, b, gamma, beta, mean and var all Constant (e.g. fixed with constant_keys), in either
//     mode: W' and b' are computed here in float64 and stored as constants in W's dtype;
//   - in inference, when some are run-time values (the zoo's BatchNorm2d parameters and running
//     statistics) but all are graph leaves: W' and b' become small graph ops on the parameters
//     (add, sqrt, div, reshape, mul, sub: weight-sized work per call), so the pass over the
//     activation that batch_norm costs disappears.
// Left alone: training mode with run-time values (the statistics are the batch's, computed from
// the conv output, and gradients need the unfolded graph), and statistics computed in the graph.
#include <cmath>

#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {
namespace {

std::string where(const Node& bn) { return bn.scope.empty() ? "" : " in '" + bn.scope + "'"; }

// The constant form: W' and b' computed now. False when the channel counts do not line up.
bool fold_constant(Graph& g, const Node& conv, const Node& bn) {
  const Tensor W = g.value(conv.inputs[1]).constant.astype(DType::Float64).contiguous();
  const int64_t cout = W.dim(0);
  auto vec = [&](ValueId v) { return g.value(v).constant.to_vector<double>(); };
  std::vector<double> gamma = vec(bn.inputs[1]), beta = vec(bn.inputs[2]), mean = vec(bn.inputs[3]),
                      var = vec(bn.inputs[4]);
  std::vector<double> bias(static_cast<size_t>(cout), 0.0);
  if (conv.inputs.size() > 2) bias = vec(conv.inputs[2]);
  if (static_cast<int64_t>(gamma.size()) != cout || bias.size() != gamma.size()) return false;
  const double eps = bn.attrs.get_float("eps", 1e-5);
  Tensor Wf = W.clone();
  double* w = Wf.data<double>();
  const int64_t per = W.numel() / cout;
  std::vector<double> nb(static_cast<size_t>(cout));
  for (int64_t o = 0; o < cout; ++o) {
    const size_t c = static_cast<size_t>(o);
    double s = gamma[c] / std::sqrt(var[c] + eps);
    for (int64_t k = 0; k < per; ++k) w[o * per + k] *= s;
    nb[c] = (bias[c] - mean[c]) * s + beta[c];
  }
  const DType wt = g.value(conv.inputs[1]).dtype;
  const DType bt = conv.inputs.size() > 2 ? g.value(conv.inputs[2]).dtype : wt;
  ValueId wv = g.add_constant(g.value(conv.inputs[1]).name + ".bn_folded", Wf.astype(wt));
  ValueId bv = g.add_constant(g.value(bn.inputs[2]).name + ".bn_folded", Tensor::from_vector<double>(nb, {cout}).astype(bt));
  g.node(conv.id).inputs = {conv.inputs[0], wv, bv};
  return true;
}

// The run-time form: W' and b' as graph ops (appended; returns them for reordering before the
// conv). All six values share W's floating dtype.
std::vector<NodeId> fold_runtime(Graph& g, const Node& conv, const Node& bn) {
  const DType dt = g.value(conv.inputs[1]).dtype;
  std::vector<NodeId> added;
  auto op = [&](const std::string& name, std::vector<ValueId> ins, const SymShape& shape, Attrs attrs = {}) {
    const ValueId v = g.add_op(name, std::move(ins), std::move(attrs), bn.scope);
    g.value(v).dtype = dt;
    g.value(v).shape = shape;
    g.value(v).shape_known = true;
    added.push_back(g.value(v).producer);
    return v;
  };
  const ValueId gamma = bn.inputs[1], beta = bn.inputs[2], mean = bn.inputs[3], var = bn.inputs[4];
  const SymShape cshape = g.value(gamma).shape;  // a copy: adding values moves them
  const ValueId eps = g.add_constant(g.value(var).name + ".eps", Tensor::full(dt, {}, bn.attrs.get_float("eps", 1e-5)));
  const ValueId s = op("div", {gamma, op("sqrt", {op("add", {var, eps}, cshape)}, cshape)}, cshape);
  SymShape s4 = cshape;
  s4.insert(s4.end(), 3, SymDim(1));
  const ValueId s_col = op("reshape", {s}, s4, {{"shape", std::vector<int64_t>{-1, 1, 1, 1}}});
  const SymShape wshape = g.value(conv.inputs[1]).shape;
  const ValueId w = op("mul", {conv.inputs[1], s_col}, wshape);
  const ValueId b = conv.inputs.size() > 2
                        ? op("add", {op("mul", {op("sub", {conv.inputs[2], mean}, cshape), s}, cshape), beta}, cshape)
                        : op("sub", {beta, op("mul", {mean, s}, cshape)}, cshape);
  g.node(conv.id).inputs = {conv.inputs[0], w, b};
  return added;
}

}  // namespace

PassReport fold_conv_batch_norm(Graph& g, const PassContext& ctx) {
  PassReport report;
  std::vector<int> uses = g.use_counts();
  std::vector<std::vector<NodeId>> before(g.nodes().size());  // run-time folds: new nodes per conv
  const size_t count = g.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    const Node bn = g.nodes()[i];
    if (bn.op != "batch_norm" || bn.inputs.size() != 5) continue;
    const Value& x = g.value(bn.inputs[0]);
    if (x.producer < 0 || g.node(x.producer).op != "conv2d" || uses[x.id] != 1) continue;
    const Node conv = g.node(x.producer);
    if (g.value(bn.outputs[0]).dtype != x.dtype || !is_floating(x.dtype)) continue;
    std::vector<ValueId> params(bn.inputs.begin() + 1, bn.inputs.end());
    params.insert(params.end(), conv.inputs.begin() + 1, conv.inputs.end());
    bool constant = true, leaves = true, same_dtype = true;
    for (ValueId v : params) {
      constant = constant && g.value(v).kind == ValueKind::Constant;
      leaves = leaves && g.value(v).producer < 0;
      same_dtype = same_dtype && g.value(v).dtype == g.value(conv.inputs[1]).dtype;
    }
    if (constant) {
      if (!fold_constant(g, conv, bn)) continue;
    } else if (!ctx.inference || !leaves || !same_dtype) {
      report.notes.push_back("conv2d + batch_norm" + where(bn) + " left as is: " +
                             (!ctx.inference ? "training mode (batch statistics, gradients)"
                              : !leaves      ? "the statistics are computed in the graph"
                                             : "the parameters' dtypes differ"));
      continue;
    } else {
      before[static_cast<size_t>(conv.id)] = fold_runtime(g, conv, bn);
    }
    replace_uses(g, bn.outputs[0], conv.outputs[0]);
    uses = g.use_counts();
    ++report.changes;
    report.notes.push_back("folded batch_norm" + where(bn) + " into conv2d" +
                           (constant ? "" : " (weights and bias rescaled per call from run-time parameters)"));
  }
  if (!report.changes) return report;
  std::vector<NodeId> order;
  for (size_t i = 0; i < count; ++i) {
    for (NodeId n : before[i]) order.push_back(n);
    order.push_back(static_cast<NodeId>(i));
  }
  reorder_nodes(g, order);
  remove_dead_nodes(g);
  return report;
}

}  // namespace ingot
