// The training API (include/ingot/train.h): TrainModel, the optimizers, and the compiled training
// step, with data parallelism over ml.distributed's group (compile option data_parallel).
//
// Parameters live in a dict of NumPy arrays (randomize_params gives one): TrainStep.run writes the
// updated values into those arrays in place, as the C++ step writes into its tensors, and puts
// any array it had to replace back into the dict. The optimizer's slots live in an OptimizerState.
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "ingot/distributed.h"
#include "ingot/models.h"
#include "ingot/train.h"

namespace ingot::python {
namespace {

// {"input": "output", "target": "target"} or [("input", "output"), ...]
Connections to_connections(nb::handle obj) {
  Connections c;
  if (nb::isinstance<nb::dict>(obj)) {
    for (auto [k, v] : nb::cast<nb::dict>(obj)) c.emplace_back(py_str(k), py_str(v));
    return c;
  }
  for (nb::handle item : obj) {
    const nb::tuple pair = nb::cast<nb::tuple>(item);
    INGOT_CHECK(pair.size() == 2, "connections: expected (terminal, wire) pairs or a dict {terminal: wire}");
    c.emplace_back(py_str(pair[0]), py_str(pair[1]));
  }
  return c;
}

// Writes the step's tensors back into the caller's dict: the same arrays where the step updated
// them in place (views of the same memory), new ones where it replaced them.
void write_back(nb::dict& d, const TensorMap& m) {
  for (const auto& [name, t] : m) d[nb::str(name.c_str(), name.size())] = to_numpy(t);
}

nb::dict step_result(const StepResult& r) {
  nb::dict out;
  out["loss"] = r.loss;
  out["losses"] = to_dict(r.losses);
  out["metrics"] = to_dict(r.metrics);
  return out;
}

}  // namespace

void bind_train(nb::module_& m) {
  nb::class_<TrainModel>(m, "TrainModel",
                         "A model with its losses, regularization and metrics (Mithril's TrainModel):\n"
                         "  tm = ml.TrainModel(model)\n"
                         "  tm.add_loss(ml.CrossEntropyLoss(), {'input': 'output', 'target': 'target'})\n"
                         "  tm.add_metric(ml.ClassAccuracy(), {'input': 'output', 'target': 'target'}, 'accuracy')")
      .def(nb::init<Model>(), nb::arg("model"))
      .def("add_loss",
           [](TrainModel& tm, const Model& loss, nb::handle connections, const std::string& reduction, double coefficient,
              const std::string& name) -> TrainModel& {
             return tm.add_loss(loss, to_connections(connections), reduction, coefficient, name);
           },
           nb::arg("loss"), nb::arg("connections"), nb::arg("reduction") = "mean", nb::arg("coefficient") = 1.0,
           nb::arg("name") = "", nb::rv_policy::reference,
           "Adds a loss block; connections link its terminals to wires of the model ({terminal: wire}); names that "
           "are no wire become data inputs. Reduced by `reduction` (mean | sum), scaled by `coefficient`, added to "
           "final_cost.")
      .def("add_regularization", &TrainModel::add_regularization, nb::arg("kind"), nb::arg("coefficient"),
           nb::arg("pattern"), nb::rv_policy::reference,
           "Adds coefficient * sum(|p|) (kind 'l1') or coefficient * 0.5 * sum(p^2) ('l2') over the parameters "
           "whose names match the glob `pattern`.")
      .def("add_metric",
           [](TrainModel& tm, const Model& metric, nb::handle connections, const std::string& name) -> TrainModel& {
             return tm.add_metric(metric, to_connections(connections), name);
           },
           nb::arg("metric"), nb::arg("connections"), nb::arg("name"), nb::rv_policy::reference,
           "Adds a metric block wired like a loss; never differentiated.");

  m.def("AllReduce", &AllReduce, nb::arg("op") = "sum",
        "Block: every rank's input combined by op (sum | mean | max), for ml.distributed's group.");
  m.def("AllGather", &AllGather, "Block: every rank's input concatenated along axis 0, in rank order.");
  m.def("Broadcast", &Broadcast, nb::arg("root") = 0, "Block: rank `root`'s input on every rank.");
  m.def("ReduceScatter", &ReduceScatter, "Block: the sum over ranks split along axis 0; rank r keeps part r.");
  m.def("ClassAccuracy", &ClassAccuracy, "The fraction of rows whose argmax matches the target class (a metric).");

  nb::class_<Optimizer>(m, "Optimizer", "An optimizer for compile_train_step (SGD, Adam, AdamW).")
      .def_prop_ro("name", &Optimizer::name)
      .def("hyperparameters", &Optimizer::hyperparameters, "The hyperparameters set_hyperparameter takes.");
  nb::class_<SGD, Optimizer>(m, "SGD", "PyTorch's SGD (dampening 0), with momentum, weight decay and Nesterov.")
      .def("__init__",
           [](SGD* self, double lr, double momentum, double weight_decay, bool nesterov) {
             new (self) SGD({.lr = lr, .momentum = momentum, .weight_decay = weight_decay, .nesterov = nesterov});
           },
           nb::kw_only(), nb::arg("lr") = 0.01, nb::arg("momentum") = 0.0, nb::arg("weight_decay") = 0.0,
           nb::arg("nesterov") = false);
  nb::class_<Adam, Optimizer>(m, "Adam", "Adam as in PyTorch (weight decay added to the gradient).")
      .def("__init__",
           [](Adam* self, double lr, double beta1, double beta2, double eps, double weight_decay) {
             new (self) Adam({.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay});
           },
           nb::kw_only(), nb::arg("lr") = 1e-3, nb::arg("beta1") = 0.9, nb::arg("beta2") = 0.999, nb::arg("eps") = 1e-8,
           nb::arg("weight_decay") = 0.0);
  nb::class_<AdamW, Adam>(m, "AdamW", "Adam with decoupled weight decay, as in PyTorch.")
      .def("__init__",
           [](AdamW* self, double lr, double beta1, double beta2, double eps, double weight_decay) {
             new (self) AdamW({.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay});
           },
           nb::kw_only(), nb::arg("lr") = 1e-3, nb::arg("beta1") = 0.9, nb::arg("beta2") = 0.999, nb::arg("eps") = 1e-8,
           nb::arg("weight_decay") = 0.01);

  nb::class_<OptimizerState>(m, "OptimizerState", "The optimizer's slots (by '<slot>:<parameter>') and its step count.")
      .def_rw("step", &OptimizerState::step)
      .def_prop_ro("slots", [](const OptimizerState& s) { return to_dict(s.slots); },
                   "The slots as NumPy arrays viewing the state's memory.");

  nb::class_<TrainStep>(m, "TrainStep",
                        "Forward, backward and optimizer update compiled as one executable (compile_train_step).")
      .def("randomize_params", [](const TrainStep& s, uint64_t seed) { return to_dict(s.randomize_params(seed)); },
           nb::arg("seed") = 0, "Parameters drawn from each parameter's initializer, as NumPy arrays.")
      .def("init_state", [](const TrainStep& s, const nb::dict& params) { return s.init_state(to_tensor_map(params, "parameter")); },
           nb::arg("params"), "Zero optimizer slots for the trained parameters; step 0.")
      .def("run",
           [](const TrainStep& s, nb::dict params, OptimizerState& state, const nb::dict& batch) {
             TensorMap p = to_tensor_map(params, "parameter");
             const TensorMap b = to_tensor_map(batch, "batch input");
             StepResult r;
             {
               nb::gil_scoped_release nogil;
               r = s.run(p, state, b);
             }
             write_back(params, p);
             return step_result(r);
           },
           nb::arg("params"), nb::arg("state"), nb::arg("batch"),
           "One step: updates `params` (in place) and `state`; returns {'loss', 'losses', 'metrics'}. Data parallel, "
           "`batch` is this rank's shard (ml.distributed.shard_batch) and the first run gives every rank rank 0's "
           "parameters and state; losses and metrics are the global batch's.")
      .def("set_hyperparameter", &TrainStep::set_hyperparameter, nb::arg("name"), nb::arg("value"),
           "Changes a run-time hyperparameter ('lr', ...) without recompiling.")
      .def("set_lr", &TrainStep::set_lr, nb::arg("lr"))
      .def_prop_ro("data_parallel", &TrainStep::data_parallel)
      .def_prop_ro("group_size", &TrainStep::group_size, "The ranks the step averages over (1 unless data parallel).")
      .def_prop_ro("trained_parameters", &TrainStep::trained_parameters)
      .def("sync_from_root",
           [](const TrainStep& s, nb::dict params, OptimizerState& state) {
             TensorMap p = to_tensor_map(params, "parameter");
             s.sync_from_root(p, state);
             write_back(params, p);
           },
           nb::arg("params"), nb::arg("state"), "Gives every rank rank 0's parameters and optimizer state.")
      .def("save_checkpoint",
           [](const TrainStep& s, const std::string& path, const nb::dict& params, const OptimizerState& state) {
             s.save_checkpoint(path, to_tensor_map(params, "parameter"), state);
           },
           nb::arg("path"), nb::arg("params"), nb::arg("state"),
           "Parameters, slots and step as one safetensors file, written atomically (data parallel: by rank 0 only).")
      .def("load_checkpoint",
           [](const TrainStep& s, const std::string& path, nb::dict params, OptimizerState& state) {
             TensorMap p = to_tensor_map(params, "parameter");
             s.load_checkpoint(path, p, state);
             write_back(params, p);
           },
           nb::arg("path"), nb::arg("params"), nb::arg("state"), "Reads a save_checkpoint file into params and state.")
      .def("graph_text", [](const TrainStep& s) { return print_graph(s.graph(), DumpFormat::Text); },
           "The optimized step graph as text.");

  m.def("compile_train_step",
        [](const TrainModel& model, const Backend& backend, const Optimizer& optimizer, const nb::dict& options) {
          const CompileOptions o = to_options(options);
          nb::gil_scoped_release nogil;
          return compile_train_step(model, backend, optimizer, o);
        },
        nb::arg("model"), nb::arg("backend"), nb::arg("optimizer"), nb::arg("options"),
        "Compiles a TrainModel's training step (see ingot.compile_train_step).");

  nb::module_ d = nb::cast<nb::module_>(m.attr("distributed"));
  d.def("shard_batch",
        [](const nb::dict& batch, int axis) { return to_dict(distributed::shard_batch(to_tensor_map(batch, "batch input"), axis)); },
        nb::arg("batch"), nb::arg("axis") = 0,
        "This rank's equal part of every array of `batch` along `axis` (a copy); the axis must divide by size().");
  m.def("_shard_arrays",
        [](const nb::dict& arrays, int rank, int size, int axis) {
          return to_dict(distributed::shard_batch(to_tensor_map(arrays, "array"), rank, size, axis));
        },
        nb::arg("arrays"), nb::arg("rank"), nb::arg("size"), nb::arg("axis"),
        "shard_batch for an explicit rank and size (ml.signal's contexts).");
}

}  // namespace ingot::python
