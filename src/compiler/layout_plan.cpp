#include "compiler/layout_plan.h"

#include <cctype>
#include <cstdlib>
#include <sstream>
#include <string>

#include "ingot/error.h"

namespace ingot {

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::Nchw: return "nchw";
    case Layout::Nhwc: return "nhwc";
    case Layout::Nchw8c: return "nchw8c";
    case Layout::Nchw16c: return "nchw16c";
  }
  return "?";
}

int host_channel_block() {
#if defined(__x86_64__) || defined(__i386__)
  static const int block = [] {
    if (!__builtin_cpu_supports("avx512f")) return 8;  // CPUID and OS support
    // oneDNN caps its kernels at ONEDNN_MAX_CPU_ISA (DNNL_ before 2.x): below AVX-512 they are
    // the AVX2 ones, which block channels by 8.
    for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
      const char* v = std::getenv(var);
      if (v == nullptr || *v == '\0') continue;
      std::string isa(v);
      for (char& ch : isa) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      return isa.rfind("AVX512", 0) == 0 || isa == "ALL" ? 16 : 8;
    }
    return 16;
  }();
  return block;
#else
  return 8;
#endif
}

Layout host_layout() { return host_channel_block() == 16 ? Layout::Nchw16c : Layout::Nchw8c; }

bool layout_target_is_auto(const std::string& name) {
  if (name != "auto") return false;
  const char* env = std::getenv("INGOT_LAYOUT_TARGET");
  return env == nullptr || *env == '\0' || std::string(env) == "auto";
}

Layout parse_layout_target(const std::string& name, const std::string& what) {
  if (name == "auto") {
    if (layout_target_is_auto(name)) return host_layout();
    return parse_layout_target(std::getenv("INGOT_LAYOUT_TARGET"), "Environment variable INGOT_LAYOUT_TARGET");
  }
  for (Layout l : {Layout::Nchw, Layout::Nhwc, Layout::Nchw8c, Layout::Nchw16c})
    if (name == layout_name(l)) return l;
  INGOT_FAIL(what, ": unknown layout target '", name, "' (valid: auto, nchw, nhwc, nchw8c, nchw16c)");
}

int layout_channel_block(Layout l) { return l == Layout::Nchw8c ? 8 : l == Layout::Nchw16c ? 16 : 0; }

std::string LayoutPlan::str(const Graph& g) const {
  std::ostringstream os;
  for (size_t v = 0; v < of_value.size(); ++v) {
    if (of_value[v] == Layout::Nchw) continue;
    const Value& val = g.value(static_cast<ValueId>(v));
    os << "v" << v;
    if (val.producer >= 0) {
      const Node& n = g.node(val.producer);
      os << " (" << n.op << (n.scope.empty() ? "" : " in '" + n.scope + "'") << ")";
    }
    os << ": " << layout_name(of_value[v]) << "\n";
  }
  return os.str();
}

LayoutPlan nchw_plan(const Graph& g) {
  LayoutPlan p;
  p.of_value.assign(g.values().size(), Layout::Nchw);
  return p;
}

bool conv_geometry_fits(const Graph& g, const Node& n, ValueId x, ValueId w, ValueId y) {
  const SymShape &xs = g.value(x).shape, &ws = g.value(w).shape, &ys = g.value(y).shape;
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4 || !is_static(ws) || !xs[1].known()) return false;
  const std::vector<int64_t> st = n.attrs.get_ints("stride", {1, 1}), pad = n.attrs.get_ints("padding", {0, 0}),
                             dil = n.attrs.get_ints("dilation", {1, 1});
  for (size_t d = 0; d < 2; ++d) {
    if (!xs[d + 2].known() || !ys[d + 2].known()) return false;
    // The padding past the input's end at which the last window ends; negative when the stride
    // drops input rows or columns (ResNet's 1x1 stride-2 downsample over an even size drops one).
    // oneDNN sizes the output by floor division, so a right padding of 0 yields the same output
    // while fewer than `stride` rows are dropped (dnnl_conv_dims); more cannot happen for an
    // output size the shape rule computed.
    const int64_t right =
        (ys[d + 2].value - 1) * st.at(d) + (ws[d + 2].value - 1) * dil.at(d) + 1 - xs[d + 2].value - pad.at(d);
    if (right <= -st.at(d)) return false;
  }
  return true;
}

bool conv_runs_channels_last(const Graph& g, const Node& n) {
  if (n.op != "conv2d" || n.outputs.size() != 1 || g.value(n.outputs[0]).dtype != DType::Float32) return false;
  for (ValueId v : n.inputs)
    if (g.value(v).dtype != DType::Float32) return false;
  return conv_geometry_fits(g, n, n.inputs[0], n.inputs[1], n.outputs[0]);
}

bool bf16_conv_fits(const Graph& g, const Node& n) {
  if (n.op != "conv2d" || n.outputs.size() != 1 || n.inputs.size() < 2) return false;
  if (g.value(n.outputs[0]).dtype != DType::BFloat16) return false;
  for (ValueId v : n.inputs)
    if (g.value(v).dtype != DType::BFloat16) return false;
  return conv_geometry_fits(g, n, n.inputs[0], n.inputs[1], n.outputs[0]);
}

bool is_conv2d_gradient(const Node& n) { return n.op == "conv2d_input_grad" || n.op == "conv2d_weight_grad"; }

bool bf16_conv_grad_fits(const Graph& g, const Node& n) {
  const bool input_grad = n.op == "conv2d_input_grad";  // (dy, w, like x), else (x, dy, like w)
  if (!is_conv2d_gradient(n) || n.inputs.size() != 3 || n.outputs.size() != 1) return false;
  const DType result = g.value(n.outputs[0]).dtype;
  if (g.value(n.inputs[0]).dtype != DType::BFloat16 || g.value(n.inputs[1]).dtype != DType::BFloat16 ||
      (result != DType::Float32 && result != DType::BFloat16))
    return false;
  const ValueId x = input_grad ? n.inputs[2] : n.inputs[0], w = input_grad ? n.inputs[1] : n.inputs[2],
                dy = input_grad ? n.inputs[0] : n.inputs[1];
  if (!conv_geometry_fits(g, n, x, w, dy)) return false;  // also: every size but the batch known
  const SymShape &ys = g.value(dy).shape, &ws = g.value(w).shape;
  if (ys[2].value * ys[3].value < 36) return false;
  // Weight gradients of 64 taps or more stay off oneDNN as in float32 (Generator::dnnl_weight_grad_trusted).
  return input_grad || (ws[1].value >= 8 && ws[2].value * ws[3].value < 64);
}

bool conv_runs_channels_last(const Graph& g, const Node& n, const LayoutTarget& target) {
  return conv_runs_channels_last(g, n) || (target.bf16_convs && bf16_conv_fits(g, n));
}

}  // namespace ingot
