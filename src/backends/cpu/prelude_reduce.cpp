// The prelude's reductions over any set of axes (the contiguous case is ig_reduce in prelude.cpp):
// what gradient rules produce most, summing a broadcast operand's gradient back to its shape
// (bias gradients: [N, C, H, W] -> [C] over axes 0, 2, 3; [N, F] -> [F] over axis 0).
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
        if constexpr (kKind < 2) {
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
)IGPRELUDE";

}  // namespace ingot::cpu
