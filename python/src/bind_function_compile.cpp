// Function compile, transforms, auto-compile and regions, for python/ingot/_function_compile.py,
// which builds the documented API (ml.compile(fn), ml.grad, ...) on these.
//
// The GIL: C++ calls back into Python only from compile(fn)'s trace and from the transforms, on
// the thread that called in and still holds the GIL, so a Python exception raised in the function
// travels through C++ as nb::python_error and comes out as itself. The auto-compile worker thread
// never calls Python: its graphs hold no Python objects (evaluated graphs take their data as
// inputs, not constants), its log goes to stderr, and its backend can only be a C++ one. Waiting
// for it releases the GIL.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <iterator>
#include <memory>

#include "bindings.h"
#include "convert.h"
#include "ingot/control_flow.h"
#include "ingot/cpu_backend.h"
#include "ingot/error.h"
#include "ingot/function_compile.h"
#include "ingot/transforms.h"

namespace ingot::python {

namespace {

struct CompiledStateHandle {
  std::shared_ptr<detail::CompiledState> state;
};

// The global random state as a capture slot: ml.random.state in compile's inputs/outputs.
struct RandomStateSlot {};

// A `with ml.compile_region(name):` block.
struct Region {
  std::string name;
  std::unique_ptr<CompileRegion> region;
  ~Region() {
    if (!region) return;
    try {
      region->end(/*run_deferred=*/false);  // never entered __exit__ (an abandoned generator)
    } catch (const Error&) {
      (void)region.release();  // not the innermost region: leave its state to the stack it is on
    }
  }
};

// Runs a Python function from a flat list of arrays to a flat list of arrays.
ArrayFunction python_function(nb::callable fn) {
  return [fn = std::move(fn)](const std::vector<Array>& xs) { return nb::cast<std::vector<Array>>(fn(xs)); };
}

nb::tuple pair_of_lists(const std::pair<std::vector<Array>, std::vector<Array>>& p) {
  return nb::make_tuple(p.first, p.second);
}

// The on/off settings of CompileConfig, by their Python names.
const std::pair<const char*, bool CompileConfig::*> kSwitches[] = {
    {"disable_compile", &CompileConfig::disable_compile}, {"auto_compile", &CompileConfig::auto_compile},
    {"compile_all", &CompileConfig::compile_all},         {"debug", &CompileConfig::debug},
    {"inject_build_failure", &CompileConfig::inject_build_failure},
};

std::string setting_names() {
  std::string names;
  for (const auto& [name, member] : kSwitches) names += std::string(name) + ", ";
  return names + "auto_compile_threshold, instruction_log, backend";
}

bool to_bool(nb::handle v, const std::string& key) {
  if (!PyBool_Check(v.ptr())) {
    const std::string msg = "set_compile_config: '" + key + "' must be True or False, got " + py_str(nb::repr(v));
    throw nb::type_error(msg.c_str());
  }
  return v.ptr() == Py_True;
}

// ml.CpuBackend() / ml.ReferenceBackend() (or their names); None: the default (CPU). Framework
// backends run Python, which the auto-compile worker must never do, so they are refused.
std::shared_ptr<const Backend> to_build_backend(nb::handle v) {
  if (v.is_none()) return nullptr;
  if (nb::isinstance<nb::str>(v)) {
    const std::string name = nb::cast<std::string>(v);
    if (name == "cpu") return std::make_shared<CpuBackend>();
    if (name == "reference") return std::make_shared<ReferenceBackend>();
  } else if (nb::isinstance<CpuBackend>(v) || nb::isinstance<ReferenceBackend>(v)) {
    return std::shared_ptr<const Backend>(nb::cast<const Backend&>(v).clone());
  }
  const std::string msg = "set_compile_config: 'backend' must be ml.CpuBackend(...), ml.ReferenceBackend(), 'cpu', "
                          "'reference' or None (framework emitters cannot build compiled functions), got " +
                          py_str(nb::repr(v));
  throw nb::type_error(msg.c_str());
}

nb::dict config_dict(const CompileConfig& c) {
  nb::dict d;
  for (const auto& [name, member] : kSwitches) d[name] = c.*member;
  d["auto_compile_threshold"] = c.auto_compile_threshold;
  d["instruction_log"] = c.instruction_log;
  d["backend"] = c.backend ? nb::object(nb::str(c.backend->name().c_str())) : nb::none();
  return d;
}

void update_config(const nb::kwargs& changes) {
  CompileConfig c = compile_config();
  for (auto [k, v] : changes) {
    const std::string key = nb::cast<std::string>(k);
    auto it = std::find_if(std::begin(kSwitches), std::end(kSwitches), [&](const auto& s) { return key == s.first; });
    if (it != std::end(kSwitches)) c.*(it->second) = to_bool(v, key);
    else if (key == "auto_compile_threshold") c.auto_compile_threshold = nb::cast<int>(v);
    else if (key == "instruction_log") c.instruction_log = v.is_none() ? "" : py_str(nb::module_::import_("os").attr("fspath")(v));
    else if (key == "backend") c.backend = to_build_backend(v);
    else {
      const std::string msg = "set_compile_config() got an unknown setting '" + key + "' (valid: " + setting_names() + ")";
      throw nb::type_error(msg.c_str());
    }
  }
  set_compile_config(std::move(c));
}

}  // namespace

void bind_function_compile(nb::module_& m) {
  nb::class_<CompiledStateHandle>(m, "_CompiledState", "The executables compile(fn) cached for one function.")
      .def("__init__", [](CompiledStateHandle* self, bool shapeless) {
        new (self) CompiledStateHandle{detail::compiled_state("", {.shapeless = shapeless})};
      }, nb::arg("shapeless"));
  m.def("_call_compiled", [](CompiledStateHandle& h, const std::vector<Array>& args, const std::vector<bool>& borrowed,
                             nb::callable trace, const std::string& key) {
    return detail::call_compiled(*h.state, args, python_function(std::move(trace)), key, borrowed);
  }, nb::arg("state"), nb::arg("args"), nb::arg("borrowed"), nb::arg("trace"), nb::arg("key"),
        "Runs the executable cached for the arguments' signature (+ key), tracing `trace` first on a miss; "
        "borrowed[i]: args[i] is the caller's memory, copied where a result could keep it.");
  m.def("_compiled_signature", [](const CompiledStateHandle& h, const std::vector<Array>& args, const std::string& key) {
    return detail::call_signature(*h.state, args, key);
  }, nb::arg("state"), nb::arg("args"), nb::arg("key"), "The cache key _call_compiled uses.");
  m.def("_rebind", [](Array& target, const Array& value) { target = value; }, nb::arg("target"), nb::arg("value"),
        "Makes the ml.array object `target` hold `value` (compile's captured inputs are swapped this way).");
  m.def("_value_and_grad", [](nb::callable fn, const std::vector<Array>& args, const std::vector<int>& argnums) {
    return pair_of_lists(value_and_grad(python_function(std::move(fn)), argnums)(args));
  }, nb::arg("fn"), nb::arg("args"), nb::arg("argnums"), "ml.value_and_grad's implementation on flat lists.");
  m.def("_vjp", [](nb::callable fn, const std::vector<Array>& primals, const std::vector<Array>& cotangents) {
    return pair_of_lists(vjp(python_function(std::move(fn)), primals, cotangents));
  }, nb::arg("fn"), nb::arg("primals"), nb::arg("cotangents"), "ml.vjp's implementation on flat lists.");

  // Control flow (include/ingot/control_flow.h) on flat lists; ml.cond / while_loop / scan take trees.
  m.def("_cond", [](const Array& pred, nb::callable true_fn, nb::callable false_fn, const std::vector<Array>& operands) {
    return cond(pred, python_function(std::move(true_fn)), python_function(std::move(false_fn)), operands);
  }, nb::arg("pred"), nb::arg("true_fn"), nb::arg("false_fn"), nb::arg("operands"), "ml.cond on flat lists.");
  m.def("_while_loop", [](nb::callable cond_fn, nb::callable body_fn, const std::vector<Array>& init,
                          std::optional<int64_t> max_iterations) {
    auto c = [cond_fn = std::move(cond_fn)](const std::vector<Array>& xs) { return nb::cast<Array>(cond_fn(xs)); };
    return while_loop(c, python_function(std::move(body_fn)), init, max_iterations);
  }, nb::arg("cond_fn"), nb::arg("body_fn"), nb::arg("init"), nb::arg("max_iterations").none(),
        "ml.while_loop on flat lists.");
  m.def("_scan", [](nb::callable fn, const std::vector<Array>& init, const std::vector<Array>& xs, bool reverse) {
    auto step = [fn = std::move(fn)](const std::vector<Array>& carry, const std::vector<Array>& x) {
      return nb::cast<std::pair<std::vector<Array>, std::vector<Array>>>(fn(carry, x));
    };
    return pair_of_lists(scan(step, init, xs, reverse));
  }, nb::arg("fn"), nb::arg("init"), nb::arg("xs"), nb::arg("reverse"), "ml.scan on flat lists.");

  nb::class_<RandomStateSlot>(m, "RandomState",
                              "The global random state (an int64 scalar array each draw without a key reads and\n"
                              "advances). List ml.random.state in compile's inputs and outputs so a compiled\n"
                              "function draws fresh numbers on every call.")
      .def(nb::init<>())
      .def_prop_rw("value", [](const RandomStateSlot&) { return random::state(); },
                   [](RandomStateSlot&, const Array& v) { random::state() = v; }, "The state array (this thread's).");

  m.def("compile_count", &compile_count, "How many functions ml.compile has traced and built (cache hits do not count).");
  m.def("disable_compile", &disable_compile, "Compiled functions run uncompiled (and auto-compile stops) until enable_compile().");
  m.def("enable_compile", &enable_compile, "Undoes disable_compile().");
  m.def("compile_config", [] { return config_dict(compile_config()); },
        "The function-compile and auto-compile settings (first read from the INGOT_* environment variables).");
  m.def("set_compile_config", &update_config, nb::arg("changes"),
        "Changes the given settings and keeps the others: disable_compile, auto_compile, auto_compile_threshold,\n"
        "compile_all, debug, instruction_log, backend, inject_build_failure (see README). backend:\n"
        "ml.CpuBackend(...) (the default), ml.ReferenceBackend(), 'cpu' or 'reference'.");
  m.def("reset_compile_config", [] {
    enable_compile();
    set_compile_config(CompileConfig::from_env());
  }, "Back to the settings of the INGOT_* environment variables (and enable_compile()).");
  m.def("auto_compile_stats", [] {
    const AutoCompileStats s = auto_compile_stats();
    nb::dict d;
    d["evaluations"] = s.evaluations;
    d["eager_runs"] = s.eager_runs;
    d["compiled_runs"] = s.compiled_runs;
    d["compiles_started"] = s.compiles_started;
    d["compiles_finished"] = s.compiles_finished;
    d["compile_failures"] = s.compile_failures;
    d["distinct_graphs"] = s.distinct_graphs;
    return d;
  }, "The hot path's counters: evaluations, eager_runs, compiled_runs, compiles_started/finished, compile_failures, "
     "distinct_graphs.");
  m.def("wait_for_background_compiles", &wait_for_background_compiles, nb::call_guard<nb::gil_scoped_release>(),
        "Blocks until every queued auto-compile build has finished (for tests; eval never needs it).");
  m.def("reset_auto_compile", &reset_auto_compile, nb::call_guard<nb::gil_scoped_release>(),
        "Forgets every hot-path count and compiled graph, and zeroes the stats.");

  nb::class_<Region>(m, "compile_region",
                     "with ml.compile_region('training_loop'): ... evaluates everything inside as one unit:\n"
                     "ml.eval calls are deferred to the end of the block and run as one graph, which the hot\n"
                     "path counts and compiles (even without INGOT_AUTO_COMPILE). Reading data inside still\n"
                     "evaluates at once. An exception leaving the block drops the deferred work.")
      .def("__init__", [](Region* self, std::string name) { new (self) Region{std::move(name), nullptr}; },
           nb::arg("name"))
      .def("__enter__", [](nb::handle self) {
        Region& r = nb::cast<Region&>(self);
        INGOT_CHECK(!r.region, "compile_region '", r.name, "' is already open");
        r.region = std::make_unique<CompileRegion>(r.name);
        return nb::borrow(self);
      }, "Opens the region.")
      .def("__exit__", [](Region& r, nb::handle exc_type, nb::handle, nb::handle) {
        std::unique_ptr<CompileRegion> region = std::move(r.region);
        INGOT_CHECK(region != nullptr, "compile_region '", r.name, "' is not open");
        region->end(/*run_deferred=*/exc_type.is_none());
        return false;
      }, nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("traceback").none(),
           "Closes the region: runs the deferred evaluations, or drops them when the block raised.");
}

}  // namespace ingot::python
