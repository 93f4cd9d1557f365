// SGD, Adam and AdamW in two forms that follow the same formulas: update_one (eager, float64
// loops over host tensors) and build_update (graph ops appended to the compiled training step).
#include <cmath>

#include "ingot/error.h"
#include "ingot/train.h"
#include "runtime/write_back.h"
#include "train/names.h"

namespace ingot {

namespace {
void check_hyper(bool ok, const std::string& optimizer, const std::string& name, double value, const char* expected) {
  INGOT_CHECK(ok, optimizer, ": ", name, " must be ", expected, ", got ", value);
}

void check_sgd(const SGDOptions& o) {
  check_hyper(std::isfinite(o.lr) && o.lr > 0, "SGD", "lr", o.lr, "positive");
  check_hyper(std::isfinite(o.momentum) && o.momentum >= 0, "SGD", "momentum", o.momentum, "non-negative");
  check_hyper(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "SGD", "weight_decay", o.weight_decay,
              "non-negative");
  INGOT_CHECK(!o.nesterov || o.momentum > 0, "SGD: nesterov needs momentum > 0");
}

void check_adam(const AdamOptions& o, const std::string& n) {
  check_hyper(std::isfinite(o.lr) && o.lr > 0, n, "lr", o.lr, "positive");
  check_hyper(o.beta1 >= 0 && o.beta1 < 1, n, "beta1", o.beta1, "in [0, 1)");
  check_hyper(o.beta2 >= 0 && o.beta2 < 1, n, "beta2", o.beta2, "in [0, 1)");
  check_hyper(std::isfinite(o.eps) && o.eps > 0, n, "eps", o.eps, "positive");
  check_hyper(std::isfinite(o.weight_decay) && o.weight_decay >= 0, n, "weight_decay", o.weight_decay, "non-negative");
}
}  // namespace

void Optimizer::set_hyperparameter(const std::string& hyperparameter, double value) {
  const std::vector<std::string> names = hyperparameters();
  INGOT_CHECK(train::contains(names, hyperparameter), name(), ": '", hyperparameter,
              "' cannot change at run time (run-time hyperparameters of this ", name(), ": ", train::joined(names),
              "; weight_decay and momentum are among them only when the optimizer is built with a non-zero "
              "value, as its update has no term for them otherwise)");
  apply_hyperparameter(hyperparameter, value);
}

OptimizerState Optimizer::init(const TensorMap& params) const {
  OptimizerState state;
  for (const auto& [name, p] : params)
    for (const std::string& slot : slot_names())
      state.slots.emplace(slot + ":" + name, Tensor::full(p.dtype(), p.shape(), 0.0));
  return state;
}

void Optimizer::update(TensorMap& params, const TensorMap& grads, OptimizerState& state) const {
  const int64_t step = state.step + 1;
  for (const auto& [param_name, g] : grads) {
    const std::string& name = param_name;
    auto it = params.find(name);
    INGOT_CHECK(it != params.end(), this->name(), ": a gradient for '", name, "', which is not a parameter");
    Tensor& p = it->second;
    INGOT_CHECK(g.shape() == p.shape(), this->name(), ": the gradient of '", name, "' has shape ",
                to_string(g.shape()), " but the parameter has ", to_string(p.shape()));
    Tensor p64 = p.astype(DType::Float64).clone(), g64 = g.astype(DType::Float64);
    std::vector<Tensor> slots64;
    std::vector<double*> slot_ptrs;
    for (const std::string& slot : slot_names()) {
      auto s = state.slots.find(slot + ":" + name);
      INGOT_CHECK(s != state.slots.end(), this->name(), ": the state has no slot '", slot, ":", name,
                  "'; create it with init(params)");
      slots64.push_back(s->second.astype(DType::Float64).clone());
    }
    for (Tensor& t : slots64) slot_ptrs.push_back(t.data<double>());
    update_one(p64.data<double>(), g64.data<double>(), slot_ptrs, p64.numel(), step);
    write_back(p, p64.astype(p.dtype()));
    for (size_t k = 0; k < slots64.size(); ++k) {
      Tensor& s = state.slots.at(slot_names()[k] + ":" + name);
      write_back(s, slots64[k].astype(s.dtype()));
    }
  }
  state.step = step;
}

// ---------------------------------------------------------------- SGD

SGD::SGD(SGDOptions o) : o_(o), has_momentum_(o.momentum > 0), has_weight_decay_(o.weight_decay > 0) { check_sgd(o); }

std::vector<std::string> SGD::slot_names() const {
  if (has_momentum_) return {"momentum"};
  return {};
}

std::vector<std::string> SGD::hyperparameters() const {
  std::vector<std::string> names = {"lr"};
  if (has_weight_decay_) names.push_back("weight_decay");
  if (has_momentum_) names.push_back("momentum");
  return names;
}

void SGD::apply_hyperparameter(const std::string& name, double value) {
  SGDOptions o = o_;
  (name == "lr" ? o.lr : name == "weight_decay" ? o.weight_decay : o.momentum) = value;
  check_sgd(o);
  o_ = o;
}

void SGD::update_one(double* p, const double* g, std::vector<double*>& slots, int64_t n, int64_t) const {
  for (int64_t i = 0; i < n; ++i) {
    double d = g[i] + o_.weight_decay * p[i];
    if (has_momentum_) {
      double& buf = slots[0][i];
      buf = o_.momentum * buf + d;
      d = o_.nesterov ? d + o_.momentum * buf : buf;
    }
    p[i] -= o_.lr * d;
  }
}

// Every run-time hyperparameter, in hyperparameters() order.
std::vector<std::pair<std::string, double>> SGD::scalars(int64_t) const {
  std::vector<std::pair<std::string, double>> s = {{"lr", o_.lr}};
  if (has_weight_decay_) s.emplace_back("weight_decay", o_.weight_decay);
  if (has_momentum_) s.emplace_back("momentum", o_.momentum);
  return s;
}

Optimizer::GraphUpdate SGD::build_update(const OpFn& op, const ConstFn&, ValueId p, ValueId g,
                                         const std::vector<ValueId>& slots, const std::vector<ValueId>& scalars) const {
  size_t next = 0;
  const ValueId lr = scalars[next++];
  ValueId d = g;
  if (has_weight_decay_) d = op("add", {d, op("mul", {p, scalars[next++]}, {})}, {});
  GraphUpdate out;
  if (has_momentum_) {
    const ValueId momentum = scalars[next++];
    const ValueId buf = op("add", {op("mul", {slots[0], momentum}, {}), d}, {});
    out.slots.push_back(buf);
    d = o_.nesterov ? op("add", {d, op("mul", {buf, momentum}, {})}, {}) : buf;
  }
  out.param = op("sub", {p, op("mul", {d, lr}, {})}, {});
  return out;
}

// ---------------------------------------------------------------- Adam / AdamW

Adam::Adam(AdamOptions o, bool decoupled) : o_(o), decoupled_(decoupled), has_weight_decay_(o.weight_decay > 0) {
  check_adam(o, name());
}

// The betas stay fixed: the bias corrections 1 - beta^t assume one beta for every step.
std::vector<std::string> Adam::hyperparameters() const {
  if (has_weight_decay_) return {"lr", "weight_decay"};
  return {"lr"};
}

void Adam::apply_hyperparameter(const std::string& name, double value) {
  AdamOptions o = o_;
  (name == "lr" ? o.lr : o.weight_decay) = value;
  check_adam(o, this->name());
  o_ = o;
}

void Adam::update_one(double* p, const double* g, std::vector<double*>& slots, int64_t n, int64_t step) const {
  const double c1 = 1.0 / (1.0 - std::pow(o_.beta1, static_cast<double>(step)));
  const double c2 = 1.0 / std::sqrt(1.0 - std::pow(o_.beta2, static_cast<double>(step)));
  for (int64_t i = 0; i < n; ++i) {
    double d = g[i];
    if (decoupled_) p[i] *= 1.0 - o_.lr * o_.weight_decay;
    else d += o_.weight_decay * p[i];
    double& m = slots[0][i];
    double& v = slots[1][i];
    m = o_.beta1 * m + (1 - o_.beta1) * d;
    v = o_.beta2 * v + (1 - o_.beta2) * d * d;
    p[i] -= o_.lr * c1 * m / (std::sqrt(v) * c2 + o_.eps);
  }
}

// lr * bias correction 1, and bias correction 2, for update number `step`; with weight decay,
// AdamW's decay factor 1 - lr wd or Adam's L2 coefficient.
std::vector<std::pair<std::string, double>> Adam::scalars(int64_t step) const {
  const double t = static_cast<double>(step);
  std::vector<std::pair<std::string, double>> s = {{"lr_corrected", o_.lr / (1.0 - std::pow(o_.beta1, t))},
                                                   {"inv_sqrt_correction2", 1.0 / std::sqrt(1.0 - std::pow(o_.beta2, t))}};
  if (has_weight_decay_)
    s.emplace_back(decoupled_ ? "decay_factor" : "weight_decay",
                   decoupled_ ? 1.0 - o_.lr * o_.weight_decay : o_.weight_decay);
  return s;
}

Optimizer::GraphUpdate Adam::build_update(const OpFn& op, const ConstFn& constant, ValueId p, ValueId g,
                                          const std::vector<ValueId>& slots, const std::vector<ValueId>& scalars) const {
  ValueId d = g;
  if (has_weight_decay_) {
    if (decoupled_) p = op("mul", {p, scalars[2]}, {});
    else d = op("add", {d, op("mul", {p, scalars[2]}, {})}, {});
  }
  const ValueId m = op("add", {op("mul", {slots[0], constant(o_.beta1)}, {}), op("mul", {d, constant(1 - o_.beta1)}, {})}, {});
  const ValueId v = op("add", {op("mul", {slots[1], constant(o_.beta2)}, {}),
                               op("mul", {op("mul", {d, d}, {}), constant(1 - o_.beta2)}, {})},
                       {});
  const ValueId denom = op("add", {op("mul", {op("sqrt", {v}, {}), scalars[1]}, {}), constant(o_.eps)}, {});
  const ValueId p_new = op("sub", {p, op("div", {op("mul", {m, scalars[0]}, {}), denom}, {})}, {});
  return {p_new, {m, v}};
}

}  // namespace ingot
