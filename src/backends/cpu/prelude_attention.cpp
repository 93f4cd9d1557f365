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

// Where an operand's rows are. Dense: [units, rows, width], units = outer x heads. Swapped: the
// operand is stored [outer, rows, heads, width], the layout before a transpose of the head split
// (0, 2, 1, 3) that the generated code folds into the kernel instead of writing out; each head's
// rows are then heads x width apart (a BLAS leading dimension). `swapped` (ig_attention's and
// ig_attention_grad's last argument) holds a bit per operand, in argument order.
struct ig_rows {
  int64_t heads, rows, width;
  bool swapped;
  int64_t at(int64_t unit, int64_t i) const {  // unit's row i, in elements
    return swapped ? ((unit / heads) * rows + i) * heads * width + (unit % heads) * width : (unit * rows + i) * width;
  }
  int64_t ld() const { return swapped ? heads * width : width; }
};

// Where unit b's mask starts: its leading index through the mask's broadcast strides.
inline int64_t ig_mask_base(int64_t b, int nlead, const int64_t* lead, const int64_t* mstride) {
  int64_t base = 0;
  for (int a = nlead - 1; a >= 0; --a) {
    base += (b % lead[a]) * mstride[a];
    b /= lead[a];
  }
  return base;
}

// Block scores s[r * ld + jj] of query rows i0 + r and keys j0 + jj, masked: a bool mask's hidden
// keys (and, causal, the keys past row i's i + offset) become -inf; a float mask is added.
// A float mask holds M values (T, or bfloat16 for the bfloat16 kernel's float32 scores).
template <class T, int kMask, class M = T>
void ig_mask_scores(T* s, int64_t ld, int64_t rows, int64_t n, int64_t i0, int64_t j0, const void* mask,
                    int64_t mbase, int nlead, const int64_t* mstride, int causal, int64_t offset) {
  constexpr T kHidden = -std::numeric_limits<T>::infinity();
  const int64_t ms = kMask != 0 ? mstride[nlead + 1] : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    T* sr = s + r * ld;
    if (kMask == 1) {
      const unsigned char* mr = static_cast<const unsigned char*>(mask) + mbase + i * mstride[nlead];
      for (int64_t jj = 0; jj < n; ++jj)
        if (mr[(j0 + jj) * ms] == 0) sr[jj] = kHidden;
    } else if (kMask == 2) {
      const M* mr = static_cast<const M*>(mask) + mbase + i * mstride[nlead];
      for (int64_t jj = 0; jj < n; ++jj) sr[jj] += static_cast<T>(mr[(j0 + jj) * ms]);
    }
    if (causal)
      for (int64_t jj = i + offset - j0 + 1 > 0 ? i + offset - j0 + 1 : 0; jj < n; ++jj) sr[jj] = kHidden;
  }
}

// One block of the online softmax over rows' masked scores s (row stride ld): folds the block into each
// row's running max m and sum l, rescales the row's output so far (acc, [rows, dv]) and leaves
// the block's unnormalized probabilities in s.
template <class T>
void ig_softmax_block(T* s, int64_t ld, int64_t rows, int64_t n, T* m, T* l, T* acc, int64_t dv) {
  constexpr T kHidden = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * ld;
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
}

