// The compiled training step: the TrainModel's joint forward + backward graph (the same autodiff
// stage PhysicalModel::evaluate uses) grown by the optimizer's update ops before the optimize
// stage, so passes, fusion and memory planning see forward, backward and update together.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "compiler/gradient_pipeline.h"
#include "distributed/started.h"
#include "ingot/distributed.h"
#include "ingot/error.h"
#include "ingot/serialize.h"
#include "ingot/train.h"
#include "train/graph_builder.h"
#include "train/names.h"

namespace ingot {

namespace {
constexpr const char* kScalarPrefix = "optimizer.";
constexpr const char* kUpdated = "updated:";
constexpr const char* kState = "state:";  // non-trainable state's next value (BatchNorm2d running statistics)
std::string slot_input(const std::string& slot, const std::string& param) { return "optimizer." + slot + ":" + param; }
constexpr const char* kUpdatedSlot = "updated.";  // an optimizer slot's next value
std::string slot_output(const std::string& slot, const std::string& param) { return kUpdatedSlot + slot + ":" + param; }
}  // namespace

struct TrainStep::Compiled {
  JointGraph joint;
  std::vector<std::string> scalar_names;  // the optimizer's run-time scalars, in scalars() order
  std::set<std::string> metric_names;
  bool data_parallel = false;
  uint64_t graph_hash = 0;  // of the optimized step graph's text: ranks compare it at the first run
};

TrainStep::TrainStep(PhysicalModel forward, std::shared_ptr<const Compiled> step,
                     std::shared_ptr<const Optimizer> optimizer, std::vector<std::string> trained)
    : forward_(std::move(forward)),
      step_(std::move(step)),
      optimizer_(std::move(optimizer)),
      trained_(std::move(trained)),
      input_names_(forward_.input_names()) {}

const Graph& TrainStep::graph() const { return step_->joint.graph; }

int64_t TrainStep::planned_peak_bytes() const { return gradient_memory().planned_peak_bytes; }

GradientMemory TrainStep::gradient_memory() const { return joint_memory(step_->joint); }

TrainStep compile_train_step(const TrainModel& model, const Backend& backend, const Optimizer& optimizer,
                             const CompileOptions& options) {
  INGOT_CHECK(!options.inference, "compile_train_step: the options have inference = true; a training step "
              "needs the training graph (Dropout on, BatchNorm on batch statistics)");
  const Graph inferred = model.inferred_graph(options);
  CompileOptions forward_options = options;
  forward_options.jit = false;  // lowered only if the forward model alone is evaluated
  forward_options.verbose = false;
  PhysicalModel forward = compile_inferred(inferred, backend, forward_options);

  std::vector<std::string> trained;
  for (ValueId id : inferred.leaves_of(ValueKind::Parameter)) {
    const Value& v = inferred.value(id);
    if (v.differentiable && is_floating(v.dtype)) trained.push_back(v.name);
  }
  auto compiled = std::make_shared<TrainStep::Compiled>();
  compiled->data_parallel = options.data_parallel;
  std::shared_ptr<const Optimizer> opt = optimizer.clone();
  for (const auto& [name, value] : opt->scalars(1)) compiled->scalar_names.push_back(name);
  std::set<std::string> keep = {kFinalCost};
  for (const auto& l : model.losses()) keep.insert(l.name);
  for (const auto& m : model.metrics()) {
    keep.insert(m.name);
    compiled->metric_names.insert(m.name);
  }

  JointGraphExtension update;
  update.stage = "optimizer update";
  update.fn = [&](JointGraph& joint, const std::function<void(const std::string&)>& note) {
    Graph& g = joint.graph;
    train::GraphBuilder b(g, "optimizer");
    std::map<std::string, ValueId> grad_of;
    for (const auto& [output, param] : joint.gradient_outputs) grad_of[param] = *g.find_output(output);
    // Data parallel: each rank's gradient is its shard's part of the global cost's; their mean
    // over ranks is the global batch's gradient (see TrainModel::inferred_graph). Bucketed by the
    // gradient_buckets pass, as are the running statistics' means below.
    const int64_t ranks = compiled->data_parallel ? distributed::size() : 1;
    if (compiled->data_parallel)
      for (auto& [param, grad] : grad_of) grad = b.all_reduce(grad, "mean", ranks, true);
    std::vector<ValueId> scalars64;
    for (const std::string& s : compiled->scalar_names) scalars64.push_back(b.input(kScalarPrefix + s, DType::Float64, {}));
    std::vector<std::pair<std::string, ValueId>> outputs;
    for (const auto& [name, v] : g.outputs()) {
      const bool state = name.rfind(kState, 0) == 0;
      if (state && compiled->data_parallel && is_floating(g.value(v).dtype))
        outputs.emplace_back(name, b.all_reduce(v, "mean", ranks, true));  // BatchNorm's running statistics
      else if (keep.count(name) || state)
        outputs.emplace_back(name, v);
    }
    for (const std::string& name : trained) {
      const ValueId p = *g.find_leaf(name);
      const DType t = g.value(p).dtype;
      std::vector<ValueId> slots, scalars;
      for (const std::string& slot : opt->slot_names()) slots.push_back(b.input(slot_input(slot, name), t, g.value(p).shape));
      for (ValueId s : scalars64) scalars.push_back(b.cast(s, t));
      const Optimizer::GraphUpdate u = opt->build_update(
          [&](const std::string& op, std::vector<ValueId> in, Attrs a) { return b.op(op, std::move(in), std::move(a)); },
          [&](double value) { return b.scalar(value, t); }, p, grad_of.at(name), slots, scalars);
      outputs.emplace_back(kUpdated + name, u.param);
      for (size_t k = 0; k < u.slots.size(); ++k) outputs.emplace_back(slot_output(opt->slot_names()[k], name), u.slots[k]);
    }
    g.outputs() = std::move(outputs);
    joint.gradient_outputs.clear();
    note(opt->name() + " update of " + std::to_string(trained.size()) + " parameters; " +
         std::to_string(opt->slot_names().size()) + " state slots each");
  };
  compiled->joint = build_joint_graph(inferred, {kFinalCost}, trained, backend, options, update);
  if (compiled->data_parallel) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const char c : print_graph(compiled->joint.graph)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    compiled->graph_hash = h;
  }
  return TrainStep(std::move(forward), std::move(compiled), std::move(opt), std::move(trained));
}

