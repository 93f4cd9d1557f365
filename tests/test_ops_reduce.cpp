// Tests of the reduce family: axis reductions, argmax, moments, softmax/log_softmax,
// layer_norm and batch_norm. Expected values come from straightforward double-precision loops
// written here, independent of the kernels; run_op checks shape/dtype rule agreement.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "compiler/shape_inference.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

void expect_values(const Tensor& got, const std::vector<double>& want, double rtol = 0,
                   double atol = 0) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i << " is " << g[i] << ", want NaN";
    else
      EXPECT_NEAR(g[i], want[i], atol + rtol * std::abs(want[i])) << "element " << i;
  }
}

// Every output of the kernel alone (moments has two), without shape or type inference.
std::vector<Tensor> eval_outputs(const std::string& op, const std::vector<Tensor>& inputs,
                              Attrs attrs = {}) {
  Node n;
  n.op = op;
  n.attrs = std::move(attrs);
  std::vector<Tensor> out(static_cast<size_t>(get_op(op).num_outputs));
  get_op(op).eval(n, inputs, out);
  return out;
}

Attrs reduce_attrs(std::vector<int64_t> axes, int64_t keepdims = 0) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

// The input elements reducing into each output element (row-major, keepdims-independent).
std::vector<std::vector<double>> groups(const Tensor& x, std::vector<int64_t> axes) {
  const Shape& s = x.shape();
  const int r = x.rank();
  std::set<int> reduced;
  for (int64_t a : axes) reduced.insert(static_cast<int>(a < 0 ? a + r : a));
  if (axes.empty())
    for (int d = 0; d < r; ++d) reduced.insert(d);
  int64_t outs = 1;
  for (int d = 0; d < r; ++d)
    if (!reduced.count(d)) outs *= s[static_cast<size_t>(d)];
  std::vector<std::vector<double>> g(static_cast<size_t>(outs));
  const std::vector<double> v = x.to_vector<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, o = 0, stride = 1;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t size = s[static_cast<size_t>(d)], pos = rem % size;
      rem /= size;
      if (reduced.count(d)) continue;
      o += pos * stride;
      stride *= size;
    }
    g[static_cast<size_t>(o)].push_back(v[static_cast<size_t>(i)]);
  }
  return g;
}

std::vector<double> ref_reduce(const Tensor& x, std::vector<int64_t> axes,
                               const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (const auto& g : groups(x, std::move(axes))) out.push_back(f(g));
  return out;
}

double ref_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double ref_mean(const std::vector<double>& g) { return ref_sum(g) / static_cast<double>(g.size()); }
double ref_var(const std::vector<double>& g) {
  const double m = ref_mean(g);
  double s = 0;
  for (double v : g) s += (v - m) * (v - m);
  return s / static_cast<double>(g.size());
}
double ref_max(const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); }
double ref_min(const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); }

// Softmax along `axis` of x, in double.
std::vector<double> ref_softmax(const Tensor& x, int axis, bool log) {
  const Shape& s = x.shape();
  int64_t outer = 1, n = s[static_cast<size_t>(axis)], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<double> v = x.to_vector<double>(), y(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < n; ++k) mx = std::max(mx, v[at(k)]);
      for (int64_t k = 0; k < n; ++k) sum += std::exp(v[at(k)] - mx);
      for (int64_t k = 0; k < n; ++k)
        y[at(k)] = log ? v[at(k)] - mx - std::log(sum) : std::exp(v[at(k)] - mx) / sum;
    }
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Registration

TEST(ReduceOps, RegisteredWithFusionClassesAndDocs) {
  for (const char* name : {"sum", "mean", "max", "min", "argmax", "moments"})
    EXPECT_EQ(get_op(name).fusion, FusionClass::Reduction) << name;
  for (const char* name : {"softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm"})
    EXPECT_EQ(get_op(name).fusion, FusionClass::RowKernel) << name;
  for (const char* name : {"sum", "mean", "max", "min", "argmax", "moments", "softmax",
                           "log_softmax", "layer_norm", "rms_norm", "batch_norm"})
    EXPECT_FALSE(get_op(name).doc.empty()) << name;
  EXPECT_EQ(get_op("moments").num_outputs, 2);
  EXPECT_EQ(get_op("layer_norm").min_inputs, 1);
  EXPECT_EQ(get_op("layer_norm").max_inputs, 3);
  EXPECT_EQ(get_op("rms_norm").min_inputs, 1);
  EXPECT_EQ(get_op("rms_norm").max_inputs, 2);
  EXPECT_EQ(get_op("batch_norm").min_inputs, 5);
}

