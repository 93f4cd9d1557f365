// Fuzz target: .npy bytes (an input file `ingot run` reads) -> a tensor. Parsing must either
// succeed or throw ingot::Error, never crash, hang or allocate more than the input's size; what
// parses must serialize and parse back to the same dtype, shape and bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ingot/error.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ingot::Tensor t;
  try {
    t = ingot::npy::parse(bytes);
  } catch (const ingot::Error&) {
    return 0;  // rejected with a clear error: fine
  }
  const ingot::Tensor back = ingot::npy::parse(ingot::npy::serialize(t));
  if (back.dtype() != t.dtype() || back.shape() != t.shape() || back.nbytes() != t.nbytes() ||
      std::memcmp(back.raw_data(), t.raw_data(), static_cast<size_t>(t.nbytes())) != 0)
    std::abort();
  return 0;
}
