// The C++ generator's internals, shared by its files (codegen.h is the interface): size
// arithmetic over run-time symbols (Mono), the helpers that spell types and values in C++, the
// schedule's segments and the Generator itself. Its work is split by phase:
//   codegen.cpp              run(): the phases in order, and the source file's frame
//   codegen_plan.cpp         folding views, segments, buffers, the arena, output aliases
//   codegen_emit.cpp         elementwise loop nests, fallbacks, the schedule and entry point
//   codegen_emit_native.cpp  calls into prelude kernels, oneDNN convs, fused reductions, GEMMs
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "backends/cpu/abi.h"
#include "backends/cpu/toolchain.h"
#include "backends/cpu/codegen_control.h"
#include "backends/cpu/codegen_conv.h"
#include "backends/cpu/codegen_movement.h"
#include "backends/cpu/codegen_reduce.h"
#include "backends/cpu/conv_post_ops.h"
#include "backends/cpu/prelude.h"
#include "ingot/error.h"
#include "ir/op_registry.h"
#include "ops/slice_util.h"
#include "backends/cpu/codegen.h"

namespace ingot::cpu::codegen_detail {


// ---- sizes: a constant times a product of symbols (every dim and stride is one) ----------------
struct Mono {
  int64_t c = 1;
  std::vector<int> syms;  // sorted symbol indices
  bool operator==(const Mono& o) const { return c == o.c && syms == o.syms; }
  bool is_const() const { return syms.empty(); }
};
inline Mono operator*(Mono a, const Mono& b) {
  a.c *= b.c;
  a.syms.insert(a.syms.end(), b.syms.begin(), b.syms.end());
  std::sort(a.syms.begin(), a.syms.end());
  if (a.c == 0) a.syms.clear();
  return a;
}
inline const Mono kZero{0, {}};
inline const Mono kOne{1, {}};

inline std::string str(const Mono& m) {
  if (m.is_const()) return std::to_string(m.c);
  std::string s;
  if (m.c != 1) s = std::to_string(m.c);
  for (int i : m.syms) s += (s.empty() ? "d" : " * d") + std::to_string(i);
  return m.syms.size() + (m.c != 1) > 1 ? "(" + s + ")" : s;
}
inline Mono product(const std::vector<Mono>& v, size_t from = 0, size_t to = SIZE_MAX) {
  Mono p;
  for (size_t i = from; i < std::min(to, v.size()); ++i) p = p * v[i];
  return p;
}

// Compiled code broadcasts only the dims known to be 1 and reads every other one whole. Shape
// inference leaves an unknown dim broadcast against a size as 'that size or 1', for the run to
// tell (the reference broadcasts either way): for every operand dim (right-aligned to `target`)
// that is neither known to be 1 nor the target's own, a check that it is the target's at run
// time, so a run where it is 1 stops with an error instead of reading past the operand ([N, M] +
// [4] run with M = 1 did: wrong values).
inline std::string broadcast_guards(const std::vector<Mono>& operand, const std::vector<Mono>& target, const std::string& op) {
  std::string s;
  const size_t off = target.size() - std::min(target.size(), operand.size());
  for (size_t k = 0; k < operand.size() && off + k < target.size(); ++k) {
    const Mono &d = operand[k], &t = target[off + k];
    if ((d.is_const() && d.c == 1) || d == t) continue;
    s += "  if (" + str(d) + " != " + str(t) + ") return ig_fail(ctx, \"" + op +
         ": an operand dimension compiled as unknown is 1 at run time where the result's is not; "
         "this compiled program reads it whole (compile with that dimension given as 1, or with static shapes)\");\n";
  }
  return s;
}

// ---- the elementwise ops: how each computes is in its definition (ElementwiseForms) ----------
inline const ElementwiseForms* elementwise_forms(const std::string& op) {
  const OpDef* def = find_op(op);
  return def != nullptr && def->elementwise ? &*def->elementwise : nullptr;
}

inline std::string ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int8: return "int8_t";
    case DType::Int16: return "int16_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::UInt8: return "uint8_t";
    case DType::Float16: return "ig_half";
    case DType::BFloat16: return "ig_bf16";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "float";
}
// float16 / bfloat16 elements: computed as ig_half / ig_bf16 (float arithmetic), but elementwise
// kernels load and store their raw uint16_t bits (GCC 12 vectorizes no loop that loads or stores
// the structs themselves).
inline bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
inline std::string storage_type(DType t) { return is_half(t) ? "uint16_t" : ctype(t); }

