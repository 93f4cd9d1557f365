// Generator, emission of native ops: prelude kernels, attention, oneDNN convs, fused reductions, matmuls.
#include "backends/cpu/codegen_generator.h"

namespace ingot::cpu::codegen_detail {

// -- native anchors (reductions, row kernels, dense, reshape)

namespace {

// The arguments a layer_norm / rms_norm kernel call ends with: weight (x1) and bias (x2) or null,
// y, rows, len and eps.
std::string norm_call_tail(const Node& n) {
  char eps[64];
  std::snprintf(eps, sizeof eps, "%a", n.attrs.get_float("eps", 1e-5));
  return std::string(n.inputs.size() > 1 ? "x1" : "static_cast<const float*>(nullptr)") + ", " +
         (n.inputs.size() > 2 ? "x2" : "static_cast<const float*>(nullptr)") + ", y, rows, len, " + eps;
}

}  // namespace
void Generator::emit_native(const Segment& seg, std::ostream& call) {
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
    k << "  ig_trailing_norm<" << (op == "layer_norm" ? "true" : "false") << ">(x0, " << norm_call_tail(n) << ");\n";
  } else if (op == "batch_norm") {
    char eps[64];
    std::snprintf(eps, sizeof eps, "%a", n.attrs.get_float("eps", 1e-5));
    if (const int64_t block = layout_channel_block(layout(y)); block > 0)  // [N, C / block, H * W, block]
      k << "  ig_batch_norm_cl<" << block << ">(x0, x1, x2, x3, x4, y, " << str(xd[0]) << ", " << xd[1].c / block << ", "
        << str(xd[2] * xd[3]) << ", " << block << ", " << eps << ");\n";
    else if (layout(y) == Layout::Nhwc)  // [N * H * W, 1, 1, C]
      k << "  ig_batch_norm_cl<0>(x0, x1, x2, x3, x4, y, " << str(xd[0] * xd[2] * xd[3]) << ", 1, 1, " << str(xd[1])
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
  } else if (op == "avg_pool2d_grad") {  // (dy, like x) -> dx, NCHW
    const std::vector<Mono> xs = dims(n.inputs[1]), ys = xd;
    const std::vector<int64_t> kernel = n.attrs.get_ints("kernel"), stride = n.attrs.get_ints("stride", kernel),
                               pad = n.attrs.get_ints("padding", {0, 0});
    k << "  return ig_avg_pool2d_grad(ctx, x0, y, " << str(xs[0] * xs[1]) << ", " << str(xs[2]) << ", " << str(xs[3])
      << ", " << str(ys[2]) << ", " << str(ys[3]) << ", " << kernel[0] << ", " << kernel[1] << ", " << stride[0] << ", "
      << stride[1] << ", " << pad[0] << ", " << pad[1] << ", " << n.attrs.get_int("count_include_pad", 1) << ");\n";
  } else if (op == "max_pool2d" || op == "avg_pool2d") {
    // [outer, H, W, lanes] in the buffers' layout; y shares x's (check_layouts)
    const std::vector<Mono> yd = dims(y);
    const int64_t block = layout_channel_block(layout(x));
    const Mono outer = layout(x) == Layout::Nhwc ? xd[0] : block ? xd[0] * Mono{xd[1].c / block, {}} : xd[0] * xd[1];
    const Mono lanes = layout(x) == Layout::Nhwc ? xd[1] : block ? Mono{block, {}} : kOne;
    const std::vector<int64_t> kernel = n.attrs.get_ints("kernel"), stride = n.attrs.get_ints("stride", kernel),
                               pad = n.attrs.get_ints("padding", {0, 0});
    k << "  ig_" << op << "(x0, y, " << str(outer) << ", " << str(xd[2]) << ", " << str(xd[3]) << ", " << str(lanes)
      << ", " << str(yd[2]) << ", " << str(yd[3]) << ", " << kernel[0] << ", " << kernel[1] << ", " << stride[0]
      << ", " << stride[1] << ", " << pad[0] << ", " << pad[1];
    if (op == "avg_pool2d") k << ", " << n.attrs.get_int("count_include_pad", 1);
    k << ");\n";
  } else if (op == "concat" && layout(y) != Layout::Nchw) {
    // Along the channels (check_layouts): in NHWC the last axis of [N, H, W, C]; blocked, axis 1
    // of [N, C/b, H, W, b], each input's channels being whole blocks.
    Node physical = n;
    physical.attrs.set("axis", int64_t{layout(y) == Layout::Nhwc ? 3 : 1});
    std::vector<std::vector<std::string>> in_dims;
    for (ValueId v : n.inputs) in_dims.push_back(stored_dim_strings(v));
    k << movement_body(physical, in_dims, stored_dim_strings(y), ty);
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
void Generator::emit_attention(const Node& n, std::ostream& k) {
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
  // A bit per operand the kernel reads or writes with its head and sequence axes swapped, in its
  // argument order (fold_transposes, fold_head_swaps): q, k, v, [dy,] then the results.
  int swapped = 0, bit = 1;
  for (size_t i = 0; i < mask_at; ++i, bit <<= 1)
    if (folded_[n.inputs[i]] >= 0) swapped |= bit;
  for (size_t i = 0; i < (grad ? 3u : 1u); ++i, bit <<= 1)
    if (head_swapped_writes_.count(n.outputs[i])) swapped |= bit;
  const std::string mask_arg = kind ? "x" + std::to_string(mask_at) : std::string("nullptr");
  const DType t = g_.value(n.inputs[0]).dtype;
  const std::string kernel = std::string(grad ? "ig_attention_grad" : "ig_attention") + (is_half(t) ? "_lowp<" : "<") +
                             ctype(t) + ", " + std::to_string(kind) + ">";
  if (grad) {
    k << "  return " << kernel << "(ctx, x0, x1, x2, x3, " << mask_arg << ", y, y1, y2, y3, " << (kind ? str(numel_of(n.inputs[mask_at])) : "0")
      << ", " << str(product(qd, 0, r - 2)) << ", " << (r >= 3 ? str(qd[r - 3]) : "1") << ", "
      << (r >= 3 ? str(kd[r - 3]) : "1") << ", " << str(qd[r - 2]) << ", " << str(kd[r - 2]) << ", d, "
      << str(vd[r - 1]) << ", scale, " << (n.attrs.get_int("causal", 0) != 0 ? 1 : 0) << ", "
      << n.attrs.get_int("causal_offset", 0) << ", " << r - 2 << ", lead, mstride, " << swapped << ");\n";
    return;
  }
  k << "  return " << kernel << "(ctx, x0, x1, x2, "
    << (kind ? "x3" : "nullptr") << ", y, " << str(product(qd, 0, r - 2)) << ", "
    << (r >= 3 ? str(qd[r - 3]) : "1") << ", " << (r >= 3 ? str(kd[r - 3]) : "1") << ", " << str(qd[r - 2]) << ", "
    << str(kd[r - 2]) << ", d, " << str(vd[r - 1]) << ", scale, " << (n.attrs.get_int("causal", 0) != 0 ? 1 : 0)
    << ", " << n.attrs.get_int("causal_offset", 0) << ", " << r - 2 << ", lead, mstride, " << swapped << ");\n";
}

// conv2d through the host's oneDNN primitive, its folded epilogue computed inside (post-ops).
void Generator::emit_dnnl_conv(const Segment& seg, const ConvEpilogue& epi, std::ostream& call) {
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
  for (size_t i = 0; i < args.size(); ++i) k << ", const " << ctype(g_.value(args[i]).dtype) << "* x" << i;
  k << ", " << ctype(g_.value(y).dtype) << "* y) {\n" << dnnl_conv_kernel_body(n, epi, out_.dnnl_convs.size(), layout(x), layout(y), in_place) << "}\n\n";
  kernels_ << k.str();
  std::vector<std::optional<std::vector<int32_t>>> finite;
  for (ValueId v : args) finite.push_back(finite_when(g_, v, conv_results_));
  conv_results_[y] = static_cast<int32_t>(out_.dnnl_convs.size());
  out_.dnnl_convs.push_back({n.id, layout(x), layout(y), epi.post_ops, std::move(finite), in_place});
  call << "  if (" << name << "(ctx";
  for (ValueId v : args) call << ", " << ptr(v);
  call << ", " << ptr(y) << ") != 0) return 1;\n";
}

// The buffers a fused prologue (every node of `seg` but the last, its anchor) reads, in order.
std::vector<ValueId> Generator::prologue_reads(const Segment& seg) const {
  std::set<ValueId> inside;
  for (NodeId id : seg.nodes) inside.insert(g_.node(id).outputs[0]);
  std::vector<ValueId> reads;
  for (size_t i = 0; i + 1 < seg.nodes.size(); ++i)
    for (ValueId v : g_.node(seg.nodes[i]).inputs)
      if (!inside.count(v) && !is_scalar_constant(g_.value(v)) && std::find(reads.begin(), reads.end(), v) == reads.end())
        reads.push_back(v);
  return reads;
}

// A fused prologue's statements: read i (parameter p<i>) loaded at `index(i)` into a<i>, then
// each prologue node's value t<value id>, the last being the anchor's input.
std::string Generator::prologue_body(const Segment& seg, const std::vector<ValueId>& reads,
                                     const std::function<std::string(size_t)>& index, const std::string& indent) const {
  std::ostringstream b;
  std::map<ValueId, std::string> names;
  for (size_t i = 0; i < reads.size(); ++i) {
    names[reads[i]] = "a" + std::to_string(i);
    const DType dt = g_.value(reads[i]).dtype;
    b << indent << "const " << ctype(dt) << " a" << i << " = " << loaded(dt, "p" + std::to_string(i), index(i)) << ";\n";
  }
  for (size_t i = 0; i + 1 < seg.nodes.size(); ++i) {
    const Node& p = g_.node(seg.nodes[i]);
    names[p.outputs[0]] = "t" + std::to_string(p.outputs[0]);
    b << indent << "const " << ctype(g_.value(p.outputs[0]).dtype) << " t" << p.outputs[0] << " = " << expr(p, names)
      << ";  // " << p.op << "\n";
  }
  return b.str();
}

// A reduction whose input is computed in place by its elementwise prologue: one pass, the
// prologue a lambda of the flat index (all its operands share the reduction input's shape).
void Generator::emit_fused_reduction(const Segment& seg, std::ostream& call) {
  const Node& n = g_.node(seg.nodes.back());
  if (n.op == "layer_norm" || n.op == "rms_norm") return emit_fused_norm(seg, call);
  const ValueId x = n.inputs[0], y = n.outputs[0];
  const std::vector<Mono> xd = dims(x);
  const int rank = static_cast<int>(xd.size());
  const std::vector<ValueId> reads = prologue_reads(seg);
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
  k << "  auto load = [=](int64_t i) {\n"
    << prologue_body(seg, reads, [](size_t) { return std::string("i"); }, "    ")
    << "    return t" << x << ";\n  };\n";
  k << "  ig_reduce_fn<" << kind << ", " << tx << ", " << ty << ">(load, y, outer, n, inner);\n  return 0;\n}\n\n";
  kernels_ << k.str();
  call << "  if (" << name << "(ctx";
  for (ValueId v : reads) call << ", " << stored_ptr(v);
  call << ", " << ptr(y) << ") != 0) return 1;\n";
}

// A layer_norm / rms_norm whose input rows its elementwise prologue computes (a transformer's
// residual add and bias): the prologue is a lambda filling one row in a thread's buffer, which
// ig_trailing_norm_rows then normalizes. An operand of x's shape is read at row * len + i, one
// of the normalized dims' (prologue_fuses) at i.
void Generator::emit_fused_norm(const Segment& seg, std::ostream& call) {
  const Node& n = g_.node(seg.nodes.back());
  const ValueId x = n.inputs[0], y = n.outputs[0];
  const std::vector<Mono> xd = dims(x);
  const int rank = static_cast<int>(xd.size());
  const int axis = norm_axis(n.attrs.get_int("axis", -1), rank);
  const std::vector<ValueId> reads = prologue_reads(seg);
  const std::string tx = ctype(g_.value(x).dtype);
  const std::string name = kernel_name(seg.nodes, true);
  std::ostringstream k;
  k << "// group " << seg.group << " [row-kernel, prologue fused]: " << describe(seg.nodes) << "\n";
  k << "static int " << name << "(const ig_ctx* ctx";
  for (size_t i = 0; i < reads.size(); ++i) k << ", const " << storage_type(g_.value(reads[i]).dtype) << "* __restrict p" << i;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    k << ", const " << ctype(g_.value(n.inputs[i]).dtype) << "* __restrict x" << i;
  k << ", " << tx << "* __restrict y) {\n" << dims_prologue();
  k << "  const int64_t rows = " << str(product(xd, 0, static_cast<size_t>(axis)))
    << ", len = " << str(product(xd, static_cast<size_t>(axis))) << ";\n";
  auto index = [&](size_t i) { return std::string(g_.value(reads[i]).shape == g_.value(x).shape ? "base + i" : "i"); };
  k << "  auto load_row = [=](int64_t r, " << tx << "* __restrict row) {\n"
    << "    const int64_t base = r * len;\n    (void)base;\n"
    << "    #pragma omp simd\n    for (int64_t i = 0; i < len; ++i) {\n"
    << prologue_body(seg, reads, index, "      ") << "      row[i] = t" << x << ";\n    }\n  };\n";
  k << "  return ig_trailing_norm_rows<" << (n.op == "layer_norm" ? "true" : "false") << ">(ctx, load_row, "
    << norm_call_tail(n) << ");\n}\n\n";
  kernels_ << k.str();
  call << "  if (" << name << "(ctx";
  for (ValueId v : reads) call << ", " << stored_ptr(v);
  for (size_t i = 1; i < n.inputs.size(); ++i) call << ", " << stored_ptr(n.inputs[i]);
  call << ", " << ptr(y) << ") != 0) return 1;\n";
}

void Generator::emit_matmul(const Node& n, std::ostream& k) {
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
  // One batched call where the host has one (ig_matmul_batched), else a loop over the batch.
  // (No batch dims: a product with a folded transposed a, one gemm in the loop below.)
  auto list = [&](const std::vector<Mono>& v) {
    std::string l;
    for (const Mono& m : v) l += (l.empty() ? "" : ", ") + str(m);
    return l;
  };
  if (ob > 0)
    k << "  const int64_t batch_dims[] = {" << list(batch) << "}, batch_a[] = {" << list(sa) << "}, batch_b[] = {"
      << list(sb) << "};\n"
      << "  if (ig_matmul_batched(ctx, " << opt_.num_threads << ", " << (ta ? "true" : "false") << ", "
      << (tb ? "true" : "false") << ", " << ob << ", batch_dims, batch_a, batch_b, M, N, K, x0, " << lda << ", x1, "
      << ldb << ", y)) return 0;\n";
  k << "  const int64_t batch = " << str(product(yd, 0, ob)) << ";\n"
    << "  for (int64_t bi = 0; bi < batch; ++bi) {\n    int64_t rest = bi, oa = 0, ob = 0;\n";
  for (size_t d = ob; d-- > 0;) {
    k << "    { const int64_t j = rest % " << str(yd[d]) << "; rest /= " << str(yd[d]) << "; oa += j * "
      << str(sa[d]) << "; ob += j * " << str(sb[d]) << "; }\n";
  }
  k << "    (void)rest;\n    " << gemm << "M, N, K, x0 + oa, " << lda << ", x1 + ob, " << ldb
    << ", y + bi * M * N, N);\n  }\n";
}

}  // namespace ingot::cpu::codegen_detail
