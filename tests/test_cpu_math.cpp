// The CPU backend's vectorized float math (prelude ig_vexp, ig_vlog, ig_vtanh, ig_vsigmoid,
// ig_verf, ig_vgelu, ig_vgelu_tanh) through generated code: accuracy over a dense sweep of float32
// inputs against the exact result (ReferenceBackend in float64) and against the ReferenceBackend
// in float32, special values, float16 / bfloat16 exhaustively, and that no libm call is left.
//
// Errors are in ulp of the compared result, with the ulp floored at 2^-149 (the subnormal
// spacing), so near zero the measure is absolute. For gelu, whose formula cancels in 1 + erf
// (1 + tanh) for x < 0 in float exactly as libm's float result does, the error is divided by
// ulp(y) + 2^-24 |x| instead: the bound there reads |error| <= B (ulp(y) + 2^-24 |x|).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <iostream>
#include <limits>
#include <sstream>

#include "backends/cpu/toolchain.h"
#include "cpu_test_util.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "ir/op_registry.h"
#include "op_test_util.h"

using namespace ingot;

namespace {

const std::string& suite_cache_dir() {
  static ingot::testing::TempDir d("ingot-cpu-math");
  return d.path;
}
CpuBackend::CpuOptions cpu_options(const std::string& dir = suite_cache_dir()) {
  CpuBackend::CpuOptions o;
  o.cache_dir = dir;
  return o;
}

// The ops under test; bounds in ulp (see the file comment). `exact` is against the float64
// reference, `ref` against the float32 reference (whose libm float results are off by up to
// ~1-2 ulp themselves). prelude.cpp and README.md state the measured maxima (exhaustive over every
// 16th float bit pattern); these asserts leave a little room above them.
struct MathOp {
  std::string name, op;
  bool tanh_form = false;
  double exact, ref;
  bool gelu_floor = false;
};
const std::vector<MathOp>& math_ops() {
  static const std::vector<MathOp> ops = {
      {"exp", "exp", false, 1.5, 2.0},
      {"log", "log", false, 1.0, 2.0},
      {"tanh", "tanh", false, 1.5, 3.0},
      {"sigmoid", "sigmoid", false, 2.5, 4.0},
      {"erf", "erf", false, 1.5, 2.0},
      {"gelu", "gelu", false, 1.5, 2.0, true},
      {"gelu_tanh", "gelu", true, 1.5, 2.0, true},
  };
  return ops;
}

Graph math_graph(DType dt, int64_t n) {
  Graph g;
  ValueId x = g.add_input("x");
  g.value(x).dtype = dt;
  for (const MathOp& m : math_ops()) {
    Attrs a;
    if (m.op == "gelu") a = {{"approximate", std::string(m.tanh_form ? "tanh" : "none")}};
    g.set_output(m.name, g.add_op(m.op, {x}, a));
  }
  infer_shapes(g, {{x, {n}, "", "test input"}});
  infer_types(g);
  verify(g);
  return g;
}

float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Special values: NaN, inf, zeros (with their sign) and saturation must match the reference.
std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), FLT_MAX, -FLT_MAX,
                          FLT_MIN, -FLT_MIN, bitsf(1), bitsf(0x80000001u), bitsf(0x007fffffu), 1e-30f, -1e-30f,
                          1.0f, -1.0f, 88.7f, 88.72283f, 88.73f, 89.0f, 89.5f, 100.0f, 1e10f, -1e10f,
                          -87.3f, -103.9f, -103.972f, -104.0f, -104.5f, -200.0f, 0.625f, -0.625f,
                          0.927734375f, -0.927734375f, 4.0f, -4.0f, 9.0f, -9.0f, 1e20f, -1e20f};
  return v;
}

