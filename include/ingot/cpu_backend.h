// The native CPU backend: lowers the whole graph to one generated C++ translation unit, builds it
// into a shared library with the system compiler (-O3 -march=native -fopenmp, OpenBLAS for gemm
// when installed), loads it with dlopen and runs it. Built libraries are cached in memory and on
// disk, keyed by a hash of the source, flags and compiler.
//
//   PhysicalModel pm = compile(model, CpuBackend(), opts);
//   CpuBackend::CpuOptions o;  o.cache_dir = "/tmp/my-cache";
//   PhysicalModel pm2 = compile(model, CpuBackend(o), opts);
//
// Ops the code generator does not handle run through their reference kernels, called back from
// the generated code, so every graph the ReferenceBackend runs also runs here. With `verbose`,
// lower prints the fusion plan, what is native, and the command that builds the file by hand.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ingot/compile.h"

namespace ingot {

class CpuBackend final : public Backend {
 public:
  struct CpuOptions {
    bool cache = true;
    // Default: $INGOT_CACHE_DIR, else $XDG_CACHE_HOME/ingot, else ~/.cache/ingot, else a
    // per-user /tmp/ingot-cache-<uid> (mode 0700; refused if another user could write to it).
    std::string cache_dir;
    // Default: $INGOT_CXX, $CXX, then c++, g++, clang++ found on PATH at run time.
    std::string compiler;
    std::vector<std::string> extra_flags;  // appended to the compile command (part of the key)
    // > 0: OpenMP threads per call: every parallel loop of the generated code, the prelude's and
    // oneDNN's (the entry point sets it for the call). The compile option cpu_options.num_threads
    // overrides it; without either, the hints' priority may choose (compiler/target_options.h).
    int num_threads = 0;
    // false: the generated loops without SIMD (no `omp simd`, -fno-tree-vectorize); BLAS and
    // oneDNN keep theirs. Compile option cpu_options.vectorize = false turns it off too.
    bool vectorize = true;
    // -Os instead of -O3: a smaller library (compile option optimize_for = "size").
    bool optimize_size = false;
    // float32 3x3 stride-1 convolutions with constant weights run oneDNN's Winograd kernels
    // (F(2x2, 3x3): 2.25x fewer multiplies) where it has one for the shape (AVX-512 machines,
    // activations in 16-channel blocks), direct kernels elsewhere (weights that change per call
    // too: oneDNN's transform of them costs more than the kernel saves). The rounding error is a
    // few times a direct conv's (~1e-6 relative on ResNet's logits); a NaN or an inf in a
    // Winograd conv's inputs runs that call with the direct kernel, so non-finite values come out
    // where the reference puts them. false: direct kernels only.
    bool winograd = true;
    // Products through the BLAS library found at run time (OpenBLAS, linked into the generated
    // library) and oneDNN's sgemm / bf16 matmul; false: in plain loops, as on a machine without
    // one (tests of that path, or a BLAS that misbehaves).
    bool blas = true;
    // float32 matmuls by constant weights ([K, N], e.g. a logical model's linear layers given
    // as constant_keys, an imported model's initializers) of up to 256 rows, known at compile
    // time, run as oneDNN 1x1 convolutions, the weights reordered once at load and the bias,
    // activation and residual add computed inside as post-ops (BERT-base's layer 1-2% faster
    // than with sgemm and a pass at 128 and 256 rows; level at 512, behind past that). false:
    // sgemm and a generated pass, as for weights passed every call. Off with blas = false.
    bool dnnl_matmul = true;
  };

  CpuBackend() = default;
  explicit CpuBackend(CpuOptions options) : options_(std::move(options)) {}

  std::string name() const override { return "cpu"; }
  std::unique_ptr<Executable> lower(const Graph& graph, const CompileOptions& options) const override;
  std::unique_ptr<Backend> clone() const override { return std::make_unique<CpuBackend>(options_); }
  // The arena lower's executable allocates: its generated code's buffers, placed (no compiler run).
  int64_t arena_bytes(const Graph& graph, const CompileOptions& options) const override;
  const CpuOptions& options() const { return options_; }

  // How many times this process has invoked the compiler (a cache hit does not).
  static int compile_count();

 private:
  CpuOptions options_;
};

}  // namespace ingot
