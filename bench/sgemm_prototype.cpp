// A packed SGEMM of our own against oneDNN's dnnl_sgemm: the prototype README.md's "GEMM
// epilogues, measured and not fused" reports (2026-11-27). Not part of the library or the build:
// it records what was measured, so the next attempt starts from it.
//
//   g++ -O3 -march=native -fopenmp bench/sgemm_prototype.cpp -o /tmp/sgemm_prototype -ldnnl
//   OMP_NUM_THREADS=2 /tmp/sgemm_prototype [threads] [t | n] [tiles | panels]
//   (t: B stored transposed, [N, K]; panels: ig_sgemm_panels, the second attempt, below)
//
// BLIS-style: a 12 x 32 register tile on AVX-512 (6 x 16 on AVX2; the last rows in tiles of 8, 4
// and 1-3), B packed per thread into blocks of kc x nb sized for half of L2 (read front to back),
// A read in place (packed only when transposed), K in blocks of 256, tiles of the output handed
// out to the threads dynamically. Prints, per product,
// each one's best GFLOP/s, own/dnnl time per round of alternating calls, and the largest
// difference (relative to the largest |C|).

#include <immintrin.h>
#include <omp.h>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#if defined(__AVX512F__)
constexpr int IG_MR = 12, IG_NR = 32;
#else
constexpr int IG_MR = 6, IG_NR = 16;
#endif
constexpr int64_t kKc = 256;           // K per packed block (split evenly)
constexpr int64_t kL2Bytes = 1 << 20;  // a tile's packed B block: about half of L2

// c[MR x NR] (=|+=) A (MR x kc: element (r, k) at ap[k * ASK + r * asr]) * bp (kc x NR, k-major).
// ASK is a constant (1: A read in place, row stride asr; IG_MR: packed, asr 1): with both strides
// at run time GCC spilled the row offsets and the kernel ran at 60% of the FMA peak; with one a
// constant it runs at the peak (150 GFLOP/s a core here) on panels in L1, 95% from L2.
template <int MR, int64_t ASK>
static inline void ig_micro(int64_t kc, const float* __restrict ap, int64_t asr, const float* __restrict bp,
                            float* __restrict c, int64_t ldc, bool acc, int nr) {
  constexpr int64_t ask = ASK;
  constexpr int mr = MR;
#if defined(__AVX512F__)
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(ap[r * asr]);
      c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
    }
    ap += ask;
    bp += IG_NR;
  }
  if (nr == IG_NR) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      float* cr = c + r * ldc;
      if (acc) {
        _mm512_storeu_ps(cr, _mm512_add_ps(_mm512_loadu_ps(cr), c0[r]));
        _mm512_storeu_ps(cr + 16, _mm512_add_ps(_mm512_loadu_ps(cr + 16), c1[r]));
      } else {
        _mm512_storeu_ps(cr, c0[r]);
        _mm512_storeu_ps(cr + 16, c1[r]);
      }
    }
    return;
  }
  const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
  for (int r = 0; r < mr; ++r) {
    float* cr = c + r * ldc;
    __m512 v0 = c0[r], v1 = c1[r];
    if (acc) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), v1);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
#else
  __m256 c0[MR], c1[MR];
  for (int r = 0; r < MR; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + r * asr);
      c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
    }
    ap += ask;
    bp += IG_NR;
  }
  alignas(32) float t[IG_NR];
  for (int r = 0; r < mr; ++r) {
    float* cr = c + r * ldc;
    if (nr == IG_NR) {
      if (acc) {
        _mm256_storeu_ps(cr, _mm256_add_ps(_mm256_loadu_ps(cr), c0[r]));
        _mm256_storeu_ps(cr + 8, _mm256_add_ps(_mm256_loadu_ps(cr + 8), c1[r]));
      } else {
        _mm256_storeu_ps(cr, c0[r]);
        _mm256_storeu_ps(cr + 8, c1[r]);
      }
    } else {
      _mm256_store_ps(t, c0[r]);
      _mm256_store_ps(t + 8, c1[r]);
      for (int j = 0; j < nr; ++j) cr[j] = acc ? cr[j] + t[j] : t[j];
    }
  }
#endif
}

struct IgNoEpi {
  void operator()(int64_t, int64_t, int64_t, int64_t, float*, int64_t) const {}
};

