// The prelude's index and slice movement kernels: transpose, slice and its gradients (slice_scatter,
// concat_part) as strided copies, take_along_axis, and the scatters that are the gradients of
// gather and take_along_axis (index_add, scatter_add). Each mirrors its reference kernel in
// src/ops/movement.cpp: the same slice clamping, the same index checks and messages, and the
// scatters' sums in double, in the updates' order, so the results are the reference's exactly.
#include "backends/cpu/prelude.h"

namespace ingot::cpu {

const char* const kMovementPrelude = R"IGPRELUDE(
// ---- slice / slice_scatter / concat_part ----
// NumPy's [start:end:step] of a dim of size d: negative indices count from the end, both bounds
// clamp (the reference's slice_range).
inline void ig_slice_range(int64_t start, int64_t end, int64_t step, int64_t d, int64_t* first, int64_t* length) {
  auto clamp = [d](int64_t i, int64_t lo, int64_t hi) { return std::clamp(i < 0 ? i + d : i, lo, hi); };
  const int64_t s = step > 0 ? clamp(start, 0, d) : clamp(start, -1, d - 1);
  const int64_t e = step > 0 ? clamp(end, 0, d) : clamp(end, -1, d - 1);
  const int64_t span = step > 0 ? e - s : s - e, stride = step > 0 ? step : -step;
  *first = span > 0 ? s : 0;
  *length = span > 0 ? (span + stride - 1) / stride : 0;
}

// The view [start:end:step] per axis of a contiguous tensor of shape full[rank] (rank <= 16).
// kMode 0 (slice, concat_part): y, contiguous in the view's shape, = the view of x. 1
// (slice_scatter): y, of shape full, is zeros with x (the view's shape) written into the view.
// 2 (concat, one input): x written into the view of y, the rest of y left as it is. An axis of
// step 1 whose inner axes the view takes whole merges with them (a channel concat of [N, C, H,
// W] or of channel blocks copies C_i * H * W elements per image at once); rows of the innermost
// merged axis, in chunks of 32K elements, are the work units, a step-1 chunk one memcpy.
template <class T, int kMode>
void ig_slice_copy(const T* __restrict x, T* __restrict y, int rank, const int64_t* full, const int64_t* start,
                   const int64_t* end, const int64_t* step) {
  int64_t F[16], first[16], len[16], st[16], whole = 1;  // merged axes, innermost first
  int m = 0;
  for (int a = rank; a-- > 0;) {
    int64_t f0 = 0, l0 = 0;
    ig_slice_range(start[a], end[a], step[a], full[a], &f0, &l0);
    whole *= full[a];
    if (m > 0 && step[a] == 1 && st[m - 1] == 1 && first[m - 1] == 0 && len[m - 1] == F[m - 1]) {
      first[m - 1] = f0 * F[m - 1];
      len[m - 1] = l0 * F[m - 1];
      F[m - 1] *= full[a];
    } else {
      F[m] = full[a], first[m] = f0, len[m] = l0, st[m] = step[a];
      ++m;
    }
  }
  int64_t shape[16], stride[16], base = 0, span = 1, n = 1;  // outermost first
  for (int j = 0; j < m; ++j) {
    const int a = m - 1 - j;
    shape[a] = len[j];
    stride[a] = span * st[j];
    base += first[j] * span;
    span *= F[j];
    n *= len[j];
  }
  constexpr bool kScatter = kMode != 0;
  if (kMode == 1) std::memset(static_cast<void*>(y), 0, static_cast<size_t>(whole) * sizeof(T));
  if (n == 0) return;
  const int64_t inner = m > 0 ? shape[m - 1] : 1, rows = n / inner, is = m > 0 ? stride[m - 1] : 1;
  const int64_t chunk = 32768, chunks = (inner + chunk - 1) / chunk;
  #pragma omp parallel for if(ig_big(n) && rows * chunks > 1)
  for (int64_t u = 0; u < rows * chunks; ++u) {
    const int64_t r = u / chunks, k0 = u % chunks * chunk, k1 = k0 + chunk < inner ? k0 + chunk : inner;
    int64_t rest = r, off = base;
    for (int a = m - 1; a-- > 0;) {
      off += rest % shape[a] * stride[a];
      rest /= shape[a];
    }
    if (is == 1) {
      const size_t bytes = static_cast<size_t>(k1 - k0) * sizeof(T);
      if (kScatter) std::memcpy(static_cast<void*>(y + off + k0), x + r * inner + k0, bytes);
      else std::memcpy(static_cast<void*>(y + r * inner + k0), x + off + k0, bytes);
    } else {
      for (int64_t k = k0; k < k1; ++k) {
        if (kScatter) y[off + k * is] = x[r * inner + k];
        else y[r * inner + k] = x[off + k * is];
      }
    }
  }
}

// ---- transpose: y = x with its axes in the order perm (any element type, rank 1 to 16) ----
// The permutation is first reduced: size-1 axes dropped, and x axes that stay neighbours in y's
// order merged into one (a channel shuffle [N, 2, C/2, H, W] -> [N, C/2, 2, H, W] is [2, C/2, HW]
// -> [C/2, 2, HW]: rows of H*W elements, where the unreduced form copied rows of W). Then y is
// written one row of its last axis at a time: a contiguous copy when that axis is contiguous in
// x (a transformer's heads split, [B, S, H, D] -> [B, H, S, D]); otherwise y's last axis and the
// y axis that is x's contiguous one are walked in 32 x 32 tiles, so that reads and writes both
// stay within a few cache lines ([S, D] -> [D, S], NCHW <-> NHWC), where a strided gather per
// row touched a new cache line per element. Rows, or tiles, run across threads.
template <class T>
void ig_transpose(const T* __restrict x, T* __restrict y, int rank, const int64_t* xdims, const int64_t* perm) {
  int64_t total = 1, d[16];  // x's axes of size > 1, and where each x axis went (-1: dropped)
  int keep[16], r = 0;
  for (int i = 0; i < rank; ++i) {
    total *= xdims[i];
    keep[i] = xdims[i] != 1 ? r : -1;
    if (xdims[i] != 1) d[r++] = xdims[i];
  }
  if (total == 0) return;
  int p[16], pr = 0;  // the permutation of the kept axes
  for (int i = 0; i < rank; ++i)
    if (keep[perm[i]] >= 0) p[pr++] = keep[perm[i]];
  // Runs of y's axes that are consecutive x axes merge; `run_of[a]` is the run x axis a starts.
  int run_start[16], run_len[16], runs = 0, run_of[16];
  for (int j = 0; j < r; ++j) {
    if (j > 0 && p[j] == p[j - 1] + 1) {
      ++run_len[runs - 1];
    } else {
      run_start[runs] = p[j], run_len[runs] = 1;
      ++runs;
    }
  }
  for (int a = 0; a < r; ++a) run_of[a] = -1;
  for (int q = 0; q < runs; ++q) run_of[run_start[q]] = q;
  int64_t md[16], mxs[16];  // merged x dims in x order, and each merged axis's x stride
  int xpos[16], m = 0;      // merged axis of each run
  for (int a = 0; a < r; ++a) {
    if (run_of[a] < 0) continue;
    const int q = run_of[a];
    int64_t size = 1;
    for (int k = 0; k < run_len[q]; ++k) size *= d[a + k];
    xpos[q] = m;
    md[m++] = size;
  }
  int64_t stride = 1;
  for (int a = m; a-- > 0;) {
    mxs[a] = stride;
    stride *= md[a];
  }
  if (runs <= 1) {  // the same elements in the same order
    std::memcpy(static_cast<void*>(y), x, static_cast<size_t>(total) * sizeof(T));
    return;
  }
  int64_t yd[16], st[16];  // y's merged dims and their x strides
  for (int q = 0; q < runs; ++q) {
    yd[q] = md[xpos[q]];
    st[q] = mxs[xpos[q]];
  }
  const int last = runs - 1;
  const int64_t n = yd[last], s = st[last];
  if (s == 1) {
    const int64_t rows = total / n;
    #pragma omp parallel for if(ig_big(total) && rows > 1)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t off = 0, rest = row;
      for (int i = last; i-- > 0;) {
        off += (rest % yd[i]) * st[i];
        rest /= yd[i];
      }
      std::memcpy(static_cast<void*>(y + row * n), x + off, static_cast<size_t>(n) * sizeof(T));
    }
    return;
  }
  // y axis c is x's contiguous axis (stride 1); tiles of kTile (along c) x kTile (along last).
  int c = 0;
  while (st[c] != 1) ++c;
  const int64_t mc = yd[c];
  int64_t ys[16];
  stride = 1;
  for (int i = runs; i-- > 0;) {
    ys[i] = stride;
    stride *= yd[i];
  }
  constexpr int64_t kTile = 32;
  const int64_t tc = (mc + kTile - 1) / kTile, tn = (n + kTile - 1) / kTile, outer = total / (mc * n);
  #pragma omp parallel for if(ig_big(total) && outer * tc * tn > 1)
  for (int64_t u = 0; u < outer * tc * tn; ++u) {
    const int64_t o = u / (tc * tn), i0 = u / tn % tc * kTile, j0 = u % tn * kTile;
    int64_t xo = 0, yo = 0, rest = o;  // the other axes' offsets
    for (int i = last; i-- > 0;) {
      if (i == c) continue;
      const int64_t v = rest % yd[i];
      rest /= yd[i];
      xo += v * st[i];
      yo += v * ys[i];
    }
    const int64_t i1 = std::min(i0 + kTile, mc), j1 = std::min(j0 + kTile, n), yc = ys[c];
    for (int64_t i = i0; i < i1; ++i) {
      const T* xr = x + xo + i;
      T* yr = y + yo + i * yc;
      for (int64_t j = j0; j < j1; ++j) yr[j] = xr[j * s];
    }
  }
}

