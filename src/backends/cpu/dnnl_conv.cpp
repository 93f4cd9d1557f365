#include "backends/cpu/dnnl_conv.h"

#include "backends/cpu/conv_post_ops.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <unordered_map>

#include "ingot/error.h"

#ifdef INGOT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "backends/cpu/dnnl_util.h"
#endif

namespace ingot::cpu {

ConvSpec conv_spec(const Node& n, const Shape& x, const Shape& w, const Shape& y) {
  const std::vector<int64_t> st = n.attrs.get_ints("stride", {1, 1}), pad = n.attrs.get_ints("padding", {0, 0}),
                             dil = n.attrs.get_ints("dilation", {1, 1});
  ConvSpec s;
  s.n = x[0];
  s.cin = x[1];
  s.h = x[2];
  s.w = x[3];
  s.cout = y[1];
  s.kh = w[2];
  s.kw = w[3];
  s.oh = y[2];
  s.ow = y[3];
  s.sh = st.at(0);
  s.sw = st.at(1);
  s.ph = pad.at(0);
  s.pw = pad.at(1);
  s.dh = dil.at(0);
  s.dw = dil.at(1);
  s.groups = n.attrs.get_int("groups", 1);
  s.has_bias = n.inputs.size() > 2;
  return s;
}

ConvSpec matmul_conv_spec(int64_t m, int64_t k, int64_t n) {
  ConvSpec s;
  s.n = 1;
  s.cin = k;
  s.h = s.oh = 1;
  s.w = s.ow = m;
  s.cout = n;
  s.kh = s.kw = 1;
  s.src_layout = s.dst_layout = Layout::Nhwc;
  s.weights_kn = true;
  return s;
}

#ifdef INGOT_HAVE_DNNL

bool dnnl_available() { return true; }

std::string dnnl_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::all: return "all";
  }
  return "unknown";
}

bool dnnl_native_bf16_conv() { return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx; }

const dnnl::engine& cpu_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

bool is_reference_impl(const std::string& name) { return name.rfind("ref", 0) == 0; }

// 0: a direct kernel, 1: im2col + GEMM, 2: the slow reference implementation.
int kernel_class(const std::string& name) {
  if (is_reference_impl(name)) return 2;
  return name.find("gemm") != std::string::npos ? 1 : 0;
}

dnnl::algorithm eltwise_algorithm(ConvPostOp::Kind k) {
  using K = ConvPostOp::Kind;
  using A = dnnl::algorithm;
  switch (k) {
    case K::Relu: return A::eltwise_relu;
    case K::Tanh: return A::eltwise_tanh;
    case K::Sigmoid: return A::eltwise_logistic;
    case K::Exp: return A::eltwise_exp;
    case K::Log: return A::eltwise_log;
    case K::Sqrt: return A::eltwise_sqrt;
    case K::Abs: return A::eltwise_abs;
    case K::GeluErf: return A::eltwise_gelu_erf;
    case K::GeluTanh: return A::eltwise_gelu_tanh;
    case K::HardSwish: return A::eltwise_hardswish;
    case K::Swish: return A::eltwise_swish;
    case K::Linear: return A::eltwise_linear;
    case K::Clip: return A::eltwise_clip;
    case K::Add: return A::binary_add;
    case K::Sub: return A::binary_sub;
    case K::Mul: return A::binary_mul;
    case K::Div: return A::binary_div;
    case K::Max: return A::binary_max;
    case K::Min: return A::binary_min;
  }
  return A::undef;
}

Dt data_type(const ConvSpec& s) { return s.bf16 ? Dt::bf16 : Dt::f32; }

// The oneDNN memory descriptor of an activation of type `dt` stored in layout `l`.
memory::desc user_desc(const memory::dims& dims, Layout l, Dt dt) {
  switch (l) {
    case Layout::Nhwc: return memory::desc(dims, dt, Tag::nhwc);
    case Layout::Nchw8c: return memory::desc(dims, dt, Tag::nChw8c);
    case Layout::Nchw16c: return memory::desc(dims, dt, Tag::nChw16c);
    case Layout::Nchw: break;
  }
  return memory::desc(dims, dt, Tag::nchw);
}

