// conv2d through oneDNN (Debian libdnnl-dev), run by the host on behalf of the generated code.
//
// A DnnlConv is built once per concrete shape: at load for static shapes, on the first call with
// new input shapes otherwise. It holds the convolution primitive (src/dst in the caller's layouts,
// weights in the library's preferred blocked layout, bias, and the elementwise epilogue the code
// generator folded into it as post-ops) and the reorders between the caller's layouts and the
// primitive's. `run` is safe to call from several threads at once: temporaries (weight reorder,
// scratchpad, layout conversions) are per call.
//
// Without oneDNN at build time, dnnl_available() is false and the code generator keeps its own
// im2col + GEMM convolution.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/layout_plan.h"
#include "ingot/graph.h"

namespace ingot::cpu {

bool dnnl_available();
// Whether bfloat16 convolutions run natively (ConvSpec::bf16): oneDNN's kernels use AMX on this
// host (false without oneDNN). Without AMX its bf16 kernels (avx512_core_bf16) ran slower than
// its float32 ones on ResNet-50's convs (2026-11-28), so mixed precision's convs are widened to
// float32 there. The CPU backend's widening, layout plan, code and verbose all ask this.
bool dnnl_native_bf16_conv();
// The instruction set oneDNN's kernels use on this host ("avx2", "avx512_core", ...): the best
// the CPU has, capped by ONEDNN_MAX_CPU_ISA when it is set (e.g. ONEDNN_MAX_CPU_ISA=AVX2 to run
// the AVX2 kernels on an AVX-512 host). "" without oneDNN. `verbose` reports it.
std::string dnnl_cpu_isa();

// One elementwise step applied to the convolution's result inside the primitive (a oneDNN
// post-op), in order. Unary kinds take no operand; Linear is alpha * y + beta; the binary kinds
// combine y with an operand (y op operand) that is per channel ([C] values) or a full tensor of
// y's shape, stored in y's layout. HardSwish is y * clip(y / 6 + 1 / 2, 0, 1) (MobileNetV3's);
// Swish is y * sigmoid(y) (SiLU: EfficientNet's, YOLO's).
struct ConvPostOp {
  enum class Kind {
    Relu, Tanh, Sigmoid, Exp, Log, Sqrt, Abs, GeluErf, GeluTanh, HardSwish, Swish, Linear, Clip, Add, Sub, Mul, Div, Max, Min
  };
  Kind kind = Kind::Relu;
  float alpha = 1.0f, beta = 0.0f;  // Linear: alpha * y + beta; Clip: min(beta, max(alpha, y))
  bool per_channel = false;         // binary: operand has C values (else y's shape)
  bool binary() const { return kind >= Kind::Add; }
  bool operator==(const ConvPostOp&) const = default;
};

struct ConvSpec {
  int64_t n = 0, cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool has_bias = false;
  Layout src_layout = Layout::Nchw;  // how the caller stores x
  Layout dst_layout = Layout::Nchw;  // how the caller wants y
  std::vector<ConvPostOp> post_ops;  // binary ones take run()'s operands, in order
  bool winograd = false;             // prefer oneDNN's Winograd kernel where it has one (CpuOptions)
  // The first full Add's operand (a residual) is passed in y's own buffer: the primitive adds it
  // as a sum post-op, onto what y holds, reading and writing that buffer once. run() still takes
  // it in another buffer (copied into y first).
  bool residual_in_dst = false;
  // x, w, b and y are bfloat16 (mixed precision's convs on a host with AMX:
  // dnnl_native_bf16_conv), else float32. A bfloat16 conv takes no post-ops and no Winograd
  // kernel, and runs channels-last (oneDNN's AMX kernels take NHWC only): x and y are reordered
  // each call where the caller's layout is another (the layout plan stores bf16 convs' outputs
  // NHWC, so that is the input's and a graph output's NCHW).
  bool bf16 = false;
  // w is a matrix product's right operand, [cin, cout] row-major (oneDNN's iohw), not
  // [cout, cin, kh, kw]: a matmul by constant weights run as a 1x1 convolution (matmul_conv_spec).
  bool weights_kn = false;
  bool operator==(const ConvSpec&) const = default;
};

// The spec of conv2d node `conv` for concrete shapes of x, w and y (layouts NCHW, no post-ops).
ConvSpec conv_spec(const Node& conv, const Shape& x, const Shape& w, const Shape& y);

// y[m, n] = x[m, k] @ w[k, n] (all row-major float32) as the 1x1 convolution it is: one image of
// 1 x m pixels with k input and n output channels, x and y channels-last (the same bytes as the
// row-major matrices), w as given (weights_kn). oneDNN's 1x1 convolution kernels (brgconv_1x1 on
// AVX-512, jit_1x1 on AVX2) run BERT's projections 3-20% faster than dnnl_sgemm with the
// weights reordered once at load and hot in cache, and take the bias, activation and residual as
// post-ops; in a layer, with the weights from memory, they lead up to 256 rows only
// (kDnnlMatmulMaxRows, codegen_plan.cpp).
ConvSpec matmul_conv_spec(int64_t m, int64_t k, int64_t n);

// Whether oneDNN runs `spec` (post-ops included) with one of its optimized kernels, not only the
// slow reference implementation (the code generator folds an epilogue only when it does).
// Remembered per spec for the process: code generation asks again for every compile.
bool dnnl_conv_is_fast(const ConvSpec& spec);

// Weights reordered into primitives' layouts, kept for the rest of one evaluation: batch chunks
// run the same convolution on the same weights many times. Entries are keyed by the weights'
// value in the graph (not their address: an arena slot may hold another value later in the
// call). Used from one thread at a time.
class WeightCache {
 public:
  WeightCache();
  ~WeightCache();
  WeightCache(const WeightCache&) = delete;
  WeightCache& operator=(const WeightCache&) = delete;

