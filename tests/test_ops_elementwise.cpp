// Tests of the elementwise family: shape rules (concrete and symbolic), dtype rules, kernel
// values against <cmath> in double, broadcasting, dtype paths and error messages. run_op checks
// on every call that the shape and dtype rules agree with what the kernel produced.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "op_test_util.h"
#include "ops/kernel_util.h"

using namespace ingot;
using namespace ingot::testing;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Elementwise |got - want| <= atol + rtol * |want|, NaN matching NaN.
void expect_values(const Tensor& got, const std::vector<double>& want, double rtol = 0,
                   double atol = 0) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i << " is " << g[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(g[i], want[i], atol + rtol * std::abs(want[i])) << "element " << i;
    }
  }
}

// NumPy broadcasting computed independently of the kernels: map each output index back.
std::vector<double> ref_broadcast(const std::vector<Tensor>& ins, const Shape& out,
                                  const std::function<double(const std::vector<double>&)>& f) {
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ins) vals.push_back(t.to_vector<double>());
  std::vector<double> r(static_cast<size_t>(numel(out)));
  const int rank = static_cast<int>(out.size());
  for (int64_t i = 0; i < numel(out); ++i) {
    std::vector<double> args;
    for (size_t k = 0; k < ins.size(); ++k) {
      const Shape& s = ins[k].shape();
      int64_t rem = i, idx = 0, stride = 1;
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t pos = rem % out[static_cast<size_t>(d)];
        rem /= out[static_cast<size_t>(d)];
        const int dk = d - (rank - static_cast<int>(s.size()));
        if (dk < 0) continue;
        const int64_t size = s[static_cast<size_t>(dk)];
        idx += (size == 1 ? 0 : pos) * stride;
        stride *= size;
      }
      args.push_back(vals[k][static_cast<size_t>(idx)]);
    }
    r[static_cast<size_t>(i)] = f(args);
  }
  return r;
}

std::vector<double> ref_unary(const Tensor& x, double (*f)(double)) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = f(e);
  return v;
}

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double rsqrt(double x) { return 1 / std::sqrt(x); }

struct UnaryCase {
  const char* op;
  double (*ref)(double);
  double lo, hi;  // input range where the op is defined
  Attrs attrs;
};

std::vector<UnaryCase> float_unary_cases() {
  return {
      {"exp", [](double x) { return std::exp(x); }, -5, 5, {}},
      {"log", [](double x) { return std::log(x); }, 0.01, 10, {}},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 10, {}},
      {"rsqrt", rsqrt, 0.01, 10, {}},
      {"sin", [](double x) { return std::sin(x); }, -4, 4, {}},
      {"cos", [](double x) { return std::cos(x); }, -4, 4, {}},
      {"tanh", [](double x) { return std::tanh(x); }, -4, 4, {}},
      {"sigmoid", sigmoid, -8, 8, {}},
      {"erf", [](double x) { return std::erf(x); }, -3, 3, {}},
      {"asin", [](double x) { return std::asin(x); }, -0.99, 0.99, {}},
      {"acos", [](double x) { return std::acos(x); }, -0.99, 0.99, {}},
      {"atan", [](double x) { return std::atan(x); }, -5, 5, {}},
      {"gelu", gelu_erf, -4, 4, {}},
      {"gelu", gelu_erf, -4, 4, {{"approximate", std::string("none")}}},
      {"gelu", gelu_tanh, -4, 4, {{"approximate", std::string("tanh")}}},
  };
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Registration

