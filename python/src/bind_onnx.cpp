// ml.onnx: ONNX import and export (ingot/onnx.h). load() takes a path or the model's bytes;
// save() a Model or a PhysicalModel, and a path (or None for the bytes).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "convert.h"
#include "ingot/model.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"

#include <optional>
#include <string>

namespace ingot::python {

void bind_onnx(nb::module_& m) {
  nb::module_ o = m.def_submodule(
      "onnx", "ONNX import and export: ml.onnx.load(path_or_bytes) -> Model; ml.onnx.save(model, path, params=...)");
  o.def(
      "load",
      [](nb::handle source, std::optional<nb::dict> constants, std::string external_data_dir,
         bool trainable) -> nb::object {
        onnx::LoadOptions options;
        options.external_data_dir = std::move(external_data_dir);
        if (constants) options.constants = to_tensor_map(*constants, "constants");
        onnx::TrainableModel r;
        if (nb::isinstance<nb::bytes>(source)) {
          const nb::bytes b = nb::borrow<nb::bytes>(source);
          const std::string_view bytes(b.c_str(), b.size());
          if (trainable) r = onnx::load_trainable_bytes(bytes, options);
          else r.model = onnx::load_bytes(bytes, options);
        } else {
          const std::string path = py_str(nb::module_::import_("os").attr("fspath")(source));
          if (trainable) r = onnx::load_trainable(path, options);
          else r.model = onnx::load(path, options);
        }
        if (!trainable) return nb::cast(std::move(r.model));
        return nb::make_tuple(std::move(r.model), to_dict(r.params));
      },
      nb::arg("source"), nb::arg("constants") = nb::none(), nb::arg("external_data_dir") = "",
      nb::arg("trainable") = false,
      "An ONNX model (a path, or the serialized bytes) as an ingot Model: graph inputs and outputs "
      "under their ONNX names, initializers as constants. `constants` fixes graph inputs to values "
      "while importing (shape-deciding inputs such as axes); external data is read from "
      "`external_data_dir` (default: the model's folder). trainable=True returns (model, params): "
      "the float initializers become trainable parameters, `params` their values, to fine-tune from.");
  o.def(
      "load_tensor", [](const std::string& path) { return to_numpy(onnx::load_tensor(path)); }, nb::arg("path"),
      "A serialized ONNX TensorProto (.pb) as a NumPy array.");
  o.def(
      "save",
      [](nb::handle model, nb::handle path, std::optional<nb::dict> params, std::optional<nb::dict> shapes,
         std::optional<nb::dict> types, bool optimized) -> nb::object {
        const TensorMap p = params ? to_tensor_map(*params, "params") : TensorMap{};
        // The file is written atomically (a temporary beside it, then renamed).
        const std::optional<std::string> file =
            path.is_none() ? std::nullopt : std::optional(py_str(nb::module_::import_("os").attr("fspath")(path)));
        std::string bytes;
        // ml.compile's PhysicalModel wraps the extension's one.
        nb::object inner;
        if (!nb::isinstance<PhysicalModel>(model) && nb::hasattr(model, "_pm")) {
          inner = model.attr("_pm");
          model = inner;
        }
        if (nb::isinstance<PhysicalModel>(model)) {
          if (shapes || types || optimized)
            throw Error("ml.onnx.save: shapes, types and optimized are for a Model; a PhysicalModel is saved as "
                        "compiled (its optimized graph)");
          const PhysicalModel& pm = nb::cast<const PhysicalModel&>(model);
          if (file) onnx::save(pm, *file, p);
          else bytes = onnx::save_bytes(pm, p);
        } else if (nb::isinstance<Model>(model)) {
          onnx::SaveOptions o;
          o.params = p;
          o.optimized = optimized;
          if (shapes)
            for (auto [k, v] : *shapes) o.shapes[nb::cast<std::string>(k)] = to_shape_template(v);
          if (types)
            for (auto [k, v] : *types) o.types[nb::cast<std::string>(k)] = to_dtype(v);
          if (file) onnx::save(nb::cast<const Model&>(model), *file, o);
          else bytes = onnx::save_bytes(nb::cast<const Model&>(model), o);
        } else {
          throw Error("ml.onnx.save: expected an ingot Model or PhysicalModel, got " +
                      py_str(nb::type_name(model.type())));
        }
        if (file) return nb::none();
        return nb::bytes(bytes.data(), bytes.size());
      },
      nb::arg("model"), nb::arg("path") = nb::none(), nb::arg("params") = nb::none(), nb::arg("shapes") = nb::none(),
      nb::arg("types") = nb::none(), nb::arg("optimized") = false,
      "Writes an ingot Model (with `params` as its initializers, `shapes`/`types` as for compile, "
      "`optimized=True` for the graph after ingot's passes) or a PhysicalModel (its optimized graph) as "
      "ONNX opset 17 to `path`, atomically; with no path, returns the bytes.");
  o.def("available", &onnx::available, "False when ingot was built without ONNX support.");
}

}  // namespace ingot::python
