#include "backends/cpu/codegen.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
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

namespace ingot::cpu {
namespace {

// ---- sizes: a constant times a product of symbols (every dim and stride is one) ----------------
struct Mono {
  int64_t c = 1;
  std::vector<int> syms;  // sorted symbol indices
  bool operator==(const Mono& o) const { return c == o.c && syms == o.syms; }
  bool is_const() const { return syms.empty(); }
};
Mono operator*(Mono a, const Mono& b) {
  a.c *= b.c;
  a.syms.insert(a.syms.end(), b.syms.begin(), b.syms.end());
  std::sort(a.syms.begin(), a.syms.end());
  if (a.c == 0) a.syms.clear();
  return a;
}
const Mono kZero{0, {}};
const Mono kOne{1, {}};

std::string str(const Mono& m) {
  if (m.is_const()) return std::to_string(m.c);
  std::string s;
  if (m.c != 1) s = std::to_string(m.c);
  for (int i : m.syms) s += (s.empty() ? "d" : " * d") + std::to_string(i);
  return m.syms.size() + (m.c != 1) > 1 ? "(" + s + ")" : s;
}
Mono product(const std::vector<Mono>& v, size_t from = 0, size_t to = SIZE_MAX) {
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
std::string broadcast_guards(const std::vector<Mono>& operand, const std::vector<Mono>& target, const std::string& op) {
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
const ElementwiseForms* elementwise_forms(const std::string& op) {
  const OpDef* def = find_op(op);
  return def != nullptr && def->elementwise ? &*def->elementwise : nullptr;
}

std::string ctype(DType t) {
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
bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
std::string storage_type(DType t) { return is_half(t) ? "uint16_t" : ctype(t); }

// `pointer[index]` as a value of ctype(t): float16/bfloat16 from their bits; a bool through its
// byte, since GCC 12 vectorizes no loop that loads a `bool` ("no vectype"), and the relu and
// where masks of every backward pass are such loops.
std::string loaded(DType t, const std::string& pointer, const std::string& index) {
  const std::string element = pointer + "[" + index + "]";
  if (is_half(t)) return ctype(t) + "::from_bits(" + element + ")";
  if (t == DType::Bool) return "(reinterpret_cast<const unsigned char*>(" + pointer + ")[" + index + "] != 0)";
  return element;
}

std::string comptype(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 ? "float" : ctype(t);
}

// A scalar constant as a C++ expression of its dtype (exact: hex floats, raw half bits).
std::string literal(const Tensor& t) {
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

bool is_scalar_constant(const Value& v) {
  return v.kind == ValueKind::Constant && v.constant.defined() && v.constant.numel() == 1 &&
         is_static(v.shape);
}

std::string ident(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o;
}

// Contiguous reduced axes as [outer, n, inner], or false.
bool reduce_block(const Node& n, int rank, int* first, int* last) {
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
bool contiguous_reduction(const Node& n, int rank) {
  int first = 0, last = 0;
  return reduce_block(n, rank, &first, &last);
}

int norm_axis(int64_t a, int rank) { return static_cast<int>(a < 0 ? a + rank : a); }

bool is_float_dtype(DType t) { return t == DType::Float32 || t == DType::Float64; }

// Ops whose result is their first operand's elements in the same order, in a new shape
// (reshape_like's second operand only gives the shape): a copy, or a view (fold_reshapes).
bool keeps_element_order(const std::string& op) {
  return op == "reshape" || op == "identity" || op == "reshape_like" || op == "expand_dims";
}

// ---- the generator -----------------------------------------------------------------------------
struct Segment {
  // Reduce: a native reduction (last node) with its elementwise prologue computed inside it.
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

  GeneratedCode run() {
    index_leaves_and_symbols();
    fold_transposes();
    build_segments();
    fold_reshapes();
    fold_slices();
    check_layouts();
    plan_buffers();
    for (size_t v = 0; v < g_.values().size(); ++v)
      if (layout(static_cast<ValueId>(v)) != Layout::Nchw) out_.channels_last_values.push_back(static_cast<ValueId>(v));
    plan_arena();
    plan_output_aliases();
    std::ostringstream entry;
    emit_run(entry);
    if (nested_) {
      out_.source = kernels_.str() + "\n" + entry.str();
      return std::move(out_);
    }
    emit_entry(entry);
    std::ostringstream src;
    src << "// Generated by ingot's CPU backend. Do not edit: regenerated from the model graph.\n"
        << "// Build: see CpuBackend verbose output; entry point: ingot_entry (see abi.h).\n"
        << "// Native kernels: " << out_.kernels << "; nodes on reference kernels (host callback): "
        << out_.fallback_nodes.size() << ".\n";
    if (opt_.blas) src << "#define INGOT_HAVE_BLAS 1\n";
    src << prelude(opt_.blas) << "\n// ---- kernels ----\n" << kernels_.str() << "\n" << entry.str();
    out_.source = opt_.vectorize ? src.str() : strip_simd_pragmas(src.str());
    return std::move(out_);
  }

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

  void index_leaves_and_symbols() {
    for (const Value& v : g_.values())
      for (const SymDim& d : v.shape)
        if (!d.known() && !sym_.count(d.symbol)) {
          sym_[d.symbol] = static_cast<int>(out_.symbols.size());
          out_.symbols.push_back(d.symbol);
        }
    for (ValueId id : g_.leaves()) {
      if (g_.value(id).kind == ValueKind::Constant) out_.constants.push_back(id);
      else out_.inputs.push_back(id);
    }
  }

  // -- transposes folded into gemm
  // A float `transpose` swapping the last two axes whose every reader is a native matmul (and
  // that is no graph output) is never materialized: the matmul passes BLAS the transpose flag
  // and the transpose's input (matmul's gradient rule makes one per operand).
  void fold_transposes() {
    folded_.assign(g_.values().size(), -1);
    std::vector<int> matmul_reads(g_.values().size(), 0), reads(g_.values().size(), 0);
    for (const Node& n : g_.nodes())
      for (ValueId v : n.inputs) {
        ++reads[v];
        if (n.op == "matmul" && is_native(g_, n)) ++matmul_reads[v];
      }
    for (const auto& [name, v] : g_.outputs()) ++reads[v];
    for (const Node& n : g_.nodes()) {
      if (n.op != "transpose" || n.outputs.size() != 1) continue;
      const ValueId y = n.outputs[0];
      const Value& yv = g_.value(y);
      const int rank = static_cast<int>(yv.shape.size());
      if (rank < 2 || !is_float_dtype(yv.dtype) || reads[y] == 0 || reads[y] != matmul_reads[y]) continue;
      std::vector<int64_t> swap_last2(static_cast<size_t>(rank));
      for (int i = 0; i < rank; ++i) swap_last2[static_cast<size_t>(i)] = i;
      std::swap(swap_last2[static_cast<size_t>(rank - 1)], swap_last2[static_cast<size_t>(rank - 2)]);
      std::vector<int64_t> perm = n.attrs.get_ints("perm", {});
      if (perm.empty()) perm.assign(swap_last2.rbegin(), swap_last2.rend());  // default: reversed
      for (int64_t& p : perm) p = p < 0 ? p + rank : p;
      if (perm == swap_last2) folded_[y] = n.inputs[0];
    }
  }
  // The buffer a read of `v` uses: a folded transpose's or slice's input, a reshape's source,
  // else v itself. Lifetimes and in-place choices follow this buffer, not v.
  ValueId stored(ValueId v) const {
    if (folded_[v] >= 0) v = folded_[v];
    else if (const auto view = slice_views_.find(v); view != slice_views_.end()) v = view->second.source;
    const auto alias = reshape_views_.find(v);
    return alias != reshape_views_.end() ? alias->second : v;
  }

  // -- reshapes as views
  // A reshape (identity, expand_dims, reshape_like) of an NCHW buffer keeps every element at its
  // offset, so its result is the same memory: the generated code declares the result's pointer
  // as its source's and emits no copy (a transformer's head split copied [B, S, D] four times a
  // layer). Not for graph outputs (they go to the caller's buffer), for a source that is itself
  // not materialized in order (a folded transpose or a slice view), nor across layouts.
  void fold_reshapes() {
    std::set<ValueId> outputs;
    for (const auto& [name, v] : g_.outputs()) outputs.insert(v);
    for (Segment& seg : segs_) {
      if (seg.kind != Segment::Native || seg.nodes.size() != 1) continue;
      const Node& n = g_.node(seg.nodes[0]);
      if (!keeps_element_order(n.op)) continue;
      const ValueId x = n.inputs[0], y = n.outputs[0];
      if (outputs.count(y) || layout(x) != Layout::Nchw || layout(y) != Layout::Nchw ||
          g_.value(x).dtype != g_.value(y).dtype || folded_[x] >= 0 || slice_views_.count(x))
        continue;
      const auto chained = reshape_views_.find(x);
      reshape_views_[y] = chained != reshape_views_.end() ? chained->second : x;
      seg.kind = Segment::Folded;
    }
  }

  // -- slices read in place
  // A slice with steps of 1 of an NCHW value whose sliced dims are known, that is no graph output
  // and whose every reader is in an elementwise loop nest, is never copied: the nests read its
  // input from the slice's first element through the input's strides (an LSTM step's four gates
  // sliced from one [B, 4H] product: four copies a step saved). Its segment becomes Folded.
  struct SliceView {
    ValueId source = -1;
    std::string offset;  // elements from the source's start to the slice's
  };
  void fold_slices() {
    std::map<NodeId, size_t> seg_of_node;
    for (size_t s = 0; s < segs_.size(); ++s)
      for (NodeId n : segs_[s].nodes) seg_of_node[n] = s;
    std::set<ValueId> outputs;
    for (const auto& [name, v] : g_.outputs()) outputs.insert(v);
    std::map<ValueId, std::vector<NodeId>> readers;
    for (const Node& n : g_.nodes())
      for (ValueId v : n.inputs) readers[v].push_back(n.id);
    for (Segment& seg : segs_) {
      if (seg.kind != Segment::Native || seg.nodes.size() != 1) continue;
      const Node& n = g_.node(seg.nodes[0]);
      if (n.op != "slice" || n.inputs.size() != 1) continue;
      const ValueId x = n.inputs[0], y = n.outputs[0];
      if (outputs.count(y) || layout(x) != Layout::Nchw || layout(y) != Layout::Nchw ||
          g_.value(x).dtype != g_.value(y).dtype || folded_[x] >= 0 || slice_views_.count(x))
        continue;
      bool in_nests = readers.count(y) > 0;
      for (NodeId r : readers[y]) {
        const auto it = seg_of_node.find(r);
        in_nests = in_nests && it != seg_of_node.end() && segs_[it->second].kind == Segment::Elementwise;
      }
      if (!in_nests) continue;
      const std::optional<std::string> offset = slice_offset(n);
      if (!offset) continue;
      slice_views_[y] = {x, *offset};
      seg.kind = Segment::Folded;
    }
  }
  // Elements from x's start to slice `n`'s first, when its steps are 1 and its sliced dims known.
  std::optional<std::string> slice_offset(const Node& n) {
    const SymShape& xs = g_.value(n.inputs[0]).shape;
    const ops::SliceSpec spec = ops::slice_spec(n.attrs, static_cast<int>(xs.size()));  // verified already
    const std::vector<Mono> xd = dims(n.inputs[0]);
    std::string offset;
    for (size_t i = 0; i < spec.axes.size(); ++i) {
      const size_t a = static_cast<size_t>(spec.axes[i]);
      if (spec.steps[i] != 1 || !xs[a].known()) return std::nullopt;
      const int64_t start = ops::slice_range(spec.starts[i], spec.ends[i], 1, xs[a].value).start;
      if (start == 0) continue;
      offset += (offset.empty() ? "" : " + ") + str(Mono{start, {}} * product(xd, a + 1));
    }
    return offset.empty() ? std::string("0") : offset;
  }
  // Whether segment s reads `source` through a slice or reshape view (then it may not be written
  // in place).
  bool reads_through_view(size_t s, ValueId source) const {
    for (NodeId n : segs_[s].nodes)
      for (ValueId v : g_.node(n).inputs)
        if (const auto view = slice_views_.find(v); view != slice_views_.end() && view->second.source == source) return true;
        else if (const auto alias = reshape_views_.find(v); alias != reshape_views_.end() && alias->second == source) return true;
    return false;
  }

  // -- segments
  void build_segments() {
    for (size_t gi = 0; gi < plan_.groups.size(); ++gi) {
      const FusionGroup& grp = plan_.groups[gi];
      std::vector<NodeId> run;
      auto flush = [&] {
        if (!run.empty()) segs_.push_back({Segment::Elementwise, run, static_cast<int>(gi)});
        run.clear();
      };
      for (size_t i = 0; i < grp.nodes.size(); ++i) {
        const NodeId n = grp.nodes[i];
        const Node& node = g_.node(n);
        if (folded_[node.outputs[0]] >= 0) {  // read by its matmuls through the transpose flag
          out_.native_nodes.push_back(n);
          continue;
        }
        if (!node.subgraphs.empty()) {  // if / while / scan: a branch or loop in the generated code
          flush();
          segs_.push_back({Segment::Control, {n}, static_cast<int>(gi)});
          out_.native_nodes.push_back(n);
          continue;
        }
        const bool native = is_native(g_, node) || use_dnnl_grad(node);
        if (native && n == grp.anchor && use_dnnl(node)) {  // conv2d with its epilogue as post-ops
          flush();
          ConvEpilogue epi = fold_conv_epilogue(g_, n, {grp.nodes.begin() + static_cast<long>(i) + 1, grp.nodes.end()},
                                                [&](const ConvEpilogue& e) { return dnnl_takes(node, e); });
          std::vector<NodeId> nodes{n};
          nodes.insert(nodes.end(), epi.nodes.begin(), epi.nodes.end());
          conv_epilogue_[segs_.size()] = std::move(epi);
          segs_.push_back({Segment::Native, nodes, static_cast<int>(gi)});
          out_.native_nodes.insert(out_.native_nodes.end(), nodes.begin(), nodes.end());
          i += nodes.size() - 1;
          continue;
        }
        if (native && n != grp.anchor && get_op(node.op).fusion == FusionClass::Elementwise) {
          run.push_back(n);
          continue;
        }
        if (native && n == grp.anchor && prologue_fuses(run, node)) {
          run.push_back(n);
          segs_.push_back({Segment::Reduce, run, static_cast<int>(gi)});
          out_.native_nodes.insert(out_.native_nodes.end(), run.begin(), run.end());
          run.clear();
          continue;
        }
        flush();
        segs_.push_back({native ? Segment::Native : Segment::Fallback, {n}, static_cast<int>(gi)});
        (native ? out_.native_nodes : out_.fallback_nodes).push_back(n);
      }
      flush();
      for (const Segment& s : segs_)
        if (s.group == static_cast<int>(gi) && s.kind == Segment::Elementwise)
          out_.native_nodes.insert(out_.native_nodes.end(), s.nodes.begin(), s.nodes.end());
    }
  }

  // A layout is part of a value's type: every buffer must be read and written in a layout its
  // kernel addresses, or the result is silently wrong. Elementwise loops address each operand
  // in its own layout (loop_nest); a oneDNN conv reads x in any layout, its weights, bias and
  // per-channel post-op operands plain, and full post-op operands in the layout of the result
  // (DnnlConv reorders them into the primitive's); batch_norm and max_pool2d read x in y's layout and
  // global_avg_pool2d any layout into a plain y; every other kernel (reductions, fused
  // prologues, row kernels, gemm, copies, reference callbacks) and every graph output is NCHW.
  // The layout plan guarantees this; here it is checked, so a planning bug is an internal error
  // at lowering, never a wrong number.
  void check_layouts() const {
    auto require = [&](ValueId v, Layout want, const Node& reader, const char* role) {
      const Layout got = layout(v);
      INGOT_CHECK(got == want, "CpuBackend internal error: ", role, " v", v, " of ", reader.op, " (node ", reader.id,
                  ") is stored ", layout_name(got), " but read as ", layout_name(want),
                  "; please report this with the graph (CompileOptions::dump_graph)");
    };
    auto plain = [&](const Node& n) {
      for (ValueId v : n.inputs) require(stored(v), Layout::Nchw, n, "input");
      for (ValueId v : n.outputs) require(v, Layout::Nchw, n, "output");
    };
    for (size_t s = 0; s < segs_.size(); ++s) {
      const Segment& seg = segs_[s];
      if (seg.kind == Segment::Elementwise) continue;
      if (const auto epi = conv_epilogue_.find(s); epi != conv_epilogue_.end()) {
        const Node& conv = g_.node(seg.nodes[0]);
        for (size_t i = 1; i < conv.inputs.size(); ++i) require(conv.inputs[i], Layout::Nchw, conv, "weight or bias");
        for (size_t i = 0, b = 0; i < epi->second.post_ops.size(); ++i) {
          if (!epi->second.post_ops[i].binary()) continue;
          const ValueId o = epi->second.operands[b++];
          require(o, epi->second.post_ops[i].per_channel ? Layout::Nchw : layout(epi->second.result), conv,
                  "post-op operand");
        }
        continue;
      }
      if (seg.kind == Segment::Native && seg.nodes.size() == 1) {
        const Node& n = g_.node(seg.nodes[0]);
        if (n.op == "batch_norm" || n.op == "max_pool2d") {
          require(n.inputs[0], layout(n.outputs[0]), n, "input");
          for (size_t i = 1; i < n.inputs.size(); ++i) require(n.inputs[i], Layout::Nchw, n, "statistic");
          continue;
        }
        if (n.op == "global_avg_pool2d") {
          require(n.outputs[0], Layout::Nchw, n, "output");
          continue;
        }
      }
      for (NodeId id : seg.nodes) plain(g_.node(id));
    }
    for (const auto& [name, v] : g_.outputs())
      INGOT_CHECK(layout(v) == Layout::Nchw, "CpuBackend internal error: graph output v", v, " is stored ",
                  layout_name(layout(v)), "; please report this with the graph (CompileOptions::dump_graph)");
  }

  // Whether elementwise nodes `run` can be computed inside reduction `red` (one pass, no buffer
  // for the reduction's input): `red` is sum/mean/max/min reading the run's last value, no value
  // of the run is read elsewhere or is a graph output, and every other operand is an NCHW buffer
  // of the reduction input's shape or a scalar constant (so one flat index addresses all).
  bool prologue_fuses(const std::vector<NodeId>& run, const Node& red) const {
    static const std::set<std::string> kReductions = {"sum", "mean", "max", "min"};
    if (run.empty() || !kReductions.count(red.op)) return false;
    if (!contiguous_reduction(red, static_cast<int>(g_.value(red.inputs[0]).shape.size()))) return false;
    const ValueId x = red.inputs[0];
    if (g_.node(run.back()).outputs[0] != x) return false;
    std::set<ValueId> inside;
    for (NodeId n : run) inside.insert(g_.node(n).outputs[0]);
    std::set<NodeId> members(run.begin(), run.end());
    members.insert(red.id);
    for (const Node& n : g_.nodes()) {
      if (members.count(n.id)) continue;
      for (ValueId v : n.inputs)
        if (inside.count(v)) return false;
    }
    for (const auto& [name, v] : g_.outputs())
      if (inside.count(v)) return false;
    for (NodeId n : run)
      for (ValueId v : g_.node(n).inputs)
        if (!inside.count(v) && !is_scalar_constant(g_.value(v)) &&
            (g_.value(v).shape != g_.value(x).shape || layout(v) != Layout::Nchw))
          return false;
    return true;
  }

  void plan_buffers() {
    const size_t nv = g_.values().size();
    seg_of_.assign(nv, -1);
    last_use_.assign(nv, -1);
    needs_buffer_.assign(nv, false);
    is_output_.assign(nv, false);
    for (size_t s = 0; s < segs_.size(); ++s)
      for (NodeId n : segs_[s].nodes)
        for (ValueId v : g_.node(n).outputs) {
          if (segs_[s].kind == Segment::Folded) continue;  // read through its source
          seg_of_[v] = static_cast<int>(s);
          const bool fused_prologue = segs_[s].kind == Segment::Reduce && n != segs_[s].nodes.back();
          const auto epi = conv_epilogue_.find(s);
          const bool inside_primitive = epi != conv_epilogue_.end() && v != epi->second.result;
          if (segs_[s].kind != Segment::Elementwise && !fused_prologue && !inside_primitive) needs_buffer_[v] = true;
        }
    for (size_t s = 0; s < segs_.size(); ++s)
      for (NodeId n : segs_[s].nodes)
        for (ValueId read : g_.node(n).inputs) {
          if (segs_[s].kind == Segment::Folded) continue;
          const ValueId v = stored(read);
          if (seg_of_[v] != static_cast<int>(s)) {
            needs_buffer_[v] = true;
            last_use_[v] = std::max(last_use_[v], static_cast<int>(s));
          }
        }
    for (const auto& [name, v] : g_.outputs()) {
      needs_buffer_[v] = true;
      is_output_[v] = true;
    }
  }

  // -- oneDNN conv2d: float32 convs with static sizes whose padding covers the output exactly;
  // the rest keeps the generated im2col + gemm.
  bool use_dnnl(const Node& n) const { return opt_.dnnl && conv_runs_channels_last(g_, n); }

  // conv2d_input_grad / conv2d_weight_grad through oneDNN's backward primitives: float32, the
  // forward convolution's geometry as use_dnnl requires it. They read and write NCHW buffers
  // (the layout plan leaves the operands of nodes it does not know as NCHW).
  bool use_dnnl_grad(const Node& n) const {
    if (!opt_.dnnl || (n.op != "conv2d_input_grad" && n.op != "conv2d_weight_grad")) return false;
    for (ValueId v : {n.inputs[0], n.inputs[1], n.inputs[2], n.outputs[0]})
      if (g_.value(v).dtype != DType::Float32) return false;
    const bool input_grad = n.op == "conv2d_input_grad";  // inputs (dy, w, like x), else (x, dy, like w)
    if (!input_grad && !dnnl_weight_grad_trusted(n)) return false;
    return input_grad ? conv_geometry_fits(g_, n, n.inputs[2], n.inputs[1], n.inputs[0])
                      : conv_geometry_fits(g_, n, n.inputs[0], n.inputs[2], n.inputs[1]);
  }

  // oneDNN 2.6's AVX-512 weight gradient returns wrong values (relative error 2 and more, no
  // error) for a batch of 1 whose output is 1x1 under a kernel of 16x16 taps or more (found by
  // the program fuzzer: fuzz/regressions/programs/conv-weight-grad-batch-1-whole-input-kernel;
  // the forward and the input gradient are right there). Those geometries, and any with a 1x1
  // output or 64 taps or more to keep a margin around the boundary we saw, take the generated
  // im2col + GEMM kernel, which is one matrix product for them anyway.
  bool dnnl_weight_grad_trusted(const Node& n) const {
    const SymShape& w = g_.value(n.inputs[2]).shape;   // like the weight: [O, C/g, kh, kw]
    const SymShape& dy = g_.value(n.inputs[1]).shape;  // [N, O, oh, ow]
    if (w.size() != 4 || dy.size() != 4) return false;
    for (const SymDim* d : {&w[2], &w[3], &dy[2], &dy[3]})
      if (!d->known()) return false;
    const int64_t taps = w[2].value * w[3].value, outputs = dy[2].value * dy[3].value;
    return outputs > 1 && taps < 64;
  }

  Layout layout(ValueId v) const { return layouts_.at(v); }

  // Whether the primitive can run conv `n` with epilogue `e`: a residual operand must be stored in
  // the layout of the result (the one oneDNN is given for both), and oneDNN must run it fast.
  bool dnnl_takes(const Node& n, const ConvEpilogue& e) const {
    for (ValueId o : e.operands)
      if (g_.value(o).shape == g_.value(e.result).shape && layout(o) != layout(e.result)) return false;
    return dnnl_runs_fast(g_, n, e, layout(n.inputs[0]), layout(e.result));
  }

  std::vector<ValueId> seg_reads(size_t s) const {
    std::set<ValueId> in_seg;
    for (NodeId n : segs_[s].nodes) in_seg.insert(g_.node(n).outputs.begin(), g_.node(n).outputs.end());
    std::vector<ValueId> r;
    for (NodeId n : segs_[s].nodes)
      for (ValueId read : g_.node(n).inputs) {
        const ValueId v = stored(read);
        if (!in_seg.count(v) && std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
      }
    return r;
  }
  std::vector<ValueId> seg_stores(size_t s) const {
    std::vector<ValueId> r;
    for (NodeId n : segs_[s].nodes)
      for (ValueId v : g_.node(n).outputs)
        if (needs_buffer_[v]) r.push_back(v);
    return r;
  }

  // Arena slots for the intermediates that need memory (graph outputs go straight to the
  // caller's tensors), in schedule order, and the in-place choices: a single-shape elementwise
  // segment stores over a slot it reads when that slot dies here with the same shape, element
  // size and layout (each element is read before it is written, at the same index).
  void plan_arena() {
    slot_.assign(g_.values().size(), -1);
    out_.segments = static_cast<int>(segs_.size());
    for (size_t s = 0; s < segs_.size(); ++s)
      for (NodeId n : segs_[s].nodes)
        for (ValueId v : g_.node(n).outputs) {
          if (!needs_buffer_[v] || is_output_[v]) continue;
          slot_[v] = static_cast<int>(out_.arena_slots.size());
          out_.arena_slots.push_back({v, seg_of_[v], std::max(last_use_[v], seg_of_[v]), -1});
        }
    inplace_seg_.assign(segs_.size(), false);
    if (!opt_.inplace) return;
    for (size_t s = 0; s < segs_.size(); ++s) {
      if (segs_[s].kind != Segment::Elementwise) continue;
      const std::vector<ValueId> stores = seg_stores(s);
      bool one_nest = !stores.empty();
      for (ValueId v : stores) one_nest = one_nest && g_.value(v).shape == g_.value(stores[0]).shape;
      if (!one_nest) continue;
      std::vector<ValueId> free_reads;
      for (ValueId r : seg_reads(s)) {
        const int rs = slot_[r];
        if (rs >= 0 && out_.arena_slots[rs].last == static_cast<int>(s) && seg_of_[r] < static_cast<int>(s) &&
            !reads_through_view(s, r))
          free_reads.push_back(r);
      }
      for (ValueId v : stores) {
        if (slot_[v] < 0) continue;
        for (auto it = free_reads.begin(); it != free_reads.end(); ++it) {
          const Value &rv = g_.value(*it), &vv = g_.value(v);
          if (rv.shape != vv.shape || dtype_size(rv.dtype) != dtype_size(vv.dtype) || layout(*it) != layout(v)) continue;
          out_.arena_slots[static_cast<size_t>(slot_[v])].reuses = slot_[*it];
          inplace_seg_[s] = true;
          free_reads.erase(it);
          break;
        }
      }
    }
    for (const auto& [s, epi] : conv_epilogue_)
      if (const std::optional<ValueId> r = residual_to_overwrite(s, epi))
        out_.arena_slots[static_cast<size_t>(slot_[epi.result])].reuses = slot_[*r];
  }

  // The operand of conv segment `s`'s first full add (a residual, as in ResNet) when the result
  // can be written over it: the segment reads it there once and it dies there, stored directly
  // (no view) in an arena slot with the result's shape, element size and layout, and oneDNN runs
  // the convolution fast with that add as a sum post-op. The primitive then reads and writes each
  // element of that one buffer once (ONNX Runtime's Conv + Sum), where a binary post-op reads the
  // residual from one buffer and writes the result to another.
  std::optional<ValueId> residual_to_overwrite(size_t s, const ConvEpilogue& epi) const {
    const int operand = sum_operand_index(epi.post_ops);
    if (operand < 0) return std::nullopt;
    const ValueId r = epi.operands[static_cast<size_t>(operand)];
    if (stored(r) != r || slot_[r] < 0 || slot_[epi.result] < 0 || seg_of_[r] >= static_cast<int>(s) ||
        out_.arena_slots[static_cast<size_t>(slot_[r])].last != static_cast<int>(s) || reads_through_view(s, r))
      return std::nullopt;
    const Value &rv = g_.value(r), &yv = g_.value(epi.result);
    if (rv.shape != yv.shape || dtype_size(rv.dtype) != dtype_size(yv.dtype) || layout(r) != layout(epi.result))
      return std::nullopt;
    int reads = 0;
    for (NodeId n : segs_[s].nodes)
      for (ValueId v : g_.node(n).inputs) reads += stored(v) == r;
    const Node& conv = g_.node(segs_[s].nodes[0]);
    if (reads != 1 || !dnnl_runs_fast(g_, conv, epi, layout(conv.inputs[0]), layout(epi.result), true))
      return std::nullopt;
    return r;
  }

  // Which inputs' buffers each graph output may be written into (the caller passing an input's
  // buffer to receive an output, as a training step does with its parameters): every read of
  // the input comes before the output's segment, or in it, when that segment is one elementwise
  // nest reading the input at the index it writes (emitted without __restrict).
  void plan_output_aliases() {
    out_.output_may_alias.assign(g_.outputs().size(), {});
    std::set<ValueId> outputs;
    for (const auto& [name, v] : g_.outputs()) outputs.insert(v);
    for (size_t j = 0; j < g_.outputs().size(); ++j) {
      const Value& v = g_.value(g_.outputs()[j].second);
      if (v.producer < 0 || layout(v.id) != Layout::Nchw) continue;
      const int s = seg_of_[v.id];
      const std::vector<ValueId> stores = seg_stores(static_cast<size_t>(s));
      bool one_nest = segs_[s].kind == Segment::Elementwise;
      for (ValueId st : stores) one_nest = one_nest && g_.value(st).shape == v.shape;
      for (size_t i = 0; i < out_.inputs.size(); ++i) {
        const Value& in = g_.value(out_.inputs[i]);
        if (in.shape != v.shape || in.dtype != v.dtype || outputs.count(in.id)) continue;
        if (last_use_[in.id] < s || (last_use_[in.id] == s && one_nest && !reads_through_view(static_cast<size_t>(s), in.id))) {
          out_.output_may_alias[j].push_back(static_cast<int>(i));
          if (last_use_[in.id] == s) inplace_seg_[static_cast<size_t>(s)] = true;
        }
      }
    }
  }

  std::string ptr(ValueId v) const { return "v" + std::to_string(v); }
  // The pointer as kernels declare it (storage_type): float16/bfloat16 buffers as their raw bits.
  std::string stored_ptr(ValueId v) const {
    const auto view = slice_views_.find(v);
    const std::string p = view == slice_views_.end() ? ptr(v) : "(" + ptr(view->second.source) + " + " + view->second.offset + ")";
    return is_half(g_.value(v).dtype) ? "ig_raw(" + p + ")" : p;
  }

  std::string describe(const std::vector<NodeId>& nodes) const {
    std::string s;
    for (NodeId n : nodes) s += (s.empty() ? "" : " ") + g_.node(n).op;
    std::set<std::string> scopes;
    for (NodeId n : nodes)
      if (!g_.node(n).scope.empty()) scopes.insert(g_.node(n).scope);
    if (!scopes.empty()) {
      s += " (from";
      for (const std::string& sc : scopes) s += " " + comment_safe(sc);
      s += ")";
    }
    return s;
  }

  std::string kernel_name(const std::vector<NodeId>& nodes, bool fused) {
    std::string name = "k" + std::to_string(out_.kernels++) + (fused && nodes.size() > 1 ? "_fused" : "");
    for (size_t i = 0; i < nodes.size() && i < 4; ++i) name += "_" + ident(g_.node(nodes[i]).op);
    if (nodes.size() > 4) name += "_etc";
    step_kernels_.push_back(name);
    return name;
  }

  std::string dims_prologue() const {
    std::string s = "  (void)ctx;\n";
    for (size_t i = 0; i < out_.symbols.size(); ++i)
      s += "  [[maybe_unused]] const int64_t d" + std::to_string(i) + " = ctx->dims[" +
           std::to_string(i) + "];  // " + comment_safe(out_.symbols[i]) + "\n";
    return s;
  }

  std::string par(const Mono& work, const std::string& extra_cond = "") const {
    std::string nt = opt_.num_threads > 0 ? " num_threads(" + std::to_string(opt_.num_threads) + ")" : "";
    if (work.is_const()) {
      if (work.c <= 65536) return "";
      return "  #pragma omp parallel for" + nt + (extra_cond.empty() ? "" : " if(" + extra_cond + ")") + "\n";
    }
    return "  #pragma omp parallel for" + nt + " if(ig_big(" + str(work) + ")" +
           (extra_cond.empty() ? "" : " && " + extra_cond) + ")\n";
  }

  // -- elementwise expressions
  std::string operand(ValueId v, DType want, const std::map<ValueId, std::string>& names) const {
    const Value& val = g_.value(v);
    std::string e = is_scalar_constant(val) ? literal(val.constant) : names.at(v);
    if (val.dtype != want) e = "ig_cast<" + ctype(want) + ">(" + e + ")";
    return e;
  }

  std::string expr(const Node& n, const std::map<ValueId, std::string>& names) const {
    using K = ElementwiseForms::Kind;
    const ElementwiseForms& op = *elementwise_forms(n.op);
    const DType od = g_.value(n.outputs[0]).dtype;
    const std::string to = ctype(od), c = comptype(od);
    auto in = [&](int i) { return n.inputs[static_cast<size_t>(i)]; };
    auto raw = [&](int i) { return operand(in(i), g_.value(in(i)).dtype, names); };
    const std::string fn = op.cpu_variant ? op.cpu_variant(n) : op.cpu_function;
    switch (op.kind) {
      case K::UnaryFloat:
        // float compute: the prelude's vectorizable ig_v* math instead of libm (float64 keeps libm).
        if (c == "float" && op.cpu_vector_math)
          return to + "(ig_v" + fn.substr(3) + "(static_cast<float>(" + raw(0) + ")))";
        return to + "(" + fn + "<" + c + ">(static_cast<" + c + ">(" + raw(0) + ")))";
      case K::UnarySame:
        return to + "(" + fn + "<" + c + ">(static_cast<" + c + ">(" + raw(0) + ")))";
      case K::Cast: return operand(in(0), od, names);
      case K::Identity: return raw(0);
      case K::Binary:
        return to + "(" + fn + "<" + c + ">(static_cast<" + c + ">(" + operand(in(0), od, names) +
               "), static_cast<" + c + ">(" + operand(in(1), od, names) + ")))";
      case K::Compare: {
        const DType p = promote_types(g_.value(in(0)).dtype, g_.value(in(1)).dtype);
        const std::string pc = comptype(p);
        return "(static_cast<" + pc + ">(" + operand(in(0), p, names) + ") " + fn + " static_cast<" +
               pc + ">(" + operand(in(1), p, names) + "))";
      }
      case K::Where:
        return "(" + operand(in(0), DType::Bool, names) + " ? " + operand(in(1), od, names) + " : " +
               operand(in(2), od, names) + ")";
    }
    return "";
  }

  // The loops of an elementwise kernel over `domain`'s shape, in the memory order of its layout
  // (so its stores are contiguous), and each operand's stride along each loop (0: broadcast).
  // The channel axis splits into [blocks, lanes] when any operand is channel-blocked, so that
  // every operand's offset stays linear in the loop indices.
  struct LoopNest {
    std::vector<Mono> extents;
    std::vector<std::vector<Mono>> strides;  // per operand, per loop
  };
  LoopNest loop_nest(ValueId domain, const std::vector<ValueId>& operands) {
    const std::vector<Mono> dom = dims(domain);
    const size_t r = dom.size();
    int64_t block = 0;
    for (ValueId v : operands) block = std::max<int64_t>(block, layout_channel_block(layout(v)));
    INGOT_CHECK(block == 0 || (r == 4 && dom[1].is_const() && dom[1].c % block == 0),
                "CpuBackend: channel-blocked operands need a [N, C, H, W] loop with C a multiple of ", block);
    enum Part { Whole, Blocks, Lanes };
    struct Loop {
      size_t axis;
      Part part;
    };
    std::vector<Loop> loops;
    auto push_channel = [&](bool lanes_inner) {
      if (!block) return loops.push_back({1, Whole});
      loops.push_back({1, Blocks});
      if (!lanes_inner) loops.push_back({1, Lanes});
    };
    const Layout dl = layout(domain);
    if (dl == Layout::Nhwc) {
      loops = {{0, Whole}, {2, Whole}, {3, Whole}};
      push_channel(false);
    } else if (layout_channel_block(dl) > 0) {
      loops = {{0, Whole}};
      push_channel(true);
      loops.insert(loops.end(), {{2, Whole}, {3, Whole}, {1, Lanes}});
    } else {
      for (size_t a = 0; a < r; ++a) {
        if (r == 4 && a == 1) push_channel(false);
        else loops.push_back({a, Whole});
      }
    }
    LoopNest nest;
    for (const Loop& l : loops)
      nest.extents.push_back(l.part == Whole ? dom[l.axis] : l.part == Blocks ? Mono{dom[1].c / block, {}} : Mono{block, {}});
    for (ValueId v : operands) {
      const std::vector<Mono> vd = dims(v);
      // A slice view (fold_slices) steps through its source's dims.
      const std::vector<Mono> sd = slice_views_.count(v) ? dims(slice_views_.at(v).source) : vd;
      const size_t off = r - vd.size();
      const Layout vl = layout(v);
      const int64_t vb = layout_channel_block(vl);
      std::vector<Mono> st;
      for (const Loop& l : loops) {
        const size_t k = l.axis - off;
        if (l.axis < off || (vd[k].is_const() && vd[k].c == 1)) {
          st.push_back(kZero);
        } else if (vb > 0) {  // [N, C / vb, H, W, vb]
          const Mono lane{vb, {}};
          const Mono s = k == 0 ? vd[1] * vd[2] * vd[3] : k == 2 ? vd[3] * lane : k == 3 ? lane
                         : l.part == Blocks ? vd[2] * vd[3] * lane : kOne;
          st.push_back(s);
        } else {
          const Mono s = vl != Layout::Nhwc ? product(sd, k + 1)
                         : k == 0          ? vd[1] * vd[2] * vd[3]
                         : k == 1          ? kOne
                         : k == 2          ? vd[3] * vd[1]
                                           : vd[1];
          st.push_back(l.part == Blocks ? s * Mono{block, {}} : s);
        }
      }
      nest.strides.push_back(std::move(st));
    }
    return nest;
  }

  // -- one elementwise loop nest computing `stores` (all of one shape) from the segment's nodes
  // `alias`: a store may be the same buffer as a read (in place), so no __restrict.
  void emit_elementwise(const Segment& seg, const std::vector<ValueId>& stores, bool alias, std::ostream& call) {
    std::set<ValueId> in_seg;
    for (NodeId n : seg.nodes) in_seg.insert(g_.node(n).outputs.begin(), g_.node(n).outputs.end());
    // The nodes these stores need (ancestors inside the segment), in order.
    std::set<ValueId> want(stores.begin(), stores.end());
    std::vector<NodeId> nodes;
    for (auto it = seg.nodes.rbegin(); it != seg.nodes.rend(); ++it) {
      const Node& n = g_.node(*it);
      if (!want.count(n.outputs[0])) continue;
      nodes.insert(nodes.begin(), *it);
      for (ValueId v : n.inputs)
        if (in_seg.count(v)) want.insert(v);
    }
    std::vector<ValueId> reads;
    for (NodeId n : nodes)
      for (ValueId v : g_.node(n).inputs)
        if (!in_seg.count(v) && !is_scalar_constant(g_.value(v)) &&
            std::find(reads.begin(), reads.end(), v) == reads.end())
          reads.push_back(v);

    std::vector<ValueId> operands = reads;
    operands.insert(operands.end(), stores.begin(), stores.end());
    const LoopNest nest = loop_nest(stores[0], operands);
    const std::vector<Mono>& dom = nest.extents;
    const std::vector<std::vector<Mono>>& strides = nest.strides;
    const size_t r = dom.size();
    // Coalesce: drop size-1 dims, merge neighbours that are contiguous for every operand.
    std::vector<Mono> md;
    std::vector<std::vector<Mono>> ms(strides.size());
    for (size_t k = 0; k < r; ++k) {
      if (dom[k].is_const() && dom[k].c == 1) continue;
      bool merge = !md.empty();
      for (size_t o = 0; merge && o < strides.size(); ++o)
        merge = ms[o].back() == strides[o][k] * dom[k];
      if (merge) {
        md.back() = md.back() * dom[k];
        for (size_t o = 0; o < strides.size(); ++o) ms[o].back() = strides[o][k];
      } else {
        md.push_back(dom[k]);
        for (size_t o = 0; o < strides.size(); ++o) ms[o].push_back(strides[o][k]);
      }
    }
    const size_t R = md.size();
    const Mono total = product(md);

    const std::string name = kernel_name(nodes, true);
    std::ostringstream k;
    k << "// group " << seg.group << " [elementwise]: " << describe(nodes) << "\n";
    k << "static int " << name << "(const ig_ctx* ctx";
    std::map<ValueId, std::string> names;
    const char* restrict_ = alias ? "" : " __restrict";
    for (size_t i = 0; i < reads.size(); ++i)
      k << ", const " << storage_type(g_.value(reads[i]).dtype) << "*" << restrict_ << " p" << i;
    for (size_t i = 0; i < stores.size(); ++i)
      k << ", " << storage_type(g_.value(stores[i]).dtype) << "*" << restrict_ << " q" << i;
    k << ") {\n" << dims_prologue();
    for (ValueId v : reads) k << broadcast_guards(dims(v), dims(stores[0]), g_.node(nodes.back()).op);
    // Offsets: outer index o (dims 0..R-2), inner index i (dim R-1).
    auto offset = [&](size_t o, const std::string& base) {
      std::string s = base;
      if (R > 0 && !(ms[o][R - 1] == kZero)) {
        std::string t = ms[o][R - 1] == kOne ? "i" : "i * " + str(ms[o][R - 1]);
        s = s.empty() ? t : s + " + " + t;
      }
      return s.empty() ? std::string("0") : s;
    };
    auto body = [&](const std::string& indent, const std::vector<std::string>& bases) {
      std::ostringstream b;
      for (size_t i = 0; i < reads.size(); ++i) {
        names[reads[i]] = "a" + std::to_string(i);
        const DType dt = g_.value(reads[i]).dtype;
        b << indent << "const " << ctype(dt) << " a" << i << " = " << loaded(dt, "p" + std::to_string(i), offset(i, bases[i]))
          << ";\n";
      }
      for (NodeId nid : nodes) {
        const Node& n = g_.node(nid);
        const ValueId out = n.outputs[0];
        names[out] = "t" + std::to_string(out);
        b << indent << "const " << ctype(g_.value(out).dtype) << " t" << out << " = " << expr(n, names)
          << ";  // " << n.op << "\n";
      }
      for (size_t i = 0; i < stores.size(); ++i)
        b << indent << "q" << i << "[" << offset(reads.size() + i, bases[reads.size() + i]) << "] = t"
          << stores[i] << (is_half(g_.value(stores[i]).dtype) ? ".bits" : "") << ";\n";
      return b.str();
    };
    std::vector<std::string> bases(strides.size());
    // Threads pay off sooner for a nest of transcendentals (vector exp/tanh/erf: tens of
    // instructions an element) than for a copy: the work a nest weighs is its elements times one
    // plus 8 per such op (an LSTM step's gates, 8192 elements of 5 of them, then runs on every
    // core rather than one).
    int64_t weight = 1;
    for (NodeId nid : nodes) {
      const ElementwiseForms* f = elementwise_forms(g_.node(nid).op);
      if (f != nullptr && f->cpu_vector_math) weight += 8;
    }
    const Mono work = total * Mono{weight, {}};
    if (R == 0) {
      k << "  {\n" << body("    ", bases) << "  }\n";
    } else if (R == 1) {
      std::string p = par(work);
      if (!p.empty()) p.insert(p.find(" for") + 4, " simd");
      k << "  const int64_t n0 = " << str(md[0]) << ";\n"
        << (p.empty() ? "  #pragma omp simd\n" : p) << "  for (int64_t i = 0; i < n0; ++i) {\n"
        << body("    ", bases) << "  }\n";
    } else {
      const Mono outer = product(md, 0, R - 1);
      k << "  const int64_t outer = " << str(outer) << ", inner = " << str(md[R - 1]) << ";\n";
      k << par(work, outer.is_const() ? "" : "outer > 1") << "  for (int64_t o = 0; o < outer; ++o) {\n";
      k << "    int64_t rest = o;\n";
      for (size_t d = R - 1; d-- > 0;) {
        if (d == 0) k << "    const int64_t j0 = rest;\n";
        else
          k << "    const int64_t j" << d << " = rest % " << str(md[d]) << ";\n    rest /= " << str(md[d]) << ";\n";
      }
      k << "    (void)rest;\n";
      for (size_t o = 0; o < strides.size(); ++o) {
        std::string s;
        for (size_t d = 0; d + 1 < R; ++d) {
          if (ms[o][d] == kZero) continue;
          s += (s.empty() ? "" : " + ") + ("j" + std::to_string(d)) +
               (ms[o][d] == kOne ? "" : " * " + str(ms[o][d]));
        }
        k << "    const int64_t b" << o << " = " << (s.empty() ? "0" : s) << ";\n";
        bases[o] = "b" + std::to_string(o);
      }
      k << "    #pragma omp simd\n    for (int64_t i = 0; i < inner; ++i) {\n"
        << body("      ", bases) << "    }\n  }\n";
    }
    k << "  return 0;\n}\n\n";
    kernels_ << k.str();
    call << "  if (" << name << "(ctx";
    for (ValueId v : reads) call << ", " << stored_ptr(v);
    for (ValueId v : stores) call << ", " << stored_ptr(v);
    call << ") != 0) return 1;\n";
  }

  // -- native anchors (reductions, row kernels, dense, reshape)
  void emit_native(const Segment& seg, std::ostream& call) {
    const Node& n = g_.node(seg.nodes[0]);
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const std::vector<Mono> xd = dims(x);
    const int rank = static_cast<int>(xd.size());
    const std::string tx = ctype(g_.value(x).dtype), ty = ctype(g_.value(y).dtype);
    const std::string name = kernel_name(seg.nodes, false);
    std::ostringstream k, args;
    k << "// group " << seg.group << " [" << group_kind_name(plan_.groups[static_cast<size_t>(seg.group)].kind)
      << "]: " << describe(seg.nodes) << "\n";
    k << "static int " << name << "(const ig_ctx* ctx";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      k << ", const " << ctype(g_.value(n.inputs[i]).dtype) << "* __restrict x" << i;
    k << ", " << ty << "* __restrict y";
    for (size_t i = 1; i < n.outputs.size(); ++i)  // more outputs: y1, y2, ...
      k << ", " << ctype(g_.value(n.outputs[i]).dtype) << "* __restrict y" << i;
    k << ") {\n" << dims_prologue();
    auto split3 = [&](int a, int b) {  // [outer | a..b | inner]
      k << "  const int64_t outer = " << str(product(xd, 0, static_cast<size_t>(a)))
        << ", n = " << str(product(xd, static_cast<size_t>(a), static_cast<size_t>(b + 1)))
        << ", inner = " << str(product(xd, static_cast<size_t>(b + 1))) << ";\n";
    };
    const std::string& op = n.op;
    if (op == "zeros_like") {
      k << "  std::memset(y, 0, static_cast<size_t>(" << str(numel_of(y)) << ") * sizeof(" << ty << "));\n";
    } else if (keeps_element_order(op)) {
      k << "  std::memcpy(y, x0, static_cast<size_t>(" << str(numel_of(y)) << ") * sizeof(" << ty << "));\n";
    } else if (op == "gather") {
      const int64_t a = n.attrs.get_int("axis", 0), ax = a < 0 ? a + rank : a;
      const size_t axs = static_cast<size_t>(ax);
      k << "  return ig_gather(ctx, x0, x1, y, " << str(product(xd, 0, axs)) << ", " << str(xd[axs]) << ", "
        << str(numel_of(n.inputs[1])) << ", " << str(product(xd, axs + 1)) << ", " << ax << ");\n";
    } else if (op == "transpose" && rank <= 1) {  // the same elements in the same order
      k << "  std::memcpy(y, x0, static_cast<size_t>(" << str(numel_of(y)) << ") * sizeof(" << ty << "));\n";
    } else if (op == "transpose") {
      std::vector<int64_t> perm = n.attrs.get_ints("perm", {});
      if (perm.empty())
        for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
      k << "  const int64_t dims[] = {";
      for (int i = 0; i < rank; ++i) k << (i ? ", " : "") << str(xd[static_cast<size_t>(i)]);
      k << "}, perm[] = {";
      for (int i = 0; i < rank; ++i) k << (i ? ", " : "") << (perm[static_cast<size_t>(i)] < 0 ? perm[static_cast<size_t>(i)] + rank : perm[static_cast<size_t>(i)]);
      k << "};\n  ig_transpose(x0, y, " << rank << ", dims, perm);\n";
    } else if (op == "slice" && leading_rows_slice(g_, n)) {  // rows [start, start + y's rows) of x
      const int64_t start = std::min(n.attrs.get_ints("starts").at(0), xd[0].c);
      k << "  std::memcpy(y, x0 + " << str(Mono{start, {}} * product(xd, 1)) << ", static_cast<size_t>("
        << str(numel_of(y)) << ") * sizeof(" << ty << "));\n";
    } else if (op == "concat" && leading_blocks_concat(g_, n)) {  // axis 0: the blocks one after another
      int64_t at = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const int64_t part = numel_of(n.inputs[i]).c;
        k << "  std::memcpy(y + " << at << ", x" << i << ", static_cast<size_t>(" << part << ") * sizeof(" << ty << "));\n";
        at += part;
      }
    } else if ((op == "sum" || op == "mean" || op == "max" || op == "min") && !contiguous_reduction(n, rank)) {
      std::vector<std::string> sizes;
      for (const Mono& d : xd) sizes.push_back(str(d));
      k << reduce_axes_body(op == "sum" ? 0 : op == "mean" ? 1 : op == "max" ? 2 : 3, op, tx, ty, sizes,
                            *reduced_axes(n, rank));
    } else if (op == "moments" && !contiguous_reduction(n, rank)) {
      std::vector<std::string> sizes;
      for (const Mono& d : xd) sizes.push_back(str(d));
      k << moments_axes_body(sizes, *reduced_axes(n, rank));
    } else if (op == "argmax") {
      const int64_t a = n.attrs.get_int("axis"), ax = a < 0 ? a + rank : a;
      split3(static_cast<int>(ax), static_cast<int>(ax));
      k << "  if (n == 0 && outer * inner > 0) return ig_fail(ctx, \"argmax: the axis has size 0, so there is no maximum\");\n"
        << "  if (n > 0) ig_argmax(x0, y, outer, n, inner);\n";
    } else if (op == "numel") {
      const std::vector<bool> counted = *reduced_axes(n, rank);
      Mono count = kOne;
      for (int i = 0; i < rank; ++i)
        if (counted[static_cast<size_t>(i)]) count = count * xd[static_cast<size_t>(i)];
      k << "  y[0] = ig_cast<" << ty << ">(static_cast<double>(" << str(count) << "));\n";
    } else if (op == "moments") {
      int a = 0, b = -1;
      reduce_block(n, rank, &a, &b);
      if (rank == 0) k << "  const int64_t outer = 1, n = 1, inner = 1;\n";
      else split3(a, b);
      k << "  ig_moments(x0, y, y1, outer, n, inner);\n";
    } else if (op == "sum" || op == "mean" || op == "max" || op == "min") {
      int a = 0, b = -1;
      reduce_block(n, rank, &a, &b);
      if (rank == 0) k << "  const int64_t outer = 1, n = 1, inner = 1;\n";
      else split3(a, b);
      const int kind = op == "sum" ? 0 : op == "mean" ? 1 : op == "max" ? 2 : 3;
      if (kind >= 2)
        k << "  if (n == 0 && outer * inner > 0) return ig_fail(ctx, \"" << op
          << ": cannot reduce over a zero-size dimension (no identity)\");\n";
      k << "  ig_reduce<" << kind << ", " << tx << ", " << ty << ">(x0, y, outer, n, inner);\n";
    } else if (op == "global_avg_pool2d" && layout(x) != Layout::Nchw) {
      // [images, pixels, channels] (NHWC) or [images * blocks, pixels, block]: y's order either way
      const int64_t block = layout_channel_block(layout(x));
      const Mono outer = block ? xd[0] * Mono{xd[1].c / block, {}} : xd[0], inner = block ? Mono{block, {}} : xd[1];
      k << "  ig_avg_pool_cl(x0, y, " << str(outer) << ", " << str(xd[2] * xd[3]) << ", " << str(inner) << ");\n";
    } else if (op == "global_avg_pool2d") {
      k << "  ig_reduce<1, " << tx << ", " << ty << ">(x0, y, " << str(xd[0] * xd[1]) << ", "
        << str(xd[2] * xd[3]) << ", 1);\n";
    } else if (op == "softmax" || op == "log_softmax") {
      const int a = norm_axis(n.attrs.get_int("axis", -1), rank);
      split3(a, a);
      k << "  ig_softmax<" << (op == "log_softmax" ? "true" : "false") << ", " << tx << ", " << ty
        << ">(x0, y, outer, n, inner);\n";
    } else if (op == "layer_norm" || op == "rms_norm") {
      const int a = norm_axis(n.attrs.get_int("axis", -1), rank);
      k << "  const int64_t len = " << str(product(xd, static_cast<size_t>(a))) << ", total = "
        << str(product(xd)) << ";\n  const int64_t rows = len == 0 ? 0 : total / len;\n";
      std::string w = n.inputs.size() > 1 ? "x1" : "static_cast<const float*>(nullptr)";
      std::string bb = n.inputs.size() > 2 ? "x2" : "static_cast<const float*>(nullptr)";
      char eps[64];
      std::snprintf(eps, sizeof eps, "%a", n.attrs.get_float("eps", 1e-5));
      k << "  ig_trailing_norm<" << (op == "layer_norm" ? "true" : "false") << ">(x0, " << w << ", " << bb
        << ", y, rows, len, " << eps << ");\n";
    } else if (op == "batch_norm") {
      char eps[64];
      std::snprintf(eps, sizeof eps, "%a", n.attrs.get_float("eps", 1e-5));
      if (const int64_t block = layout_channel_block(layout(y)); block > 0)  // [N, C / block, H * W, block]
        k << "  ig_batch_norm_cl(x0, x1, x2, x3, x4, y, " << str(xd[0]) << ", " << xd[1].c / block << ", "
          << str(xd[2] * xd[3]) << ", " << block << ", " << eps << ");\n";
      else if (layout(y) == Layout::Nhwc)  // [N * H * W, 1, 1, C]
        k << "  ig_batch_norm_cl(x0, x1, x2, x3, x4, y, " << str(xd[0] * xd[2] * xd[3]) << ", 1, 1, " << str(xd[1])
          << ", " << eps << ");\n";
      else
        k << "  ig_batch_norm(x0, x1, x2, x3, x4, y, " << str(xd[0]) << ", " << str(xd[1]) << ", "
          << str(product(xd, 2)) << ", " << eps << ");\n";
    } else if (op == "max_pool2d_grad") {  // NCHW (x, dy) -> dx
      const std::vector<Mono> yd = dims(n.inputs[1]);
      const std::vector<int64_t> kernel = n.attrs.get_ints("kernel"), stride = n.attrs.get_ints("stride", kernel),
                                 pad = n.attrs.get_ints("padding", {0, 0});
      k << "  ig_max_pool2d_grad(x0, x1, y, " << str(xd[0] * xd[1]) << ", " << str(xd[2]) << ", " << str(xd[3]) << ", "
        << str(yd[2]) << ", " << str(yd[3]) << ", " << kernel[0] << ", " << kernel[1] << ", " << stride[0] << ", "
        << stride[1] << ", " << pad[0] << ", " << pad[1] << ");\n";
    } else if (op == "avg_pool2d" || op == "avg_pool2d_grad") {  // (x) -> y, or (dy, like x) -> dx
      const bool grad = op == "avg_pool2d_grad";
      const std::vector<Mono> xs = grad ? dims(n.inputs[1]) : xd, ys = grad ? xd : dims(y);
      const std::vector<int64_t> kernel = n.attrs.get_ints("kernel"), stride = n.attrs.get_ints("stride", kernel),
                                 pad = n.attrs.get_ints("padding", {0, 0});
      k << "  " << (grad ? "return ig_avg_pool2d_grad(ctx, " : "ig_avg_pool2d(") << "x0, y, " << str(xs[0] * xs[1]) << ", "
        << str(xs[2]) << ", " << str(xs[3]) << ", " << str(ys[2]) << ", " << str(ys[3]) << ", " << kernel[0] << ", "
        << kernel[1] << ", " << stride[0] << ", " << stride[1] << ", " << pad[0] << ", " << pad[1] << ", "
        << n.attrs.get_int("count_include_pad", 1) << ");\n";
    } else if (op == "max_pool2d") {
      // [outer, H, W, lanes] in the buffers' layout (ig_max_pool2d); y shares x's (check_layouts)
      const std::vector<Mono> yd = dims(y);
      const int64_t block = layout_channel_block(layout(x));
      const Mono outer = layout(x) == Layout::Nhwc ? xd[0] : block ? xd[0] * Mono{xd[1].c / block, {}} : xd[0] * xd[1];
      const Mono lanes = layout(x) == Layout::Nhwc ? xd[1] : block ? Mono{block, {}} : kOne;
      const std::vector<int64_t> kernel = n.attrs.get_ints("kernel"), stride = n.attrs.get_ints("stride", kernel),
                                 pad = n.attrs.get_ints("padding", {0, 0});
      k << "  ig_max_pool2d(x0, y, " << str(outer) << ", " << str(xd[2]) << ", " << str(xd[3]) << ", " << str(lanes)
        << ", " << str(yd[2]) << ", " << str(yd[3]) << ", " << kernel[0] << ", " << kernel[1] << ", " << stride[0]
        << ", " << stride[1] << ", " << pad[0] << ", " << pad[1] << ");\n";
    } else if (movement_native(g_, n)) {
      std::vector<std::vector<std::string>> in_dims;
      for (ValueId v : n.inputs) in_dims.push_back(dim_strings(v));
      k << movement_body(n, in_dims, dim_strings(y), ty);
    } else if (op == "scaled_dot_product_attention" || op == "scaled_dot_product_attention_grad") {
      emit_attention(n, k);
    } else if (op == "matmul") {
      emit_matmul(n, k);
    } else if (use_dnnl_grad(n)) {
      k << "  // oneDNN backward primitive, created by the host at load\n  return ctx->host->conv2d_grad(ctx->host->ctx, "
        << out_.dnnl_conv_grads.size() << ", x0, x1, y, ctx->error, ctx->error_size);\n";
      out_.dnnl_conv_grads.push_back({n.id, false, false});
    } else if (op == "conv2d") {
      const std::vector<Mono> wd = dims(n.inputs[1]), yd = dims(y);
      auto pair = [&](const char* key, int64_t dflt) {
        std::vector<int64_t> v = n.attrs.get_ints(key, {dflt, dflt});
        return std::to_string(v.at(0)) + ", " + std::to_string(v.at(1));
      };
      k << "  return ig_conv2d(ctx, x0, x1, " << (n.inputs.size() > 2 ? "x2" : "static_cast<const " + tx + "*>(nullptr)")
        << ", y, " << str(xd[0]) << ", " << str(xd[1]) << ", " << str(xd[2]) << ", " << str(xd[3]) << ", "
        << str(yd[1]) << ", " << str(wd[2]) << ", " << str(wd[3]) << ", " << str(yd[2]) << ", "
        << str(yd[3]) << ", " << pair("stride", 1) << ", " << pair("padding", 0) << ", "
        << pair("dilation", 1) << ", " << n.attrs.get_int("groups", 1) << ");\n";
    }
    k << "  return 0;\n}\n\n";
    kernels_ << k.str();
    call << "  if (" << name << "(ctx";
    for (ValueId v : n.inputs) call << ", " << ptr(stored(v));
    for (ValueId v : n.outputs) call << ", " << ptr(v);
    call << ") != 0) return 1;\n";
  }

  // scaled_dot_product_attention and its gradient: the prelude's flash-style ig_attention and
  // ig_attention_grad, the mask read through its broadcast strides over [lead..., Sq, Sk] (0 along
  // the axes it broadcasts).
  void emit_attention(const Node& n, std::ostream& k) {
    const std::vector<Mono> qd = dims(n.inputs[0]), kd = dims(n.inputs[1]), vd = dims(n.inputs[2]);
    const size_t r = qd.size();
    const bool grad = n.op == "scaled_dot_product_attention_grad";  // (q, k, v, dy, [mask])
    const size_t mask_at = grad ? 4 : 3;
    const int kind = n.inputs.size() <= mask_at ? 0 : g_.value(n.inputs[mask_at]).dtype == DType::Bool ? 1 : 2;
    std::string lead, strides;
    for (size_t a = 0; a + 2 < r; ++a) lead += (lead.empty() ? "" : ", ") + str(qd[a]);
    if (kind != 0) {
      const std::vector<Mono> md = dims(n.inputs[mask_at]);
      std::vector<Mono> scores(qd.begin(), qd.end() - 1);  // [lead..., Sq, Sk]
      scores.push_back(kd[r - 2]);
      k << broadcast_guards(md, scores, n.op);
      for (size_t a = 0; a < r; ++a) {
        const size_t skip = r - md.size();
        const bool broadcast = a < skip || (md[a - skip].is_const() && md[a - skip].c == 1);
        strides += (a ? ", " : "") + (broadcast ? std::string("0") : str(product(md, a - skip + 1)));
      }
    }
    char scale[64];
    std::snprintf(scale, sizeof scale, "%a", n.attrs.get_float("scale", 0.0));
    k << "  const int64_t lead[] = {" << (lead.empty() ? "1" : lead) << "};\n"
      << "  const int64_t mstride[] = {" << (strides.empty() ? "0" : strides) << "};\n"
      << "  const int64_t d = " << str(qd[r - 1]) << ";\n"
      << "  const double scale = " << scale << " != 0.0 ? " << scale
      << " : (d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0);\n";
    const std::string mask_arg = kind ? "x" + std::to_string(mask_at) : std::string("nullptr");
    if (grad) {
      k << "  return ig_attention_grad<" << ctype(g_.value(n.inputs[0]).dtype) << ", " << kind
        << ">(ctx, x0, x1, x2, x3, " << mask_arg << ", y, y1, y2, y3, " << (kind ? str(numel_of(n.inputs[mask_at])) : "0")
        << ", " << str(product(qd, 0, r - 2)) << ", " << (r >= 3 ? str(qd[r - 3]) : "1") << ", "
        << (r >= 3 ? str(kd[r - 3]) : "1") << ", " << str(qd[r - 2]) << ", " << str(kd[r - 2]) << ", d, "
        << str(vd[r - 1]) << ", scale, " << (n.attrs.get_int("causal", 0) != 0 ? 1 : 0) << ", "
        << n.attrs.get_int("causal_offset", 0) << ", " << r - 2 << ", lead, mstride);\n";
      return;
    }
    k << "  return ig_attention<" << ctype(g_.value(n.inputs[0]).dtype) << ", " << kind << ">(ctx, x0, x1, x2, "
      << (kind ? "x3" : "nullptr") << ", y, " << str(product(qd, 0, r - 2)) << ", "
      << (r >= 3 ? str(qd[r - 3]) : "1") << ", " << (r >= 3 ? str(kd[r - 3]) : "1") << ", " << str(qd[r - 2]) << ", "
      << str(kd[r - 2]) << ", d, " << str(vd[r - 1]) << ", scale, " << (n.attrs.get_int("causal", 0) != 0 ? 1 : 0)
      << ", " << n.attrs.get_int("causal_offset", 0) << ", " << r - 2 << ", lead, mstride);\n";
  }

  // conv2d through the host's oneDNN primitive, its folded epilogue computed inside (post-ops).
  void emit_dnnl_conv(const Segment& seg, const ConvEpilogue& epi, std::ostream& call) {
    const Node& n = g_.node(seg.nodes[0]);
    const ValueId x = n.inputs[0], y = epi.result;
    // y took over a slot: the one of its first full add's operand (residual_to_overwrite).
    const bool in_place = slot_[y] >= 0 && out_.arena_slots[static_cast<size_t>(slot_[y])].reuses >= 0;
    std::vector<ValueId> args(n.inputs.begin(), n.inputs.end());
    args.insert(args.end(), epi.operands.begin(), epi.operands.end());
    const std::string name = kernel_name(seg.nodes, true);
    std::ostringstream k;
    k << "// group " << seg.group << " [dense]: " << describe(seg.nodes) << "\n";
    k << "static int " << name << "(const ig_ctx* ctx";
    for (size_t i = 0; i < args.size(); ++i) k << ", const float* x" << i;
    k << ", float* y) {\n" << dnnl_conv_kernel_body(n, epi, out_.dnnl_convs.size(), layout(x), layout(y), in_place) << "}\n\n";
    kernels_ << k.str();
    std::vector<std::optional<std::vector<int32_t>>> finite;
    for (ValueId v : args) finite.push_back(finite_when(g_, v, conv_results_));
    conv_results_[y] = static_cast<int32_t>(out_.dnnl_convs.size());
    out_.dnnl_convs.push_back({n.id, layout(x), layout(y), epi.post_ops, std::move(finite), in_place});
    call << "  if (" << name << "(ctx";
    for (ValueId v : args) call << ", " << ptr(v);
    call << ", " << ptr(y) << ") != 0) return 1;\n";
  }

  // A reduction whose input is computed in place by its elementwise prologue: one pass, the
  // prologue a lambda of the flat index (all its operands share the reduction input's shape).
  void emit_fused_reduction(const Segment& seg, std::ostream& call) {
    const Node& n = g_.node(seg.nodes.back());
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const std::vector<Mono> xd = dims(x);
    const int rank = static_cast<int>(xd.size());
    std::set<ValueId> inside;
    for (NodeId id : seg.nodes) inside.insert(g_.node(id).outputs[0]);
    std::vector<ValueId> reads;
    for (NodeId id : seg.nodes)
      for (ValueId v : g_.node(id).inputs)
        if (!inside.count(v) && !is_scalar_constant(g_.value(v)) && std::find(reads.begin(), reads.end(), v) == reads.end())
          reads.push_back(v);
    const std::string tx = ctype(g_.value(x).dtype), ty = ctype(g_.value(y).dtype);
    const std::string name = kernel_name(seg.nodes, true);
    std::ostringstream k;
    k << "// group " << seg.group << " [reduction, prologue fused]: " << describe(seg.nodes) << "\n";
    k << "static int " << name << "(const ig_ctx* ctx";
    for (size_t i = 0; i < reads.size(); ++i) k << ", const " << storage_type(g_.value(reads[i]).dtype) << "* __restrict p" << i;
    k << ", " << ty << "* __restrict y) {\n" << dims_prologue();
    for (ValueId v : reads) k << broadcast_guards(dims(v), xd, n.op);
    int a = 0, b = -1;
    reduce_block(n, rank, &a, &b);
    if (rank == 0) {
      k << "  const int64_t outer = 1, n = 1, inner = 1;\n";
    } else {
      k << "  const int64_t outer = " << str(product(xd, 0, static_cast<size_t>(a)))
        << ", n = " << str(product(xd, static_cast<size_t>(a), static_cast<size_t>(b + 1)))
        << ", inner = " << str(product(xd, static_cast<size_t>(b + 1))) << ";\n";
    }
    const int kind = n.op == "sum" ? 0 : n.op == "mean" ? 1 : n.op == "max" ? 2 : 3;
    if (kind >= 2)
      k << "  if (n == 0 && outer * inner > 0) return ig_fail(ctx, \"" << n.op
        << ": cannot reduce over a zero-size dimension (no identity)\");\n";
    std::map<ValueId, std::string> names;
    k << "  auto load = [=](int64_t i) {\n";
    for (size_t i = 0; i < reads.size(); ++i) {
      names[reads[i]] = "a" + std::to_string(i);
      const DType dt = g_.value(reads[i]).dtype;
      k << "    const " << ctype(dt) << " a" << i << " = " << loaded(dt, "p" + std::to_string(i), "i") << ";\n";
    }
    for (size_t i = 0; i + 1 < seg.nodes.size(); ++i) {
      const Node& p = g_.node(seg.nodes[i]);
      names[p.outputs[0]] = "t" + std::to_string(p.outputs[0]);
      k << "    const " << ctype(g_.value(p.outputs[0]).dtype) << " t" << p.outputs[0] << " = " << expr(p, names)
        << ";  // " << p.op << "\n";
    }
    k << "    return t" << x << ";\n  };\n";
    k << "  ig_reduce_fn<" << kind << ", " << tx << ", " << ty << ">(load, y, outer, n, inner);\n  return 0;\n}\n\n";
    kernels_ << k.str();
    call << "  if (" << name << "(ctx";
    for (ValueId v : reads) call << ", " << stored_ptr(v);
    call << ", " << ptr(y) << ") != 0) return 1;\n";
  }

  void emit_matmul(const Node& n, std::ostream& k) {
    const std::vector<Mono> ad = dims(n.inputs[0]), bd = dims(n.inputs[1]), yd = dims(n.outputs[0]);
    const size_t ra = ad.size(), rb = bd.size();
    const Mono M = ra == 1 ? kOne : ad[ra - 2], K = ad[ra - 1], N = rb == 1 ? kOne : bd[rb - 1];
    const size_t ab = ra >= 2 ? ra - 2 : 0, bb = rb >= 2 ? rb - 2 : 0;
    const size_t ob = yd.size() - (ra > 1) - (rb > 1);
    // An operand that is a folded transpose is read in its stored (untransposed) layout.
    const bool ta = folded_[n.inputs[0]] >= 0, tb = folded_[n.inputs[1]] >= 0;
    const std::string gemm = "ig_matmul(ctx, " + std::to_string(opt_.num_threads) + ", " + (ta ? "true" : "false") + ", " +
                             (tb ? "true" : "false") + ", ";
    const char *lda = ta ? "M" : "K", *ldb = tb ? "K" : "N";
    k << "  const int64_t M = " << str(M) << ", N = " << str(N) << ", K = " << str(K) << ";\n";
    // b without batch dims and a with the full batch: one gemm over batch * M rows.
    bool fold = bb == 0 && ab == ob && !ta;
    for (size_t i = 0; fold && i < ob; ++i) fold = g_.value(n.inputs[0]).shape[i] == g_.value(n.outputs[0]).shape[i];
    if (fold) {
      k << "  " << gemm << str(product(yd, 0, ob)) << " * M, N, K, x0, K, x1, " << ldb << ", y, N);\n";
      return;
    }
    auto batch_strides = [&](const std::vector<Mono>& d, size_t nb) {
      std::vector<Mono> s(ob, kZero);
      for (size_t i = 0; i < nb; ++i)
        if (!(d[i].is_const() && d[i].c == 1)) s[ob - nb + i] = product(d, i + 1);
      return s;
    };
    const std::vector<Mono> sa = batch_strides(ad, ab), sb = batch_strides(bd, bb);
    const std::vector<Mono> batch(yd.begin(), yd.begin() + static_cast<std::ptrdiff_t>(ob));
    k << broadcast_guards(std::vector<Mono>(ad.begin(), ad.begin() + static_cast<std::ptrdiff_t>(ab)), batch, n.op)
      << broadcast_guards(std::vector<Mono>(bd.begin(), bd.begin() + static_cast<std::ptrdiff_t>(bb)), batch, n.op);
    k << "  const int64_t batch = " << str(product(yd, 0, ob)) << ";\n"
      << "  for (int64_t bi = 0; bi < batch; ++bi) {\n    int64_t rest = bi, oa = 0, ob = 0;\n";
    for (size_t d = ob; d-- > 0;) {
      k << "    { const int64_t j = rest % " << str(yd[d]) << "; rest /= " << str(yd[d]) << "; oa += j * "
        << str(sa[d]) << "; ob += j * " << str(sb[d]) << "; }\n";
    }
    k << "    (void)rest;\n    " << gemm << "M, N, K, x0 + oa, " << lda << ", x1 + ob, " << ldb
      << ", y + bi * M * N, N);\n  }\n";
  }

  void emit_fallback(const Segment& seg, std::ostream& call) {
    const Node& n = g_.node(seg.nodes[0]);
    call << "  {  // " << n.op << ": reference kernel in the host (node " << n.id << ")\n";
    call << "    const void* in[] = {";
    for (size_t i = 0; i < n.inputs.size(); ++i) call << (i ? ", " : "") << ptr(n.inputs[i]);
    if (n.inputs.empty()) call << "nullptr";
    call << "};\n    void* out[] = {";
    for (size_t i = 0; i < n.outputs.size(); ++i) call << (i ? ", " : "") << ptr(n.outputs[i]);
    call << "};\n    if (ctx->host->run_node(ctx->host->ctx, " << n.id
         << ", in, out, ctx->error, ctx->error_size) != 0) return 1;\n  }\n";
  }

  // Control-flow node `seg`: its subgraphs generated into namespaces of their own (ig_n<node>_<k>)
  // among the kernels, and the branch or loop that calls them.
  void emit_control_segment(const Segment& seg, std::ostream& e) {
    const Node& n = g_.node(seg.nodes[0]);
    ControlSite site{g_, n};
    site.first_subgraph = static_cast<int>(out_.subgraphs.size());
    for (size_t k = 0; k < n.subgraphs.size(); ++k) {
      const Graph& sub = n.subgraphs[k];
      const std::string ns = "ig_n" + std::to_string(n.id) + "_" + std::to_string(k);
      GeneratedCode code = Generator(sub, plan_fusion(sub), cpu_layouts(sub, opt_.dnnl, opt_.layout), opt_, true).run();
      kernels_ << "// ---- " << n.op << " node " << n.id << ": subgraph " << k << " ("
               << get_op(n.op).subgraph_names.at(k) << ") ----\nnamespace " << ns << " {\n" << code.source << "}  // namespace "
               << ns << "\n\n";
      out_.kernels += code.kernels;
      out_.subgraphs.push_back({n.id, k, std::move(code)});
      site.function.push_back(ns + "::ig_run");
    }
    for (size_t k = 0; k < n.subgraphs.size(); ++k)
      site.code.push_back(&out_.subgraphs[static_cast<size_t>(site.first_subgraph) + k].code);
    site.ptr = [this](ValueId v) { return ptr(v); };
    site.numel_from = [this](ValueId v, size_t from) { return str(product(dims(v), from)); };
    site.dim = [this](ValueId v, size_t axis) { return str(dims(v).at(axis)); };
    site.ctype = [](DType t) { return ctype(t); };
    emit_control(site, e);
    step_kernels_.push_back(ident(n.op) + "_n" + std::to_string(n.id));
  }

  void emit_run(std::ostream& e) {
    e << "static int ig_run(const void* const* inputs, void* const* outputs, const ig_ctx* ctx) {\n"
      << dims_prologue();
    std::set<ValueId> declared;
    for (size_t i = 0; i < out_.inputs.size(); ++i) {
      const Value& v = g_.value(out_.inputs[i]);
      e << "  const " << ctype(v.dtype) << "* " << ptr(v.id) << " = static_cast<const " << ctype(v.dtype)
        << "*>(inputs[" << i << "]);  // input " << comment_safe(v.name) << "\n";
      declared.insert(v.id);
    }
    for (size_t i = 0; i < out_.constants.size(); ++i) {
      const Value& v = g_.value(out_.constants[i]);
      e << "  [[maybe_unused]] const " << ctype(v.dtype) << "* " << ptr(v.id) << " = static_cast<const "
        << ctype(v.dtype) << "*>(ctx->host->constants[" << i << "]);  // constant " << comment_safe(v.name) << "\n";
      declared.insert(v.id);
    }
    std::set<ValueId> written;
    out_.output_written.assign(g_.outputs().size(), false);
    for (size_t j = 0; j < g_.outputs().size(); ++j) {
      const ValueId v = g_.outputs()[j].second;
      if (g_.value(v).producer < 0 || written.count(v)) continue;
      written.insert(v);
      out_.output_written[j] = true;
      e << "  " << ctype(g_.value(v).dtype) << "* " << ptr(v) << " = static_cast<" << ctype(g_.value(v).dtype)
        << "*>(outputs[" << j << "]);  // output " << comment_safe(g_.outputs()[j].first) << "\n";
      declared.insert(v);
    }
    // Intermediates live in the host's arena at the offsets it planned from out_.arena_slots.
    for (size_t i = 0; i < out_.arena_slots.size(); ++i) {
      const ArenaSlot& a = out_.arena_slots[i];
      const std::string t = ctype(g_.value(a.value).dtype);
      e << "  " << t << "* " << ptr(a.value) << " = reinterpret_cast<" << t << "*>(ctx->host->arena + ctx->host->offsets["
        << i << "]);  // steps " << a.first << ".." << a.last
        << (a.reuses >= 0 ? ", in place over " + ptr(out_.arena_slots[static_cast<size_t>(a.reuses)].value) : "")
        << (layout(a.value) != Layout::Nchw ? ", " + std::string(layout_name(layout(a.value))) : "") << "\n";
      declared.insert(a.value);
    }
    // Reshape views: the source's memory under the result's name (fold_reshapes).
    // (A view nobody reads has a source that may have no buffer: it is not declared.)
    for (const auto& [y, x] : reshape_views_)
      if (declared.count(x))
        e << "  [[maybe_unused]] auto* const " << ptr(y) << " = " << ptr(x) << ";  // reshape view\n";
    for (size_t s = 0; s < segs_.size(); ++s) {
      const Segment& seg = segs_[s];
      if (seg.kind == Segment::Folded) continue;
      e << "  // step " << s << "\n";
      // Each segment is one profiled step, named after the kernels it emits.
      const int32_t step = static_cast<int32_t>(out_.profile_names.size());
      step_kernels_.clear();
      e << "  ig_profile(ctx, " << step << ", 0);\n";
      if (seg.kind == Segment::Fallback) {
        emit_fallback(seg, e);
      } else if (seg.kind == Segment::Control) {
        emit_control_segment(seg, e);
      } else if (seg.kind == Segment::Reduce) {
        emit_fused_reduction(seg, e);
      } else if (const auto epi = conv_epilogue_.find(s); epi != conv_epilogue_.end()) {
        emit_dnnl_conv(seg, epi->second, e);
      } else if (seg.kind == Segment::Native) {
        emit_native(seg, e);
      } else {
        std::map<std::string, std::vector<ValueId>> by_shape;
        std::vector<std::string> order;
        for (NodeId nid : seg.nodes) {
          const ValueId v = g_.node(nid).outputs[0];
          if (!needs_buffer_[v]) continue;
          const std::string key = to_string(g_.value(v).shape);
          if (!by_shape.count(key)) order.push_back(key);
          by_shape[key].push_back(v);
        }
        for (const std::string& key : order) emit_elementwise(seg, by_shape[key], inplace_seg_[s], e);
      }
      e << "  ig_profile(ctx, " << step << ", 1);\n";
      std::string name;
      for (const std::string& k : step_kernels_) name += (name.empty() ? "" : "+") + k;
      if (seg.kind == Segment::Fallback) name = "ref_n" + std::to_string(seg.nodes[0]) + "_" + ident(g_.node(seg.nodes[0]).op);
      out_.profile_names.push_back(name);
      out_.profile_details.push_back(describe(seg.nodes));
    }
    e << "  return 0;\n}\n";
  }

  void emit_entry(std::ostream& e) {
    e << "\n// ---- entry ----\nextern \"C\" int ingot_abi_version() { return " << kAbiVersion << "; }\n\n";
    if (opt_.num_threads > 0)
      e << "extern \"C\" int omp_get_max_threads();\nextern \"C\" void omp_set_num_threads(int);\n"
           "// The call's OpenMP thread count (CpuOptions::num_threads, compile option cpu_options), the\n"
           "// caller's restored after it.\n"
           "struct ig_threads_per_call {\n  int before;\n"
           "  explicit ig_threads_per_call(int n) : before(omp_get_max_threads()) { omp_set_num_threads(n); }\n"
           "  ~ig_threads_per_call() { omp_set_num_threads(before); }\n};\n\n";
    e << "extern \"C\" int ingot_entry(const void* const* inputs, void* const* outputs, const int64_t* dims,\n"
         "                           const ingot_host* host, char* error, size_t error_size) {\n"
         "  const ig_ctx ctx{dims, host, error, error_size};\n";
    if (opt_.num_threads > 0) e << "  const ig_threads_per_call threads(" << opt_.num_threads << ");\n";
    e << "  try {\n    return ig_run(inputs, outputs, &ctx);\n  } catch (...) {\n"
         "    return ig_fail(&ctx, \"exception in generated code\");\n  }\n}\n";
  }

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
  std::map<ValueId, SliceView> slice_views_;  // slices read in place (fold_slices)
  std::map<ValueId, ValueId> reshape_views_;  // reshape results -> the buffer they are (fold_reshapes)
  std::vector<int> slot_;          // per value: arena slot, or -1
  std::vector<bool> inplace_seg_;  // per segment: some store overwrites a read
  std::vector<std::string> step_kernels_;  // kernels emitted for the current segment
  std::map<size_t, ConvEpilogue> conv_epilogue_;  // per oneDNN conv2d segment: its post-ops
  std::map<ValueId, int32_t> conv_results_;       // values oneDNN convs write: their dnnl_convs index

  std::ostringstream kernels_;
};

}  // namespace

std::string comment_safe(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '*' && i + 1 < s.size() && s[i + 1] == '/') o += "*_";  // would end a block comment
    else if (c == '\\') o += '/';  // a backslash last on the line splices the next line into the comment
    else if (c == '?' && !o.empty() && o.back() == '?') o += '_';  // "??/" is a backslash under -trigraphs
    else if (c < 0x20 || c > 0x7e) o += '_';  // newlines end the comment; '_' never makes a "??"
    else o += c;
  }
  return o;
}

bool is_native(const Graph& g, const Node& n) {
  auto dt = [&](ValueId v) { return g.value(v).dtype; };
  auto rank = [&](ValueId v) { return static_cast<int>(g.value(v).shape.size()); };
  const std::string& op = n.op;
  if (elementwise_forms(op) != nullptr) {
    if (n.outputs.size() != 1) return false;
    if (op == "gelu") {
      const std::string m = n.attrs.get_string("approximate", "none");
      return m == "none" || m == "tanh";
    }
    if (op == "dropout") return n.attrs.get_int("training", 0) == 0;
    return true;
  }
  if (keeps_element_order(op)) return dt(n.inputs[0]) == dt(n.outputs[0]);
  if (op == "zeros_like") return true;
  if (op == "transpose") return rank(n.inputs[0]) <= 16 && dt(n.inputs[0]) == dt(n.outputs[0]);
  if (op == "gather") {
    const int64_t a = n.attrs.get_int("axis", 0);
    const int r = rank(n.inputs[0]);
    return r >= 1 && a >= -r && a < r && is_integral(dt(n.inputs[1])) && dt(n.inputs[1]) != DType::Bool &&
           dt(n.inputs[0]) == dt(n.outputs[0]);
  }
  // Contiguous blocks: a slice of leading rows (start >= 0, step 1, the row count known) and a
  // concat along axis 0 of inputs with the output's dtype.
  if (op == "slice") return leading_rows_slice(g, n) || movement_native(g, n);
  if (op == "concat") return leading_blocks_concat(g, n) || movement_native(g, n);
  if (movement_native(g, n)) return true;  // slice_scatter, concat_part, take_along_axis, scatters
  if (op == "sum" || op == "mean" || op == "max" || op == "min")
    return rank(n.inputs[0]) <= 16 && reduced_axes(n, rank(n.inputs[0])).has_value();
  if (op == "moments")  // mean and variance, float32 / float64
    return is_float_dtype(dt(n.inputs[0])) && dt(n.outputs[0]) == dt(n.inputs[0]) && rank(n.inputs[0]) <= 16 &&
           reduced_axes(n, rank(n.inputs[0])).has_value();
  if (op == "argmax") {  // float32 / float64 / integers (halves: the reference)
    const int r = rank(n.inputs[0]);
    const int64_t a = n.attrs.get_int("axis", std::numeric_limits<int64_t>::max());
    return r >= 1 && a >= -r && a < r && !is_half(dt(n.inputs[0])) && dt(n.outputs[0]) == DType::Int64;
  }
  if (op == "numel")  // a count of the given axes' sizes, as a number
    return reduced_axes(n, rank(n.inputs[0])).has_value() && dt(n.outputs[0]) != DType::Bool && !is_half(dt(n.outputs[0]));
  if (op == "global_avg_pool2d") return rank(n.inputs[0]) == 4 && is_floating(dt(n.inputs[0]));
  if (op == "softmax" || op == "log_softmax") {
    const int64_t a = n.attrs.get_int("axis", -1);
    const int r = rank(n.inputs[0]);
    return r >= 1 && a >= -r && a < r;
  }
  if (op == "layer_norm" || op == "rms_norm") {
    const int64_t a = n.attrs.get_int("axis", -1);
    const int r = rank(n.inputs[0]);
    return r >= 1 && a >= -r && a < r;
  }
  if (op == "batch_norm") return rank(n.inputs[0]) >= 2;
  if (op == "avg_pool2d" || op == "avg_pool2d_grad") {  // float32 / float64 NCHW, [h, w] attributes
    bool ok = rank(n.inputs[0]) == 4 && is_float_dtype(dt(n.inputs[0])) && dt(n.outputs[0]) == dt(n.inputs[0]) &&
              n.attrs.has("kernel") && n.attrs.get_int("count_include_pad", 1) >= 0 && n.attrs.get_int("count_include_pad", 1) <= 1;
    for (const char* key : {"kernel", "stride", "padding"})
      ok = ok && (!n.attrs.has(key) || n.attrs.get_ints(key).size() == 2);
    return ok;
  }
  if (op == "max_pool2d" || op == "max_pool2d_grad") {  // kernel / stride / padding as [h, w] (or absent)
    bool ok = rank(n.inputs[0]) == 4 && dt(n.inputs[0]) != DType::Bool && n.attrs.has("kernel");
    if (op == "max_pool2d_grad")  // (x, dy) -> dx, float or double throughout (added up in place)
      ok = ok && is_float_dtype(dt(n.outputs[0])) && dt(n.inputs[0]) == dt(n.outputs[0]) && dt(n.inputs[1]) == dt(n.outputs[0]);
    for (const char* key : {"kernel", "stride", "padding"})
      ok = ok && (!n.attrs.has(key) || n.attrs.get_ints(key).size() == 2);
    return ok;
  }
  if (op == "scaled_dot_product_attention" || op == "scaled_dot_product_attention_grad") {
    // float32 / float64, every operand but a bool mask of that type (half types: the reference kernel)
    const DType t = dt(n.inputs[0]);
    bool ok = t == DType::Float32 || t == DType::Float64;
    for (ValueId v : n.inputs) ok = ok && (dt(v) == t || dt(v) == DType::Bool);
    for (ValueId v : n.outputs) ok = ok && dt(v) == t;
    return ok;
  }
  if (op == "matmul" || op == "conv2d") {
    const DType t = dt(n.outputs[0]);
    if (!is_float_dtype(t)) return false;
    for (ValueId v : n.inputs)
      if (dt(v) != t) return false;
    if (op == "matmul") return rank(n.inputs[0]) >= 1 && rank(n.inputs[1]) >= 1;
    return rank(n.inputs[0]) == 4 && rank(n.inputs[1]) == 4 && n.attrs.get_int("groups", 1) >= 1;
  }
  return false;
}

LayoutTarget cpu_layout_target(bool dnnl, Layout layout) {
  LayoutTarget t;
  t.channel_block = layout_channel_block(layout);  // oneDNN's AVX-512 kernels block channels by 16, AVX2 ones by 8
  t.handles_layouts = [dnnl](const Graph& g, const Node& n) { return is_native(g, n) && (n.op != "conv2d" || dnnl); };
  return t;
}

LayoutPlan cpu_layouts(const Graph& g, bool dnnl, Layout layout) {
  return layout == Layout::Nchw ? nchw_plan(g) : plan_layouts(g, cpu_layout_target(dnnl, layout));
}

GeneratedCode generate_cpp(const Graph& g, const FusionPlan& plan, const LayoutPlan& layouts,
                           const CodegenOptions& options) {
  return Generator(g, plan, layouts, options).run();
}

}  // namespace ingot::cpu