// `pointer[index]` as a value of ctype(t): float16/bfloat16 from their bits; a bool through its
// byte, since GCC 12 vectorizes no loop that loads a `bool` ("no vectype"), and the relu and
// where masks of every backward pass are such loops.
inline std::string loaded(DType t, const std::string& pointer, const std::string& index) {
  const std::string element = pointer + "[" + index + "]";
  if (is_half(t)) return ctype(t) + "::from_bits(" + element + ")";
  if (t == DType::Bool) return "(reinterpret_cast<const unsigned char*>(" + pointer + ")[" + index + "] != 0)";
  return element;
}

inline std::string comptype(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 ? "float" : ctype(t);
}

// A scalar constant as a C++ expression of its dtype (exact: hex floats, raw half bits).
inline std::string literal(const Tensor& t) {
  const DType dt = t.dtype();
  char buf[64];
  switch (dt) {
    case DType::Bool: return t.to_vector<bool>()[0] ? "true" : "false";
    case DType::Float16: std::snprintf(buf, sizeof buf, "ig_half::from_bits(0x%04x)", t.data<Half>()[0].bits); return buf;
    case DType::BFloat16: std::snprintf(buf, sizeof buf, "ig_bf16::from_bits(0x%04x)", t.data<BFloat16>()[0].bits); return buf;
    case DType::Float32:
    case DType::Float64: {
      const double v = t.item(0);
      const std::string ty = ctype(dt);
      if (std::isnan(v)) return "std::numeric_limits<" + ty + ">::quiet_NaN()";
      if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + ty + ">::infinity()";
      std::snprintf(buf, sizeof buf, "%a", v);
      return ty + "(" + buf + ")";
    }
    default: {
      const int64_t v = t.to_vector<int64_t>()[0];
      if (v == INT64_MIN) return "std::numeric_limits<int64_t>::min()";
      return ctype(dt) + "(" + std::to_string(v) + "LL)";
    }
  }
}

inline bool is_scalar_constant(const Value& v) {
  return v.kind == ValueKind::Constant && v.constant.defined() && v.constant.numel() == 1 &&
         is_static(v.shape);
}

inline std::string ident(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o;
}

// Contiguous reduced axes as [outer, n, inner], or false.
inline bool reduce_block(const Node& n, int rank, int* first, int* last) {
  std::vector<int64_t> axes = n.attrs.get_ints("axes", {});
  std::vector<int> ax;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) ax.push_back(i);
  } else {
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) return false;
      ax.push_back(static_cast<int>(a < 0 ? a + rank : a));
    }
  }
  std::sort(ax.begin(), ax.end());
  if (std::adjacent_find(ax.begin(), ax.end()) != ax.end()) return false;
  if (ax.empty()) {  // rank 0: one element
    *first = 0;
    *last = -1;
    return true;
  }
  for (size_t i = 1; i < ax.size(); ++i)
    if (ax[i] != ax[i - 1] + 1) return false;
  *first = ax.front();
  *last = ax.back();
  return true;
}

// Whether the reduced axes form one contiguous block (ig_reduce), not just any valid set (ig_reduce_axes).
inline bool contiguous_reduction(const Node& n, int rank) {
  int first = 0, last = 0;
  return reduce_block(n, rank, &first, &last);
}

inline int norm_axis(int64_t a, int rank) { return static_cast<int>(a < 0 ? a + rank : a); }

inline bool is_float_dtype(DType t) { return t == DType::Float32 || t == DType::Float64; }

// Ops whose result is their first operand's elements in the same order, in a new shape
// (reshape_like's second operand only gives the shape): a copy, or a view (fold_reshapes).
inline bool keeps_element_order(const std::string& op) {
  return op == "reshape" || op == "identity" || op == "reshape_like" || op == "expand_dims";
}