OptimizerState TrainStep::init_state(const TensorMap& params) const {
  TensorMap trained;
  for (const std::string& name : trained_) {
    auto it = params.find(name);
    INGOT_CHECK(it != params.end(), "TrainStep::init_state: missing parameter '", name, "'");
    trained.emplace(name, it->second);
  }
  return optimizer_->init(trained);
}

void TrainStep::set_hyperparameter(const std::string& name, double value) {
  // A fresh copy: copies of this step share the optimizer they were compiled with.
  std::unique_ptr<Optimizer> changed = optimizer_->clone();
  changed->set_hyperparameter(name, value);
  optimizer_ = std::move(changed);
}

bool TrainStep::data_parallel() const { return step_->data_parallel; }

int TrainStep::group_size() const { return step_->data_parallel ? distributed::size() : 1; }

namespace {
// Writes `from` into `to`'s buffer when they match (aliases of `to` see it), else replaces it.
void assign(Tensor& to, const Tensor& from) {
  if (to.defined() && to.is_contiguous() && to.dtype() == from.dtype() && to.shape() == from.shape()) {
    const Tensor c = from.contiguous();
    std::memcpy(to.raw_data(), c.raw_data(), c.nbytes());
  } else {
    to = from;
  }
}
}  // namespace

void TrainStep::sync_from_root(TensorMap& params, OptimizerState& state) const {
  if (distributed::size() == 1) return;
  for (auto& [name, t] : params) assign(t, distributed::broadcast(t, 0));  // std::map: the same order on every rank
  for (auto& [name, t] : state.slots) assign(t, distributed::broadcast(t, 0));
  state.step = static_cast<int64_t>(distributed::broadcast(Tensor::scalar<int64_t>(state.step), 0).item());
}

