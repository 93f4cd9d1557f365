// conv2d through oneDNN in the generated code: which part of its elementwise epilogue runs in
// the primitive, whether oneDNN runs it fast, and the kernel that calls the host's primitive.
//
// The epilogue (the nodes the fusion plan put in the conv's Dense group) runs inside the oneDNN
// primitive as post-ops, so the result is written once instead of being read and written again
// by a pass after the convolution.
//
// The folded part is the longest chain conv -> e1 -> e2 -> ... in group order where each step
// reads the previous value as its only reader (never a graph output), computes float32 of the
// conv output's shape, and is one of: relu, tanh, sigmoid, exp, log, sqrt, abs, gelu (erf or
// tanh form), neg; add / sub / mul with a float32 scalar constant (alpha * y + beta, exact);
// minimum / maximum with a float32 scalar constant (a clip) after a relu (ReLU6);
// add / sub / mul / div / maximum / minimum with a per-channel operand ([C, 1, 1] or
// [1, C, 1, 1]) or a full operand of the conv output's shape (a residual); sub and the
// commutative ops with y on either side (o - y is sub then negate). At most one step of the chain
// may be a linear map (neg, the scalar ops, o - y): oneDNN 2.6's direct kernels give every
// linear post-op the first one's coefficients. The chain is cut further to the longest prefix
// oneDNN runs with an optimized kernel (`accepts`). What is not folded runs in the generated
// pass after the primitive.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/dnnl_conv.h"
#include "compiler/layout_plan.h"
#include "ingot/graph.h"

namespace ingot::cpu {

struct ConvEpilogue {
  std::vector<NodeId> nodes;         // folded epilogue nodes, in order
  std::vector<ConvPostOp> post_ops;  // what they compute, in order
  std::vector<ValueId> operands;     // the binary post-ops' operands, in post-op order
  ValueId result = -1;               // the value the primitive writes
};

// Whether matmul `n` can run as a oneDNN 1x1 convolution (matmul_conv_spec, dnnl_conv.h): y = a @ b
// of float32 a [..., K] and a constant float32 b [K, N] of known sizes with K > 0 (a zoo layer's
// weights given as constants, an imported initializer), y = a's leading dims + [N]. Its epilogue
// folds as a conv's does, a per-channel operand being one of N values ([N], [1, N], ...).
bool matmul_runs_as_conv(const Graph& g, const Node& n);

// The ConvSpec of `node` (a conv2d, or a matmul_runs_as_conv matmul) at concrete shapes of its
// first two inputs and its output, no post-ops: a conv's x and y stored in `src` and `dst`, a
// matmul's always channels-last (the bytes of its row-major matrices).
ConvSpec dense_spec(const Node& node, const Shape& x, const Shape& w, const Shape& y, Layout src, Layout dst);

// `after`: the nodes of the conv's fusion group that follow it, in group order.
ConvEpilogue fold_conv_epilogue(const Graph& g, NodeId conv, const std::vector<NodeId>& after,
                                const std::function<bool(const ConvEpilogue&)>& accepts);

// Whether oneDNN runs `conv` with epilogue `e` and these buffer layouts on an optimized kernel,
// probed with its channel counts and spatial sizes (batch 1 when symbolic).
// `residual_in_dst`: with the first full add as a sum post-op (ConvSpec::residual_in_dst).
bool dnnl_runs_fast(const Graph& g, const Node& conv, const ConvEpilogue& e, Layout src, Layout dst,
                    bool residual_in_dst = false);

// The body of a generated kernel `(ctx, x0, x1, [x2,] operands..., y)` that runs primitive
// `index` (GeneratedCode::dnnl_convs) through ingot_host::conv2d, or conv2d_args when post-ops
// take operands.
// `in_place`: y holds the first full add's operand (said in a comment; the host sees it too).
std::string dnnl_conv_kernel_body(const Node& conv, const ConvEpilogue& e, size_t index, Layout src, Layout dst,
                                  bool in_place = false);

// Which earlier oneDNN convolutions prove value `v` free of NaN and inf in a call, so the host
// need not scan it (DnnlConvCall::finite_when): `v` is the result of one of them (its index in
// `conv_results`, filled in schedule order), or max pooling (over an input with rows and
// columns), relu, a reshape, a slice or a concat of such values; a finite constant needs none.
// nullopt when the code generator cannot tell (a graph input, any other op's result).
std::optional<std::vector<int32_t>> finite_when(const Graph& g, ValueId v, const std::map<ValueId, int32_t>& conv_results);

}  // namespace ingot::cpu