TEST(ElementwiseOps, AllRegisteredAsElementwiseWithDocs) {
  for (const char* name :
       {"exp",     "log",           "sqrt",    "rsqrt", "sin",       "cos",  "tanh",
        "sigmoid", "erf",           "gelu",    "neg",   "abs",       "relu", "sign",
        "floor",   "ceil",          "cast",    "add",   "sub",       "mul",  "div",
        "pow",     "maximum",       "minimum", "equal", "not_equal", "less", "less_equal",
        "greater", "greater_equal", "where", "asin", "acos", "atan", "mod", "fmod"}) {
    const OpDef* def = find_op(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_EQ(def->fusion, FusionClass::Elementwise) << name;
    EXPECT_FALSE(def->doc.empty()) << name;
    EXPECT_EQ(def->num_outputs, 1) << name;
  }
  EXPECT_EQ(get_op("where").min_inputs, 3);
  EXPECT_EQ(get_op("add").max_inputs, 2);
}

// ---------------------------------------------------------------------------------------------
// Unary, float result

TEST(ElementwiseOps, FloatUnaryFloat32AndFloat64MatchCmath) {
  for (const UnaryCase& c : float_unary_cases()) {
    SCOPED_TRACE(c.op);
    Tensor x32 = random_tensor({3, 7}, 11, c.lo, c.hi);
    Tensor y32 = run_op(c.op, {x32}, c.attrs);
    EXPECT_EQ(y32.dtype(), DType::Float32);
    expect_values(y32, ref_unary(x32, c.ref), 1e-6, 1e-6);

    Tensor x64 = random_tensor({5}, 12, c.lo, c.hi, DType::Float64);
    Tensor y64 = run_op(c.op, {x64}, c.attrs);
    EXPECT_EQ(y64.dtype(), DType::Float64);
    expect_values(y64, ref_unary(x64, c.ref), 1e-13, 1e-14);
  }
}

TEST(ElementwiseOps, FloatUnaryHalfAndBFloat16ComputeInFloat) {
  for (const UnaryCase& c : float_unary_cases()) {
    SCOPED_TRACE(c.op);
    Tensor xh = random_tensor({2, 3, 5}, 13, c.lo, c.hi, DType::Float16);
    Tensor yh = run_op(c.op, {xh}, c.attrs);
    EXPECT_EQ(yh.dtype(), DType::Float16);
    expect_values(yh, ref_unary(xh, c.ref), 2e-3, 1e-3);  // half: 11-bit mantissa

    Tensor xb = random_tensor({9}, 14, c.lo, c.hi, DType::BFloat16);
    Tensor yb = run_op(c.op, {xb}, c.attrs);
    EXPECT_EQ(yb.dtype(), DType::BFloat16);
    expect_values(yb, ref_unary(xb, c.ref), 1e-2, 1e-2);  // bfloat16: 8-bit mantissa
  }
}

TEST(ElementwiseOps, FloatUnaryOfIntsAndBoolComputesInFloat32) {
  Tensor xi = tensor<int32_t>({0, 1, 2, 3}, {4});
  Tensor y = run_op("exp", {xi});
  EXPECT_EQ(y.dtype(), DType::Float32);
  expect_values(y, {1, std::exp(1.0), std::exp(2.0), std::exp(3.0)}, 1e-6);
  expect_values(run_op("sqrt", {tensor<uint8_t>({4, 9, 200}, {3})}), {2, 3, std::sqrt(200.0)},
                1e-6);
  expect_values(run_op("log", {tensor<int64_t>({1, 0}, {2})}), {0, -kInf});
  Tensor b = run_op("sigmoid", {tensor<bool>({true, false}, {2})});
  EXPECT_EQ(b.dtype(), DType::Float32);
  expect_values(b, {sigmoid(1), 0.5}, 1e-6);
}

TEST(ElementwiseOps, FloatUnaryEdgeValues) {
  // sigmoid never overflows; special values follow IEEE.
  expect_values(run_op("sigmoid", {tensor<float>({-1000, 1000, 0}, {3})}), {0, 1, 0.5});
  expect_values(run_op("log", {tensor<float>({0, -1}, {2})}), {-kInf, kNaN});
  expect_values(run_op("rsqrt", {tensor<float>({0, 4}, {2})}), {kInf, 0.5});
  expect_values(run_op("exp", {tensor<double>({kNaN, -kInf}, {2})}), {kNaN, 0});
  expect_values(run_op("gelu", {tensor<float>({0, 10, -10}, {3})}), {0, 10, 0}, 1e-6, 1e-6);
}

TEST(ElementwiseOps, GeluRejectsUnknownApproximation) {
  Attrs bad{{"approximate", std::string("fast")}};
  expect_error([&] { run_op("gelu", {tensor<float>({1}, {1})}, bad); }, "approximate");
  expect_error([&] { eval_only("gelu", {tensor<float>({1}, {1})}, bad); }, "\"fast\"");
}

TEST(ElementwiseOps, UnaryShapeRulesAreSymbolicAndKeepZeroSizes) {
  EXPECT_EQ(infer_op_shape("exp", {{"N", 3}}), "[N, 3]");
  EXPECT_EQ(infer_op_shape("neg", {{}}), "[]");
  EXPECT_EQ(infer_op_shape("cast", {{"B", "T"}}, {{"dtype", std::string("int8")}}), "[B, T]");
  Tensor empty = run_op("tanh", {Tensor(DType::Float32, {0, 3})});
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
  Tensor scalar = run_op("abs", {Tensor::scalar<float>(-2.5f)});
  expect_values(scalar, {2.5});
}

// ---------------------------------------------------------------------------------------------
// Unary, same dtype

TEST(ElementwiseOps, SameDtypeUnaryOnFloats) {
  Tensor x = tensor<float>({-2.5f, -0.5f, 0.0f, 0.5f, 3.0f, static_cast<float>(kNaN)}, {2, 3});
  expect_values(run_op("neg", {x}), {2.5, 0.5, 0, -0.5, -3, kNaN});
  expect_values(run_op("abs", {x}), {2.5, 0.5, 0, 0.5, 3, kNaN});
  expect_values(run_op("relu", {x}), {0, 0, 0, 0.5, 3, kNaN});
  expect_values(run_op("sign", {x}), {-1, -1, 0, 1, 1, kNaN});
  expect_values(run_op("floor", {x}), {-3, -1, 0, 0, 3, kNaN});
  expect_values(run_op("ceil", {x}), {-2, -0.0, 0, 1, 3, kNaN});
  for (const char* op : {"neg", "abs", "relu", "sign", "floor", "ceil"}) {
    EXPECT_EQ(run_op(op, {x}).dtype(), DType::Float32) << op;
    EXPECT_EQ(run_op(op, {x.astype(DType::Float16)}).dtype(), DType::Float16) << op;
    EXPECT_EQ(run_op(op, {x.astype(DType::BFloat16)}).dtype(), DType::BFloat16) << op;
  }
  expect_values(run_op("floor", {x.astype(DType::Float64)}), {-3, -1, 0, 0, 3, kNaN});
  expect_values(run_op("sign", {x.astype(DType::BFloat16)}), {-1, -1, 0, 1, 1, kNaN});
}

TEST(ElementwiseOps, SameDtypeUnaryOnIntegers) {
  Tensor x = tensor<int32_t>({-7, 0, 5}, {3});
  Tensor r = run_op("relu", {x});
  EXPECT_EQ(r.dtype(), DType::Int32);
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 5}));
  EXPECT_EQ(run_op("sign", {x}).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(run_op("abs", {x}).to_vector<int32_t>(), (std::vector<int32_t>{7, 0, 5}));
  EXPECT_EQ(run_op("floor", {x}).to_vector<int32_t>(), (std::vector<int32_t>{-7, 0, 5}));
  EXPECT_EQ(run_op("ceil", {x}).to_vector<int32_t>(), (std::vector<int32_t>{-7, 0, 5}));
  // Integers wrap like NumPy: -(-128) and |-128| stay -128 in int8; int64 min negates to itself.
  Tensor i8 = tensor<int8_t>({-128, 127}, {2});
  EXPECT_EQ(run_op("neg", {i8}).to_vector<int8_t>(), (std::vector<int8_t>{-128, -127}));
  EXPECT_EQ(run_op("abs", {i8}).to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  const int64_t lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(run_op("neg", {tensor<int64_t>({lo, 3}, {2})}).to_vector<int64_t>(),
            (std::vector<int64_t>{lo, -3}));
  Tensor u8 = tensor<uint8_t>({0, 1, 255}, {3});
  EXPECT_EQ(run_op("neg", {u8}).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 1}));
  EXPECT_EQ(run_op("relu", {u8}).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 255}));
  EXPECT_EQ(run_op("sign", {u8}).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  Tensor b = tensor<bool>({true, false}, {2});
  for (const char* op : {"abs", "relu", "sign", "floor", "ceil"}) {
    Tensor y = run_op(op, {b});
    EXPECT_EQ(y.dtype(), DType::Bool) << op;
    EXPECT_EQ(y.to_vector<bool>(), (std::vector<bool>{true, false})) << op;
  }
}