// The layout an activation descriptor stores, when it is one of ingot's.
std::optional<Layout> layout_of(const memory::desc& md) {
  for (Layout l : {Layout::Nchw, Layout::Nhwc, Layout::Nchw8c, Layout::Nchw16c})
    if (md == user_desc(md.dims(), l, md.data_type())) return l;
  return std::nullopt;
}

// Whether `n` values of type `dt` at `p` hold a NaN or an inf.
bool holds_non_finite(const void* p, int64_t n, Dt dt) {
  if (dt == Dt::f32) return has_non_finite(static_cast<const float*>(p), n);
  const uint16_t* bits = static_cast<const uint16_t*>(p);  // bfloat16: the exponent all ones
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any |= (bits[i] & 0x7f80u) == 0x7f80u;
  return any;
}

// The primitive and the layouts it runs in: the best class of kernel (direct, then im2col + GEMM,
// then reference), preferring the caller's src/dst layouts (no per-call reorder), then
// channels-last, then NCHW.
struct Choice {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;
  std::string name;
  // Per binary post-op: its index among the post-ops and the layout the primitive reads the
  // operand in. A full operand is described in the layout the primitive writes y in (dst), not
  // the caller's: oneDNN's direct kernels index a full binary operand by dst's offsets whatever
  // its descriptor says, so an operand described in another layout is read at the wrong places
  // (the residual-block bug: NCHW residual, NHWC primitive). run() reorders the caller's operand
  // into this layout when the two differ.
  std::vector<std::pair<int, memory::desc>> binary_operands;
  // The entry of binary_operands that runs as oneDNN's sum post-op (-1: none): the primitive adds
  // what dst holds when it starts, so run() copies that operand into dst first. Winograd kernels
  // take sum but no binary post-op; a residual add (ResNet's) folds into them this way. With
  // ConvSpec::residual_in_dst the caller passes that operand in dst already (no copy).
  int sum_operand = -1;
};

bool has_relu(const ConvSpec& s) {
  return std::any_of(s.post_ops.begin(), s.post_ops.end(), [](const ConvPostOp& p) { return p.kind == ConvPostOp::Kind::Relu; });
}

// The post-ops of `s`, full binary operands described in `dst` (the layout the primitive writes).
// Relu: oneDNN's direct kernels compute it as max(y, 0), +0 for every negative y as the
// reference's relu gives; its GEMM-based and reference kernels as y * 0, -0 for a negative y
// (program fuzzer seed 320829: rsqrt(relu(conv2d(x, w))) gave -inf for +inf). Those run it as
// clip(y, 0, inf) (`relu_as_clip`), +0 in every kernel; the direct ones keep relu, the post-op
// oneDNN's Winograd kernels accept. (codegen_conv.cpp folds a relu only where no -0 reaches it.)
// With `residual_as_sum`, the first full Add runs as a sum post-op (Choice::sum_operand).
dnnl::post_ops post_ops_for(const ConvSpec& s, const memory::desc& dst, Choice* c, bool relu_as_clip,
                            bool residual_as_sum) {
  dnnl::post_ops po;
  c->binary_operands.clear();
  c->sum_operand = residual_as_sum ? sum_operand_index(s.post_ops) : -1;
  for (size_t i = 0; i < s.post_ops.size(); ++i) {
    const ConvPostOp& op = s.post_ops[i];
    if (op.binary()) {
      const memory::desc md = op.per_channel ? memory::desc({1, s.cout, 1, 1}, Dt::f32, Tag::abcd) : dst;
      if (static_cast<int>(c->binary_operands.size()) == c->sum_operand) {
        po.append_sum(1.0f);
      } else {
        po.append_binary(eltwise_algorithm(op.kind), md);
      }
      c->binary_operands.emplace_back(static_cast<int>(i), md);
    } else {
      // Relu's alpha is its negative slope (0); linear's and clip's alpha and beta are the map's;
      // swish's alpha is the sigmoid's slope, ConvPostOp's default 1 (y * sigmoid(alpha * y)).
      const bool own = op.kind == ConvPostOp::Kind::Linear || op.kind == ConvPostOp::Kind::Clip ||
                       op.kind == ConvPostOp::Kind::Swish;
      if (op.kind == ConvPostOp::Kind::Relu && relu_as_clip)
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, std::numeric_limits<float>::infinity());
      else
        po.append_eltwise(1.0f, eltwise_algorithm(op.kind), own ? op.alpha : 0.0f, own ? op.beta : 0.0f);
    }
  }
  return po;
}