// 1e5+ float32 inputs: linear over [-20, 20], log-spaced magnitudes from the smallest subnormal
// to FLT_MAX of both signs, the exp overflow / underflow edges, and the special values.
std::vector<float> sweep_inputs() {
  std::vector<float> v;
  const int lin = 50001;
  for (int i = 0; i < lin; ++i) v.push_back(-20.0f + 40.0f * static_cast<float>(i) / (lin - 1));
  const int lg = 25000;
  for (int i = 0; i < lg; ++i) {
    const float m = static_cast<float>(std::exp(std::log(1.4e-45) + (std::log(3.4e38) - std::log(1.4e-45)) * i / (lg - 1)));
    v.push_back(m);
    v.push_back(-m);
  }
  for (int i = 0; i < 2000; ++i) v.push_back(88.0f + 1.5f * static_cast<float>(i) / 1999);
  for (int i = 0; i < 2000; ++i) v.push_back(-105.0f + 19.0f * static_cast<float>(i) / 1999);
  for (float s : special_values()) v.push_back(s);
  return v;
}

double ulp(double v, int min_exp, int mant) {
  const int e = v == 0 || !std::isfinite(v) ? min_exp : std::max(std::ilogb(std::fabs(v)), min_exp);
  return std::ldexp(1.0, e - mant);
}

struct Stats {
  double worst = 0, at = 0;
  int bad_special = 0;
  std::string first_bad;
};

// Error of `got` against `want` (both float results of input x) in the units above; specials
// (NaN, inf) must agree exactly, overflow to inf is allowed where `want` is at FLT_MAX.
void account(Stats& s, float x, double got, double want, bool gelu_floor, int min_exp, int mant, double max_finite) {
  std::ostringstream why;
  if (std::isnan(want) || std::isnan(got)) {
    if (std::isnan(want) != std::isnan(got)) why << "NaN mismatch";
  } else if (std::isinf(got) || std::isinf(want)) {
    const bool ok = (std::isinf(got) && std::fabs(want) >= max_finite && (got > 0) == (want > 0)) ||
                    (std::isinf(want) && std::fabs(got) >= max_finite && (got > 0) == (want > 0));
    if (!ok) why << "inf mismatch";
  } else {
    double unit = ulp(want, min_exp, mant);
    if (gelu_floor) unit += std::ldexp(std::fabs(static_cast<double>(x)), -24);
    const double e = std::fabs(got - want) / unit;
    if (e > s.worst) s.worst = e, s.at = x;
    return;
  }
  if (why.str().empty()) return;
  if (s.bad_special++ == 0) {
    why << " at x=" << x << ": got " << got << ", want " << want;
    s.first_bad = why.str();
  }
}

// ---------------------------------------------------------------------------------------------

TEST(CpuMath, Float32SweepAgainstExactAndReference) {
  const std::vector<float> xs = sweep_inputs();
  const int64_t n = static_cast<int64_t>(xs.size());
  ASSERT_GE(n, 100000);
  const Tensor x = Tensor::from_vector<float>(xs, {n});
  const Graph g32 = math_graph(DType::Float32, n), g64 = math_graph(DType::Float64, n);
  const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g32, {})->run(std::vector<Tensor>{x});
  const std::vector<Tensor> ref = ReferenceBackend().lower(g32, {})->run(std::vector<Tensor>{x});
  const std::vector<Tensor> exact = ReferenceBackend().lower(g64, {})->run(std::vector<Tensor>{x.astype(DType::Float64)});
  const std::vector<MathOp>& ops = math_ops();
  ASSERT_EQ(got.size(), ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    const float* y = got[k].data<float>();
    const float* r = ref[k].data<float>();
    const double* e = exact[k].data<double>();
    Stats se, sr;
    for (int64_t i = 0; i < n; ++i) {
      account(se, xs[i], y[i], e[i], ops[k].gelu_floor, -126, 23, FLT_MAX);
      account(sr, xs[i], y[i], r[i], ops[k].gelu_floor, -126, 23, FLT_MAX);
    }
    std::cout << "[ cpu math ] " << ops[k].name << ": max error " << se.worst << " ulp vs exact (at x=" << se.at
              << "), " << sr.worst << " ulp vs float32 reference (at x=" << sr.at << ")\n";
    EXPECT_LE(se.worst, ops[k].exact) << ops[k].name << " at x=" << se.at;
    EXPECT_LE(sr.worst, ops[k].ref) << ops[k].name << " at x=" << sr.at;
    EXPECT_EQ(se.bad_special, 0) << ops[k].name << ": " << se.first_bad;
    EXPECT_EQ(sr.bad_special, 0) << ops[k].name << ": " << sr.first_bad;
  }
}

