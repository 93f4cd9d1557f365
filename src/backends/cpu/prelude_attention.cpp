// The prelude's attention kernel (scaled_dot_product_attention, src/ops/attention.cpp): flash
// style, so the [Sq, Sk] score matrix is never written to memory, with the products in the BLAS
// library's kernels.
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kAttentionPrelude = R"IGPRELUDE(
// ---- scaled_dot_product_attention ----
// One thread's C = alpha A op(B) + beta C for the kernel's blocks: float32 through the host's
// oneDNN sgemm where it has one (about 1.4x single-threaded OpenBLAS on 128 x 512 x 64 blocks
// here) and library products are on, else ig_gemm_serial.
inline void ig_block_gemm(const ig_ctx* ctx, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (ig_host_sgemm(ctx, false, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  ig_gemm_serial(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void ig_block_gemm(const ig_ctx*, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  ig_gemm_serial(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Work units: (leading index b, block of kQ query rows), run in parallel. A unit walks the keys
// in blocks of kK; per block, one GEMM scores its rows (S = scale Q K^T, [rows, n], in the
// thread's scratch: 256 KB for float32, which stays in L2), a pass over each row masks the scores
// and folds them into the row's running max m and sum l (an online softmax: the row's output so
// far is rescaled by exp(m_old - m_new)), leaving the probabilities in S, and a second GEMM adds
// P V_block to the rows' outputs. So the [Sq, Sk] scores are never written out whole, and both
// products run in a library's kernels (ig_block_gemm: one thread each; the units are the
// parallelism). Blocks of 128 x 512 measured fastest of 64-256 x 256-1024 on float32 [8, 4, 512,
// 64] (Sapphire Rapids, 2 threads): larger blocks pack fewer operands per multiply-add. Causal
// units score no key past their last row's last visible one (when every v is finite: see
// skip_hidden). A row that sees no key ends with
// l = 0 and divides 0 by 0: NaN, as the reference's softmax over nothing but -inf. kMask: 0 none,
// 1 bool (nonzero = attend), 2 added to the scores; broadcast through mstride[0..nlead+1] over
// [lead..., Sq, Sk]. T is float or double (halves run the reference).
template <class T, int kMask>
int ig_attention(const ig_ctx* ctx, const T* __restrict q, const T* __restrict k, const T* __restrict v,
                 const void* mask, T* __restrict y, int64_t batch, int64_t hq, int64_t hk, int64_t sq, int64_t sk,
                 int64_t d, int64_t dv, double scale, int causal, int64_t offset, int nlead, const int64_t* lead,
                 const int64_t* mstride) {
  constexpr int64_t kQ = 128, kK = 512;
  constexpr T kHidden = -std::numeric_limits<T>::infinity();
  if (batch == 0 || sq == 0 || dv == 0) return 0;
  if (hk <= 0 || hq % hk != 0) return ig_fail(ctx, "scaled_dot_product_attention: key/value heads must divide the query heads");
  const int64_t group = hq / hk, qblocks = (sq + kQ - 1) / kQ;
  const T tscale = static_cast<T>(scale);
  int failed = 0;
  // A hidden key still adds its probability (0) times its v row to the output, as the reference
  // and attention written out do: 0 * inf or 0 * NaN is NaN. So the causal skip (which leaves
  // such rows out) only runs when every v is finite (found by the program fuzzer, seed 90019).
  bool v_finite = true;
  if (causal) {
    const int64_t nv = (batch / hq) * hk * sk * dv;
    #pragma omp parallel for reduction(&&:v_finite) if(ig_big(nv))
    for (int64_t i = 0; i < nv; ++i) v_finite = v_finite && std::isfinite(v[i]);
  }
  const bool skip_hidden = causal && v_finite;
  #pragma omp parallel if(ig_big(batch * sq * sk * (d + dv) / 16) && batch * qblocks > 1)
  {
    // Per thread: a block of scores (then probabilities), and the block's rows' m, l and output.
    T* s = static_cast<T*>(std::malloc(sizeof(T) * static_cast<size_t>(kQ * kK + 2 * kQ + kQ * dv)));
    if (s == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    T* m = s + kQ * kK;
    T* l = m + kQ;
    T* acc = l + kQ;
    #pragma omp for schedule(dynamic)
    for (int64_t unit = 0; unit < batch * qblocks; ++unit) {
      if (s == nullptr) continue;
      const int64_t b = unit / qblocks, i0 = (unit % qblocks) * kQ, rows = sq - i0 < kQ ? sq - i0 : kQ;
      const int64_t kvb = (b / hq) * hk + (b % hq) / group;
      const T* qb = q + (b * sq + i0) * d;
      const T* kb = k + kvb * sk * d;
      const T* vb = v + kvb * sk * dv;
      int64_t mbase = 0;
      if (kMask != 0) {
        int64_t rest = b;
        for (int a = nlead - 1; a >= 0; --a) {
          mbase += (rest % lead[a]) * mstride[a];
          rest /= lead[a];
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        m[r] = kHidden;
        l[r] = 0;
      }
      for (int64_t e = 0; e < rows * dv; ++e) acc[e] = 0;
      for (int64_t j0 = 0; j0 < sk; j0 += kK) {
        // Causal: no key after the unit's last row's last visible key is scored.
        const int64_t end = skip_hidden ? (i0 + rows + offset < sk ? i0 + rows + offset : sk) : sk;
        if (j0 >= end) break;
        const int64_t n = end - j0 < kK ? end - j0 : kK;
        ig_block_gemm(ctx, true, rows, n, d, tscale, qb, d, kb + j0 * d, d, T(0), s, kK);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          T* sr = s + r * kK;
          if (kMask == 1) {
            const unsigned char* mr = static_cast<const unsigned char*>(mask) + mbase + i * mstride[nlead];
            const int64_t ms = mstride[nlead + 1];
            for (int64_t jj = 0; jj < n; ++jj)
              if (mr[(j0 + jj) * ms] == 0) sr[jj] = kHidden;
          } else if (kMask == 2) {
            const T* mr = static_cast<const T*>(mask) + mbase + i * mstride[nlead];
            const int64_t ms = mstride[nlead + 1];
            for (int64_t jj = 0; jj < n; ++jj) sr[jj] += mr[(j0 + jj) * ms];
          }
          if (causal)
            for (int64_t jj = i + offset - j0 + 1 > 0 ? i + offset - j0 + 1 : 0; jj < n; ++jj) sr[jj] = kHidden;
          T top = kHidden;
          #pragma omp simd reduction(max:top)
          for (int64_t jj = 0; jj < n; ++jj) top = sr[jj] > top ? sr[jj] : top;
          const T mnew = top > m[r] ? top : m[r];
          if (mnew == kHidden) {  // nothing seen yet: this block adds nothing to the row
            #pragma omp simd
            for (int64_t jj = 0; jj < n; ++jj) sr[jj] = 0;
            continue;
          }
          const T alpha = m[r] == kHidden ? T(0) : ig_exp<T>(m[r] - mnew);
          T sum = 0;
          #pragma omp simd reduction(+:sum)
          for (int64_t jj = 0; jj < n; ++jj) {
            sr[jj] = ig_exp<T>(sr[jj] - mnew);
            sum += sr[jj];
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mnew;
          if (alpha != T(1)) {
            T* ar = acc + r * dv;
            #pragma omp simd
            for (int64_t e = 0; e < dv; ++e) ar[e] *= alpha;
          }
        }
        ig_block_gemm(ctx, false, rows, dv, n, T(1), s, kK, vb + j0 * dv, dv, T(1), acc, dv);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* yr = y + (b * sq + i0 + r) * dv;
        const T inv = T(1) / l[r];  // l = 0: every key hidden, 0 * inf = NaN
        #pragma omp simd
        for (int64_t e = 0; e < dv; ++e) yr[e] = l[r] == T(0) ? acc[r * dv + e] / l[r] : acc[r * dv + e] * inv;
      }
    }
    std::free(s);
  }
  if (failed) return ig_fail(ctx, "scaled_dot_product_attention: out of memory for the kernel's scratch");
  return 0;
}
)IGPRELUDE";

}  // namespace ingot::cpu