std::optional<Choice> choose(const ConvSpec& s, const memory::desc& src_user, const memory::desc& dst_user,
                             const memory::desc& wei_user, const memory::desc& bias_md, std::string* errors) {
  const DnnlConvDims dims = dnnl_conv_dims(s);
  // Channels-last with blocked weights runs the library's direct kernels; plain NCHW runs its
  // im2col + GEMM. When only the output is blocked (an NCHW input, as in training), the input is
  // reordered into the output's blocks: the blocked direct kernel beats the NHWC one (130 against
  // 195 ms for the CNN's second conv at batch 32, 62x62) and the output needs no reorder.
  struct Config {
    memory::desc src, dst;
    bool any_weights;
  };
  const Dt dt = data_type(s);
  const auto plain = [&](Tag tag, bool any_weights) {
    return Config{memory::desc(dims.src, dt, tag), memory::desc(dims.dst, dt, tag), any_weights};
  };
  // bfloat16: channels-last first, the layout oneDNN's AMX kernels take (its blocked bf16 kernels
  // are the avx512_core_bf16 ones, 2-4x slower on ResNet-50's convs).
  std::vector<Config> configs;
  if (s.bf16) configs.push_back(plain(Tag::nhwc, true));
  configs.push_back({src_user, dst_user, true});
  const int64_t block = layout_channel_block(s.dst_layout);
  if (block > 0 && s.cin % block == 0) configs.push_back({user_desc(dims.src, s.dst_layout, dt), dst_user, true});
  configs.push_back(plain(Tag::nhwc, true));
  configs.push_back(plain(Tag::nchw, false));
  // With `winograd`, each config is tried with the Winograd algorithm first (oneDNN has it for
  // 3x3 stride-1 convs on AVX-512 and refuses the rest), then with the direct one.
  std::vector<std::pair<Config, dnnl::algorithm>> tries;
  for (const Config& cfg : configs) {
    if (s.winograd && !s.bf16) tries.emplace_back(cfg, dnnl::algorithm::convolution_winograd);
    tries.emplace_back(cfg, dnnl::algorithm::convolution_direct);
  }
  std::optional<Choice> best;
  for (const auto& [cfg, algorithm] : tries) {
    try {
      Choice c;
      const memory::desc wei_md = cfg.any_weights ? memory::desc(dims.wei, dt, Tag::any) : wei_user;
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, algorithm,
                                              cfg.src, wei_md, s.has_bias ? bias_md : memory::desc(), cfg.dst,
                                              dims.strides, dims.dilates, dims.pad_l, dims.pad_r);
      const memory::desc& dst = cfg.dst;  // (clang 14 cannot capture a structured binding)
      const bool winograd = algorithm == dnnl::algorithm::convolution_winograd;
      auto make = [&](bool relu_as_clip) {
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // thread-safe execution
        attr.set_post_ops(post_ops_for(s, dst, &c, relu_as_clip, winograd || s.residual_in_dst));
        c.pd = dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
        c.name = c.pd.impl_info_str();
      };
      make(false);
      if (kernel_class(c.name) != 0 && has_relu(s)) make(true);  // see post_ops_for
      c.algorithm = algorithm;
      if (!best || kernel_class(c.name) < kernel_class(best->name)) best = std::move(c);
      if (kernel_class(best->name) == 0) break;
    } catch (const dnnl::error& e) {
      *errors += std::string(errors->empty() ? "" : "; ") + e.what();
    }
  }
  return best;
}