TEST(CpuMath, SpecialValuesMatchReference) {
  const std::vector<float> xs = special_values();
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = Tensor::from_vector<float>(xs, {n});
  const Graph g = math_graph(DType::Float32, n);
  const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g, {})->run(std::vector<Tensor>{x});
  const std::vector<Tensor> ref = ReferenceBackend().lower(g, {})->run(std::vector<Tensor>{x});
  for (size_t k = 0; k < math_ops().size(); ++k) {
    for (int64_t i = 0; i < n; ++i) {
      const float y = got[k].data<float>()[i], r = ref[k].data<float>()[i];
      const std::string what = math_ops()[k].name + "(" + std::to_string(xs[i]) + "): got " +
                               std::to_string(y) + ", want " + std::to_string(r);
      if (std::isnan(r)) {
        EXPECT_TRUE(std::isnan(y)) << what;
      } else if (std::isinf(r)) {
        EXPECT_EQ(y, r) << what;  // overflow, log(0), log(inf), gelu(inf)
      } else if (r == 0.0f) {
        // underflow and exact zeros: zero of the same sign (or the smallest subnormal next to it)
        EXPECT_LE(std::fabs(y), bitsf(1)) << what;
        EXPECT_EQ(std::signbit(y), std::signbit(r)) << what;
      } else if (std::fabs(r) == 1.0f) {
        EXPECT_LE(std::fabs(y - r), 6e-8f) << what;  // saturation (one ulp below 1 at most)
      } else {
        EXPECT_FALSE(std::isnan(y) || std::isinf(y)) << what;
      }
    }
  }
}

// float16 and bfloat16 compute in float and round: every one of the 65536 bit patterns must
// land on the reference's value or a neighbour (one ulp of the storage type; gelu also
// 2^-21 |x|, the float cancellation error above, which the coarser rounding can expose).
TEST(CpuMath, HalfAndBFloat16Exhaustive) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    const bool half = dt == DType::Float16;
    Tensor x(dt, {65536});
    for (uint32_t i = 0; i < 65536; ++i) {
      if (half) x.data<Half>()[i].bits = static_cast<uint16_t>(i);
      else x.data<BFloat16>()[i].bits = static_cast<uint16_t>(i);
    }
    const Graph g = math_graph(dt, 65536);
    const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g, {})->run(std::vector<Tensor>{x});
    const std::vector<Tensor> ref = ReferenceBackend().lower(g, {})->run(std::vector<Tensor>{x});
    const Tensor xf = x.astype(DType::Float32);
    for (size_t k = 0; k < math_ops().size(); ++k) {
      const Tensor y = got[k].astype(DType::Float32), r = ref[k].astype(DType::Float32);
      int bad = 0;
      for (int64_t i = 0; i < 65536; ++i) {
        const float xi = xf.data<float>()[i], yi = y.data<float>()[i], ri = r.data<float>()[i];
        bool ok;
        if (std::isnan(ri) || std::isnan(yi)) {
          ok = std::isnan(ri) && std::isnan(yi);
        } else if (std::isinf(ri) || std::isinf(yi)) {
          ok = yi == ri;
        } else {
          double tol = half ? ulp(ri, -14, 10) : ulp(ri, -126, 7);
          if (math_ops()[k].gelu_floor) tol += std::ldexp(std::fabs(static_cast<double>(xi)), -21);
          ok = std::fabs(static_cast<double>(yi) - ri) <= tol;
        }
        if (!ok && bad++ < 3)
          ADD_FAILURE() << dtype_name(dt) << " " << math_ops()[k].name << "(" << xi << "): got " << yi
                        << ", want " << ri;
      }
      EXPECT_EQ(bad, 0) << dtype_name(dt) << " " << math_ops()[k].name;
    }
  }
}

