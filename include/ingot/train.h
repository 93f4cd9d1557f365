// Training: a model with its losses, regularization and metrics (TrainModel, as in Mithril),
// optimizers (SGD, Adam, AdamW) and a compiled training step (forward + backward + optimizer
// update in one executable, as MLX's compiled training graphs).
//
//   TrainModel tm(ExampleMLP());
//   tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
//   tm.add_regularization("l2", 1e-4, "*weight");
//   tm.add_metric(ClassAccuracy(), {{"input", "output"}, {"target", "target"}}, "accuracy");
//
//   SGD sgd({.lr = 0.1, .momentum = 0.9});
//   TrainStep step = compile_train_step(tm, CpuBackend(), sgd, options);
//   TensorMap params = step.randomize_params(0);
//   OptimizerState state = step.init_state(params);
//   StepResult r = step.run(params, state, {{"input", x}, {"target", y}});  // updates both
//   r.loss, r.metrics.at("accuracy")
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ingot/compile.h"
#include "ingot/model.h"
#include "ingot/physical_model.h"

namespace ingot {

// ---------------------------------------------------------------- TrainModel

// Loss / metric terminal -> wire of the model: {{"input", "output"}, {"target", "target"}}.
using Connections = std::vector<std::pair<std::string, std::string>>;

class TrainModel {
 public:
  explicit TrainModel(Model model);

  // Adds a loss block (terminals "input", "target", ..., "output"). `connections` link the loss's
  // terminals to wires of the model by name: its "input" must name an output of the model
  // ("output" is the canonical one); other names that are no wire of the model become new data
  // inputs (targets). The loss output is reduced to a scalar by `reduction` ("mean" or "sum"),
  // scaled by `coefficient`, exposed as `name` (default "loss_<i>") and added to "final_cost".
  // A block that reduces itself (CrossEntropyLoss() with its default "mean") is taken as it is
  // when its reduction is the one asked; another is an error at compile time (build the block
  // with reduction "none" so that add_loss reduces it).
  TrainModel& add_loss(const Model& loss, const Connections& connections, const std::string& reduction = "mean",
                       double coefficient = 1.0, const std::string& name = "");
  // Adds coefficient * sum(|p|) ("l1") or coefficient * 0.5 * sum(p^2) ("l2", so its gradient is
  // coefficient * p) over every parameter whose full name matches the glob `pattern` ('*' any
  // run of characters, '?' one; a plain name matches itself): "linear_0.weight", "*weight". A
  // pattern that matches no parameter is an error at compile time.
  TrainModel& add_regularization(const std::string& kind, double coefficient, const std::string& pattern);
  // Adds a metric block (e.g. ClassAccuracy()) wired like a loss; its output is returned by name and
  // never differentiated.
  TrainModel& add_metric(const Model& metric, const Connections& connections, const std::string& name);

  // The model with the loss and metric blocks added (outputs: the model's, each loss, each metric).
  Model logical_model() const;
  // The inferred graph with "final_cost" (sum of the losses and regularization terms) added.
  Graph inferred_graph(const CompileOptions& options) const;

  struct Loss {
    Model block;
    Connections connections;
    std::string reduction;
    double coefficient;
    std::string name;
  };
  struct Regularization {
    std::string kind;
    double coefficient;
    std::string pattern;
  };
  struct Metric {
    Model block;
    Connections connections;
    std::string name;
  };
  const std::vector<Loss>& losses() const { return losses_; }
  const std::vector<Regularization>& regularizations() const { return regularizations_; }
  const std::vector<Metric>& metrics() const { return metrics_; }

 private:
  Model model_;
  std::vector<Loss> losses_;
  std::vector<Regularization> regularizations_;
  std::vector<Metric> metrics_;
};

// The name of the total loss output.
inline constexpr const char* kFinalCost = "final_cost";

// Compiles the model with its losses, regularization and metrics into one PhysicalModel whose
// outputs are the model's outputs, each loss, each metric and "final_cost".
PhysicalModel compile(const TrainModel& model, const Backend& backend, const CompileOptions& options = {});
// One evaluation of such a model: outputs (losses, metrics, final_cost, model outputs) and the
// gradient of final_cost (seeded with 1) for every trainable parameter.
Evaluation evaluate_loss(const PhysicalModel& model, const TensorMap& params, const TensorMap& inputs);

// ---------------------------------------------------------------- optimizers

// Per-parameter slots ("<slot>:<parameter>", e.g. "momentum:linear_0.weight", shaped and typed
// like the parameter) and the number of updates done so far.
struct OptimizerState {
  int64_t step = 0;
  TensorMap slots;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<Optimizer> clone() const = 0;
  // Slot names per parameter ({"momentum"}, {"m", "v"}, or none).
  virtual std::vector<std::string> slot_names() const = 0;
  // Zero slots for `params`, step 0.
  OptimizerState init(const TensorMap& params) const;
  // Hyperparameters that may change between updates (a schedule): "lr", and "weight_decay" /
  // SGD's "momentum" when built with a non-zero value (the update has no term for them
  // otherwise). The compiled training step reads them as run-time scalars (scalars()).
  virtual std::vector<std::string> hyperparameters() const = 0;
  // Sets one of hyperparameters(), checked as the constructor checks it; any other name is an
  // error listing them.
  void set_hyperparameter(const std::string& name, double value);
  // The eager form: applies one update to every parameter that has a gradient in `grads`
  // (computed in float64, stored back in each parameter's dtype) and advances state.step.
  void update(TensorMap& params, const TensorMap& grads, OptimizerState& state) const;

