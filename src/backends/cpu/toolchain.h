// The system C++ toolchain the CPU backend builds its generated code with: finding a compiler,
// its version, the flags, and running it to produce a shared library (capturing diagnostics).
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace ingot::cpu {

struct Toolchain {
  std::string compiler;  // absolute path
  std::string version;   // first line of `compiler --version`
  std::string openblas;  // the OpenBLAS library to link (empty: none found, gemm runs in loops)
};

// Resolves the compiler: `requested` when not empty (no fallback: a missing one is an error),
// else $INGOT_CXX, $CXX, then c++, g++, clang++ found on PATH. Throws ingot::Error listing what
// was tried and suggesting ReferenceBackend() when none is usable. Results are memoized in the
// process and, with `memo_dir`, on disk: `<memo_dir>/toolchain-<hash>.txt` keeps the version
// beside the compiler's resolved path, inode, size and modification time, so a new process
// skips running `--version` (2.5 ms of a 10 ms warm load) until the compiler file changes.
Toolchain find_toolchain(const std::string& requested, const std::string& memo_dir = "");

// -O3 -march=native -ffp-contract=off -fno-trapping-math -fopenmp -shared -fPIC -std=c++17, then `extra`.
// `vectorize` false adds -fno-tree-vectorize -fno-tree-slp-vectorize; `optimize_size` puts -Os for -O3.
std::vector<std::string> compile_flags(const std::vector<std::string>& extra, bool vectorize = true,
                                       bool optimize_size = false);

// `source` with each `#pragma omp simd` line made a comment saying so: with vectorize off the
// loops stay sequential, and compile_flags' -fno-tree-vectorize leaves every other loop scalar.
std::string strip_simd_pragmas(const std::string& source);

// The full command line that builds `source_path` into `library_path`.
std::vector<std::string> build_command(const Toolchain& tc, const std::vector<std::string>& flags,
                                       const std::string& source_path,
                                       const std::string& library_path);
std::string join_command(const std::vector<std::string>& argv);  // shell-quoted, for messages

// Runs the build. Throws ingot::Error with the command and the compiler's diagnostics, and a
// suggestion to use ReferenceBackend(), when it fails.
void build_shared_library(const Toolchain& tc, const std::vector<std::string>& flags,
                          const std::string& source_path, const std::string& library_path);

// How many times this process has invoked the compiler to build a library (tests: cache hits).
std::atomic<int>& compiler_invocations();

// A short description of the host CPU (model and feature flags): -march=native depends on it.
const std::string& host_cpu_signature();

}  // namespace ingot::cpu
