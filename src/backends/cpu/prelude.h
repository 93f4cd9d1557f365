// The runtime prelude pasted at the top of every generated translation unit: headers, the host
// ABI struct, float16/bfloat16 storage types, the elementwise op semantics (mirroring the
// reference kernels exactly), and the row/reduction/dense helpers the kernels call.
#pragma once

#include <string>

namespace ingot::cpu {

// `blas`: declare and call cblas_sgemm/cblas_dgemm (linked with OpenBLAS); else plain loops.
std::string prelude(bool blas);

// batch_norm, pooling and friends on channels-last buffers (prelude_channels_last.cpp).
extern const char* const kChannelsLastPrelude;
// Products (prelude_gemm.cpp): ig_gemm through OpenBLAS or in loops, ig_gemm_serial for one
// thread (loops only without BLAS), the plain product, and conv2d as im2col + gemm.
extern const char* const kGemmBlasPrelude;
extern const char* const kGemmLoopsPrelude;
extern const char* const kGemmSerialLoopsPrelude;
extern const char* const kGemmPlainPrelude;
extern const char* const kConvPrelude;
// Reductions over any set of axes (prelude_reduce.cpp), part of prelude().
extern const char* const kReduceAxesPrelude;
// scaled_dot_product_attention (prelude_attention.cpp), part of prelude().
extern const char* const kAttentionPrelude;
// Its float16 / bfloat16 kernels (prelude_attention_lowp.cpp), part of prelude() after it.
extern const char* const kAttentionLowpPrelude;
// transpose, slice, slice_scatter, concat_part, take_along_axis, scatter_add, index_add
// (prelude_movement.cpp), part of prelude().
extern const char* const kMovementPrelude;
// avg_pool2d and avg_pool2d_grad (prelude_pool.cpp), part of prelude().
extern const char* const kPoolPrelude;

}  // namespace ingot::cpu
