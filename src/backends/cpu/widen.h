// Mixed precision on the CPU backend: a matmul / conv2d in float16 or bfloat16, or a conv
// gradient on float16 / bfloat16 operands (the mixed_precision pass makes them), runs as the
// float32 GEMM / oneDNN convolution where the host has no faster native path.
#pragma once

#include <optional>

#include "ingot/graph.h"

namespace ingot::cpu {

// `g` with every float16 / bfloat16 matmul and conv2d run in float32: cast nodes widen the
// operands (exact) and round the float32 result once to the low type, which is what the
// reference kernel computes (float32 accumulation, one rounding); inside control-flow subgraphs
// too. Likewise conv2d_input_grad / conv2d_weight_grad on two half operands (their result, typed
// like the third input, is rounded only if that is a half type too). nullopt when there is none. `native_bf16_matmul`: bfloat16 matmuls stay as they are, for
// the host's native bf16 matmul (ingot_host::gemm_bf16, where the host has one and BLAS is on).
// `native_bf16_conv`: bfloat16 conv2d nodes that bf16_conv_fits (layout_plan.h) stay as they
// are, for oneDNN's bf16 convolution (dnnl_native_bf16_conv: an AMX host), and so do conv
// gradients that bf16_conv_grad_fits, for its bf16 backward kernels. lowering_input
// (executable.h) decides both for the host.
//
// Why widen the rest: the generated code has no other half-precision GEMM, and oneDNN's bf16
// convolutions without AMX ran slower than its float32 ones; on AVX2 machines this is the native
// path. The widening casts fuse into the loops around the dense op.
std::optional<Graph> widen_half_dense(const Graph& g, bool native_bf16_matmul = false, bool native_bf16_conv = false);

}  // namespace ingot::cpu