// ---------------------------------------------------------------------------------------------
// sum mean max min: shapes

TEST(ReduceOps, ShapeRuleHonorsAxesAndKeepdims) {
  EXPECT_EQ(infer_op_shape("sum", {{"N", 3, 4}}, reduce_attrs({1})), "[N, 4]");
  EXPECT_EQ(infer_op_shape("sum", {{"N", 3, 4}}, reduce_attrs({1}, 1)), "[N, 1, 4]");
  EXPECT_EQ(infer_op_shape("mean", {{"N", 3, 4}}, reduce_attrs({-1, 0})), "[3]");
  EXPECT_EQ(infer_op_shape("max", {{"N", 3, 4}}, reduce_attrs({})), "[]");
  EXPECT_EQ(infer_op_shape("min", {{"N", 3, 4}}), "[]");
  EXPECT_EQ(infer_op_shape("min", {{"N", 3, 4}}, reduce_attrs({}, 1)), "[1, 1, 1]");
  EXPECT_EQ(infer_op_shape("sum", {{"B", "T", "C"}}, reduce_attrs({0, 2}, 1)), "[1, T, 1]");
  EXPECT_EQ(infer_op_shape("sum", {{}}), "[]");
  auto m = infer_op_shapes("moments", {{"N", 8}}, reduce_attrs({0}), 2);
  EXPECT_EQ(to_string(m[0]), "[8]");
  EXPECT_EQ(to_string(m[1]), "[8]");
}

TEST(ReduceOps, ShapeRuleRejectsBadAttributes) {
  expect_error(
      [] {
        infer_op_shape("sum", {{2, 3}}, reduce_attrs({2}));
      },
      "axis 2 out of range for rank 2");
  expect_error(
      [] {
        infer_op_shape("mean", {{2, 3}}, reduce_attrs({-3}));
      },
      "axis -3 out of range");
  expect_error([] { infer_op_shape("max", {{2, 3}}, reduce_attrs({1, -1})); }, "appears twice");
  expect_error(
      [] {
        infer_op_shape("min", {{2, 3}}, reduce_attrs({0}, 2));
      },
      "keepdims must be 0 or 1");
  expect_error([] { infer_op_shape("sum", {{}}, reduce_attrs({0})); }, "out of range for rank 0");
  // The kernel checks the same on its own.
  expect_error([] { eval_outputs("sum", {Tensor(DType::Float32, {2})}, reduce_attrs({1})); },
               "sum: axis 1 out of range");
}

// ---------------------------------------------------------------------------------------------
// sum mean max min: values

TEST(ReduceOps, ValuesOverEveryAxesSetMatchReference) {
  Tensor x = random_tensor({3, 4, 5}, 21, -2, 2);
  const std::vector<std::vector<int64_t>> axes_sets = {
      {}, {0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, 2}, {2, 0}, {0, 1, 2}, {-3, -1}};
  for (const auto& axes : axes_sets) {
    for (int64_t keep : {0, 1}) {
      SCOPED_TRACE("axes " + to_string(Shape(axes)) + " keepdims " + std::to_string(keep));
      const Attrs attrs = reduce_attrs(axes, keep);
      expect_values(run_op("sum", {x}, attrs), ref_reduce(x, axes, ref_sum), 1e-6, 1e-6);
      expect_values(run_op("mean", {x}, attrs), ref_reduce(x, axes, ref_mean), 1e-6, 1e-6);
      expect_values(run_op("max", {x}, attrs), ref_reduce(x, axes, ref_max));
      expect_values(run_op("min", {x}, attrs), ref_reduce(x, axes, ref_min));
      auto mv = run_op_n("moments", {x}, attrs, 2);
      expect_values(mv[0], ref_reduce(x, axes, ref_mean), 1e-6, 1e-6);
      expect_values(mv[1], ref_reduce(x, axes, ref_var), 1e-6, 1e-6);
    }
  }
}

TEST(ReduceOps, SizeOneAndOddShapes) {
  for (const Shape& s : {Shape{1, 7, 1}, Shape{1}, Shape{13, 1, 3}, Shape{2, 1, 1, 5}}) {
    Tensor x = random_tensor(s, 22);
    for (const std::vector<int64_t>& axes :
         {std::vector<int64_t>{0}, std::vector<int64_t>{-1}, std::vector<int64_t>{}}) {
      SCOPED_TRACE(to_string(s) + " axes " + to_string(Shape(axes)));
      expect_values(run_op("sum", {x}, reduce_attrs(axes, 1)), ref_reduce(x, axes, ref_sum), 1e-6,
                    1e-6);
      expect_values(run_op("max", {x}, reduce_attrs(axes)), ref_reduce(x, axes, ref_max));
    }
  }
  Tensor scalar = Tensor::scalar<float>(4.5f);
  expect_values(run_op("sum", {scalar}), {4.5});
  expect_values(run_op("min", {scalar}, reduce_attrs({}, 1)), {4.5});
}

