// The training API's contracts beyond the numerics of test_train.cpp: add_loss's reduction,
// run-time hyperparameters of a compiled step, which parameters get optimizer slots, and the
// errors a user can cause with batches, metrics and evaluate_loss.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>

#include "autodiff_test_util.h"
#include "ingot/cpu_backend.h"
#include "ingot/ingot.h"
#include "train_test_util.h"

namespace ingot::testing {
namespace {

// ---------------------------------------------------------------- add_loss's reduction

// y = Linear(2)(input) [3, 2] against a target t [3, 2], in float64 on the reference backend.
struct LinearFit {
  Model model;
  CompileOptions options;
  TensorMap inputs;
  LinearFit() {
    model += Linear(2)({{"input", IOKey("input").shape({3, 2})}, {"output", IOKey("y").expose()}});
    options.shapes = {{"t", {3, 2}}};
    options.types = {{"input", DType::Float64}, {"linear_0.weight", DType::Float64},
                     {"linear_0.bias", DType::Float64}, {"t", DType::Float64}};
    inputs = {{"input", rnd({3, 2}, 1)}, {"t", rnd({3, 2}, 2)}};
  }
  // Evaluates final_cost of the model with one loss; also returns sum((y - t)^2) by hand.
  std::pair<double, double> cost_and_sum_of_squares(const Model& loss, const std::string& reduction) const {
    TrainModel tm(model);
    tm.add_loss(loss, {{"input", "y"}, {"target", "t"}}, reduction, 1.0, "mse");
    const PhysicalModel pm = compile(tm, ReferenceBackend(), options);
    const TensorMap out = pm.evaluate(pm.randomize_params(0), inputs);
    const Tensor &y = out.at("y"), &t = inputs.at("t");
    double squares = 0;
    for (int64_t i = 0; i < y.numel(); ++i) squares += (y.item(i) - t.item(i)) * (y.item(i) - t.item(i));
    EXPECT_DOUBLE_EQ(out.at("mse").item(), out.at(kFinalCost).item());
    return {out.at(kFinalCost).item(), squares};
  }
};

// final_cost = scale * sum((y - t)^2): reduced by add_loss, or by the block when they agree.
TEST(TrainAddLoss, ReducesAsAsked) {
  const LinearFit fit;
  struct Case {
    std::string block_reduction, reduction;
    double scale;
  };
  for (const Case& c : {Case{"none", "mean", 1.0 / 6}, Case{"none", "sum", 1.0}, Case{"mean", "mean", 1.0 / 6},
                        Case{"sum", "sum", 1.0}}) {
    auto [cost, squares] = fit.cost_and_sum_of_squares(MSELoss(c.block_reduction), c.reduction);
    EXPECT_NEAR(cost, c.scale * squares, 1e-12) << "MSELoss(" << c.block_reduction << "), " << c.reduction;
  }
}

TEST(TrainAddLoss, ABlockThatReducesItselfOtherwiseIsAnError) {
  const LinearFit fit;
  // Before, add_loss ignored its reduction here and returned the block's mean as the sum.
  EXPECT_TRUE(Contains(error_of([&] { fit.cost_and_sum_of_squares(MSELoss("mean"), "sum"); }),
                       "add_loss 'mse': MSELoss already reduces its output by 'mean' but the reduction asked is "
                       "'sum'; build the loss with reduction \"none\""));
  EXPECT_TRUE(Contains(error_of([&] { fit.cost_and_sum_of_squares(MSELoss("sum"), "mean"); }),
                       "already reduces its output by 'sum' but the reduction asked is 'mean'"));
  // The total cost is a scalar: add_loss has no "none".
  EXPECT_TRUE(Contains(error_of([&] { fit.cost_and_sum_of_squares(MSELoss("none"), "none"); }),
                       "unknown reduction 'none' (expected mean or sum"));
}

}  // namespace
}  // namespace ingot::testing

