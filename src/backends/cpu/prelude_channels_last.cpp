// The prelude's kernels for buffers the layout plan stores channels-last (NHWC or channel-blocked),
// part of prelude(), after the run-time support whose NCHW kernels they mirror.
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kChannelsLastPrelude = R"IGPRELUDE(
// ---- channels-last variants, for buffers the layout plan stores NHWC or channel-blocked ----
// batch_norm of a buffer viewed as [outer, blocks, pixels, block] with channel = b * block + lane
// (NHWC: [N * H * W, 1, 1, C]; blocked: [N, C / block, H * W, block]); the arithmetic of
// ig_batch_norm. B: the block as a compile-time constant (8, 16: the lane loop unrolls into
// vector instructions), 0 when it is only known at run time (NHWC's C).
template <int B, class T, class P1, class P2, class P3, class P4>
void ig_batch_norm_cl(const T* __restrict x, const P1* w, const P2* b, const P3* mean, const P4* var,
                      T* __restrict y, int64_t outer, int64_t blocks, int64_t pixels, int64_t runtime_block, double eps) {
  using C = ig_c<T>;
  const int64_t block = B > 0 ? B : runtime_block;
  const int64_t channels = blocks * block;
  C* sc = static_cast<C*>(std::malloc(sizeof(C) * size_t(channels > 0 ? 2 * channels : 1)));
  if (sc == nullptr) throw std::bad_alloc();
  C* sh = sc + channels;
  for (int64_t c = 0; c < channels; ++c) {
    const double scale = static_cast<double>(static_cast<ig_c<P1>>(w[c])) /
                         std::sqrt(static_cast<double>(static_cast<ig_c<P4>>(var[c])) + eps);
    sc[c] = static_cast<C>(scale);
    sh[c] = static_cast<C>(static_cast<double>(static_cast<ig_c<P2>>(b[c])) -
                           static_cast<double>(static_cast<ig_c<P3>>(mean[c])) * scale);
  }
  #pragma omp parallel for if(ig_big(outer * channels * pixels) && outer * blocks > 1)
  for (int64_t ob = 0; ob < outer * blocks; ++ob) {
    const C* scb = sc + (ob % blocks) * block;
    const C* shb = sh + (ob % blocks) * block;
    for (int64_t p = 0; p < pixels; ++p) {
      const T* xr = x + (ob * pixels + p) * block;
      T* yr = y + (ob * pixels + p) * block;
      #pragma omp simd
      for (int64_t l = 0; l < block; ++l) yr[l] = static_cast<T>(static_cast<C>(xr[l]) * scb[l] + shb[l]);
    }
  }
  std::free(sc);
}

// Sums pixels [p0, p1) of m <= 16 channels (kM: m known as 16 when compiled, so the sums stay in
// registers) of rows `inner` apart into out[0, m), in double: even and odd pixels in two sets of
// sums, so consecutive adds do not wait on each other.
template <int kM, class T>
inline void ig_sum_channels(const T* __restrict x, int64_t inner, int64_t p0, int64_t p1, int64_t m,
                            double* __restrict out) {
  using C = ig_c<T>;
  if constexpr (kM > 0) m = kM;
  double a[16] = {}, b[16] = {};
  int64_t p = p0;
  for (; p + 1 < p1; p += 2) {
    const T* r0 = x + p * inner;
    const T* r1 = r0 + inner;
    #pragma omp simd
    for (int64_t c = 0; c < m; ++c) {
      a[c] += static_cast<double>(static_cast<C>(r0[c]));
      b[c] += static_cast<double>(static_cast<C>(r1[c]));
    }
  }
  if (p < p1)
    for (int64_t c = 0; c < m; ++c) a[c] += static_cast<double>(static_cast<C>(x[p * inner + c]));
  for (int64_t c = 0; c < m; ++c) out[c] = a[c] + b[c];
}