// mod takes the divisor's sign (NumPy mod, Python %), fmod the dividend's (C); an integer
// divisor of 0 gives 0, as NumPy does (C leaves it undefined), and so does -1 (no overflow at
// the most negative dividend); a float one NaN.
TEST(ElementwiseOps, ModAndFmodFollowNumPy) {
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  Tensor a = tensor<int64_t>({7, -7, 7, -7, 5, lowest, 0, 9}, {8}), b = tensor<int64_t>({3, 3, -3, -3, 0, -1, 4, 9}, {8});
  EXPECT_EQ(run_op("mod", {a, b}).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, -2, -1, 0, 0, 0, 0}));
  EXPECT_EQ(run_op("fmod", {a, b}).to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 1, -1, 0, 0, 0, 0}));
  Tensor u = tensor<uint8_t>({250, 7}, {2}), v = tensor<uint8_t>({255, 0}, {2});
  EXPECT_EQ(run_op("mod", {u, v}).to_vector<uint8_t>(), (std::vector<uint8_t>{250, 0})) << "255 is no -1";
  Tensor x = tensor<float>({5.5f, -5.5f, 5.5f, -5.5f, 6.0f, -6.0f, 1.0f, 3.0f}, {8});
  Tensor y = tensor<float>({2.0f, 2.0f, -2.0f, -2.0f, 3.0f, 3.0f, 0.0f, static_cast<float>(kInf)}, {8});
  const std::vector<float> m = run_op("mod", {x, y}).to_vector<float>(), f = run_op("fmod", {x, y}).to_vector<float>();
  const std::vector<float> want_m = {1.5f, 0.5f, -0.5f, -1.5f, 0.0f, 0.0f}, want_f = {1.5f, -1.5f, 1.5f, -1.5f, 0.0f, -0.0f};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(m[i], want_m[i]) << i;
    EXPECT_EQ(f[i], want_f[i]) << i;
  }
  EXPECT_FALSE(std::signbit(m[5])) << "mod(-6, 3) is +0: the divisor's sign";
  EXPECT_TRUE(std::signbit(f[5])) << "fmod(-6, 3) is -0: the dividend's sign";
  EXPECT_TRUE(std::isnan(m[6]) && std::isnan(f[6])) << "a float divisor of 0";
  EXPECT_EQ(m[7], 3.0f);
  EXPECT_EQ(f[7], 3.0f);
  EXPECT_EQ(run_op("mod", {tensor<float>({-1.0f}, {1}), tensor<float>({static_cast<float>(kInf)}, {1})}).to_vector<float>()[0],
            static_cast<float>(kInf))
      << "NumPy: -1 mod inf is inf";
}

