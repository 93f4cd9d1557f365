// Fuzz target: a saved logical model (Model::to_json / Model::load) -> Model. Parsing must either
// succeed or throw ingot::Error; a model that parses must print its summary and save back to JSON
// that parses again.
#include <cstdint>
#include <string>

#include "ingot/error.h"
#include "ingot/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ingot::Model m = ingot::Model::from_json(text);
    (void)m.terminals();
    const ingot::Model again = ingot::Model::from_json(m.to_json());
    (void)again.summary();
  } catch (const ingot::Error&) {
  }
  return 0;
}