namespace ingot::testing {
namespace {

// ---------------------------------------------------------------- run-time hyperparameters

TensorMap cloned(const TensorMap& m) {
  TensorMap c;
  for (const auto& [k, v] : m) c.emplace(k, v.clone());
  return c;
}

// Two steps: the first with `first` as compiled, then `change` applied to `a`, whose second
// step must equal, bit for bit, that of `b` (compiled with the changed value from the start,
// its first step run with the first value the same way), and recompile nothing.
void expect_change_matches_compiled(const Optimizer& first, const Optimizer& second, const std::string& name,
                                    double first_value, double second_value) {
  TrainStep a = compile_train_step(classifier_train_model(0), CpuBackend(), first, classifier_options(DType::Float32));
  TrainStep b = compile_train_step(classifier_train_model(0), CpuBackend(), second, classifier_options(DType::Float32));
  TensorMap pa = a.randomize_params(1), pb = cloned(pa);
  OptimizerState sa = a.init_state(pa), sb = b.init_state(pb);
  b.set_hyperparameter(name, first_value);
  const int compiles = CpuBackend::compile_count();
  a.run(pa, sa, batch_of(6, 1, DType::Float32));
  b.run(pb, sb, batch_of(6, 1, DType::Float32));
  a.set_hyperparameter(name, second_value);
  b.set_hyperparameter(name, second_value);
  const TensorMap before = cloned(pa);
  a.run(pa, sa, batch_of(6, 2, DType::Float32));
  b.run(pb, sb, batch_of(6, 2, DType::Float32));
  EXPECT_EQ(CpuBackend::compile_count(), compiles) << name;
  for (const auto& [param, v] : pa) {
    EXPECT_EQ(max_abs_diff(v, pb.at(param)), 0.0) << name << " " << param;
    EXPECT_GT(max_abs_diff(v, before.at(param)), 0.0) << name << " " << param;
  }
  for (const auto& [slot, v] : sa.slots) EXPECT_EQ(max_abs_diff(v, sb.slots.at(slot)), 0.0) << name << " " << slot;
}

TEST(TrainHyperparameters, ChangingThemBetweenStepsEqualsCompilingWithThem) {
  expect_change_matches_compiled(SGD({.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3}),
                                 SGD({.lr = 0.02, .momentum = 0.9, .weight_decay = 1e-3}), "lr", 0.1, 0.02);
  expect_change_matches_compiled(SGD({.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3}),
                                 SGD({.lr = 0.1, .momentum = 0.5, .weight_decay = 1e-3}), "momentum", 0.9, 0.5);
  expect_change_matches_compiled(SGD({.lr = 0.1, .weight_decay = 1e-3}), SGD({.lr = 0.1, .weight_decay = 0.2}),
                                 "weight_decay", 1e-3, 0.2);
  expect_change_matches_compiled(AdamW({.lr = 0.01, .weight_decay = 0.01}), AdamW({.lr = 0.01, .weight_decay = 0.3}),
                                 "weight_decay", 0.01, 0.3);
  expect_change_matches_compiled(Adam({.lr = 0.01, .weight_decay = 0.01}), Adam({.lr = 0.002, .weight_decay = 0.01}),
                                 "lr", 0.01, 0.002);
}

// Plain SGD: the update is lr * gradient, so the same step at half the rate moves each parameter
// half as far.
TEST(TrainHyperparameters, SetLrScalesThePlainSgdUpdate) {
  TrainStep step = compile_train_step(classifier_train_model(0), ReferenceBackend(), SGD({.lr = 0.1}), classifier_options(DType::Float32));
  const TensorMap p0 = step.randomize_params(2);
  TensorMap fast = cloned(p0), slow = cloned(p0);
  OptimizerState s1 = step.init_state(fast), s2 = step.init_state(slow);
  step.run(fast, s1, batch_of(6, 3, DType::Float32));
  step.set_lr(0.05);
  step.run(slow, s2, batch_of(6, 3, DType::Float32));
  for (const auto& [name, p] : p0)
    for (int64_t i = 0; i < p.numel(); ++i)
      EXPECT_NEAR(slow.at(name).item(i) - p.item(i), 0.5 * (fast.at(name).item(i) - p.item(i)), 1e-6) << name;
}

TEST(TrainHyperparameters, ErrorsNameTheHyperparameter) {
  TrainStep step = compile_train_step(classifier_train_model(0), ReferenceBackend(), SGD({.lr = 0.1}), classifier_options(DType::Float32));
  EXPECT_TRUE(Contains(error_of([&] { step.set_hyperparameter("momentum", 0.9); }),
                       "SGD: 'momentum' cannot change at run time (run-time hyperparameters of this SGD: lr; "
                       "weight_decay and momentum are among them only when the optimizer is built with a non-zero"));
  EXPECT_TRUE(Contains(error_of([&] { step.set_lr(-1); }), "SGD: lr must be positive, got -1"));
  EXPECT_TRUE(Contains(error_of([&] { step.set_hyperparameter("lrr", 0.1); }), "'lrr' cannot change at run time"));
  SGD nesterov({.lr = 0.1, .momentum = 0.9, .nesterov = true});
  EXPECT_TRUE(Contains(error_of([&] { nesterov.set_hyperparameter("momentum", 0); }), "nesterov needs momentum > 0"));
  AdamW adamw;
  EXPECT_EQ(adamw.hyperparameters(), (std::vector<std::string>{"lr", "weight_decay"}));
  EXPECT_TRUE(Contains(error_of([&] { adamw.set_hyperparameter("beta1", 0.5); }),
                       "AdamW: 'beta1' cannot change at run time (run-time hyperparameters of this AdamW: lr, weight_decay"));
  // A copy of the step keeps its own values.
  TrainStep copy = step;
  copy.set_lr(0.5);
  EXPECT_DOUBLE_EQ(dynamic_cast<const SGD&>(step.optimizer()).options().lr, 0.1);
  EXPECT_DOUBLE_EQ(dynamic_cast<const SGD&>(copy.optimizer()).options().lr, 0.5);
}

}  // namespace
}  // namespace ingot::testing