TEST(ReduceOps, DtypeRules) {
  Tensor b = tensor<bool>({true, true, false, true}, {2, 2});
  Tensor s = run_op("sum", {b});
  EXPECT_EQ(s.dtype(), DType::Int64);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{3}));
  EXPECT_EQ(run_op("sum", {b}, reduce_attrs({1})).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(run_op("max", {b}, reduce_attrs({1})).to_vector<bool>(),
            (std::vector<bool>{true, true}));
  EXPECT_EQ(run_op("min", {b}, reduce_attrs({1})).to_vector<bool>(),
            (std::vector<bool>{true, false}));
  Tensor mb = run_op("mean", {b});
  EXPECT_EQ(mb.dtype(), DType::Float32);
  expect_values(mb, {0.75});

  Tensor i = tensor<int32_t>({1, 2, 4, -8}, {4});
  EXPECT_EQ(run_op("sum", {i}).dtype(), DType::Int32);
  EXPECT_EQ(run_op("sum", {i}).to_vector<int32_t>()[0], -1);
  EXPECT_EQ(run_op("max", {i}).to_vector<int32_t>()[0], 4);
  EXPECT_EQ(run_op("min", {i}).to_vector<int32_t>()[0], -8);
  Tensor mi = run_op("mean", {i});
  EXPECT_EQ(mi.dtype(), DType::Float32);
  expect_values(mi, {-0.25});
  auto mv = run_op_n("moments", {tensor<uint8_t>({1, 3}, {2})}, {}, 2);
  EXPECT_EQ(mv[0].dtype(), DType::Float32);
  EXPECT_EQ(mv[1].dtype(), DType::Float32);
  expect_values(mv[0], {2});
  expect_values(mv[1], {1});

  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float64}) {
    Tensor x = tensor<double>({1, 2, 3, 6}, {2, 2}).astype(dt);
    for (const char* op : {"sum", "mean", "max", "min"})
      EXPECT_EQ(run_op(op, {x}).dtype(), dt) << op;
    expect_values(run_op("sum", {x}, reduce_attrs({0})), {4, 8});
    expect_values(run_op("mean", {x}, reduce_attrs({1})), {1.5, 4.5});
    expect_values(run_op("max", {x}, reduce_attrs({1})), {2, 6});
    expect_values(run_op_n("moments", {x}, {}, 2)[1], {3.5});
  }
}