// C = alpha A^T B + beta C for the backward's blocks, A stored [K, M] (row stride lda): the host's
// sgemm reads it transposed in place; otherwise A^T is written into `scratch` ([M, K]) first.
template <class T>
inline void ig_block_gemm_at(const ig_ctx* ctx, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                             const T* B, int64_t ldb, T beta, T* C, int64_t ldc, T* scratch) {
  if constexpr (std::is_same<T, float>::value)
    if (ig_host_sgemm(ctx, true, false, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < M; ++i) scratch[i * K + k] = A[k * lda + i];
  ig_block_gemm(ctx, false, M, N, K, alpha, scratch, K, B, ldb, beta, C, ldc);
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
template <class T>
bool ig_all_finite(const T* x, int64_t n) {
  bool finite = true;
  #pragma omp parallel for reduction(&&:finite) if(ig_big(n))
  for (int64_t i = 0; i < n; ++i) finite = finite && std::isfinite(x[i]);
  return finite;
}
// float32 and float64 through the bits (finite unless the exponent is all ones): an OR that
// vectorizes, where the short-circuit && above ran one value at a time (perf: a tenth of a
// [8, 4, 128, 64] forward's time, which checks v; the backward checks q, k, v and dy).
template <class U, class F>
bool ig_all_finite_bits(const F* x, int64_t n, U exponent) {
  U bad = 0;
  #pragma omp parallel for simd reduction(|:bad) if(ig_big(n))
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, x + i, sizeof u);
    bad |= (u & exponent) == exponent ? U(1) : U(0);
  }
  return bad == 0;
}
inline bool ig_all_finite(const float* x, int64_t n) { return ig_all_finite_bits<uint32_t>(x, n, 0x7f800000u); }
inline bool ig_all_finite(const double* x, int64_t n) {
  return ig_all_finite_bits<uint64_t>(x, n, 0x7ff0000000000000ull);
}

// float32 attention whose v (or, backward, dy) holds an inf or NaN runs in double, as the
// reference does: a probability that float32 rounds to 0 (a key scored 305 below the row's
// best) times an inf in v is NaN, where the reference's double probability (1e-133) times inf is
// inf (program fuzzer, seed 280044). Finite inputs, the common case, never take this path.
// A buffer widened to a new one of type W (nullptr when out of memory; n may be 0): float32 to
// double here, float16 / bfloat16 to float32 for the half types' attention below.
template <class W, class S>
W* ig_widened(const S* x, int64_t n) {
  W* w = static_cast<W*>(std::malloc(sizeof(W) * static_cast<size_t>(n > 0 ? n : 1)));
  if (w != nullptr)
    for (int64_t i = 0; i < n; ++i) w[i] = static_cast<W>(x[i]);
  return w;
}
template <class W, class S>
void ig_narrow(const W* x, S* y, int64_t n) {
  if constexpr (std::is_class<S>::value) {  // a half type, through its bits (a struct store does not vectorize)
    uint16_t* bits = ig_raw(y);
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) bits[i] = S(static_cast<float>(x[i])).bits;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<S>(x[i]);
  }
}
// The same through an operand's rows (ig_rows): widened into a new dense [units, rows, width]
// buffer, and narrowed back from one.
template <class W, class S>
W* ig_widened_rows(const S* x, const ig_rows& r, int64_t units) {
  if (!r.swapped) return ig_widened<W>(x, units * r.rows * r.width);
  W* w = static_cast<W*>(std::malloc(sizeof(W) * static_cast<size_t>(units * r.rows * r.width > 0 ? units * r.rows * r.width : 1)));
  if (w != nullptr)
    for (int64_t u = 0; u < units; ++u)
      for (int64_t i = 0; i < r.rows; ++i)
        for (int64_t c = 0; c < r.width; ++c) w[(u * r.rows + i) * r.width + c] = static_cast<W>(x[r.at(u, i) + c]);
  return w;
}
template <class W, class S>
void ig_narrow_rows(const W* x, S* y, const ig_rows& r, int64_t units) {
  if (!r.swapped) return ig_narrow(x, y, units * r.rows * r.width);
  for (int64_t u = 0; u < units; ++u)
    for (int64_t i = 0; i < r.rows; ++i) ig_narrow(x + (u * r.rows + i) * r.width, y + r.at(u, i), r.width);
}

// Elements a mask read through broadcast strides over [lead..., Sq, Sk] can reach.
inline int64_t ig_mask_extent(int nlead, const int64_t* lead, int64_t sq, int64_t sk, const int64_t* mstride) {
  int64_t last = (sq - 1) * mstride[nlead] + (sk - 1) * mstride[nlead + 1];
  for (int a = 0; a < nlead; ++a) last += (lead[a] - 1) * mstride[a];
  return last + 1;
}

// The kernels below, declared for the widened runs that call them.
template <class T, int kMask>
int ig_attention(const ig_ctx* ctx, const T* __restrict q, const T* __restrict k, const T* __restrict v,
                 const void* mask, T* __restrict y, int64_t batch, int64_t hq, int64_t hk, int64_t sq, int64_t sk,
                 int64_t d, int64_t dv, double scale, int causal, int64_t offset, int nlead, const int64_t* lead,
                 const int64_t* mstride, int swapped);
