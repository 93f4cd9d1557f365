// The linalg family: matmul, conv2d and conv2d's gradients (see families.h for the contract;
// the pools, which share conv2d's windows, are in pool.cpp).
//
// matmul and conv2d share one cache-blocked GEMM. conv2d lowers each (image, group, column
// tile) to im2col + GEMM, with the tiles spread over the thread pool.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"
#include "ops/window_util.h"
#include "runtime/parallel.h"

namespace ingot::ops {
namespace {

// The type products are accumulated in: float for float/half/bfloat16, double for double.
// Integers accumulate in uint64_t: wrap-around is defined there, and the low bits (all that the
// final cast to the output type keeps) are the same as for an int64 accumulation.
template <class T>
using acc_t = std::conditional_t<std::is_integral_v<T>, uint64_t, compute_t<T>>;

// --- GEMM core -------------------------------------------------------------------------------
// C[M, N] = A[M, K] * B[K, N], row-major with leading dimensions. Goto-style blocking: a KC x NC
// block of B and an MC x KC block of A are packed into zero-padded panels NR columns / MR rows
// wide, and an MR x NR micro-kernel keeps its tile of C in registers while it walks k (i-k-j
// order over contiguous panel rows). The micro-kernel is written with GCC/Clang vector
// extensions: with plain loops GCC 12 keeps the accumulator tile in memory and runs ~10x slower.

template <class T>
struct Blocking {
  static constexpr int64_t NR = 64 / sizeof(T);  // one cache line of a B panel row
  static constexpr int64_t MR = 6;
  static constexpr int64_t KC = 256;  // a KC x NR panel of B stays in L1
  static constexpr int64_t MC = 144;  // the MC x KC block of A stays in L2
  static constexpr int64_t NC = 512;  // the KC x NC block of B stays in L2
};

// VB: vector width in bytes (16 for baseline x86-64, 32 for AVX2).
template <class T, int VB>
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const T* __restrict a,
                                                const T* __restrict b, T* c, int64_t ldc,
                                                int64_t mr, int64_t nr, bool accumulate) {
  constexpr int64_t MR = Blocking<T>::MR, NR = Blocking<T>::NR, V = VB / sizeof(T), NV = NR / V;
  typedef T vec __attribute__((vector_size(VB), aligned(sizeof(T))));  // unaligned access
  vec acc[MR][NV] = {};
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR)
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NV; ++j) acc[i][j] += a[i] * reinterpret_cast<const vec*>(b)[j];
  if (mr == MR && nr == NR) {
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NV; ++j) {
        vec& out = reinterpret_cast<vec*>(c + i * ldc)[j];
        out = accumulate ? out + acc[i][j] : acc[i][j];
      }
    return;
  }
  // Edge tile: spill to an array first so the accumulators are never indexed at run time.
  T tile[MR][NR];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t j = 0; j < NV; ++j) std::memcpy(&tile[i][j * V], &acc[i][j], sizeof(vec));
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j)
      c[i * ldc + j] = accumulate ? T(c[i * ldc + j] + tile[i][j]) : tile[i][j];
}

template <class T, int VB>
[[gnu::always_inline]] inline void macro_kernel_body(int64_t mc, int64_t nc, int64_t kc,
                                                     const T* ap, const T* bp, T* c,
                                                     int64_t ldc, bool accumulate) {
  constexpr int64_t MR = Blocking<T>::MR, NR = Blocking<T>::NR;
  for (int64_t j = 0; j < nc; j += NR)
    for (int64_t i = 0; i < mc; i += MR)
      micro_kernel<T, VB>(kc, ap + i * kc, bp + j * kc, c + i * ldc + j, ldc,
                          std::min(MR, mc - i), std::min(NR, nc - j), accumulate);
}

template <class T>
void macro_kernel_baseline(int64_t mc, int64_t nc, int64_t kc, const T* ap, const T* bp, T* c,
                           int64_t ldc, bool accumulate) {
  macro_kernel_body<T, 16>(mc, nc, kc, ap, bp, c, ldc, accumulate);
}

// The build targets baseline x86-64 (SSE2); an AVX2 copy of the hot loop doubles the vector
// width where the CPU has it. No FMA: both copies give bit-identical results.
#if defined(__GNUC__) && defined(__x86_64__)
template <class T>
__attribute__((target("avx2"))) void macro_kernel_avx2(int64_t mc, int64_t nc, int64_t kc,
                                                        const T* ap, const T* bp, T* c,
                                                        int64_t ldc, bool accumulate) {
  macro_kernel_body<T, 32>(mc, nc, kc, ap, bp, c, ldc, accumulate);
}
#endif