TEST(ReduceOps, IntegerSumsWrapInTheirDtype) {
  Tensor i8 = tensor<int8_t>({100, 100, 100}, {3});
  EXPECT_EQ(run_op("sum", {i8}).to_vector<int8_t>()[0], static_cast<int8_t>(44));  // 300 - 256
  const int64_t mx = std::numeric_limits<int64_t>::max();
  Tensor i64 = tensor<int64_t>({mx, 1}, {2});
  EXPECT_EQ(run_op("sum", {i64}).to_vector<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(run_op("min", {tensor<int64_t>({mx, -mx - 1}, {2})}).to_vector<int64_t>()[0], -mx - 1);
}

TEST(ReduceOps, FloatSumsAccumulateInDouble) {
  // 2^20 copies of 0.1f: a float accumulator drifts by ~1e-2 relative; double stays exact-ish.
  const int64_t n = int64_t{1} << 20;
  Tensor x = Tensor::full(DType::Float32, {n}, 0.1);
  const double want = static_cast<double>(0.1f) * static_cast<double>(n);
  EXPECT_NEAR(run_op("sum", {x}).item(), want, want * 1e-7);
  EXPECT_NEAR(run_op("mean", {x}).item(), 0.1, 1e-7);
  Tensor h = Tensor::full(DType::Float16, {4096}, 1.0);  // a half accumulator would stop at 2048
  EXPECT_EQ(run_op("sum", {h}).item(), 4096);
  // Variance two-pass around the mean: no catastrophic cancellation for large offsets.
  Tensor off = tensor<float>({1e4f + 1, 1e4f - 1, 1e4f + 1, 1e4f - 1}, {4});
  expect_values(run_op_n("moments", {off}, {}, 2)[1], {1}, 1e-6);
}

TEST(ReduceOps, MaxAndMinPropagateNaN) {
  Tensor x = tensor<float>({1, static_cast<float>(kNaN), 3, 4, 5, 6}, {2, 3});
  expect_values(run_op("max", {x}, reduce_attrs({1})), {kNaN, 6});
  expect_values(run_op("min", {x}, reduce_attrs({1})), {kNaN, 4});
  expect_values(run_op("max", {x}, reduce_attrs({0})), {4, kNaN, 6});
  expect_values(run_op("max", {x.astype(DType::Float16)}), {kNaN});
}

TEST(ReduceOps, ZeroSizeDims) {
  Tensor e = Tensor(DType::Float32, {0, 3});
  Tensor s0 = run_op("sum", {e}, reduce_attrs({0}));
  EXPECT_EQ(s0.shape(), (Shape{3}));
  expect_values(s0, {0, 0, 0});
  expect_values(run_op("mean", {e}, reduce_attrs({0})), {kNaN, kNaN, kNaN});  // 0/0 like NumPy
  EXPECT_EQ(run_op("sum", {e}, reduce_attrs({1}, 1)).shape(), (Shape{0, 1}));
  EXPECT_EQ(run_op("max", {e}, reduce_attrs({1})).shape(), (Shape{0}));  // nothing to reduce
  expect_error([&] { run_op("max", {e}, reduce_attrs({0})); }, "zero-size");
  expect_error([&] { run_op("min", {e}); }, "no identity");
}

// ---------------------------------------------------------------------------------------------
// argmax

TEST(ReduceOps, ArgmaxShapesAndDtype) {
  EXPECT_EQ(infer_op_shape("argmax", {{"N", 10}}, {{"axis", int64_t{1}}}), "[N]");
  EXPECT_EQ(
      infer_op_shape("argmax", {{"N", 10}}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{1}}}),
      "[N, 1]");
  EXPECT_EQ(infer_op_shape("argmax", {{"B", "T", 5}}, {{"axis", int64_t{1}}}), "[B, 5]");
  expect_error(
      [] {
        infer_op_shape("argmax", {{3, 4}}, {{"axis", int64_t{2}}});
      },
      "argmax: axis 2 out of range for rank 2");
  expect_error([] { infer_op_shape("argmax", {{3, 4}}); }, "axis");
  expect_error(
      [] {
        infer_op_shape("argmax", {{3}}, {{"axis", int64_t{0}}, {"keepdims", int64_t{-1}}});
      },
      "keepdims");
}

TEST(ReduceOps, ArgmaxValues) {
  Tensor x = tensor<float>({1, 5, 5, 2,  //
                            9, 0, 3, 9,  //
                            -1, -2, -3, -4},
                           {3, 4});
  Tensor r = run_op("argmax", {x}, {{"axis", int64_t{1}}});
  EXPECT_EQ(r.dtype(), DType::Int64);
  EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0}));  // ties: first wins
  Tensor c = run_op("argmax", {x}, {{"axis", int64_t{-2}}, {"keepdims", int64_t{1}}});
  EXPECT_EQ(c.shape(), (Shape{1, 4}));
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  // Middle axis of a 3-D tensor against a reference scan.
  Tensor y = random_tensor({3, 5, 7}, 23);
  Tensor a = run_op("argmax", {y}, {{"axis", int64_t{1}}});
  std::vector<double> v = y.to_vector<double>();
  std::vector<int64_t> got = a.to_vector<int64_t>();
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 7; ++i) {
      int best = 0;
      for (int k = 1; k < 5; ++k)
        if (v[static_cast<size_t>((o * 5 + k) * 7 + i)] >
            v[static_cast<size_t>((o * 5 + best) * 7 + i)])
          best = k;
      EXPECT_EQ(got[static_cast<size_t>(o * 7 + i)], best);
    }
}

TEST(ReduceOps, ArgmaxTreatsNaNAsMaxAndWorksOnEveryDtype) {
  Tensor x = tensor<float>({1, static_cast<float>(kNaN), 7, static_cast<float>(kNaN)}, {4});
  EXPECT_EQ(run_op("argmax", {x}, {{"axis", int64_t{0}}}).to_vector<int64_t>()[0], 1);
  EXPECT_EQ(
      run_op("argmax", {x.astype(DType::BFloat16)}, {{"axis", int64_t{0}}}).to_vector<int64_t>()[0],
      1);
  for (DType dt :
       {DType::Bool, DType::Int8, DType::UInt8, DType::Int64, DType::Float16, DType::Float64}) {
    Tensor t = tensor<double>({0, 1, 0, 1}, {4}).astype(dt);
    EXPECT_EQ(run_op("argmax", {t}, {{"axis", int64_t{0}}}).to_vector<int64_t>()[0], 1)
        << dtype_name(dt);
  }
  EXPECT_EQ(run_op("argmax", {tensor<int32_t>({-5, -3, -9}, {3})}, {{"axis", int64_t{0}}})
                .to_vector<int64_t>()[0],
            1);
}