template <class T, int kMask>
int ig_attention_grad(const ig_ctx* ctx, const T* __restrict q, const T* __restrict k, const T* __restrict v,
                      const T* __restrict dy, const void* mask, T* __restrict dq, T* __restrict dk, T* __restrict dv,
                      T* __restrict dmask, int64_t mask_numel, int64_t batch, int64_t hq, int64_t hk, int64_t sq,
                      int64_t sk, int64_t d, int64_t dvn, double scale, int causal, int64_t offset, int nlead,
                      const int64_t* lead, const int64_t* mstride, int swapped);

// Attention run in a wider type W: the operands (and a float mask) widened to new W buffers, the
// W kernel, its results narrowed into the caller's. float32 with a non-finite v (or dy) runs in
// double this way (above); float16 / bfloat16 in float32 (ig_attention_lowp).
template <class W, class T, int kMask>
int ig_attention_widened(const ig_ctx* ctx, const T* q, const T* k, const T* v, const void* mask, T* y, int64_t batch,
                         int64_t hq, int64_t hk, int64_t sq, int64_t sk, int64_t d, int64_t dv, double scale, int causal,
                         int64_t offset, int nlead, const int64_t* lead, const int64_t* mstride, int swapped) {
  if (batch == 0 || sq == 0 || dv == 0) return 0;
  const int64_t units = hk > 0 && hq > 0 ? batch / hq * hk : 0;  // key / value heads in all
  const int64_t nm = kMask == 2 ? ig_mask_extent(nlead, lead, sq, sk, mstride) : 0;
  const ig_rows qr{hq, sq, d, (swapped & 1) != 0}, kr{hk, sk, d, (swapped & 2) != 0}, vr{hk, sk, dv, (swapped & 4) != 0},
      yr{hq, sq, dv, (swapped & 8) != 0};
  W *wq = ig_widened_rows<W>(q, qr, batch), *wk = ig_widened_rows<W>(k, kr, units), *wv = ig_widened_rows<W>(v, vr, units);
  W* wm = kMask == 2 ? ig_widened<W>(static_cast<const T*>(mask), nm) : nullptr;
  W* wy = static_cast<W*>(std::malloc(sizeof(W) * static_cast<size_t>(batch * sq * dv)));
  int rc = 1;
  if (wq && wk && wv && wy && (kMask != 2 || wm)) {
    rc = ig_attention<W, kMask>(ctx, wq, wk, wv, kMask == 2 ? wm : mask, wy, batch, hq, hk, sq, sk, d, dv, scale, causal,
                                offset, nlead, lead, mstride, 0);
    if (rc == 0) ig_narrow_rows(wy, y, yr, batch);
  } else {
    ig_fail(ctx, "scaled_dot_product_attention: out of memory for the kernel's scratch");
  }
  for (W* p : {wq, wk, wv, wm, wy}) std::free(p);
  return rc;
}

