// Fuzz target: an ONNX model (ingot::onnx::load_bytes) -> Model. Importing must either succeed
// or throw ingot::Error (never crash, hang or allocate without bound, whatever the protobuf
// holds); a model that imports must save to JSON that loads again.
#include <cstdint>
#include <string_view>

#include "ingot/error.h"
#include "ingot/model.h"
#include "ingot/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ingot::Model m = ingot::onnx::load_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)ingot::Model::from_json(m.to_json()).terminals();
  } catch (const ingot::Error&) {
  }
  return 0;
}