void TrainStep::save_checkpoint(const std::string& path, const TensorMap& params, const OptimizerState& state) const {
  if (!step_->data_parallel || distributed::rank() == 0) {
    std::map<std::string, Tensor> tensors;
    for (const auto& [name, t] : params) tensors.emplace("param:" + name, t);
    for (const auto& [name, t] : state.slots) tensors.emplace("slot:" + name, t);
    save_safetensors(path, tensors, {{"step", std::to_string(state.step)}, {"optimizer", optimizer_->name()}});
  }
  if (step_->data_parallel) distributed::barrier();  // the file is whole before any rank goes on
}

void TrainStep::load_checkpoint(const std::string& path, TensorMap& params, OptimizerState& state) const {
  std::map<std::string, std::string> meta;
  const std::map<std::string, Tensor> tensors = load_safetensors(path, &meta);
  auto it = meta.find("step");
  INGOT_CHECK(it != meta.end(), "load_checkpoint: '", path, "' has no step in its metadata; write it with save_checkpoint");
  char* end = nullptr;
  const long long step = std::strtoll(it->second.c_str(), &end, 10);
  INGOT_CHECK(*end == '\0' && step >= 0, "load_checkpoint: '", path, "' has a bad step '", it->second, "'");
  const std::string opt = meta.count("optimizer") ? meta.at("optimizer") : "";
  INGOT_CHECK(opt == optimizer_->name(), "load_checkpoint: '", path, "' was written by ", opt.empty() ? "no optimizer" : opt,
              ", this step uses ", optimizer_->name());
  TensorMap new_params = params;
  OptimizerState new_state = init_state(params);
  for (const auto& [key, t] : tensors) {
    TensorMap* into = key.rfind("param:", 0) == 0 ? &new_params : key.rfind("slot:", 0) == 0 ? &new_state.slots : nullptr;
    INGOT_CHECK(into != nullptr, "load_checkpoint: '", path, "' holds '", key, "', neither a param: nor a slot: entry");
    const std::string name = key.substr(key.find(':') + 1);
    auto slot = into->find(name);
    INGOT_CHECK(slot != into->end(), "load_checkpoint: '", path, "' holds '", key, "', which this step has no ",
                into == &new_params ? "parameter" : "optimizer slot", " for");
    INGOT_CHECK(slot->second.dtype() == t.dtype() && slot->second.shape() == t.shape(), "load_checkpoint: '", key,
                "' is ", dtype_name(t.dtype()), to_string(t.shape()), " in '", path, "', the step expects ",
                dtype_name(slot->second.dtype()), to_string(slot->second.shape()));
  }
  for (const std::string& name : trained_)
    INGOT_CHECK(tensors.count("param:" + name), "load_checkpoint: '", path, "' has no parameter '", name, "'");
  for (const auto& [name, t] : new_state.slots)
    INGOT_CHECK(tensors.count("slot:" + name), "load_checkpoint: '", path, "' has no optimizer slot '", name, "'");
  for (const auto& [key, t] : tensors) {  // all checked: nothing is half loaded
    const std::string name = key.substr(key.find(':') + 1);
    assign(key.rfind("param:", 0) == 0 ? params[name] : state.slots[name], t);
  }
  state.step = step;
}