// global_avg_pool2d of a buffer viewed as [outer, pixels, inner] into [outer, inner] (NHWC:
// [N, H * W, C]; blocked: [N * C / block, H * W, block], whose [outer, inner] order is y's): the
// pixels streamed once (the NCHW reduction strides through the image once per channel), summed
// in double per channel. The work is cut into 16 channels x up to 1,024 pixels, so one image of
// few channels (EfficientNet's [1, 32, 112, 112]) runs on every thread and in registers; the
// pieces' partial sums are then added in pixel order, the same for any number of threads.
template <class T, class O>
void ig_avg_pool_cl(const T* __restrict x, O* __restrict y, int64_t outer, int64_t pixels, int64_t inner) {
  constexpr int64_t kPixels = 1024;
  const int64_t cb = (inner + 15) / 16, pb = pixels > 0 ? (pixels + kPixels - 1) / kPixels : 1;
  const int64_t units = outer * cb * pb;
  if (units == 0 || inner == 0) return;
  auto sum = [&](int64_t u, double* out) {
    const int64_t o = u / (cb * pb), c0 = u / pb % cb * 16, q = u % pb, m = std::min<int64_t>(16, inner - c0);
    const T* xo = x + o * pixels * inner + c0;
    const int64_t p0 = q * kPixels, p1 = std::min(pixels, p0 + kPixels);
    if (m == 16) ig_sum_channels<16>(xo, inner, p0, p1, m, out);
    else if (m == 8) ig_sum_channels<8>(xo, inner, p0, p1, m, out);
    else ig_sum_channels<0>(xo, inner, p0, p1, m, out);
  };
  // y for channels [c0, c0 + 16) of image o from piece q's sums, pieces added in pixel order.
  auto finish = [&](int64_t oc, const auto& piece) {
    const int64_t o = oc / cb, c0 = oc % cb * 16, m = std::min<int64_t>(16, inner - c0);
    double t[16] = {};
    for (int64_t q = 0; q < pb; ++q) {
      const double* s = piece(q);
      for (int64_t c = 0; c < m; ++c) t[c] += s[c];
    }
    for (int64_t c = 0; c < m; ++c) y[o * inner + c0 + c] = static_cast<O>(t[c] / static_cast<double>(pixels));
  };
  double* parts = static_cast<double*>(ig_scratch(static_cast<size_t>(units) * 16 * sizeof(double)));
  if (parts == nullptr) {  // no scratch: the same pieces, one at a time on this thread
    double one[16];
    for (int64_t oc = 0; oc < outer * cb; ++oc)
      finish(oc, [&](int64_t q) {
        sum(oc * pb + q, one);
        return static_cast<const double*>(one);
      });
    return;
  }
  #pragma omp parallel for if(ig_big(outer * pixels * inner) && units > 1)
  for (int64_t u = 0; u < units; ++u) sum(u, parts + u * 16);
  for (int64_t oc = 0; oc < outer * cb; ++oc)
    finish(oc, [&](int64_t q) { return static_cast<const double*>(parts + (oc * pb + q) * 16); });
  std::free(parts);
}

// The max pools' step: v where it is larger or NaN (a NaN in the window wins, as in the
// reference kernel), else m.
template <class C>
inline C ig_max_or_nan(C m, C v) { return (v > m || v != v) ? v : m; }

// One window's maximum over lanes [l0, l0 + n) of a [.., H, W, lanes] plane (n <= 64); kN > 0:
// n is kN, known when compiled, so the accumulators stay in registers (the channel blocks of 8
// and 16 that the layout plan gives a CNN: ResNet's first max pooling took twice ONNX Runtime's
// time with a run-time lane count).
template <int64_t kN, class T>
inline void ig_max_window(const T* __restrict xo, T* __restrict yp, int64_t W, int64_t lanes, int64_t h0, int64_t h1,
                          int64_t w0, int64_t w1, int64_t l0, int64_t n) {
  using C = ig_c<T>;
  if constexpr (kN > 0) n = kN;
  C m[kN > 0 ? kN : 64];
  const T* first = xo + (h0 * W + w0) * lanes + l0;
  for (int64_t l = 0; l < n; ++l) m[l] = static_cast<C>(first[l]);
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const T* xp = xo + (h * W + w) * lanes + l0;
      #pragma omp simd
      for (int64_t l = 0; l < n; ++l) m[l] = ig_max_or_nan(m[l], static_cast<C>(xp[l]));
    }
  for (int64_t l = 0; l < n; ++l) yp[l0 + l] = static_cast<T>(m[l]);
}

extern "C" int omp_get_max_threads();
extern "C" int omp_get_thread_num();

