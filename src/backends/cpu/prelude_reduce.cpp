// The prelude's reductions over any set of axes (the contiguous case is ig_reduce in prelude.cpp):
// what gradient rules produce most, summing a broadcast operand's gradient back to its shape
// (bias gradients: [N, C, H, W] -> [C] over axes 0, 2, 3; [N, F] -> [F] over axis 0). And moments
// (mean and variance: layer_norm's gradient and a training batch norm read them).
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kReduceAxesPrelude = R"IGPRELUDE(
// ---- sum / mean / max / min over any set of axes ----
// The input's dims, coalesced into `nb` (<= 16) blocks, outermost first, of sizes size[b], each
// wholly reduced or kept (reduced[b]); `count` input elements fold into each output. Work units
// are the combinations of the kept blocks above the innermost one (run in parallel); a unit visits
// every combination of the reduced blocks above it and folds the innermost block's contiguous run
// into one output (innermost block reduced) or into a row of outputs (innermost block kept).
template <int kKind, class T, class O>
void ig_reduce_axes(const T* __restrict x, O* __restrict y, int nb, const int64_t* size, const bool* reduced,
                    int64_t count) {
  using R = ig_reducer<kKind, T, O>;
  using A = typename R::A;
  int64_t stride[16];
  int64_t units = 1, combos = 1, total = 1;
  for (int b = nb; b-- > 0;) {
    stride[b] = total;
    total *= size[b];
    if (b + 1 < nb) (reduced[b] ? combos : units) *= size[b];
  }
  if (nb == 0) {  // a scalar
    A a = R::init();
    R::step(a, x[0]);
    y[0] = R::finish(a, count);
    return;
  }
  const int64_t len = size[nb - 1];
  const bool inner_reduced = reduced[nb - 1];
  // Offset of the `i`-th combination of the blocks above the innermost whose reduced flag is `r`.
  auto offset = [&](int64_t i, bool r) {
    int64_t off = 0;
    for (int b = nb - 1; b-- > 0;)
      if (reduced[b] == r) { off += (i % size[b]) * stride[b]; i /= size[b]; }
    return off;
  };
  // Kept innermost block: a row of accumulators per unit (A may be wider than O).
  A* acc = nullptr;
  if (!inner_reduced) {
    acc = static_cast<A*>(std::malloc(sizeof(A) * size_t(units * len > 0 ? units * len : 1)));
    if (acc == nullptr) throw std::bad_alloc();
  }
  #pragma omp parallel for if(ig_big(total) && units > 1)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t base = offset(u, false);
    if (inner_reduced) {
      A a = R::init();
      for (int64_t c = 0; c < combos; ++c) {
        const T* run = x + base + offset(c, true);
        if constexpr (kKind < 2 && std::is_same<A, double>::value) {
          a += ig_sum_run<T>([run](int64_t j) { return run[j]; }, 0, len);
        } else if constexpr (kKind < 2) {
          #pragma omp simd reduction(+:a)
          for (int64_t j = 0; j < len; ++j) R::step(a, run[j]);
        } else {
          for (int64_t j = 0; j < len; ++j) R::step(a, run[j]);
        }
      }
      y[u] = R::finish(a, count);
    } else {
      A* row = acc + u * len;
      for (int64_t j = 0; j < len; ++j) row[j] = R::init();
      for (int64_t c = 0; c < combos; ++c) {
        const T* run = x + base + offset(c, true);
        #pragma omp simd
        for (int64_t j = 0; j < len; ++j) R::step(row[j], run[j]);
      }
      for (int64_t j = 0; j < len; ++j) y[u * len + j] = R::finish(row[j], count);
    }
  }
  std::free(acc);
}

// ---- moments: mean and biased variance along the middle axis of [outer, n, inner] ----
// In double and in two passes, the second around the mean, as the reference (n = 0: NaN).
// One row's sum and squared distances from its mean, in double, of n values `stride` apart.
// Stride is std::integral_constant<int64_t, 1> for contiguous rows (layer norm's moments:
// unit-stride loads the lanes share) and int64_t otherwise.
template <class T, class Stride>
inline void ig_row_sum_m2(const T* __restrict xr, int64_t n, Stride stride, double* sum_out, double* m2_out) {
  double sum = 0;
  #pragma omp simd reduction(+:sum)
  for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(xr[k * stride]);
  const double mu = sum / static_cast<double>(n);
  double m2 = 0;
  #pragma omp simd reduction(+:m2)
  for (int64_t k = 0; k < n; ++k) {
    const double e = static_cast<double>(xr[k * stride]) - mu;
    m2 += e * e;
  }
  *sum_out = sum;
  *m2_out = m2;
}
// The row's mean and (biased) variance.
template <class T, class Stride>
inline void ig_row_moments(const T* __restrict xr, int64_t n, Stride stride, T* mean, T* var) {
  double sum, m2;
  ig_row_sum_m2(xr, n, stride, &sum, &m2);
  *mean = static_cast<T>(sum / static_cast<double>(n));
  *var = static_cast<T>(m2 / static_cast<double>(n));
}

template <class T>
void ig_moments(const T* __restrict x, T* __restrict mean, T* __restrict var, int64_t outer, int64_t n, int64_t inner) {
  if (inner == 1) {
    #pragma omp parallel for if(ig_big(outer * n) && outer > 1)
    for (int64_t o = 0; o < outer; ++o)
      ig_row_moments(x + o * n, n, std::integral_constant<int64_t, 1>{}, mean + o, var + o);
    return;
  }
  #pragma omp parallel for if(ig_big(outer * n * inner) && outer * inner > 1)
  for (int64_t oi = 0; oi < outer * inner; ++oi)
    ig_row_moments(x + (oi / inner) * n * inner + oi % inner, n, inner, mean + oi, var + oi);
}

