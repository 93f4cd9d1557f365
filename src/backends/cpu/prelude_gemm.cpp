// The prelude's products (part of prelude()): ig_gemm through OpenBLAS on the OpenMP threads, or
// plain loops where no BLAS library was found; one thread's ig_gemm_serial; the plain product the
// attention and conv kernels block themselves; conv2d as im2col + gemm (where oneDNN does not run it).
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kGemmBlasPrelude = R"IGPRELUDE(
// ---- gemm: OpenBLAS on the OpenMP threads (declared here, so no header is needed) ----
extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
extern "C" void cblas_dgemm(int, int, int, int, int, int, double, const double*, int,
                            const double*, int, double, double*, int);
extern "C" void openblas_set_num_threads(int);
extern "C" int omp_get_max_threads();
// OpenBLAS's own (pthread) pool and the OpenMP pool that the other kernels and oneDNN use spin
// against each other when both want every core: a training step alternating them ran up to 10x
// slower on 2 cores. So OpenBLAS runs single-threaded (process-wide, set when this library
// loads) and ig_gemm splits a product into blocks over the OpenMP threads.
static const bool ig_blas_single_threaded = (openblas_set_num_threads(1), true);

inline void ig_blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float* C, int64_t ldc) {
  cblas_sgemm(101, ta ? 112 : 111, tb ? 112 : 111, int(M), int(N), int(K), 1.0f, A, int(lda), B,
              int(ldb), 0.0f, C, int(ldc));
}
inline void ig_blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
                    const double* B, int64_t ldb, double* C, int64_t ldc) {
  cblas_dgemm(101, ta ? 112 : 111, tb ? 112 : 111, int(M), int(N), int(K), 1.0, A, int(lda), B,
              int(ldb), 0.0, C, int(ldc));
}

// One thread's C[M,N] = alpha A[M,K] op(B) + beta C for kernels that block a product themselves
// (attention): op(B) is B [K,N] or, with tb, B stored [N,K]. ig_library_gemm: such kernels may
// call the host's library products too (ingot_host::sgemm).
inline constexpr bool ig_library_gemm = true;
inline void ig_gemm_serial(bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(101, 111, tb ? 112 : 111, int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}
inline void ig_gemm_serial(bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                           const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(101, 111, tb ? 112 : 111, int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

// C[M,N] = op(A) op(B), row-major. op(A) is A [M,K] with row stride lda or, with ta, the
// transpose of A stored [K,M]; likewise op(B) from B [K,N] or, with tb, B stored [N,K].
template <class T>
inline void ig_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) { for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0)); return; }
  // Blocks of the longer side, whole multiples of 16 rows/columns (the library's micro-tiles).
  const bool by_rows = M >= N;
  const int64_t len = by_rows ? M : N;
  const int64_t parts = ig_big(M * N * K / 16) ? std::min<int64_t>(omp_get_max_threads(), (len + 15) / 16) : 1;
  if (parts <= 1) { ig_blas(ta, tb, M, N, K, A, lda, B, ldb, C, ldc); return; }
  const int64_t block = ((len + parts - 1) / parts + 15) / 16 * 16;
  #pragma omp parallel for num_threads(int(parts))
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t s = p * block, e = std::min(len, s + block);
    if (s >= e) continue;
    if (by_rows) ig_blas(ta, tb, e - s, N, K, ta ? A + s : A + s * lda, lda, B, ldb, C + s * ldc, ldc);
    else ig_blas(ta, tb, M, e - s, K, A, lda, tb ? B + s * ldb : B + s, ldb, C + s, ldc);
  }
}
)IGPRELUDE";

const char* const kGemmLoopsPrelude = R"IGPRELUDE(
// ---- gemm: plain loops (no BLAS library was found when this file was generated) ----
// C[M,N] = op(A) op(B), row-major, with ig_gemm's (BLAS form) operand conventions.
template <class T>
inline void ig_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T* C, int64_t ldc) {
  #pragma omp parallel for if(ig_big(M * N * K) && M > 1)
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) c[j] = T(0);
    for (int64_t k = 0; k < K; ++k) {
      const T a = ta ? A[k * lda + i] : A[i * lda + k];
      if (tb) {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      } else {
        const T* b = B + k * ldb;
        #pragma omp simd
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
  }
}
)IGPRELUDE";

const char* const kGemmSerialLoopsPrelude = R"IGPRELUDE(
// One thread's C[M,N] = alpha A[M,K] op(B) + beta C (kGemmBlas's ig_gemm_serial, in loops), and
// no library products at all (CpuOptions::blas false, or no BLAS library found).
inline constexpr bool ig_library_gemm = false;
template <class T>
inline void ig_gemm_serial(bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                           int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    const T* a = A + i * lda;
    for (int64_t j = 0; j < N; ++j) c[j] = beta == T(0) ? T(0) : c[j] * beta;
    if (tb) {
      for (int64_t j = 0; j < N; ++j) {
        const T* b = B + j * ldb;
        T sum = 0;
        #pragma omp simd reduction(+:sum)
        for (int64_t k = 0; k < K; ++k) sum += a[k] * b[k];
        c[j] += alpha * sum;
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        const T ak = alpha * a[k];
        const T* b = B + k * ldb;
        #pragma omp simd
        for (int64_t j = 0; j < N; ++j) c[j] += ak * b[j];
      }
    }
  }
}
)IGPRELUDE";

