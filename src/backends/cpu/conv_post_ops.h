// A convolution epilogue's exact path: what DnnlConv runs when its inputs hold a NaN or an inf.
//
// oneDNN computes relu, clip, maximum and minimum post-ops with vmaxps / vminps, which return the
// other operand for a NaN, and its transcendental post-ops clamp their argument: a NaN conv
// output (from a NaN or inf in x, the weights or an operand) comes out finite, where the
// reference (like PyTorch) passes it on. A finite input cannot make a NaN inside the primitive
// (short of an overflow to inf in the sum), so DnnlConv scans its inputs (a pass at memory
// speed; the weights once, where they are reordered) and, when one holds a non-finite value,
// runs the convolution without post-ops and applies them here, with the reference's rules.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/dnnl_conv.h"
#include "compiler/layout_plan.h"

namespace ingot::cpu {

// Whether oneDNN's implementation of `ops` may turn a NaN or inf into a finite value (or another
// non-finite one) where the reference would not: every step but the IEEE arithmetic ones.
bool post_ops_need_finite_inputs(const std::vector<ConvPostOp>& ops);

// Where element (img, ch, pixel) of an [n, c, pixels] activation stored in `layout` lies.
inline int64_t activation_offset(Layout layout, int64_t c, int64_t pixels, int64_t img, int64_t ch, int64_t pixel) {
  const int64_t block = layout_channel_block(layout);
  if (layout == Layout::Nhwc) return (img * pixels + pixel) * c + ch;
  if (block > 0) return ((img * (c / block) + ch / block) * pixels + pixel) * block + ch % block;
  return (img * c + ch) * pixels + pixel;
}

// Whether p[0, n) holds a NaN or an inf.
bool has_non_finite(const float* p, int64_t n);

// Applies `ops` in order to y ([n, c, pixels] values stored in `layout`), with the reference's
// NaN rules. operands[i] is the i-th binary step's operand: c values when per channel, else y's
// shape in `layout`.
void apply_post_ops_exactly(const std::vector<ConvPostOp>& ops, Layout layout, int64_t n, int64_t c, int64_t pixels,
                            const float* const* operands, float* y);

}  // namespace ingot::cpu
