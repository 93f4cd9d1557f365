// Training: loss values against hand computations, loss gradients against finite differences,
// optimizers against their formulas, TrainModel (losses + regularization + metrics), the compiled
// training step against the eager one (reference and CPU), a training run that must learn, and
// every error a user can cause.
#include <gtest/gtest.h>

#include <cmath>

#include "autodiff_test_util.h"
#include "ingot/cpu_backend.h"
#include "ingot/ingot.h"
#include "train_test_util.h"

namespace ingot::testing {
namespace {

Tensor f64(std::vector<double> v, Shape s) { return Tensor::from_vector<double>(v, std::move(s)); }
Tensor i64(std::vector<int64_t> v, Shape s) { return Tensor::from_vector<int64_t>(v, std::move(s)); }

// A loss block alone, compiled in float64 with static shapes.
PhysicalModel compile_loss(const Model& loss, const Shape& in, const Shape& target, DType target_type = DType::Float64) {
  Model m;
  m |= loss({{"input", "x"}, {"target", "t"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"x", template_of(in)}, {"t", template_of(target)}};
  o.types = {{"x", DType::Float64}, {"t", target_type}};
  o.trainable_keys = {"x"};
  return compile(m, ReferenceBackend(), o);
}

double loss_of(const Model& loss, const Tensor& x, const Tensor& t) {
  return compile_loss(loss, x.shape(), t.shape(), t.dtype()).evaluate({{"x", x}}, {{"t", t}}).at("loss").item();
}

const Tensor kLogits = f64({1.0, -2.0, 0.5, 0.3, 0.2, -0.1}, {2, 3});

double log_softmax_at(const Tensor& x, int64_t row, int64_t col) {
  const int64_t c = x.shape()[1];
  double mx = -1e300, s = 0;
  for (int64_t j = 0; j < c; ++j) mx = std::max(mx, x.item(row * c + j));
  for (int64_t j = 0; j < c; ++j) s += std::exp(x.item(row * c + j) - mx);
  return x.item(row * c + col) - mx - std::log(s);
}

TEST(TrainLosses, ValuesMatchHandComputations) {
  const Tensor p = f64({0.9, 0.2, 0.6, 1.0}, {4}), t = f64({1, 0, 0, 1}, {4});
  double bce = 0, mse = 0;
  for (int i = 0; i < 4; ++i) {
    const double pi = p.item(i), ti = t.item(i);
    bce -= ti * std::max(std::log(pi), -100.0) + (1 - ti) * std::max(std::log(1 - pi), -100.0);
    mse += (pi - ti) * (pi - ti);
  }
  EXPECT_NEAR(loss_of(BCELoss("mean"), p, t), bce / 4, 1e-12);
  EXPECT_NEAR(loss_of(BCELoss("sum"), p, t), bce, 1e-12);
  EXPECT_NEAR(loss_of(MSELoss("sum"), p, t), mse, 1e-12);

  const Tensor x = f64({-3.0, 0.5, 40.0, -800.0}, {4});  // large logits must not overflow
  double bcel = 0;
  for (int i = 0; i < 4; ++i) {
    const double xi = x.item(i), ti = t.item(i);
    bcel += std::max(xi, 0.0) - xi * ti + std::log1p(std::exp(-std::abs(xi)));
  }
  EXPECT_NEAR(loss_of(BCEWithLogitsLoss("sum"), x, t), bcel, 1e-12);
  const Tensor none = compile_loss(BCEWithLogitsLoss("none"), {4}, {4}).evaluate({{"x", x}}, {{"t", t}}).at("loss");
  EXPECT_EQ(to_string(none.shape()), "[4]");
  EXPECT_NEAR(none.item(3), 800.0, 1e-9);

  const double ce = -(log_softmax_at(kLogits, 0, 2) + log_softmax_at(kLogits, 1, 0)) / 2;
  EXPECT_NEAR(loss_of(CrossEntropyLoss("mean"), kLogits, i64({2, 0}, {2})), ce, 1e-12);
  const Tensor probs = f64({0.0, 0.25, 0.75, 1.0, 0.0, 0.0}, {2, 3});
  double ce_soft = 0;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c) ce_soft -= probs.item(r * 3 + c) * log_softmax_at(kLogits, r, c);
  EXPECT_NEAR(loss_of(CrossEntropyLoss("sum", true), kLogits, probs), ce_soft, 1e-12);
}

TEST(TrainLosses, GradientsMatchFiniteDifferences) {
  const Tensor p = f64({0.9, 0.2, 0.6, 0.35}, {4}), t = f64({1, 0, 0, 1}, {4});
  const Tensor seed = Tensor::scalar(1.0);
  for (const Model& loss : {BCELoss("mean"), BCEWithLogitsLoss("sum"), MSELoss("mean")}) {
    SCOPED_TRACE(loss.type_name());
    check_model_gradients(compile_loss(loss, {4}, {4}), {{"x", p}}, {{"t", t}}, {{"loss", seed}});
  }
  check_model_gradients(compile_loss(CrossEntropyLoss(), {2, 3}, {2}, DType::Int64), {{"x", kLogits}},
                        {{"t", i64({2, 0}, {2})}}, {{"loss", seed}});
  check_model_gradients(compile_loss(CrossEntropyLoss("mean", true), {2, 3}, {2, 3}), {{"x", kLogits}},
                        {{"t", f64({0.0, 0.25, 0.75, 1.0, 0.0, 0.0}, {2, 3})}}, {{"loss", seed}});
}

// ---------------------------------------------------------------- optimizers

// Three updates of one parameter [2] with fixed gradients, against the formulas by hand.
TEST(TrainOptimizers, UpdatesFollowTheirFormulas) {
  const std::vector<std::vector<double>> grads = {{0.5, -1.0}, {0.25, 2.0}, {-0.75, 0.1}};
  auto run = [&](const Optimizer& opt) {
    TensorMap params = {{"w", f64({1.0, -2.0}, {2})}};
    OptimizerState state = opt.init(params);
    for (const auto& g : grads) opt.update(params, {{"w", f64(g, {2})}}, state);
    EXPECT_EQ(state.step, 3);
    return params.at("w");
  };
  for (bool nesterov : {false, true}) {
    const double lr = 0.1, mu = 0.9, wd = 0.01;
    std::vector<double> w = {1.0, -2.0}, buf = {0, 0};
    for (const auto& g : grads)
      for (int i = 0; i < 2; ++i) {
        const double d = g[i] + wd * w[i];
        buf[i] = mu * buf[i] + d;
        w[i] -= lr * (nesterov ? d + mu * buf[i] : buf[i]);
      }
    const Tensor got = run(SGD({.lr = lr, .momentum = mu, .weight_decay = wd, .nesterov = nesterov}));
    EXPECT_NEAR(got.item(0), w[0], 1e-14);
    EXPECT_NEAR(got.item(1), w[1], 1e-14);
  }
  for (bool decoupled : {false, true}) {
    const double lr = 0.01, b1 = 0.8, b2 = 0.9, eps = 1e-6, wd = 0.1;
    std::vector<double> w = {1.0, -2.0}, m = {0, 0}, v = {0, 0};
    int t = 0;
    for (const auto& g : grads) {
      ++t;
      for (int i = 0; i < 2; ++i) {
        double d = g[i];
        if (decoupled) w[i] -= lr * wd * w[i];
        else d += wd * w[i];
        m[i] = b1 * m[i] + (1 - b1) * d;
        v[i] = b2 * v[i] + (1 - b2) * d * d;
        const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
        w[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
    }
    const AdamOptions o{.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd};
    const Tensor got = decoupled ? run(AdamW(o)) : run(Adam(o));
    EXPECT_NEAR(got.item(0), w[0], 1e-12) << (decoupled ? "AdamW" : "Adam");
    EXPECT_NEAR(got.item(1), w[1], 1e-12) << (decoupled ? "AdamW" : "Adam");
  }
}

TEST(TrainOptimizers, EagerUpdateWritesIntoTheCallersBuffers) {
  TensorMap params = {{"w", f64({1.0, 2.0}, {2})}};
  const Tensor alias = params.at("w");
  SGD sgd({.lr = 0.5});
  OptimizerState state = sgd.init(params);
  sgd.update(params, {{"w", f64({1.0, 1.0}, {2})}}, state);
  EXPECT_DOUBLE_EQ(alias.item(0), 0.5);
  EXPECT_DOUBLE_EQ(alias.item(1), 1.5);
}

TEST(TrainOptimizers, BadHyperparametersAreErrors) {
  EXPECT_TRUE(Contains(error_of([] { SGD({.lr = -1}); }), "SGD: lr must be positive, got -1"));
  EXPECT_TRUE(Contains(error_of([] { SGD({.lr = 0.1, .momentum = -0.5}); }), "momentum must be non-negative"));
  EXPECT_TRUE(Contains(error_of([] { SGD({.lr = 0.1, .nesterov = true}); }), "nesterov needs momentum > 0"));
  EXPECT_TRUE(Contains(error_of([] { Adam({.lr = 0.1, .beta1 = 1.0}); }), "Adam: beta1 must be in [0, 1), got 1"));
  EXPECT_TRUE(Contains(error_of([] { AdamW({.lr = 0.1, .eps = 0}); }), "AdamW: eps must be positive"));
  EXPECT_TRUE(Contains(error_of([] { AdamW({.lr = 0.1, .weight_decay = -1}); }), "weight_decay must be non-negative"));
  SGD sgd({.lr = 0.1, .momentum = 0.9});
  TensorMap params = {{"w", f64({1.0}, {1})}};
  OptimizerState empty;
  EXPECT_TRUE(Contains(error_of([&] { sgd.update(params, {{"w", f64({1.0}, {1})}}, empty); }),
                       "no slot 'momentum:w'"));
  OptimizerState state = sgd.init(params);
  EXPECT_TRUE(Contains(error_of([&] { sgd.update(params, {{"v", f64({1.0}, {1})}}, state); }),
                       "a gradient for 'v', which is not a parameter"));
}

// ---------------------------------------------------------------- TrainModel

TEST(TrainModelTest, FinalCostIsLossPlusRegularizationAndGradientsMatchFiniteDifferences) {
  const PhysicalModel pm = compile(classifier_train_model(0.05), ReferenceBackend(), classifier_options(DType::Float64));
  const TensorMap params = pm.randomize_params(3);
  const TensorMap batch = batch_of(6, 1, DType::Float64);
  const Evaluation r = evaluate_loss(pm, params, batch);
  double l2 = 0;
  for (const char* w : {"linear_0.weight", "linear_1.weight"})
    for (int64_t i = 0; i < params.at(w).numel(); ++i) l2 += 0.5 * params.at(w).item(i) * params.at(w).item(i);
  EXPECT_NEAR(r.outputs.at(kFinalCost).item(), r.outputs.at("ce").item() + 0.05 * l2, 1e-12);
  EXPECT_EQ(to_string(r.outputs.at("ce").shape()), "[]");
  const double acc = r.outputs.at("accuracy").item();
  EXPECT_GE(acc, 0.0);
  EXPECT_LE(acc, 1.0);
  EXPECT_EQ(r.gradients.size(), 4u);
  check_model_gradients(pm, params, batch, {{kFinalCost, Tensor::scalar(1.0)}});
}

TEST(TrainModelTest, SeveralLossesAddUpWithTheirCoefficients) {
  Model m;
  m += Linear(2)({{"input", IOKey("input").shape({3, 2})}, {"output", IOKey("y").expose()}});
  TrainModel tm(m);
  tm.add_loss(MSELoss("none"), {{"input", "y"}, {"target", "t"}}, "sum", 2.0, "mse");
  tm.add_loss(MSELoss(), {{"input", "y"}, {"target", "u"}}, "mean", 0.5, "mse_u");
  CompileOptions o;
  o.shapes = {{"t", {3, 2}}, {"u", {3, 2}}};
  o.types = {{"input", DType::Float64}, {"linear_0.weight", DType::Float64}, {"linear_0.bias", DType::Float64},
             {"t", DType::Float64}, {"u", DType::Float64}};
  const PhysicalModel pm = compile(tm, ReferenceBackend(), o);
  const TensorMap params = pm.randomize_params(0);
  const TensorMap in = {{"input", rnd({3, 2}, 1)}, {"t", rnd({3, 2}, 2)}, {"u", rnd({3, 2}, 3)}};
  const Evaluation r = evaluate_loss(pm, params, in);
  EXPECT_NEAR(r.outputs.at(kFinalCost).item(), 2.0 * r.outputs.at("mse").item() + 0.5 * r.outputs.at("mse_u").item(),
              1e-12);
  check_model_gradients(pm, params, in, {{kFinalCost, Tensor::scalar(1.0)}});
}

TEST(TrainModelTest, ErrorsNameWhatIsWrong) {
  TrainModel tm(ExampleMLP());
  EXPECT_TRUE(Contains(error_of([&] { tm.add_loss(CrossEntropyLoss(), {{"input", "logits"}, {"target", "y"}}); }),
                       "its input is connected to 'logits', which is not an output of the model (outputs: output)"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_loss(CrossEntropyLoss(), {{"inptu", "output"}}); }),
                       "CrossEntropyLoss has no terminal 'inptu'"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_loss(MSELoss(), {{"target", "y"}}); }), "connect its 'input'"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_loss(MSELoss(), {{"input", "output"}}, "max"); }), "unknown reduction 'max'"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_regularization("l3", 0.1, "*"); }), "unknown kind 'l3'"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_regularization("l2", -1, "*"); }), "must be a non-negative number"));
  EXPECT_TRUE(Contains(error_of([&] { tm.add_regularization("l2", 0.1, ""); }), "the parameter pattern is empty"));
  EXPECT_TRUE(Contains(error_of([&] { compile(tm, ReferenceBackend()); }), "TrainModel has no loss"));
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  EXPECT_TRUE(Contains(error_of([&] { tm.add_loss(MSELoss(), {{"input", "output"}}, "mean", 1, "loss_0"); }),
                       "a loss named 'loss_0' exists already"));
  tm.add_regularization("l1", 0.1, "linear_9.weight");
  EXPECT_TRUE(Contains(error_of([&] { compile(tm, ReferenceBackend()); }),
                       "'linear_9.weight' matches no parameter (parameters: linear_0.weight, linear_0.bias"));
}

