#include "backends/cpu/dnnl_conv_backward.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ingot/error.h"

#ifdef INGOT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "backends/cpu/dnnl_util.h"
#endif

namespace ingot::cpu {

namespace {
const char* op_name(ConvGradKind kind) { return kind == ConvGradKind::Input ? "conv2d_input_grad" : "conv2d_weight_grad"; }

ConvSpec grad_spec(const Node& grad, const Shape& x, const Shape& w, const Shape& dy, bool bf16_operands) {
  ConvSpec s = conv_spec(grad, x, w, dy);
  s.has_bias = false;  // the third input is `like`, not a bias
  s.bf16 = bf16_operands;
  return s;
}
}  // namespace

DnnlConvGrad::DnnlConvGrad(const Node& grad, const Shape& x, const Shape& w, const Shape& dy, bool bf16_operands,
                           bool bf16_result)
    : DnnlConvGrad(grad_spec(grad, x, w, dy, bf16_operands),
                   grad.op == "conv2d_input_grad" ? ConvGradKind::Input : ConvGradKind::Weight, bf16_result) {}

#ifdef INGOT_HAVE_DNNL

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

// The caller's activation layout; the backward kernels take NCHW or NHWC buffers only (the layout
// plan keeps the operands of conv gradients NCHW).
Tag activation_tag(Layout l) {
  INGOT_CHECK(l == Layout::Nchw || l == Layout::Nhwc, "CpuBackend: conv2d gradients take NCHW or NHWC buffers, not ",
              layout_name(l));
  return l == Layout::Nhwc ? Tag::nhwc : Tag::nchw;
}

}  // namespace

struct DnnlConvGrad::Impl {
  ConvGradKind kind = ConvGradKind::Input;
  int64_t out_elements = 0;
  size_t out_element_bytes = 4;
  bool zeros = false;  // an empty operand: nothing flows, the gradient is zero
  std::string name;
  dnnl::primitive prim;
  int a_arg = 0, b_arg = 0, out_arg = 0;  // DNNL_ARG_* of a, b and out
  memory::desc a_user, a_md, b_user, b_md, out_user, out_md, scratch_md;
};

DnnlConvGrad::DnnlConvGrad(const ConvSpec& s, ConvGradKind kind, bool bf16_result) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.kind = kind;
  m.out_element_bytes = bf16_result ? 2 : 4;
  const int64_t g = s.groups;
  m.out_elements = kind == ConvGradKind::Input ? s.n * s.cin * s.h * s.w : s.cout * (g > 0 ? s.cin / g : 0) * s.kh * s.kw;
  m.zeros = s.n == 0 || s.cin == 0 || s.cout == 0 || s.oh == 0 || s.ow == 0 || s.h == 0 || s.w == 0;
  if (m.zeros) {
    m.name = "none (zeros)";
    return;
  }
  const DnnlConvDims dims = dnnl_conv_dims(s);
  // a and b: the operands run() takes; out: what it writes.
  const bool input_grad = kind == ConvGradKind::Input;
  const Dt operand_dt = s.bf16 ? Dt::bf16 : Dt::f32, result_dt = bf16_result ? Dt::bf16 : Dt::f32;
  const Dt x_dt = input_grad ? result_dt : operand_dt, w_dt = input_grad ? operand_dt : result_dt;
  const memory::desc x_user(dims.src, x_dt, activation_tag(s.src_layout));
  const memory::desc dy_user(dims.dst, operand_dt, activation_tag(s.dst_layout));
  const Tag plain_weights = g > 1 ? Tag::goihw : Tag::oihw;
  const memory::desc w_user(dims.wei, w_dt, plain_weights);
  m.a_user = input_grad ? dy_user : x_user, m.a_arg = input_grad ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC;
  m.b_user = input_grad ? w_user : dy_user, m.b_arg = input_grad ? DNNL_ARG_WEIGHTS : DNNL_ARG_DIFF_DST;
  m.out_user = input_grad ? x_user : w_user, m.out_arg = input_grad ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DIFF_WEIGHTS;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // thread-safe execution
  // As for the forward convolution: channels-last activations with the library's blocked weights
  // run its direct kernels; plain NCHW its im2col + GEMM. The first that is not the reference.
  // bfloat16: channels-last first, the layout of oneDNN's AMX kernels.
  struct Config {
    Tag activations;
    bool any_weights;
  };
  std::vector<Config> configs = {{Tag::any, true}, {Tag::nhwc, true}, {Tag::nchw, false}};
  if (s.bf16) std::swap(configs[0], configs[1]);
  std::string errors;
  bool have = false;
  for (const Config& c : configs) {
    try {
      // The forward hint in the operands' type; the primitive's result (dx or dw) in its own.
      const memory::desc src_md(dims.src, operand_dt, c.activations), dst_md(dims.dst, operand_dt, c.activations);
      const Tag weights = c.any_weights ? Tag::any : plain_weights;
      const memory::desc wei_md(dims.wei, operand_dt, weights), dw_md(dims.wei, result_dt, weights);
      const memory::desc dx_md(dims.src, result_dt, c.activations);
      const dnnl::convolution_forward::primitive_desc hint(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                          src_md, wei_md, dst_md, dims.strides, dims.dilates, dims.pad_l, dims.pad_r),
          cpu_engine());
      // Both primitive descriptors name their operands' layouts by execution argument.
      auto adopt = [&](const dnnl::primitive_desc& pd, dnnl::primitive prim) {
        m.prim = std::move(prim);
        m.a_md = pd.query_md(dnnl::query::exec_arg_md, m.a_arg);
        m.b_md = pd.query_md(dnnl::query::exec_arg_md, m.b_arg);
        m.out_md = pd.query_md(dnnl::query::exec_arg_md, m.out_arg);
        m.scratch_md = pd.scratchpad_desc();
      };
      std::string name;
      if (input_grad) {
        const dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, dx_md, wei_md, dst_md,
                                                  dims.strides, dims.dilates, dims.pad_l, dims.pad_r),
            attr, cpu_engine(), hint);
        name = pd.impl_info_str();
        if (have && name.rfind("ref", 0) == 0) continue;
        adopt(pd, dnnl::convolution_backward_data(pd));
      } else {
        const dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_md, dw_md, dst_md,
                                                     dims.strides, dims.dilates, dims.pad_l, dims.pad_r),
            attr, cpu_engine(), hint);
        name = pd.impl_info_str();
        if (have && name.rfind("ref", 0) == 0) continue;
        adopt(pd, dnnl::convolution_backward_weights(pd));
      }
      m.name = name;
      have = true;
      if (name.rfind("ref", 0) != 0) break;
    } catch (const dnnl::error& e) {
      errors += std::string(errors.empty() ? "" : "; ") + e.what();
    }
  }
  INGOT_CHECK(have, "CpuBackend: oneDNN cannot run ", op_name(kind),
              " for conv2d [", s.n, ", ", s.cin, ", ", s.h, ", ", s.w, "] -> [", s.n, ", ", s.cout, ", ", s.oh, ", ", s.ow,
              "]: ", errors);
}