// Per-thread packing buffers, grown as needed and kept between calls.
static inline float* ig_thread_buffer(size_t floats) {
  static thread_local float* buf = nullptr;
  static thread_local size_t cap = 0;
  if (floats > cap) {
    std::free(buf);
    cap = (floats + 1023) / 1024 * 1024;
    buf = static_cast<float*>(std::aligned_alloc(64, cap * sizeof(float)));
  }
  return buf;
}

// C[M,N] = op(A) op(B) then epi(i0, j0, rows, cols, C + i0*ldc + j0, ldc) on each finished
// block while it is in cache.
template <class Epi>
void ig_sgemm(int threads, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
              const float* B, int64_t ldb, float* C, int64_t ldc, const Epi& epi) {
  const int64_t nk = std::max<int64_t>(1, (K + kKc - 1) / kKc);
  const int64_t kc_max = (K + nk - 1) / nk;
  // Tiles: at least 4 per thread (handed out dynamically), each B block (kc x nb) within L2,
  // splitting so that the packing (A once per column tile, B once per row tile) is least.
  const int64_t nb_l2 = std::max<int64_t>(IG_NR, (kL2Bytes / 4 / kc_max) / IG_NR * IG_NR);
  const int64_t want = 4 * threads, row_panels = (M + IG_MR - 1) / IG_MR;
  int64_t tiles_m = 1, tiles_n = 1, best = -1;
  for (int64_t tm = 1; tm <= std::min<int64_t>(row_panels, 4 * want); ++tm) {
    const int64_t tn = std::max<int64_t>((N + nb_l2 - 1) / nb_l2, (want + tm - 1) / tm);
    const int64_t cost = M * tn + N * tm;
    if (best < 0 || cost < best) { best = cost; tiles_m = tm; tiles_n = tn; }
  }
  const int64_t nb = ((N + tiles_n - 1) / tiles_n + IG_NR - 1) / IG_NR * IG_NR;
  tiles_n = (N + nb - 1) / nb;
  const int64_t mb = ((M + tiles_m - 1) / tiles_m + IG_MR - 1) / IG_MR * IG_MR;
  tiles_m = (M + mb - 1) / mb;
  const int64_t tiles = tiles_m * tiles_n;
#pragma omp parallel num_threads(threads)
  {
    float* bpack = ig_thread_buffer(size_t(kc_max) * nb + size_t(IG_MR) * kc_max + 64);
    float* apack = bpack + size_t(kc_max) * nb;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t tn = t / tiles_m, tm = t % tiles_m;
      const int64_t i0 = tm * mb, i1 = std::min(M, i0 + mb), j0 = tn * nb, j1 = std::min(N, j0 + nb);
      const int64_t ncols = j1 - j0;
      for (int64_t p = 0; p < nk; ++p) {
        const int64_t k0 = p * kc_max, kc = std::min(K, k0 + kc_max) - k0;
        // Pack B[k0:k0+kc, j0:j1] into panels of IG_NR columns (zero-padded), reading B's rows
        // (or, transposed, its columns) front to back.
        const int64_t full = ncols / IG_NR * IG_NR;
        if (!tb) {
          for (int64_t k = 0; k < kc; ++k) {
            const float* src = B + (k0 + k) * ldb + j0;
            for (int64_t jp = 0; jp < full; jp += IG_NR) {
              float* d = bpack + jp * kc + k * IG_NR;
#pragma GCC unroll 4
              for (int j = 0; j < IG_NR; ++j) d[j] = src[jp + j];
            }
            if (full < ncols) {
              float* d = bpack + full * kc + k * IG_NR;
              for (int j = 0; j < IG_NR; ++j) d[j] = full + j < ncols ? src[full + j] : 0.f;
            }
          }
        } else {
          for (int64_t jp = 0; jp < ncols; jp += IG_NR) {
            float* dst = bpack + jp * kc;
            for (int j = 0; j < IG_NR; ++j) {
              if (jp + j < ncols) {
                const float* src = B + (j0 + jp + j) * ldb + k0;
                for (int64_t k = 0; k < kc; ++k) dst[k * IG_NR + j] = src[k];
              } else {
                for (int64_t k = 0; k < kc; ++k) dst[k * IG_NR + j] = 0.f;
              }
            }
          }
        }
        for (int64_t i = i0; i < i1;) {
          // Row panels of 12, then one of 8 and one of 4 for the rest, then 1-3 rows.
          const int64_t rest = i1 - i;
          const int mr = rest >= IG_MR ? IG_MR : rest >= 8 ? 8 : rest >= 4 ? 4 : int(rest);
          const float* ap = A + i * lda + k0;
          if (ta) {  // pack op(A)[i:i+mr, k0:k0+kc] k-major, IG_MR apart
            for (int64_t k = 0; k < kc; ++k) {
              const float* src = A + (k0 + k) * lda + i;
              for (int r = 0; r < mr; ++r) apack[k * IG_MR + r] = src[r];
            }
            ap = apack;
          }
          for (int64_t jp = 0; jp < ncols; jp += IG_NR) {
            const int nr = int(std::min<int64_t>(IG_NR, ncols - jp));
            float* c = C + i * ldc + j0 + jp;
            const float* bp = bpack + jp * kc;
            const bool acc = p > 0;
#define IG_MICRO(R)                                                          \
  (ta ? ig_micro<R, IG_MR>(kc, ap, 1, bp, c, ldc, acc, nr) : ig_micro<R, 1>(kc, ap, lda, bp, c, ldc, acc, nr))
            switch (mr) {
              case IG_MR: IG_MICRO(IG_MR); break;
              case 8: IG_MICRO(8); break;
              case 4: IG_MICRO(4); break;
              case 3: IG_MICRO(3); break;
              case 2: IG_MICRO(2); break;
              default: IG_MICRO(1); break;
            }
#undef IG_MICRO
          }
          if (p == nk - 1) epi(i, j0, mr, ncols, C + i * ldc + j0, ldc);
          i += mr;
        }
      }
    }
  }
}