namespace {
// Every rank must have compiled the same step: a rank whose graph differs (another model, shape,
// option or ingot) is named at the first step instead of deadlocking or mixing gradients later.
void check_same_graph(uint64_t hash) {
  const Tensor all = distributed::all_gather(Tensor::from_vector<int64_t>({static_cast<int64_t>(hash)}, {1}));
  std::string differ;
  for (int r = 1; r < distributed::size(); ++r)
    if (all.data<int64_t>()[r] != all.data<int64_t>()[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  INGOT_CHECK(differ.empty(), "TrainStep::run (rank ", distributed::rank(), " of ", distributed::size(),
              "): data parallel ranks compiled different training steps: rank ", differ,
              " differ from rank 0 (another model, batch shape, option or ingot version)");
}
}  // namespace

StepResult TrainStep::run(TensorMap& params, OptimizerState& state, const TensorMap& batch) const {
  const Graph& g = step_->joint.graph;
  // A step that throws between a gradient bucket's start and its wait leaves no buffer behind.
  const distributed::detail::StartedScope buckets;
  if (step_->data_parallel && state.step == 0 && distributed::size() > 1) {
    check_same_graph(step_->graph_hash);
    sync_from_root(params, state);
  }
  const int64_t step = state.step + 1;
  std::map<std::string, double> scalar_values;
  for (const auto& [name, value] : optimizer_->scalars(step)) scalar_values[kScalarPrefix + name] = value;
  for (const auto& [key, value] : batch)
    INGOT_CHECK(train::contains(input_names_, key), "TrainStep::run: the batch has '", key,
                "', which is no input of the model (inputs: ", train::joined(input_names_), ")");
  std::vector<Tensor> args;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    if (v.kind == ValueKind::Constant) continue;
    const TensorMap* from = &batch;
    std::string key = v.name;
    if (step_->joint.cotangent_inputs.count(v.name)) {
      args.push_back(Tensor::full(DType::Float64, {}, 1.0).astype(v.dtype));
      continue;
    }
    if (auto s = scalar_values.find(v.name); s != scalar_values.end()) {
      args.push_back(Tensor::full(DType::Float64, {}, s->second));
      continue;
    }
    if (v.kind == ValueKind::Parameter) from = &params;
    else if (v.name.rfind(kScalarPrefix, 0) == 0) {
      from = &state.slots;
      key = v.name.substr(std::string(kScalarPrefix).size());
    }
    auto it = from->find(key);
    INGOT_CHECK(it != from->end(), "TrainStep::run: missing ",
                from == &params ? "parameter" : from == &batch ? "batch input" : "optimizer slot", " '", key, "' (",
                dtype_name(v.dtype), to_string(v.shape), ")", from == &state.slots ? "; create the state with init_state(params)" : "");
    const Tensor& t = it->second;
    bool ok = t.dtype() == v.dtype && t.rank() == static_cast<int>(v.shape.size());
    for (size_t i = 0; ok && i < v.shape.size(); ++i) ok = !v.shape[i].known() || v.shape[i].value == t.shape()[i];
    INGOT_CHECK(ok, "TrainStep::run: '", key, "' is ", dtype_name(t.dtype()), to_string(t.shape()), ", expected ",
                dtype_name(v.dtype), to_string(v.shape));
    args.push_back(t);
  }
  // Updated parameters, slots and state are written into the caller's tensors: straight into
  // their buffers where the backend's schedule allows (they are read before they are written).
  std::vector<Tensor> results(g.outputs().size());
  auto destination = [&](const std::string& name) -> Tensor* {
    if (name.rfind(kUpdated, 0) == 0) return &params.at(name.substr(std::string(kUpdated).size()));
    if (name.rfind(kState, 0) == 0) return &params.at(name.substr(std::string(kState).size()));
    if (name.rfind(kUpdatedSlot, 0) == 0) return &state.slots.at(name.substr(std::string(kUpdatedSlot).size()));
    return nullptr;
  };
  for (size_t i = 0; i < results.size(); ++i)
    if (Tensor* dest = destination(g.outputs()[i].first)) results[i] = *dest;
  step_->joint.executable->run_into(args, results);
  StepResult r;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& name = g.outputs()[i].first;
    if (Tensor* dest = destination(name)) {
      *dest = results[i];  // the same buffer, unless the layout made run_into replace the handle
    } else if (step_->metric_names.count(name)) {
      r.metrics.emplace(name, results[i]);
    } else {
      if (name == kFinalCost) r.loss = results[i].item();
      r.losses.emplace(name, results[i]);
    }
  }
  state.step = step;
  return r;
}

}  // namespace ingot
