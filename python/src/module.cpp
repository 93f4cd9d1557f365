// ingot._ingot: the extension module. ingot::Error becomes ingot.IngotError (a ValueError) with
// the message intact.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "ingot/error.h"

NB_MODULE(_ingot, m) {
  m.doc() = "ingot's C++ compiler (use the `ingot` package, which wraps this module)";
  nanobind::exception<ingot::Error>(m, "IngotError", PyExc_ValueError);
  ingot::python::bind_model(m);
  ingot::python::bind_compile(m);
  ingot::python::bind_profile(m);
  ingot::python::bind_array(m);
  ingot::python::bind_array_ops(m);
  ingot::python::bind_function_compile(m);
  ingot::python::bind_onnx(m);
  ingot::python::bind_distributed(m);
  ingot::python::bind_train(m);
}