// The maxima m[0, 16) of 16 windows [kh, kw] side by side, `sw` apart, in a padded buffer whose
// rows are `wp` long; kSw > 0: sw is kSw, known when compiled, so the loads are whole vectors
// (stride 1) or pairs of them, not built element by element.
template <int64_t kSw, class C>
inline void ig_max_16_windows(const C* __restrict base, int64_t wp, int64_t kh, int64_t kw, int64_t sw, C* __restrict m) {
  if constexpr (kSw > 0) sw = kSw;
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      const C* xr = base + i * wp + j;
      #pragma omp simd
      for (int64_t l = 0; l < 16; ++l) m[l] = ig_max_or_nan(m[l], xr[l * sw]);
    }
}

// One step of the windows' running maxima: acc[c] against r[c] for the n output columns (r a
// window element's column for each output, contiguous).
template <class C>
inline void ig_max_into(const C* __restrict r, C* __restrict acc, int64_t n) {
  #pragma omp simd
  for (int64_t c = 0; c < n; ++c) acc[c] = ig_max_or_nan(acc[c], r[c]);
}

// NCHW max pooling (x [outer, H, W] -> y [outer, Ho, Wo]) over tasks of 8 output rows of a
// plane: each task copies the input rows it reads into its thread's buffer, padded with -inf on
// both sides and where a row lies outside the input, so every window is whole and each output
// row's columns run 16 at a time in fixed-length vector loops. (The clipped scalar loop took
// 600 us for a 3x3 pool over 384 planes of 8x8 in GoogLeNet, bound by its branches.) Windows 3
// wide at stride 2 (ResNet's stem pool) instead split each buffer row into its even and odd
// columns, so window element j of every output is one contiguous run (ev or od from j / 2) and
// each step is one vector loop over the whole output row: GCC left the 16-window loop's stride-2
// loads scalar, with a branch per lane for the NaN test (3.6 -> 1.7 ms on ResNet-18's
// [8, 64, 112, 112] in training graphs, the same bits; at stride 1 and for 2-wide windows the
// 16-window loop stays faster). Every window's elements are taken in the same row-major order
// either way. False, having done nothing, when the buffers cannot be allocated.
template <class T>
bool ig_max_pool2d_rows(const T* __restrict x, T* __restrict y, int64_t outer, int64_t H, int64_t W, int64_t Ho,
                        int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, ig_c<T> none) {
  using C = ig_c<T>;
  constexpr int64_t kLanes = 16, kRows = 8;  // (ig_max_16_windows)
  if (outer == 0 || Ho == 0 || Wo == 0) return true;
  const int64_t wide = (Wo + kLanes - 1) / kLanes * kLanes;         // output columns, rounded up
  const int64_t wp = std::max<int64_t>(pw + W, (wide - 1) * sw + kw);  // buffer row length
  const int64_t rows = (std::min<int64_t>(kRows, Ho) - 1) * sh + kh;   // buffer rows a task reads
  const bool split = sw == 2 && kw == 3;
  // A thread's buffer rows, one element past the last (the odd half reads up to index wp), and
  // with `split` the output row's maxima (wide) and the even and odd halves of a row.
  const int64_t half = (wp + 1) / 2, per_thread = rows * wp + 1 + (split ? wide + 2 * half : 0);
  const int threads = omp_get_max_threads();
  C* all = static_cast<C*>(ig_scratch(sizeof(C) * static_cast<size_t>(threads * per_thread)));
  if (all == nullptr) return false;
  for (int64_t i = 0; i < threads * per_thread; ++i) all[i] = none;  // the side padding stays none
  const int64_t blocks = (Ho + kRows - 1) / kRows;
  #pragma omp parallel if(ig_big(outer * Ho * Wo * kh * kw))
  {
    C* buf = all + omp_get_thread_num() * per_thread;
    C* acc = buf + rows * wp + 1;
    C* ev = acc + wide;
    C* od = ev + half;
    #pragma omp for collapse(2) schedule(static)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t oh0 = blk * kRows, oh1 = std::min<int64_t>(Ho, oh0 + kRows);
        for (int64_t r = 0; r < (oh1 - oh0 - 1) * sh + kh; ++r) {
          const int64_t h = oh0 * sh - ph + r;
          C* line = buf + r * wp + pw;
          if (h >= 0 && h < H) {
            const T* xr = x + (o * H + h) * W;
            for (int64_t w = 0; w < W; ++w) line[w] = static_cast<C>(xr[w]);
          } else {
            for (int64_t w = 0; w < W; ++w) line[w] = none;
          }
        }
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          const C* base = buf + (oh - oh0) * sh * wp;
          T* yr = y + (o * Ho + oh) * Wo;
          if (split) {
            for (int64_t c = 0; c < Wo; ++c) acc[c] = none;
            for (int64_t i = 0; i < kh; ++i) {
              const C* line = base + i * wp;
              #pragma omp simd
              for (int64_t k = 0; k < half; ++k) {
                ev[k] = line[2 * k];
                od[k] = line[2 * k + 1];
              }
              ig_max_into(ev, acc, Wo);      // column 2c
              ig_max_into(od, acc, Wo);      // 2c + 1
              ig_max_into(ev + 1, acc, Wo);  // 2c + 2
            }
            for (int64_t c = 0; c < Wo; ++c) yr[c] = static_cast<T>(acc[c]);
            continue;
          }
          for (int64_t c0 = 0; c0 < Wo; c0 += kLanes) {
            C m[kLanes];
            for (int64_t l = 0; l < kLanes; ++l) m[l] = none;
            if (sw == 1) ig_max_16_windows<1>(base + c0, wp, kh, kw, sw, m);
            else if (sw == 2) ig_max_16_windows<2>(base + c0 * 2, wp, kh, kw, sw, m);
            else ig_max_16_windows<0>(base + c0 * sw, wp, kh, kw, sw, m);
            const int64_t n = std::min<int64_t>(kLanes, Wo - c0);
            for (int64_t l = 0; l < n; ++l) yr[c0 + l] = static_cast<T>(m[l]);
          }
        }
      }
  }
  std::free(all);
  return true;
}