template <class T>
void macro_kernel(int64_t mc, int64_t nc, int64_t kc, const T* ap, const T* bp, T* c,
                  int64_t ldc, bool accumulate) {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return macro_kernel_avx2<T>(mc, nc, kc, ap, bp, c, ldc, accumulate);
#endif
  macro_kernel_baseline<T>(mc, nc, kc, ap, bp, c, ldc, accumulate);
}

// Packs A[0:mc, 0:kc] into panels of MR rows, each stored k-major: panel[k * MR + i].
template <class T>
void pack_a(const T* a, int64_t lda, int64_t mc, int64_t kc, T* out) {
  constexpr int64_t MR = Blocking<T>::MR;
  for (int64_t i0 = 0; i0 < mc; i0 += MR, out += MR * kc)
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = 0; i < MR; ++i) out[k * MR + i] = i0 + i < mc ? a[(i0 + i) * lda + k] : T(0);
}

// Packs B[0:kc, 0:nc] into panels of NR columns, each stored k-major: panel[k * NR + j].
template <class T>
void pack_b(const T* b, int64_t ldb, int64_t kc, int64_t nc, T* out) {
  constexpr int64_t NR = Blocking<T>::NR;
  for (int64_t j0 = 0; j0 < nc; j0 += NR, out += NR * kc) {
    const int64_t w = std::min(NR, nc - j0);
    for (int64_t k = 0; k < kc; ++k) {
      const T* row = b + k * ldb + j0;
      if (w == NR) {  // constant trip count: a few vector moves, not a memmove call
        for (int64_t j = 0; j < NR; ++j) out[k * NR + j] = row[j];
      } else {
        std::copy(row, row + w, out + k * NR);
        std::fill(out + k * NR + w, out + (k + 1) * NR, T(0));
      }
    }
  }
}

template <class T>
struct Gemm {
  int64_t M, N, K;
  const T* A;
  int64_t lda;
  const T* B;
  int64_t ldb;
  T* C;
  int64_t ldc;

  // Computes the C tile [ic, ic + mc) x [jc, jc + nc) over all of K.
  void tile(int64_t ic, int64_t mc, int64_t jc, int64_t nc) const {
    using Bk = Blocking<T>;
    thread_local std::vector<T> apack, bpack;
    apack.resize(static_cast<size_t>((Bk::MC + Bk::MR) * Bk::KC));
    bpack.resize(static_cast<size_t>(Bk::KC * (Bk::NC + Bk::NR)));
    for (int64_t pc = 0; pc < K; pc += Bk::KC) {
      const int64_t kc = std::min(Bk::KC, K - pc);
      pack_b(B + pc * ldb + jc, ldb, kc, nc, bpack.data());
      pack_a(A + ic * lda + pc, lda, mc, kc, apack.data());
      macro_kernel<T>(mc, nc, kc, apack.data(), bpack.data(), C + ic * ldc + jc, ldc, pc > 0);
    }
  }

  // Tiles run in parallel; a call from inside a parallel task runs them inline.
  void run() const {
    using Bk = Blocking<T>;
    if (M == 0 || N == 0) return;
    if (K == 0) {
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
      return;
    }
    const int64_t mt = (M + Bk::MC - 1) / Bk::MC, nt = (N + Bk::NC - 1) / Bk::NC;
    const bool small = M * N * K < (int64_t{1} << 18);  // not worth waking the pool
    parallel_for(mt * nt, small ? mt * nt : 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t ic = t / nt * Bk::MC, jc = t % nt * Bk::NC;
        tile(ic, std::min(Bk::MC, M - ic), jc, std::min(Bk::NC, N - jc));
      }
    });
  }
};

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
          T* C, int64_t ldc) {
  Gemm<T>{M, N, K, A, lda, B, ldb, C, ldc}.run();
}

// --- shared helpers --------------------------------------------------------------------------

template <class A, class T>
A to_acc(T v) {
  return static_cast<A>(static_cast<compute_t<T>>(v));
}

// The tensor's values as type A: the tensor's own buffer when it already holds A, else a
// converted copy kept in `buf`.
template <class A, class T>
const A* values_as(const Tensor& t, std::vector<A>& buf) {
  if constexpr (std::is_same_v<A, T>) {
    return t.data<T>();
  } else {
    const T* p = t.data<T>();
    buf.resize(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) buf[i] = to_acc<A>(p[i]);
    return buf.data();
  }
}

