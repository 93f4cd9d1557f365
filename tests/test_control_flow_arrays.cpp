// cond, while_loop and scan on lazy arrays (include/ingot/control_flow.h): eager results against
// the same computation written out, captured arrays lifted to operands, the functions traced once,
// inside compile(fn) with the branch chosen per call, gradients against the unrolled function's
// and (through while_loop) against finite differences, and the errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "array_finite_difference.h"
#include "ingot/control_flow.h"
#include "ingot/function_compile.h"
#include "op_test_util.h"
#include "trace/array_impl.h"

namespace ingot::testing {
namespace {

std::vector<Array> one(Array a) { return {std::move(a)}; }

void expect_close(const Array& got, const Array& want, double tol = 1e-6) {
  ASSERT_EQ(to_string(got.shape()), to_string(want.shape()));
  EXPECT_TRUE(allclose(got.tensor().astype(DType::Float64), want.tensor().astype(DType::Float64), tol, tol))
      << "got " << got.tensor().str() << "\nwant " << want.tensor().str();
}

TEST(ControlFlowArrays, CondTakesTheBranchThePredicateNames) {
  const Array x(random_tensor({2, 3}, 1)), w(random_tensor({3}, 2));
  int traced = 0;
  auto branches = [&](const Array& p) {
    return cond(
        p, [&](const std::vector<Array>& a) { ++traced; return one(a[0] * w + 1.0f); },  // w captured, a literal
        [&](const std::vector<Array>& a) { ++traced; return one(tanh(a[0])); }, {x})[0];
  };
  expect_close(branches(Array(Tensor::full(DType::Bool, {}, 1))), x * w + 1.0f);
  expect_close(branches(sum(x) > 1e9f), tanh(x));  // a lazy predicate
  EXPECT_EQ(traced, 4) << "each function is traced once per cond call";
}

TEST(ControlFlowArrays, WhileLoopRunsUntilTheConditionFails) {
  const Array x(random_tensor({4}, 3)), limit(Tensor::scalar<int32_t>(5));
  const std::vector<Array> r = while_loop(
      [&](const std::vector<Array>& s) { return s[0] < limit; },  // limit captured
      [&](const std::vector<Array>& s) { return std::vector<Array>{s[0] + 1, s[1] * 0.5f + x}; },
      {Array(Tensor::scalar<int32_t>(0)), zeros({4})});
  EXPECT_EQ(r[0].item<int>(), 5);
  Array want = zeros({4});
  for (int i = 0; i < 5; ++i) want = want * 0.5f + x;
  expect_close(r[1], want);
  const std::vector<Array> capped = while_loop([](const std::vector<Array>&) { return Array(Tensor::full(DType::Bool, {}, 1)); },
                                               [](const std::vector<Array>& s) { return one(s[0] + 2); },
                                               {Array(Tensor::scalar<int32_t>(1))}, 3);
  EXPECT_EQ(capped[0].item<int>(), 7) << "max_iterations stops a loop whose condition never fails";
}

// An RNN cell over the rows of xs, with w captured: h = tanh(h * w + x_t), y_t = 2 h.
std::pair<Array, Array> rnn(const Array& h0, const Array& xs, const Array& w, bool reverse = false) {
  auto [carry, ys] = scan(
      [&](const std::vector<Array>& c, const std::vector<Array>& x) {
        Array h = tanh(c[0] * w + x[0]);
        return std::pair{one(h), one(h * 2.0f)};
      },
      {h0}, {xs}, reverse);
  return {carry[0], ys[0]};
}

std::pair<Array, Array> rnn_unrolled(const Array& h0, const Array& xs, const Array& w, bool reverse = false) {
  const int64_t n = xs.dim(0);
  Array h = h0;
  std::vector<Array> ys(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    const int64_t t = reverse ? n - 1 - s : s;
    h = tanh(h * w + reshape(slice(xs, {t}, {t + 1}, {0}), {xs.dim(1)}));
    ys[static_cast<size_t>(t)] = reshape(h * 2.0f, {1, xs.dim(1)});
  }
  return {h, concatenate(ys, 0)};
}

TEST(ControlFlowArrays, ScanMatchesTheUnrolledLoop) {
  const Array h0(random_tensor({3}, 4)), xs(random_tensor({6, 3}, 5)), w(random_tensor({3}, 6));
  for (const bool reverse : {false, true}) {
    const auto [h, ys] = rnn(h0, xs, w, reverse);
    const auto [h_want, ys_want] = rnn_unrolled(h0, xs, w, reverse);
    expect_close(h, h_want);
    expect_close(ys, ys_want);
  }
}

// What does not depend on the carry or the step (a transposed weight, a product of captured
// arrays) is computed once outside the loop and passed in; what does is in the body.
TEST(ControlFlowArrays, LoopInvariantWorkIsLiftedOutOfTheBody) {
  const Array w(random_tensor({3, 3}, 20)), xs(random_tensor({4, 2, 3}, 21)), h0(random_tensor({2, 3}, 22));
  const Array wt = transpose(w);  // pending outside the function
  auto [carry, ys] = scan(
      [&](const std::vector<Array>& c, const std::vector<Array>& x) {
        const Array scale = exp(w) * 0.5f;  // captured arrays only: independent of the loop
        return std::pair{one(tanh(matmul(c[0], wt) + x[0] * sum(scale))), std::vector<Array>{}};
      },
      {h0}, {xs});
  const detail::OpRecord& rec = *carry[0].impl()->record;
  ASSERT_EQ(rec.op, "scan");
  std::vector<std::string> body_ops;
  for (const Node& n : rec.subgraphs[0].nodes()) body_ops.push_back(n.op);
  for (const char* lifted : {"transpose", "exp", "sum"})
    EXPECT_EQ(std::count(body_ops.begin(), body_ops.end(), lifted), 0) << lifted << " runs every step";
  EXPECT_EQ(std::count(body_ops.begin(), body_ops.end(), "matmul"), 1);
  // And the values are right.
  Array h = h0;
  const Array s = sum(exp(w) * 0.5f);
  for (int64_t t = 0; t < 4; ++t) h = tanh(matmul(h, wt) + reshape(slice(xs, {t}, {t + 1}, {0}), {2, 3}) * s);
  expect_close(carry[0], h);
}

TEST(ControlFlowArrays, InsideCompileTheBranchIsChosenPerCall) {
  auto f = ingot::compile([](const Array& p, const Array& x) {
    return cond(p, [](const std::vector<Array>& a) { return one(a[0] * 3.0f); },
                [](const std::vector<Array>& a) { return one(a[0] - 1.0f); }, {x})[0];
  });
  const Array x(random_tensor({5}, 7));
  const int before = compile_count();
  expect_close(f(Array(Tensor::full(DType::Bool, {}, 1)), x), x * 3.0f);
  expect_close(f(Array(Tensor::full(DType::Bool, {}, 0)), x), x - 1.0f);
  EXPECT_EQ(compile_count(), before + 1) << "one trace serves both branches";
}

TEST(ControlFlowArrays, GradientsMatchTheUnrolledFunctions) {
  const Array h0(random_tensor({3}, 8, -1, 1, DType::Float64)), xs(random_tensor({4, 3}, 9, -1, 1, DType::Float64)),
      w(random_tensor({3}, 10, -1, 1, DType::Float64));
  auto loss = [](bool unrolled) {
    return [unrolled](const std::vector<Array>& a) {
      const auto [h, ys] = unrolled ? rnn_unrolled(a[0], a[1], a[2]) : rnn(a[0], a[1], a[2]);
      return one(sum(h * h) + sum(ys * ys));
    };
  };
  const std::vector<Array> got = grad(loss(false), {0, 1, 2})({h0, xs, w});
  const std::vector<Array> want = grad(loss(true), {0, 1, 2})({h0, xs, w});
  for (size_t i = 0; i < 3; ++i) expect_close(got[i], want[i], 1e-10);
  // Through cond: the taken branch's gradient.
  auto branchy = [](const std::vector<Array>& a) {
    return one(sum(cond(a[0], [](const std::vector<Array>& b) { return one(sin(b[0]) * b[1]); },
                        [](const std::vector<Array>& b) { return one(b[0] * b[0]); }, {a[1], a[2]})[0]));
  };
  for (const bool p : {true, false}) {
    const std::vector<Array> g = grad(branchy, {1, 2})({Array(Tensor::full(DType::Bool, {}, p)), h0, w});
    expect_close(g[0], p ? cos(h0) * w : h0 * 2.0, 1e-12);
    expect_close(g[1], p ? sin(h0) : zeros({3}, DType::Float64), 1e-12);
  }
}

// Through while_loop with max_iterations: a fixed trip count (an int32 counter, w captured), a
// data-dependent one (doubling x while its sum is below a limit), one that never runs and one
// that max_iterations cuts off, each against finite differences.
TEST(ControlFlowArrays, GradThroughWhileLoopMatchesFiniteDifferences) {
  const Tensor h0 = random_tensor({3}, 12, -1, 1, DType::Float64), w = random_tensor({3}, 13, -1, 1, DType::Float64);
  auto counted = [](int limit) {
    return [limit](const std::vector<Array>& a) {
      const Array& w = a[1];
      const std::vector<Array> r = while_loop(
          [limit](const std::vector<Array>& s) { return s[0] < limit; },
          [&w](const std::vector<Array>& s) { return std::vector<Array>{s[0] + 1, tanh(s[1] * w + 0.5)}; },
          {Array(Tensor::scalar<int32_t>(0)), a[0]}, 8);
      return one(sum(r[1] * r[1]));
    };
  };
  // sum(x) runs 2.1, 4.29, 8.76, 17.5, 35.0: 4 iterations below 20, none below 1.
  auto doubling = [](double limit) {
    return [limit](const std::vector<Array>& a) {
      const Array& w = a[1];
      return one(sum(sin(while_loop([limit](const std::vector<Array>& s) { return sum(s[0]) < limit; },
                                    [&w](const std::vector<Array>& s) { return one(s[0] * 2.0 + sin(s[0]) * w); },
                                    {a[0]}, 10)[0])));
    };
  };
  const Tensor x = Tensor::from_vector<double>({0.5, 0.7, 0.9}, {3});
  const Tensor v = Tensor::from_vector<double>({0.3, -0.2, 0.1}, {3});
  const std::vector<std::pair<ArrayFunction, std::vector<Tensor>>> cases = {
      {counted(5), {h0, w}}, {counted(0), {h0, w}}, {counted(100), {h0, w}}, {doubling(20), {x, v}},
      {doubling(1), {x, v}}};
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const auto& [f, args] = cases[c];
    const std::vector<Array> g = grad(f, {0, 1})({Array(args[0]), Array(args[1])});
    for (size_t i = 0; i < 2; ++i) {
      const Tensor fd = finite_difference(f, args, i);
      EXPECT_TRUE(allclose(g[i].tensor(), fd, 1e-6, 1e-8)) << "d/d arg " << i << ": " << g[i].tensor().str()
                                                           << "\nfinite differences " << fd.str();
    }
  }
}

TEST(ControlFlowArrays, ErrorsNameWhatIsWrong) {
  const Array x(random_tensor({2}, 11));
  expect_error([&] {
    cond(Array(Tensor::full(DType::Bool, {2}, 1)), [](const std::vector<Array>& a) { return a; },
         [](const std::vector<Array>& a) { return a; }, {x});
  }, "the predicate must hold one element");
  expect_error([&] {
    cond(Array(Tensor::full(DType::Bool, {}, 1)), [](const std::vector<Array>& a) { return one(a[0]); },
         [](const std::vector<Array>& a) { return one(sum(a[0])); }, {x});
  }, "result 0 is [2] in the then graph but [] in the else graph");
  expect_error([&] {
    while_loop([](const std::vector<Array>& s) { return sum(s[0]) < 10.0f; },
               [](const std::vector<Array>& s) { return one(concatenate({s[0], s[0]}, 0)); }, {x});
  }, "loop-carried value 0 ('in0') enters the loop as [2] but the body returns [4]");
  expect_error([&] {
    scan([](const std::vector<Array>& c, const std::vector<Array>&) { return std::pair{c, std::vector<Array>{}}; },
         {x}, {zeros({3, 2}), zeros({4, 2})});
  }, "every scanned array needs the leading length 3");
  expect_error([&] {
    cond(Array(Tensor::full(DType::Bool, {}, 1)), [](const std::vector<Array>& a) { return one(a[0] + a[0].item<float>()); },
         [](const std::vector<Array>& a) { return a; }, {x});
  }, "placeholders");
  expect_error([&] { grad([](const std::vector<Array>& a) {
    return one(sum(while_loop([](const std::vector<Array>& s) { return sum(s[0]) < 10.0f; },
                              [](const std::vector<Array>& s) { return one(s[0] * 2.0f); }, {a[0]})[0]));
  })({x}); }, "its trip count is only known at run time, and its gradient saves each iteration up to a bound the "
              "loop does not give; set max_iterations: while_loop(cond, body, init, max_iterations) in C++");
}

}  // namespace
}  // namespace ingot::testing