// float32 gelu compiles to the prelude's ig_vgelu: no libm erf in the kernels, none in the
// vectorized math, none imported by the built library. float64 keeps libm.
TEST(CpuMath, GeluFloat32SourceHasNoLibmErf) {
  ingot::testing::TempDir dir("ingot-cpu-math");
  const std::string path = dir.path + "/gelu.cpp";
  CompileOptions o;
  o.shapes = {{"input", {8, 4096}}};
  o.file_path = path;
  compile(Gelu(), CpuBackend(cpu_options(dir.path)), o);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string src = ss.str();
  ASSERT_NE(src.find("// ---- kernels ----"), std::string::npos) << src;
  const std::string kernels = src.substr(src.find("// ---- kernels ----"));
  if (std::getenv("INGOT_CPU_TEST_DUMP")) std::cerr << kernels;
  EXPECT_NE(kernels.find("ig_vgelu("), std::string::npos) << kernels;
  for (const char* call : {"std::erf", "erff", "erf(", "ig_gelu<"}) EXPECT_EQ(kernels.find(call), std::string::npos) << call << "\n" << kernels;
  const size_t b = src.find("// ---- vectorized float math ----"), e = src.find("// ---- end vectorized float math ----");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string vm = src.substr(b, e - b);
  for (const char* call : {"std::erf", "erff(", "std::exp", "expf(", "std::log", "logf(", "std::tanh", "tanhf(", "::erf(", "::exp("})
    EXPECT_EQ(vm.find(call), std::string::npos) << call;
  // The built library imports no float libm transcendental.
  int libs = 0;
  for (const auto& ent : std::filesystem::directory_iterator(dir.path)) {
    if (ent.path().extension() != ".so") continue;
    ++libs;
    std::ifstream lib(ent.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(lib)), std::istreambuf_iterator<char>());
    for (const char* sym : {"erff", "erf", "expf", "exp", "tanhf"})
      EXPECT_EQ(bytes.find(std::string(1, '\0') + sym + std::string(1, '\0')), std::string::npos) << sym;
  }
  EXPECT_GE(libs, 1);

  // float64 still goes through libm.
  Graph g;
  ValueId x = g.add_input("x");
  g.value(x).dtype = DType::Float64;
  g.set_output("y", g.add_op("gelu", {x}));
  infer_shapes(g, {{x, {4}, "", "test input"}});
  infer_types(g);
  const std::string src64 = CpuBackend(cpu_options()).lower(g, {})->source();
  const std::string k64 = src64.substr(src64.find("// ---- kernels ----"));
  EXPECT_NE(k64.find("ig_gelu<double>("), std::string::npos) << k64;
}

// Every kernel of `g`'s generated code holds a loop the compiler vectorizes, with the backend's
// own flags: the build is repeated with the compiler's vectorization report (GCC
// -fopt-info-vec-optimized, clang -Rpass=loop-vectorize) and each kernel's element loop must be
// reported. This fails if a flag (such as -fno-trapping-math) or a prelude or code generator
// change leaves the loops scalar again. Returns the number of kernels checked.
int expect_every_kernel_vectorizes(const Graph& g) {
  ingot::testing::TempDir dir("ingot-cpu-math-vec");
  CpuBackend::CpuOptions o = cpu_options(dir.path);
  const std::string src = CpuBackend(o).lower(g, {})->source();
  const std::string report = cpu_test::vectorization_report(src, dir.path + "/math.cpp");
  // Line numbers the report gives as vectorized loops (GCC names a loop by its body's first line).
  std::set<int> vectorized_lines;
  std::istringstream report_lines(report);
  for (std::string r; std::getline(report_lines, r);) {
    const size_t at = r.find("math.cpp:");
    if (at != std::string::npos && r.find("vectorized") != std::string::npos)
      vectorized_lines.insert(std::atoi(r.c_str() + at + 9));
  }
  // Each kernel `static int k<i>_...` up to its closing brace must hold a vectorized loop.
  std::istringstream lines(src);
  std::string line, kernel;
  int number = 0, first = 0, checked = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.rfind("static int k", 0) == 0) kernel = line.substr(11, line.find('(') - 11), first = number;
    if (kernel.empty() || line != "}") continue;
    const auto hit = vectorized_lines.lower_bound(first);
    EXPECT_TRUE(hit != vectorized_lines.end() && *hit < number)
        << kernel << " (lines " << first << "-" << number << ") has no vectorized loop:\n" << report;
    ++checked;
    kernel.clear();
  }
  return checked;
}

