// Code generation: an optimized, shape- and type-annotated Graph plus its fusion plan -> one C++
// translation unit with a C entry point (see abi.h). Each fusion group becomes one or more
// kernels: elementwise groups one loop nest (broadcasting by index arithmetic); reductions,
// row kernels and dense ops calls into prelude helpers (BLAS for gemm), their elementwise
// producers/epilogues one loop nest each; anything else a call back into the host's reference
// kernel for that node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/dnnl_conv.h"
#include "compiler/fusion_plan.h"
#include "compiler/layout_plan.h"
#include "ingot/graph.h"

namespace ingot::cpu {

struct CodegenOptions {
  bool blas = false;    // call cblas_?gemm (else loops)
  bool dnnl = false;    // float32 conv2d through the host's oneDNN primitives (else im2col + gemm)
  bool bf16_conv = false;  // bfloat16 conv2d too (bf16_conv_fits, dnnl_native_bf16_conv)
  // float32 matmuls by constant weights as oneDNN 1x1 convolutions with their epilogue as
  // post-ops (matmul_runs_as_conv; CpuOptions::dnnl_matmul), else gemm + a pass. Needs dnnl.
  bool dnnl_matmul = false;
  bool inplace = true;  // elementwise kernels may write over an input that dies there
  // > 0: num_threads(n) on every parallel loop, and the entry point runs the call on n OpenMP
  // threads (the prelude's loops and oneDNN's included), restoring the caller's count after.
  int num_threads = 0;
  bool vectorize = true;  // false: every `#pragma omp simd` left out (toolchain.h's strip_simd_pragmas)
  // The layout target of control-flow subgraphs (cpu_layouts); the graph's own plan is given.
  Layout layout = Layout::Nchw;
};

// An intermediate buffer in the arena the host provides per call: live over segments
// [first, last] of the generated schedule; `reuses`: the slot it overwrites in place, or -1.
struct ArenaSlot {
  ValueId value = -1;
  int first = 0, last = 0;
  int reuses = -1;
};

// A conv2d the generated code hands to the host's oneDNN primitive (ingot_host::conv2d, or
// conv2d_args when post-ops take operands).
struct DnnlConvCall {
  NodeId node = -1;
  Layout src_layout = Layout::Nchw, dst_layout = Layout::Nchw;  // of x's and y's buffers
  std::vector<ConvPostOp> post_ops;         // the folded epilogue (codegen_conv.h)
  // Per input, in the kernel's order (x, w, b when present, then each post-op operand): the
  // earlier convs (indexes into dnnl_convs) whose finite results in the same call make it finite
  // (none for a finite constant), or nullopt: unknown (codegen_conv.h finite_when).
  std::vector<std::optional<std::vector<int32_t>>> finite_when;
  // y is the buffer of the first full add's operand, which the primitive adds as a sum post-op
  // (ConvSpec::residual_in_dst).
  bool residual_in_place = false;
};

// A conv2d_input_grad / conv2d_weight_grad the generated code hands to the host's oneDNN
// backward primitive (ingot_host::conv2d_grad).
struct DnnlConvGradCall {
  NodeId node = -1;
  bool x_nhwc = false, dy_nhwc = false;  // layouts of the activations x (or dx) and dy
};

struct SubgraphCode;

struct GeneratedCode {
  std::string source;
  std::vector<std::string> symbols;     // dims[i] is the run-time size of symbols[i]
  std::vector<ValueId> inputs;          // inputs[i]: the non-constant leaves, graph.leaves() order
  std::vector<ValueId> constants;       // host->constants[i]
  std::vector<bool> output_written;     // per graph output: written by ingot_entry
  // Per graph output: indexes into `inputs` whose buffer may also be that output's buffer
  // (the schedule reads the input before, or at the same index as, it writes the output).
  std::vector<std::vector<int>> output_may_alias;
  std::vector<NodeId> fallback_nodes;   // run through the host's reference kernels
  std::vector<NodeId> native_nodes;
  int kernels = 0;                      // native kernels generated
  int segments = 0;                     // steps of the schedule (ArenaSlot::first/last)
  std::vector<ArenaSlot> arena_slots;   // offsets[i] of the host's plan is slot i's
  std::vector<DnnlConvCall> dnnl_convs; // ingot_host::conv2d's `conv` indexes this
  std::vector<DnnlConvGradCall> dnnl_conv_grads;  // ingot_host::conv2d_grad's `grad` indexes this
  std::vector<ValueId> channels_last_values;  // buffers not stored NCHW (the layout plan's)
  // Per profiled step (ig_profile id): its kernels' names and the ops / scopes it computes.
  std::vector<std::string> profile_names, profile_details;
  // The subgraphs of its control-flow nodes, generated into the same source (codegen_control.h);
  // ingot_host::subgraphs[i] is what subgraphs[i]'s function runs with.
  std::vector<SubgraphCode> subgraphs;
};

struct SubgraphCode {
  NodeId node = -1;    // the control-flow node
  size_t index = 0;    // which of its subgraphs
  GeneratedCode code;  // its kernels and function (source: no prelude, no entry point)
};

// `layouts`: how each buffer is stored (layout_plan.h; conv2d, batch_norm, global_avg_pool2d and
// elementwise kernels handle every layout, the rest need NCHW).
GeneratedCode generate_cpp(const Graph& g, const FusionPlan& plan, const LayoutPlan& layouts,
                           const CodegenOptions& options);

// How `g`'s buffers are stored for this backend: all NCHW for Layout::Nchw, else plan_layouts
// with cpu_layout_target(dnnl, layout).
// `bf16_conv`: bfloat16 convs run through oneDNN too (CodegenOptions::bf16_conv).
LayoutPlan cpu_layouts(const Graph& g, bool dnnl, Layout layout, bool bf16_conv = false);

// What the generated code handles in every layout (LayoutTarget for plan_layouts): native nodes,
// and conv2d only through oneDNN; channel blocks of `layout`'s (Nchw8c, Nchw16c; Nhwc: none).
LayoutTarget cpu_layout_target(bool dnnl, Layout layout = host_layout(), bool bf16_conv = false);

// True when `op` (with this node's dtypes and attributes) has native code.
bool is_native(const Graph& g, const Node& n);

// Comment text (`//` or `/* */`) safe for any user string: printable ASCII without "*/",
// backslashes (a line splice) or "??" (trigraphs); newlines and other bytes become '_'.
std::string comment_safe(const std::string& s);

}  // namespace ingot::cpu