// Converts an accumulator to the output type (integers wrap, as int64 arithmetic would).
template <class T, class A>
T from_acc(A v) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(v);
  else return T(static_cast<compute_t<T>>(v));
}

// The input converted to `dtype` when it differs (mixed-dtype operands are promoted first).
Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.astype(dtype); }

void reject_bool(const Node& n, std::span<const DType> in) {
  for (DType t : in)
    INGOT_CHECK(t != DType::Bool, n.op, " does not accept bool operands; cast them first");
}

void dtype_promoted(const Node& n, std::span<const DType> in, std::span<DType> out) {
  reject_bool(n, in);
  DType t = in[0];
  for (DType d : in) t = promote_types(t, d);
  out[0] = t;
}

// --- matmul ----------------------------------------------------------------------------------

void matmul_shape(ShapeInfer& s) {
  const ValueId a = s.in(0), b = s.in(1), y = s.out();
  if (!s.ready({a, b})) return;
  const int ra = s.rank(a), rb = s.rank(b);
  if (ra == 0 || rb == 0)
    s.fail("matmul needs operands of rank >= 1, got ranks " + std::to_string(ra) + " and " +
           std::to_string(rb));
  const DimVar ka = s.dim(a, -1), kb = s.dim(b, rb == 1 ? 0 : -2);
  auto va = s.value(ka), vb = s.value(kb);
  if (va && vb && *va != *vb)
    s.fail("contracted dimensions differ: a has K = " + std::to_string(*va) + " but b has K = " +
           std::to_string(*vb));
  s.unify(ka, kb);
  // Batch dims broadcast right-aligned; 1-D operands contribute no M or N dimension.
  const int ba = std::max(ra - 2, 0), bb = std::max(rb - 2, 0), nb = std::max(ba, bb);
  s.set_rank(y, nb + (ra > 1) + (rb > 1));
  for (int i = 0; i < nb; ++i) {
    const int ia = i - (nb - ba), ib = i - (nb - bb);
    if (ia >= 0 && ib >= 0) s.broadcast(s.dim(a, ia), s.dim(b, ib), s.dim(y, i));
    else s.unify(s.dim(y, i), ia >= 0 ? s.dim(a, ia) : s.dim(b, ib));
  }
  if (ra > 1) s.unify(s.dim(y, nb), s.dim(a, -2));
  if (rb > 1) s.unify(s.dim(y, -1), s.dim(b, -1));
}

struct MatmulDims {
  int64_t M, N, K;
  Shape a_batch, b_batch, batch;  // batch = broadcast of the operands' batch dims
  Shape out;
};

MatmulDims matmul_dims(const Shape& a, const Shape& b) {
  INGOT_CHECK(!a.empty() && !b.empty(), "matmul needs operands of rank >= 1, got shapes ",
              to_string(a), " and ", to_string(b));
  MatmulDims d;
  d.M = a.size() > 1 ? a[a.size() - 2] : 1;
  d.K = a.back();
  const int64_t kb = b.size() > 1 ? b[b.size() - 2] : b[0];
  INGOT_CHECK(d.K == kb, "matmul: contracted dimensions differ: ", to_string(a), " x ",
              to_string(b), " (", d.K, " vs ", kb, ")");
  d.N = b.size() > 1 ? b.back() : 1;
  d.a_batch.assign(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  d.b_batch.assign(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  d.batch = broadcast_shapes(d.a_batch, d.b_batch, "matmul batch dims");
  d.out = d.batch;
  if (a.size() > 1) d.out.push_back(d.M);
  if (b.size() > 1) d.out.push_back(d.N);
  return d;
}

template <class T>
void matmul_typed(const Tensor& a, const Tensor& b, const MatmulDims& d, Tensor& y) {
  using A = acc_t<T>;
  std::vector<A> abuf, bbuf, ybuf;
  const A* pa = values_as<A, T>(a, abuf);
  const A* pb = values_as<A, T>(b, bbuf);
  A* py;
  if constexpr (std::is_same_v<A, T>) {
    py = y.data<T>();
  } else {
    ybuf.resize(static_cast<size_t>(y.numel()));
    py = ybuf.data();
  }
  const int64_t M = d.M, N = d.N, K = d.K, batches = numel(d.batch);
  if (numel(d.b_batch) == 1) {
    // One b for every batch: the batches of a stack into a single tall GEMM.
    gemm<A>(batches * M, N, K, pa, K, pb, N, py, N);
  } else {
    std::vector<int64_t> a_off, b_off;  // per output batch, in matrices
    for_each_strided<2>(d.batch,
                        {broadcast_strides(d.a_batch, d.batch), broadcast_strides(d.b_batch, d.batch)},
                        [&](int64_t, int64_t oa, int64_t ob) {
                          a_off.push_back(oa);
                          b_off.push_back(ob);
                        });
    // Parallel over batches when there are enough of them; else each GEMM is parallel.
    const int64_t grain = batches >= parallel_num_threads() ? 1 : batches;
    parallel_for(batches, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        gemm<A>(M, N, K, pa + a_off[i] * M * K, K, pb + b_off[i] * K * N, N, py + i * M * N, N);
    });
  }
  if constexpr (!std::is_same_v<A, T>) {
    T* out = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) out[i] = from_acc<T>(ybuf[i]);
  }
}