TEST(CpuMath, Float32MathKernelsVectorize) {
  EXPECT_EQ(expect_every_kernel_vectorizes(math_graph(DType::Float32, 4096)), static_cast<int>(math_ops().size()));
}

// float16 / bfloat16 kernels load and store raw uint16_t, so their loops vectorize too: the math
// functions, and arithmetic with casts between the storage types.
TEST(CpuMath, HalfAndBFloat16KernelsVectorize) {
  for (DType dt : {DType::Float16, DType::BFloat16})
    EXPECT_EQ(expect_every_kernel_vectorizes(math_graph(dt, 4096)), static_cast<int>(math_ops().size()))
        << dtype_name(dt);
  Graph g;
  const ValueId h = g.add_input("h"), b = g.add_input("b");
  g.value(h).dtype = DType::Float16;
  g.value(b).dtype = DType::BFloat16;
  const ValueId hb = g.add_op("cast", {b}, {{"dtype", std::string("float16")}});
  g.set_output("mul_add", g.add_op("add", {g.add_op("mul", {h, hb}), h}));
  g.set_output("relu", g.add_op("relu", {b}));
  g.set_output("to_f32", g.add_op("cast", {h}, {{"dtype", std::string("float32")}}));
  infer_shapes(g, {{h, {4096}, "", "h"}, {b, {4096}, "", "b"}});
  infer_types(g);
  EXPECT_EQ(expect_every_kernel_vectorizes(g), 3);
}

}  // namespace

// The generated float16 / bfloat16 conversions (branch-free, so their loops vectorize) agree bit
// for bit with ingot::Half / ingot::BFloat16: every storage pattern to float, and one float in
// every 2^12 bit patterns (every binade, rounding ties, NaN, inf, subnormals) back.
TEST(CpuMath, HalfAndBFloat16ConversionsAreExact) {
  const int64_t n16 = 65536, n32 = int64_t{1} << 20;
  Graph g;
  const ValueId h = g.add_input("h"), b = g.add_input("b"), f = g.add_input("f");
  g.value(h).dtype = DType::Float16;
  g.value(b).dtype = DType::BFloat16;
  g.value(f).dtype = DType::Float32;
  g.set_output("h2f", g.add_op("cast", {h}, {{"dtype", std::string("float32")}}));
  g.set_output("b2f", g.add_op("cast", {b}, {{"dtype", std::string("float32")}}));
  g.set_output("f2h", g.add_op("cast", {f}, {{"dtype", std::string("float16")}}));
  g.set_output("f2b", g.add_op("cast", {f}, {{"dtype", std::string("bfloat16")}}));
  infer_shapes(g, {{h, {n16}, "", "h"}, {b, {n16}, "", "b"}, {f, {n32}, "", "f"}});
  infer_types(g);
  Tensor th(DType::Float16, {n16}), tb(DType::BFloat16, {n16}), tf(DType::Float32, {n32});
  for (int64_t i = 0; i < n16; ++i) {
    th.data<Half>()[i].bits = static_cast<uint16_t>(i);
    tb.data<BFloat16>()[i].bits = static_cast<uint16_t>(i);
  }
  for (int64_t i = 0; i < n32; ++i) {
    const uint32_t bits = static_cast<uint32_t>(i) << 12 | static_cast<uint32_t>(i & 0xfff);
    std::memcpy(&tf.data<float>()[i], &bits, 4);
  }
  const std::vector<Tensor> in = {th, tb, tf};
  const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g, {})->run(in);
  const std::vector<Tensor> ref = ReferenceBackend().lower(g, {})->run(in);
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].nbytes(), ref[k].nbytes());
    const size_t w = dtype_size(got[k].dtype());
    int bad = 0;
    for (int64_t i = 0; i < got[k].numel(); ++i)
      if (std::memcmp(static_cast<const char*>(got[k].raw_data()) + i * w,
                      static_cast<const char*>(ref[k].raw_data()) + i * w, w) != 0 && bad++ < 3)
        ADD_FAILURE() << g.outputs()[k].first << " element " << i << " differs";
    EXPECT_EQ(bad, 0) << g.outputs()[k].first;
  }
}