TEST(ReduceOps, ArgmaxZeroSize) {
  EXPECT_EQ(run_op("argmax", {Tensor(DType::Float32, {0, 3})}, {{"axis", int64_t{1}}}).shape(),
            (Shape{0}));
  expect_error(
      [] {
        run_op("argmax", {Tensor(DType::Float32, {0, 3})}, {{"axis", int64_t{0}}});
      },
      "size 0");
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax

TEST(SoftmaxOps, ShapeRuleAndAxisValidation) {
  EXPECT_EQ(infer_op_shape("softmax", {{"B", "T", 10}}), "[B, T, 10]");
  EXPECT_EQ(infer_op_shape("log_softmax", {{"B", 4}}, {{"axis", int64_t{0}}}), "[B, 4]");
  expect_error(
      [] {
        infer_op_shape("softmax", {{2, 3}}, {{"axis", int64_t{2}}});
      },
      "softmax: axis 2 out of range for rank 2");
  expect_error([] { infer_op_shape("log_softmax", {{}}); }, "out of range for rank 0");
  expect_error(
      [] {
        eval_outputs("softmax", {Tensor(DType::Float32, {3})}, {{"axis", int64_t{-2}}});
      },
      "axis -2");
}

TEST(SoftmaxOps, ValuesAlongEveryAxis) {
  Tensor x = random_tensor({3, 4, 5}, 31, -4, 4);
  for (int axis = 0; axis < 3; ++axis) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " axis " + std::to_string(axis));
      const Attrs attrs{{"axis", int64_t{axis}}};
      Tensor y = run_op(log ? "log_softmax" : "softmax", {x}, attrs);
      EXPECT_EQ(y.dtype(), DType::Float32);
      expect_values(y, ref_softmax(x, axis, log), 1e-6, 1e-7);
      Tensor yn = run_op(log ? "log_softmax" : "softmax", {x}, {{"axis", int64_t{axis - 3}}});
      expect_values(yn, y.to_vector<double>());
    }
  }
  // Default axis is the last.
  expect_values(run_op("softmax", {x}), ref_softmax(x, 2, false), 1e-6, 1e-7);
}

TEST(SoftmaxOps, NumericallyStableForLargeInputs) {
  Tensor x = tensor<float>({1000, 1001, 1002, -1000, 0, 1000}, {2, 3});
  std::vector<double> want = ref_softmax(x, 1, false);
  expect_values(run_op("softmax", {x}), want, 1e-6, 1e-7);
  expect_values(run_op("log_softmax", {x}), ref_softmax(x, 1, true), 1e-6, 1e-5);
  std::vector<double> row = run_op("softmax", {x}).to_vector<double>();
  EXPECT_NEAR(row[0] + row[1] + row[2], 1.0, 1e-6);
  EXPECT_EQ(row[3], 0.0);
  EXPECT_NEAR(row[5], 1.0, 1e-6);
}

TEST(SoftmaxOps, DtypePaths) {
  Tensor i = tensor<int32_t>({1, 2, 3}, {3});
  Tensor y = run_op("softmax", {i});
  EXPECT_EQ(y.dtype(), DType::Float32);
  expect_values(y, ref_softmax(i, 0, false), 1e-6);
  Tensor b = run_op("log_softmax", {tensor<bool>({true, false}, {2})});
  EXPECT_EQ(b.dtype(), DType::Float32);
  expect_values(b, ref_softmax(tensor<double>({1, 0}, {2}), 0, true), 1e-6);
  Tensor x = random_tensor({4, 6}, 32, -3, 3, DType::Float64);
  Tensor d = run_op("log_softmax", {x});
  EXPECT_EQ(d.dtype(), DType::Float64);
  expect_values(d, ref_softmax(x, 1, true), 1e-13, 1e-14);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor h = x.astype(dt);
    Tensor s = run_op("softmax", {h}, {{"axis", int64_t{0}}});
    EXPECT_EQ(s.dtype(), dt);
    expect_values(s, ref_softmax(h, 0, false), dt == DType::Float16 ? 2e-3 : 1e-2, 1e-3);
  }
  EXPECT_EQ(run_op("softmax", {Tensor(DType::Float32, {2, 0})}).shape(), (Shape{2, 0}));
  EXPECT_EQ(run_op("softmax", {Tensor(DType::Float32, {0, 4})}).shape(), (Shape{0, 4}));
}

