// ingot::onnx without ONNX support (built where libonnx-dev was not found): a clear error.
#include "ingot/error.h"
#include "ingot/onnx.h"

namespace ingot::onnx {

bool available() { return false; }

Model load_bytes(std::string_view, const LoadOptions&) {
  INGOT_FAIL("ONNX import: this ingot was built without ONNX support; install libonnx-dev and libprotobuf-dev "
             "(Debian) and rebuild");
}

TrainableModel load_trainable(const std::string& path, const LoadOptions& options) {
  return {load(path, options), {}};
}

TrainableModel load_trainable_bytes(std::string_view bytes, const LoadOptions& options) {
  return {load_bytes(bytes, options), {}};
}

Tensor load_tensor(const std::string& path) {
  INGOT_FAIL("ONNX tensor ", path, ": this ingot was built without ONNX support; install libonnx-dev and "
             "libprotobuf-dev (Debian) and rebuild");
}

Model load(const std::string& path, const LoadOptions& options) {
  (void)options;
  INGOT_FAIL("ONNX import of ", path, ": this ingot was built without ONNX support; install libonnx-dev and "
             "libprotobuf-dev (Debian) and rebuild");
}

namespace {
[[noreturn]] void no_export() {
  INGOT_FAIL("ONNX export: this ingot was built without ONNX support; install libonnx-dev and libprotobuf-dev "
             "(Debian) and rebuild");
}
}  // namespace

void save(const Model&, const std::string&, const SaveOptions&) { no_export(); }
std::string save_bytes(const Model&, const SaveOptions&) { no_export(); }
void save(const PhysicalModel&, const std::string&, const TensorMap&) { no_export(); }
std::string save_bytes(const PhysicalModel&, const TensorMap&) { no_export(); }
void save_tensor(const std::string&, const Tensor&) { no_export(); }

}  // namespace ingot::onnx
