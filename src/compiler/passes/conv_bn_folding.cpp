// Conv + BatchNorm folding for inference: batch_norm(conv2d(x, W, [b]), gamma, beta, mean, var)
// where W, b, gamma, beta, mean and var are all Constant values (e.g. fixed with constant_keys)
// and the conv output has no other reader becomes conv2d(x, W', b') with
//   s = gamma / sqrt(var + eps),  W'[o] = W[o] * s[o],  b' = (b - mean) * s + beta
// computed in float64 and stored in W's dtype. batch_norm with constant statistics is an affine
// per-channel map in both modes, so the fold is exact up to rounding.
//
// When the statistics or weights are Parameters (run-time values, the default for the zoo's
// BatchNorm2d), nothing is rewritten: folding would need the values, and rewriting into scale/shift
// elementwise ops is not cheaper for the reference backend. The pass reports it in that case.
#include <cmath>

#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {

PassReport fold_conv_batch_norm(Graph& g, const PassContext&) {
  PassReport report;
  std::vector<int> uses = g.use_counts();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node bn = g.nodes()[i];
    if (bn.op != "batch_norm" || bn.inputs.size() != 5) continue;
    const Value& x = g.value(bn.inputs[0]);
    if (x.producer < 0 || g.node(x.producer).op != "conv2d" || uses[x.id] != 1) continue;
    const Node conv = g.node(x.producer);
    bool constant = true;
    for (size_t k = 1; k < 5; ++k) constant = constant && g.value(bn.inputs[k]).kind == ValueKind::Constant;
    for (size_t k = 1; k < conv.inputs.size(); ++k)
      constant = constant && g.value(conv.inputs[k]).kind == ValueKind::Constant;
    if (!constant) {
      report.notes.push_back("conv2d + batch_norm" + (bn.scope.empty() ? "" : " in '" + bn.scope + "'") +
                             " left as is: weights or statistics are run-time parameters");
      continue;
    }
    if (g.value(bn.outputs[0]).dtype != x.dtype || !is_floating(x.dtype)) continue;
    const Tensor W = g.value(conv.inputs[1]).constant.astype(DType::Float64).contiguous();
    const int64_t cout = W.dim(0);
    auto vec = [&](ValueId v) { return g.value(v).constant.to_vector<double>(); };
    std::vector<double> gamma = vec(bn.inputs[1]), beta = vec(bn.inputs[2]), mean = vec(bn.inputs[3]),
                        var = vec(bn.inputs[4]);
    std::vector<double> bias(static_cast<size_t>(cout), 0.0);
    if (conv.inputs.size() > 2) bias = vec(conv.inputs[2]);
    if (static_cast<int64_t>(gamma.size()) != cout || bias.size() != gamma.size()) continue;
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
    ValueId bv = g.add_constant(g.value(bn.inputs[2]).name + ".bn_folded",
                                Tensor::from_vector<double>(nb, {cout}).astype(bt));
    Node& c = g.node(conv.id);
    c.inputs = {conv.inputs[0], wv, bv};
    replace_uses(g, bn.outputs[0], conv.outputs[0]);
    uses = g.use_counts();
    ++report.changes;
    report.notes.push_back("folded batch_norm" + (bn.scope.empty() ? "" : " in '" + bn.scope + "'") +
                           " into conv2d");
  }
  if (report.changes) remove_dead_nodes(g);
  return report;
}

}  // namespace ingot
