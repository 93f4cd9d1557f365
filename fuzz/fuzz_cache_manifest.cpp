// Fuzz target: the disk cache's `<key>.manifest` (any bytes another process or a damaged disk may
// leave) checked against a library's bytes. It must answer without crashing, and only a manifest
// naming this key, size and hash may match.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cpu/cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string manifest(reinterpret_cast<const char*>(data), size);
  const std::string so = "\x7f" "ELF library bytes";
  const std::string key = ingot::cpu::fnv1a128_hex("key");
  const bool matches = ingot::cpu::manifest_matches(manifest, key, so);
  // A match names the hash of these bytes; nothing else can.
  if (matches && manifest.find(ingot::cpu::fnv1a128_hex(so)) == std::string::npos) std::abort();
  return 0;
}
