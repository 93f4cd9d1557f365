// The prelude's average pooling and its gradient (avg_pool2d, avg_pool2d_grad in
// src/ops/linalg.cpp): the forward in any layout, the gradient over NCHW planes; windows clipped to the input, the divisor the whole window
// (count_include_pad 1) or the part inside it (0); the same order of additions as the reference.
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kPoolPrelude = R"IGPRELUDE(
// ---- avg_pool2d over [outer, H, W, lanes] -> [outer, Ho, Wo, lanes] (as ig_max_pool2d: NCHW is
// lanes 1, NHWC outer N and lanes C, channel blocks outer N * C / b and lanes b); each lane's
// window summed in the same row-major order in every layout, so all give the same bits; the half
// types sum and divide in float32 (ig_c) and round once, as the reference does ----
template <class T>
void ig_avg_pool2d(const T* __restrict x, T* __restrict y, int64_t outer, int64_t H, int64_t W, int64_t lanes,
                   int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                   int include_pad) {
  using C = ig_c<T>;
  const C full = static_cast<C>(kh * kw);
  #pragma omp parallel for collapse(2) if(ig_big(outer * Ho * Wo * lanes * kh * kw))
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const T* xo = x + o * H * W * lanes;
      const int64_t h = oh * sh - ph, h0 = h > 0 ? h : 0, h1 = h + kh < H ? h + kh : H;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t c = ow * sw - pw, w0 = c > 0 ? c : 0, w1 = c + kw < W ? c + kw : W;
        const C div = include_pad ? full : static_cast<C>((h1 - h0) * (w1 - w0));
        T* yp = y + ((o * Ho + oh) * Wo + ow) * lanes;
        if (lanes == 1) {
          C sum = 0;
          for (int64_t i = h0; i < h1; ++i)
            for (int64_t j = w0; j < w1; ++j) sum += static_cast<C>(xo[i * W + j]);
          yp[0] = static_cast<T>(sum / div);
          continue;
        }
        for (int64_t l0 = 0; l0 < lanes; l0 += 64) {
          const int64_t n = lanes - l0 < 64 ? lanes - l0 : 64;
          C sum[64];
          for (int64_t l = 0; l < n; ++l) sum[l] = 0;
          for (int64_t i = h0; i < h1; ++i)
            for (int64_t j = w0; j < w1; ++j) {
              const T* xp = xo + (i * W + j) * lanes + l0;
              #pragma omp simd
              for (int64_t l = 0; l < n; ++l) sum[l] += static_cast<C>(xp[l]);
            }
          for (int64_t l = 0; l < n; ++l) yp[l0 + l] = static_cast<T>(sum[l] / div);
        }
      }
    }
}

// ---- avg_pool2d_grad over NCHW planes [planes, Ho, Wo] -> [planes, H, W] ----
// Each window's gradient spread evenly over the elements it averaged, summed in double per plane.
template <class T>
int ig_avg_pool2d_grad(const ig_ctx* ctx, const T* __restrict dy, T* __restrict dx, int64_t planes, int64_t H,
                       int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                       int64_t pw, int include_pad) {
  const double full = static_cast<double>(kh * kw);
  int failed = 0;
  #pragma omp parallel if(ig_big(planes * Ho * Wo * kh * kw) && planes > 1)
  {
    double* acc = static_cast<double*>(std::malloc(static_cast<size_t>(H * W > 0 ? H * W : 1) * sizeof(double)));
    if (acc == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    #pragma omp for
    for (int64_t p = 0; p < planes; ++p) {
      if (acc == nullptr) continue;
      std::fill(acc, acc + H * W, 0.0);
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h = oh * sh - ph, h0 = h > 0 ? h : 0, h1 = h + kh < H ? h + kh : H;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t c = ow * sw - pw, w0 = c > 0 ? c : 0, w1 = c + kw < W ? c + kw : W;
          const double d = static_cast<double>(dy[(p * Ho + oh) * Wo + ow]) /
                           (include_pad ? full : static_cast<double>((h1 - h0) * (w1 - w0)));
          for (int64_t i = h0; i < h1; ++i)
            for (int64_t j = w0; j < w1; ++j) acc[i * W + j] += d;
        }
      }
      for (int64_t e = 0; e < H * W; ++e) dx[p * H * W + e] = static_cast<T>(acc[e]);
    }
    std::free(acc);
  }
  return failed ? ig_fail(ctx, "avg_pool2d_grad: out of memory for the kernel's scratch") : 0;
}
)IGPRELUDE";

}  // namespace ingot::cpu