// Each op of a fused elementwise kernel rounds its result before the next op reads it, as the
// reference does: no product is contracted into the following add. Contracted, a * b - a * b was
// the product's rounding error instead of 0, a * b + (-inf) stayed -inf where the overflowing
// product should have made it NaN, and log(x) - exp(log(x)) at x = +inf was +inf instead of NaN
// (program fuzzer, seed 270069). Products and sums bit-exact against the reference; log and exp
// within their few ulp, with the same special values.
TEST(CpuMath, EachOpRoundsItsResultBeforeTheNextOpReadsIt) {
  const int64_t n = 67;
  std::vector<float> a(n), b(n), c(n), x(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 1.0f + 0.123456789f * static_cast<float>(i);
    b[i] = 3.0f - 0.0987654321f * static_cast<float>(i);
    c[i] = i % 3 == 0 ? -std::numeric_limits<float>::infinity() : 1.5f;
    x[i] = i % 4 == 0 ? std::numeric_limits<float>::infinity() : 0.75f * static_cast<float>(i);
  }
  for (int64_t i = 0; i < n; i += 5) a[i] = b[i] = 3e20f;  // a * b overflows
  Graph g;
  auto input = [&](const char* name) {
    const ValueId v = g.add_input(name);
    g.value(v).dtype = DType::Float32;
    return v;
  };
  const ValueId va = input("a"), vb = input("b"), vc = input("c"), vx = input("x");
  const ValueId ab = g.add_op("mul", {va, vb});
  g.set_output("cancel", g.add_op("sub", {ab, g.add_op("mul", {va, vb})}));
  g.set_output("overflow_plus_c", g.add_op("add", {ab, vc}));
  const ValueId lx = g.add_op("log", {vx});
  g.set_output("log_minus_exp", g.add_op("sub", {lx, g.add_op("exp", {lx})}));
  std::vector<ShapeConstraint> cs;
  for (ValueId v : {va, vb, vc, vx}) cs.push_back({v, {n}, "", "test"});
  infer_shapes(g, cs);
  infer_types(g);
  const std::vector<Tensor> in = {Tensor::from_vector<float>(a, {n}), Tensor::from_vector<float>(b, {n}),
                                  Tensor::from_vector<float>(c, {n}), Tensor::from_vector<float>(x, {n})};
  const std::vector<Tensor> got = CpuBackend(cpu_options()).lower(g, {})->run(in);
  const std::vector<Tensor> ref = ReferenceBackend().lower(g, {})->run(in);
  for (size_t k = 0; k < got.size(); ++k)
    for (int64_t i = 0; i < n; ++i) {
      const float y = got[k].data<float>()[i], r = ref[k].data<float>()[i];
      const bool transcendental = g.outputs()[k].first == "log_minus_exp";
      EXPECT_TRUE(std::isnan(r)                         ? std::isnan(y)
                  : transcendental && std::isfinite(r) ? std::fabs(y - r) <= 4e-7 * std::fabs(r)
                                                       : y == r)
          << g.outputs()[k].first << " element " << i << ": got " << y << ", reference " << r;
    }
}