// ---------------------------------------------------------------------------------------------
// layer_norm

namespace {
// Normalization over the trailing `len` elements of each row, with optional weight and bias.
std::vector<double> ref_layer_norm(const Tensor& x, int64_t len, const std::vector<double>& w,
                                   const std::vector<double>& b, double eps) {
  std::vector<double> v = x.to_vector<double>(), y(v.size());
  for (size_t r = 0; r * static_cast<size_t>(len) < v.size(); ++r) {
    std::vector<double> row(v.begin() + static_cast<long>(r * len),
                            v.begin() + static_cast<long>((r + 1) * len));
    const double m = ref_mean(row), var = ref_var(row);
    for (size_t k = 0; k < row.size(); ++k)
      y[r * static_cast<size_t>(len) + k] =
          (row[k] - m) / std::sqrt(var + eps) * (w.empty() ? 1 : w[k]) + (b.empty() ? 0 : b[k]);
  }
  return y;
}
}  // namespace

TEST(NormOps, LayerNormValues) {
  Tensor x = random_tensor({3, 2, 5}, 41, -3, 3);
  Tensor w = random_tensor({5}, 42, 0.5, 1.5), b = random_tensor({5}, 43);
  expect_values(run_op("layer_norm", {x, w, b}),
                ref_layer_norm(x, 5, w.to_vector<double>(), b.to_vector<double>(), 1e-5), 1e-5,
                1e-5);
  expect_values(run_op("layer_norm", {x}), ref_layer_norm(x, 5, {}, {}, 1e-5), 1e-5, 1e-5);
  expect_values(run_op("layer_norm", {x, w}), ref_layer_norm(x, 5, w.to_vector<double>(), {}, 1e-5),
                1e-5, 1e-5);
  // axis = -2 normalizes over the last two dims; eps is honored.
  Tensor w2 = random_tensor({2, 5}, 44);
  Attrs attrs{{"axis", int64_t{-2}}, {"eps", 0.5}};
  expect_values(run_op("layer_norm", {x, w2}, attrs),
                ref_layer_norm(x, 10, w2.to_vector<double>(), {}, 0.5), 1e-5, 1e-5);
  expect_values(run_op("layer_norm", {x}, {{"axis", int64_t{0}}}),
                ref_layer_norm(x, 30, {}, {}, 1e-5), 1e-5, 1e-5);
}

TEST(NormOps, LayerNormDtypes) {
  Tensor x = random_tensor({4, 8}, 45, -2, 2, DType::Float64);
  Tensor y = run_op("layer_norm", {x});
  EXPECT_EQ(y.dtype(), DType::Float64);
  expect_values(y, ref_layer_norm(x, 8, {}, {}, 1e-5), 1e-12, 1e-12);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor h = x.astype(dt);
    Tensor hy = run_op("layer_norm", {h, Tensor::full(DType::Float32, {8}, 2.0)});
    EXPECT_EQ(hy.dtype(), dt);
    std::vector<double> w(8, 2.0);
    expect_values(hy, ref_layer_norm(h, 8, w, {}, 1e-5), dt == DType::Float16 ? 2e-3 : 1e-2, 1e-2);
  }
  expect_error(
      [] {
        run_op("layer_norm", {tensor<int32_t>({1, 2}, {2})});
      },
      "layer_norm: input must be floating point, got int32");
  expect_error(
      [] {
        run_op("layer_norm", {tensor<float>({1, 2}, {2}), tensor<int64_t>({1, 1}, {2})});
      },
      "weight must be floating point");
  expect_error([] { eval_outputs("layer_norm", {tensor<uint8_t>({1}, {1})}); }, "layer_norm");
}

// rms_norm: x / sqrt(mean(x^2) + eps) over the trailing `len` elements of each row, times w.
std::vector<double> ref_rms_norm(const Tensor& x, int64_t len, const std::vector<double>& w, double eps) {
  std::vector<double> v = x.to_vector<double>(), y(v.size());
  const auto n = static_cast<size_t>(len);
  for (size_t r = 0; r * n < v.size(); ++r) {
    double ms = 0;
    for (size_t k = 0; k < n; ++k) ms += v[r * n + k] * v[r * n + k];
    const double scale = 1 / std::sqrt(ms / static_cast<double>(n) + eps);
    for (size_t k = 0; k < n; ++k) y[r * n + k] = v[r * n + k] * scale * (w.empty() ? 1 : w[k]);
  }
  return y;
}