template <class W, class T, int kMask>
int ig_attention_grad_widened(const ig_ctx* ctx, const T* q, const T* k, const T* v, const T* dy, const void* mask,
                              T* dq, T* dk, T* dv, T* dmask, int64_t mask_numel, int64_t batch, int64_t hq, int64_t hk,
                              int64_t sq, int64_t sk, int64_t d, int64_t dvn, double scale, int causal, int64_t offset,
                              int nlead, const int64_t* lead, const int64_t* mstride, int swapped) {
  const int64_t units = hk > 0 && hq > 0 ? batch / hq * hk : 0;
  const int64_t nq = batch * sq * d, nk = units * sk * d, nv = units * sk * dvn;
  const int64_t nm = kMask != 0 ? mask_numel : 0;
  const ig_rows qr{hq, sq, d, (swapped & 1) != 0}, kr{hk, sk, d, (swapped & 2) != 0}, vr{hk, sk, dvn, (swapped & 4) != 0},
      dyr{hq, sq, dvn, (swapped & 8) != 0}, dqr{hq, sq, d, (swapped & 16) != 0}, dkr{hk, sk, d, (swapped & 32) != 0},
      dvr{hk, sk, dvn, (swapped & 64) != 0};
  W *wq = ig_widened_rows<W>(q, qr, batch), *wk = ig_widened_rows<W>(k, kr, units), *wv = ig_widened_rows<W>(v, vr, units),
    *wdy = ig_widened_rows<W>(dy, dyr, batch);
  W* wm = kMask == 2 ? ig_widened<W>(static_cast<const T*>(mask), nm) : nullptr;
  W* out = static_cast<W*>(std::malloc(sizeof(W) * static_cast<size_t>(nq + nk + nv + nm + 1)));
  int rc = 1;
  if (wq && wk && wv && wdy && out && (kMask != 2 || wm)) {
    rc = ig_attention_grad<W, kMask>(ctx, wq, wk, wv, wdy, kMask == 2 ? wm : mask, out, out + nq, out + nq + nk,
                                     out + nq + nk + nv, mask_numel, batch, hq, hk, sq, sk, d, dvn, scale, causal, offset,
                                     nlead, lead, mstride, 0);
    if (rc == 0) {
      ig_narrow_rows(out, dq, dqr, batch);
      ig_narrow_rows(out + nq, dk, dkr, units);
      ig_narrow_rows(out + nq + nk, dv, dvr, units);
      ig_narrow(out + nq + nk + nv, dmask, nm);
    }
  } else {
    ig_fail(ctx, "scaled_dot_product_attention_grad: out of memory for the kernel's scratch");
  }
  for (W* p : {wq, wk, wv, wdy, wm, out}) std::free(p);
  return rc;
}

template <class T, int kMask>
int ig_attention(const ig_ctx* ctx, const T* __restrict q, const T* __restrict k, const T* __restrict v,
                 const void* mask, T* __restrict y, int64_t batch, int64_t hq, int64_t hk, int64_t sq, int64_t sk,
                 int64_t d, int64_t dv, double scale, int causal, int64_t offset, int nlead, const int64_t* lead,
                 const int64_t* mstride, int swapped) {
  constexpr int64_t kQ = 128, kK = 512;
  constexpr T kHidden = -std::numeric_limits<T>::infinity();
  if (batch == 0 || sq == 0 || dv == 0) return 0;
  if (hk <= 0 || hq % hk != 0) return ig_fail(ctx, "scaled_dot_product_attention: key/value heads must divide the query heads");
  const int64_t group = hq / hk, qblocks = (sq + kQ - 1) / kQ;
  const T tscale = static_cast<T>(scale);
  int failed = 0;
  const int64_t nv = batch / hq * hk * sk * dv;
  const bool v_finite = ig_all_finite(v, nv);
  if constexpr (std::is_same<T, float>::value) {
    if (!v_finite)  // in double (see ig_widened)
      return ig_attention_widened<double, T, kMask>(ctx, q, k, v, mask, y, batch, hq, hk, sq, sk, d, dv, scale, causal,
                                                    offset, nlead, lead, mstride, swapped);
  }
  const ig_rows qr{hq, sq, d, (swapped & 1) != 0}, kr{hk, sk, d, (swapped & 2) != 0}, vr{hk, sk, dv, (swapped & 4) != 0},
      yr{hq, sq, dv, (swapped & 8) != 0};
  // A hidden key still adds its probability (0) times its v row to the output, as the reference
  // and attention written out do: 0 * inf or 0 * NaN is NaN. So the causal skip (which leaves
  // such rows out) only runs when every v is finite (found by the program fuzzer, seed 90019).
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
      const T* qb = q + qr.at(b, i0);
      const T* kb = k + kr.at(kvb, 0);
      const T* vb = v + vr.at(kvb, 0);
      const int64_t mbase = kMask != 0 ? ig_mask_base(b, nlead, lead, mstride) : 0;
      for (int64_t r = 0; r < rows; ++r) {
        m[r] = kHidden;
        l[r] = 0;
      }
      for (int64_t e = 0; e < rows * dv; ++e) acc[e] = 0;
      for (int64_t j0 = 0; j0 < sk; j0 += kK) {
        // Causal: no key after the unit's last row's last visible key is scored.
        const int64_t end = skip_hidden ? (i0 + rows + offset < sk ? i0 + rows + offset : sk) : sk;
        if (j0 >= end) break;
        // The block is stored densely (row stride n, not kK): with rows 2 KB apart the products
        // of a short block (S = 128) took 1.7x as long.
        const int64_t n = end - j0 < kK ? end - j0 : kK;
        ig_block_gemm(ctx, true, rows, n, d, tscale, qb, qr.ld(), kb + j0 * kr.ld(), kr.ld(), T(0), s, n);
        ig_mask_scores<T, kMask>(s, n, rows, n, i0, j0, mask, mbase, nlead, mstride, causal, offset);
        ig_softmax_block(s, n, rows, n, m, l, acc, dv);
        ig_block_gemm(ctx, false, rows, dv, n, T(1), s, n, vb + j0 * vr.ld(), vr.ld(), T(1), acc, dv);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* yrow = y + yr.at(b, i0 + r);
        const T inv = T(1) / l[r];  // l = 0: every key hidden, 0 * inf = NaN
        #pragma omp simd
        for (int64_t e = 0; e < dv; ++e) yrow[e] = l[r] == T(0) ? acc[r * dv + e] / l[r] : acc[r * dv + e] * inv;
      }
    }
    std::free(s);
  }
  if (failed) return ig_fail(ctx, "scaled_dot_product_attention: out of memory for the kernel's scratch");
  return 0;
}