  // One parameter's update in float64: p, g, and the slots (in slot_names() order) are updated in
  // place. `step` is the 1-based update number.
  virtual void update_one(double* p, const double* g, std::vector<double*>& slots, int64_t n, int64_t step) const = 0;

  // The graph-building form (used by compile_train_step): run-time scalars the update reads,
  // computed on the host from the current hyperparameters for update number `step` (1-based),
  // e.g. the learning rate and Adam's bias corrections. Passed as float64 scalar inputs, so a
  // schedule needs no recompile.
  virtual std::vector<std::pair<std::string, double>> scalars(int64_t step) const = 0;
  struct GraphUpdate {
    ValueId param;
    std::vector<ValueId> slots;  // new values, in slot_names() order
  };
  // Appends the update of one parameter to `g` through `op` (which adds a node and infers it).
  // `scalars` are the scalar inputs (in scalars() order), already cast to the parameter's dtype.
  using OpFn = std::function<ValueId(const std::string& op, std::vector<ValueId> inputs, Attrs attrs)>;
  using ConstFn = std::function<ValueId(double value)>;  // a scalar constant of the param's dtype
  virtual GraphUpdate build_update(const OpFn& op, const ConstFn& constant, ValueId param, ValueId grad,
                                   const std::vector<ValueId>& slots, const std::vector<ValueId>& scalars) const = 0;

 protected:
  // Sets a name from hyperparameters() after checking the value.
  virtual void apply_hyperparameter(const std::string& name, double value) = 0;
};

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;  // L2: g += weight_decay * p
  bool nesterov = false;     // needs momentum > 0
};
// PyTorch's SGD (dampening 0): g += wd p; buf = momentum buf + g; p -= lr (nesterov ? g +
// momentum buf : buf), or p -= lr g without momentum.
class SGD final : public Optimizer {
 public:
  explicit SGD(SGDOptions options = {});
  std::string name() const override { return "SGD"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<SGD>(*this); }
  std::vector<std::string> slot_names() const override;
  std::vector<std::string> hyperparameters() const override;
  void update_one(double* p, const double* g, std::vector<double*>& slots, int64_t n, int64_t step) const override;
  std::vector<std::pair<std::string, double>> scalars(int64_t step) const override;
  GraphUpdate build_update(const OpFn& op, const ConstFn& constant, ValueId param, ValueId grad,
                           const std::vector<ValueId>& slots, const std::vector<ValueId>& scalars) const override;
  const SGDOptions& options() const { return o_; }

 private:
  void apply_hyperparameter(const std::string& name, double value) override;
  SGDOptions o_;
  // Fixed at construction: they decide the update's terms and slots, which a compiled step keeps.
  bool has_momentum_, has_weight_decay_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled
};
// Adam (decoupled = false) and AdamW (decoupled = true), as in PyTorch:
//   AdamW: p *= 1 - lr wd;  Adam: g += wd p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {}, bool decoupled_weight_decay = false);
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adam>(*this); }
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }
  std::vector<std::string> hyperparameters() const override;
  void update_one(double* p, const double* g, std::vector<double*>& slots, int64_t n, int64_t step) const override;
  std::vector<std::pair<std::string, double>> scalars(int64_t step) const override;
  GraphUpdate build_update(const OpFn& op, const ConstFn& constant, ValueId param, ValueId grad,
                           const std::vector<ValueId>& slots, const std::vector<ValueId>& scalars) const override;
  const AdamOptions& options() const { return o_; }

 private:
  void apply_hyperparameter(const std::string& name, double value) override;
  AdamOptions o_;
  bool decoupled_;
  bool has_weight_decay_;  // fixed at construction, as SGD's
};
// AdamW: Adam with decoupled weight decay (default 0.01, as in PyTorch).
class AdamW final : public Adam {
 public:
  explicit AdamW(AdamOptions options = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01})
      : Adam(options, true) {}
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<AdamW>(*this); }
};