// Max pooling over x = [outer, H, W, lanes] into y = [outer, Ho, Wo, lanes]: NCHW is lanes 1
// (outer N * C), NHWC outer N (lanes C), channel blocks outer N * C / b (lanes b). Windows are
// clipped to the input (padding counts as -inf). The shape rule keeps 2 * padding <= kernel, and
// ceil_mode's last window starts inside the input or its start padding, so a window holds a
// real element unless the input has no rows or columns: then it is all padding, -inf (found by
// the program fuzzer, seed 50238: the first element of an empty window was read, out of
// bounds). NaN wins, as in the reference kernel. NCHW runs ig_max_pool2d_rows (the clipped loop
// below only if its buffers cannot be allocated).
template <class T>
void ig_max_pool2d(const T* __restrict x, T* __restrict y, int64_t outer, int64_t H, int64_t W, int64_t lanes,
                   int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  using C = ig_c<T>;
  const C none = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
  if (lanes == 1 && ig_max_pool2d_rows(x, y, outer, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, none)) return;
  #pragma omp parallel for collapse(2) if(ig_big(outer * Ho * Wo * lanes * kh * kw))
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * sh - ph, 0), h1 = std::min<int64_t>(oh * sh - ph + kh, H);
      const T* xo = x + o * H * W * lanes;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * sw - pw, 0), w1 = std::min<int64_t>(ow * sw - pw + kw, W);
        T* yp = y + ((o * Ho + oh) * Wo + ow) * lanes;
        if (h0 >= h1 || w0 >= w1) {
          for (int64_t l = 0; l < lanes; ++l) yp[l] = static_cast<T>(none);
          continue;
        }
        if (lanes == 16) {
          ig_max_window<16>(xo, yp, W, lanes, h0, h1, w0, w1, 0, 16);
        } else if (lanes == 8) {
          ig_max_window<8>(xo, yp, W, lanes, h0, h1, w0, w1, 0, 8);
        } else {
          for (int64_t l0 = 0; l0 < lanes; l0 += 64)
            ig_max_window<0>(xo, yp, W, lanes, h0, h1, w0, w1, l0, std::min<int64_t>(64, lanes - l0));
        }
      }
    }
}

