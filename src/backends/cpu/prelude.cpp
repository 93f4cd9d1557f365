#include "backends/cpu/prelude.h"

#include "ir/op_registry.h"

namespace ingot::cpu {
namespace {

// Everything but the gemm backend. Raw strings keep it readable as the C++ it is.
const char* const kCore = R"IGPRELUDE(
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

extern "C" {
struct ingot_host;
struct ingot_subgraph {
  const int64_t* dims;
  const ingot_host* host;
  void* const* spare;
};

struct ingot_host {
  void* ctx;
  const void* const* constants;
  int (*run_node)(void* ctx, int32_t node, const void* const* inputs, void* const* outputs,
                  char* error, size_t error_size);
  char* arena;
  const int64_t* offsets;
  int (*conv2d)(void* ctx, int32_t conv, const void* x, const void* w, const void* b, void* y,
                char* error, size_t error_size);
  void (*profile)(void* ctx, int32_t kernel, int32_t phase);
  int (*conv2d_args)(void* ctx, int32_t conv, const void* const* args, void* y, char* error, size_t error_size);
  int (*conv2d_grad)(void* ctx, int32_t grad, const void* a, const void* b, void* out, char* error,
                     size_t error_size);
  int (*sgemm)(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
  const ingot_subgraph* subgraphs;
  int (*gemm_bf16)(char ta, char tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
                   const uint16_t* b, int64_t ldb, float* c, int64_t ldc);
  int (*gemm_batched)(char ta, char tb, int32_t bf16, int32_t batch_dims, const int64_t* batch, const int64_t* stride_a,
                      const int64_t* stride_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                      const void* b, int64_t ldb, float* c);
};
}

namespace {

// ---- storage types: IEEE binary16 and bfloat16, round to nearest even (as ingot::Half) ----
inline uint32_t ig_fbits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float ig_bitsf(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Conversions are branch-free (every case computed, then selected) so loops over float16 /
// bfloat16 data vectorize like float loops.
struct ig_half {
  uint16_t bits = 0;
  ig_half() = default;
  ig_half(float f) {
    const uint32_t x = ig_fbits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    const uint32_t nan_inf = 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
    const uint32_t sub = ig_fbits(ig_bitsf(a) + 0.5f) - 0x3f000000u;  // below 2^-14: exact rounding by the add
    const uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;  // rebias, round to nearest even
    uint32_t r = a < 0x38800000u ? sub : norm;
    r = a >= 0x47800000u ? 0x7c00u : r;  // overflow to inf
    r = a >= 0x7f800000u ? nan_inf : r;
    bits = uint16_t(sign | r);
  }
  operator float() const {
    const uint32_t sign = (uint32_t(bits) & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    const float sub = ig_bitsf(ig_fbits(float(m) * 5.9604644775390625e-8f) | sign);
    const uint32_t r = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));
    return e == 0 ? sub : ig_bitsf(r);
  }
  static ig_half from_bits(uint16_t b) { ig_half h; h.bits = b; return h; }
};

struct ig_bf16 {
  uint16_t bits = 0;
  ig_bf16() = default;
  ig_bf16(float f) {
    const uint32_t u = ig_fbits(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : rounded);  // NaN stays quiet
  }
  operator float() const { return ig_bitsf(uint32_t(bits) << 16); }
  static ig_bf16 from_bits(uint16_t b) { ig_bf16 h; h.bits = b; return h; }
};

// The raw bits of float16 / bfloat16 buffers, for kernels that move uint16_t (both structs are
// standard-layout with the bits as their only member).
inline const uint16_t* ig_raw(const ig_half* p) { return reinterpret_cast<const uint16_t*>(p); }
inline uint16_t* ig_raw(ig_half* p) { return reinterpret_cast<uint16_t*>(p); }
inline const uint16_t* ig_raw(const ig_bf16* p) { return reinterpret_cast<const uint16_t*>(p); }
inline uint16_t* ig_raw(ig_bf16* p) { return reinterpret_cast<uint16_t*>(p); }

template <class T> struct ig_compute { using type = T; };
template <> struct ig_compute<ig_half> { using type = float; };
template <> struct ig_compute<ig_bf16> { using type = float; };
template <class T> using ig_c = typename ig_compute<T>::type;
template <class T> constexpr bool ig_is_float = std::is_floating_point<T>::value || std::is_class<T>::value;

// `i`, as a value the compiler may not trace back to the expression that made it (see ig_cast).
template <class I> inline I ig_int_barrier(I i) {
#if defined(__has_builtin)
#if __has_builtin(__builtin_assoc_barrier)
  return __builtin_assoc_barrier(i);
#endif
#endif
  return i;
}

// ---- conversions: C's, with defined results (saturate, NaN -> 0, x != 0 for bool) ----
template <class To, class From>
inline To ig_cast(From x) {
  using F = ig_c<From>;
  const F v = static_cast<F>(x);
  if constexpr (std::is_same<To, bool>::value) {
    return v != F(0);
  } else if constexpr (std::is_integral<To>::value && std::is_floating_point<F>::value) {
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<F>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<F>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    // The barrier here too: an op reading the integer as a float (rsqrt of a cast to int64)
    // converts it without ig_cast, and GCC fused that pair into the sign-keeping truncation
    // (rsqrt(cast(-0.11, int64)) was -inf; the program fuzzer, seed 91044).
    return ig_int_barrier(static_cast<To>(v));
  } else if constexpr (ig_is_float<To> && std::is_integral<F>::value) {
    // An integer has no -0. Given float -> int -> float, GCC under -fno-trapping-math emits one
    // truncation (vroundps), which keeps the sign of an x in (-1, 0): 1 / cast(cast(-0.2, int64),
    // float32) came out -inf, not +inf (the program fuzzer, seed 60068). The barrier hides where
    // the integer came from; the conversion still vectorizes.
    return static_cast<To>(static_cast<ig_c<To>>(ig_int_barrier(v)));
  } else {
    return static_cast<To>(v);
  }
}

// ---- elementwise semantics (the reference kernels', op for op) ----
template <class C, class Op> inline C ig_wrap(C a, C b, Op op) {
  using U = typename std::make_unsigned<decltype(C{} + C{})>::type;
  return static_cast<C>(op(static_cast<U>(a), static_cast<U>(b)));
}
struct ig_plus { template <class U> U operator()(U a, U b) const { return a + b; } };
struct ig_minus { template <class U> U operator()(U a, U b) const { return a - b; } };
struct ig_times { template <class U> U operator()(U a, U b) const { return a * b; } };

// ---- vectorized float math ----
// Generated code compiles with -ffp-contract=off: each IR op rounds its result, as the reference
// does (contracting one op's product into the next op's add skipped the product's rounding:
// log(x) - exp(log(x)) at x = +inf gave +inf, not NaN, because exp's overflowing product never
// became inf; program fuzzer, seed 270069). Inside an op, multiply-adds that the polynomials
// below are measured with are written as IG_FMA: one fused instruction where the host has FMA.
#if defined(__FMA__)
#define IG_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define IG_FMA(a, b, c) ((a) * (b) + (c))
#endif
// float32 (and float16/bfloat16, which compute in float) exp, log, tanh, sigmoid, erf and gelu
// without libm: branch-free polynomials, bit casts, selects, so `#pragma omp simd` loops that use
// them vectorize. Special values follow libm: NaN -> NaN; exp overflows to +inf past ln(FLT_MAX)
// and underflows through the subnormals to +0; log(+-0) = -inf, log(x < 0) = NaN, log(+inf) =
// +inf; tanh/erf saturate to +-1 and keep the sign of -0; sigmoid(-inf) = 0, sigmoid(+inf) = 1.
// Bounds are against the exact result (double libm), measured on every 16th float bit pattern
// (all binades, 2^28 inputs) and on dense sweeps; "ulp" is of the exact result (subnormal ulp
// below FLT_MIN). float64 keeps the libm calls.
#define IG_VMATH inline __attribute__((always_inline))

// exp: Cody-Waite reduction x = n ln2 + r, degree-7 polynomial (Cephes expf), scale by 2^n as
// two exact power-of-two factors (one rounding, also for subnormal results). Max error 1.01 ulp.
// ig_vexp_reduced returns e^r and sets n; ig_vexp_normal is exp for arguments whose result is a
// normal float (one scale factor, no clamps: erf's tail uses it).
IG_VMATH float ig_vexp_reduced(float x, int32_t& ni) {
  const float t = IG_FMA(x, 1.44269504088896341f, 12582912.0f);  // round(x / ln2) + 1.5 * 2^23
  const float n = t - 12582912.0f;
  ni = static_cast<int32_t>(ig_fbits(t) - 0x4b400000u);
  float r = IG_FMA(-n, 0.693359375f, x);
  r = IG_FMA(n, 2.12194440e-4f, r);
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = IG_FMA(p, r, 1.3981999507e-3f);
  p = IG_FMA(p, r, 8.3334519073e-3f);
  p = IG_FMA(p, r, 4.1665795894e-2f);
  p = IG_FMA(p, r, 1.6666665459e-1f);
  p = IG_FMA(p, r, 5.0000001201e-1f);
  return IG_FMA(p, z, r) + 1.0f;
}
IG_VMATH float ig_vexp_normal(float x) {
  int32_t ni;
  const float p = ig_vexp_reduced(x, ni);
  return p * ig_bitsf(static_cast<uint32_t>(ni + 127) << 23);
}
// Out-of-range arguments are settled by selects on the result, not by clamping x first: the two
// clamps compiled (GCC 12, AVX-512) to a chain of five mask compares and blends ahead of the
// reduction, 40% of the function's time (12.7 -> 8.5 cycles a vector on the EPYC, the same bits
// for all 2^32 inputs). A NaN fails both compares and comes through the arithmetic.
// e^x for x in [-104, 89] (and NaN): the scaling by 2^n as two factors, so a subnormal result
// rounds once. Past 88.7 it overflows to +inf, below -103.3 it underflows to +0.
IG_VMATH float ig_vexp_in_range(float x) {
  int32_t ni;
  const float p = ig_vexp_reduced(x, ni);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = ig_bitsf(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = ig_bitsf(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}
IG_VMATH float ig_vexp(float x) {
  const float y = ig_vexp_in_range(x);
  // e^89 > FLT_MAX; e^-104 < 2^-150.
  return x > 89.0f ? std::numeric_limits<float>::infinity() : x < -104.0f ? 0.0f : y;
}

// exp for arguments at most 89 (a softmax's x - max, never positive; NaN passes): the same
// function as ig_vexp there, with only the underflow clamp, taken on the argument. Where the
// result feeds a double sum, GCC moved ig_vexp's selects past the conversion, onto both halves
// of the widened vector: softmax's exp-and-sum pass ran 20% slower than with this one.
IG_VMATH float ig_vexp_capped(float x) { return ig_vexp_in_range(x < -104.0f ? -104.0f : x); }

// log: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (subnormals prescaled by 2^23), log(1 + f) by a
// degree-9 polynomial (Cephes logf), e ln2 added in two parts. Max error 0.83 ulp.
IG_VMATH float ig_vlog(float x) {
  // Selects stay float and few: GCC does not if-convert an int select on a float compare here.
  const float scale = x < 1.17549435e-38f ? 8388608.0f : 1.0f;  // subnormals: prescale by 2^23
  const uint32_t u = ig_fbits(x * scale);
  const float e = static_cast<float>(static_cast<int32_t>((u >> 23) & 0xffu) -
                                     static_cast<int32_t>(ig_fbits(scale) >> 23) + 1);
  const float m = ig_bitsf((u & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool lo = m < 0.707106781186547524f;
  const float f = lo ? (m + m) - 1.0f : m - 1.0f;  // exact
  const float fe = lo ? e - 1.0f : e;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = IG_FMA(p, f, -1.1514610310e-1f);
  p = IG_FMA(p, f, 1.1676998740e-1f);
  p = IG_FMA(p, f, -1.2420140846e-1f);
  p = IG_FMA(p, f, 1.4249322787e-1f);
  p = IG_FMA(p, f, -1.6668057665e-1f);
  p = IG_FMA(p, f, 2.0000714765e-1f);
  p = IG_FMA(p, f, -2.4999993993e-1f);
  p = IG_FMA(p, f, 3.3333331174e-1f);
  float y = f * z * p;
  y = IG_FMA(fe, -2.12194440e-4f, y);
  y = IG_FMA(-0.5f, z, y);
  float res = f + y;
  res = IG_FMA(fe, 0.693359375f, res);
  res = x == std::numeric_limits<float>::infinity() ? x : res;
  res = x == 0.0f ? -std::numeric_limits<float>::infinity() : res;
  res = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : res;
  return x != x ? x : res;
}

// tanh: odd polynomial below |x| = 0.625 (Cephes tanhf), 1 - 2 / (e^2|x| + 1) above (saturates
// to 1 when e^2|x| overflows); sign restored by bits. Max error 1.33 ulp.
IG_VMATH float ig_vtanh(float x) {
  const uint32_t sign = ig_fbits(x) & 0x80000000u;
  const float a = ig_bitsf(ig_fbits(x) & 0x7fffffffu);
  const float z = a * a;
  float p = -5.70498872745e-3f;
  p = IG_FMA(p, z, 2.06390887954e-2f);
  p = IG_FMA(p, z, -5.37397155531e-2f);
  p = IG_FMA(p, z, 1.33314422036e-1f);
  p = IG_FMA(p, z, -3.33332819422e-1f);
  const float small = IG_FMA(p * z, a, a);
  const float large = 1.0f - 2.0f / (ig_vexp(a + a) + 1.0f);
  const float res = a < 0.625f ? small : large;
  return ig_bitsf(ig_fbits(res) | sign);
}

// sigmoid: with e = e^-|x| (never overflows), 1 / (1 + e) for x >= 0, e / (1 + e) below: the
// reference's two branches as a select. Max error 2.31 ulp.
IG_VMATH float ig_vsigmoid(float x) {
  const float e = ig_vexp(-ig_bitsf(ig_fbits(x) & 0x7fffffffu));
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

// erf: x + x P(x^2) up to |x| = 0.927734375, 1 - e^R(|x|) above (|x| clamped to 4, where erf
// rounds to 1); minimax coefficients after N. Juffa's erff. Max error 1.0 ulp.
IG_VMATH float ig_verf(float x) {
  const uint32_t sign = ig_fbits(x) & 0x80000000u;
  float t = ig_bitsf(ig_fbits(x) & 0x7fffffffu);
  t = t > 4.0f ? 4.0f : t;
  const float s = t * t;
  float q = -5.96761703e-4f;
  q = IG_FMA(q, s, 4.99119423e-3f);
  q = IG_FMA(q, s, -2.67681349e-2f);
  q = IG_FMA(q, s, 1.12819925e-1f);
  q = IG_FMA(q, s, -3.76125336e-1f);
  q = IG_FMA(q, s, 1.28379166e-1f);
  const float small = IG_FMA(q, t, t);
  float r = IG_FMA(-1.72853470e-5f, t, 3.83197126e-4f);
  const float u = IG_FMA(-3.88396438e-3f, t, 2.42546219e-2f);
  r = IG_FMA(r, s, u);
  r = IG_FMA(r, t, -1.06777877e-1f);
  r = IG_FMA(r, t, -6.34846687e-1f);
  r = IG_FMA(r, t, -1.28717512e-1f);
  r = IG_FMA(r, t, -t);
  const float large = 1.0f - ig_vexp_normal(r);  // r = log(erfc(t)) in about [-18, -1.7]: e^r is normal
  const float res = t > 0.927734375f ? large : small;
  return ig_bitsf(ig_fbits(res) | sign);
}

// gelu (erf and tanh forms): the reference formulas over ig_verf / ig_vtanh. 1 + erf (1 + tanh)
// cancels for x < 0, in the float libm formula too, so the bound is mixed: error at most
// 0.78 (erf form) / 0.85 (tanh form) times ulp(y) + 2^-24 |x|.
IG_VMATH float ig_vgelu(float x) { return 0.5f * x * (1.0f + ig_verf(x * 0.707106781186547524f)); }
IG_VMATH float ig_vgelu_tanh(float x) {
  const float k = 1.41421356237309504880f * 0.564189583547756286948f;
  return 0.5f * x * (1.0f + ig_vtanh(k * IG_FMA(0.044715f * x * x, x, x)));
}
// ---- end vectorized float math ----

)IGPRELUDE";

// After the elementwise ops' functions, which prelude() inserts from the op registry.
const char* const kRuntime = R"IGPRELUDE(
// ---- run-time support ----
struct ig_ctx {
  const int64_t* dims;
  const ingot_host* host;
  char* error;
  size_t error_size;
};

// Profiling: one branch per kernel when off (the host passes a null hook).
inline void ig_profile(const ig_ctx* c, int32_t kernel, int32_t phase) {
  if (c->host->profile != nullptr) c->host->profile(c->host->ctx, kernel, phase);
}

inline int ig_fail(const ig_ctx* c, const char* msg) {
  if (c->error != nullptr && c->error_size > 0) std::snprintf(c->error, c->error_size, "%s", msg);
  return 1;
}

inline bool ig_big(int64_t work) { return work > 65536; }

// Scratch memory a kernel can do without: where it returns null the kernel takes its slower
// path with none. Compiled with -DIG_FAIL_SCRATCH (CpuOptions::extra_flags) every request fails,
// so tests run those paths.
inline void* ig_scratch(size_t bytes) {
#ifdef IG_FAIL_SCRATCH
  (void)bytes;
  return nullptr;
#else
  return std::malloc(bytes);
#endif
}

// ---- reductions over [outer, n, inner] (the reduced axes are the contiguous block n) ----
// kind: 0 sum, 1 mean, 2 max, 3 min. Sums of floats accumulate in double, of integers in
// uint64_t (wrapping); max/min propagate NaN, as the reference kernels do.
// `load(i)`: element i (flat, row-major) of the reduced input, of type T; a fused elementwise
// prologue computes it there instead of reading a buffer.
// One reduction's accumulator: init, step (one element), finish (count: elements reduced).
template <int kKind, class T, class O>
struct ig_reducer {
  using C = ig_c<T>;
  using A = typename std::conditional<kKind >= 2, C,
      typename std::conditional<ig_is_float<T> || kKind == 1, double, uint64_t>::type>::type;
  static A init() {
    if constexpr (kKind == 2) { return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest(); }
    else if constexpr (kKind == 3) { return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max(); }
    else return A(0);
  }
  static void step(A& a, T t) {
    if constexpr (kKind >= 2) {
      const C v = static_cast<C>(t);
      if constexpr (std::is_floating_point<C>::value) { if (std::isnan(v)) a = v; }
      if (kKind == 2 ? v > a : v < a) a = v;
    } else {
      a += static_cast<A>(static_cast<C>(t));
    }
  }
  static O finish(A a, int64_t count) {
    if constexpr (kKind == 1) return static_cast<O>(a / static_cast<double>(count));
    else return static_cast<O>(a);
  }
};

// The sum in double of load(base) .. load(base + n - 1): sixteen lanes of partial sums, added
// together at the end (GCC turns this into vector adds; an `omp simd reduction` over a load
// function compiled to gathers and an accumulator kept in memory, at an eighth of the speed).
// Sums of floats in double do not depend on their order at float precision.
template <class T, class Load>
inline double ig_sum_run(Load load, int64_t base, int64_t n) {
  constexpr int kLanes = 16;
  double lanes[kLanes] = {};
  const int64_t full = n / kLanes * kLanes;
  for (int64_t k = 0; k < full; k += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(static_cast<ig_c<T>>(load(base + k + l)));
  double a = 0;
  for (int l = 0; l < kLanes; ++l) a += lanes[l];
  for (int64_t k = full; k < n; ++k) a += static_cast<double>(static_cast<ig_c<T>>(load(base + k)));
  return a;
}

template <int kKind, class T, class O, class Load>
void ig_reduce_fn(Load load, O* __restrict y, int64_t outer, int64_t n, int64_t inner) {
  using R = ig_reducer<kKind, T, O>;
  if (inner >= 16) {
    // Down the rows (a bias gradient's sum over the batch): a block of columns accumulates row
    // after row, so the inner loop reads a row contiguously and vectorizes, where one column at a
    // time strides by a whole row per element. Each output still adds its elements in row order.
    // Blocks as wide as leave 8 of them for the threads, up to 2048 columns (the accumulators stay
    // in L1): each row's part is then a long run the prefetcher follows (a block of 128 columns of
    // rows 1 MB apart ran at a fifth of memory speed: a scan's stacked gradients, [64, 262144]).
    constexpr int64_t kMaxBlock = 2048;
    const int64_t kBlock = std::max<int64_t>(128, std::min<int64_t>(kMaxBlock, (inner / 8 + 15) / 16 * 16));
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    #pragma omp parallel for if(ig_big(outer * n * inner) && outer * blocks > 1)
    for (int64_t ob = 0; ob < outer * blocks; ++ob) {
      const int64_t o = ob / blocks, c0 = ob % blocks * kBlock, m = std::min(kBlock, inner - c0);
      typename R::A acc[kMaxBlock];
      for (int64_t c = 0; c < m; ++c) acc[c] = R::init();
      for (int64_t k = 0; k < n; ++k) {
        const int64_t row = (o * n + k) * inner + c0;
        #pragma omp simd
        for (int64_t c = 0; c < m; ++c) R::step(acc[c], load(row + c));
      }
      for (int64_t c = 0; c < m; ++c) y[o * inner + c0 + c] = R::finish(acc[c], n);
    }
    return;
  }
  if constexpr (kKind < 2 && std::is_same<typename R::A, double>::value) {
    if (inner == 1) {
      // Along contiguous rows (a layer norm gradient's row means, a loss's mean). One long row is
      // cut into fixed chunks, summed in parallel and added in chunk order, so the result does
      // not depend on the number of threads.
      const int64_t chunk = std::max<int64_t>(16384, (n + 63) / 64);
      const int64_t chunks = outer == 1 ? (n + chunk - 1) / chunk : 1;
      if (chunks > 1) {
        double partial[64];
        #pragma omp parallel for if(ig_big(n))
        for (int64_t c = 0; c < chunks; ++c)
          partial[c] = ig_sum_run<T>(load, c * chunk, std::min(chunk, n - c * chunk));
        double a = 0;
        for (int64_t c = 0; c < chunks; ++c) a += partial[c];
        y[0] = R::finish(a, n);
        return;
      }
      #pragma omp parallel for if(ig_big(outer * n) && outer > 1)
      for (int64_t o = 0; o < outer; ++o) y[o] = R::finish(ig_sum_run<T>(load, o * n, n), n);
      return;
    }
  }
  #pragma omp parallel for if(ig_big(outer * n * inner) && outer * inner > 1)
  for (int64_t oi = 0; oi < outer * inner; ++oi) {
    const int64_t o = oi / inner, i = oi % inner;
    const int64_t base = o * n * inner + i;
    typename R::A a = R::init();
    for (int64_t k = 0; k < n; ++k) R::step(a, load(base + k * inner));
    y[oi] = R::finish(a, n);
  }
}

template <int kKind, class T, class O>
void ig_reduce(const T* __restrict x, O* __restrict y, int64_t outer, int64_t n, int64_t inner) {
  ig_reduce_fn<kKind, T, O>([x](int64_t i) { return x[i]; }, y, outer, n, inner);
}

// Checks n indices against an axis of `size` (negative ones count from the end), with the
// reference's message: gather's, and the movement kernels' (prelude_movement.cpp).
template <class I>
int ig_check_indices(const ig_ctx* ctx, const I* idx, int64_t n, int64_t size, int axis) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (v < -size || v >= size) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "gather: index %lld is out of range for axis %d of size %lld",
                    static_cast<long long>(v), axis, static_cast<long long>(size));
      return ig_fail(ctx, msg);
    }
  }
  return 0;
}

// ---- gather along an axis: y[o, j, i] = x[o, idx[j], i] over [outer, size, inner] ----
// Any element type (rows copied as bytes) and integer index type; a negative index counts from
// the end, one out of range is an error with the reference's message. Rows across threads.
template <class T, class I>
int ig_gather(const ig_ctx* ctx, const T* __restrict x, const I* __restrict idx, T* __restrict y, int64_t outer,
              int64_t size, int64_t nidx, int64_t inner, int axis) {
  if (ig_check_indices(ctx, idx, nidx, size, axis) != 0) return 1;
  if (inner == 0) return 0;
  #pragma omp parallel for if(ig_big(outer * nidx * inner) && outer * nidx > 1)
  for (int64_t oj = 0; oj < outer * nidx; ++oj) {
    const int64_t o = oj / nidx, v = static_cast<int64_t>(idx[oj % nidx]);
    std::memcpy(y + oj * inner, x + (o * size + (v < 0 ? v + size : v)) * inner, static_cast<size_t>(inner) * sizeof(T));
  }
  return 0;
}

// The cache lines of `bytes` from p, fetched into L2 ahead of their use: a kernel that walks rows
// of a page or so issues them for its next row while it computes on this one, since the
// hardware's stream prefetcher stops at each 4 KB page and a [*, 1024] float row is one page.
inline void ig_prefetch(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 2);
}

// Row kernels add a row in chunks of kIgChunk values: a chunk's terms in the compute type C (float
// lanes, twice double's), the chunks' sums in double. The chunk bounds a float partial's error (16
// terms a 16-lane vector lane) while the widening to double happens once a chunk, not per value.
constexpr int64_t kIgChunk = 256;
template <class C, class Term> inline double ig_chunked_sum(int64_t n, const Term& term) {
  double sum = 0;
  for (int64_t k0 = 0; k0 < n; k0 += kIgChunk) {
    const int64_t k1 = k0 + kIgChunk < n ? k0 + kIgChunk : n;
    C part = 0;
    #pragma omp simd reduction(+:part)
    for (int64_t k = k0; k < k1; ++k) part += term(k);
    sum += static_cast<double>(part);
  }
  return sum;
}

template <class C> inline C ig_exp_capped(C x) {
  if constexpr (std::is_same<C, float>::value) return ig_vexp_capped(x); else return std::exp(x);
}

// ---- softmax / log_softmax along the middle axis of [outer, n, inner] (reference order) ----
// The three passes over a row are `omp simd` loops; exp is ig_exp_capped (the vectorized
// ig_vexp_capped for float compute, its argument x - max never positive; libm for double). A
// contiguous row (the last axis: inner 1) has its own loops: read through a runtime stride, every
// pass gathered, and softmax over [64, 128, 1024] ran at 12% of a memcpy. Its sum adds each chunk
// of kIgChunk exps in the compute type and the chunks' sums in double (widening every exp to
// double took 6 of the 22 cycles a 16-value vector took; softmax on [64, 128, 1024] 13% faster
// without; a chunk's float sum, 16 terms in [0, 1] a lane, is within about 1e-6 of the exact one,
// relative); a strided row sums in double as the reference does. softmax keeps each exp in y
// between the sum and the scaling (the same value, computed once). The exp pass fetches the next
// row (`next`, null for the last) a chunk at a time: its first pass, the max, then reads from
// cache (softmax 4-10% faster on [64, 128, 1024], interleaved runs).
template <bool kLog, class TI, class TO>
void ig_softmax_row(const TI* __restrict xr, TO* __restrict yr, int64_t n, const TI* next) {
  using C = ig_c<TO>;
  C mx = -std::numeric_limits<C>::infinity();
  #pragma omp simd reduction(max:mx)
  for (int64_t k = 0; k < n; ++k) {
    const C v = static_cast<C>(xr[k]);
    mx = v > mx ? v : mx;
  }
  double sum = 0;
  for (int64_t k0 = 0; k0 < n; k0 += kIgChunk) {
    const int64_t k1 = k0 + kIgChunk < n ? k0 + kIgChunk : n;
    if (next != nullptr) ig_prefetch(next + k0, (k1 - k0) * static_cast<int64_t>(sizeof(TI)));
    if (kLog || !std::is_same<TO, C>::value) {
      C part = 0;
      #pragma omp simd reduction(+:part)
      for (int64_t k = k0; k < k1; ++k) part += ig_exp_capped<C>(static_cast<C>(xr[k]) - mx);
      sum += static_cast<double>(part);
    } else {
      C part = 0;
      #pragma omp simd reduction(+:part)
      for (int64_t k = k0; k < k1; ++k) {
        const C e = ig_exp_capped<C>(static_cast<C>(xr[k]) - mx);
        reinterpret_cast<C*>(yr)[k] = e;
        part += e;
      }
      sum += static_cast<double>(part);
    }
  }
  const C norm = static_cast<C>(kLog ? std::log(sum) : 1.0 / sum);
  if (kLog) {
    #pragma omp simd
    for (int64_t k = 0; k < n; ++k) yr[k] = static_cast<TO>(static_cast<C>(xr[k]) - mx - norm);
  } else if (std::is_same<TO, C>::value) {
    #pragma omp simd
    for (int64_t k = 0; k < n; ++k) yr[k] = static_cast<TO>(reinterpret_cast<C*>(yr)[k] * norm);
  } else {
    #pragma omp simd
    for (int64_t k = 0; k < n; ++k) yr[k] = static_cast<TO>(ig_exp_capped<C>(static_cast<C>(xr[k]) - mx) * norm);
  }
}

template <bool kLog, class TI, class TO>
void ig_softmax(const TI* __restrict x, TO* __restrict y, int64_t outer, int64_t n, int64_t inner) {
  using C = ig_c<TO>;
  if (inner == 1) {
    #pragma omp parallel for if(ig_big(outer * n) && outer > 1)
    for (int64_t o = 0; o < outer; ++o) ig_softmax_row<kLog>(x + o * n, y + o * n, n, o + 1 < outer ? x + (o + 1) * n : nullptr);
    return;
  }
  #pragma omp parallel for if(ig_big(outer * n * inner) && outer * inner > 1)
  for (int64_t oi = 0; oi < outer * inner; ++oi) {
    const int64_t o = oi / inner, i = oi % inner;
    const TI* xr = x + o * n * inner + i;
    TO* yr = y + o * n * inner + i;
    C mx = -std::numeric_limits<C>::infinity();
    #pragma omp simd reduction(max:mx)
    for (int64_t k = 0; k < n; ++k) {
      const C v = static_cast<C>(xr[k * inner]);
      mx = v > mx ? v : mx;
    }
    double sum = 0;
    #pragma omp simd reduction(+:sum)
    for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(ig_exp_capped<C>(static_cast<C>(xr[k * inner]) - mx));
    const C norm = static_cast<C>(kLog ? std::log(sum) : 1.0 / sum);
    #pragma omp simd
    for (int64_t k = 0; k < n; ++k) {
      const C d = static_cast<C>(xr[k * inner]) - mx;
      yr[k * inner] = static_cast<TO>(kLog ? d - norm : ig_exp_capped<C>(d) * norm);
    }
  }
}

// ---- layer_norm (kCenter) / rms_norm over rows of `len`; weight/bias may be null ----
// Float compute first (ig_norm_row_float), then, where it declines, in double as the reference,
// each pass an `omp simd` loop (the sums reordered into vector lanes: a difference in double's
// last bits): the scalar double loops took 0.1 ms for a transformer's [128, 256], a sixth of its
// block. rms_norm takes the mean as 0. `next`, the row the caller takes next (or null), is fetched
// during the second pass (see ig_prefetch): layer_norm on [64, 128, 1024] 5-20% faster.
//
// The float path: the mean as the first value x0 plus the chunked float sum of x - x0 (the terms
// on the scale of the row's spread, not its offset: a row of mean 100 and spread 3 summed as is
// put the mean 2e-5 off, 1e-5 of the output), split into mh + ml so that x - mh (exact where x
// is within 2x of mh) minus ml keeps it; the variance as the chunked float sum of squares; the
// output pass in float lanes. Within 3 ulp of the double path on such rows, 25% faster on
// [64, 128, 1024]. It declines (writing nothing) where the variance is not safely inside float's
// range: an overflowing square, an inf or NaN in the row, a constant row (0) or one so
// narrow that squares lose bits to underflow (the bound keeps what a flushed square could lose
// below 1e-8 of the sum).
template <bool kCenter, class T, class W, class B>
inline bool ig_norm_row_float(const T* __restrict xr, const W* w, const B* b, T* __restrict yr, int64_t len, double eps,
                              const T* next) {
  const float x0 = kCenter && len > 0 ? static_cast<float>(xr[0]) : 0.0f;
  const double mean =
      kCenter ? static_cast<double>(x0) + ig_chunked_sum<float>(len, [&](int64_t k) { return static_cast<float>(xr[k]) - x0; }) /
                                              static_cast<double>(len)
              : 0.0;
  const float mh = static_cast<float>(mean), ml = static_cast<float>(mean - static_cast<double>(mh));
  if (next != nullptr) ig_prefetch(next, len * static_cast<int64_t>(sizeof(T)));
  const double var = ig_chunked_sum<float>(len, [&](int64_t k) {
    const float d = (static_cast<float>(xr[k]) - mh) - ml;
    return d * d;
  });
  if (!(var > 1e-30 * static_cast<double>(len) && var < 1e36)) return false;
  const float r = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(len) + eps));
  #pragma omp simd
  for (int64_t k = 0; k < len; ++k) {
    const float wk = w ? static_cast<float>(static_cast<ig_c<W>>(w[k])) : 1.0f;
    const float d = (static_cast<float>(xr[k]) - mh) - ml;
    yr[k] = static_cast<T>(b ? d * r * wk + static_cast<float>(static_cast<ig_c<B>>(b[k])) : d * r * wk);
  }
  return true;
}

template <bool kCenter, class T, class W, class B>
inline void ig_norm_row(const T* __restrict xr, const W* w, const B* b, T* __restrict yr, int64_t len, double eps,
                        const T* next) {
  using C = ig_c<T>;
  if constexpr (std::is_same<C, float>::value) {
    if (ig_norm_row_float<kCenter>(xr, w, b, yr, len, eps, next)) return;
  }
  double mean = 0, var = 0;
  if (kCenter) {
    #pragma omp simd reduction(+:mean)
    for (int64_t k = 0; k < len; ++k) mean += static_cast<double>(static_cast<C>(xr[k]));
    mean /= static_cast<double>(len);
  }
  if (next != nullptr) ig_prefetch(next, len * static_cast<int64_t>(sizeof(T)));
  #pragma omp simd reduction(+:var)
  for (int64_t k = 0; k < len; ++k) {
    const double d = static_cast<double>(static_cast<C>(xr[k])) - mean;
    var += d * d;
  }
  const double rstd = 1.0 / std::sqrt(var / static_cast<double>(len) + eps);
  if (!kCenter && std::is_same<C, float>::value) {
    // rms_norm in float: x times the scale rounded once is within 2 ulp of the double result
    // (no mean to cancel against), and float lanes are twice double's.
    const C r = static_cast<C>(rstd);
    #pragma omp simd
    for (int64_t k = 0; k < len; ++k)
      yr[k] = static_cast<T>(static_cast<C>(xr[k]) * r * (w ? static_cast<C>(static_cast<ig_c<W>>(w[k])) : C(1)));
    return;
  }
  #pragma omp simd
  for (int64_t k = 0; k < len; ++k) {
    const double wk = w ? static_cast<double>(static_cast<ig_c<W>>(w[k])) : 1.0;
    const double bk = b ? static_cast<double>(static_cast<ig_c<B>>(b[k])) : 0.0;
    const double d = static_cast<double>(static_cast<C>(xr[k])) - mean;
    yr[k] = static_cast<T>(static_cast<C>(d * rstd * wk + bk));
  }
}

template <bool kCenter, class T, class W, class B>
void ig_trailing_norm(const T* __restrict x, const W* w, const B* b, T* __restrict y, int64_t rows,
                      int64_t len, double eps) {
  #pragma omp parallel for if(ig_big(rows * len) && rows > 1)
  for (int64_t r = 0; r < rows; ++r)
    ig_norm_row<kCenter>(x + r * len, w, b, y + r * len, len, eps, r + 1 < rows ? x + (r + 1) * len : nullptr);
}

// The same over rows that `load_row(r, row)` computes into a thread's buffer of `len` (the
// norm's elementwise prologue, e.g. a transformer's residual add and bias, fused into it): the
// prologue's result is never written to memory, and each row is computed once and normalized
// while it is in L1.
template <bool kCenter, class T, class W, class B, class Load>
int ig_trailing_norm_rows(const ig_ctx* ctx, const Load& load_row, const W* w, const B* b, T* __restrict y,
                          int64_t rows, int64_t len, double eps) {
  bool failed = false;
  #pragma omp parallel if(ig_big(rows * len) && rows > 1)
  {
    T* row = len > 0 ? static_cast<T*>(std::aligned_alloc(64, (size_t(len) * sizeof(T) + 63) / 64 * 64)) : nullptr;
    if (len > 0 && row == nullptr) {
      #pragma omp atomic write
      failed = true;
    }
    #pragma omp for
    for (int64_t r = 0; r < rows; ++r) {
      if (row == nullptr) continue;
      load_row(r, row);
      ig_norm_row<kCenter>(row, w, b, y + r * len, len, eps, static_cast<const T*>(nullptr));
    }
    std::free(row);
  }
  return failed ? ig_fail(ctx, "layer_norm: out of memory for a row buffer") : 0;
}

// ---- batch_norm (inference statistics): per channel of [outer, channels, inner] ----
template <class T, class P1, class P2, class P3, class P4>
void ig_batch_norm(const T* __restrict x, const P1* w, const P2* b, const P3* mean, const P4* var,
                   T* __restrict y, int64_t outer, int64_t channels, int64_t inner, double eps) {
  using C = ig_c<T>;
  #pragma omp parallel for if(ig_big(outer * channels * inner) && outer * channels > 1)
  for (int64_t oc = 0; oc < outer * channels; ++oc) {
    const int64_t c = oc % channels;
    const double scale = static_cast<double>(static_cast<ig_c<P1>>(w[c])) /
                         std::sqrt(static_cast<double>(static_cast<ig_c<P4>>(var[c])) + eps);
    const double shift = static_cast<double>(static_cast<ig_c<P2>>(b[c])) -
                         static_cast<double>(static_cast<ig_c<P3>>(mean[c])) * scale;
    const C sc = static_cast<C>(scale), sh = static_cast<C>(shift);
    const T* xr = x + oc * inner;
    T* yr = y + oc * inner;
    #pragma omp simd
    for (int64_t i = 0; i < inner; ++i) yr[i] = static_cast<T>(static_cast<C>(xr[i]) * sc + sh);
  }
}

)IGPRELUDE";

}  // namespace

std::string prelude(bool blas) {
  std::string s = "// ---- ingot CPU runtime prelude -------------------------------------------------\n";
  s += kCore;
  // The elementwise ops' functions, from their definitions (ElementwiseForms in ir/op_registry.h),
  // in the order the ops register: a function may call one registered before it (abs calls neg).
  s += "// ---- elementwise ops (src/ops/*.cpp) ----\n";
  for (const OpDef* op : ops_in_registration_order())
    if (op->elementwise && !op->elementwise->cpu_source.empty()) s += op->elementwise->cpu_source + "\n";
  s += kRuntime;
  s += kChannelsLastPrelude;
  s += blas ? kGemmBlasPrelude : kGemmLoopsPrelude;
  if (!blas) s += kGemmSerialLoopsPrelude;
  s += kGemmPlainPrelude;
  s += kConvPrelude;
  s += kReduceAxesPrelude;
  s += kAttentionPrelude;
  s += kAttentionLowpPrelude;
  s += kMovementPrelude;
  s += kPoolPrelude;
  s += "\n}  // namespace\n";
  return s;
}

}  // namespace ingot::cpu