// ---- argmax along the middle axis of [outer, n, inner]: the first maximum; NaN counts as one ----
template <class T>
void ig_argmax(const T* __restrict x, int64_t* __restrict y, int64_t outer, int64_t n, int64_t inner) {
  #pragma omp parallel for if(ig_big(outer * n * inner) && outer * inner > 1)
  for (int64_t oi = 0; oi < outer * inner; ++oi) {
    const T* xr = x + (oi / inner) * n * inner + oi % inner;
    T best = xr[0];
    int64_t at = 0;
    for (int64_t k = 1; k < n; ++k) {
      const T v = xr[k * inner];
      bool better = v > best;  // strict: the first maximum wins
      if constexpr (std::is_floating_point<T>::value) better = better || (std::isnan(v) && !std::isnan(best));
      if (better) {
        best = v;
        at = k;
      }
    }
    y[oi] = at;
  }
}

// Moments of [outer, channels, inner] over the outer and inner axes (a training batch norm's
// statistics, NCHW), its rows (o, c) visited in memory order. Visiting a channel at a time read
// its rows a channel-row apart (for [64, 128, 1024]: runs of 4 KB, 512 KB apart), a page each,
// which the hardware's stream prefetcher does not follow. Each row's sum and squared distances
// from its own mean are taken in double (the row in L1 for the second pass); a channel's mean is
// then the sum of its rows' sums over the count, and its variance the law of total variance over
// its rows, sum_o (m2_o + inner (mean_o - mean)^2) / count: two-pass exact up to double rounding,
// and a NaN or an inf in x gives the reference's NaN and inf. Returns false (nothing written)
// when the rows' scratch cannot be allocated.
template <class T>
bool ig_moments_rows(const T* __restrict x, T* __restrict mean, T* __restrict var, int64_t outer, int64_t channels,
                     int64_t inner) {
  const int64_t rows = outer * channels;
  double* st = static_cast<double*>(std::malloc(sizeof(double) * 2 * static_cast<size_t>(rows > 0 ? rows : 1)));
  if (st == nullptr) return false;
  #pragma omp parallel for if(ig_big(rows * inner) && rows > 1)
  for (int64_t r = 0; r < rows; ++r)
    ig_row_sum_m2(x + r * inner, inner, std::integral_constant<int64_t, 1>{}, &st[2 * r], &st[2 * r + 1]);
  const double count = static_cast<double>(outer * inner);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0;
    for (int64_t o = 0; o < outer; ++o) sum += st[2 * (o * channels + c)];
    const double mu = sum / count;
    double m2 = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const double d = st[2 * (o * channels + c)] / static_cast<double>(inner) - mu;
      m2 += st[2 * (o * channels + c) + 1] + static_cast<double>(inner) * d * d;
    }
    mean[c] = static_cast<T>(mu);
    var[c] = static_cast<T>(m2 / count);
  }
  std::free(st);
  return true;
}

// The same over any set of axes, given as ig_reduce_axes's blocks: each output's elements visited
// in memory order, a reduced innermost block as one contiguous run.
template <class T>
void ig_moments_axes(const T* __restrict x, T* __restrict mean, T* __restrict var, int nb, const int64_t* size,
                     const bool* reduced, int64_t count) {
  if (nb == 3 && reduced[0] && !reduced[1] && reduced[2] && size[2] >= 64 && size[0] > 1 &&
      ig_moments_rows(x, mean, var, size[0], size[1], size[2]))
    return;
  int64_t stride[16];
  int64_t outputs = 1, total = 1;
  for (int b = nb; b-- > 0;) {
    stride[b] = total;
    total *= size[b];
    if (!reduced[b]) outputs *= size[b];
  }
  const bool inner_reduced = nb > 0 && reduced[nb - 1];
  const int64_t len = inner_reduced ? size[nb - 1] : 1, runs = len > 0 ? count / len : 0;
  const int top = inner_reduced ? nb - 1 : nb;  // the blocks an offset walks
  auto offset = [&](int64_t i, bool r) {
    int64_t off = 0;
    for (int b = top; b-- > 0;)
      if (reduced[b] == r) {
        off += (i % size[b]) * stride[b];
        i /= size[b];
      }
    return off;
  };
  #pragma omp parallel for if(ig_big(total) && outputs > 1)
  for (int64_t u = 0; u < outputs; ++u) {
    const T* base = x + offset(u, false);
    double sum = 0;
    for (int64_t c = 0; c < runs; ++c) {
      const T* run = base + offset(c, true);
      #pragma omp simd reduction(+:sum)
      for (int64_t j = 0; j < len; ++j) sum += static_cast<double>(run[j]);
    }
    const double mu = sum / static_cast<double>(count);
    double m2 = 0;
    for (int64_t c = 0; c < runs; ++c) {
      const T* run = base + offset(c, true);
      #pragma omp simd reduction(+:m2)
      for (int64_t j = 0; j < len; ++j) {
        const double e = static_cast<double>(run[j]) - mu;
        m2 += e * e;
      }
    }
    mean[u] = static_cast<T>(mu);
    var[u] = static_cast<T>(m2 / static_cast<double>(count));
  }
}
)IGPRELUDE";

}  // namespace ingot::cpu