void matmul_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const DType t = promote_types(in[0].dtype(), in[1].dtype());
  reject_bool(n, std::array{t});
  const MatmulDims d = matmul_dims(in[0].shape(), in[1].shape());
  out[0] = Tensor(t, d.out);
  const Tensor a = as_dtype(in[0], t), b = as_dtype(in[1], t);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) matmul_typed<T>(a, b, d, out[0]);
  });
}

// --- conv2d's attributes (its windows: window_util.h) ----------------------------------------

struct ConvAttrs {
  Pair stride, pad, dilation;
  int64_t groups;
};

ConvAttrs conv_attrs(const Node& n) {
  ConvAttrs a{pair_attr(n, "stride", {1, 1}, 1), pair_attr(n, "padding", {0, 0}, 0),
              pair_attr(n, "dilation", {1, 1}, 1), n.attrs.get_int("groups", 1)};
  INGOT_CHECK(a.groups >= 1, n.op, ": groups must be >= 1, got ", a.groups);
  return a;
}

// --- conv2d ----------------------------------------------------------------------------------

// Input channels C = weight dim 1 * groups, and groups divide Cout.
void conv_channels(ShapeInfer& s, DimVar c, DimVar cg, DimVar cout, int64_t groups) {
  auto vc = s.value(c), vcg = s.value(cg), vcout = s.value(cout);
  const std::string g = std::to_string(groups);
  if (vcout && *vcout % groups != 0)
    s.fail("output channels " + std::to_string(*vcout) + " not divisible by groups " + g);
  if (vc && vcg && *vc != *vcg * groups)
    s.fail("channels mismatch: input has " + std::to_string(*vc) + " channels but weight expects " +
           std::to_string(*vcg) + " x groups " + g + " = " + std::to_string(*vcg * groups));
  if (groups == 1) {
    s.unify(c, cg);
  } else if (vcg) {
    s.bind(c, *vcg * groups);
  } else if (vc) {
    if (*vc % groups != 0)
      s.fail("input channels " + std::to_string(*vc) + " not divisible by groups " + g);
    s.bind(cg, *vc / groups);
  }
}

void conv2d_shape(ShapeInfer& s) {
  const ValueId x = s.in(0), w = s.in(1), y = s.out();
  const bool x_ready = expect_rank(s, x, 4, "an NCHW input");
  const bool w_ready = expect_rank(s, w, 4, "a [Cout, Cin/groups, kh, kw] weight");
  if (!x_ready || !w_ready) return;
  const ConvAttrs a = or_fail(s, [&] { return conv_attrs(s.node()); });
  conv_channels(s, s.dim(x, 1), s.dim(w, 1), s.dim(w, 0), a.groups);
  if (s.num_inputs() == 3) {
    if (s.has_rank(s.in(2)) && s.rank(s.in(2)) != 1)
      s.fail("conv2d bias must have rank 1 ([Cout]), got rank " + std::to_string(s.rank(s.in(2))));
    s.set_dims(s.in(2), {s.dim(w, 0)});
  }
  s.set_rank(y, 4);
  s.unify(s.dim(y, 0), s.dim(x, 0));
  s.unify(s.dim(y, 1), s.dim(w, 0));
  auto kh = s.value(s.dim(w, 2)), kw = s.value(s.dim(w, 3));
  if (!kh || !kw) return;  // output H, W unknown until the kernel size is
  if (*kh == 0 || *kw == 0) s.fail("empty kernel: weight has kh = " + std::to_string(*kh) +
                                   ", kw = " + std::to_string(*kw));
  window_shape(s, Window{{*kh, *kw}, a.stride, a.pad, a.dilation}, x, y);
}