// ---- the generator -----------------------------------------------------------------------------
struct Segment {
  // Reduce: a native reduction or layer_norm / rms_norm (last node) with its elementwise prologue
  // computed inside it (prologue_fuses).
  // Control: an if / while / scan around its subgraphs' generated code (codegen_control.h).
  // Folded: a slice its elementwise readers read in place (fold_slices), or a reshape whose
  // result is its source's memory (fold_reshapes): nothing is emitted.
  enum Kind { Elementwise, Native, Fallback, Reduce, Control, Folded } kind;
  std::vector<NodeId> nodes;
  int group;
};

class Generator {
 public:
  // nested: a control-flow subgraph's code, compiled into its caller's source (kernels and
  // ig_run only; the caller's file has the prelude and the entry point).
  Generator(const Graph& g, const FusionPlan& plan, const LayoutPlan& layouts, const CodegenOptions& o,
            bool nested = false)
      : g_(g), plan_(plan), layouts_(layouts), opt_(o), nested_(nested) {}
  GeneratedCode run();

 private:
  // -- symbols, inputs, constants
  Mono dim(const SymDim& d) {
    if (d.known()) return Mono{d.value, {}};
    auto it = sym_.find(d.symbol);
    INGOT_CHECK(it != sym_.end(), "CpuBackend: dimension '", d.symbol, "' is not bound by any input");
    return Mono{1, {it->second}};
  }
  std::vector<Mono> dims(ValueId v) {
    std::vector<Mono> r;
    for (const SymDim& d : g_.value(v).shape) r.push_back(dim(d));
    return r;
  }
  Mono numel_of(ValueId v) { return product(dims(v)); }
  std::vector<std::string> dim_strings(ValueId v) {
    std::vector<std::string> r;
    for (const Mono& m : dims(v)) r.push_back(str(m));
    return r;
  }
  // A rank-4 value's dims in the order its layout stores them: [N, H, W, C] for Nhwc, [N, C/b, H,
  // W, b] for blocks of b channels (C known), the logical dims for Nchw.
  std::vector<std::string> stored_dim_strings(ValueId v) {
    const std::vector<std::string> d = dim_strings(v);
    const Layout l = layout(v);
    if (l == Layout::Nchw) return d;
    if (l == Layout::Nhwc) return {d[0], d[2], d[3], d[1]};
    const int64_t b = layout_channel_block(l);
    return {d[0], std::to_string(dims(v)[1].c / b), d[2], d[3], std::to_string(b)};
  }
  void index_leaves_and_symbols();
  // -- transposes folded into gemm, and head splits folded into attention
  void fold_transposes();
  void fold_head_swaps();
  ValueId stored(ValueId v) const;
  // -- reshapes as views
  void fold_reshapes();

  // -- slices read in place
  // A slice with steps of 1 of an NCHW value whose sliced dims are known, that is no graph output
  // and whose every reader is in an elementwise loop nest, is never copied: the nests read its
  // input from the slice's first element through the input's strides (an LSTM step's four gates
  // sliced from one [B, 4H] product: four copies a step saved). Its segment becomes Folded.
  struct SliceView {
    ValueId source = -1;
    std::string offset;  // elements from the source's start to the slice's
  };
  void fold_slices();
  std::optional<std::string> slice_offset(const Node& n);
  bool reads_through_view(size_t s, ValueId source) const;
  // -- segments
  void build_segments();
  void check_layouts() const;
  bool prologue_fuses(const std::vector<NodeId>& run, const Node& anchor) const;
  void plan_buffers();

  // -- oneDNN conv2d: float32 convs with static sizes whose padding covers the output exactly,
  // and bfloat16 ones where the host runs them natively (CodegenOptions::bf16_conv); the rest
  // keeps the generated im2col + gemm.
  // A matmul by constant weights runs as a oneDNN 1x1 convolution (CodegenOptions::dnnl_matmul)
  // when its left operand is stored plain (no folded transpose) and oneDNN runs it fast.
  bool use_dnnl(const Node& n) const {
    return opt_.dnnl && (conv_runs_channels_last(g_, n) || (opt_.bf16_conv && bf16_conv_fits(g_, n)) || dnnl_matmul(n));
  }
  bool dnnl_matmul(const Node& n) const;
  bool use_dnnl_grad(const Node& n) const;
  bool dnnl_weight_grad_trusted(const Node& n) const;

