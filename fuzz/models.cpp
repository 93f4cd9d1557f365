#include "models.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>

#include "ops/kernel_util.h"

namespace ingot::fuzz {
namespace {

struct Drawer {
  std::mt19937_64 rng;
  int64_t pick(std::initializer_list<int64_t> xs) { return *(xs.begin() + rng() % xs.size()); }
  bool one_in(uint64_t n) { return rng() % n == 0; }
};

// Output size of a window op along one axis (the shape rule's, ops/kernel_util.h), or 0 when
// it does not fit. ceil: max_pool2d's ceil_mode.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil = false) {
  return ops::conv_out_size(in, k, s, p, 1, ceil);
}

// Whether an [n, *, oh, ow] activation leaves a training batch norm more than a few values per
// channel: over one value its variance is 0 and its gradient 0/0 (PyTorch refuses such a batch
// norm in training; ingot's reference returns NaN), and over two, ties decide relu's gradients.
bool fits(int64_t n, int64_t oh, int64_t ow) { return oh > 0 && ow > 0 && n * oh * ow >= 4; }

// DenseNet's layer: batch norm, relu and a 3x3 conv of `growth` channels, its output joined to
// the layer's input along the channels (so concats of conv outputs, of pools and of earlier
// concats run in whatever layout the plan gives them).
Model dense_layer(int64_t growth) {
  Model m;
  Connection x = m.input("input");
  Connection y = m.add(BatchNorm2d(), {{"input", x}}).at("output");
  y = m.add(Relu(), {{"input", y}}).at("output");
  y = m.add(Conv2d(growth, 3, 1, 1), {{"input", y}}).at("output");
  m.set_cout(m.add(Model::primitive("concat", {"a", "b"}, {"output"}, {{"axis", int64_t{1}}}), {{"a", x}, {"b", y}})
                 .at("output"));
  return m;
}

// MobileNetV3's hardswish as ONNX import writes it, x * clip(x * (1/6) + 0.5, 0, 1): the CPU
// backend folds it into the conv before it as one post-op.
Model hard_swish() {
  Model m;
  const Connection x = m.input("input");
  auto with = [&](const char* op, const Connection& a, double c) {
    return m.add(Model::primitive(op, {"a", "b"}, {"output"}), {{"a", a}, {"b", IOKey(c)}}).at("output");
  };
  m.set_cout(x * with("maximum", with("minimum", x * (1.0 / 6) + 0.5, 1.0), 0.0));
  return m;
}

// SiLU as ONNX import writes it (EfficientNet's), x * sigmoid(x): also one conv post-op.
Model swish() {
  Model m;
  const Connection x = m.input("input");
  m.set_cout(x * m.add(Sigmoid(), {{"input", x}}).at("output"));
  return m;
}

void conv_stack(Drawer& d, ModelCase& c, Model& m, std::ostringstream& desc) {
  const int64_t n = d.pick({1, 2, 3}), c0 = d.pick({3, 4, 8, 16}), h0 = 6 + static_cast<int64_t>(d.rng() % 15),
                w0 = 6 + static_cast<int64_t>(d.rng() % 15);
  c.input_shape = {n, c0, h0, w0};
  int64_t ch = c0, h = h0, w = w0;
  const int blocks = 2 + static_cast<int>(d.rng() % 5);
  for (int b = 0; b < blocks; ++b) {
    switch (d.rng() % 12) {
      case 0:
      case 1: {  // Conv2d: kernel, stride, padding, bias, groups (depthwise included)
        Conv2dOptions o;
        o.out_channels = d.pick({4, 8, 16, 24, 32});
        o.kernel_size = d.pick({1, 3, 5});
        o.stride = d.pick({1, 2});
        o.padding = d.one_in(2) ? o.kernel_size / 2 : 0;
        o.use_bias = d.one_in(2);
        if (d.one_in(4)) {
          o.groups = d.one_in(2) ? ch : 2;  // depthwise or two groups
          if (ch % o.groups != 0) o.groups = 1;
          if (o.groups == ch) o.out_channels = ch;
          if (o.out_channels % o.groups != 0) o.groups = 1;
        }
        const int64_t oh = window_out(h, o.kernel_size, o.stride, o.padding), ow = window_out(w, o.kernel_size, o.stride, o.padding);
        if (!fits(n, oh, ow)) continue;
        m += Conv2d(o);
        desc << "Conv2d(" << o.out_channels << ", k" << o.kernel_size << ", s" << o.stride << ", p" << o.padding
             << (o.groups > 1 ? ", g" + std::to_string(o.groups) : "") << (o.use_bias ? "" : ", no bias") << ") ";
        ch = o.out_channels, h = oh, w = ow;
        break;
      }
      case 2: m += BatchNorm2d(); desc << "BatchNorm2d "; break;
      case 3: m += Relu(); desc << "Relu "; break;
      case 4: m += Relu6(); desc << "Relu6 "; break;
      case 5: {
        const int64_t which = d.pick({0, 1, 2, 3});
        m += which == 0 ? Sigmoid() : which == 1 ? Tanh() : which == 2 ? hard_swish() : swish();
        desc << (which == 0 ? "Sigmoid " : which == 1 ? "Tanh " : which == 2 ? "HardSwish " : "SiLU ");
        break;
      }
      case 6: {  // a pool: kernel 2 or 3, stride 1 or 2, padding up to half the kernel; max in ceil_mode
        const int64_t k = d.pick({2, 3}), s = d.pick({1, 2}), p = d.one_in(3) ? k / 2 : 0;
        const bool max = d.one_in(2), ceil = max && d.one_in(2);
        const int64_t oh = window_out(h, k, s, p, ceil), ow = window_out(w, k, s, p, ceil);
        if (!fits(n, oh, ow)) continue;
        m += max ? MaxPool2d(k, s, p, ceil) : AvgPool2d(k, s, p);
        desc << (max ? "MaxPool2d(" : "AvgPool2d(") << k << ", s" << s << ", p" << p << (ceil ? ", ceil" : "") << ") ";
        h = oh, w = ow;
        break;
      }
      case 7:
      case 8: {  // ResNet's basic block, downsampled when the shape changes
        const int64_t planes = d.pick({4, 8, 16}), s = d.pick({1, 1, 2});
        if (!fits(n, window_out(h, 3, s, 1), window_out(w, 3, s, 1))) continue;
        const bool down = s != 1 || planes != ch;
        m += BasicBlock(planes, s, down);
        desc << "BasicBlock(" << planes << ", s" << s << (down ? ", downsample" : "") << ") ";
        ch = planes, h = window_out(h, 3, s, 1), w = window_out(w, 3, s, 1);
        break;
      }
      case 9: {  // bottleneck, sometimes grouped (ResNeXt)
        const int64_t planes = d.pick({2, 4, 8}), s = d.pick({1, 2}), groups = d.pick({1, 2});
        if (!fits(n, window_out(h, 3, s, 1), window_out(w, 3, s, 1))) continue;
        const bool down = s != 1 || 4 * planes != ch;
        m += Bottleneck(planes, s, down, groups);
        desc << "Bottleneck(" << planes << ", s" << s << ", g" << groups << (down ? ", downsample" : "") << ") ";
        ch = 4 * planes, h = window_out(h, 3, s, 1), w = window_out(w, 3, s, 1);
        break;
      }
      case 11: {
        const int64_t growth = d.pick({4, 8, 16});
        m += dense_layer(growth);
        desc << "DenseLayer(+" << growth << ") ";
        ch += growth;
        break;
      }
      default: {  // MobileNetV2's inverted residual (a residual when stride 1 and same channels)
        const int64_t out = d.one_in(2) ? ch : d.pick({8, 16}), s = d.pick({1, 2}), expand = d.pick({1, 2, 6});
        if (!fits(n, window_out(h, 3, s, 1), window_out(w, 3, s, 1))) continue;
        m += InvertedResidual(ch, out, s, expand);
        desc << "InvertedResidual(" << ch << "->" << out << ", s" << s << ", x" << expand << ") ";
        ch = out, h = window_out(h, 3, s, 1), w = window_out(w, 3, s, 1);
        break;
      }
    }
  }
  if (d.one_in(2)) {
    m += GlobalAvgPool2d();
    desc << "GlobalAvgPool2d ";
  } else {
    m += Flatten();
    desc << "Flatten ";
  }
  const int64_t classes = d.pick({3, 10});
  m += Linear(classes);
  desc << "Linear(" << classes << ")";
}

void dense_stack(Drawer& d, ModelCase& c, Model& m, std::ostringstream& desc) {
  c.input_shape = {d.pick({1, 2, 5}), d.pick({3, 8, 17, 33})};
  const int blocks = 2 + static_cast<int>(d.rng() % 6);
  for (int b = 0; b < blocks; ++b) {
    switch (d.rng() % 9) {
      case 0:
      case 1: {
        const int64_t k = d.pick({4, 16, 17, 64});
        m += Linear(k, !d.one_in(4));
        desc << "Linear(" << k << ") ";
        break;
      }
      case 2: {
        const std::string act = d.one_in(2) ? "relu" : (d.one_in(2) ? "gelu" : "tanh");
        const int64_t a = d.pick({8, 33}), b2 = d.pick({5, 16});
        m += MLP({a, b2}, act);
        desc << "MLP(" << a << ", " << b2 << ", " << act << ") ";
        break;
      }
      case 3: m += LayerNorm(); desc << "LayerNorm "; break;
      case 4: m += Relu(); desc << "Relu "; break;
      case 5: {
        const bool tanh = d.one_in(2);
        m += Gelu(tanh);
        desc << (tanh ? "Gelu(tanh) " : "Gelu ");
        break;
      }
      case 6: {
        const bool log = d.one_in(2);
        m += log ? LogSoftmax() : Softmax();
        desc << (log ? "LogSoftmax " : "Softmax ");
        break;
      }
      case 7: m += Sigmoid(); desc << "Sigmoid "; break;
      default: m += Identity(); desc << "Identity "; break;
    }
  }
  const int64_t k = d.pick({3, 10});
  m += Linear(k);
  desc << "Linear(" << k << ")";
}

// Transformer encoder layers on [B, S, D]: post-norm (whose norms take the residual and bias
// adds as prologues) and pre-norm, LayerNorm or RMSNorm, causal or not, grouped-query heads,
// each activation; then a Linear head over the last axis.
void transformer_stack(Drawer& d, ModelCase& c, Model& m, std::ostringstream& desc) {
  const int64_t dm = d.pick({8, 12, 16});
  c.input_shape = {d.pick({1, 2, 3}), d.pick({1, 5, 9}), dm};
  const int blocks = 1 + static_cast<int>(d.rng() % 3);
  for (int b = 0; b < blocks; ++b) {
    TransformerEncoderLayerOptions o;
    o.d_model = dm;
    o.num_heads = dm % 4 == 0 ? d.pick({1, 2, 4}) : d.pick({1, 2});
    if (o.num_heads > 1 && d.one_in(3)) o.num_kv_heads = o.num_heads / 2;
    o.ffn_dim = d.pick({8, 17, 32});
    o.causal = d.one_in(2);
    o.norm_first = d.one_in(2);
    o.rms_norm = d.one_in(3);
    o.activation = d.one_in(3) ? "relu" : (d.one_in(2) ? "gelu" : "gelu_tanh");
    m += TransformerEncoderLayer(o);
    desc << "TransformerEncoderLayer(d " << dm << ", heads " << o.num_heads << "/"
         << o.num_kv_heads.value_or(o.num_heads) << ", ffn " << o.ffn_dim << (o.causal ? ", causal" : "")
         << (o.norm_first ? ", pre-norm" : ", post-norm") << (o.rms_norm ? ", rms" : "") << ", " << o.activation
         << ") ";
  }
  const int64_t k = d.pick({3, 10});
  m += Linear(k);
  desc << "Linear(" << k << ")";
}

Tensor uniform(const Shape& s, std::mt19937_64& rng, double lo, double hi) {
  Tensor t(DType::Float64, s);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(rng);
  return t.astype(DType::Float32);
}

Shape concrete(const ShapeTemplate& t) {
  Shape s;
  for (const Dim& d : t) s.push_back(d.value());
  return s;
}

}  // namespace