memory::desc weights_user(const ConvSpec& s) {
  if (s.weights_kn) return memory::desc({s.cout, s.cin, 1, 1}, data_type(s), Tag::iohw);
  const int64_t g = s.groups;
  return g > 1 ? memory::desc({g, s.cout / g, s.cin / g, s.kh, s.kw}, data_type(s), Tag::goihw)
               : memory::desc({s.cout, s.cin, s.kh, s.kw}, data_type(s), Tag::oihw);
}

}  // namespace

bool dnnl_conv_is_fast(const ConvSpec& s) {
  if (s.n == 0 || s.cout == 0 || s.oh == 0 || s.ow == 0 || s.cin == 0) return false;
  static std::mutex mu;
  static std::vector<std::pair<ConvSpec, bool>> known;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [spec, fast] : known)
      if (spec == s) return fast;
  }
  std::string errors;
  std::optional<Choice> c = choose(s, user_desc({s.n, s.cin, s.h, s.w}, s.src_layout, data_type(s)),
                                   user_desc({s.n, s.cout, s.oh, s.ow}, s.dst_layout, data_type(s)), weights_user(s),
                                   memory::desc({s.cout}, data_type(s), Tag::x), &errors);
  const bool fast = c && !is_reference_impl(c->name);
  std::lock_guard<std::mutex> lock(mu);
  if (known.size() > 4096) known.clear();
  known.emplace_back(s, fast);
  return fast;
}

struct DnnlConv::Impl {
  ConvSpec spec;
  bool empty_output = false;  // nothing to compute
  bool no_input = false;      // cin == 0: y is the bias (or 0)
  std::string name;
  dnnl::convolution_forward prim;
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;
  memory::desc src_user, src_md, wei_user, wei_md, bias_md, dst_user, dst_md, scratch_md;
  std::vector<std::pair<int, memory::desc>> binary_operands;
  int sum_operand = -1;  // Choice::sum_operand
  // The exact path (conv_post_ops.h): whether the post-ops need finite inputs, and the same
  // convolution without them, made on the first call whose inputs hold a NaN or an inf.
  bool needs_finite_inputs = false;
  bool keeps_finite = false;  // post_ops_keep_finite
  // A Winograd kernel transforms tiles of x and w with sums and differences, so a NaN or an inf
  // spreads to its tile's other outputs, and inf - inf makes NaN where a direct conv gives inf
  // (x with an inf, positive weights: NaN where the reference's conv is +inf). Its exact path is
  // a direct convolution, whose weights are reordered from the caller's on those calls.
  bool winograd() const { return algorithm == dnnl::algorithm::convolution_winograd; }
  mutable std::once_flag exact_once;
  mutable std::optional<dnnl::convolution_forward> exact;
  mutable memory::desc exact_scratch_md, exact_wei_md;
  const dnnl::convolution_forward& exact_primitive() const;
};

const dnnl::convolution_forward& DnnlConv::Impl::exact_primitive() const {
  std::call_once(exact_once, [&] {
    const DnnlConvDims dims = dnnl_conv_dims(spec);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc wei = winograd() ? memory::desc(dims.wei, Dt::f32, Tag::any) : wei_md;
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            src_md, wei, spec.has_bias ? bias_md : memory::desc(), dst_md,
                                            dims.strides, dims.dilates, dims.pad_l, dims.pad_r);
    const dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
    exact_scratch_md = pd.scratchpad_desc();
    exact_wei_md = pd.weights_desc();
    exact.emplace(pd);
  });
  return *exact;
}

