// ingot: a compiler for machine-learning models. Include this one header.
//
//   #include <ingot/ingot.h>
//   using namespace ingot;
//   Model m;
//   m += Linear(256);  m += Relu();  m += Linear(10);
//   PhysicalModel pm = compile(m, ReferenceBackend(), {.shapes = {{"input", {"N", 784}}}});
//   TensorMap out = pm.evaluate(pm.randomize_params(0), {{"input", x}});
#pragma once

#include "ingot/array.h"
#include "ingot/compile.h"
#include "ingot/control_blocks.h"
#include "ingot/control_flow.h"
#include "ingot/cpu_backend.h"
#include "ingot/distributed.h"
#include "ingot/dtype.h"
#include "ingot/error.h"
#include "ingot/function_compile.h"
#include "ingot/graph.h"
#include "ingot/transforms.h"
#include "ingot/model.h"
#include "ingot/recurrent.h"
#include "ingot/models.h"
#include "ingot/physical_model.h"
#include "ingot/serialize.h"
#include "ingot/shape.h"
#include "ingot/tensor.h"
#include "ingot/train.h"