// max_pool2d's gradient over NCHW planes (float, double): each window's dy added to the window's
// first maximum in row-major order (a NaN, once seen, is the maximum), as the reference kernel
// does, window by window in the reference's order; one plane per task, so no two threads add into
// one element. Finding the maximum is most of the work, and with a branch per comparison it went
// to mispredictions (random inputs: 18 ms for ResNet's [8, 64, 112, 112] pool, 6.9% of its
// training step): windows wholly inside a row of the plane take ig_window_argmax, branch free
// across vector lanes (4.2 ms, the same bits), for the kernel/stride pairs it is instantiated for;
// windows at the edges and other shapes take ig_window_argmax_clipped.
template <class T>
inline int64_t ig_window_argmax_clipped(const T* __restrict xp, int64_t W, int64_t h0, int64_t h1, int64_t w0,
                                        int64_t w1) {
  int64_t at = h0 * W + w0;
  T m = xp[at];
  for (int64_t h = h0; h < h1 && m == m; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const T v = xp[h * W + w];
      if (v > m || v != v) {
        m = v;
        at = h * W + w;
        if (v != v) break;
      }
    }
  return at;
}

// The same for the K x K windows of rows h0..h0+K at columns c0..c1 (all inside the plane), their
// flat indices into `at`: K and the stride S known at compile time, so the loops unroll and the
// windows run across the vector lanes. (With both at run time GCC left the loop scalar.)
template <int K, int S, class T>
inline void ig_window_argmax(const T* __restrict xp, int64_t W, int64_t h0, int64_t pw, int64_t c0, int64_t c1,
                             int64_t* __restrict at) {
  #pragma omp simd
  for (int64_t ow = c0; ow < c1; ++ow) {
    const int64_t base = h0 * W + ow * S - pw;
    T m = xp[base];
    int64_t a = base;
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < K; ++j) {
        const T v = xp[base + i * W + j];
        const bool better = v > m || (v != v && m == m);  // once m is NaN, nothing replaces it
        m = better ? v : m;
        a = better ? base + i * W + j : a;
      }
    at[ow - c0] = a;
  }
}

template <class T>
void ig_max_pool2d_grad(const T* __restrict x, const T* __restrict dy, T* __restrict dx, int64_t planes, int64_t H,
                        int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                        int64_t pw) {
  // Columns [lo, hi) of windows wholly inside [0, W): ow * sw - pw >= 0 and ow * sw - pw + kw <= W.
  const int64_t lo = std::min<int64_t>(Wo, (pw + sw - 1) / sw);
  const int64_t hi = std::max<int64_t>(lo, std::min<int64_t>(Wo, W - kw + pw >= 0 ? (W - kw + pw) / sw + 1 : 0));
  // The vectorized search for this kernel and stride (the ig_window_argmax instances), or null.
  using Search = void (*)(const T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t*);
  const Search search = kh == 3 && kw == 3 && sw == 2   ? ig_window_argmax<3, 2, T>
                        : kh == 3 && kw == 3 && sw == 1 ? ig_window_argmax<3, 1, T>
                        : kh == 2 && kw == 2 && sw == 2 ? ig_window_argmax<2, 2, T>
                                                        : nullptr;
  #pragma omp parallel for if(ig_big(planes * Ho * Wo * kh * kw))
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    const T* dyp = dy + p * Ho * Wo;
    T* dxp = dx + p * H * W;
    for (int64_t i = 0; i < H * W; ++i) dxp[i] = T(0);
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * sh - ph, 0), h1 = std::min<int64_t>(oh * sh - ph + kh, H);
      if (h0 >= h1) continue;  // all padding: no input element takes the gradient
      auto clipped = [&](int64_t ow) {
        const int64_t w0 = std::max<int64_t>(ow * sw - pw, 0), w1 = std::min<int64_t>(ow * sw - pw + kw, W);
        if (w0 < w1) dxp[ig_window_argmax_clipped(xp, W, h0, h1, w0, w1)] += dyp[oh * Wo + ow];
      };
      if (search == nullptr || h1 - h0 != kh) {  // another shape, or rows clipped by the padding
        for (int64_t ow = 0; ow < Wo; ++ow) clipped(ow);
        continue;
      }
      for (int64_t ow = 0; ow < lo; ++ow) clipped(ow);
      for (int64_t c0 = lo; c0 < hi; c0 += 64) {  // dy added in column order, as the reference
        const int64_t c1 = c0 + 64 < hi ? c0 + 64 : hi;
        int64_t at[64];
        search(xp, W, h0, pw, c0, c1, at);
        for (int64_t ow = c0; ow < c1; ++ow) dxp[at[ow - c0]] += dyp[oh * Wo + ow];
      }
      for (int64_t ow = hi; ow < Wo; ++ow) clipped(ow);
    }
  }
}
)IGPRELUDE";

}  // namespace ingot::cpu