// ---- scaled_dot_product_attention_grad: (q, k, v, dy, [mask]) -> (dq, dk, dv, dmask) ----
// Flash-style too: nothing [Sq, Sk] is stored whole. Work units are the key/value heads (leading
// index over the query heads' groups), so each unit owns its dk and dv rows and no two threads add
// to one. Per query head of the unit and block of kQ rows: the scores S = scale q K^T give the
// rows' softmax max m and sum l, P = exp(S - m) / l, dP = dy V^T, D_i = sum_j P_ij dP_ij,
// dS = P (dP - D), and dq += scale dS K, dk += scale dS^T q, dv += P^T dy (the host's sgemm reads
// P and dS transposed in place; other products write the transposed block out first). Rows of up
// to kWhole keys are scored in one block, once; longer rows walk key blocks of kK three times (m
// and l, D, the gradients), scoring each block again. A float mask's gradient is dS summed where
// the mask broadcasts (atomic adds: units share mask elements); a bool mask's is zeros. Causal
// units skip the keys past their last visible one when every q, k, v and dy is finite (0 * inf is
// NaN otherwise, as in the reference).
extern "C" int omp_get_max_threads();

template <class T, int kMask>
int ig_attention_grad(const ig_ctx* ctx, const T* __restrict q, const T* __restrict k, const T* __restrict v,
                      const T* __restrict dy, const void* mask, T* __restrict dq, T* __restrict dk, T* __restrict dv,
                      T* __restrict dmask, int64_t mask_numel, int64_t batch, int64_t hq, int64_t hk, int64_t sq,
                      int64_t sk, int64_t d, int64_t dvn, double scale, int causal, int64_t offset, int nlead,
                      const int64_t* lead, const int64_t* mstride, int swapped) {
  constexpr int64_t kQ = 128, kK = 512, kWhole = 8192;
  constexpr T kHidden = -std::numeric_limits<T>::infinity();
  if (kMask != 0) std::memset(static_cast<void*>(dmask), 0, static_cast<size_t>(mask_numel) * sizeof(T));
  if (batch == 0) return 0;
  if (hk <= 0 || hq % hk != 0) return ig_fail(ctx, "scaled_dot_product_attention: key/value heads must divide the query heads");
  const int64_t group = hq / hk, units = batch / hq * hk;
  std::memset(static_cast<void*>(dq), 0, static_cast<size_t>(batch * sq * d) * sizeof(T));
  std::memset(static_cast<void*>(dk), 0, static_cast<size_t>(units * sk * d) * sizeof(T));
  std::memset(static_cast<void*>(dv), 0, static_cast<size_t>(units * sk * dvn) * sizeof(T));
  if (sq == 0 || sk == 0) return 0;
  const T tscale = static_cast<T>(scale);
  const bool dyv_finite = ig_all_finite(v, units * sk * dvn) && ig_all_finite(dy, batch * sq * dvn);
  if constexpr (std::is_same<T, float>::value) {
    if (!dyv_finite)  // in double (see ig_widened)
      return ig_attention_grad_widened<double, T, kMask>(ctx, q, k, v, dy, mask, dq, dk, dv, dmask, mask_numel, batch,
                                                         hq, hk, sq, sk, d, dvn, scale, causal, offset, nlead, lead,
                                                         mstride, swapped);
  }
  const ig_rows qr{hq, sq, d, (swapped & 1) != 0}, kr{hk, sk, d, (swapped & 2) != 0}, vr{hk, sk, dvn, (swapped & 4) != 0},
      dyr{hq, sq, dvn, (swapped & 8) != 0}, dqr{hq, sq, d, (swapped & 16) != 0}, dkr{hk, sk, d, (swapped & 32) != 0},
      dvr{hk, sk, dvn, (swapped & 64) != 0};
  const bool skip_hidden = causal && dyv_finite && ig_all_finite(q, batch * sq * d) && ig_all_finite(k, units * sk * d);
  // Fewer key/value heads than threads (one long sequence): each head's query blocks split into
  // `parts`, each adding into a dk / dv slab of its own, summed at the end.
  const int64_t qblocks = (sq + kQ - 1) / kQ, pairs = group * qblocks;
  const int threads = omp_get_max_threads();
  int64_t parts = units >= threads ? 1 : std::min<int64_t>(pairs, (threads + units - 1) / units);
  T* partial = nullptr;
  if (parts > 1) {
    partial = static_cast<T*>(std::malloc(sizeof(T) * static_cast<size_t>(units * parts * sk * (d + dvn))));
    if (partial == nullptr) parts = 1;
  }
  const int64_t items = units * parts;
  // Keys of a row short enough (sk <= kWhole) are scored once, in one block of the whole row:
  // the probabilities and dP are kept from one product each, where the blocked path below scores
  // every key block three times (m and l, then D, then the gradients) and dP twice. The per-thread
  // scratch stays linear in sk: 3 x kQ x sk values (12 MB for float32 at sk = 8192, where this path
  // still ran [1, 1, 8192, 64] forward and backward in 443 ms against the blocked path's 516-613).
  const bool whole = sk <= kWhole;
  const int64_t ld = whole ? sk : kK;
  int failed = 0;
  #pragma omp parallel if(ig_big(batch * sq * sk * (d + dvn) / 4) && items > 1)
  {
    // Per thread: scores / probabilities, dP / dS, a transposed block, and the rows' m, l, D, O.
    T* s = static_cast<T*>(std::malloc(sizeof(T) * static_cast<size_t>(3 * kQ * ld + 3 * kQ + kQ * dvn)));
    if (s == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    T* ds = s + kQ * ld;
    T* t = ds + kQ * ld;
    T* m = t + kQ * ld;
    T* l = m + kQ;
    T* dd = l + kQ;
    T* acc = dd + kQ;
    #pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) {
      if (s == nullptr) continue;
      const int64_t unit = item / parts, part = item % parts;
      const int64_t o = unit / hk, kh = unit % hk;
      const T* kb = k + kr.at(unit, 0);
      const T* vb = v + vr.at(unit, 0);
      const int64_t kld = kr.ld(), vld = vr.ld(), qld = qr.ld(), dyld = dyr.ld(), dqld = dqr.ld();
      // A part's dk / dv slab is dense; a unit's own rows are where dk's and dv's views put them.
      T* dkb = parts > 1 ? partial + item * sk * (d + dvn) : dk + dkr.at(unit, 0);
      T* dvb = parts > 1 ? dkb + sk * d : dv + dvr.at(unit, 0);
      const int64_t dkld = parts > 1 ? d : dkr.ld(), dvld = parts > 1 ? dvn : dvr.ld();
      if (parts > 1) std::fill(dkb, dkb + sk * (d + dvn), T(0));
      for (int64_t pair = part; pair < pairs; pair += parts) {
        const int64_t b = o * hq + kh * group + pair / qblocks;
        const int64_t mbase = kMask != 0 ? ig_mask_base(b, nlead, lead, mstride) : 0;
        const int64_t i0 = (pair % qblocks) * kQ;
        const int64_t rows = sq - i0 < kQ ? sq - i0 : kQ;
        const T* qb = q + qr.at(b, i0);
        const T* dyb = dy + dyr.at(b, i0);
        T* dqb = dq + dqr.at(b, i0);
        const int64_t end = skip_hidden ? (i0 + rows + offset < sk ? (i0 + rows + offset > 0 ? i0 + rows + offset : 0) : sk) : sk;
        // The rows' masked scores for the block of n keys from j0, into s; and dP = dy V^T for the
        // block, into ds.
        auto block_scores = [&](int64_t j0, int64_t n) {
          ig_block_gemm(ctx, true, rows, n, d, tscale, qb, qld, kb + j0 * kld, kld, T(0), s, ld);
          ig_mask_scores<T, kMask>(s, ld, rows, n, i0, j0, mask, mbase, nlead, mstride, causal, offset);
        };
        auto block_dp = [&](int64_t j0, int64_t n) {
          ig_block_gemm(ctx, true, rows, n, dvn, T(1), dyb, dyld, vb + j0 * vld, vld, T(0), ds, ld);
        };
        // dS = P (dP - D) for the rows' block of n keys from j0, P in s and dP in ds (ld apart),
        // left in ds; a float mask's gradient gathers dS.
        auto block_ds = [&](int64_t j0, int64_t n) {
          for (int64_t r = 0; r < rows; ++r) {
            T* sr = s + r * ld;
            T* dr = ds + r * ld;
            const T dr0 = dd[r];
            #pragma omp simd
            for (int64_t jj = 0; jj < n; ++jj) dr[jj] = sr[jj] * (dr[jj] - dr0);
            if (kMask == 2) {
              const int64_t i = i0 + r;
              T* mrow = dmask + mbase + i * mstride[nlead];
              const int64_t ms = mstride[nlead + 1];
              for (int64_t jj = 0; jj < n; ++jj) {
                if (causal && j0 + jj > i + offset) continue;
                #pragma omp atomic
                mrow[(j0 + jj) * ms] += dr[jj];
              }
            }
          }
        };
        // dq, dv and dk from the block's P (in s) and dS (in ds).
        auto block_grads = [&](int64_t j0, int64_t n) {
          ig_block_gemm(ctx, false, rows, d, n, tscale, ds, ld, kb + j0 * kld, kld, T(1), dqb, dqld);
          ig_block_gemm_at(ctx, n, dvn, rows, T(1), s, ld, dyb, dyld, T(1), dvb + j0 * dvld, dvld, t);
          ig_block_gemm_at(ctx, n, d, rows, tscale, ds, ld, qb, qld, T(1), dkb + j0 * dkld, dkld, t);
        };
        if (whole) {
          // The visible keys' scores, softmax'd in place; a row that sees no key has NaN
          // probabilities, which reach every key's gradients (as in the reference): then every
          // key is scored.
          int64_t n = end;
          for (;;) {
            if (n > 0) block_scores(0, n);
            bool unseen = false;
            for (int64_t r = 0; r < rows; ++r) {
              m[r] = kHidden;
              l[r] = 0;
            }
            ig_softmax_block(s, ld, rows, n, m, l, acc, 0);
            for (int64_t r = 0; r < rows; ++r) unseen = unseen || l[r] == T(0);
            if (!unseen || n == sk) break;
            n = sk;
          }
          if (n == 0) continue;
          block_dp(0, n);
          // P = exp(S - m) / l, and D_i = sum_j P_ij dP_ij summed in double over the very P and dP
          // that dS uses (see the blocked path's comment below).
          for (int64_t r = 0; r < rows; ++r) {
            T* sr = s + r * ld;
            const T* dr = ds + r * ld;
            const T inv = T(1) / l[r];
            double dsum = 0;
            #pragma omp simd reduction(+:dsum)
            for (int64_t jj = 0; jj < n; ++jj) {
              sr[jj] *= inv;
              dsum += static_cast<double>(sr[jj]) * static_cast<double>(dr[jj]);
            }
            dd[r] = static_cast<T>(dsum);
          }
          block_ds(0, n);
          block_grads(0, n);
          continue;
        }
        for (int64_t r = 0; r < rows; ++r) {
          m[r] = kHidden;
          l[r] = 0;
        }
        for (int64_t j0 = 0; j0 < end; j0 += kK) {  // the rows' softmax max m and sum l
          const int64_t n = end - j0 < kK ? end - j0 : kK;
          block_scores(j0, n);
          ig_softmax_block(s, ld, rows, n, m, l, acc, 0);
        }
        // A row that sees no key has NaN probabilities, which reach every key's gradients (as in
        // the reference): then no key is skipped.
        int64_t end2 = end;
        for (int64_t r = 0; r < rows; ++r)
          if (l[r] == T(0)) end2 = sk;
        {
          // D_i = sum_j P_ij dP_ij from the very dP values dS uses below, as the reference sums
          // it: FlashAttention-2's <dy_i, O_i> is the same number in exact arithmetic but not in
          // float32, where dP and O round apart: on a saturated softmax (scores near 5e4) dS =
          // P (dP - D) kept 0.15 of dq's scale of 1.3 that the reference cancels to 0 (the
          // program fuzzer, seed 200090), and an infinite dy gave NaN where the reference had
          // inf (seed 170036). It costs a pass of two block products per key block.
          double dsum[kQ];
          for (int64_t r = 0; r < rows; ++r) dsum[r] = 0;
          for (int64_t j0 = 0; j0 < end2; j0 += kK) {
            const int64_t n = end2 - j0 < kK ? end2 - j0 : kK;
            block_scores(j0, n);
            block_dp(j0, n);
            for (int64_t r = 0; r < rows; ++r) {
              const T mr = m[r], inv = T(1) / l[r];
              const T* sr = s + r * ld;
              const T* dr = ds + r * ld;
              double part = 0;
              #pragma omp simd reduction(+:part)
              for (int64_t jj = 0; jj < n; ++jj)
                part += static_cast<double>(ig_exp<T>(sr[jj] - mr) * inv) * static_cast<double>(dr[jj]);
              dsum[r] += part;
            }
          }
          for (int64_t r = 0; r < rows; ++r) dd[r] = static_cast<T>(dsum[r]);
        }
        for (int64_t j0 = 0; j0 < end2; j0 += kK) {
          const int64_t n = end2 - j0 < kK ? end2 - j0 : kK;
          block_scores(j0, n);
          block_dp(j0, n);
          for (int64_t r = 0; r < rows; ++r) {
            T* sr = s + r * ld;
            const T mr = m[r], inv = T(1) / l[r];
            #pragma omp simd
            for (int64_t jj = 0; jj < n; ++jj) sr[jj] = ig_exp<T>(sr[jj] - mr) * inv;  // P
          }
          block_ds(j0, n);
          block_grads(j0, n);
        }
      }
    }
    std::free(s);
  }
  if (parts > 1) {  // each head's slabs summed into dk and dv
    const int64_t slab = sk * (d + dvn);
    #pragma omp parallel for if(ig_big(units * parts * slab))
    for (int64_t e = 0; e < units * slab; ++e) {
      const int64_t unit = e / slab, at = e % slab;
      T sum = 0;
      for (int64_t p = 0; p < parts; ++p) sum += partial[(unit * parts + p) * slab + at];
      if (at < sk * d) dk[dkr.at(unit, at / d) + at % d] = sum;
      else dv[dvr.at(unit, (at - sk * d) / dvn) + (at - sk * d) % dvn] = sum;
    }
    std::free(partial);
  }
  if (failed) return ig_fail(ctx, "scaled_dot_product_attention_grad: out of memory for the kernel's scratch");
  return 0;
}

)IGPRELUDE";

}  // namespace ingot::cpu
