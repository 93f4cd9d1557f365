// NumPy's array files: .npy (format versions 1.0 to 3.0, C order, little-endian or one-byte
// types) and .npz archives of them (zip, through libzip). `ingot run` reads inputs from .npy
// files and writes its outputs as one .npz, so models move between ingot and NumPy as files.
// Reading is defensive: every file is outside input, and a bad one is an ingot::Error naming
// what is wrong, never a crash (fuzzed: fuzz/fuzz_npy.cpp).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingot/tensor.h"

namespace ingot::npy {

// The tensor a .npy file's bytes hold; `what` names the file in errors.
Tensor parse(std::string_view bytes, const std::string& what = "npy data");
// The .npy bytes (format 1.0, or 2.0 when the header needs it) of `t` in C order.
std::string serialize(const Tensor& t);

Tensor load(const std::string& path);

// Writes `arrays` as an .npz (stored, like np.savez), each as "<name>.npy", atomically: readers
// see the old file or the whole new one. Errors if ingot was built without libzip.
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays);
// Every array of an .npz (stored or deflated), in archive order, names without ".npy".
std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path);

}  // namespace ingot::npy
