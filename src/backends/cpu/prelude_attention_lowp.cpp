// The prelude's half-precision attention (prelude.h): float16 / bfloat16 scaled_dot_product_attention
// and its gradient, on the host's bf16 matmul where it has one, else widened to the float32
// kernels of prelude_attention.cpp (pasted before this part).
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kAttentionLowpPrelude = R"IGPRELUDE(
// ---- attention in float16 / bfloat16: ig_attention_lowp, ig_attention_grad_lowp ----
// The half types compute as the reference does, in float32 (scores, softmax, sums), each result
// rounded once. bfloat16 attention on a host with a native bf16 matmul (ctx->host->gemm_bf16:
// AVX512_BF16 or AMX) runs the flash loops of ig_attention and ig_attention_grad with every block
// product on the bf16 instructions, operands in bfloat16 and products accumulated in float32:
//   forward   S = q K^T into float32; P V with the block's probabilities rounded to bfloat16 (as
//             bf16 flash-attention kernels do: each probability carries one rounding more than
//             the reference's, 2^-9 relative, inside the output's own rounding to bfloat16); the
//             rows' running max, sum and output stay float32.
//   backward  S = q K^T and dP = dy V^T into float32; the softmax, D_i = sum_j P_ij dP_ij (in
//             double) and dS = P (dP - D) in float32; then dq = scale dS K, dk = scale dS^T q and
//             dv = P^T dy with P and dS rounded to bfloat16 (one rounding more each, as above),
//             dk and dv summed over the query blocks in float32 and each gradient rounded once.
// Everything else (float16, no host bf16 matmul, library products off, d = 0, an operand holding
// an inf or NaN, the backward of rows longer than 8,192 keys or of a row that sees no key, a
// block product the host refuses) widens the operands to float32 and runs the float32 kernel.

// Whether every bfloat16 value is finite, from the bits (ig_all_finite_bits: exponent not all
// ones): the generic ig_all_finite converts each value to float first, one at a time, which perf
// found taking a large share of a [8, 4, 128, 64] backward's time.
inline bool ig_all_finite(const ig_bf16* x, int64_t n) { return ig_all_finite_bits<uint16_t>(ig_raw(x), n, uint16_t{0x7f80}); }

