// Fuzz target: safetensors bytes (a parameter file a user may get from anyone) -> tensors.
// Loading must either succeed or throw ingot::Error, never crash, hang or allocate without bound;
// what loads must save and load back to the same names, dtypes, shapes and bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "ingot/error.h"
#include "ingot/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> metadata;
  std::map<std::string, ingot::Tensor> tensors;
  try {
    tensors = ingot::from_safetensors_bytes(bytes, &metadata);
  } catch (const ingot::Error&) {
    return 0;  // rejected with a clear error: fine
  }
  const std::map<std::string, ingot::Tensor> back =
      ingot::from_safetensors_bytes(ingot::to_safetensors_bytes(tensors, metadata));
  if (back.size() != tensors.size()) std::abort();
  for (const auto& [name, t] : tensors) {
    const ingot::Tensor& u = back.at(name);
    if (u.dtype() != t.dtype() || u.shape() != t.shape() || u.nbytes() != t.nbytes() ||
        std::memcmp(u.raw_data(), t.raw_data(), static_cast<size_t>(t.nbytes())) != 0)
      std::abort();
  }
  return 0;
}
