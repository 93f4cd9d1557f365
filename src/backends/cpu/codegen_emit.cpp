// Generator, emission: elementwise loop nests, reference fallbacks, control flow, the schedule (ig_run) and the entry point.
#include "backends/cpu/codegen_generator.h"

namespace ingot::cpu::codegen_detail {

// The pointer as kernels declare it (storage_type): float16/bfloat16 buffers as their raw bits.
std::string Generator::stored_ptr(ValueId v) const {
  const auto view = slice_views_.find(v);
  const std::string p = view == slice_views_.end() ? ptr(v) : "(" + ptr(view->second.source) + " + " + view->second.offset + ")";
  return is_half(g_.value(v).dtype) ? "ig_raw(" + p + ")" : p;
}

std::string Generator::describe(const std::vector<NodeId>& nodes) const {
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

std::string Generator::kernel_name(const std::vector<NodeId>& nodes, bool fused) {
  std::string name = "k" + std::to_string(out_.kernels++) + (fused && nodes.size() > 1 ? "_fused" : "");
  for (size_t i = 0; i < nodes.size() && i < 4; ++i) name += "_" + ident(g_.node(nodes[i]).op);
  if (nodes.size() > 4) name += "_etc";
  step_kernels_.push_back(name);
  return name;
}

std::string Generator::dims_prologue() const {
  std::string s = "  (void)ctx;\n";
  for (size_t i = 0; i < out_.symbols.size(); ++i)
    s += "  [[maybe_unused]] const int64_t d" + std::to_string(i) + " = ctx->dims[" +
         std::to_string(i) + "];  // " + comment_safe(out_.symbols[i]) + "\n";
  return s;
}

std::string Generator::par(const Mono& work, const std::string& extra_cond) const {
  std::string nt = opt_.num_threads > 0 ? " num_threads(" + std::to_string(opt_.num_threads) + ")" : "";
  if (work.is_const()) {
    if (work.c <= 65536) return "";
    return "  #pragma omp parallel for" + nt + (extra_cond.empty() ? "" : " if(" + extra_cond + ")") + "\n";
  }
  return "  #pragma omp parallel for" + nt + " if(ig_big(" + str(work) + ")" +
         (extra_cond.empty() ? "" : " && " + extra_cond) + ")\n";
}

// -- elementwise expressions
std::string Generator::operand(ValueId v, DType want, const std::map<ValueId, std::string>& names) const {
  const Value& val = g_.value(v);
  std::string e = is_scalar_constant(val) ? literal(val.constant) : names.at(v);
  if (val.dtype != want) e = "ig_cast<" + ctype(want) + ">(" + e + ")";
  return e;
}

std::string Generator::expr(const Node& n, const std::map<ValueId, std::string>& names) const {
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

Generator::LoopNest Generator::loop_nest(ValueId domain, const std::vector<ValueId>& operands) {
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
void Generator::emit_elementwise(const Segment& seg, const std::vector<ValueId>& stores, bool alias, std::ostream& call) {
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

void Generator::emit_fallback(const Segment& seg, std::ostream& call) {
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
void Generator::emit_control_segment(const Segment& seg, std::ostream& e) {
  const Node& n = g_.node(seg.nodes[0]);
  ControlSite site{g_, n};
  site.first_subgraph = static_cast<int>(out_.subgraphs.size());
  for (size_t k = 0; k < n.subgraphs.size(); ++k) {
    const Graph& sub = n.subgraphs[k];
    const std::string ns = "ig_n" + std::to_string(n.id) + "_" + std::to_string(k);
    GeneratedCode code = Generator(sub, plan_fusion(sub), cpu_layouts(sub, opt_.dnnl, opt_.layout, opt_.bf16_conv), opt_, true).run();
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

void Generator::emit_run(std::ostream& e) {
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

void Generator::emit_entry(std::ostream& e) {
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

}  // namespace ingot::cpu::codegen_detail
