// top_k (src/ops/sort.cpp): values and indices against a brute-force selection in double (NaN
// counted as the largest, ties in index order) for every axis, both directions, integer and
// float dtypes, k = 0 and k = n; the CPU backend against the reference; the gradient against
// finite differences; and the errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autodiff_test_util.h"
#include "cpu_test_util.h"
#include "op_test_util.h"

namespace ingot::testing {
namespace {

// The k first of x's elements along `axis` in the order: NaN first (largest) or last (smallest),
// then by value, ties by index. Returns (values as double, indices).
std::pair<std::vector<double>, std::vector<int64_t>> brute_top_k(const Tensor& x, int64_t k, int axis, bool largest) {
  const Shape s = x.shape();
  const std::vector<double> v = x.astype(DType::Float64).to_vector<double>();
  int64_t outer = 1, n = s[static_cast<size_t>(axis)], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<double> values(static_cast<size_t>(outer * k * inner));
  std::vector<int64_t> indices(values.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<bool> taken(static_cast<size_t>(n), false);
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t c = 0; c < n; ++c) {
          if (taken[static_cast<size_t>(c)]) continue;
          if (best < 0) {
            best = c;
            continue;
          }
          const double a = v[static_cast<size_t>((o * n + c) * inner + i)], b = v[static_cast<size_t>((o * n + best) * inner + i)];
          const bool better = std::isnan(a) || std::isnan(b) ? (largest ? std::isnan(a) && !std::isnan(b) : !std::isnan(a) && std::isnan(b))
                                                             : (largest ? a > b : a < b);
          if (better) best = c;
        }
        taken[static_cast<size_t>(best)] = true;
        values[static_cast<size_t>((o * k + j) * inner + i)] = v[static_cast<size_t>((o * n + best) * inner + i)];
        indices[static_cast<size_t>((o * k + j) * inner + i)] = best;
      }
    }
  return {values, indices};
}

void expect_top_k(const Tensor& x, int64_t k, int64_t axis, bool largest) {
  SCOPED_TRACE("k " + std::to_string(k) + ", axis " + std::to_string(axis) + (largest ? ", largest" : ", smallest"));
  const std::vector<Tensor> got = run_op_n("top_k", {x}, {{"k", k}, {"axis", axis}, {"largest", int64_t{largest}}}, 2);
  const int a = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
  const auto [values, indices] = brute_top_k(x, k, a, largest);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].dtype(), x.dtype());
  EXPECT_EQ(got[1].dtype(), DType::Int64);
  Shape want_shape = x.shape();
  want_shape[static_cast<size_t>(a)] = k;
  EXPECT_EQ(got[0].shape(), want_shape);
  EXPECT_EQ(got[1].to_vector<int64_t>(), indices);
  const std::vector<double> gv = got[0].astype(DType::Float64).to_vector<double>();
  for (size_t i = 0; i < gv.size(); ++i)
    EXPECT_TRUE(gv[i] == values[i] || (std::isnan(gv[i]) && std::isnan(values[i]))) << i << ": " << gv[i] << " vs " << values[i];
}

TEST(SortOps, TopKAgainstBruteForceEveryAxisBothDirections) {
  // Repeated values (ties), NaN, infinities and signed zeros among them.
  Tensor x = random_tensor({3, 5, 4}, 61, -2, 2, DType::Float32);
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 3) p[i] = std::round(p[i]);  // ties
  p[7] = NAN;
  p[20] = NAN;
  p[21] = NAN;
  p[30] = INFINITY;
  p[31] = -INFINITY;
  p[40] = -0.0f;
  p[41] = 0.0f;
  for (int64_t axis : {0, 1, 2, -1})
    for (bool largest : {true, false}) {
      const int64_t n = x.shape()[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
      for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) expect_top_k(x, k, axis, largest);
    }
  const Tensor ints = tensor<int32_t>({3, 1, 3, 2, 1, 7, -4, 3}, {8});
  expect_top_k(ints, 5, 0, true);
  expect_top_k(ints, 5, 0, false);
  EXPECT_EQ(run_op_n("top_k", {ints}, {{"k", int64_t{3}}}, 2)[1].to_vector<int64_t>(), (std::vector<int64_t>{5, 0, 2}));
  expect_top_k(random_tensor({6}, 62, -1, 1, DType::Float64), 4, 0, true);
  const std::vector<SymShape> shapes = infer_op_shapes("top_k", {{"N", 7}}, {{"k", int64_t{3}}}, 2);
  EXPECT_EQ(to_string(shapes[0]), "[N, 3]");
  EXPECT_EQ(to_string(shapes[1]), "[N, 3]");
}

TEST(SortOps, TopKOnTheCpuBackendMatchesTheReference) {
  using namespace cpu_test;
  Graph g = make_graph({{"x", {4, 9}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const std::vector<ValueId> big = g.add_node("top_k", {in[0]}, {{"k", int64_t{3}}, {"axis", int64_t{1}}}, 2);
    g.set_output("values", big[0]);
    g.set_output("indices", big[1]);
    const std::vector<ValueId> small = g.add_node("top_k", {g.add_op("neg", {in[0]})}, {{"k", int64_t{2}}, {"axis", int64_t{0}}, {"largest", int64_t{0}}}, 2);
    g.set_output("small", small[0]);
    g.set_output("small_indices", small[1]);
  });
  Tensor x = random_tensor({4, 9}, 63, -1, 1);
  x.data<float>()[5] = NAN;
  check(g, {{x}, {random_tensor({4, 9}, 64, -1, 1)}}, plan_fusion, 0, 0);
}

TEST(SortOps, TopKGradientRoutesEachValueBackToItsIndex) {
  // Distinct values (no ties), so the selection is stable under the finite differences' steps.
  Tensor x = Tensor(DType::Float64, {3, 5});
  for (int64_t i = 0; i < 15; ++i) x.data<double>()[i] = std::sin(1.7 * static_cast<double>(i)) * 2;
  for (const Attrs& attrs : {Attrs{{"k", int64_t{3}}, {"axis", int64_t{1}}},
                             Attrs{{"k", int64_t{2}}, {"axis", int64_t{0}}, {"largest", int64_t{0}}}})
    check_gradients([&](Graph& g, const std::vector<ValueId>& in) { return std::vector<ValueId>{g.add_node("top_k", in, attrs, 2)[0]}; },
                    {x});
}

TEST(SortOps, TopKErrors) {
  const Tensor x = random_tensor({2, 4}, 65);
  expect_error([&] { eval_only("top_k", {x}, {{"k", int64_t{5}}}); }, "k = 5 is more than the 4 elements along axis 1");
  expect_error([&] { eval_only("top_k", {x}, {{"k", int64_t{-1}}}); }, "k must be at least 0");
  expect_error([&] { eval_only("top_k", {x}, {{"k", int64_t{1}}, {"axis", int64_t{2}}}); }, "axis 2 out of range for rank 2");
  expect_error([&] { eval_only("top_k", {Tensor(DType::Bool, {3})}, {{"k", int64_t{1}}}); }, "needs numbers, got bool");
  expect_error([&] { infer_op_shapes("top_k", {{2, 4}}, {{"k", int64_t{6}}}, 2); }, "k = 6 is more than the 4 elements");
}

}  // namespace
}  // namespace ingot::testing
