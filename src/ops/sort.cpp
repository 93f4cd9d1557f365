// The sort family: top_k (see families.h for the contract). The k largest (or smallest) elements
// along an axis, in order, with their int64 indices. The order is total: a NaN counts as larger
// than every number (first among the largest, last among the smallest), and equal elements come
// in index order (the first index first), as ONNX's TopK and its reference define it.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/fuzz_attrs.h"
#include "ops/kernel_util.h"
#include "ops/reduce_util.h"

namespace ingot::ops {
namespace {

int64_t k_attr(const Node& n) {
  const int64_t k = n.attrs.get_int("k");
  INGOT_CHECK(k >= 0, n.op, ": k must be at least 0, got ", k);
  return k;
}

void top_k_shape(ShapeInfer& s) {
  if (!s.has_rank(s.in(0))) return;
  const int r = s.rank(s.in(0));
  int axis = 0;
  int64_t k = 0;
  or_fail(s, [&] {
    if (r == 0) INGOT_FAIL("top_k needs an input of rank at least 1 (an axis to select along)");
    axis = axis_attr(s.node(), r);
    k = k_attr(s.node());
  });
  if (const std::optional<int64_t> n = s.value(s.dim(s.in(0), axis)); n && k > *n)
    s.fail("top_k: k = " + std::to_string(k) + " is more than the " + std::to_string(*n) + " elements along axis " +
           std::to_string(axis));
  for (int o = 0; o < 2; ++o) {
    s.set_rank(s.out(o), r);
    for (int d = 0; d < r; ++d)
      if (d == axis) s.bind(s.dim(s.out(o), d), k);
      else s.unify(s.dim(s.out(o), d), s.dim(s.in(0), d));
  }
}

void top_k_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(in[0] != DType::Bool, n.op, ": needs numbers, got bool");
  out[0] = in[0];
  out[1] = DType::Int64;
}

void top_k_kernel(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  (void)output_dtypes(n, inputs);
  const Tensor x = inputs[0].contiguous();
  INGOT_CHECK(x.rank() >= 1, n.op, ": needs an input of rank at least 1");
  const int axis = axis_attr(n, x.rank());
  const int64_t k = k_attr(n);
  const AxisSplit sp = split_at(x.shape(), axis);
  INGOT_CHECK(k <= sp.n, n.op, ": k = ", k, " is more than the ", sp.n, " elements along axis ", axis, " of ",
              to_string(x.shape()));
  const bool largest = n.attrs.get_int("largest", 1) != 0;
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(axis)] = k;
  outputs[0] = Tensor(x.dtype(), out_shape);
  outputs[1] = Tensor(DType::Int64, out_shape);
  int64_t* pi = outputs[1].data<int64_t>();
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* px = x.data<T>();
    T* pv = outputs[0].data<T>();
    std::vector<int64_t> order(static_cast<size_t>(sp.n));
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        const T* row = px + o * sp.n * sp.inner + i;  // element j at row[j * inner]
        auto at = [&](int64_t j) { return static_cast<C>(row[j * sp.inner]); };
        // Whether element a comes before element b: the total order of the file's comment.
        auto before = [&](int64_t a, int64_t b) {
          const C va = at(a), vb = at(b);
          if constexpr (std::is_floating_point_v<C>) {
            const bool na = std::isnan(va), nb = std::isnan(vb);
            if (na || nb) return na && nb ? a < b : largest ? na : nb;
          }
          if (va != vb) return largest ? va > vb : va < vb;
          return a < b;
        };
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at_out = (o * k + j) * sp.inner + i;
          pv[at_out] = row[order[static_cast<size_t>(j)] * sp.inner];
          pi[at_out] = order[static_cast<size_t>(j)];
        }
      }
  });
}

// d values / d x: each selected element's gradient back at its index (the others 0); the indices
// output has none.
void top_k_vjp(VjpContext& c) {
  if (c.grad_out(0) < 0) return;
  c.set_grad(0, c.op("scatter_add", {c.in(0), c.out(1), c.grad_out(0)}, {{"axis", c.attrs().get_int("axis", -1)}}));
}

Attrs sample_top_k(std::span<const Shape> in, uint64_t seed) {
  Draw d{seed};
  const int r = static_cast<int>(in[0].size());
  if (r == 0) return {{"k", int64_t{0}}};  // refused by the shape rule: the fuzzer draws another
  const int64_t axis = d.axis(r);
  const int64_t n = in[0][static_cast<size_t>(axis < 0 ? axis + r : axis)];
  return {{"k", d.below(n + 1)}, {"axis", axis}, {"largest", static_cast<int64_t>(d.coin())}};
}

}  // namespace

void register_sort_ops() {
  register_op(OpDef{.name = "top_k",
                    .min_inputs = 1,
                    .max_inputs = 1,
                    .num_outputs = 2,
                    .fusion = FusionClass::Opaque,
                    .shape = top_k_shape,
                    .dtype = top_k_dtype,
                    .eval = top_k_kernel,
                    .doc = "(values, int64 indices) of the {k} largest ({largest} = 1) or smallest along "
                           "{axis = -1}, in order; NaN largest, ties in index order",
                    .vjp = top_k_vjp});
  set_attr_sampler("top_k", sample_top_k);
}

}  // namespace ingot::ops
