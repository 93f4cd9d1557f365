// The parts of the extension module, one function per binding file.
#pragma once

#include <nanobind/nanobind.h>

#include "ingot/compile.h"

namespace ingot::python {

void bind_model(nanobind::module_& m);    // bind_model.cpp: Model, Connection, IOKey, the zoo
void bind_compile(nanobind::module_& m);  // bind_compile.cpp: backends, compile, PhysicalModel
void bind_profile(nanobind::module_& m);  // bind_profile.cpp: profile sessions
void bind_array(nanobind::module_& m);    // bind_array.cpp: ml.array (lazy arrays)
void bind_array_ops(nanobind::module_& m);  // bind_array_ops.cpp: ml.exp, ml.sum, ..., random
void bind_function_compile(nanobind::module_& m);  // bind_function_compile.cpp: compile(fn), grad, auto-compile
void bind_onnx(nanobind::module_& m);     // bind_onnx.cpp: ml.onnx.load
void bind_distributed(nanobind::module_& m);  // bind_distributed.cpp: ml.distributed (MPI collectives)
void bind_train(nanobind::module_& m);  // bind_train.cpp: TrainModel, optimizers, TrainStep (after bind_distributed)

// The options dict of ml.compile as CompileOptions (bind_compile.cpp).
CompileOptions to_options(const nanobind::dict& kwargs);

}  // namespace ingot::python