// ---------------------------------------------------------------- compiled training step

// N compiled steps against N eager steps (evaluate_loss gradients + Optimizer::update).
void expect_step_matches_eager(const Backend& backend, const Optimizer& opt, DType t, double tol) {
  const TrainModel tm = classifier_train_model();
  const CompileOptions o = classifier_options(t);
  const TrainStep step = compile_train_step(tm, backend, opt, o);
  const PhysicalModel eager = compile(tm, ReferenceBackend(), o);
  TensorMap p1 = step.randomize_params(5), p2 = eager.randomize_params(5);
  for (auto& [k, v] : p1) v = v.clone();
  OptimizerState s1 = step.init_state(p1), s2 = opt.init(p2);
  for (int i = 0; i < 4; ++i) {
    const TensorMap batch = batch_of(6, static_cast<uint64_t>(i), t);
    const StepResult r = step.run(p1, s1, batch);
    const Evaluation e = evaluate_loss(eager, p2, batch);
    EXPECT_NEAR(r.loss, e.outputs.at(kFinalCost).item(), tol) << "step " << i;
    EXPECT_NEAR(r.metrics.at("accuracy").item(), e.outputs.at("accuracy").item(), 1e-9);
    opt.update(p2, e.gradients, s2);
  }
  EXPECT_EQ(s1.step, 4);
  for (const auto& [name, v] : p2) EXPECT_LE(max_abs_diff(p1.at(name), v), tol) << name;
  for (const auto& [name, v] : s2.slots) EXPECT_LE(max_abs_diff(s1.slots.at(name), v), tol) << name;
}