// ---------------------------------------------------------------- compiled training step

// What one training step returns.
struct StepResult {
  double loss = 0;      // final_cost
  TensorMap losses;     // each loss by name, and "final_cost"
  TensorMap metrics;    // each metric by name
};

// Forward + backward + optimizer update in one executable built by the pass pipeline and a
// backend. run() reads `params`, `state` and the batch, and writes the updated parameters and
// optimizer slots into the tensors of `params` and `state` (their buffers are overwritten, so
// every alias of them sees the update): through Executable::run_into, straight from the
// generated code where the backend's schedule allows it (CPU), else copied in.
class TrainStep {
 public:
  TensorMap randomize_params(uint64_t seed = 0) const { return forward_.randomize_params(seed); }
  // Zero optimizer slots for the trained parameters in `params` (trained_parameters(): not
  // BatchNorm2d's running statistics, which the forward pass updates).
  OptimizerState init_state(const TensorMap& params) const;
  // A batch key that is no input of the model is an error listing the inputs.
  // Data parallel (CompileOptions::data_parallel): `batch` is this rank's shard of the global
  // batch (distributed::shard_batch), and the first run (state.step == 0) starts by giving every
  // rank rank 0's parameters and optimizer state (sync_from_root), so they need not be
  // initialized alike. The result's losses and metrics are the global batch's on every rank.
  StepResult run(TensorMap& params, OptimizerState& state, const TensorMap& batch) const;
  // Whether the step was compiled data parallel, and for how many ranks.
  bool data_parallel() const;
  int group_size() const;
  // Overwrites `params` and `state` (their buffers, in place) with rank 0's, on every rank; a
  // no-op in a group of one. Every rank must call it (it is a series of broadcasts).
  void sync_from_root(TensorMap& params, OptimizerState& state) const;
  // A checkpoint: the parameters, the optimizer's slots and step in one safetensors file
  // ("param:<name>", "slot:<slot>:<name>"; metadata "step", "optimizer"), written atomically.
  // Data parallel, only rank 0 writes (every rank holds the same values), and every rank
  // returns once the file is complete. load_checkpoint reads it into `params` and `state` (every
  // rank reads the file: it must be on a path each rank sees), checking names, dtypes and shapes.
  void save_checkpoint(const std::string& path, const TensorMap& params, const OptimizerState& state) const;
  void load_checkpoint(const std::string& path, TensorMap& params, OptimizerState& state) const;
  // The optimizer's run-time hyperparameters (Optimizer::hyperparameters()): the compiled step
  // reads them as scalar inputs, so changing them between runs (a schedule) recompiles nothing.
  // Copies of this TrainStep keep their own values.
  void set_lr(double lr) { set_hyperparameter("lr", lr); }
  void set_hyperparameter(const std::string& name, double value);

  // The forward model with losses and metrics (for evaluation, inference-mode compiles, names).
  const PhysicalModel& model() const { return forward_; }
  // The optimized step graph: inputs are parameters, batch data, optimizer slots
  // ("optimizer.<slot>:<param>") and scalars ("optimizer.<scalar>"); outputs the losses, metrics,
  // "updated:<param>" and "updated.<slot>:<param>".
  const Graph& graph() const;
  // Planned peak of the step graph (0 when not planned: symbolic shapes).
  int64_t planned_peak_bytes() const;
  // That peak with and without gradient checkpointing (compile options gradient_checkpointing,
  // checkpoint_segments), and how many forward nodes the backward recomputes.
  GradientMemory gradient_memory() const;
  const std::vector<std::string>& trained_parameters() const { return trained_; }
  const Optimizer& optimizer() const { return *optimizer_; }

  struct Compiled;  // the step's joint graph and executable (src/train/train_step.cpp)

 private:
  friend TrainStep compile_train_step(const TrainModel&, const Backend&, const Optimizer&, const CompileOptions&);
  TrainStep(PhysicalModel forward, std::shared_ptr<const Compiled> step, std::shared_ptr<const Optimizer> optimizer,
            std::vector<std::string> trained);
  PhysicalModel forward_;
  std::shared_ptr<const Compiled> step_;
  std::shared_ptr<const Optimizer> optimizer_;
  std::vector<std::string> trained_;
  std::vector<std::string> input_names_;  // the model's inputs, for run's check of the batch's keys
};

TrainStep compile_train_step(const TrainModel& model, const Backend& backend, const Optimizer& optimizer,
                             const CompileOptions& options = {});

}  // namespace ingot
