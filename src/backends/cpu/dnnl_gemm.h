// The host's matrix products through oneDNN, for the generated code (ingot_host::sgemm,
// gemm_batched and gemm_bf16, abi.h): float32 through dnnl_sgemm, batched float32 products and
// bfloat16 ones through the library's matmul primitive (bf16 where the host runs it natively).
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
// ingot_host::gemm_batched: a product over batch dims as one oneDNN matmul primitive (parallel
// over the batch and each product's blocks), or null without oneDNN. C[batch..., m, n]
// (contiguous float32) = op(A) op(B), where batch[i] is the i-th batch dim's size and
// stride_a[i] / stride_b[i] the operands' element strides along it (0: broadcast); each matrix
// op(A) is read at rows lda apart (ta: A stored [k, m]), op(B) at rows ldb apart (tb: B stored
// [n, k]). A and B are float32, or with `bf16` bfloat16 (float32 accumulation), the latter only
// where host_gemm_bf16 is native. Returns 0, or nonzero where oneDNN would run its reference
// implementation or refuses (the caller then loops over the batch). Primitives are made once
// per shape and kept.
using HostGemmBatched = int (*)(char ta, char tb, int32_t bf16, int32_t batch_dims, const int64_t* batch,
                                const int64_t* stride_a, const int64_t* stride_b, int64_t m, int64_t n, int64_t k,
                                const void* a, int64_t lda, const void* b, int64_t ldb, float* c);
HostGemmBatched host_gemm_batched();
// How many products host_gemm_batched's function has run in this process (tests: which path ran).
int64_t gemm_batched_calls();

}  // namespace ingot::cpu