TEST(TrainStepTest, MatchesEagerOnTheReferenceBackend) {
  expect_step_matches_eager(ReferenceBackend(), SGD({.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}),
                            DType::Float64, 1e-12);
  expect_step_matches_eager(ReferenceBackend(), Adam({.lr = 0.01, .weight_decay = 1e-3}), DType::Float64, 1e-12);
  expect_step_matches_eager(ReferenceBackend(), AdamW(), DType::Float64, 1e-12);
}

TEST(TrainStepTest, MatchesEagerOnTheCpuBackend) {
  expect_step_matches_eager(CpuBackend(), SGD({.lr = 0.1, .momentum = 0.9}), DType::Float32, 2e-5);
  expect_step_matches_eager(CpuBackend(), AdamW({.lr = 0.01}), DType::Float32, 2e-5);
}

TEST(TrainStepTest, UpdatesTheCallersTensorsInPlace) {
  const TrainStep step = compile_train_step(classifier_train_model(), ReferenceBackend(), SGD({.lr = 0.1, .momentum = 0.5}),
                                            classifier_options(DType::Float32));
  TensorMap params = step.randomize_params(0);
  const Tensor alias = params.at("linear_0.weight");
  const Tensor before = alias.clone();
  OptimizerState state = step.init_state(params);
  const Tensor slot = state.slots.at("momentum:linear_0.weight");
  step.run(params, state, batch_of(6, 0, DType::Float32));
  EXPECT_GT(max_abs_diff(alias, before), 0.0);
  EXPECT_TRUE(alias.shares_storage(params.at("linear_0.weight")));
  EXPECT_GT(max_abs_diff(slot, Tensor::full(DType::Float32, slot.shape(), 0.0)), 0.0);
}

