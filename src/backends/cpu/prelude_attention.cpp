// The prelude's attention kernel (scaled_dot_product_attention, src/ops/attention.cpp): flash
// style, so the [Sq, Sk] score matrix is never written to memory.
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kAttentionPrelude = R"IGPRELUDE(
// ---- scaled_dot_product_attention ----
// Work units: (leading index b, block of kQ query rows), run in parallel. A unit walks the keys
// in blocks of kK: it copies the block of k transposed ([D][kK], so scores vectorize over keys),
// scores each of its rows against it, and folds the block into the row's running max m, sum l
// and output accumulator (an online softmax: earlier blocks are rescaled by exp(m_old - m_new)).
// Causal units stop at the first block no row of theirs may see. A row that sees no key ends with
// l = 0 and divides 0 by 0: NaN, as the reference's softmax over nothing but -inf.
// kMask: 0 none, 1 bool (nonzero = attend), 2 added to the scores; broadcast through
// mstride[0..nlead+1] over [lead..., Sq, Sk].
template <class T, int kMask>
int ig_attention(const ig_ctx* ctx, const T* __restrict q, const T* __restrict k, const T* __restrict v,
                 const void* mask, T* __restrict y, int64_t batch, int64_t hq, int64_t hk, int64_t sq, int64_t sk,
                 int64_t d, int64_t dv, double scale, int causal, int64_t offset, int nlead, const int64_t* lead,
                 const int64_t* mstride) {
  using C = ig_c<T>;
  constexpr int64_t kQ = 32, kK = 64;
  if (batch == 0 || sq == 0 || dv == 0) return 0;
  if (hk <= 0 || hq % hk != 0) return ig_fail(ctx, "scaled_dot_product_attention: key/value heads must divide the query heads");
  const int64_t group = hq / hk, qblocks = (sq + kQ - 1) / kQ;
  const C cscale = static_cast<C>(scale);
  int failed = 0;
  #pragma omp parallel if(ig_big(batch * sq * sk * (d + dv) / 16) && batch * qblocks > 1)
  {
    // Per thread: k's block transposed, one row's scores, and the block's accumulators.
    C* kt = static_cast<C*>(std::malloc(sizeof(C) * static_cast<size_t>(d * kK + kK + kQ * (dv + 2))));
    if (kt == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    C* s = kt + d * kK;
    C* m = s + kK;
    C* l = m + kQ;
    C* acc = l + kQ;
    #pragma omp for schedule(dynamic)
    for (int64_t unit = 0; unit < batch * qblocks; ++unit) {
      if (kt == nullptr) continue;
      const int64_t b = unit / qblocks, i0 = (unit % qblocks) * kQ, rows = sq - i0 < kQ ? sq - i0 : kQ;
      const int64_t kvb = (b / hq) * hk + (b % hq) / group;
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
        m[r] = -std::numeric_limits<C>::infinity();
        l[r] = 0;
        for (int64_t e = 0; e < dv; ++e) acc[r * dv + e] = 0;
      }
      for (int64_t j0 = 0; j0 < sk; j0 += kK) {
        if (causal && j0 > i0 + rows - 1 + offset) break;  // later keys are hidden from every row here
        const int64_t n = sk - j0 < kK ? sk - j0 : kK;
        for (int64_t jj = 0; jj < n; ++jj)
          for (int64_t e = 0; e < d; ++e) kt[e * kK + jj] = static_cast<C>(kb[(j0 + jj) * d + e]);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          const T* qi = q + (b * sq + i) * d;
          #pragma omp simd
          for (int64_t jj = 0; jj < n; ++jj) s[jj] = 0;
          for (int64_t e = 0; e < d; ++e) {
            const C qe = static_cast<C>(qi[e]) * cscale;
            const C* kr = kt + e * kK;
            #pragma omp simd
            for (int64_t jj = 0; jj < n; ++jj) s[jj] += qe * kr[jj];
          }
          if (kMask == 1) {
            const unsigned char* mr = static_cast<const unsigned char*>(mask) + mbase + i * mstride[nlead];
            const int64_t ms = mstride[nlead + 1];
            for (int64_t jj = 0; jj < n; ++jj)
              if (mr[(j0 + jj) * ms] == 0) s[jj] = -std::numeric_limits<C>::infinity();
          } else if (kMask == 2) {
            const T* mr = static_cast<const T*>(mask) + mbase + i * mstride[nlead];
            const int64_t ms = mstride[nlead + 1];
            for (int64_t jj = 0; jj < n; ++jj) s[jj] += static_cast<C>(mr[(j0 + jj) * ms]);
          }
          if (causal)
            for (int64_t jj = i + offset - j0 + 1; jj < n; ++jj)
              if (jj >= 0) s[jj] = -std::numeric_limits<C>::infinity();
          C top = -std::numeric_limits<C>::infinity();
          #pragma omp simd reduction(max:top)
          for (int64_t jj = 0; jj < n; ++jj) top = s[jj] > top ? s[jj] : top;
          const C mnew = top > m[r] ? top : m[r];
          if (mnew == -std::numeric_limits<C>::infinity()) continue;  // nothing seen yet
          const C alpha = m[r] == -std::numeric_limits<C>::infinity() ? C(0) : ig_exp<C>(m[r] - mnew);
          C sum = 0;
          #pragma omp simd reduction(+:sum)
          for (int64_t jj = 0; jj < n; ++jj) {
            s[jj] = ig_exp<C>(s[jj] - mnew);
            sum += s[jj];
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mnew;
          C* ar = acc + r * dv;
          if (alpha != C(1)) {
            #pragma omp simd
            for (int64_t e = 0; e < dv; ++e) ar[e] *= alpha;
          }
          for (int64_t jj = 0; jj < n; ++jj) {
            const C p = s[jj];
            if (p == C(0)) continue;
            const T* vr = vb + (j0 + jj) * dv;
            #pragma omp simd
            for (int64_t e = 0; e < dv; ++e) ar[e] += p * static_cast<C>(vr[e]);
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* yr = y + (b * sq + i0 + r) * dv;
        const C inv = C(1) / l[r];  // l = 0: every key hidden, 0 * inf = NaN
        for (int64_t e = 0; e < dv; ++e) yr[e] = static_cast<T>(l[r] == C(0) ? acc[r * dv + e] / l[r] : acc[r * dv + e] * inv);
      }
    }
    std::free(kt);
  }
  if (failed) return ig_fail(ctx, "scaled_dot_product_attention: out of memory for the kernel's scratch");
  return 0;
}
)IGPRELUDE";

}  // namespace ingot::cpu