// The second attempt (2026-11-29, README "GEMM epilogues"): one 32-column B panel at a time, so
// that a panel's output is final, and in cache, after its last K block (where an epilogue would
// run). Each thread takes a static share of the panels; for each K block it packs the panel
// (kc x 32, into L1) and sweeps every row micro panel of A, read in place, while prefetching the
// next panel's rows (pages apart in B: the hardware prefetcher does not follow them). Measured
// 1.05-1.20x dnnl_sgemm's time on two threads and 1.02-1.17x on one at BERT's shapes; perf put 9%
// of it in the packing. Non-transposed A only.
template <class Epi>
void ig_sgemm_panels(int threads, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                     const float* B, int64_t ldb, float* C, int64_t ldc, const Epi& epi) {
  const int64_t nk = std::max<int64_t>(1, (K + kKc - 1) / kKc);
  const int64_t kc_max = (K + nk - 1) / nk;
  std::vector<int64_t> row0;  // row micro panels: 12s, then one of 8 and one of 4, then 1-3 rows
  std::vector<int> rows;
  for (int64_t i = 0; i < M;) {
    const int64_t rest = M - i;
    rows.push_back(rest >= IG_MR ? IG_MR : rest >= 8 ? 8 : rest >= 4 ? 4 : int(rest));
    row0.push_back(i);
    i += rows.back();
  }
  const int64_t panels = int64_t(rows.size()), ncp = (N + IG_NR - 1) / IG_NR;
#pragma omp parallel num_threads(threads)
  {
    float* bp = ig_thread_buffer(size_t(kc_max) * IG_NR + 64);
#pragma omp for schedule(static)
    for (int64_t cp = 0; cp < ncp; ++cp) {
      const int64_t j0 = cp * IG_NR;
      const int nr = int(std::min<int64_t>(IG_NR, N - j0));
      for (int64_t p = 0; p < nk; ++p) {
        const int64_t k0 = p * kc_max, kc = std::min(K, k0 + kc_max) - k0;
        for (int64_t k = 0; k < kc; ++k)
          for (int j = 0; j < IG_NR; ++j)
            bp[k * IG_NR + j] = j >= nr ? 0.f : tb ? B[(j0 + j) * ldb + k0 + k] : B[(k0 + k) * ldb + j0 + j];
        // The next panel's rows, spread over this panel's row sweeps.
        const int64_t nj0 = p + 1 == nk ? j0 + IG_NR : j0, nk0 = p + 1 == nk ? 0 : k0 + kc;
        const int64_t nkc = p + 1 == nk ? std::min(K, kc_max) : std::min(K, nk0 + kc_max) - nk0;
        const int64_t per = (nkc + panels - 1) / panels;
        int64_t next = 0;
        for (int64_t q = 0; q < panels; ++q) {
          for (const int64_t e = std::min(nkc, next + per); !tb && nj0 < N && next < e; ++next) {
            __builtin_prefetch(B + (nk0 + next) * ldb + nj0, 0, 3);
            __builtin_prefetch(B + (nk0 + next) * ldb + nj0 + 16, 0, 3);
          }
          const float* ap = A + row0[q] * lda + k0;
          float* c = C + row0[q] * ldc + j0;
          const bool acc = p > 0;
          switch (rows[q]) {
            case IG_MR: ig_micro<IG_MR, 1>(kc, ap, lda, bp, c, ldc, acc, nr); break;
            case 8: ig_micro<8, 1>(kc, ap, lda, bp, c, ldc, acc, nr); break;
            case 4: ig_micro<4, 1>(kc, ap, lda, bp, c, ldc, acc, nr); break;
            case 3: ig_micro<3, 1>(kc, ap, lda, bp, c, ldc, acc, nr); break;
            case 2: ig_micro<2, 1>(kc, ap, lda, bp, c, ldc, acc, nr); break;
            default: ig_micro<1, 1>(kc, ap, lda, bp, c, ldc, acc, nr); break;
          }
        }
      }
      epi(0, j0, M, nr, C + j0, ldc);
    }
  }
}

