#include "backends/cpu/dnnl_conv.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <optional>
#include <unordered_map>

#include "ingot/error.h"

#ifdef INGOT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace ingot::cpu {

#ifdef INGOT_HAVE_DNNL

bool dnnl_available() { return true; }

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A 64-byte aligned temporary for one call (empty when bytes == 0).
struct Scratch {
  void* p = nullptr;
  explicit Scratch(size_t bytes) {
    if (bytes == 0) return;
    p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
  }
  ~Scratch() { std::free(p); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

bool is_reference_impl(const std::string& name) { return name.rfind("ref", 0) == 0; }

}  // namespace

struct DnnlConv::Impl {
  ConvSpec spec;
  bool empty_output = false;  // nothing to compute
  bool no_input = false;      // cin == 0: y is the bias (or 0)
  std::string name;
  dnnl::convolution_forward prim;
  memory::desc src_user, src_md, wei_user, wei_md, bias_md, dst_user, dst_md, scratch_md;
};

DnnlConv::DnnlConv(const ConvSpec& s) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.spec = s;
  m.empty_output = s.n == 0 || s.cout == 0 || s.oh == 0 || s.ow == 0;
  m.no_input = !m.empty_output && s.cin == 0;
  if (m.empty_output || m.no_input) {
    m.name = "none (empty)";
    return;
  }
  const int64_t g = s.groups;
  const memory::dims src{s.n, s.cin, s.h, s.w}, dst{s.n, s.cout, s.oh, s.ow}, bias{s.cout};
  const memory::dims wei = g > 1 ? memory::dims{g, s.cout / g, s.cin / g, s.kh, s.kw}
                                 : memory::dims{s.cout, s.cin, s.kh, s.kw};
  const Tag wei_tag = g > 1 ? Tag::goihw : Tag::oihw;
  // oneDNN counts dilation from 0 and wants the right padding that yields exactly oh x ow.
  const memory::dims strides{s.sh, s.sw}, dilates{s.dh - 1, s.dw - 1}, pad_l{s.ph, s.pw};
  const memory::dims pad_r{(s.oh - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.ph,
                           (s.ow - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pw};
  m.src_user = memory::desc(src, Dt::f32, s.src_nhwc ? Tag::nhwc : Tag::nchw);
  m.dst_user = memory::desc(dst, Dt::f32, s.dst_nhwc ? Tag::nhwc : Tag::nchw);
  m.wei_user = memory::desc(wei, Dt::f32, wei_tag);
  m.bias_md = memory::desc(bias, Dt::f32, Tag::x);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // thread-safe execution
  if (s.relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(po);
  }
  // Channels-last with blocked weights runs the library's direct (brgemm) kernels; plain NCHW
  // runs its im2col + GEMM. Take the first that is not the slow reference implementation.
  struct Config {
    Tag src, dst;
    bool any_weights;
  };
  const Config configs[] = {{Tag::nhwc, Tag::nhwc, true}, {Tag::nchw, Tag::nchw, false}};
  std::string errors;
  bool have = false;
  for (const Config& c : configs) {
    try {
      const memory::desc src_md(src, Dt::f32, c.src), dst_md(dst, Dt::f32, c.dst);
      const memory::desc wei_md = c.any_weights ? memory::desc(wei, Dt::f32, Tag::any) : m.wei_user;
      const dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, wei_md,
          s.has_bias ? m.bias_md : memory::desc(), dst_md, strides, dilates, pad_l, pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
      const std::string name = pd.impl_info_str();
      if (have && is_reference_impl(name)) continue;
      m.prim = dnnl::convolution_forward(pd);
      m.src_md = pd.src_desc();
      m.wei_md = pd.weights_desc();
      m.dst_md = pd.dst_desc();
      m.scratch_md = pd.scratchpad_desc();
      m.name = name;
      have = true;
      if (!is_reference_impl(name)) break;
    } catch (const dnnl::error& e) {
      errors += std::string(errors.empty() ? "" : "; ") + e.what();
    }
  }
  INGOT_CHECK(have, "CpuBackend: oneDNN cannot run conv2d [", s.n, ", ", s.cin, ", ", s.h, ", ", s.w, "] -> [", s.n,
              ", ", s.cout, ", ", s.oh, ", ", s.ow, "]: ", errors);
}

DnnlConv::~DnnlConv() = default;

const std::string& DnnlConv::implementation() const { return impl_->name; }

void DnnlConv::run(const float* x, const float* w, const float* b, float* y) const {
  const Impl& m = *impl_;
  const ConvSpec& s = m.spec;
  if (m.empty_output) return;
  if (m.no_input) {  // an empty sum: bias (then relu) everywhere
    const int64_t pixels = s.n * s.oh * s.ow;
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < s.cout; ++c) {
        float v = b != nullptr ? b[c] : 0.0f;
        if (s.relu) v = std::max(v, 0.0f);
        const int64_t img = p / (s.oh * s.ow), pix = p % (s.oh * s.ow);
        y[s.dst_nhwc ? p * s.cout + c : (img * s.cout + c) * s.oh * s.ow + pix] = v;
      }
    return;
  }
  try {
    const dnnl::engine& eng = cpu_engine();
    dnnl::stream st(eng);
    // Layout conversions into per-call temporaries where the caller's layout is not the
    // primitive's (reorder primitives come from oneDNN's primitive cache after the first call).
    auto input = [&](const memory::desc& user, const memory::desc& want, const float* p, std::optional<Scratch>& tmp) {
      memory u(user, eng, const_cast<float*>(p));
      if (user == want) return u;
      tmp.emplace(want.get_size());
      memory t(want, eng, tmp->p);
      dnnl::reorder(u, t).execute(st, u, t);
      return t;
    };
    std::optional<Scratch> src_tmp, wei_tmp;
    memory src_m = input(m.src_user, m.src_md, x, src_tmp);
    memory wei_m = input(m.wei_user, m.wei_md, w, wei_tmp);
    memory dst_u(m.dst_user, eng, y);
    Scratch dst_tmp(m.dst_user == m.dst_md ? 0 : m.dst_md.get_size());
    memory dst_m = m.dst_user == m.dst_md ? dst_u : memory(m.dst_md, eng, dst_tmp.p);
    Scratch pad(m.scratch_md.get_size());
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_DST, dst_m},
                                            {DNNL_ARG_SCRATCHPAD, memory(m.scratch_md, eng, pad.p)}};
    if (s.has_bias) args.emplace(DNNL_ARG_BIAS, memory(m.bias_md, eng, const_cast<float*>(b)));
    m.prim.execute(st, args);
    if (!(m.dst_user == m.dst_md)) dnnl::reorder(dst_m, dst_u).execute(st, dst_m, dst_u);
    st.wait();
  } catch (const dnnl::error& e) {
    INGOT_FAIL("CpuBackend: oneDNN conv2d failed: ", e.what());
  }
}

#else  // no oneDNN: the generated code keeps its own convolution

bool dnnl_available() { return false; }

struct DnnlConv::Impl {
  std::string name = "unavailable";
};
DnnlConv::DnnlConv(const ConvSpec&) { INGOT_FAIL("CpuBackend: ingot was built without oneDNN"); }
DnnlConv::~DnnlConv() = default;
const std::string& DnnlConv::implementation() const { return impl_->name; }
void DnnlConv::run(const float*, const float*, const float*, float*) const {
  INGOT_FAIL("CpuBackend: ingot was built without oneDNN");
}

#endif

}  // namespace ingot::cpu
