// compile(), the backends (Reference, Cpu, and Python-emitter backends served by ingot.emitters)
// and PhysicalModel. Evaluations and compiles release the GIL; Python objects held by C++ are
// released under the GIL whatever thread drops them.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "compiler/gradient_pipeline.h"
#include "ingot/compile.h"
#include "ingot/cpu_backend.h"
#include "ingot/error.h"
#include "ir/graph_json.h"
#include "ir/op_registry.h"

namespace ingot::python {

namespace {

// A Python object C++ may copy and drop without holding the GIL.
using SharedObject = std::shared_ptr<nb::object>;
SharedObject share(nb::object o) {
  return SharedObject(new nb::object(std::move(o)), [](nb::object* p) {
    nb::gil_scoped_acquire gil;
    delete p;
  });
}

// Runs the function a Python emitter generated (ingot/emitters): it takes the run inputs as
// NumPy arrays and returns the outputs, which must have the graph's dtypes and shapes.
class PythonExecutable final : public Executable {
 public:
  PythonExecutable(std::string backend, SharedObject runner, const Graph& g) : backend_(std::move(backend)), runner_(std::move(runner)) {
    for (const auto& [name, v] : g.outputs()) outputs_.push_back({name, g.value(v).dtype});
  }

  std::vector<Tensor> run(std::span<const Tensor> inputs) const override {
    nb::gil_scoped_acquire gil;
    nb::list args;
    for (const Tensor& t : inputs) args.append(to_numpy(t));
    nb::object result;
    try {
      result = (*runner_)(args);
    } catch (nb::python_error& e) {
      INGOT_FAIL(backend_, ": the generated code failed: ", e.what());
    }
    std::vector<Tensor> out;
    for (nb::handle r : result) {
      const size_t i = out.size();
      INGOT_CHECK(i < outputs_.size(), backend_, ": the generated code returned too many outputs");
      Tensor t = to_tensor(r, "output '" + outputs_[i].first + "'");
      INGOT_CHECK(t.dtype() == outputs_[i].second, backend_, ": output '", outputs_[i].first, "' is ", dtype_name(t.dtype()),
                  ", expected ", dtype_name(outputs_[i].second));
      out.push_back(std::move(t));
    }
    INGOT_CHECK(out.size() == outputs_.size(), backend_, ": the generated code returned ", out.size(), " outputs, expected ",
                outputs_.size());
    return out;
  }

  std::string source() const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::string>(runner_->attr("source"));
  }

 private:
  std::string backend_;
  SharedObject runner_;
  std::vector<std::pair<std::string, DType>> outputs_;
};

// A backend whose code is generated in Python: `emitter.lower(graph_json)` returns the runner.
class PythonBackend final : public Backend {
 public:
  PythonBackend(std::string name, SharedObject emitter) : name_(std::move(name)), emitter_(std::move(emitter)) {}
  std::string name() const override { return name_; }
  std::unique_ptr<Executable> lower(const Graph& graph, const CompileOptions&) const override {
    const std::string json = print_graph(graph, DumpFormat::Json);
    nb::gil_scoped_acquire gil;
    nb::object runner;
    try {
      runner = emitter_->attr("lower")(json);
    } catch (nb::python_error& e) {
      e.restore();
      throw nb::python_error();  // keeps the Python exception (e.g. a missing framework) as it is
    }
    return std::make_unique<PythonExecutable>(name_, share(runner), graph);
  }
  std::unique_ptr<Backend> clone() const override { return std::make_unique<PythonBackend>(name_, emitter_); }