 private:
  friend class DnnlConv;
  struct Entries;
  std::unique_ptr<Entries> entries_;
};

class DnnlConv {
 public:
  explicit DnnlConv(const ConvSpec& spec);  // throws ingot::Error when oneDNN cannot run it
  ~DnnlConv();
  // x, w ([cout, cin/groups, kh, kw]), b ([cout] or null), y: float32 (bfloat16 for a bf16
  // spec); `operands`: float32, one
  // per binary post-op, in order (null when there are none). `weights`: where w, the graph value
  // `weights_value`, stays reordered for later calls during one evaluation (null: reorder each
  // call). `kept`: weights reordered once for good (keep_weights), read only. `known_finite`:
  // whether x, then each operand, is known to hold no NaN or inf (null: none is), so need not be
  // scanned (conv_post_ops.h). Returns whether y is finite in the same sense: every input was
  // finite and the post-ops keep finite values finite (false when that is not known). Throws
  // ingot::Error.
  bool run(const void* x, const void* w, const void* b, const void* const* operands, void* y,
           WeightCache* weights = nullptr, int64_t weights_value = -1, const WeightCache* kept = nullptr,
           const bool* known_finite = nullptr) const;
  // Reorders weights `w` (graph value `weights_value`) into `kept` now, for every later call:
  // for weights that are graph constants, which cannot change, a binding does this at load, so
  // calls read them reordered instead of reordering them (9.4 MB per call for one of ResNet's
  // 512-channel convs). No-op when the primitive takes the weights as they are.
  void keep_weights(const void* w, WeightCache* kept, int64_t weights_value) const;
  const std::string& implementation() const;  // oneDNN's name for the kernel it chose
  // The activation layouts the primitive runs in, and the caller's where they differ (reordered
  // each call): "src nchw8c (reordered from nchw), dst nchw8c", plus a residual post-op operand's
  // (", residual nhwc (reordered from nchw)").
  std::string layouts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::cpu
