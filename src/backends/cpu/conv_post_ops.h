// A convolution epilogue's exact path: what DnnlConv runs when its inputs hold a NaN or an inf.
//
// oneDNN computes relu, clip, maximum and minimum post-ops with vmaxps / vminps, which return the
// other operand for a NaN, and its transcendental post-ops clamp their argument: a NaN conv
// output (from a NaN or inf in x, the weights or an operand) comes out finite, where the
// reference (like PyTorch) passes it on. A finite input cannot make a NaN inside the primitive
// (short of an overflow to inf in the sum), so DnnlConv makes sure its inputs are finite and,
// when one is not, runs the convolution without post-ops and applies them here, with the
// reference's rules.
//
// Making sure costs a pass at memory speed over each input, which was 10-15% of ResNet-50's
// time at batch 1. So an input is scanned only when nothing already proves it finite: weights
// once, where they are reordered; an activation not at all when it is (a relu, max pooling,
// slice or concat of) the result of convolutions that ran earlier in the same call on finite
// inputs with post-ops that keep finite values finite (post_ops_keep_finite; the code generator
// finds these producers, DnnlConvCall::finite_when). Only the network's input, and values from
// other ops, are scanned. The one case this gives up: an inf that a finite chain makes by
// overflowing float32 (a product or sum past 3.4e38) is not seen by the next convolution, whose
// relu may then turn the NaN it makes into a number; the scan would have seen it, though the
// overflowing sum itself was never covered.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/dnnl_conv.h"
#include "compiler/layout_plan.h"

namespace ingot::cpu {

// Whether oneDNN's implementation of `ops` may turn a NaN or inf into a finite value (or another
// non-finite one) where the reference would not: every step but the IEEE arithmetic ones.
bool post_ops_need_finite_inputs(const std::vector<ConvPostOp>& ops);

// Whether `ops` map every finite value (and finite operands) to a finite value, short of an
// overflow: all but exp, log, sqrt and division.
bool post_ops_keep_finite(const std::vector<ConvPostOp>& ops);

// Among the binary steps of `ops` (in order, as their operands are passed), the index of the one
// that runs as oneDNN's sum post-op where a residual is added that way (Winograd kernels,
// ConvSpec::residual_in_dst): the first Add of a full operand. -1 when there is none.
int sum_operand_index(const std::vector<ConvPostOp>& ops);

// Where element (img, ch, pixel) of an [n, c, pixels] activation stored in `layout` lies.
inline int64_t activation_offset(Layout layout, int64_t c, int64_t pixels, int64_t img, int64_t ch, int64_t pixel) {
  const int64_t block = layout_channel_block(layout);
  if (layout == Layout::Nhwc) return (img * pixels + pixel) * c + ch;
  if (block > 0) return ((img * (c / block) + ch / block) * pixels + pixel) * block + ch % block;
  return (img * c + ch) * pixels + pixel;
}

// Whether p[0, n) holds a NaN or an inf.
bool has_non_finite(const float* p, int64_t n);

// How many times has_non_finite has run in this process (tests: which inputs were scanned).
int64_t non_finite_scans();

// Applies `ops` in order to y ([n, c, pixels] values stored in `layout`), with the reference's
// NaN rules. operands[i] is the i-th binary step's operand: c values when per channel, else y's
// shape in `layout`.
void apply_post_ops_exactly(const std::vector<ConvPostOp>& ops, Layout layout, int64_t n, int64_t c, int64_t pixels,
                            const float* const* operands, float* y);

}  // namespace ingot::cpu
