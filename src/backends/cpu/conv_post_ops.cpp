#include "backends/cpu/conv_post_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "runtime/parallel.h"

namespace ingot::cpu {

bool post_ops_need_finite_inputs(const std::vector<ConvPostOp>& ops) {
  using K = ConvPostOp::Kind;
  for (const ConvPostOp& op : ops)
    switch (op.kind) {
      case K::Linear:
      case K::Add:
      case K::Sub:
      case K::Mul:
      case K::Div:
      case K::Abs:
      case K::Sqrt: break;  // IEEE arithmetic: a NaN stays a NaN, an inf stays what the reference makes of it
      default: return true;
    }
  return false;
}

int sum_operand_index(const std::vector<ConvPostOp>& ops) {
  int operand = 0;
  for (const ConvPostOp& op : ops) {
    if (!op.binary()) continue;
    if (op.kind == ConvPostOp::Kind::Add && !op.per_channel) return operand;
    ++operand;
  }
  return -1;
}

bool post_ops_keep_finite(const std::vector<ConvPostOp>& ops) {
  using K = ConvPostOp::Kind;
  constexpr float inf = std::numeric_limits<float>::infinity();
  for (const ConvPostOp& op : ops) {
    if (op.kind == K::Exp || op.kind == K::Log || op.kind == K::Sqrt || op.kind == K::Div) return false;
    // Coefficients are constants of the graph: alpha * y + inf is not finite, nor is
    // min(hi, max(lo, y)) with lo = +inf or hi = -inf.
    if (op.kind == K::Linear && !(std::isfinite(op.alpha) && std::isfinite(op.beta))) return false;
    if (op.kind == K::Clip && (op.alpha == inf || op.beta == -inf || op.alpha != op.alpha || op.beta != op.beta))
      return false;
  }
  return true;
}

namespace {
std::atomic<int64_t> scans{0};

// Whether p[begin, end) holds an inf or a NaN: an all-ones exponent, so the magnitude's bits
// compare above the largest finite float's. A signed 32-bit compare and an OR vectorize with
// SSE2 alone (an unsigned max or a float compare chain would not).
bool non_finite_in(const float* p, int64_t begin, int64_t end) {
  int32_t bad = 0;
  for (int64_t i = begin; i < end; ++i) {
    int32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    bad |= static_cast<int32_t>((bits & 0x7fffffff) > 0x7f7fffff);
  }
  return bad != 0;
}
}  // namespace

int64_t non_finite_scans() { return scans.load(std::memory_order_relaxed); }

bool has_non_finite(const float* p, int64_t n) {
  scans.fetch_add(1, std::memory_order_relaxed);
  // Blocks across the pool's threads (inline when called from inside a parallel region): the
  // scan is a read at memory speed beside a convolution that runs on every thread.
  constexpr int64_t kBlock = 1 << 14;
  std::atomic<bool> found{false};
  parallel_for((n + kBlock - 1) / kBlock, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1 && !found.load(std::memory_order_relaxed); ++b)
      if (non_finite_in(p, b * kBlock, std::min(n, (b + 1) * kBlock))) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

namespace {

// The reference's sigmoid: 1 / (1 + e^-y) for y >= 0, e^y / (1 + e^y) below (NaN passed on).
float sigmoid(float y) {
  if (y >= 0.0f) return 1.0f / (1.0f + std::exp(-y));
  const float e = std::exp(y);
  return e / (1.0f + e);
}

// The reference's NaN rules (src/ops/elementwise.cpp): relu, maximum and minimum pass a NaN on.
float unary(const ConvPostOp& op, float y) {
  using K = ConvPostOp::Kind;
  switch (op.kind) {
    case K::Relu: return y < 0.0f ? 0.0f : y;
    case K::Tanh: return std::tanh(y);
    case K::Sigmoid: return sigmoid(y);
    case K::Exp: return std::exp(y);
    case K::Log: return std::log(y);
    case K::Sqrt: return std::sqrt(y);
    case K::Abs: return std::abs(y);
    case K::GeluErf: return 0.5f * y * (1.0f + std::erf(y / std::numbers::sqrt2_v<float>));
    case K::GeluTanh: {
      const float k = std::numbers::sqrt2_v<float> * std::numbers::inv_sqrtpi_v<float>;
      return 0.5f * y * (1.0f + std::tanh(k * (y + 0.044715f * y * y * y)));
    }
    case K::HardSwish: {  // as ONNX import writes it: y * max(min(y * (1/6) + 0.5, 1), 0), NaN passed on
      const float t = y * static_cast<float>(1.0 / 6) + 0.5f;
      return y * (t != t ? t : std::max(std::min(t, 1.0f), 0.0f));
    }
    case K::Swish: return y * sigmoid(y);  // as ONNX import writes SiLU: Mul(y, Sigmoid(y))
    case K::Linear: return op.alpha * y + op.beta;
    case K::Clip: return std::isnan(y) ? y : std::min(op.beta, std::max(op.alpha, y));
    default: break;
  }
  return y;
}

float binary(ConvPostOp::Kind kind, float a, float b) {
  using K = ConvPostOp::Kind;
  switch (kind) {
    case K::Add: return a + b;
    case K::Sub: return a - b;
    case K::Mul: return a * b;
    case K::Div: return a / b;
    case K::Max: return std::isnan(a) || std::isnan(b) ? a + b : (a < b ? b : a);
    case K::Min: return std::isnan(a) || std::isnan(b) ? a + b : (b < a ? b : a);
    default: break;
  }
  return a;
}

}  // namespace

void apply_post_ops_exactly(const std::vector<ConvPostOp>& ops, Layout layout, int64_t n, int64_t c, int64_t pixels,
                            const float* const* operands, float* y) {
  for (int64_t img = 0; img < n; ++img)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t at = activation_offset(layout, c, pixels, img, ch, p);
        float v = y[at];
        size_t operand = 0;
        for (const ConvPostOp& op : ops) {
          if (!op.binary()) {
            v = unary(op, v);
            continue;
          }
          const float* o = operands[operand++];
          v = binary(op.kind, v, op.per_channel ? o[ch] : o[at]);
        }
        y[at] = v;
      }
}

}  // namespace ingot::cpu