struct ConvGeom {
  int64_t N, C, H, W, Cout, groups, Cg, Mg, K, Ho, Wo;  // Cg, Mg: in/out channels per group
  Window win;
};

ConvGeom conv_geom(const Node& n, const Shape& x, const Shape& w, const Tensor* bias) {
  INGOT_CHECK(x.size() == 4, "conv2d expects an NCHW input of rank 4, got ", to_string(x));
  INGOT_CHECK(w.size() == 4, "conv2d expects a [Cout, Cin/groups, kh, kw] weight, got ",
              to_string(w));
  INGOT_CHECK(w[2] > 0 && w[3] > 0, "conv2d: empty kernel in weight ", to_string(w));
  const ConvAttrs a = conv_attrs(n);
  ConvGeom g{x[0], x[1], x[2], x[3], w[0], a.groups, w[1], w[0] / a.groups, 0, 0, 0, {}};
  INGOT_CHECK(g.C == g.Cg * g.groups, "conv2d: channels mismatch: input ", to_string(x), " has ",
              g.C, " channels but weight ", to_string(w), " with groups ", g.groups, " expects ",
              g.Cg * g.groups);
  INGOT_CHECK(g.Cout % g.groups == 0, "conv2d: output channels ", g.Cout,
              " not divisible by groups ", g.groups);
  INGOT_CHECK(!bias || bias->shape() == Shape{g.Cout}, "conv2d: bias must have shape [", g.Cout,
              "], got ", to_string(bias->shape()));
  g.win = Window{{w[2], w[3]}, a.stride, a.pad, a.dilation};
  g.K = g.Cg * w[2] * w[3];
  g.Ho = g.win.out_size(g.H, 0, "conv2d");
  g.Wo = g.win.out_size(g.W, 1, "conv2d");
  return g;
}

// The im2col matrix of one image and group for output positions [j0, j0 + ncols): row
// (c, ki, kj) holds, for each position, the input pixel under that kernel tap (0 in the padding).
template <class A, class T>
void im2col(const T* img, const ConvGeom& g, int64_t j0, int64_t ncols, A* col) {
  const Window& w = g.win;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < w.kernel[1]; ++kj, col += ncols) {
        const T* plane = img + c * g.H * g.W;
        // One output row at a time: the input row is fixed, so a whole run is in or out of H.
        for (int64_t j = 0; j < ncols;) {
          const int64_t oh = (j0 + j) / g.Wo, ow = (j0 + j) % g.Wo;
          const int64_t len = std::min(g.Wo - ow, ncols - j);
          const int64_t ih = oh * w.stride[0] - w.pad[0] + ki * w.dilation[0];
          const int64_t iw0 = ow * w.stride[1] - w.pad[1] + kj * w.dilation[1];
          A* dst = col + j;
          if (ih < 0 || ih >= g.H) {
            std::fill(dst, dst + len, A(0));
          } else {
            // Positions t in [t0, t1) read inside the row (iw0 + t * sw in [0, W)).
            const int64_t sw = w.stride[1];
            const int64_t t0 = std::min(len, iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw);
            const int64_t t1 = std::max(t0, std::min(len, g.W - iw0 <= 0 ? 0 : (g.W - iw0 + sw - 1) / sw));
            const T* row = plane + ih * g.W;
            std::fill(dst, dst + t0, A(0));
            if (sw == 1) {  // the common case: a contiguous, vectorizable copy
              for (int64_t t = t0; t < t1; ++t) dst[t] = to_acc<A>(row[iw0 + t]);
            } else {
              for (int64_t t = t0; t < t1; ++t) dst[t] = to_acc<A>(row[iw0 + t * sw]);
            }
            std::fill(dst + t1, dst + len, A(0));
          }
          j += len;
        }
      }
}