 private:
  std::string name_;
  SharedObject emitter_;
};

std::vector<std::string> to_strings(nb::handle obj, const std::string& option) {
  INGOT_CHECK(!nb::isinstance<nb::str>(obj), "Option '", option, "': expected a list of names, got a string");
  std::vector<std::string> out;
  for (nb::handle x : obj) out.push_back(py_str(x));
  return out;
}

CustomPass to_custom_pass(nb::handle item) {
  INGOT_CHECK(nb::isinstance<nb::tuple>(item) && nb::len(item) == 3,
              "custom_passes entries are (name, after, fn) tuples; fn(graph: dict) returns a new graph dict or None");
  CustomPass p;
  p.name = nb::cast<std::string>(item[0]);
  p.after = nb::cast<std::string>(item[1]);
  SharedObject fn = share(nb::borrow(item[2]));
  p.fn = [fn](Graph& g) {
    const std::string in = print_graph(g, DumpFormat::Json);
    std::string out;
    {
      nb::gil_scoped_acquire gil;
      nb::module_ json = nb::module_::import_("json");
      nb::object r = (*fn)(json.attr("loads")(in));
      if (r.is_none()) return;
      out = nb::cast<std::string>(json.attr("dumps")(r));
    }
    g = graph_from_json(out);
  };
  return p;
}

// A Python function (source: str) -> str; anything else it returns is an error naming the type.
CodeTransformer to_code_transformer(nb::handle item) {
  INGOT_CHECK(PyCallable_Check(item.ptr()), "Option 'code_transformers': entries are functions (source: str) -> str, got ",
              nb::cast<std::string>(nb::str(item.type().attr("__name__"))));
  SharedObject fn = share(nb::borrow(item));
  return [fn](const std::string& source) {
    nb::gil_scoped_acquire gil;
    nb::object r;
    try {
      r = (*fn)(nb::str(source.c_str(), source.size()));
    } catch (nb::python_error& e) {  // "RuntimeError: why", not the whole traceback
      INGOT_FAIL(nb::cast<std::string>(nb::str(e.type().attr("__name__"))), ": ", nb::cast<std::string>(nb::str(e.value())));
    }
    INGOT_CHECK(nb::isinstance<nb::str>(r), "a code transformer returned ",
                nb::cast<std::string>(nb::str(r.type().attr("__name__"))), ", not the source as a str");
    return nb::cast<std::string>(r);
  };
}

std::string option_string(nb::handle v) {
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v) ? "true" : "false";
  if (nb::hasattr(v, "__fspath__")) return nb::cast<std::string>(v.attr("__fspath__")());
  return py_str(v);
}

// A dict option (optimizations, hints, cpu_options) in CompileOptions::set's string form:
// {"cse": False} -> "cse=false", {"input_batch_size_range": (1, 32)} -> "input_batch_size_range=1:32".
// A string is taken as that form already.
std::string dict_option_string(const std::string& name, nb::handle v) {
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  INGOT_CHECK(nb::isinstance<nb::dict>(v), "Option '", name, "': expected a dict, got ",
              nb::cast<std::string>(nb::str(v.type().attr("__name__"))));
  std::string spec;
  for (auto [key, value] : nb::cast<nb::dict>(v)) {
    std::string text;
    if (nb::isinstance<nb::tuple>(value) || nb::isinstance<nb::list>(value)) {
      for (nb::handle x : value) text += (text.empty() ? "" : ":") + option_string(x);
      INGOT_CHECK(nb::len(value) == 2, "Option '", name, "': '", py_str(key), "' must be a (lo, hi) pair, got ",
                  nb::len(value), " items");
    } else {
      text = option_string(value);
    }
    spec += (spec.empty() ? "" : ",") + py_str(key) + "=" + text;
  }
  return spec;
}

}  // namespace

