// The C ABI between the host and a generated CPU library (kept in sync with the prelude text in
// prelude.cpp, which the generated file carries; kAbiVersion names its version).
//
//   extern "C" int ingot_abi_version();
//   extern "C" int ingot_entry(const void* const* inputs, void* const* outputs,
//                              const int64_t* dims, const ingot_host* host,
//                              char* error, size_t error_size);
//
// inputs: the graph's non-constant leaves in graph.leaves() order; outputs: buffers for the
// graph outputs the library writes, allocated by the host with their concrete sizes; dims: the
// run-time size of each symbolic dimension; host: constants and the reference-kernel callback
// for nodes the code generator does not handle. Returns 0, or nonzero with a message in `error`.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
struct ingot_host;
// What a control-flow node's generated loop or branch runs one of its subgraphs with: the
// subgraph's generated function (compiled into the same library) takes these, prepared by the
// host once per call for the concrete shapes, and reused by every iteration.
struct ingot_subgraph {
  const int64_t* dims;       // the subgraph's symbolic dimensions
  const ingot_host* host;    // its constants, arena and callbacks
  void* const* spare;        // loop bodies: a second buffer per carried value (null otherwise)
};

struct ingot_host {
  void* ctx;
  const void* const* constants;  // the graph's constant leaves, in generated order
  // Runs node `node` with its reference kernel: inputs/outputs point at contiguous buffers of
  // the node's inputs/outputs with the concrete shapes bound by `dims`.
  int (*run_node)(void* ctx, int32_t node, const void* const* inputs, void* const* outputs,
                  char* error, size_t error_size);
  char* arena;              // intermediates' memory for this call (null when none are needed)
  const int64_t* offsets;   // byte offset of each arena slot
  // Runs GeneratedCode::dnnl_convs[conv] on float32 buffers (b may be null).
  int (*conv2d)(void* ctx, int32_t conv, const void* x, const void* w, const void* b, void* y,
                char* error, size_t error_size);
  // Null unless a profile session records (ingot/profile.h); then called with phase 0 before and
  // phase 1 after generated kernel `kernel` (GeneratedCode::profile_names[kernel]).
  void (*profile)(void* ctx, int32_t kernel, int32_t phase);
  // conv2d with binary post-op operands: args = {x, w, b (or null), operand 0, operand 1, ...}.
  int (*conv2d_args)(void* ctx, int32_t conv, const void* const* args, void* y, char* error, size_t error_size);
  // Runs GeneratedCode::dnnl_conv_grads[grad]: conv2d_input_grad (a = dy, b = weight, out = dx)
  // or conv2d_weight_grad (a = x, b = dy, out = dw), in the node's types (float32, or bfloat16
  // operands with a float32 or bfloat16 result).
  int (*conv2d_grad)(void* ctx, int32_t grad, const void* a, const void* b, void* out, char* error, size_t error_size);
  // Null, or one thread's row-major float32 C = alpha op(A) op(B) + beta C (ta, tb: 'N' or 'T')
  // in oneDNN's sgemm, which outruns single-threaded OpenBLAS on the small blocks of kernels
  // that block a product themselves (attention). Returns 0, or nonzero to fall back.
  int (*sgemm)(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
  // Per GeneratedCode::subgraphs entry: what its generated function runs with (null when none).
  const ingot_subgraph* subgraphs;
  // Null, or row-major float32 C = op(A) op(B) of bfloat16 A and B (their bits; ta, tb: 'N' or
  // 'T') in oneDNN's bf16 matmul, on hosts where it runs native bf16 instructions (AVX512_BF16,
  // AMX), on the calling thread's OpenMP team. Returns 0, or nonzero to fall back.
  int (*gemm_bf16)(char ta, char tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
                   const uint16_t* b, int64_t ldb, float* c, int64_t ldc);
  // Null, or float32 C[batch..., m, n] (contiguous) = op(A) op(B) over `batch_dims` batch dims of
  // sizes batch[i], the operands `stride_a[i]` / `stride_b[i]` elements apart along them (0:
  // broadcast), as one oneDNN matmul primitive on the calling thread's OpenMP team (dnnl_gemm.h).
  // A and B float32, or with bf16 != 0 bfloat16 (their bits; only where the host runs bf16
  // natively). Returns 0, or nonzero to fall back to a loop over the batch.
  int (*gemm_batched)(char ta, char tb, int32_t bf16, int32_t batch_dims, const int64_t* batch, const int64_t* stride_a,
                      const int64_t* stride_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                      const void* b, int64_t ldb, float* c);
};
}

namespace ingot::cpu {
// 2: arena, offsets and conv2d in ingot_host; 3: profile; 4: conv2d_args; 5: conv2d_grad; 6:
// sgemm; 7: subgraphs (control flow compiled into the library); 8: gemm_bf16; 9: gemm_batched.
// Part of the cache key; the library reports it.
inline constexpr int kAbiVersion = 9;
}  // namespace ingot::cpu

extern "C" {
typedef int (*ingot_entry_fn)(const void* const* inputs, void* const* outputs, const int64_t* dims,
                              const ingot_host* host, char* error, size_t error_size);
}
