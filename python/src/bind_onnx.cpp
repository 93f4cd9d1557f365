// ml.onnx: ONNX import (ingot/onnx.h). load() takes a path or the model's bytes.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "convert.h"
#include "ingot/model.h"
#include "ingot/onnx.h"

#include <optional>

namespace ingot::python {

void bind_onnx(nb::module_& m) {
  nb::module_ o = m.def_submodule("onnx", "ONNX import: ml.onnx.load(path_or_bytes) -> Model");
  o.def(
      "load",
      [](nb::handle source, std::optional<nb::dict> constants, std::string external_data_dir) {
        onnx::LoadOptions options;
        options.external_data_dir = std::move(external_data_dir);
        if (constants) options.constants = to_tensor_map(*constants, "constants");
        if (nb::isinstance<nb::bytes>(source)) {
          const nb::bytes b = nb::borrow<nb::bytes>(source);
          return onnx::load_bytes(std::string_view(b.c_str(), b.size()), options);
        }
        return onnx::load(py_str(nb::module_::import_("os").attr("fspath")(source)), options);
      },
      nb::arg("source"), nb::arg("constants") = nb::none(), nb::arg("external_data_dir") = "",
      "An ONNX model (a path, or the serialized bytes) as an ingot Model: graph inputs and outputs "
      "under their ONNX names, initializers as constants. `constants` fixes graph inputs to values "
      "while importing (shape-deciding inputs such as axes); external data is read from "
      "`external_data_dir` (default: the model's folder).");
  o.def(
      "load_tensor", [](const std::string& path) { return to_numpy(onnx::load_tensor(path)); }, nb::arg("path"),
      "A serialized ONNX TensorProto (.pb) as a NumPy array.");
  o.def("available", &onnx::available, "False when ingot was built without ONNX support.");
}

}  // namespace ingot::python