TEST(ElementwiseOps, NegOfBoolIsATypeError) {
  expect_error([] { run_op("neg", {tensor<bool>({true}, {1})}); }, "bool");
  expect_error([] { eval_only("neg", {tensor<bool>({true}, {1})}); }, "neg");
}

// ---------------------------------------------------------------------------------------------
// cast

TEST(ElementwiseOps, CastFloatToIntTruncatesTowardZeroAndSaturates) {
  Tensor x = tensor<float>(
      {2.7f, -2.7f, 0.5f, -0.5f, 1e10f, -1e10f, static_cast<float>(kNaN), static_cast<float>(kInf)},
      {8});
  Tensor y = run_op("cast", {x}, {{"dtype", std::string("int32")}});
  EXPECT_EQ(y.dtype(), DType::Int32);
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{2, -2, 0, 0, mx, mn, 0, mx}));
  Tensor u =
      run_op("cast", {tensor<double>({-3.5, 300, 255.9}, {3})}, {{"dtype", std::string("uint8")}});
  EXPECT_EQ(u.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 255}));
}

TEST(ElementwiseOps, CastToBoolIsNonzero) {
  Tensor x = tensor<float>({0.0f, -0.0f, -0.5f, 3.0f, static_cast<float>(kNaN)}, {5});
  Tensor y = run_op("cast", {x}, {{"dtype", std::string("bool")}});
  EXPECT_EQ(y.to_vector<bool>(), (std::vector<bool>{false, false, true, true, true}));
  Tensor i = run_op("cast", {tensor<int8_t>({0, -1, 2}, {3})}, {{"dtype", std::string("bool")}});
  EXPECT_EQ(i.to_vector<bool>(), (std::vector<bool>{false, true, true}));
}

TEST(ElementwiseOps, CastBetweenAllDtypesPreservesSmallValues) {
  const DType all[] = {DType::Bool,    DType::Int8,   DType::Int16,   DType::Int32,
                       DType::Int64,   DType::UInt8,  DType::Float16, DType::BFloat16,
                       DType::Float32, DType::Float64};
  for (DType from : all) {
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const bool boolish = from == DType::Bool || to == DType::Bool;
      Tensor x = tensor<double>(
                     boolish ? std::vector<double>{0, 1, 1} : std::vector<double>{0, 1, 7}, {3, 1})
                     .astype(from);
      Tensor y = run_op("cast", {x}, {{"dtype", std::string(dtype_name(to))}});
      EXPECT_EQ(y.dtype(), to);
      expect_values(y, x.to_vector<double>());
      EXPECT_FALSE(y.shares_storage(x));
    }
  }
}