const char* const kGemmPlainPrelude = R"IGPRELUDE(
// C[M,N] = A[M,K] (row stride lda) * B[K,N] (row stride ldb); row-major.
template <class T>
inline void ig_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                    int64_t ldb, T* C, int64_t ldc) {
  ig_gemm(false, false, M, N, K, A, lda, B, ldb, C, ldc);
}

extern "C" int omp_get_max_threads();
extern "C" void omp_set_num_threads(int);
// A library product's OpenMP team while this lives: `threads` threads when > 0 (else the
// caller's count), the caller's count restored after.
struct ig_library_threads {
  int before;
  explicit ig_library_threads(int threads) : before(threads > 0 ? omp_get_max_threads() : 0) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ig_library_threads() {
    if (before > 0) omp_set_num_threads(before);
  }
};
// C = alpha op(A) op(B) + beta C in the host's oneDNN sgemm; false where there is none, library
// products are off, or it refused (the caller then computes it itself).
inline bool ig_host_sgemm(const ig_ctx* ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  return ig_library_gemm && ctx->host->sgemm != nullptr &&
         ctx->host->sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0;
}
// The generated matmuls: C = op(A) op(B), float32 through the host's oneDNN sgemm (on its own
// OpenMP threads, `threads` of them when > 0) where it has one and library products are on:
// 1.5-2.3x ig_gemm's OpenBLAS blocks on a transformer's [128, 768] x [768, 3072] here. Else, and
// for other types, ig_gemm.
template <class T>
inline void ig_matmul(const ig_ctx* ctx, int threads, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
                      int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc) {
  if constexpr (std::is_same<T, float>::value) {
    if (ig_library_gemm && ctx->host->sgemm != nullptr && M > 0 && N > 0 && K > 0) {
      const ig_library_threads team(threads);
      if (ig_host_sgemm(ctx, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc)) return;
    }
  }
  ig_gemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
}

// A product over batch dims (C [batch..., M, N] contiguous; nb batch dims of sizes batch[i], the
// operands sa[i] / sb[i] elements apart along them, 0 where one broadcasts): float32 as one call
// of the host's batched oneDNN matmul where it has one and library products are on, parallel over
// the batch (0.25-0.64x the time of a loop of sgemm calls on attention-sized heads, 2026-11-29).
// False otherwise (and for types without such a call: this template): the caller loops over the
// batch with ig_matmul.
template <class T>
inline bool ig_matmul_batched(const ig_ctx*, int, bool, bool, int32_t, const int64_t*, const int64_t*, const int64_t*,
                              int64_t, int64_t, int64_t, const T*, int64_t, const T*, int64_t, T*) {
  return false;
}
inline bool ig_matmul_batched(const ig_ctx* ctx, int threads, bool ta, bool tb, int32_t nb, const int64_t* batch,
                              const int64_t* sa, const int64_t* sb, int64_t M, int64_t N, int64_t K, const float* A,
                              int64_t lda, const float* B, int64_t ldb, float* C) {
  if (!ig_library_gemm || ctx->host->gemm_batched == nullptr) return false;
  const ig_library_threads team(threads);
  return ctx->host->gemm_batched(ta ? 'T' : 'N', tb ? 'T' : 'N', 0, nb, batch, sa, sb, M, N, K, A, lda, B, ldb, C) == 0;
}

// bfloat16 products as the reference computes them (float32 accumulation, the result rounded once
// to bfloat16): the host's native bf16 matmul into float32 where it has one (AVX512_BF16, AMX),
// else both operands widened to float32 (exact) and the float32 product.
inline void ig_matmul(const ig_ctx* ctx, int threads, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      const ig_bf16* A, int64_t lda, const ig_bf16* B, int64_t ldb, ig_bf16* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  float* c = static_cast<float*>(std::malloc(sizeof(float) * size_t(M * N)));
  if (c == nullptr) throw std::bad_alloc();
  bool done = false;
  if (ig_library_gemm && ctx->host->gemm_bf16 != nullptr && K > 0) {
    const ig_library_threads team(threads);
    done = ctx->host->gemm_bf16(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, ig_raw(A), lda, ig_raw(B), ldb, c, N) == 0;
  }
  if (!done) {  // each operand as stored ([rows, cols], row stride ld), widened
    auto widened = [](const ig_bf16* p, int64_t rows, int64_t cols, int64_t ld) {
      float* w = static_cast<float*>(std::malloc(sizeof(float) * size_t(rows * cols > 0 ? rows * cols : 1)));
      if (w == nullptr) throw std::bad_alloc();
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) w[i * cols + j] = static_cast<float>(p[i * ld + j]);
      return w;
    };
    float* a = widened(A, ta ? K : M, ta ? M : K, lda);
    float* b = widened(B, tb ? N : K, tb ? K : N, ldb);
    ig_matmul(ctx, threads, ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, c, N);
    std::free(a);
    std::free(b);
  }
  for (int64_t i = 0; i < M; ++i) {  // through the bits: a struct store does not vectorize
    uint16_t* ci = ig_raw(C + i * ldc);
    #pragma omp simd
    for (int64_t j = 0; j < N; ++j) ci[j] = ig_bf16(c[i * N + j]).bits;
  }
  std::free(c);
}