// bfloat16 attention on the host's bf16 matmul (see above); -1 where the caller must widen instead.
template <int kMask>
int ig_attention_bf16(const ig_ctx* ctx, const ig_bf16* q, const ig_bf16* k, const ig_bf16* v, const void* mask,
                      ig_bf16* y, int64_t batch, int64_t hq, int64_t hk, int64_t sq, int64_t sk, int64_t d, int64_t dv,
                      double scale, int causal, int64_t offset, int nlead, const int64_t* lead, const int64_t* mstride) {
  constexpr int64_t kQ = 128, kK = 512;
  if (batch == 0 || sq == 0 || dv == 0) return 0;
  if (hk <= 0 || hq % hk != 0) return ig_fail(ctx, "scaled_dot_product_attention: key/value heads must divide the query heads");
  if (d == 0 || !ig_all_finite(v, batch / hq * hk * sk * dv)) return -1;
  const auto gemm = ctx->host->gemm_bf16;
  const int64_t group = hq / hk, qblocks = (sq + kQ - 1) / kQ;
  const float fscale = static_cast<float>(scale);
  int failed = 0, refused = 0;
  #pragma omp parallel if(ig_big(batch * sq * sk * (d + dv) / 16) && batch * qblocks > 1)
  {
    // Per thread: a block of float32 scores (then probabilities) and its bfloat16 copy, the rows'
    // m and l, their output so far and one block's P V.
    float* s = static_cast<float*>(std::malloc(sizeof(float) * static_cast<size_t>(kQ * kK + 2 * kQ + 2 * kQ * dv)));
    ig_bf16* p = static_cast<ig_bf16*>(std::malloc(sizeof(ig_bf16) * static_cast<size_t>(kQ * kK)));
    if (s == nullptr || p == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    float* m = s + kQ * kK;
    float* l = m + kQ;
    float* acc = l + kQ;
    float* pv = acc + kQ * dv;
    #pragma omp for schedule(dynamic)
    for (int64_t unit = 0; unit < batch * qblocks; ++unit) {
      if (s == nullptr || p == nullptr) continue;
      const int64_t b = unit / qblocks, i0 = (unit % qblocks) * kQ, rows = sq - i0 < kQ ? sq - i0 : kQ;
      const int64_t kvb = (b / hq) * hk + (b % hq) / group;
      const ig_bf16* qb = q + (b * sq + i0) * d;
      const ig_bf16* kb = k + kvb * sk * d;
      const ig_bf16* vb = v + kvb * sk * dv;
      const int64_t mbase = kMask != 0 ? ig_mask_base(b, nlead, lead, mstride) : 0;
      for (int64_t r = 0; r < rows; ++r) {
        m[r] = -std::numeric_limits<float>::infinity();
        l[r] = 0;
      }
      for (int64_t e = 0; e < rows * dv; ++e) acc[e] = 0;
      bool ok = true;
      for (int64_t j0 = 0; ok && j0 < sk; j0 += kK) {
        const int64_t end = causal ? (i0 + rows + offset < sk ? i0 + rows + offset : sk) : sk;
        if (j0 >= end) break;
        const int64_t n = end - j0 < kK ? end - j0 : kK;
        // Dense blocks (row stride n): oneDNN runs its AMX / bf16 brgemm kernels only on a dense
        // result (with stride kK it picked gemm:jit, 2.7x as slow at S = 128).
        ok = gemm('N', 'T', rows, n, d, ig_raw(qb), d, ig_raw(kb + j0 * d), d, s, n) == 0;
        if (!ok) break;
        for (int64_t r = 0; r < rows; ++r) {
          float* sr = s + r * n;
          #pragma omp simd
          for (int64_t jj = 0; jj < n; ++jj) sr[jj] *= fscale;
        }
        ig_mask_scores<float, kMask, ig_bf16>(s, n, rows, n, i0, j0, mask, mbase, nlead, mstride, causal, offset);
        ig_softmax_block(s, n, rows, n, m, l, acc, dv);
        for (int64_t r = 0; r < rows; ++r) {  // through the bits: a struct store does not vectorize
          const float* sr = s + r * n;
          uint16_t* pr = ig_raw(p + r * n);
          #pragma omp simd
          for (int64_t jj = 0; jj < n; ++jj) pr[jj] = ig_bf16(sr[jj]).bits;
        }
        ok = gemm('N', 'N', rows, dv, n, ig_raw(p), n, ig_raw(vb + j0 * dv), dv, pv, dv) == 0;
        #pragma omp simd
        for (int64_t e = 0; e < rows * dv; ++e) acc[e] += pv[e];
      }
      if (!ok) {
        #pragma omp atomic write
        refused = 1;
        continue;
      }
      for (int64_t r = 0; r < rows; ++r) {
        uint16_t* yr = ig_raw(y + (b * sq + i0 + r) * dv);
        const float inv = 1.0f / l[r];  // l = 0: every key hidden, 0 * inf = NaN
        #pragma omp simd
        for (int64_t e = 0; e < dv; ++e) yr[e] = ig_bf16(l[r] == 0.0f ? acc[r * dv + e] / l[r] : acc[r * dv + e] * inv).bits;
      }
    }
    std::free(s);
    std::free(p);
  }
  if (failed) return ig_fail(ctx, "scaled_dot_product_attention: out of memory for the kernel's scratch");
  return refused ? -1 : 0;
}

template <class T, int kMask>
int ig_attention_lowp(const ig_ctx* ctx, const T* q, const T* k, const T* v, const void* mask, T* y, int64_t batch,
                      int64_t hq, int64_t hk, int64_t sq, int64_t sk, int64_t d, int64_t dv, double scale, int causal,
                      int64_t offset, int nlead, const int64_t* lead, const int64_t* mstride, int swapped) {
  if constexpr (std::is_same<T, ig_bf16>::value) {
    if (ig_library_gemm && ctx->host->gemm_bf16 != nullptr && swapped == 0) {
      const int rc = ig_attention_bf16<kMask>(ctx, q, k, v, mask, y, batch, hq, hk, sq, sk, d, dv, scale, causal, offset,
                                              nlead, lead, mstride);
      if (rc != -1) return rc;
    }
  }
  return ig_attention_widened<float, T, kMask>(ctx, q, k, v, mask, y, batch, hq, hk, sq, sk, d, dv, scale, causal,
                                               offset, nlead, lead, mstride, swapped);
}

// bfloat16 attention backward on the host's bf16 matmul (see above); -1 where the caller must
// widen instead. Work as ig_attention_grad's whole-row path: units of (key/value head, part of
// its query blocks), each query block scored once against all of its visible keys (up to
// kWhole), dk and dv summed into the item's float32 slab.
template <int kMask>
int ig_attention_grad_bf16(const ig_ctx* ctx, const ig_bf16* q, const ig_bf16* k, const ig_bf16* v, const ig_bf16* dy,
                           const void* mask, ig_bf16* dq, ig_bf16* dk, ig_bf16* dv, ig_bf16* dmask, int64_t mask_numel,
                           int64_t batch, int64_t hq, int64_t hk, int64_t sq, int64_t sk, int64_t d, int64_t dvn,
                           double scale, int causal, int64_t offset, int nlead, const int64_t* lead,
                           const int64_t* mstride) {
  constexpr int64_t kQ = 128, kWhole = 8192;
  if (batch == 0 || sq == 0 || sk == 0 || d == 0 || dvn == 0 || sk > kWhole) return -1;
  if (hk <= 0 || hq % hk != 0) return ig_fail(ctx, "scaled_dot_product_attention: key/value heads must divide the query heads");
  const int64_t group = hq / hk, units = batch / hq * hk;
  // 0 * inf is NaN where a probability of 0 meets an infinite operand: the float32 kernel's
  // double path keeps the reference's answer there.
  if (!ig_all_finite(q, batch * sq * d) || !ig_all_finite(k, units * sk * d) || !ig_all_finite(v, units * sk * dvn) ||
      !ig_all_finite(dy, batch * sq * dvn))
    return -1;
  const auto gemm = ctx->host->gemm_bf16;
  const float fscale = static_cast<float>(scale);
  const int64_t qblocks = (sq + kQ - 1) / kQ, pairs = group * qblocks;
  const int threads = omp_get_max_threads();
  const int64_t parts = units >= threads ? 1 : std::min<int64_t>(pairs, (threads + units - 1) / units);
  const int64_t items = units * parts, slab = sk * (d + dvn);
  // dk and dv of each item in float32, and a float mask's gradient (atomic adds: items share mask
  // elements); rounded to bfloat16 at the end.
  float* sums = static_cast<float*>(std::calloc(static_cast<size_t>(items * slab), sizeof(float)));
  float* msum = kMask == 2 ? static_cast<float*>(std::calloc(static_cast<size_t>(mask_numel > 0 ? mask_numel : 1), sizeof(float))) : nullptr;
  if (sums == nullptr || (kMask == 2 && msum == nullptr)) {
    std::free(sums);
    std::free(msum);
    return ig_fail(ctx, "scaled_dot_product_attention_grad: out of memory for the kernel's scratch");
  }
  const int64_t wide = d > dvn ? d : dvn, longest = sk > kQ ? sk : kQ;  // a product's rows
  int failed = 0, refused = 0;
  #pragma omp parallel if(ig_big(batch * sq * sk * (d + dvn) / 16) && items > 1)
  {
    // Per thread: P and dP / dS in float32 ([rows, n], row stride n: oneDNN's AMX kernels want a
    // dense result), their bfloat16 copies, one product's result, and the rows' m, l and D.
    const size_t block = static_cast<size_t>(kQ * sk);
    float* s = static_cast<float*>(std::malloc(sizeof(float) * (2 * block + static_cast<size_t>(longest * wide + 3 * kQ))));
    ig_bf16* pb = static_cast<ig_bf16*>(std::malloc(sizeof(ig_bf16) * 2 * block));
    if (s == nullptr || pb == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    float* ds = s + block;
    float* out = ds + block;
    float* m = out + longest * wide;
    float* l = m + kQ;
    float* dd = l + kQ;
    ig_bf16* dsb = pb + block;
    #pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) {
      if (s == nullptr || pb == nullptr) continue;
      const int64_t unit = item / parts, part = item % parts, o = unit / hk, kh = unit % hk;
      const ig_bf16* kb = k + unit * sk * d;
      const ig_bf16* vb = v + unit * sk * dvn;
      float* dkb = sums + item * slab;
      float* dvb = dkb + sk * d;
      bool ok = true;
      for (int64_t pair = part; ok && pair < pairs; pair += parts) {
        const int64_t b = o * hq + kh * group + pair / qblocks;
        const int64_t mbase = kMask != 0 ? ig_mask_base(b, nlead, lead, mstride) : 0;
        const int64_t i0 = (pair % qblocks) * kQ, rows = sq - i0 < kQ ? sq - i0 : kQ;
        const ig_bf16* qb = q + (b * sq + i0) * d;
        const ig_bf16* dyb = dy + (b * sq + i0) * dvn;
        // Causal rows see no key past the block's last row's last visible one.
        const int64_t n = causal ? (i0 + rows + offset < sk ? (i0 + rows + offset > 0 ? i0 + rows + offset : 0) : sk) : sk;
        ok = n > 0 && gemm('N', 'T', rows, n, d, ig_raw(qb), d, ig_raw(kb), d, s, n) == 0 &&
             gemm('N', 'T', rows, n, dvn, ig_raw(dyb), dvn, ig_raw(vb), dvn, ds, n) == 0;
        if (!ok) break;
        for (int64_t r = 0; r < rows; ++r) {
          float* sr = s + r * n;
          #pragma omp simd
          for (int64_t jj = 0; jj < n; ++jj) sr[jj] *= fscale;
          m[r] = -std::numeric_limits<float>::infinity();
          l[r] = 0;
        }
        ig_mask_scores<float, kMask, ig_bf16>(s, n, rows, n, i0, 0, mask, mbase, nlead, mstride, causal, offset);
        ig_softmax_block(s, n, rows, n, m, l, out, 0);
        for (int64_t r = 0; r < rows; ++r) ok = ok && l[r] != 0.0f;  // a row that sees no key: widen
        if (!ok) break;
        for (int64_t r = 0; r < rows; ++r) {
          float* sr = s + r * n;
          float* dr = ds + r * n;
          const float inv = 1.0f / l[r];
          double dsum = 0;
          #pragma omp simd reduction(+:dsum)
          for (int64_t jj = 0; jj < n; ++jj) {
            sr[jj] *= inv;
            dsum += static_cast<double>(sr[jj]) * static_cast<double>(dr[jj]);
          }
          dd[r] = static_cast<float>(dsum);
          const float dr0 = dd[r];
          uint16_t* pr = ig_raw(pb + r * n);
          uint16_t* qr = ig_raw(dsb + r * n);
          #pragma omp simd
          for (int64_t jj = 0; jj < n; ++jj) {
            dr[jj] = sr[jj] * (dr[jj] - dr0);
            pr[jj] = ig_bf16(sr[jj]).bits;  // through the bits: a struct store does not vectorize
            qr[jj] = ig_bf16(dr[jj]).bits;
          }
          if (kMask == 2) {
            const int64_t i = i0 + r;
            float* mrow = msum + mbase + i * mstride[nlead];
            const int64_t ms = mstride[nlead + 1];
            for (int64_t jj = 0; jj < n; ++jj) {
              if (causal && jj > i + offset) continue;
              #pragma omp atomic
              mrow[jj * ms] += dr[jj];
            }
          }
        }
        // dq = scale dS K: each query row's once, so rounded straight into dq.
        ok = gemm('N', 'N', rows, d, n, ig_raw(dsb), n, ig_raw(kb), d, out, d) == 0;
        if (!ok) break;
        uint16_t* dqb = ig_raw(dq + (b * sq + i0) * d);
        #pragma omp simd
        for (int64_t e = 0; e < rows * d; ++e) dqb[e] = ig_bf16(fscale * out[e]).bits;
        // dv += P^T dy and dk += scale dS^T q, P and dS read transposed in place.
        ok = gemm('T', 'N', n, dvn, rows, ig_raw(pb), n, ig_raw(dyb), dvn, out, dvn) == 0;
        if (!ok) break;
        #pragma omp simd
        for (int64_t e = 0; e < n * dvn; ++e) dvb[e] += out[e];
        ok = gemm('T', 'N', n, d, rows, ig_raw(dsb), n, ig_raw(qb), d, out, d) == 0;
        if (!ok) break;
        #pragma omp simd
        for (int64_t e = 0; e < n * d; ++e) dkb[e] += fscale * out[e];
      }
      if (!ok) {
        #pragma omp atomic write
        refused = 1;
      }
    }
    std::free(s);
    std::free(pb);
  }
  if (!failed && !refused) {
    // Each head's parts summed into its first, then rounded once into dk and dv; a mask's
    // gradient likewise.
    #pragma omp parallel for if(ig_big(units * parts * slab) && units > 1)
    for (int64_t unit = 0; unit < units; ++unit) {
      float* first = sums + unit * parts * slab;
      for (int64_t p = 1; p < parts; ++p) {
        const float* other = first + p * slab;
        #pragma omp simd
        for (int64_t at = 0; at < slab; ++at) first[at] += other[at];
      }
      ig_narrow(first, dk + unit * sk * d, sk * d);
      ig_narrow(first + sk * d, dv + unit * sk * dvn, sk * dvn);
    }
    if (kMask == 2) ig_narrow(msum, dmask, mask_numel);
    if (kMask == 1) std::memset(static_cast<void*>(dmask), 0, static_cast<size_t>(mask_numel) * sizeof(ig_bf16));
  }
  std::free(sums);
  std::free(msum);
  if (failed) return ig_fail(ctx, "scaled_dot_product_attention_grad: out of memory for the kernel's scratch");
  return refused ? -1 : 0;
}

// The half types' backward: bfloat16 on the host's bf16 matmul (ig_attention_grad_bf16) where it
// can, else widened to float32, ig_attention_grad's float32 kernel, each gradient rounded once.
template <class T, int kMask>
int ig_attention_grad_lowp(const ig_ctx* ctx, const T* q, const T* k, const T* v, const T* dy, const void* mask, T* dq,
                           T* dk, T* dv, T* dmask, int64_t mask_numel, int64_t batch, int64_t hq, int64_t hk,
                           int64_t sq, int64_t sk, int64_t d, int64_t dvn, double scale, int causal, int64_t offset,
                           int nlead, const int64_t* lead, const int64_t* mstride, int swapped) {
  if constexpr (std::is_same<T, ig_bf16>::value) {
    if (ig_library_gemm && ctx->host->gemm_bf16 != nullptr && swapped == 0) {
      const int rc = ig_attention_grad_bf16<kMask>(ctx, q, k, v, dy, mask, dq, dk, dv, dmask, mask_numel, batch, hq, hk,
                                                   sq, sk, d, dvn, scale, causal, offset, nlead, lead, mstride);
      if (rc != -1) return rc;
    }
  }
  return ig_attention_grad_widened<float, T, kMask>(ctx, q, k, v, dy, mask, dq, dk, dv, dmask, mask_numel, batch, hq, hk,
                                                    sq, sk, d, dvn, scale, causal, offset, nlead, lead, mstride, swapped);
}
)IGPRELUDE";

}  // namespace ingot::cpu