// ---- take_along_axis: y[o, j, k] = x[o, idx[o, j, k], k] over [outer, nx | ni, inner] ----
template <class T, class I>
int ig_take_along_axis(const ig_ctx* ctx, const T* __restrict x, const I* __restrict idx, T* __restrict y,
                       int64_t outer, int64_t nx, int64_t ni, int64_t inner, int axis) {
  const int64_t n = outer * ni * inner;
  if (ig_check_indices(ctx, idx, n, nx, axis) != 0) return 1;
  #pragma omp parallel for if(ig_big(n) && outer * ni > 1)
  for (int64_t oj = 0; oj < outer * ni; ++oj) {
    const int64_t o = oj / ni;
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t v = static_cast<int64_t>(idx[oj * inner + k]);
      y[oj * inner + k] = x[(o * nx + (v < 0 ? v + nx : v)) * inner + k];
    }
  }
  return 0;
}

// ---- scatter_add / index_add: zeros of [outer, nx, inner] plus the updates [outer, ni, inner]
// added at the rows their indices name (repeats add up). kIndexAdd 0: scatter_add, an index per
// update element (idx [outer, ni, inner]); 1: index_add, one per update row (idx [ni]). Each
// unit of `outer` sums in a per-thread double slab, in the updates' order, as the reference does.
template <int kIndexAdd, class T, class I>
int ig_scatter_add(const ig_ctx* ctx, const I* __restrict idx, const T* __restrict u, T* __restrict y,
                   int64_t outer, int64_t nx, int64_t ni, int64_t inner, int axis) {
  if (ig_check_indices(ctx, idx, kIndexAdd ? ni : outer * ni * inner, nx, axis) != 0) return 1;
  const int64_t slab = nx * inner;
  if (outer * slab == 0) return 0;
  int failed = 0;
  #pragma omp parallel if(ig_big(outer * (slab + ni * inner)) && outer > 1)
  {
    double* acc = static_cast<double*>(std::malloc(static_cast<size_t>(slab) * sizeof(double)));
    if (acc == nullptr) {
      #pragma omp atomic write
      failed = 1;
    }
    #pragma omp for
    for (int64_t o = 0; o < outer; ++o) {
      if (acc == nullptr) continue;
      std::fill(acc, acc + slab, 0.0);
      const T* uo = u + o * ni * inner;
      for (int64_t j = 0; j < ni; ++j) {
        for (int64_t k = 0; k < inner; ++k) {
          const int64_t v = static_cast<int64_t>(kIndexAdd ? idx[j] : idx[(o * ni + j) * inner + k]);
          acc[(v < 0 ? v + nx : v) * inner + k] += static_cast<double>(uo[j * inner + k]);
        }
      }
      T* yo = y + o * slab;
      for (int64_t i = 0; i < slab; ++i) yo[i] = static_cast<T>(acc[i]);
    }
    std::free(acc);
  }
  return failed ? ig_fail(ctx, "scatter_add: out of memory for the kernel's scratch") : 0;
}
)IGPRELUDE";

}  // namespace ingot::cpu