TEST(NormOps, RmsNormValuesDtypesAndErrors) {
  Tensor x = random_tensor({3, 2, 5}, 51, -3, 3);
  Tensor w = random_tensor({5}, 52, 0.5, 1.5);
  expect_values(run_op("rms_norm", {x, w}), ref_rms_norm(x, 5, w.to_vector<double>(), 1e-5), 1e-5, 1e-5);
  expect_values(run_op("rms_norm", {x}), ref_rms_norm(x, 5, {}, 1e-5), 1e-5, 1e-5);
  // axis = -2 normalizes over the last two dims; eps is honored (a large one shows).
  Tensor w2 = random_tensor({2, 5}, 53);
  expect_values(run_op("rms_norm", {x, w2}, {{"axis", int64_t{-2}}, {"eps", 0.5}}),
                ref_rms_norm(x, 10, w2.to_vector<double>(), 0.5), 1e-5, 1e-5);
  expect_values(run_op("rms_norm", {x}, {{"axis", int64_t{0}}}), ref_rms_norm(x, 30, {}, 1e-5), 1e-5, 1e-5);
  // Unlike layer_norm, a constant row is not zero: it normalizes to +-1.
  expect_values(run_op("rms_norm", {Tensor::full(DType::Float32, {2, 4}, -3.0)}, {{"eps", 0.0}}),
                std::vector<double>(8, -1.0), 1e-6, 1e-6);
  Tensor d = random_tensor({4, 8}, 54, -2, 2, DType::Float64);
  Tensor dy = run_op("rms_norm", {d});
  EXPECT_EQ(dy.dtype(), DType::Float64);
  expect_values(dy, ref_rms_norm(d, 8, {}, 1e-5), 1e-12, 1e-12);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor h = d.astype(dt);
    Tensor hy = run_op("rms_norm", {h, Tensor::full(DType::Float32, {8}, 2.0)});
    EXPECT_EQ(hy.dtype(), dt);
    expect_values(hy, ref_rms_norm(h, 8, std::vector<double>(8, 2.0), 1e-5), dt == DType::Float16 ? 2e-3 : 1e-2,
                  1e-2);
  }
  expect_error([] { run_op("rms_norm", {tensor<int32_t>({1, 2}, {2})}); },
               "rms_norm: input must be floating point, got int32");
  expect_error([] { run_op("rms_norm", {tensor<float>({1, 2}, {2}), tensor<float>({1, 2, 3}, {3})}); },
               "must also be 2");
  expect_error([] { run_op("rms_norm", {tensor<float>({1, 2}, {2})}, {{"axis", int64_t{1}}}); },
               "rms_norm: axis 1 out of range");
  expect_error([] { infer_op_shape("rms_norm", {{"N", 4}, {5}}); }, "must also be");
}

TEST(NormOps, LayerNormShapeRuleFlowsToWeights) {
  // weight and bias shapes are inferred from the input: [3, 4] for axis = -2 of [N, 3, 4].
  Graph g;
  ValueId x = g.add_input("x"), w = g.add_input("w"), b = g.add_input("b");
  ValueId y = g.add_op("layer_norm", {x, w, b}, {{"axis", int64_t{-2}}});
  infer_shapes(g, {{x, {"N", 3, 4}, "", "test"}});
  EXPECT_EQ(to_string(g.value(y).shape), "[N, 3, 4]");
  EXPECT_EQ(to_string(g.value(w).shape), "[3, 4]");
  EXPECT_EQ(to_string(g.value(b).shape), "[3, 4]");
  expect_error([] { infer_op_shape("layer_norm", {{"N", 4}, {5}}); }, "must also be");
  expect_error([] { infer_op_shape("layer_norm", {{"N", 4}, {2, 4}}); }, "rank");
  expect_error(
      [] {
        infer_op_shape("layer_norm", {{2, 4}}, {{"axis", int64_t{2}}});
      },
      "layer_norm: axis 2 out of range");
  expect_error(
      [] {
        eval_outputs("layer_norm", {Tensor(DType::Float32, {2, 4}), Tensor(DType::Float32, {5})});
      },
      "weight has shape [5] but must have shape [4]");
}

TEST(NormOps, LayerNormZeroSize) {
  EXPECT_EQ(run_op("layer_norm", {Tensor(DType::Float32, {0, 4})}).shape(), (Shape{0, 4}));
  EXPECT_EQ(run_op("layer_norm", {Tensor(DType::Float32, {3, 0})}).shape(), (Shape{3, 0}));
}

// ---------------------------------------------------------------------------------------------
// batch_norm