// bfloat16 products over batch dims: one call of the host's batched bf16 matmul into float32
// where it runs bf16 natively, each result rounded once to bfloat16, as the loop's products are.
inline bool ig_matmul_batched(const ig_ctx* ctx, int threads, bool ta, bool tb, int32_t nb, const int64_t* batch,
                              const int64_t* sa, const int64_t* sb, int64_t M, int64_t N, int64_t K,
                              const ig_bf16* A, int64_t lda, const ig_bf16* B, int64_t ldb, ig_bf16* C) {
  if (!ig_library_gemm || ctx->host->gemm_batched == nullptr || ctx->host->gemm_bf16 == nullptr) return false;
  int64_t total = M * N;
  for (int32_t i = 0; i < nb; ++i) total *= batch[i];
  if (total <= 0) return false;
  float* c = static_cast<float*>(std::malloc(sizeof(float) * size_t(total)));
  if (c == nullptr) throw std::bad_alloc();
  bool done = false;
  {
    const ig_library_threads team(threads);
    done = ctx->host->gemm_batched(ta ? 'T' : 'N', tb ? 'T' : 'N', 1, nb, batch, sa, sb, M, N, K, ig_raw(A), lda,
                                   ig_raw(B), ldb, c) == 0;
  }
  if (done) {
    uint16_t* ci = ig_raw(C);
    #pragma omp simd
    for (int64_t i = 0; i < total; ++i) ci[i] = ig_bf16(c[i]).bits;
  }
  std::free(c);
  return done;
}
)IGPRELUDE";

const char* const kConvPrelude = R"IGPRELUDE(
// ---- conv2d (NCHW, weights [Cout, Cin/groups, kh, kw]): im2col + gemm per image and group ----
template <class T>
int ig_conv2d(const ig_ctx* ctx, const T* __restrict x, const T* __restrict w, const T* bias,
              T* __restrict y, int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Cout,
              int64_t KH, int64_t KW, int64_t OH, int64_t OW, int64_t sh, int64_t sw, int64_t ph,
              int64_t pw, int64_t dh, int64_t dw, int64_t groups) {
  const int64_t cin_g = Cin / groups, cout_g = Cout / groups, rows = cin_g * KH * KW, cols = OH * OW;
  T* col = nullptr;
  if (rows * cols > 0) {
    col = static_cast<T*>(std::aligned_alloc(64, (size_t(rows * cols) * sizeof(T) + 63) / 64 * 64));
    if (col == nullptr) return ig_fail(ctx, "conv2d: out of memory for the im2col buffer");
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const T* xg = x + (n * Cin + g * cin_g) * H * W;
      #pragma omp parallel for if(ig_big(rows * cols) && rows > 1)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t c = r / (KH * KW), kh = (r / KW) % KH, kw = r % KW;
        T* dst = col + r * cols;
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t ih = oh * sh - ph + kh * dh;
          T* d = dst + oh * OW;
          if (ih < 0 || ih >= H) { for (int64_t ow = 0; ow < OW; ++ow) d[ow] = T(0); continue; }
          const T* src = xg + (c * H + ih) * W;
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t iw = ow * sw - pw + kw * dw;
            d[ow] = (iw >= 0 && iw < W) ? src[iw] : T(0);
          }
        }
      }
      T* yg = y + (n * Cout + g * cout_g) * cols;
      ig_gemm(cout_g, cols, rows, w + g * cout_g * rows, rows, col, cols, yg, cols);
      if (rows == 0) for (int64_t i = 0; i < cout_g * cols; ++i) yg[i] = T(0);
    }
    if (bias != nullptr) {
      T* yn = y + n * Cout * cols;
      #pragma omp parallel for if(ig_big(Cout * cols) && Cout > 1)
      for (int64_t c = 0; c < Cout; ++c)
        for (int64_t i = 0; i < cols; ++i) yn[c * cols + i] += bias[c];
    }
  }
  std::free(col);
  return 0;
}
)IGPRELUDE";

}  // namespace ingot::cpu