// Every CompileOptions field by name; plain values go through CompileOptions::set, which rejects
// unknown names listing the valid ones.
CompileOptions to_options(const nb::dict& kwargs) {
  CompileOptions o;
  for (auto [k, v] : kwargs) {
    const std::string name = nb::cast<std::string>(k);
    if (v.is_none()) continue;  // None: keep the default
    if (name == "shapes") {
      for (auto [tk, tv] : nb::cast<nb::dict>(v)) o.shapes[nb::cast<std::string>(tk)] = to_shape_template(tv);
    } else if (name == "types") {
      for (auto [tk, tv] : nb::cast<nb::dict>(v)) o.types[nb::cast<std::string>(tk)] = to_dtype(tv);
    } else if (name == "constant_keys") {
      for (auto [tk, tv] : nb::cast<nb::dict>(v)) {
        const std::string key = nb::cast<std::string>(tk);
        o.constant_keys[key] = to_tensor(tv, "constant_keys['" + key + "']").clone();
      }
    } else if (name == "data_keys") {
      o.data_keys = to_strings(v, name);
    } else if (name == "trainable_keys") {
      o.trainable_keys = to_strings(v, name);
    } else if (name == "discard_keys") {
      o.discard_keys = to_strings(v, name);
    } else if (name == "outputs") {
      o.outputs = to_strings(v, name);
    } else if (name == "optimizations" || name == "hints" || name == "cpu_options") {
      o.set(name, dict_option_string(name, v));
    } else if (name == "custom_passes") {
      for (nb::handle item : v) o.custom_passes.push_back(to_custom_pass(item));
    } else if (name == "code_transformers") {
      INGOT_CHECK(!PyCallable_Check(v.ptr()) && !nb::isinstance<nb::str>(v),
                  "Option 'code_transformers': expected a list of functions (source: str) -> str");
      for (nb::handle item : v) o.code_transformers.push_back(to_code_transformer(item));
    } else {
      o.set(name, option_string(v));
    }
  }
  o.validate();
  return o;
}

namespace {

nb::dict shapes_dict(const std::map<std::string, SymShape>& shapes) {
  nb::dict d;
  for (const auto& [name, s] : shapes) d[nb::str(name.c_str(), name.size())] = from_sym_shape(s);
  return d;
}

}  // namespace

