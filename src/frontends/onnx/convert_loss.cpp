// ONNX losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log_softmax over the
// classes, then the same loss), written with catalogue ops so they differentiate.
#include "ingot/error.h"
#include "frontends/onnx/importer.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

// The negative log-likelihood of `target` [N, d1..dk] under `logp` [N, C, d1..dk]: per element
// -logp[n, target, d] * weight[target], where ignore_index (when given) marks targets that count
// nothing; reduced as `reduction` says (mean divides by the weights that counted).
Connection nll(NodeContext& c, const Connection& logp, const Connection& target, int weight_input) {
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    c.fail("reduction '" + reduction + "' is not none, sum or mean");
  Connection t = target;
  std::optional<Connection> valid;
  if (c.has_attr("ignore_index")) {
    const double ignored = static_cast<double>(c.attr_int("ignore_index", 0));
    valid = c.op("not_equal", {target, ignored});
    t = c.op("where", {*valid, target, 0.0});  // an ignored target reads class 0, then counts nothing
  }
  const Connection picked = c.op("take_along_axis", {logp, c.op("expand_dims", {t}, {{"axes", std::vector<int64_t>{1}}})},
                                 {{"axis", int64_t{1}}});
  Connection loss = c.op("neg", {c.op("sum", {picked}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}})});
  std::optional<Connection> weight;
  if (c.has_input(weight_input)) weight = c.op("gather", {c.in(weight_input), t}, {{"axis", int64_t{0}}});
  if (valid) {
    const Connection zero_or_one = c.op("cast", {*valid}, {{"dtype", std::string(dtype_name(c.dtype(0).value_or(DType::Float32)))}});
    weight = weight ? c.op("mul", {*weight, zero_or_one}) : zero_or_one;
  }
  if (weight) loss = c.op("mul", {loss, *weight});
  if (reduction == "none") return loss;
  const Connection total = c.op("sum", {loss});
  if (reduction == "sum") return total;
  if (!weight) return c.op("mean", {loss});
  return c.op("div", {total, c.op("sum", {*weight})});
}

Outs nll_loss(NodeContext& c) { return {nll(c, c.in(0), c.in(1), 2)}; }

Outs softmax_cross_entropy(NodeContext& c) {
  const Connection logp = c.op("log_softmax", {c.in(0)}, {{"axis", int64_t{1}}});
  Outs outs = {nll(c, logp, c.in(1), 2)};
  if (c.node.output_size() > 1) outs.push_back(logp);
  return outs;
}

}  // namespace

void register_loss_conversions() {
  register_conversion("NegativeLogLikelihoodLoss", nll_loss);
  register_conversion("SoftmaxCrossEntropyLoss", softmax_cross_entropy);
}

}  // namespace ingot::onnx_import