TEST(TrainStepTest, ErrorsNameWhatIsWrong) {
  CompileOptions inf = classifier_options(DType::Float32);
  inf.inference = true;
  EXPECT_TRUE(Contains(error_of([&] { compile_train_step(classifier_train_model(), ReferenceBackend(), SGD(), inf); }),
                       "inference = true"));
  const TrainStep step = compile_train_step(classifier_train_model(), ReferenceBackend(), Adam(),
                                            classifier_options(DType::Float32));
  TensorMap params = step.randomize_params(0);
  OptimizerState empty;
  EXPECT_TRUE(Contains(error_of([&] { step.run(params, empty, batch_of(6, 0, DType::Float32)); }),
                       "missing optimizer slot 'm:linear_0.weight'"));
  OptimizerState state = step.init_state(params);
  EXPECT_TRUE(Contains(error_of([&] { step.run(params, state, {{"input", batch_of(6, 0, DType::Float32).at("input")}}); }),
                       "missing batch input 'target'"));
  EXPECT_TRUE(Contains(error_of([&] { step.run(params, state, batch_of(6, 0, DType::Float64)); }),
                       "'input' is float64[6, 4], expected float32[6, 4]"));
}

// Two Gaussian blobs per class, 3 classes, 4 features: 60 SGD steps with a fixed seed reach 95%.
TEST(TrainStepTest, LearnsASeparableDataset) {
  const int64_t n = 96;
  std::vector<float> x(static_cast<size_t>(n * 4));
  std::vector<int64_t> y(static_cast<size_t>(n));
  const Tensor noise = random_tensor({n, 4}, 11, -0.6, 0.6, DType::Float32);
  for (int64_t i = 0; i < n; ++i) {
    y[static_cast<size_t>(i)] = i % 3;
    for (int64_t j = 0; j < 4; ++j)
      x[static_cast<size_t>(i * 4 + j)] = (j == i % 3 ? 2.0f : 0.0f) + static_cast<float>(noise.item(i * 4 + j));
  }
  const TensorMap data = {{"input", Tensor::from_vector<float>(x, {n, 4})}, {"target", i64(y, {n})}};
  const TrainStep step = compile_train_step(classifier_train_model(0), CpuBackend(), SGD({.lr = 0.2, .momentum = 0.9}),
                                            classifier_options(DType::Float32, n));
  TensorMap params = step.randomize_params(7);
  OptimizerState state = step.init_state(params);
  StepResult r;
  for (int i = 0; i < 60; ++i) r = step.run(params, state, data);
  EXPECT_GE(r.metrics.at("accuracy").item(), 0.95);
  EXPECT_LT(r.loss, 0.3);
}

}  // namespace
}  // namespace ingot::testing