DnnlConv::DnnlConv(const ConvSpec& s) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.spec = s;
  m.empty_output = s.n == 0 || s.cout == 0 || s.oh == 0 || s.ow == 0;
  m.no_input = !m.empty_output && s.cin == 0;
  // The code generator folds post-ops only into convolutions with input channels.
  INGOT_CHECK(!m.no_input || s.post_ops.empty(), "CpuBackend: conv2d with 0 input channels cannot take post-ops");
  INGOT_CHECK(!s.bf16 || (s.post_ops.empty() && !s.residual_in_dst), "CpuBackend: a bfloat16 conv2d takes no post-ops");
  if (m.empty_output || m.no_input) {
    m.name = "none (empty)";
    return;
  }
  m.src_user = user_desc({s.n, s.cin, s.h, s.w}, s.src_layout, data_type(s));
  m.dst_user = user_desc({s.n, s.cout, s.oh, s.ow}, s.dst_layout, data_type(s));
  m.wei_user = weights_user(s);
  m.bias_md = memory::desc({s.cout}, data_type(s), Tag::x);
  std::string errors;
  std::optional<Choice> c = choose(s, m.src_user, m.dst_user, m.wei_user, m.bias_md, &errors);
  INGOT_CHECK(c.has_value(), "CpuBackend: oneDNN cannot run conv2d [", s.n, ", ", s.cin, ", ", s.h, ", ", s.w, "] -> [", s.n,
              ", ", s.cout, ", ", s.oh, ", ", s.ow, "]: ", errors);
  m.prim = dnnl::convolution_forward(c->pd);
  m.src_md = c->pd.src_desc();
  m.wei_md = c->pd.weights_desc();
  m.dst_md = c->pd.dst_desc();
  m.scratch_md = c->pd.scratchpad_desc();
  m.name = c->name;
  m.algorithm = c->algorithm;
  m.binary_operands = c->binary_operands;
  m.sum_operand = c->sum_operand;
  m.needs_finite_inputs = m.winograd() || post_ops_need_finite_inputs(s.post_ops);
  m.keeps_finite = post_ops_keep_finite(s.post_ops);
  INGOT_CHECK(layout_of(m.dst_md).has_value(), "CpuBackend: oneDNN chose an unknown output layout for conv2d");
}

DnnlConv::~DnnlConv() = default;

const std::string& DnnlConv::implementation() const { return impl_->name; }

std::string DnnlConv::layouts() const {
  const Impl& m = *impl_;
  if (m.empty_output || m.no_input) return "none";
  auto name = [](const memory::desc& md) -> std::string {
    const std::optional<Layout> l = layout_of(md);
    return l ? std::string(layout_name(*l)) : "other";
  };
  auto one = [&](const char* what, const memory::desc& runs, const memory::desc& user) {
    return std::string(what) + " " + name(runs) + (runs == user ? "" : " (reordered from " + name(user) + ")");
  };
  std::string residual;  // full post-op operands come in dst's user layout and are read in dst's
  for (const auto& [index, md] : m.binary_operands)
    if (!m.spec.post_ops[static_cast<size_t>(index)].per_channel) residual = ", " + one("residual", md, m.dst_user);
  return one("src", m.src_md, m.src_user) + ", " + one("dst", m.dst_md, m.dst_user) + residual;
}