TEST(ElementwiseOps, CastRoundsIntoNarrowFloatsAndWrapsIntegers) {
  Tensor h =
      run_op("cast", {tensor<int32_t>({2049, 70000}, {2})}, {{"dtype", std::string("float16")}});
  expect_values(h, {2048, kInf});  // 2049 rounds to even; 70000 is past half's range
  Tensor w = run_op("cast", {tensor<int32_t>({300, -129}, {2})}, {{"dtype", std::string("int8")}});
  EXPECT_EQ(w.to_vector<int8_t>(), (std::vector<int8_t>{44, 127}));
  Tensor i64 = run_op("cast", {tensor<int64_t>({(int64_t{1} << 53) + 1}, {1})},
                      {{"dtype", std::string("int64")}});
  EXPECT_EQ(i64.to_vector<int64_t>()[0], (int64_t{1} << 53) + 1);  // no detour through double
}

TEST(ElementwiseOps, CastNeedsAValidDtypeAttribute) {
  Tensor x = tensor<float>({1}, {1});
  expect_error([&] { run_op("cast", {x}); }, "dtype");
  expect_error([&] { run_op("cast", {x}, {{"dtype", std::string("float128")}}); }, "float128");
}

// ---------------------------------------------------------------------------------------------
// Binary: shapes

TEST(ElementwiseOps, BinaryShapeRuleBroadcastsSymbolically) {
  EXPECT_EQ(infer_op_shape("add", {{"N", 1, 3}, {4, 1}}), "[N, 4, 3]");
  EXPECT_EQ(infer_op_shape("mul", {{2, 3}, {3}}), "[2, 3]");
  EXPECT_EQ(infer_op_shape("sub", {{"N", 3}, {1}}), "[N, 3]");
  EXPECT_EQ(infer_op_shape("div", {{"N"}, {"N"}}), "[N]");
  EXPECT_EQ(infer_op_shape("pow", {{}, {"B", 5}}), "[B, 5]");
  EXPECT_EQ(infer_op_shape("less", {{1, "T"}, {"B", 1}}), "[B, T]");
  EXPECT_EQ(infer_op_shape("maximum", {{1}, {1}}), "[1]");
  EXPECT_EQ(infer_op_shape("minimum", {{0, 3}, {1, 3}}), "[0, 3]");
  EXPECT_EQ(infer_op_shape("equal", {{}, {}}), "[]");
}

TEST(ElementwiseOps, BinaryShapeRuleRejectsMismatchedSizes) {
  expect_error([] { infer_op_shape("add", {{2, 3}, {4}}); }, "do not broadcast");
  expect_error([] { infer_op_shape("greater", {{"N", 3}, {2, 1, 5}}); }, "sizes 3 and 5");
}

TEST(ElementwiseOps, BinaryKernelRejectsShapesThatDoNotBroadcastAtRunTime) {
  // Shape inference assumes two unknown symbols are equal; the kernel still checks.
  expect_error(
      [] {
        eval_only("add", {Tensor(DType::Float32, {2}), Tensor(DType::Float32, {3})});
      },
      "do not broadcast");
  expect_error(
      [] {
        eval_only("equal", {Tensor(DType::Int32, {2, 2}), Tensor(DType::Int32, {3})});
      },
      "equal");
}

// ---------------------------------------------------------------------------------------------
// Binary: values

TEST(ElementwiseOps, ArithmeticBroadcastsLikeNumPy) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 1, 3}, {4, 1}}, {{7, 13}, {13}}, {{5}, {5}},    {{1}, {3, 1, 2}},
      {{}, {2, 3}},        {{3, 1}, {}},    {{1, 1}, {1}}, {{0, 3}, {3}}};
  struct Case {
    const char* op;
    std::function<double(double, double)> f;
  };
  const std::vector<Case> cases = {
      {"add", std::plus<>{}},
      {"sub", std::minus<>{}},
      {"mul", std::multiplies<>{}},
      {"div", std::divides<>{}},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](double a, double b) { return std::min(a, b); }},
  };
  for (const auto& [sa, sb] : shapes) {
    Tensor a = random_tensor(sa, 1, 0.5, 2), b = random_tensor(sb, 2, -2, 2);
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.op) + " " + to_string(sa) + " " + to_string(sb));
      Tensor y = run_op(c.op, {a, b});
      ASSERT_EQ(y.shape(), ops::broadcast_shapes(sa, sb));
      expect_values(y, ref_broadcast({a, b}, y.shape(), [&](auto& v) { return c.f(v[0], v[1]); }),
                    1e-6, 1e-7);
      // Swapped operands exercise the other broadcast direction.
      Tensor z = run_op(c.op, {b, a});
      expect_values(z, ref_broadcast({b, a}, z.shape(), [&](auto& v) { return c.f(v[0], v[1]); }),
                    1e-6, 1e-7);
    }
  }
}