namespace ingot::testing {
namespace {

// BatchNorm2d's running statistics: no gradient, and each step moves them by the momentum formula
// (variance unbiased); an inference compile then reads them.
TEST(TrainBatchNorm, RunningStatisticsFollowTheMomentumFormula) {
  const Model body = batch_norm_body(0.25);
  const TrainStep step = compile_train_step(batch_norm_train_model(body), ReferenceBackend(), SGD({.lr = 0.1}),
                                            batch_norm_options());
  EXPECT_EQ(step.trained_parameters(), (std::vector<std::string>{"batch_norm2d_0.weight", "batch_norm2d_0.bias"}));
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  std::vector<double> mean = {0, 0}, var = {1, 1};
  for (uint64_t s = 0; s < 3; ++s) {
    const Tensor x = random_tensor({2, 2, 2, 2}, 10 + s, -2, 2);
    step.run(params, state, {{"input", x}, {"target", random_tensor({2, 2}, 20 + s)}});
    for (int64_t c = 0; c < 2; ++c) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t k = 0; k < 4; ++k) sum += x.item((n * 2 + c) * 4 + k);
      const double mu = sum / 8;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t k = 0; k < 4; ++k) sq += (x.item((n * 2 + c) * 4 + k) - mu) * (x.item((n * 2 + c) * 4 + k) - mu);
      mean[c] = 0.75 * mean[c] + 0.25 * mu;
      var[c] = 0.75 * var[c] + 0.25 * sq / 7;
      EXPECT_NEAR(params.at("batch_norm2d_0.running_mean").item(c), mean[c], 1e-5) << "step " << s;
      EXPECT_NEAR(params.at("batch_norm2d_0.running_var").item(c), var[c], 1e-5) << "step " << s;
    }
  }
  CompileOptions inf;
  inf.shapes = {{"input", {2, 2, 2, 2}}};
  inf.inference = true;
  const PhysicalModel pm = compile(body, ReferenceBackend(), inf);
  TensorMap p;
  for (const std::string& n : pm.parameter_names()) p[n] = params.at(n);
  const Tensor x = random_tensor({2, 2, 2, 2}, 99);
  const Tensor y = pm.evaluate(p, {{"input", x}}).at("output");
  const double want = (x.item(0) + x.item(1) + x.item(2) + x.item(3)) / 4;
  const double w = p.at("batch_norm2d_0.weight").item(0), b = p.at("batch_norm2d_0.bias").item(0);
  EXPECT_NEAR(y.item(0), (want - mean[0]) / std::sqrt(var[0] + 1e-5) * w + b, 1e-5);
}

}  // namespace
}  // namespace ingot::testing