struct WeightCache::Entries {
  struct Entry {
    memory::desc layout;
    int64_t value;
    std::unique_ptr<Scratch> reordered;
    // Whether the weights hold a NaN or an inf: scanned at most once, when a conv first needs to
    // know (weights kept at load are scanned there; per-call weights only for post-ops that need
    // finite inputs, as a scan of ResNet's largest weights costs as much as its conv).
    mutable std::optional<bool> non_finite;
  };
  std::vector<Entry> list;
  // The weights of graph value `value` reordered into `layout`, or null.
  const Entry* find(int64_t value, const memory::desc& layout) const {
    for (const Entry& e : list)
      if (e.value == value && e.layout == layout) return &e;
    return nullptr;
  }
  // Reorders `w` (stored as `user`) into `layout` on `st` and keeps it.
  const Entry* add(const memory::desc& user, const memory::desc& layout, const void* w, int64_t value,
                   dnnl::stream& st) {
    auto scratch = std::make_unique<Scratch>(layout.get_size());
    memory u(user, cpu_engine(), const_cast<void*>(w)), t(layout, cpu_engine(), scratch->p);
    dnnl::reorder(u, t).execute(st, u, t);
    list.push_back({layout, value, std::move(scratch), std::nullopt});
    return &list.back();
  }
};
WeightCache::WeightCache() : entries_(std::make_unique<Entries>()) {}
WeightCache::~WeightCache() = default;

namespace {
int64_t weight_count(const ConvSpec& s) { return s.cout * (s.cin / s.groups) * s.kh * s.kw; }
}  // namespace

void DnnlConv::keep_weights(const void* w, WeightCache* kept, int64_t weights_value) const {
  const Impl& m = *impl_;
  if (m.empty_output || m.no_input || m.wei_user == m.wei_md || kept->entries_->find(weights_value, m.wei_md)) return;
  try {
    dnnl::stream st(cpu_engine());
    const WeightCache::Entries::Entry* e = kept->entries_->add(m.wei_user, m.wei_md, w, weights_value, st);
    e->non_finite = holds_non_finite(w, weight_count(m.spec), data_type(m.spec));  // once, at load
    st.wait();
  } catch (const dnnl::error& e) {
    INGOT_FAIL("CpuBackend: oneDNN weight reorder failed: ", e.what());
  }
}