TEST(ElementwiseOps, BinaryPromotesDtypes) {
  struct Case {
    DType a, b, add, div;
  };
  const std::vector<Case> cases = {
      {DType::Int32, DType::Float32, DType::Float32, DType::Float32},
      {DType::Int8, DType::UInt8, DType::Int16, DType::Float32},
      {DType::Float16, DType::BFloat16, DType::Float32, DType::Float32},
      {DType::Bool, DType::Bool, DType::Bool, DType::Float32},
      {DType::Int64, DType::Int64, DType::Int64, DType::Float32},
      {DType::Float16, DType::Float16, DType::Float16, DType::Float16},
      {DType::Float32, DType::Float64, DType::Float64, DType::Float64},
      {DType::Bool, DType::Int16, DType::Int16, DType::Float32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.a)) + " " + std::string(dtype_name(c.b)));
    Tensor a = tensor<double>({1, 0, 1}, {3}).astype(c.a);
    Tensor b = tensor<double>({1}, {1}).astype(c.b);
    EXPECT_EQ(run_op("add", {a, b}).dtype(), c.add);
    EXPECT_EQ(run_op("mul", {a, b}).dtype(), c.add);
    EXPECT_EQ(run_op("pow", {a, b}).dtype(), c.add);
    EXPECT_EQ(run_op("maximum", {a, b}).dtype(), c.add);
    EXPECT_EQ(run_op("div", {a, b}).dtype(), c.div);
    EXPECT_EQ(run_op("less", {a, b}).dtype(), DType::Bool);
  }
  // Mixed int and float: the int operand is converted before the arithmetic.
  expect_values(run_op("add", {tensor<int32_t>({1, 2}, {2}), tensor<float>({0.5f}, {1})}),
                {1.5, 2.5});
  expect_values(run_op("mul", {tensor<uint8_t>({200}, {1}), tensor<int8_t>({-2}, {1})}), {-400});
}

TEST(ElementwiseOps, IntegerArithmetic) {
  Tensor a = tensor<int32_t>({7, -7, 2, 3}, {4});
  Tensor b = tensor<int32_t>({2, 2, 10, -1}, {4});
  EXPECT_EQ(run_op("add", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{9, -5, 12, 2}));
  EXPECT_EQ(run_op("sub", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{5, -9, -8, 4}));
  EXPECT_EQ(run_op("mul", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{14, -14, 20, -3}));
  // Integer pow computes in double and casts back: 3^-1 = 0.333 -> 0.
  EXPECT_EQ(run_op("pow", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{49, 49, 1024, 0}));
  Tensor d = run_op("div", {a, b});
  EXPECT_EQ(d.dtype(), DType::Float32);
  expect_values(d, {3.5, -3.5, 0.2, -3}, 1e-7);
  expect_values(run_op("div", {tensor<int64_t>({1, -1, 0}, {3}), tensor<int64_t>({0}, {1})}),
                {kInf, -kInf, kNaN});
  EXPECT_EQ(run_op("maximum", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{7, 2, 10, 3}));
  EXPECT_EQ(run_op("minimum", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{2, -7, 2, -1}));
}

TEST(ElementwiseOps, IntegerOverflowWraps) {
  Tensor i8 = tensor<int8_t>({100, -100}, {2});
  EXPECT_EQ(run_op("add", {i8, i8}).to_vector<int8_t>(), (std::vector<int8_t>{-56, 56}));
  Tensor i16 = tensor<int16_t>({-32768, 300}, {2});
  EXPECT_EQ(run_op("mul", {i16, i16}).to_vector<int16_t>(), (std::vector<int16_t>{0, 24464}));
  const int64_t mx = std::numeric_limits<int64_t>::max();
  Tensor i64 = tensor<int64_t>({mx}, {1});
  EXPECT_EQ(run_op("add", {i64, tensor<int64_t>({1}, {1})}).to_vector<int64_t>()[0],
            std::numeric_limits<int64_t>::min());
  Tensor u8 = tensor<uint8_t>({0}, {1});
  EXPECT_EQ(run_op("sub", {u8, tensor<uint8_t>({1}, {1})}).to_vector<uint8_t>()[0], 255);
  // Integer pow past the range saturates instead of hitting undefined behaviour.
  EXPECT_EQ(run_op("pow", {tensor<int32_t>({10}, {1}), tensor<int32_t>({20}, {1})})
                .to_vector<int32_t>()[0],
            std::numeric_limits<int32_t>::max());
}