DnnlConvGrad::~DnnlConvGrad() = default;

const std::string& DnnlConvGrad::implementation() const { return impl_->name; }

void DnnlConvGrad::run(const void* a, const void* b, void* out) const {
  const Impl& m = *impl_;
  if (m.zeros) {  // +0 in float32 and bfloat16 alike
    std::memset(out, 0, static_cast<size_t>(m.out_elements) * m.out_element_bytes);
    return;
  }
  try {
    dnnl::stream st(cpu_engine());
    // Operands in the caller's layout are reordered into per-call temporaries where the
    // primitive wants another one; the result likewise back into the caller's layout.
    auto operand = [&](const memory::desc& user, const memory::desc& want, const void* p, std::optional<Scratch>& tmp) {
      memory u(user, cpu_engine(), const_cast<void*>(p));
      if (user == want) return u;
      tmp.emplace(want.get_size());
      memory t(want, cpu_engine(), tmp->p);
      dnnl::reorder(u, t).execute(st, u, t);
      return t;
    };
    std::optional<Scratch> a_tmp, b_tmp;
    const memory a_m = operand(m.a_user, m.a_md, a, a_tmp), b_m = operand(m.b_user, m.b_md, b, b_tmp);
    memory out_u(m.out_user, cpu_engine(), out);
    Scratch out_tmp(m.out_user == m.out_md ? 0 : m.out_md.get_size());
    memory out_m = m.out_user == m.out_md ? out_u : memory(m.out_md, cpu_engine(), out_tmp.p);
    Scratch pad(m.scratch_md.get_size());
    m.prim.execute(st, {{m.a_arg, a_m}, {m.b_arg, b_m}, {m.out_arg, out_m},
                        {DNNL_ARG_SCRATCHPAD, memory(m.scratch_md, cpu_engine(), pad.p)}});
    if (!(m.out_user == m.out_md)) dnnl::reorder(out_m, out_u).execute(st, out_m, out_u);
    st.wait();
  } catch (const dnnl::error& e) {
    INGOT_FAIL("CpuBackend: oneDNN ", op_name(m.kind),
               " failed: ", e.what());
  }
}

#else  // no oneDNN: the conv gradients stay on their reference kernels

struct DnnlConvGrad::Impl {
  std::string name = "unavailable";
};
DnnlConvGrad::DnnlConvGrad(const ConvSpec&, ConvGradKind, bool) { INGOT_FAIL("CpuBackend: ingot was built without oneDNN"); }
DnnlConvGrad::~DnnlConvGrad() = default;
const std::string& DnnlConvGrad::implementation() const { return impl_->name; }
void DnnlConvGrad::run(const void*, const void*, void*) const { INGOT_FAIL("CpuBackend: ingot was built without oneDNN"); }

#endif

}  // namespace ingot::cpu