#include <dnnl.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const bool tb = argc > 2 && argv[2][0] == 't';
  const bool by_panels = argc > 3 && argv[3][0] == 'p';
  struct Shape { int M, K, N; };
  for (const Shape sh : std::vector<Shape>{{128, 768, 3072}, {128, 3072, 768}, {128, 768, 768}, {128, 768, 2304},
                                           {512, 768, 768}, {1024, 768, 3072}, {1024, 3072, 768}, {77, 300, 130}}) {
    const int M = sh.M, K = sh.K, N = sh.N, ldb = tb ? K : N;
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N), D(size_t(M) * N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = 0.01f * float((i * 7919) % 1013) - 0.05f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = 0.01f * float((i * 104729) % 1111) - 0.05f;
    auto library = [&] { dnnl_sgemm('N', tb ? 'T' : 'N', M, N, K, 1.f, A.data(), K, B.data(), ldb, 0.f, D.data(), N); };
    auto own = [&] {
      if (by_panels) ig_sgemm_panels(threads, tb, M, N, K, A.data(), K, B.data(), ldb, C.data(), N, IgNoEpi{});
      else ig_sgemm(threads, false, tb, M, N, K, A.data(), K, B.data(), ldb, C.data(), N, IgNoEpi{});
    };
    library();
    own();
    double err = 0, big = 0;
    for (size_t i = 0; i < C.size(); ++i) {
      err = std::max(err, double(std::fabs(C[i] - D[i])));
      big = std::max(big, double(std::fabs(D[i])));
    }
    // The VM's speed drifts by up to 2x over minutes: 11 rounds, each the best of a few calls of
    // one and then the other, and the ratio taken within each round.
    std::vector<double> ratio, tl, to;
    const int calls = M >= 1024 ? 2 : 6;
    for (int round = 0; round < 11; ++round) {
      double a = 1e30, b = 1e30;
      for (int i = 0; i < calls; ++i) {
        double t = now_ms();
        library();
        a = std::min(a, now_ms() - t);
        t = now_ms();
        own();
        b = std::min(b, now_ms() - t);
      }
      ratio.push_back(b / a);
      tl.push_back(a);
      to.push_back(b);
    }
    std::sort(ratio.begin(), ratio.end());
    std::sort(tl.begin(), tl.end());
    std::sort(to.begin(), to.end());
    const double mflop = 2.0 * M * N * K / 1e6;
    std::printf("%5d x %5d x %5d%s: dnnl_sgemm best %4.0f GFLOP/s, own best %4.0f; own/dnnl per round %.2f-%.2f "
                "(median %.2f); diff %.1e\n",
                M, K, N, tb ? " (B^T)" : "", mflop / tl[0], mflop / to[0], ratio.front(), ratio.back(), ratio[5],
                err / big);
    std::fflush(stdout);
  }
}