template <class T>
void conv2d_typed(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                  Tensor& y) {
  using A = acc_t<T>;
  std::vector<A> wbuf, bbuf;
  const A* pw = values_as<A, T>(w, wbuf);  // [Cout, K]: group grp's rows are the GEMM's A
  const A* pbias = bias ? values_as<A, T>(*bias, bbuf) : nullptr;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  const int64_t cols = g.Ho * g.Wo;
  // Column tiles bound the im2col buffer (K x tile) and give a single image parallelism.
  const int64_t tile = std::max<int64_t>(
      1, std::min({cols, int64_t{1024}, std::max<int64_t>(64, (int64_t{1} << 20) / std::max<int64_t>(g.K, 1))}));
  const int64_t ntiles = (cols + tile - 1) / tile;
  parallel_for(g.N * g.groups * ntiles, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<A> col, res;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / (g.groups * ntiles), grp = t / ntiles % g.groups;
      const int64_t j0 = t % ntiles * tile, nc = std::min(tile, cols - j0);
      col.resize(static_cast<size_t>(g.K * nc));
      im2col(px + (n * g.C + grp * g.Cg) * g.H * g.W, g, j0, nc, col.data());
      T* out = py + (n * g.Cout + grp * g.Mg) * cols + j0;
      A* acc;
      int64_t ld;
      if constexpr (std::is_same_v<A, T>) {
        acc = out, ld = cols;  // accumulate straight into the output
      } else {
        res.resize(static_cast<size_t>(g.Mg * nc));
        acc = res.data(), ld = nc;
      }
      gemm<A>(g.Mg, nc, g.K, pw + grp * g.Mg * g.K, g.K, col.data(), nc, acc, ld);
      for (int64_t m = 0; m < g.Mg; ++m) {
        const A b = pbias ? pbias[grp * g.Mg + m] : A(0);
        for (int64_t j = 0; j < nc; ++j) out[m * cols + j] = from_acc<T>(A(acc[m * ld + j] + b));
      }
    }
  });
}

void conv2d_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  DType t = promote_types(in[0].dtype(), in[1].dtype());
  if (in.size() == 3) t = promote_types(t, in[2].dtype());
  reject_bool(n, std::array{t});
  const Tensor bias = in.size() == 3 ? as_dtype(in[2], t) : Tensor();
  const ConvGeom g = conv_geom(n, in[0].shape(), in[1].shape(), in.size() == 3 ? &bias : nullptr);
  out[0] = Tensor(t, {g.N, g.Cout, g.Ho, g.Wo});
  const Tensor x = as_dtype(in[0], t), w = as_dtype(in[1], t);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      conv2d_typed<T>(g, x, w, in.size() == 3 ? &bias : nullptr, out[0]);
  });
}

// --- gradient ops -----------------------------------------------------------------------------
// The conv gradients reuse conv2d's im2col and GEMM, one column tile of one image and group at a
// time, computing in float (double for float64) as conv2d does.

// Adds each entry of the column matrix `dcol` ([K, ncols], as im2col lays it out for output
// positions [j0, j0 + ncols)) back onto the input pixel it was read from: im2col's transpose.
template <class A>
void col2im_add(const A* dcol, const ConvGeom& g, int64_t j0, int64_t ncols, A* img) {
  const Window& w = g.win;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < w.kernel[1]; ++kj, dcol += ncols) {
        A* plane = img + c * g.H * g.W;
        for (int64_t j = 0; j < ncols; ++j) {
          const int64_t oh = (j0 + j) / g.Wo, ow = (j0 + j) % g.Wo;
          const int64_t ih = oh * w.stride[0] - w.pad[0] + ki * w.dilation[0];
          const int64_t iw = ow * w.stride[1] - w.pad[1] + kj * w.dilation[1];
          if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) plane[ih * g.W + iw] += dcol[j];
        }
      }
}