namespace ingot::testing {
namespace {

// ---------------------------------------------------------------- optimizer slots

// BatchNorm2d's running statistics are parameters the optimizer does not train: no slots for
// them, and the forward pass still moves them.
TEST(TrainOptimizerSlots, OnlyTrainedParametersGetSlots) {
  const TrainModel tm = batch_norm_train_model(batch_norm_body(0.5));
  const CompileOptions o = batch_norm_options();
  for (const auto& [name, opt] : std::vector<std::pair<std::string, std::shared_ptr<Optimizer>>>{
           {"sgd", std::make_shared<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9})},
           {"adam", std::make_shared<Adam>()}}) {
    const TrainStep step = compile_train_step(tm, ReferenceBackend(), *opt, o);
    TensorMap params = step.randomize_params(0);
    OptimizerState state = step.init_state(params);
    std::set<std::string> slots;
    for (const auto& [slot, t] : state.slots) slots.insert(slot);
    std::set<std::string> expected;
    for (const char* p : {"batch_norm2d_0.weight", "batch_norm2d_0.bias"})
      for (const std::string& s : opt->slot_names()) expected.insert(s + ":" + p);
    EXPECT_EQ(slots, expected) << name;
    const Tensor mean0 = params.at("batch_norm2d_0.running_mean").clone();
    const Tensor var0 = params.at("batch_norm2d_0.running_var").clone();
    step.run(params, state, {{"input", random_tensor({2, 2, 2, 2}, 3, -2, 2)}, {"target", random_tensor({2, 2}, 4)}});
    EXPECT_GT(max_abs_diff(params.at("batch_norm2d_0.running_mean"), mean0), 0.0) << name;
    EXPECT_GT(max_abs_diff(params.at("batch_norm2d_0.running_var"), var0), 0.0) << name;
    params.erase("batch_norm2d_0.bias");
    EXPECT_TRUE(Contains(error_of([&] { step.init_state(params); }),
                         "TrainStep::init_state: missing parameter 'batch_norm2d_0.bias'"));
  }
}

// ---------------------------------------------------------------- errors

TEST(TrainApiErrors, UnknownBatchKeyIsNamedWithTheInputs) {
  const TrainStep step = compile_train_step(classifier_train_model(0), ReferenceBackend(), SGD(), classifier_options(DType::Float32));
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  TensorMap batch = batch_of(6, 0, DType::Float32);
  batch.emplace("targets", batch.at("target"));
  EXPECT_TRUE(Contains(error_of([&] { step.run(params, state, batch); }),
                       "TrainStep::run: the batch has 'targets', which is no input of the model (inputs: input, target)"));
}

TEST(TrainApiErrors, AddMetricErrorsNameTheMetric) {
  TrainModel tm = classifier_train_model(0);
  EXPECT_TRUE(Contains(error_of([&] { tm.add_metric(ClassAccuracy(), {{"inptu", "output"}}, "acc"); }),
                       "Metric ClassAccuracy has no terminal 'inptu' (terminals: input, target)"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_metric(ClassAccuracy(), {{"input", "logits"}, {"target", "target"}}, "acc"); }),
                       "Metric ClassAccuracy: its input is connected to 'logits', which is not an output of the model "
                       "(outputs: output)"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_metric(ClassAccuracy(), {{"target", "target"}}, "acc"); }),
                       "Metric ClassAccuracy: connect its 'input' to an output of the model"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_metric(ClassAccuracy(), {{"input", "output"}}, ""); }),
                       "add_metric: give the metric a name"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_metric(ClassAccuracy(), {{"input", "output"}}, "accuracy"); }),
                       "add_metric: a metric named 'accuracy' exists already"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_metric(ClassAccuracy(), {{"input", "output"}}, "ce"); }),
                       "add_metric: 'ce' names a loss"));
  // A target wired to the model's float input, where ClassAccuracy wants int64 classes [N].
  tm.add_metric(ClassAccuracy(), {{"input", "output"}, {"target", "input"}}, "bad_target");
  const std::string e = error_of([&] { compile(tm, ReferenceBackend(), classifier_options(DType::Float32)); });
  EXPECT_TRUE(Contains(e, "Cannot infer shape for 'input'")) << e;
}

TEST(TrainApiErrors, EvaluateLossNeedsAFinalCost) {
  Model m;
  m += Linear(3);
  CompileOptions o;
  o.shapes = {{"input", {2, 4}}};
  const PhysicalModel pm = compile(m, ReferenceBackend(), o);
  EXPECT_TRUE(Contains(error_of([&] { evaluate_loss(pm, pm.randomize_params(0), {{"input", random_tensor({2, 4}, 1)}}); }),
                       "evaluate_loss: the model has no 'final_cost' output; compile a TrainModel"));
}

}  // namespace
}  // namespace ingot::testing
