// ONNX import and export. Import: a model exported from PyTorch, TensorFlow or a model zoo
// becomes an ingot logical Model, which compiles like any other. Export (save): an ingot model,
// as written or after ingot's optimizations, becomes an ONNX file (opset 17) that ONNX Runtime
// and other ONNX tools run.
//
//   ingot::Model m = ingot::onnx::load("resnet18.onnx");
//   ingot::PhysicalModel pm = ingot::compile(m, ingot::CpuBackend());
//   auto out = pm.evaluate({}, {{"input", x}});   // outputs under the graph's output names
//
// Graph inputs become inputs under their ONNX names (fixed dimensions as numbers, `dim_param`
// dimensions as symbols), graph outputs exposed outputs under theirs, and initializers the
// model's constants, so no parameter dictionary is needed. An initializer also listed among the
// graph inputs (older exporters) stays a constant. Tensors stored outside the file
// (external data, models over 2 GB) are read from beside it.
//
// Shape arithmetic that exporters emit (Shape, Gather on shapes, Concat, Unsqueeze, Cast,
// ConstantOfShape, Range, Reshape of a computed shape...) is evaluated while importing wherever
// its inputs are known then (the sizes of graph inputs, initializers, and intermediate values the
// file records in value_info); an op ingot has no conversion for, or shape arithmetic that depends
// on a size only known at run time, is a clear ingot::Error naming the node. The protobuf is
// parsed with Debian's libonnx-dev classes; ONNX's own shape inference is not run (it crashes on
// hostile files).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ingot/model.h"
#include "ingot/physical_model.h"


namespace ingot::onnx {

struct LoadOptions {
  // Where tensors with external data are read from; default: the model file's folder (load)
  // or the current folder (load_bytes). Their locations must stay inside it.
  std::string external_data_dir;
  // Graph inputs fixed to these values while importing: they become constants, so what depends
  // on them (a Reshape's target, Reduce axes, a TopK's k fed as an input) is known then. Names
  // that are no graph input are an error.
  std::map<std::string, Tensor> constants;
};

Model load(const std::string& path, const LoadOptions& options = {});
// The serialized ModelProto itself.
Model load_bytes(std::string_view bytes, const LoadOptions& options = {});

// For fine-tuning: the float initializers become trainable parameters (under their ONNX names)
// instead of constants, and their values come back as `params`, the initial parameters to
// evaluate, differentiate and train with. Integer initializers (shapes, indices) and values the
// import itself needs (a Reshape's target) stay constants; nothing that reads a parameter is
// folded while importing.
struct TrainableModel {
  Model model;
  TensorMap params;
};
TrainableModel load_trainable(const std::string& path, const LoadOptions& options = {});
TrainableModel load_trainable_bytes(std::string_view bytes, const LoadOptions& options = {});

// A serialized ONNX TensorProto (a .pb file, as the ONNX test suite and many tools store
// inputs and expected outputs); external data is read from beside the file.
Tensor load_tensor(const std::string& path);
// Writes `t` as a serialized TensorProto (raw data), atomically; load_tensor reads it back.
void save_tensor(const std::string& path, const Tensor& t);

struct SaveOptions {
  // Input shapes and dtypes, as for compile (symbols become dim_params).
  std::map<std::string, ShapeTemplate> shapes;
  std::map<std::string, DType> types;
  // The parameters' values: each becomes an initializer (every parameter needs one).
  TensorMap params;
  // Export the graph after ingot's optimization passes (constant folding, simplification,
  // fusion-independent rewrites) instead of as written.
  bool optimized = false;
};

// Writes `model` as ONNX (opset 17), atomically. Every op of the forward catalogue has an ONNX
// form (a few are written with several ONNX ops: rsqrt, gelu, moments, numel); gradient ops and
// random sources have none and are an error naming the op.
void save(const Model& model, const std::string& path, const SaveOptions& options = {});
std::string save_bytes(const Model& model, const SaveOptions& options = {});
// A compiled model: its optimized graph, with `params` as the initializers.
void save(const PhysicalModel& model, const std::string& path, const TensorMap& params = {});
std::string save_bytes(const PhysicalModel& model, const TensorMap& params = {});

// False when ingot was built without ONNX support (Debian: libonnx-dev libprotobuf-dev); load
// then throws an ingot::Error saying so.
bool available();

}  // namespace ingot::onnx