// Per image, group and column tile: d input = col2im(W_g^T dY_g), d weight += dY_g im2col(x)^T.
// `other` is the weight (input gradient) or the input (weight gradient); all in type A.
template <bool kInputGrad, class A>
void conv2d_grad_typed(const ConvGeom& g, const A* pdy, const A* po, A* pa) {
  const int64_t cols = g.Ho * g.Wo;
  const int64_t tile = std::max<int64_t>(1, std::min<int64_t>(cols, 1024));
  std::vector<A> wt;  // per group, W_g^T: [K, Mg]
  if constexpr (kInputGrad) {
    wt.resize(static_cast<size_t>(g.groups * g.K * g.Mg));
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t m = 0; m < g.Mg; ++m)
        for (int64_t k = 0; k < g.K; ++k)
          wt[static_cast<size_t>((grp * g.K + k) * g.Mg + m)] = po[(grp * g.Mg + m) * g.K + k];
  }
  std::vector<A> col, colt, res;
  for (int64_t img = 0; img < g.N; ++img)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t j0 = 0; j0 < cols; j0 += tile) {
        const int64_t nc = std::min(tile, cols - j0);
        const A* dyg = pdy + (img * g.Cout + grp * g.Mg) * cols + j0;  // [Mg, nc], ld cols
        col.resize(static_cast<size_t>(g.K * nc));
        if constexpr (kInputGrad) {
          gemm<A>(g.K, nc, g.Mg, wt.data() + grp * g.K * g.Mg, g.Mg, dyg, cols, col.data(), nc);
          col2im_add(col.data(), g, j0, nc, pa + (img * g.C + grp * g.Cg) * g.H * g.W);
        } else {
          im2col(po + (img * g.C + grp * g.Cg) * g.H * g.W, g, j0, nc, col.data());
          colt.resize(col.size());
          for (int64_t k = 0; k < g.K; ++k)
            for (int64_t j = 0; j < nc; ++j) colt[static_cast<size_t>(j * g.K + k)] = col[static_cast<size_t>(k * nc + j)];
          res.resize(static_cast<size_t>(g.Mg * g.K));
          gemm<A>(g.Mg, g.K, nc, dyg, cols, colt.data(), g.K, res.data(), g.K);
          A* dw = pa + grp * g.Mg * g.K;
          for (size_t i = 0; i < res.size(); ++i) dw[i] += res[i];
        }
      }
}

// conv2d_input_grad(dy, weight, like) and conv2d_weight_grad(input, dy, like) {conv2d's attrs}:
// the gradients of conv2d with respect to its input and weight, shaped like `like`.
template <bool kInputGrad>
void conv2d_grad_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& like = in[2];
  const Tensor& dy_in = kInputGrad ? in[0] : in[1];
  const Tensor& other = kInputGrad ? in[1] : in[0];  // the weight, or the input
  const Shape& xs = kInputGrad ? like.shape() : other.shape();
  const Shape& ws = kInputGrad ? other.shape() : like.shape();
  const ConvGeom g = conv_geom(n, xs, ws, nullptr);
  const Shape ys{g.N, g.Cout, g.Ho, g.Wo};
  INGOT_CHECK(dy_in.shape() == ys, n.op, ": the output gradient has shape ", to_string(dy_in.shape()),
              ", expected ", to_string(ys));
  const bool wide = dy_in.dtype() == DType::Float64 || other.dtype() == DType::Float64 || like.dtype() == DType::Float64;
  const DType t = wide ? DType::Float64 : DType::Float32;
  const Tensor dy = as_dtype(dy_in, t), o = as_dtype(other, t);
  Tensor acc(t, like.shape());
  if (wide) conv2d_grad_typed<kInputGrad>(g, dy.data<double>(), o.data<double>(), acc.data<double>());
  else conv2d_grad_typed<kInputGrad>(g, dy.data<float>(), o.data<float>(), acc.data<float>());
  out[0] = as_dtype(acc, like.dtype());
}

void conv2d_grad_shape(ShapeInfer& s) {
  if (s.has_rank(s.in(2))) s.set_dims(s.out(), s.dims(s.in(2)));
}

void dtype_like_input2(const Node& n, std::span<const DType> in, std::span<DType> out) {
  reject_bool(n, in);
  out[0] = in[2];
}

// --- gradient rules ---------------------------------------------------------------------------

// Swaps the last two axes.
ValueId transpose_last2(VjpContext& c, ValueId v) {
  std::vector<int64_t> perm(static_cast<size_t>(c.rank(v)));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return c.op("transpose", {v}, {{"perm", perm}});
}

// The gradient of a matrix b that every batch entry of a shares ([..., M, K] @ [K, N], a and g
// of static shape): one product over all the batch's rows, [rows, K]ᵀ @ [rows, N], instead of a
// product per entry summed afterwards, which writes and reads back a [K, N] partial per entry (a
// training step's weight gradients).
ValueId shared_matrix_grad(VjpContext& c, ValueId a, ValueId g) {
  const auto rows_of = [&](ValueId v) {
    const Shape s = to_shape(c.shape(v));
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < s.size(); ++d) rows *= s[d];
    return c.op("reshape", {v}, {{"shape", std::vector<int64_t>{rows, s.back()}}});
  };
  return c.op("matmul", {transpose_last2(c, rows_of(a)), rows_of(g)});
}

