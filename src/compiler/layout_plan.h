// Layout decisions: how each rank-4 [N, C, H, W] buffer is stored by a backend that runs
// convolutions channels-last. The layout pass (src/compiler/passes/layout.cpp) makes them;
// backends consume them, and the graph itself does not change: every value keeps its logical
// NCHW shape, graph inputs and outputs stay NCHW, and the reference backend never sees a layout.
//
//   Nchw     row-major [N, C, H, W] (the IR's meaning; the default)
//   Nhwc     [N, H, W, C]
//   Nchw8c   [N, C/8, H, W, 8]: channels in blocks of 8, a block contiguous (oneDNN's nChw8c,
//            the AVX2 vector width); only for C a multiple of 8, so there is no padding
//   Nchw16c  the same with blocks of 16 (AVX-512)
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ingot/graph.h"

namespace ingot {

enum class Layout { Nchw, Nhwc, Nchw8c, Nchw16c };
std::string_view layout_name(Layout l);
// Channels per block: 8 / 16 for the blocked layouts, 0 for Nchw and Nhwc.
int layout_channel_block(Layout l);

struct LayoutPlan {
  std::vector<Layout> of_value;  // per ValueId
  Layout at(ValueId v) const { return of_value.empty() ? Layout::Nchw : of_value[static_cast<size_t>(v)]; }
  // Values not stored NCHW, one line each ("v3 (conv2d in 'cnn.conv'): nchw8c").
  std::string str(const Graph& g) const;
};

// The channel block oneDNN's convolutions use on this machine: 16 with AVX-512 (avx512f), else 8
// (AVX2), also where ONEDNN_MAX_CPU_ISA caps oneDNN below AVX-512. The CPU backend's target and
// the layout pass's report both take it from here.
int host_channel_block();

// The layout a compile stores convolution activations in (CompileOptions::layout_target):
//   nchw     none: every buffer stays NCHW
//   nhwc     channels-last, never blocked
//   nchw8c   blocks of 8 channels (AVX2's choice), NHWC where C is not a multiple of 8
//   nchw16c  blocks of 16 (AVX-512's choice), NHWC where C is not a multiple of 16
// "auto" is $INGOT_LAYOUT_TARGET when that is set (one of the four), else host_layout(). Forcing
// one lets a test on any machine cover what another machine would pick.
Layout host_layout();  // Nchw16c with AVX-512, else Nchw8c
// Whether target name `name` leaves the choice to the compiler: "auto" with $INGOT_LAYOUT_TARGET
// unset, empty or "auto".
bool layout_target_is_auto(const std::string& name);
// The layout a target name stands for ("auto" resolved); an unknown name is an error naming
// `what` (the option or variable it came from) and the valid names.
Layout parse_layout_target(const std::string& name, const std::string& what = "Option 'layout_target'");

// What a backend can run in the layouts above.
struct LayoutTarget {
  // Channels per block for the blocked layout (8 for AVX2, 16 for AVX-512); 0: channels-last only.
  int channel_block = 8;
  // Whether bfloat16 conv2d nodes (bf16_conv_fits) run channels-last too (the CPU backend on an
  // AMX host): their outputs are stored NHWC whatever the channel block, the layout oneDNN's AMX
  // kernels take (its blocked bf16 kernels are not AMX ones).
  bool bf16_convs = false;
  // For a target layout (Nhwc, Nchw8c, Nchw16c; not Nchw, which plans nothing) and this backend's
  // handles_layouts.
  static LayoutTarget blocked_as(Layout l, LayoutTarget backend) {
    backend.channel_block = layout_channel_block(l);
    return backend;
  }
  // Whether the backend runs node `n` with its own layout-aware code: conv2d on its
  // convolution library, batch_norm, the pools, channel concats, elementwise loops. Nodes it runs any
  // other way (reference-kernel callbacks, say) read and write NCHW.
  std::function<bool(const Graph&, const Node&)> handles_layouts = [](const Graph&, const Node&) { return true; };
};

// conv2d nodes a channels-last convolution library can run: float32, static spatial sizes and
// channels, and padding that covers exactly the output (stride may not drop input rows/columns
// past the padding).
bool conv_runs_channels_last(const Graph& g, const Node& conv);
// The geometry part of that test for a convolution with activation x, weight w and result y (the
// attributes stride / padding / dilation read from `conv`), shared with the backward convolutions.
bool conv_geometry_fits(const Graph& g, const Node& conv, ValueId x, ValueId w, ValueId y);
// A conv2d in bfloat16 throughout (x, w, bias, y) whose geometry fits: the CPU backend runs it as
// a oneDNN bf16 convolution where the host has AMX (LayoutTarget::bf16_convs).
bool bf16_conv_fits(const Graph& g, const Node& conv);
// A conv2d_input_grad / conv2d_weight_grad whose two operands are bfloat16 (its result, typed like
// its third input, float32 or bfloat16: mixed precision's conv gradients) and whose geometry fits,
// at a size where oneDNN 2.6's AMX backward kernels beat its float32 ones: an output (the forward
// conv's y) of at least 6x6, and for a weight gradient at least 8 input channels per group and
// fewer than 64 taps.
// Measured on ResNet's shapes (2 threads, 2026-11-28): 2-6x faster from 8x8 up (batch 8, 16x16,
// 64 channels: 0.20 against 0.80 ms for dx, 0.46 against 0.88 ms for dw), but 1.3-3.5x slower at
// 4x4 and 2x2 and for the 3-channel stem's dw. The CPU backend runs those on AMX hosts.
bool bf16_conv_grad_fits(const Graph& g, const Node& grad);
// A conv's gradient op: conv2d_input_grad (dy, w, like x) or conv2d_weight_grad (x, dy, like w).
bool is_conv2d_gradient(const Node& n);
// conv_runs_channels_last, or a bf16_conv_fits conv for a target with bf16_convs.
bool conv_runs_channels_last(const Graph& g, const Node& conv, const LayoutTarget& target);

// The decisions (src/compiler/passes/layout.cpp). A value is stored channels-last (blocked when
// C is a multiple of the target's block, else Nhwc) when it is rank 4 and
//   - its producer is a conv2d that conv_runs_channels_last (for the target: a bfloat16 conv's
//     output is Nhwc), a batch_norm, max_pool2d or
//     avg_pool2d whose input is in that layout, a concat along the channels whose inputs are all
//     in that layout (for a blocked one, each input's channels whole blocks), or an elementwise
//     node whose full-shape rank-4 inputs are all in that layout (the loop is layout-blind);
//   - every reader handles it: a channels-last conv2d (as x), a batch_norm, pool or channel
//     concat whose output shares the layout, global_avg_pool2d, elementwise nodes (other
//     operands broadcast by strides);
//   - it is not a graph output.
// Without any channels-last conv2d every value stays NCHW.
LayoutPlan plan_layouts(const Graph& g, const LayoutTarget& target = {});

// What layout target "auto" stands for on graph `g`: host_layout(), except Nhwc when the host's
// plan would mix blocked and Nhwc buffers (some channel count is not a multiple of the block, as
// MobileNetV2's 24) and no conv gains from blocks (a dense 3x3 stride-1 conv, which oneDNN runs
// with Winograd kernels on 16-channel blocks only). oneDNN's kernels take both sides of a conv in
// one layout, so a mixed plan reorders each activation crossing between the two, every call
// (MobileNetV2 at batch 1: four of 1.2-1.8 MB); its NHWC kernels are as fast as the blocked ones.
// A target named explicitly is taken as it is. `host`: the machine's layout (a test passes
// each).
Layout auto_layout(const Graph& g, const LayoutTarget& target = {}, Layout host = host_layout());

// Every value NCHW (layout pass off, or a backend without a channels-last convolution).
LayoutPlan nchw_plan(const Graph& g);

}  // namespace ingot