ModelCase random_model(uint64_t seed) {
  Drawer d{std::mt19937_64(seed * 0xA24BAED4963EE407ull + 3)};
  ModelCase c;
  c.seed = seed;
  std::ostringstream desc;
  const uint64_t family = d.rng() % 6;  // a third dense stacks, a sixth transformers, the rest CNNs
  if (family < 2) dense_stack(d, c, c.model, desc);
  else if (family == 2) transformer_stack(d, c, c.model, desc);
  else conv_stack(d, c, c.model, desc);
  c.description = desc.str();
  c.input = uniform(concrete(c.input_shape), d.rng, -1.0, 1.0);
  return c;
}

std::optional<Finding> check_model(const ModelCase& c, const Variation& v, const CpuBackend::CpuOptions& cpu_options) {
  std::ostringstream what;
  what << "model " << c.description << " on input " << to_string(c.input.shape());
  CompileOptions ro;  // the reference: what the user wrote, with the variation's precision
  ro.shapes = {{"input", c.input_shape}};
  ro.inference = !v.gradients;
  ro.mixed_precision = v.options.mixed_precision;
  CompileOptions o = v.options;
  o.shapes = ro.shapes;
  o.inference = ro.inference;
  CpuBackend::CpuOptions cpu = cpu_options;
  if (v.threads > 0) cpu.num_threads = v.threads;
  const PhysicalModel ref = compile(c.model, ReferenceBackend(), ro);
  const TensorMap params = ref.randomize_params(c.seed);
  // Inference on odd seeds compiles the weights in as constants (constant_keys), as deployed
  // models and imported ONNX initializers are: batch norm folds into them and 3x3 convs run
  // Winograd kernels where oneDNN has them (CpuOptions::winograd), which passed weights never do.
  const bool constant_weights = !v.gradients && c.seed % 2 == 1;
  if (constant_weights) {
    o.constant_keys = params;
    what << ", weights as constants";
  }
  const PhysicalModel got = compile(c.model, CpuBackend(cpu), o);
  const TensorMap got_params = constant_weights ? TensorMap{} : params;
  Tensor x = c.input;
  if (v.special_values) {
    x = x.astype(DType::Float32);
    x.data<float>()[0] = NAN;
    x.data<float>()[x.numel() / 2] = INFINITY;
  }
  const TensorMap inputs = {{"input", x}};
  // Under mixed precision both sides round each dense op's result to the low type, and float32
  // sums in another order (or bfloat16 attention's probabilities, rounded once more for P V) can
  // put one such rounding an ulp apart, which the layers after carry to the output: seed 503242,
  // a bfloat16 transformer stack, 3.6e-3 off, under one ulp of bfloat16 (2^-8). The bound is
  // two ulps of bfloat16, as the program fuzzer's floor (checks.cpp); float16's two ulps (2^-10)
  // are within the 1e-3 every other variation is held to.
  const double bound = v.options.mixed_precision == "bfloat16" ? 0x1p-7 : 1e-3;
  // Past the bound under mixed precision, both sides are measured against the model in float32:
  // the CPU's bfloat16 attention rounds its probabilities (and, backward, dS) once more than the
  // reference, and a gradient carried back through several such layers can land past two units
  // of bfloat16 from the reference's (seed 54443: 8.2e-3 on the first FFN weight of a 3-layer
  // stack, on a host with AVX512_BF16). It is a finding when the CPU is further from float32
  // than twice the reference's distance plus the bound (a wrong kernel is off by far more).
  std::optional<Evaluation> in_float32;
  auto float32_run = [&](const TensorMap& cotangents) -> const Evaluation& {
    if (!in_float32) {
      CompileOptions o32 = ro;
      o32.mixed_precision = "none";
      const PhysicalModel m = compile(c.model, ReferenceBackend(), o32);
      in_float32 = v.gradients ? m.evaluate(params, inputs, cotangents) : Evaluation{m.evaluate(params, inputs), {}};
    }
    return *in_float32;
  };
  auto differs = [&](const std::string& name, const Tensor& a, const Tensor& b,
                     const std::function<const Tensor&()>& exact) -> std::optional<Finding> {
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return Finding{c.seed, v.name, name, what.str(), 1e30, 0};
    const double e = relative_error(a, b);
    if (e <= bound) return std::nullopt;
    if (v.options.mixed_precision == "none") return Finding{c.seed, v.name, name, what.str(), e, 0};
    const Tensor& f32 = exact();
    const double mine = relative_error(a, f32), theirs = relative_error(b, f32);
    if (mine <= 2 * theirs + bound) return std::nullopt;
    return Finding{c.seed, v.name, name, what.str(), mine, theirs};
  };
  if (!v.gradients) {
    const TensorMap want = ref.evaluate(params, inputs), have = got.evaluate(got_params, inputs);
    for (const auto& [name, t] : want)
      if (auto f = differs(name, have.at(name), t, [&, key = name]() -> const Tensor& { return float32_run({}).outputs.at(key); }))
        return f;
    return std::nullopt;
  }
  std::mt19937_64 rng(c.seed + 17);
  TensorMap cotangents;
  for (const auto& [name, t] : ref.evaluate(params, inputs)) cotangents[name] = uniform(t.shape(), rng, -1.0, 1.0);
  const Evaluation want = ref.evaluate(params, inputs, cotangents), have = got.evaluate(params, inputs, cotangents);
  for (const auto& [name, t] : want.outputs)
    if (auto f = differs(name, have.outputs.at(name), t,
                         [&, key = name]() -> const Tensor& { return float32_run(cotangents).outputs.at(key); }))
      return f;
  for (const auto& [name, t] : want.gradients)
    if (auto f = differs("gradient of " + name, have.gradients.at(name), t,
                         [&, key = name]() -> const Tensor& { return float32_run(cotangents).gradients.at(key); }))
      return f;
  return std::nullopt;
}

}  // namespace ingot::fuzz
