// Generator, planning: folded views, segments, buffers, the arena plan and output aliases.
#include "backends/cpu/codegen_generator.h"

namespace ingot::cpu::codegen_detail {

void Generator::index_leaves_and_symbols() {
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

namespace {

// Whether transpose node `n` swaps axes `a` and `a + 1` of its input (counted from the end:
// from_end 1 swaps the last two) and keeps every other axis in place.
bool swaps_axes(const Graph& g, const Node& n, int from_end) {
  const int rank = static_cast<int>(g.value(n.outputs[0]).shape.size());
  if (rank < from_end + 1) return false;
  std::vector<int64_t> want(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) want[static_cast<size_t>(i)] = i;
  std::swap(want[static_cast<size_t>(rank - from_end)], want[static_cast<size_t>(rank - from_end - 1)]);
  std::vector<int64_t> perm = n.attrs.get_ints("perm", {});
  if (perm.empty())  // default: reversed
    for (int i = rank; i-- > 0;) perm.push_back(i);
  for (int64_t& p : perm) p = p < 0 ? p + rank : p;
  return perm == want;
}

// A float32 / float64 attention node (forward or gradient): the kernels that take operands
// with their head and sequence axes swapped (ig_rows).
bool strided_attention(const Graph& g, const Node& n) {
  if (n.op != "scaled_dot_product_attention" && n.op != "scaled_dot_product_attention_grad") return false;
  const DType t = g.value(n.inputs[0]).dtype;
  return (t == DType::Float32 || t == DType::Float64) && is_native(g, n);
}

// How often each value is read: once for each node input naming it, once if it is a graph output.
std::vector<int> read_counts(const Graph& g) {
  std::vector<int> reads(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) ++reads[v];
  for (const auto& [name, v] : g.outputs()) ++reads[v];
  return reads;
}

}  // namespace

// -- transposes folded into gemm
// A float `transpose` swapping the last two axes whose every reader is a native matmul (and
// that is no graph output) is never materialized: the matmul passes BLAS the transpose flag
// and the transpose's input (matmul's gradient rule makes one per operand).
// -- head splits folded into attention
// Likewise a transpose swapping the head and sequence axes ([B, S, H, D] -> [B, H, S, D]: how a
// transformer splits its projections into heads) whose every reader takes it as attention's q, k,
// v or dy: the kernel reads the transpose's input, each head's rows H x D apart (ig_rows).
void Generator::fold_transposes() {
  folded_.assign(g_.values().size(), -1);
  const std::vector<int> reads = read_counts(g_);
  std::vector<int> matmul_reads(g_.values().size(), 0), attention_reads(g_.values().size(), 0);
  for (const Node& n : g_.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId v = n.inputs[i];
      if (n.op == "matmul" && is_native(g_, n)) ++matmul_reads[v];
      const size_t operands = n.op == "scaled_dot_product_attention" ? 3 : 4;  // q, k, v (, dy): not a mask
      if (i < operands && strided_attention(g_, n)) ++attention_reads[v];
    }
  for (const Node& n : g_.nodes()) {
    if (n.op != "transpose" || n.outputs.size() != 1) continue;
    const ValueId y = n.outputs[0];
    const Value& yv = g_.value(y);
    const bool gemm_type = is_float_dtype(yv.dtype) || yv.dtype == DType::BFloat16;  // ig_matmul's
    if (reads[y] == 0 || layout(n.inputs[0]) != Layout::Nchw || layout(y) != Layout::Nchw) continue;
    if (gemm_type && reads[y] == matmul_reads[y] && swaps_axes(g_, n, 1)) folded_[y] = n.inputs[0];
    else if (reads[y] == attention_reads[y] && swaps_axes(g_, n, 2)) folded_[y] = n.inputs[0];
  }
}

// The other side of the head split: an attention result (or its gradient's dq, dk, dv) read
// only by a transpose swapping its head and sequence axes back ([B, H, S, D] -> [B, S, H, D],
// before the heads merge into [B, S, H x D]) is written in that order by the kernel, and the
// transpose becomes a view of it (its segment Folded). Not for graph outputs (they go to the
// caller's buffer).
void Generator::fold_head_swaps() {
  const std::vector<int> reads = read_counts(g_);
  std::set<ValueId> outputs;
  for (const auto& [name, v] : g_.outputs()) outputs.insert(v);
  std::vector<const Node*> producer(g_.values().size(), nullptr);
  for (const Node& n : g_.nodes())
    for (ValueId v : n.outputs) producer[v] = &n;
  for (Segment& seg : segs_) {
    if (seg.kind != Segment::Native || seg.nodes.size() != 1) continue;
    const Node& n = g_.node(seg.nodes[0]);
    if (n.op != "transpose" || n.outputs.size() != 1 || !swaps_axes(g_, n, 2)) continue;
    const ValueId x = n.inputs[0], y = n.outputs[0];
    const Node* a = producer[x];
    if (a == nullptr || !strided_attention(g_, *a) || reads[x] != 1 || outputs.count(y) || folded_[x] >= 0 ||
        layout(x) != Layout::Nchw || layout(y) != Layout::Nchw)
      continue;
    const auto at = std::find(a->outputs.begin(), a->outputs.end(), x);
    if (at - a->outputs.begin() > 2) continue;  // a mask's gradient keeps the mask's shape
    head_swapped_writes_.insert(x);
    reshape_views_[y] = x;
    seg.kind = Segment::Folded;
  }
}

// The buffer a read of `v` uses: a folded transpose's or slice's input, a reshape's source,
// else v itself. Lifetimes and in-place choices follow this buffer, not v.
ValueId Generator::stored(ValueId v) const {
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
void Generator::fold_reshapes() {
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

void Generator::fold_slices() {
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
std::optional<std::string> Generator::slice_offset(const Node& n) {
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
bool Generator::reads_through_view(size_t s, ValueId source) const {
  for (NodeId n : segs_[s].nodes)
    for (ValueId v : g_.node(n).inputs)
      if (const auto view = slice_views_.find(v); view != slice_views_.end() && view->second.source == source) return true;
      else if (const auto alias = reshape_views_.find(v); alias != reshape_views_.end() && alias->second == source) return true;
  return false;
}

// -- segments
void Generator::build_segments() {
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
      const bool native = is_native(g_, node) || use_dnnl_grad(node) || use_dnnl(node);
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
// (DnnlConv reorders them into the primitive's); batch_norm and the pools read x in y's layout, a
// concat along the channels its inputs in its own (whole channel blocks), and global_avg_pool2d
// any layout into a plain y; every other kernel (reductions, fused
// prologues, row kernels, gemm, copies, reference callbacks) and every graph output is NCHW.
// The layout plan guarantees this; here it is checked, so a planning bug is an internal error
// at lowering, never a wrong number.
void Generator::check_layouts() const {
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
      if (n.op == "batch_norm" || n.op == "max_pool2d" || n.op == "avg_pool2d") {
        require(n.inputs[0], layout(n.outputs[0]), n, "input");
        for (size_t i = 1; i < n.inputs.size(); ++i) require(n.inputs[i], Layout::Nchw, n, "statistic");
        continue;
      }
      if (n.op == "concat" && layout(n.outputs[0]) != Layout::Nchw) {  // along the channels (the plan's channel_concat)
        const int block = layout_channel_block(layout(n.outputs[0]));
        for (ValueId v : n.inputs) {
          require(stored(v), layout(n.outputs[0]), n, "input");
          const SymShape& s = g_.value(v).shape;
          INGOT_CHECK(s.size() == 4 && s[1].known() && (block == 0 || s[1].value % block == 0),
                      "CpuBackend internal error: concat (node ", n.id, ") input v", v, " of shape ", to_string(s),
                      " is not whole ", block, "-channel blocks; please report this with the graph");
        }
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

// Whether elementwise nodes `run` can be computed inside `anchor` (one pass, no buffer for its
// input), the run's last value being the anchor's input x and no value of the run read
// elsewhere or a graph output:
//   - a sum/mean/max/min over contiguous axes, every other operand an NCHW buffer of x's shape
//     or a scalar constant (so one flat index addresses all);
//   - a layer_norm / rms_norm of float32 or float64 (its rows computed by the run, then
//     normalized: emit_fused_norm), every node NCHW, every other operand an NCHW buffer of x's
//     shape, or of the normalized dims' (broadcast over the rows: a bias), or a scalar constant.
bool Generator::prologue_fuses(const std::vector<NodeId>& run, const Node& anchor) const {
  static const std::set<std::string> kReductions = {"sum", "mean", "max", "min"};
  const bool norm = anchor.op == "layer_norm" || anchor.op == "rms_norm";
  if (run.empty() || !(norm || kReductions.count(anchor.op))) return false;
  const ValueId x = anchor.inputs[0];
  const SymShape& xs = g_.value(x).shape;
  const int rank = static_cast<int>(xs.size());
  if (norm) {
    const DType dt = g_.value(x).dtype;
    if ((dt != DType::Float32 && dt != DType::Float64) || layout(x) != Layout::Nchw) return false;
  } else if (!contiguous_reduction(anchor, rank)) {
    return false;
  }
  if (g_.node(run.back()).outputs[0] != x) return false;
  std::set<ValueId> inside;
  for (NodeId n : run) inside.insert(g_.node(n).outputs[0]);
  std::set<NodeId> members(run.begin(), run.end());
  members.insert(anchor.id);
  for (const Node& n : g_.nodes()) {
    if (members.count(n.id)) continue;
    for (ValueId v : n.inputs)
      if (inside.count(v)) return false;
  }
  for (const auto& [name, v] : g_.outputs())
    if (inside.count(v)) return false;
  for (size_t i = 1; i < anchor.inputs.size(); ++i)  // a norm's weight and bias
    if (inside.count(anchor.inputs[i])) return false;
  // A norm's row operand: the normalized dims of x, broadcast over the leading ones.
  const int axis = norm ? norm_axis(anchor.attrs.get_int("axis", -1), rank) : 0;
  auto row_operand = [&](const SymShape& vs) {
    const int r = static_cast<int>(vs.size());
    if (r > rank) return false;
    for (int j = 0; j < rank; ++j) {
      const SymDim d = j >= rank - r ? vs[static_cast<size_t>(j - (rank - r))] : SymDim(1);
      if (j < axis ? !(d.known() && d.value == 1) : !(d == xs[static_cast<size_t>(j)])) return false;
    }
    return true;
  };
  for (NodeId n : run) {
    if (norm && layout(g_.node(n).outputs[0]) != Layout::Nchw) return false;
    for (ValueId v : g_.node(n).inputs) {
      if (inside.count(v) || is_scalar_constant(g_.value(v))) continue;
      if (layout(v) != Layout::Nchw) return false;
      if (g_.value(v).shape != xs && !(norm && row_operand(g_.value(v).shape))) return false;
    }
  }
  return true;
}

void Generator::plan_buffers() {
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

// conv2d_input_grad / conv2d_weight_grad through oneDNN's backward primitives: float32, or
// bfloat16 operands where the host runs them natively (bf16_conv_grad_fits on an AMX host, the
// widening's test: any other half-type gradient reaches here widened to float32), the forward
// convolution's geometry as use_dnnl requires it. They read and write NCHW buffers (the layout
// plan leaves the operands of nodes it does not know as NCHW).
bool Generator::use_dnnl_grad(const Node& n) const {
  if (!opt_.dnnl || (n.op != "conv2d_input_grad" && n.op != "conv2d_weight_grad")) return false;
  const bool input_grad = n.op == "conv2d_input_grad";  // inputs (dy, w, like x), else (x, dy, like w)
  if (!input_grad && !dnnl_weight_grad_trusted(n)) return false;
  if (opt_.bf16_conv && bf16_conv_grad_fits(g_, n)) return true;
  for (ValueId v : {n.inputs[0], n.inputs[1], n.inputs[2], n.outputs[0]})
    if (g_.value(v).dtype != DType::Float32) return false;
  return input_grad ? conv_geometry_fits(g_, n, n.inputs[2], n.inputs[1], n.inputs[0])
                    : conv_geometry_fits(g_, n, n.inputs[0], n.inputs[2], n.inputs[1]);
}

// oneDNN 2.6's AVX-512 weight gradient returns wrong values (relative error 2 and more, no
// error) for a batch of 1 whose output is 1x1 under a kernel of 16x16 taps or more (found by
// the program fuzzer: fuzz/regressions/programs/conv-weight-grad-batch-1-whole-input-kernel;
// the forward and the input gradient are right there). Those geometries, and any with a 1x1
// output or 64 taps or more to keep a margin around the boundary we saw, take the generated
// im2col + GEMM kernel, which is one matrix product for them anyway.
bool Generator::dnnl_weight_grad_trusted(const Node& n) const {
  const SymShape& w = g_.value(n.inputs[2]).shape;   // like the weight: [O, C/g, kh, kw]
  const SymShape& dy = g_.value(n.inputs[1]).shape;  // [N, O, oh, ow]
  if (w.size() != 4 || dy.size() != 4) return false;
  for (const SymDim* d : {&w[2], &w[3], &dy[2], &dy[3]})
    if (!d->known()) return false;
  const int64_t taps = w[2].value * w[3].value, outputs = dy[2].value * dy[3].value;
  return outputs > 1 && taps < 64;
}

// Rows (a's leading dims multiplied out, all of them known) up to which a matmul by constant
// weights runs as a oneDNN 1x1 convolution with its epilogue inside. Measured in BERT-base's layer
// (README "GEMM epilogues"): 1-2% ahead of dnnl_sgemm and a pass at 128 and 256 rows, level at
// 512, 1% behind at 1,024, where the weights stream from memory and the sgemm kernel hides that
// better.
constexpr int64_t kDnnlMatmulMaxRows = 256;

bool Generator::dnnl_matmul(const Node& n) const {
  if (!opt_.dnnl_matmul || !matmul_runs_as_conv(g_, n) || folded_[n.inputs[0]] >= 0 ||
      layout(n.inputs[0]) != Layout::Nchw || layout(n.outputs[0]) != Layout::Nchw)
    return false;
  const SymShape& a = g_.value(n.inputs[0]).shape;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < a.size(); ++d) {
    if (!a[d].known()) return false;
    rows *= a[d].value;
  }
  if (rows > kDnnlMatmulMaxRows) return false;
  return dnnl_runs_fast(g_, n, ConvEpilogue{}, Layout::Nchw, Layout::Nchw);
}

// Whether the primitive can run conv `n` with epilogue `e`: a residual operand must be stored in
// the layout of the result (the one oneDNN is given for both), and oneDNN must run it fast.
bool Generator::dnnl_takes(const Node& n, const ConvEpilogue& e) const {
  for (ValueId o : e.operands)
    if (g_.value(o).shape == g_.value(e.result).shape && layout(o) != layout(e.result)) return false;
  return dnnl_runs_fast(g_, n, e, layout(n.inputs[0]), layout(e.result));
}

std::vector<ValueId> Generator::seg_reads(size_t s) const {
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

std::vector<ValueId> Generator::seg_stores(size_t s) const {
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
void Generator::plan_arena() {
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
std::optional<ValueId> Generator::residual_to_overwrite(size_t s, const ConvEpilogue& epi) const {
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
void Generator::plan_output_aliases() {
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

}  // namespace ingot::cpu::codegen_detail