  Layout layout(ValueId v) const { return layouts_.at(v); }
  bool dnnl_takes(const Node& n, const ConvEpilogue& e) const;
  std::vector<ValueId> seg_reads(size_t s) const;
  std::vector<ValueId> seg_stores(size_t s) const;
  void plan_arena();
  std::optional<ValueId> residual_to_overwrite(size_t s, const ConvEpilogue& epi) const;
  void plan_output_aliases();

  std::string ptr(ValueId v) const { return "v" + std::to_string(v); }
  std::string stored_ptr(ValueId v) const;
  std::string describe(const std::vector<NodeId>& nodes) const;
  std::string kernel_name(const std::vector<NodeId>& nodes, bool fused);
  std::string dims_prologue() const;
  std::string par(const Mono& work, const std::string& extra_cond = "") const;
  // -- elementwise expressions
  std::string operand(ValueId v, DType want, const std::map<ValueId, std::string>& names) const;
  std::string expr(const Node& n, const std::map<ValueId, std::string>& names) const;

  // The loops of an elementwise kernel over `domain`'s shape, in the memory order of its layout
  // (so its stores are contiguous), and each operand's stride along each loop (0: broadcast).
  // The channel axis splits into [blocks, lanes] when any operand is channel-blocked, so that
  // every operand's offset stays linear in the loop indices.
  struct LoopNest {
    std::vector<Mono> extents;
    std::vector<std::vector<Mono>> strides;  // per operand, per loop
  };
  LoopNest loop_nest(ValueId domain, const std::vector<ValueId>& operands);
  // -- one elementwise loop nest computing `stores` (all of one shape) from the segment's nodes
  void emit_elementwise(const Segment& seg, const std::vector<ValueId>& stores, bool alias, std::ostream& call);
  // -- native anchors (reductions, row kernels, dense, reshape)
  void emit_native(const Segment& seg, std::ostream& call);
  void emit_attention(const Node& n, std::ostream& k);
  void emit_dnnl_conv(const Segment& seg, const ConvEpilogue& epi, std::ostream& call);
  std::vector<ValueId> prologue_reads(const Segment& seg) const;
  std::string prologue_body(const Segment& seg, const std::vector<ValueId>& reads,
                            const std::function<std::string(size_t)>& index, const std::string& indent) const;
  void emit_fused_reduction(const Segment& seg, std::ostream& call);
  void emit_fused_norm(const Segment& seg, std::ostream& call);
  void emit_matmul(const Node& n, std::ostream& k);
  void emit_fallback(const Segment& seg, std::ostream& call);
  void emit_control_segment(const Segment& seg, std::ostream& e);
  void emit_run(std::ostream& e);
  void emit_entry(std::ostream& e);

  const Graph& g_;
  const FusionPlan& plan_;
  const LayoutPlan& layouts_;
  CodegenOptions opt_;
  bool nested_ = false;
  GeneratedCode out_;
  std::map<std::string, int> sym_;
  std::vector<Segment> segs_;
  std::vector<int> seg_of_, last_use_;
  std::vector<bool> needs_buffer_, is_output_;
  std::vector<ValueId> folded_;    // per value: a folded transpose's input, or -1
  std::set<ValueId> head_swapped_writes_;  // attention results written [outer, S, H, D] (fold_head_swaps)
  std::map<ValueId, SliceView> slice_views_;  // slices read in place (fold_slices)
  std::map<ValueId, ValueId> reshape_views_;  // reshape results -> the buffer they are (fold_reshapes)
  std::vector<int> slot_;          // per value: arena slot, or -1
  std::vector<bool> inplace_seg_;  // per segment: some store overwrites a read
  std::vector<std::string> step_kernels_;  // kernels emitted for the current segment
  std::map<size_t, ConvEpilogue> conv_epilogue_;  // per oneDNN conv2d segment: its post-ops
  std::map<ValueId, int32_t> conv_results_;       // values oneDNN convs write: their dnnl_convs index

  std::ostringstream kernels_;
};

}  // namespace ingot::cpu::codegen_detail