TEST(ElementwiseOps, BoolArithmeticIsLogical) {
  Tensor a = tensor<bool>({true, true, false, false}, {4});
  Tensor b = tensor<bool>({true, false, true, false}, {4});
  EXPECT_EQ(run_op("add", {a, b}).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(run_op("mul", {a, b}).to_vector<bool>(),
            (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(run_op("maximum", {a, b}).to_vector<bool>(),
            (std::vector<bool>{true, true, true, false}));
  expect_error([&] { run_op("sub", {a, b}); }, "bool");
  expect_error([&] { eval_only("sub", {a, b}); }, "sub");
}

TEST(ElementwiseOps, HalfBFloat16AndFloat64Arithmetic) {
  Tensor a = tensor<double>({1.5, -2.25, 1000}, {3});
  Tensor b = tensor<double>({0.25}, {1});
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor y = run_op("add", {a.astype(dt), b.astype(dt)});
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, {1.75, -2.0, 1000.25}, dt == DType::BFloat16 ? 4e-3 : 1e-3);
    expect_values(run_op("div", {a.astype(dt), b.astype(dt)}), {6, -9, 4000}, 1e-3);
  }
  // float64 keeps double precision.
  Tensor x = tensor<double>({1.0}, {1}), e = tensor<double>({1e-15}, {1});
  EXPECT_EQ(run_op("add", {x, e}).to_vector<double>()[0], 1.0 + 1e-15);
}

TEST(ElementwiseOps, MaximumAndMinimumPropagateNaN) {
  Tensor a = tensor<float>({static_cast<float>(kNaN), 1, 2}, {3});
  Tensor b = tensor<float>({0, static_cast<float>(kNaN), 3}, {3});
  expect_values(run_op("maximum", {a, b}), {kNaN, kNaN, 3});
  expect_values(run_op("minimum", {a, b}), {kNaN, kNaN, 2});
  expect_values(run_op("maximum", {a.astype(DType::Float16), b.astype(DType::Float16)}),
                {kNaN, kNaN, 3});
}

// ---------------------------------------------------------------------------------------------
// Comparisons

TEST(ElementwiseOps, ComparisonsGiveBoolAndBroadcast) {
  Tensor a = tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor<float>({2.5f, 2.0f, 7.0f}, {3});
  struct Case {
    const char* op;
    std::function<bool(double, double)> f;
  };
  const std::vector<Case> cases = {
      {"equal", std::equal_to<>{}},  {"not_equal", std::not_equal_to<>{}},
      {"less", std::less<>{}},       {"less_equal", std::less_equal<>{}},
      {"greater", std::greater<>{}}, {"greater_equal", std::greater_equal<>{}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    Tensor y = run_op(c.op, {a, b});
    EXPECT_EQ(y.dtype(), DType::Bool);
    EXPECT_EQ(y.shape(), (Shape{2, 3}));
    expect_values(
        y, ref_broadcast({a, b}, {2, 3}, [&](auto& v) { return c.f(v[0], v[1]) ? 1.0 : 0.0; }));
    Tensor h = run_op(c.op, {a.astype(DType::BFloat16), b.astype(DType::Float16)});
    expect_values(h, y.to_vector<double>());
  }
  // int64 comparisons are exact (no float detour): 2^53 + 1 > 2^53.
  Tensor big = tensor<int64_t>({(int64_t{1} << 53) + 1}, {1});
  EXPECT_TRUE(
      run_op("greater", {big, tensor<int64_t>({int64_t{1} << 53}, {1})}).to_vector<bool>()[0]);
}

TEST(ElementwiseOps, ComparisonsWithNaN) {
  Tensor n = tensor<float>({static_cast<float>(kNaN)}, {1});
  EXPECT_FALSE(run_op("equal", {n, n}).to_vector<bool>()[0]);
  EXPECT_TRUE(run_op("not_equal", {n, n}).to_vector<bool>()[0]);
  EXPECT_FALSE(run_op("less_equal", {n, tensor<float>({1}, {1})}).to_vector<bool>()[0]);
  EXPECT_FALSE(run_op("greater", {n, tensor<float>({1}, {1})}).to_vector<bool>()[0]);
}

// ---------------------------------------------------------------------------------------------
// where

TEST(ElementwiseOps, WhereShapeRuleBroadcastsAllThree) {
  EXPECT_EQ(infer_op_shape("where", {{"N", 1}, {3}, {1}}), "[N, 3]");
  EXPECT_EQ(infer_op_shape("where", {{}, {2, 1}, {1, 4}}), "[2, 4]");
  EXPECT_EQ(infer_op_shape("where", {{1, 1}, {1}, {5}}), "[1, 5]");
  EXPECT_EQ(infer_op_shape("where", {{1}, {1}, {1}}), "[1]");
  EXPECT_EQ(infer_op_shape("where", {{"B", 1, 1}, {1, "T", 1}, {1, 1, 8}}), "[B, T, 8]");
  expect_error([] { infer_op_shape("where", {{2}, {3}, {3}}); }, "cond and a do not broadcast");
  expect_error([] { infer_op_shape("where", {{3}, {3}, {4, 2}}); }, "a and b do not broadcast");
}

TEST(ElementwiseOps, WhereSelectsAndPromotes) {
  Tensor cond = tensor<float>({1.0f, 0.0f, -2.0f}, {3, 1});  // nonzero is true
  Tensor a = tensor<int32_t>({10, 20}, {2});
  Tensor b = tensor<float>({0.5f}, {1});
  Tensor y = run_op("where", {cond, a, b});
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  expect_values(y, {10, 20, 0.5, 0.5, 10, 20});
  // Same shapes take the fast path; every dtype for a and b works.
  Tensor c = tensor<bool>({true, false, true}, {3});
  for (DType dt : {DType::Bool, DType::Int8, DType::UInt8, DType::Int64, DType::Float16,
                   DType::BFloat16, DType::Float64}) {
    Tensor x = tensor<double>({1, 1, 0}, {3}).astype(dt),
           z = tensor<double>({0, 0, 1}, {3}).astype(dt);
    Tensor w = run_op("where", {c, x, z});
    EXPECT_EQ(w.dtype(), dt);
    expect_values(w, {1, 0, 0});
  }
  Tensor e = run_op("where", {Tensor(DType::Bool, {0, 1}), a, b});
  EXPECT_EQ(e.shape(), (Shape{0, 2}));
}

TEST(ElementwiseOps, WhereKernelChecksBroadcastAtRunTime) {
  expect_error(
      [] {
        eval_only("where", {Tensor(DType::Bool, {2}), Tensor(DType::Float32, {3}),
                            Tensor(DType::Float32, {3})});
      },
      "where: cond");
}

TEST(ElementwiseOps, KernelsCheckArity) {
  Tensor x = tensor<float>({1}, {1});
  expect_error([&] { eval_only("add", {x}); }, "add: expects 2 inputs, got 1");
  expect_error([&] { eval_only("where", {x, x}); }, "where: expects 3 inputs");
  expect_error([&] { eval_only("exp", {x, x}); }, "exp: expects 1 inputs");
}

TEST(ElementwiseOps, ShapeRulesFlowBackwardAndAssumeUnknownPairsEqual) {
  // A unary op's output shape gives its input a shape (same_shape works both ways).
  Graph g;
  ValueId x = g.add_input("x");
  ValueId y = g.add_op("relu", {g.add_op("exp", {x})});
  infer_shapes(g, {{y, {"B", 7}, "", "test"}});
  EXPECT_EQ(to_string(g.value(x).shape), "[B, 7]");
  // Two unknown symbols broadcast against each other are taken as equal, and reported.
  Graph h;
  ValueId a = h.add_input("a"), b = h.add_input("b");
  ValueId s = h.add_op("add", {a, b});
  ShapeInferenceReport report = infer_shapes(h, {{a, {"N"}, "", "a"}, {b, {"M"}, "", "b"}});
  EXPECT_EQ(report.assumptions.size(), 1u);
  const std::string out = to_string(h.value(s).shape);
  EXPECT_TRUE(out == "[N]" || out == "[M]") << out;
  EXPECT_EQ(infer_op_shape("where", {{"N"}, {1}, {1}}), "[N]");
  EXPECT_EQ(infer_op_shape("where", {{"A"}, {"A"}, {"A"}}), "[A]");
}

TEST(ElementwiseOps, BinaryOperandWithoutRankIsAnError) {
  // Broadcasting cannot tell the rank of an operand nothing shapes ([4], [1, 4] and [N, 4] all
  // broadcast against [N, 4]), so inference reports it instead of guessing.
  Graph g;
  ValueId x = g.add_input("x"), b = g.add_input("b", ValueKind::Parameter);
  g.add_op("add", {x, b});
  expect_error([&] { infer_shapes(g, {{x, {"N", 4}, "", "test"}}); }, "Cannot infer shape for 'b'");
  // A shape given to the operand settles it.
  Graph h;
  ValueId hx = h.add_input("x"), hb = h.add_input("b");
  ValueId hy = h.add_op("sub", {hx, hb});
  infer_shapes(h, {{hx, {"N", 4}, "", "x"}, {hb, {"N", 1}, "", "b"}});
  EXPECT_EQ(to_string(h.value(hy).shape), "[N, 4]");
}