// 1-D operands are promoted to matrices as the forward did ([K] -> [1, K] for a, [K, 1] for
// b), the gradient computed for the matrices, summed over broadcast batch dims and squeezed back.
void matmul_vjp(VjpContext& c) {
  const ValueId a = c.in(0), b = c.in(1);
  const bool a1 = c.rank(a) == 1, b1 = c.rank(b) == 1;
  const ValueId a2 = a1 ? c.expand_dims(a, {0}) : a;
  const ValueId b2 = b1 ? c.expand_dims(b, {-1}) : b;
  ValueId g = c.grad_out();
  if (a1 && b1) g = c.expand_dims(g, {0, 1});
  else if (a1) g = c.expand_dims(g, {-2});
  else if (b1) g = c.expand_dims(g, {-1});
  if (c.needs_grad(0)) {
    const ValueId da = c.sum_to_like(c.op("matmul", {g, transpose_last2(c, b2)}), a2);
    c.set_grad(0, a1 ? c.reshape_like(da, a) : da);
  }
  if (c.needs_grad(1)) {
    const bool shared = c.rank(b2) == 2 && c.rank(a2) > 2 && is_static(c.shape(a2)) && is_static(c.shape(g));
    const ValueId db = shared ? shared_matrix_grad(c, a2, g) : c.sum_to_like(c.op("matmul", {transpose_last2(c, a2), g}), b2);
    c.set_grad(1, b1 ? c.reshape_like(db, b) : db);
  }
}

void conv2d_vjp(VjpContext& c) {
  const ValueId g = c.grad_out();
  if (c.needs_grad(0)) c.set_grad(0, c.op("conv2d_input_grad", {g, c.in(1), c.in(0)}, c.attrs()));
  if (c.needs_grad(1)) c.set_grad(1, c.op("conv2d_weight_grad", {c.in(0), g, c.in(1)}, c.attrs()));
  if (c.num_inputs() == 3 && c.needs_grad(2))
    c.set_grad(2, c.op("sum", {g}, {{"axes", std::vector<int64_t>{0, 2, 3}}, {"keepdims", int64_t{0}}}));
}

// conv2d_input_grad(dy, weight, like) is linear in dy and in weight (a transposed convolution,
// what ONNX's ConvTranspose imports to): its adjoint in dy is the convolution itself, in weight
// the weight gradient of that convolution with the cotangent as its input.
void conv2d_input_grad_vjp(VjpContext& c) {
  const ValueId g = c.grad_out();
  if (c.needs_grad(0)) c.set_grad(0, c.op("conv2d", {g, c.in(1)}, c.attrs()));
  if (c.needs_grad(1)) c.set_grad(1, c.op("conv2d_weight_grad", {g, c.in(0), c.in(1)}, c.attrs()));
}

}  // namespace

void register_linalg_ops() {
  register_op(OpDef{.name = "matmul",
                    .min_inputs = 2,
                    .max_inputs = 2,
                    .fusion = FusionClass::Dense,
                    .shape = matmul_shape,
                    .dtype = dtype_promoted,
                    .eval = matmul_eval,
                    .doc = "NumPy matmul: batch dims broadcast, 1-D operands promoted and squeezed",
                    .vjp = matmul_vjp});
  register_op(OpDef{.name = "conv2d",
                    .min_inputs = 2,
                    .max_inputs = 3,
                    .fusion = FusionClass::Dense,
                    .shape = conv2d_shape,
                    .dtype = dtype_promoted,
                    .eval = conv2d_eval,
                    .doc = "2-D convolution, NCHW, weight [Cout, Cin/groups, kh, kw], optional bias",
                    .vjp = conv2d_vjp});
  // Gradients of conv2d; `like` operands are read only for their shapes.
  register_op(OpDef{.name = "conv2d_input_grad",
                    .min_inputs = 3,
                    .max_inputs = 3,
                    .shape = conv2d_grad_shape,
                    .dtype = dtype_like_input2,
                    .eval = conv2d_grad_eval<true>,
                    .doc = "conv2d_input_grad(dy, weight, like_input) {conv2d's attrs}: d conv2d / d input",
                    .vjp = conv2d_input_grad_vjp});
  register_op(OpDef{.name = "conv2d_weight_grad",
                    .min_inputs = 3,
                    .max_inputs = 3,
                    .shape = conv2d_grad_shape,
                    .dtype = dtype_like_input2,
                    .eval = conv2d_grad_eval<false>,
                    .doc = "conv2d_weight_grad(input, dy, like_weight) {conv2d's attrs}: d conv2d / d weight"});
}

}  // namespace ingot::ops