bool DnnlConv::run(const void* x, const void* w, const void* b, const void* const* operands, void* y,
                   WeightCache* weights, int64_t weights_value, const WeightCache* kept, const bool* known_finite) const {
  const Impl& m = *impl_;
  const ConvSpec& s = m.spec;
  if (m.empty_output) return true;
  if (m.no_input) {  // an empty sum: the bias everywhere (bfloat16: its bits, 0 being +0's)
    const int64_t pixels = s.oh * s.ow;
    for (int64_t img = 0; img < s.n; ++img)
      for (int64_t c = 0; c < s.cout; ++c)
        for (int64_t p = 0; p < pixels; ++p) {
          const int64_t at = activation_offset(s.dst_layout, s.cout, pixels, img, c, p);
          if (s.bf16)
            static_cast<uint16_t*>(y)[at] = b != nullptr ? static_cast<const uint16_t*>(b)[c] : uint16_t{0};
          else
            static_cast<float*>(y)[at] = b != nullptr ? static_cast<const float*>(b)[c] : 0.0f;
        }
    return false;
  }
  // known_finite's slots: x, w, b when present, then the operands.
  auto known = [&](size_t slot) { return known_finite != nullptr && known_finite[slot]; };
  const size_t first_operand = s.has_bias ? 3 : 2;
  bool finite_result = false;
  try {
    const dnnl::engine& eng = cpu_engine();
    dnnl::stream st(eng);
    // Layout conversions into per-call temporaries where the caller's layout is not the
    // primitive's (reorder primitives come from oneDNN's primitive cache after the first call).
    auto input = [&](const memory::desc& user, const memory::desc& want, const void* p, std::optional<Scratch>& tmp) {
      memory u(user, eng, const_cast<void*>(p));
      if (user == want) return u;
      tmp.emplace(want.get_size());
      memory t(want, eng, tmp->p);
      dnnl::reorder(u, t).execute(st, u, t);
      return t;
    };
    std::optional<Scratch> src_tmp, wei_tmp;
    memory src_m = input(m.src_user, m.src_md, x, src_tmp);
    // The weights reordered once per call (or at load), and what is known of their values.
    const WeightCache::Entries::Entry* weights_entry = nullptr;
    auto cached_weights = [&]() -> memory {
      const WeightCache::Entries::Entry* e = kept != nullptr ? kept->entries_->find(weights_value, m.wei_md) : nullptr;
      if (e == nullptr) e = weights->entries_->find(weights_value, m.wei_md);
      if (e == nullptr) e = weights->entries_->add(m.wei_user, m.wei_md, w, weights_value, st);
      weights_entry = e;
      return memory(m.wei_md, eng, e->reordered->p);
    };
    memory wei_m = weights != nullptr && weights_value >= 0 && !(m.wei_user == m.wei_md)
                       ? cached_weights()
                       : input(m.wei_user, m.wei_md, w, wei_tmp);
    memory dst_u(m.dst_user, eng, y);
    Scratch dst_tmp(m.dst_user == m.dst_md ? 0 : m.dst_md.get_size());
    memory dst_m = m.dst_user == m.dst_md ? dst_u : memory(m.dst_md, eng, dst_tmp.p);
    Scratch pad(m.scratch_md.get_size());
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m}, {DNNL_ARG_DST, dst_m},
                                            {DNNL_ARG_SCRATCHPAD, memory(m.scratch_md, eng, pad.p)}};
    if (s.has_bias) args.emplace(DNNL_ARG_BIAS, memory(m.bias_md, eng, const_cast<void*>(b)));
    // Full operands come in the caller's y layout (dst_user) and are read in the primitive's.
    // The sum operand (Impl::sum_operand) is no argument: dst holds it when the primitive starts.
    std::vector<std::optional<Scratch>> operand_tmp(m.binary_operands.size());
    std::vector<memory> operand_m;  // each operand as the primitive reads it
    for (size_t i = 0; i < m.binary_operands.size(); ++i) {
      const auto& [index, md] = m.binary_operands[i];
      const bool full = !s.post_ops[static_cast<size_t>(index)].per_channel;
      operand_m.push_back(full ? input(m.dst_user, md, operands[i], operand_tmp[i])
                               : memory(md, eng, const_cast<void*>(operands[i])));
      if (static_cast<int>(i) != m.sum_operand)
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, operand_m.back());
    }
    // oneDNN's post-ops may turn a NaN into a number (conv_post_ops.h): with a non-finite input,
    // the convolution runs alone and the post-ops run here. Each input is known finite, or
    // scanned when the post-ops need to know, or left unknown (then so is the result).
    enum class Finite { Yes, No, Unknown };
    auto finite = [&](bool is_known, const std::optional<bool>& non_finite_seen, const void* p, int64_t n) {
      if (is_known) return Finite::Yes;
      if (non_finite_seen) return *non_finite_seen ? Finite::No : Finite::Yes;
      if (!m.needs_finite_inputs) return Finite::Unknown;
      return holds_non_finite(p, n, data_type(s)) ? Finite::No : Finite::Yes;
    };
    Finite all = finite(known(0), std::nullopt, x, s.n * s.cin * s.h * s.w);
    auto meet = [&](auto next) {
      if (all != Finite::No) {
        const Finite f = next();
        all = f == Finite::No ? Finite::No : (f == Finite::Unknown ? Finite::Unknown : all);
      }
    };
    meet([&] {
      const Finite f =
          finite(known(1), weights_entry != nullptr ? weights_entry->non_finite : std::nullopt, w, weight_count(s));
      if (weights_entry != nullptr && f != Finite::Unknown) weights_entry->non_finite = f == Finite::No;
      return f;
    });
    if (s.has_bias) meet([&] { return finite(known(2), std::nullopt, b, s.cout); });
    for (size_t i = 0; i < m.binary_operands.size(); ++i)
      meet([&] {
        const bool per_channel = s.post_ops[static_cast<size_t>(m.binary_operands[i].first)].per_channel;
        return finite(known(first_operand + i), std::nullopt, operands[i],
                      per_channel ? s.cout : s.n * s.cout * s.oh * s.ow);
      });
    const bool exact = m.needs_finite_inputs && all == Finite::No;
    finite_result = all == Finite::Yes && m.keeps_finite;
    // The sum operand goes into dst before the primitive adds onto it, unless it is there already:
    // the caller passed y's own buffer as that operand (ConvSpec::residual_in_dst).
    const auto in_dst = [&](const memory& operand) { return operand.get_data_handle() == dst_m.get_data_handle(); };
    if (m.sum_operand >= 0 && !exact) {
      memory& residual = operand_m[static_cast<size_t>(m.sum_operand)];
      if (!in_dst(residual)) dnnl::reorder(residual, dst_m).execute(st, residual, dst_m);
    }
    // The exact path reads the operands after the convolution alone wrote y: one held in y's
    // buffer is copied out first.
    std::vector<std::optional<Scratch>> saved_operands(exact ? operand_m.size() : 0);
    for (size_t i = 0; i < saved_operands.size(); ++i)
      if (in_dst(operand_m[i])) {
        const memory::desc md = operand_m[i].get_desc();
        saved_operands[i].emplace(md.get_size());
        std::memcpy(saved_operands[i]->p, operand_m[i].get_data_handle(), md.get_size());
        operand_m[i] = memory(md, eng, saved_operands[i]->p);
      }
    if (!exact) {
      m.prim.execute(st, args);
    } else {
      const dnnl::convolution_forward& alone = m.exact_primitive();
      Scratch alone_pad(m.exact_scratch_md.get_size());
      std::optional<Scratch> direct_wei_tmp;
      const memory alone_wei = m.winograd() ? input(m.wei_user, m.exact_wei_md, w, direct_wei_tmp) : wei_m;
      std::unordered_map<int, memory> plain = {{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, alone_wei}, {DNNL_ARG_DST, dst_m},
                                               {DNNL_ARG_SCRATCHPAD, memory(m.exact_scratch_md, eng, alone_pad.p)}};
      if (s.has_bias) plain.emplace(DNNL_ARG_BIAS, args.at(DNNL_ARG_BIAS));
      alone.execute(st, plain);
      st.wait();
      std::vector<const float*> in_dst_layout;  // the operands as the primitive reads them
      for (const memory& operand : operand_m) in_dst_layout.push_back(static_cast<const float*>(operand.get_data_handle()));
      apply_post_ops_exactly(s.post_ops, *layout_of(m.dst_md), s.n, s.cout, s.oh * s.ow, in_dst_layout.data(),
                             static_cast<float*>(dst_m.get_data_handle()));
    }
    if (!(m.dst_user == m.dst_md)) dnnl::reorder(dst_m, dst_u).execute(st, dst_m, dst_u);
    st.wait();
    return finite_result;
  } catch (const dnnl::error& e) {
    INGOT_FAIL("CpuBackend: oneDNN conv2d failed: ", e.what());
  }
}

#else  // no oneDNN: the generated code keeps its own convolution

bool dnnl_available() { return false; }
bool dnnl_native_bf16_conv() { return false; }
std::string dnnl_cpu_isa() { return ""; }

struct DnnlConv::Impl {
  std::string name = "unavailable";
};
struct WeightCache::Entries {};
WeightCache::WeightCache() = default;
WeightCache::~WeightCache() = default;
DnnlConv::DnnlConv(const ConvSpec&) { INGOT_FAIL("CpuBackend: ingot was built without oneDNN"); }
DnnlConv::~DnnlConv() = default;
const std::string& DnnlConv::implementation() const { return impl_->name; }
std::string DnnlConv::layouts() const { return "none"; }
bool dnnl_conv_is_fast(const ConvSpec&) { return false; }
bool DnnlConv::run(const void*, const void*, const void*, const void* const*, void*, WeightCache*, int64_t,
                   const WeightCache*, const bool*) const {
  INGOT_FAIL("CpuBackend: ingot was built without oneDNN");
}
void DnnlConv::keep_weights(const void*, WeightCache*, int64_t) const {}

#endif

}  // namespace ingot::cpu
