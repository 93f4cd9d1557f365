// conv2d's gradients through oneDNN (Debian libdnnl-dev), run by the host on behalf of the code
// generated for `conv2d_input_grad` (backward data) and `conv2d_weight_grad` (backward weights).
//
// Like the forward DnnlConv (dnnl_conv.h), a DnnlConvGrad is built once per concrete shape (at
// load for static shapes) and holds its primitive, made with a forward-training primitive as the
// layout hint, plus the reorders between the caller's layouts (NCHW or NHWC activations, OIHW
// weights) and the primitive's. `run` is safe to call from several threads at once.
//
// Float32 throughout, or (mixed precision on a host with AMX, bf16_conv_grad_fits) bfloat16
// operands with a float32 or bfloat16 result: oneDNN's AMX kernels accumulate the bf16 products
// in float32 and write the result once. They take channels-last activations only, so NCHW
// operands and results are reordered each call.
#pragma once

#include <memory>
#include <string>

#include "backends/cpu/dnnl_conv.h"
#include "ingot/graph.h"

namespace ingot::cpu {

enum class ConvGradKind {
  Input,   // conv2d_input_grad:  out = dx [n, cin, h, w] from a = dy, b = weight
  Weight,  // conv2d_weight_grad: out = dw [cout, cin/groups, kh, kw] from a = x, b = dy
};

class DnnlConvGrad {
 public:
  // `spec`: the forward convolution's geometry; src_layout / dst_layout give the layouts of x
  // (or dx) and dy in the caller's buffers (NCHW or NHWC); spec.bf16: the two operands are
  // bfloat16; bf16_result: so is the result (else float32). Throws ingot::Error when oneDNN
  // cannot run it.
  DnnlConvGrad(const ConvSpec& spec, ConvGradKind kind, bool bf16_result = false);
  // For node `grad` (conv2d_input_grad or conv2d_weight_grad, conv2d's attributes) with these
  // concrete shapes of the forward x, w and y (= dy), NCHW activations, and these types.
  DnnlConvGrad(const Node& grad, const Shape& x, const Shape& w, const Shape& dy, bool bf16_operands = false,
               bool bf16_result = false);
  ~DnnlConvGrad();
  void run(const void* a, const void* b, void* out) const;  // throws ingot::Error
  const std::string& implementation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::cpu