void bind_compile(nb::module_& m) {
  nb::class_<Backend>(m, "Backend", "Where a compiled model runs.")
      .def_prop_ro("name", &Backend::name, "The backend's name ('reference', 'cpu', 'numpy', ...).");
  nb::class_<ReferenceBackend, Backend>(m, "ReferenceBackend",
                                        "The reference interpreter: runs each op's reference kernel (the oracle).")
      .def(nb::init<>());
  nb::class_<CpuBackend, Backend>(m, "CpuBackend",
                                  "Native code: the graph becomes one generated C++ library (fused loops, BLAS),\n"
                                  "built with the system compiler and cached on disk.")
      .def(
          "__init__",
          [](CpuBackend* self, bool cache, std::optional<std::string> cache_dir, std::optional<std::string> compiler,
             std::vector<std::string> extra_flags, int num_threads, bool winograd, bool blas, bool dnnl_matmul) {
            CpuBackend::CpuOptions o;
            o.cache = cache;
            o.cache_dir = cache_dir.value_or("");
            o.compiler = compiler.value_or("");
            o.extra_flags = std::move(extra_flags);
            INGOT_CHECK(num_threads >= 0, "CpuBackend: num_threads must be >= 0, got ", num_threads);
            o.num_threads = num_threads;
            o.winograd = winograd;
            o.blas = blas;
            o.dnnl_matmul = dnnl_matmul;
            new (self) CpuBackend(o);
          },
          nb::kw_only(), nb::arg("cache") = true, nb::arg("cache_dir").none() = nb::none(),
          nb::arg("compiler").none() = nb::none(), nb::arg("extra_flags") = std::vector<std::string>{},
          nb::arg("num_threads") = 0, nb::arg("winograd") = true, nb::arg("blas") = true, nb::arg("dnnl_matmul") = true,
          "cache: use the disk cache; cache_dir: default $INGOT_CACHE_DIR, $XDG_CACHE_HOME/ingot or ~/.cache/ingot;\n"
          "compiler: default $INGOT_CXX, $CXX, c++/g++/clang++; extra_flags: appended to the build command;\n"
          "num_threads: OpenMP threads per call (0: OpenMP's default; compile's cpu_options overrides it); winograd: 3x3 stride-1 float32\n"
          "convs run oneDNN's Winograd kernels where it has them (AVX-512): faster, a few times the rounding error (False: direct);\n"
          "blas: products in oneDNN's sgemm and OpenBLAS (else in plain loops, as without a BLAS library);\n"
          "dnnl_matmul: float32 matmuls by constant weights (up to 256 rows) run as oneDNN 1x1 convolutions, weights reordered once at\n"
          "load, bias / activation / residual add inside (False: sgemm and a pass).")
      .def_prop_ro("cache", [](const CpuBackend& b) { return b.options().cache; })
      .def_prop_ro("cache_dir", [](const CpuBackend& b) { return b.options().cache_dir; })
      .def_prop_ro("compiler", [](const CpuBackend& b) { return b.options().compiler; })
      .def_prop_ro("extra_flags", [](const CpuBackend& b) { return b.options().extra_flags; })
      .def_prop_ro("num_threads", [](const CpuBackend& b) { return b.options().num_threads; })
      .def_prop_ro("winograd", [](const CpuBackend& b) { return b.options().winograd; })
      .def_prop_ro("blas", [](const CpuBackend& b) { return b.options().blas; })
      .def_prop_ro("dnnl_matmul", [](const CpuBackend& b) { return b.options().dnnl_matmul; })
      .def_static("compile_count", &CpuBackend::compile_count, "How many times this process ran the C++ compiler.");
  nb::class_<PythonBackend, Backend>(m, "PythonBackend", "A backend whose code an ingot.emitters emitter generates.")
      .def("__init__", [](PythonBackend* self, std::string name, nb::object emitter) {
        new (self) PythonBackend(std::move(name), share(std::move(emitter)));
      }, nb::arg("name"), nb::arg("emitter"), "`emitter.lower(graph_json)` returns the runner.");

  m.def("compile_option_names", &CompileOptions::option_names, "Every keyword ingot.compile accepts besides the backend.");
  m.def("op_names", [] {
    std::vector<std::string> out;
    for (const OpDef* op : all_ops()) out.push_back(op->name);
    return out;
  }, "The op catalogue (src/ops/families.h), sorted by name.");
  m.def("elementwise_forms", [] {
    nb::dict out;
    for (const OpDef* op : all_ops()) {
      if (!op->elementwise) continue;
      nb::dict form;
      form["kind"] = std::string(elementwise_kind_name(op->elementwise->kind));
      form["arity"] = op->min_inputs;
      form["python"] = op->elementwise->python;
      form["onnx"] = op->elementwise->onnx;
      out[op->name.c_str()] = form;
    }
    return out;
  }, "The elementwise ops' forms (ElementwiseForms in src/ir/op_registry.h) by op name: kind, arity,\n"
     "python (an expression over x or a, b and array-API functions; '' when each emitter writes it), onnx.");

  nb::class_<PhysicalModel>(m, "PhysicalModel", "A compiled model (see ingot.PhysicalModel for the documented wrapper).")
      .def("randomize_params", [](const PhysicalModel& pm, uint64_t seed) { return to_dict(pm.randomize_params(seed)); },
           nb::arg("seed") = 0, "Fresh parameters from their initializers, deterministic per seed.")
      .def("evaluate", [](const PhysicalModel& pm, const nb::dict& params, const nb::dict& inputs) {
             TensorMap p = to_tensor_map(params, "parameter"), in = to_tensor_map(inputs, "input");
             TensorMap out;
             {
               nb::gil_scoped_release nogil;
               out = pm.evaluate(p, in);
             }
             return to_dict(out);
           }, nb::arg("params"), nb::arg("inputs"), "Runs the model (GIL released); returns {output: array}.")
      .def("evaluate_with_gradients",
           [](const PhysicalModel& pm, const nb::dict& params, const nb::dict& inputs, const nb::dict& output_gradients) {
             TensorMap p = to_tensor_map(params, "parameter"), in = to_tensor_map(inputs, "input"),
                       cot = to_tensor_map(output_gradients, "output gradient");
             Evaluation r;
             {
               nb::gil_scoped_release nogil;
               r = pm.evaluate(p, in, cot);
             }
             return nb::make_tuple(to_dict(r.outputs), to_dict(r.gradients));
           }, nb::arg("params"), nb::arg("inputs"), nb::arg("output_gradients"),
           "Runs the model and ingot's backward graph; returns (outputs, gradients).")
      .def("gradient_names", &PhysicalModel::gradient_names, "What gets a gradient.")
      .def("get_shapes", [](const PhysicalModel& pm) { return shapes_dict(pm.get_shapes()); },
           "Shape of every terminal; symbols stay strings.")
      .def("get_types", [](const PhysicalModel& pm) {
             nb::dict out;
             for (const auto& [name, t] : pm.get_types()) out[name.c_str()] = dtype_object(t);
             return out;
           }, nb::sig("def get_types(self) -> dict[str, ingot.DType]"), "The dtype of every terminal (ml.float32, ...).")
      .def("input_names", &PhysicalModel::input_names, "The run-time data inputs.")
      .def("parameter_names", &PhysicalModel::parameter_names, "The parameters.")
      .def("constant_names", &PhysicalModel::constant_names, "The constants.")
      .def("output_names", &PhysicalModel::output_names, "The outputs.")
      .def("parameter_count", &PhysicalModel::parameter_count, "Total elements of statically shaped parameters.")
      .def("summary", &PhysicalModel::summary, "Terminals with types and shapes, as text.")
      .def("graph_json", [](const PhysicalModel& pm) { return print_graph(pm.graph(), DumpFormat::Json); },
           "The optimized graph as JSON.")
      .def("graph_text", [](const PhysicalModel& pm) { return print_graph(pm.graph(), DumpFormat::Text); },
           "The optimized graph as text.")
      .def("save_params", [](const PhysicalModel& pm, const std::string& path, const nb::dict& params) {
             pm.save_params(path, to_tensor_map(params, "parameter"));
           }, nb::arg("path"), nb::arg("params"), "Writes parameters as safetensors.")
      .def("load_params", [](const PhysicalModel& pm, const std::string& path) { return to_dict(pm.load_params(path)); },
           nb::arg("path"), "Reads parameters saved with save_params (checked against the model).");

  m.def("compile", [](const Model& model, const Backend& backend, const nb::dict& options) {
          CompileOptions o = to_options(options);
          nb::gil_scoped_release nogil;
          return compile(model, backend, o);
        }, nb::arg("model"), nb::arg("backend"), nb::arg("options"),
        "Compiles `model` for `backend` with the options dict (see ingot.compile).");

  // ml.compile's backend_map (ingot/_backend_map.py): the whole model's inferred graph, partitioned
  // in Python by Node::backend, then each segment compiled alone by its backend.
  m.def("_inferred_graph_json", [](const Model& model, const nb::dict& options) {
          CompileOptions o = to_options(options);
          nb::gil_scoped_release nogil;
          return print_graph(build_inferred_graph(model, o), DumpFormat::Json);
        }, nb::arg("model"), nb::arg("options"),
        "The flattened, shape- and type-inferred graph of `model` before optimization, as JSON.");
  m.def("_compile_graph", [](const std::string& graph_json, const Backend& backend, const nb::dict& options) {
          CompileOptions o = to_options(options);
          nb::gil_scoped_release nogil;
          Graph g = graph_from_json(graph_json);
          verify(g);
          return compile_inferred(std::move(g), backend, o);
        }, nb::arg("graph_json"), nb::arg("backend"), nb::arg("options"),
        "Compiles an inferred graph (the JSON of _inferred_graph_json, or a part of it) for `backend`.");

  // Test helpers: the array <-> Tensor conversions alone.
  m.def("_roundtrip", [](nb::handle obj) { return to_numpy(to_tensor(obj, "the argument")); }, nb::arg("array"),
        "NumPy view of the Tensor ingot makes of `array` (tests use it to prove no copy is made).");
  m.def("_tensor_info", [](nb::handle obj) {
          const Tensor t = to_tensor(obj, "the argument");
          return nb::make_tuple(std::string(dtype_name(t.dtype())), reinterpret_cast<uintptr_t>(t.raw_data()));
        }, nb::arg("array"), "(dtype name, data address) of the Tensor ingot makes of `array`.");
}

}  // namespace ingot::python
