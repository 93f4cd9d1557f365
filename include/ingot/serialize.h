// Named tensors in the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian u64] [N bytes: JSON header, space-padded] [raw tensor data]
//
// The header maps each tensor name to {"dtype": "F32", "shape": [2, 3], "data_offsets":
// [begin, end]} (offsets into the data section), plus an optional "__metadata__" string map.
//
//   save_safetensors("model.safetensors", {{"w", w}, {"b", b}}, {{"format", "pt"}});
//   std::map<std::string, Tensor> t = load_safetensors("model.safetensors");
#pragma once

#include <map>
#include <string>

#include "ingot/tensor.h"

namespace ingot {

// Writes atomically: a temporary file in the same directory, flushed to disk, then renamed
// over `path`, so readers see the old file or the new one, never a partial one.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Validates the whole header (sizes, dtypes, offsets, full coverage of the data) before reading
// any data, and throws ingot::Error naming the file and the problem on anything malformed.
std::map<std::string, Tensor> load_safetensors(
    const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

std::string to_safetensors_bytes(const std::map<std::string, Tensor>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});
std::map<std::string, Tensor> from_safetensors_bytes(
    const std::string& bytes, std::map<std::string, std::string>* metadata = nullptr);

}  // namespace ingot
