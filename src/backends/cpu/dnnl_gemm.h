// The host's matrix products through oneDNN, for the generated code (ingot_host::sgemm and
// ingot_host::gemm_bf16, abi.h): float32 through dnnl_sgemm, bfloat16 through the library's bf16
// matmul primitive where the host runs it natively.
#pragma once

#include <cstdint>

namespace ingot::cpu {

// ingot_host::sgemm: oneDNN's dnnl_sgemm, or null without oneDNN.
using HostSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
HostSgemm host_sgemm();
// ingot_host::gemm_bf16: oneDNN's bfloat16 matmul (float32 result), or null without oneDNN or
// where its bf16 kernels would not be native (an ISA below avx512_core_bf16; dnnl_cpu_isa).
// Primitives are made once per shape and kept for the process; calls from several threads at
// once are safe (each brings its own scratchpad).
using HostGemmBf16 = int (*)(char, char, int64_t, int64_t, int64_t, const uint16_t*, int64_t, const uint16_t*, int64_t,
                             float*, int64_t);
HostGemmBf16 host_gemm_bf16();
// How many products host_gemm_bf16's function has run in this process (tests: which path ran).
int64_t gemm_bf16_calls();

}  // namespace ingot::cpu