TEST(NormOps, BatchNormValues) {
  Tensor x = random_tensor({2, 3, 2, 5}, 51, -3, 3);
  Tensor w = random_tensor({3}, 52, 0.5, 1.5), b = random_tensor({3}, 53);
  Tensor mean = random_tensor({3}, 54), var = random_tensor({3}, 55, 0.1, 2);
  for (double eps : {1e-5, 0.25}) {
    Attrs attrs;
    if (eps != 1e-5) attrs.set("eps", eps);
    Tensor y = run_op("batch_norm", {x, w, b, mean, var}, attrs);
    std::vector<double> xv = x.to_vector<double>(), want(xv.size());
    auto wv = w.to_vector<double>(), bv = b.to_vector<double>(), mv = mean.to_vector<double>(),
         vv = var.to_vector<double>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t c = (i / 10) % 3;
      want[i] = (xv[i] - mv[c]) / std::sqrt(vv[c] + eps) * wv[c] + bv[c];
    }
    expect_values(y, want, 1e-5, 1e-5);
  }
  // Rank 2 ([N, C]) and float64.
  Tensor x2 = random_tensor({4, 3}, 56, -1, 1, DType::Float64);
  Tensor ones = Tensor::full(DType::Float64, {3}, 1), zeros = Tensor::full(DType::Float64, {3}, 0);
  Tensor y2 = run_op("batch_norm", {x2, ones, zeros, zeros, ones}, {{"eps", 0.0}});
  EXPECT_EQ(y2.dtype(), DType::Float64);
  expect_values(y2, x2.to_vector<double>(), 1e-15);
  // float16 input with float32 parameters.
  Tensor h = run_op("batch_norm",
                    {x2.astype(DType::Float16), ones.astype(DType::Float32), zeros, zeros, ones},
                    {{"eps", 0.0}});
  EXPECT_EQ(h.dtype(), DType::Float16);
  expect_values(h, x2.to_vector<double>(), 1e-3, 1e-3);
}

TEST(NormOps, BatchNormShapeRule) {
  Graph g;
  ValueId x = g.add_input("x");
  std::vector<ValueId> params;
  for (const char* name : {"w", "b", "m", "v"}) params.push_back(g.add_input(name));
  ValueId y = g.add_op("batch_norm", {x, params[0], params[1], params[2], params[3]});
  infer_shapes(g, {{x, {"N", 16, "H", "W"}, "", "test"}});
  EXPECT_EQ(to_string(g.value(y).shape), "[N, 16, H, W]");
  for (ValueId p : params) EXPECT_EQ(to_string(g.value(p).shape), "[16]");
  expect_error([] { infer_op_shape("batch_norm", {{4}, {4}, {4}, {4}, {4}}); }, "[N, C, ...]");
  expect_error([] { infer_op_shape("batch_norm", {{2, 3}, {3}, {4}, {3}, {3}}); }, "must also be");
  expect_error([] { infer_op_shape("batch_norm", {{2, 3}, {3}, {3}, {1, 3}, {3}}); }, "rank");
}

TEST(NormOps, BatchNormErrors) {
  Tensor x = Tensor(DType::Float32, {2, 3});
  Tensor p = Tensor(DType::Float32, {3});
  expect_error(
      [&] {
        run_op("batch_norm", {x.astype(DType::Int32), p, p, p, p});
      },
      "batch_norm: input must be floating point");
  expect_error(
      [&] {
        run_op("batch_norm", {x, p, p, p.astype(DType::Int64), p});
      },
      "mean must be floating point");
  expect_error(
      [&] {
        eval_outputs("batch_norm", {x, p, p, p, Tensor(DType::Float32, {2})});
      },
      "variance has shape [2] but must have shape [3]");
  expect_error([&] { eval_outputs("batch_norm", {p, p, p, p, p}); }, "[N, C, ...]");
  EXPECT_EQ(run_op("batch_norm", {Tensor(DType::Float32, {0, 3, 2}), p, p, p, p}).shape(),
            (Shape{0, 3, 2}));
}

TEST(NormOps, KernelsCheckArity) {
  Tensor p = Tensor(DType::Float32, {3});
  expect_error(
      [&] {
        eval_outputs("batch_norm", {Tensor(DType::Float32, {2, 3}), p});
      },
      "batch_norm: expects 5 inputs, got 2");
  expect_error([&] { eval_outputs("layer_norm", {p, p, p, p}); }, "expects 1 to 3 inputs, got 4");
  expect_error([&] { eval_outputs("sum", {}); }, "sum: expects 1 inputs, got 0");
}
