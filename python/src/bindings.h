// The parts of the extension module, one function per binding file.
#pragma once

#include <nanobind/nanobind.h>

namespace ingot::python {

void bind_model(nanobind::module_& m);    // bind_model.cpp: Model, Connection, IOKey, the zoo
void bind_compile(nanobind::module_& m);  // bind_compile.cpp: backends, compile, PhysicalModel
void bind_profile(nanobind::module_& m);  // bind_profile.cpp: profile sessions

}  // namespace ingot::python
