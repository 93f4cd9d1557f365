// compile(fn): compiled equals uncompiled, the signature cache (compile_count proves when a
// trace is built), shapeless, captured state, nesting, disabling, and the placeholder error.
#include <gtest/gtest.h>

#include <cmath>

#include "array_mlp.h"
#include "ingot/cpu_backend.h"
#include "ingot/function_compile.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using testing::Contains;
using testing::error_of;
using testing::random_tensor;

// Every test starts from a known configuration: builds on the reference backend (fast; the
// counters are what these tests check) unless a test asks for the CPU backend.
class FunctionCompile : public ::testing::Test {
 protected:
  void SetUp() override { use_backend(std::make_shared<ReferenceBackend>()); }
  void TearDown() override {
    enable_compile();
    set_compile_config(CompileConfig::from_env());
  }
  static void use_backend(std::shared_ptr<const Backend> b) {
    CompileConfig c;
    c.backend = std::move(b);
    set_compile_config(std::move(c));
  }
};

Array gelu_erf(const Array& x) { return x * 0.5f * (1.0f + erf(x / std::sqrt(2.0f))); }

TEST_F(FunctionCompile, CpuCompiledEqualsUncompiledOnRandomInputs) {
  use_backend(std::make_shared<CpuBackend>());
  auto f = compile([](const Array& x, const Array& w) { return softmax(matmul(gelu_erf(x), w) * 0.25f, -1); });
  for (uint64_t seed = 0; seed < 3; ++seed) {
    Array x(random_tensor({4, 8}, seed)), w(random_tensor({8, 3}, seed + 10));
    Array got = f(x, w);
    Array want = softmax(matmul(gelu_erf(x), w) * 0.25f, -1);
    EXPECT_TRUE(allclose(got.tensor(), want.tensor(), 1e-5, 1e-6)) << max_abs_diff(got.tensor(), want.tensor());
  }
}

TEST_F(FunctionCompile, CacheKeysOnShapeDtypeAndArity) {
  auto f = compile([](const std::vector<Array>& xs) {
    Array s = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) s = s + xs[i];
    return exp(s);
  });
  const int c0 = compile_count();
  Array a = zeros({2, 3}), b = ones({2, 3});
  f(std::vector<Array>{a, b});
  EXPECT_EQ(compile_count(), c0 + 1);
  Tensor r = f(std::vector<Array>{b, a}).tensor();  // same signature: cached
  EXPECT_EQ(compile_count(), c0 + 1);
  EXPECT_TRUE(allclose(r, Tensor::full(DType::Float32, {2, 3}, std::exp(1.0))));
  f(std::vector<Array>{zeros({4, 3}), zeros({4, 3})});  // new shape
  EXPECT_EQ(compile_count(), c0 + 2);
  f(std::vector<Array>{zeros({2, 3}, DType::Float64), zeros({2, 3}, DType::Float64)});  // new dtype
  EXPECT_EQ(compile_count(), c0 + 3);
  f(std::vector<Array>{a, b, a});  // new arity
  EXPECT_EQ(compile_count(), c0 + 4);
  f(std::vector<Array>{a, b});  // every signature stays cached
  f(std::vector<Array>{zeros({4, 3}), zeros({4, 3})});
  EXPECT_EQ(compile_count(), c0 + 4);
}

Array plain_function(const Array& x) { return tanh(x) * 3.0f; }

TEST_F(FunctionCompile, SameFunctionSharesItsCacheAFreshCapturingLambdaDoesNot) {
  Array x = ones({3});
  const int c0 = compile_count();
  compile(plain_function)(x);
  compile(plain_function)(x);  // the same function pointer: one cache
  EXPECT_EQ(compile_count(), c0 + 1);
  auto stateless = [](const Array& v) { return v + 1.0f; };
  compile(stateless)(x);
  compile(stateless)(x);  // a stateless callable type: one cache
  EXPECT_EQ(compile_count(), c0 + 2);
  // The documented pitfall: a lambda with captures built anew each iteration recompiles.
  for (int i = 0; i < 3; ++i) {
    const float k = static_cast<float>(i);
    Array y = compile([k](const Array& v) { return v * k; })(x);
    EXPECT_FLOAT_EQ(y.to_vector<float>()[0], k);
  }
  EXPECT_EQ(compile_count(), c0 + 5);
}

// A new signature retraces and reruns the passes; the system compiler runs only for an optimized
// graph the backend has not built before (its cache is keyed by the graph, not by the function).
TEST_F(FunctionCompile, ARecompileRunsOnlyTheStagesThatMustRerun) {
  testing::TempDir cache;
  CpuBackend::CpuOptions o;
  o.cache_dir = cache.path;
  use_backend(std::make_shared<CpuBackend>(o));
  auto scaled_tanh = [](float k) { return compile([k](const Array& v) { return tanh(v) * k; }); };
  const int traces = compile_count(), builds = CpuBackend::compile_count();
  Array x(random_tensor({2, 3}, 1));
  scaled_tanh(2.0f)(x);
  EXPECT_EQ(compile_count(), traces + 1);
  EXPECT_EQ(CpuBackend::compile_count(), builds + 1);
  Array again = scaled_tanh(2.0f)(x);  // a fresh cache (the lambda pitfall): traced again, not rebuilt
  EXPECT_EQ(compile_count(), traces + 2);
  EXPECT_EQ(CpuBackend::compile_count(), builds + 1);
  EXPECT_TRUE(allclose(again.tensor(), (tanh(x) * 2.0f).tensor(), 1e-6, 1e-6));
  auto f = scaled_tanh(3.0f);
  f(x);
  f(zeros({4, 3}));  // a new shape: every stage
  EXPECT_EQ(compile_count(), traces + 4);
  EXPECT_EQ(CpuBackend::compile_count(), builds + 3);
  f(x);  // both signatures stay cached: nothing runs but the executable
  EXPECT_EQ(compile_count(), traces + 4);
  EXPECT_EQ(CpuBackend::compile_count(), builds + 3);
}

TEST_F(FunctionCompile, ShapelessCompilesOnceForAnyShapeOfTheSameRank) {
  use_backend(std::make_shared<CpuBackend>());
  auto f = compile([](const Array& x) { return sum(relu(x) * 2.0f, {1}); }, {.shapeless = true});
  const int c0 = compile_count();
  for (int64_t n : {2, 5, 9}) {
    Array x(random_tensor({n, 3}, static_cast<uint64_t>(n)));
    Array y = f(x);
    EXPECT_EQ(y.shape(), (Shape{n}));
    EXPECT_TRUE(allclose(y.tensor(), sum(relu(x) * 2.0f, {1}).tensor(), 1e-6, 1e-6));
  }
  EXPECT_EQ(compile_count(), c0 + 1);
  f(zeros({2, 3, 4}));  // a new rank is a new signature
  EXPECT_EQ(compile_count(), c0 + 2);
}

// A size-1 dimension may broadcast, which a free symbol cannot express: it stays 1 in the trace
// and is part of the signature (the CPU backend once rejected [3, 1] + [3, 4] on the first call,
// naming an internal symbol, because both dims had become one symbol).
TEST_F(FunctionCompile, ShapelessKeepsSizeOneDimensionsForBroadcasting) {
  use_backend(std::make_shared<CpuBackend>());
  auto add = compile([](const Array& x, const Array& y) { return x + y; }, {.shapeless = true});
  const int c0 = compile_count();
  for (int64_t n : {3, 5}) {
    Array x(random_tensor({n, 1}, 1)), y(random_tensor({n, 4}, 2));
    Array got = add(x, y);
    EXPECT_EQ(got.shape(), (Shape{n, 4}));
    EXPECT_TRUE(allclose(got.tensor(), (x + y).tensor(), 1e-6, 1e-6));
  }
  EXPECT_EQ(compile_count(), c0 + 1);
  Array x(random_tensor({3, 4}, 3)), y(random_tensor({3, 4}, 4));
  EXPECT_TRUE(allclose(add(x, y).tensor(), (x + y).tensor(), 1e-6, 1e-6));  // no size-1 dim: a signature of its own
  EXPECT_EQ(compile_count(), c0 + 2);
  const std::string msg = error_of([&] { add(zeros({3, 5}), zeros({3, 4})).tensor(); });
  EXPECT_TRUE(Contains(msg, "do not broadcast (sizes 5 and 4")) << msg;
}

TEST_F(FunctionCompile, ShapelessErrorsWhereTheGraphFixesADimension) {
  auto f = compile([](const Array& x) { return reshape(x, {6}); }, {.shapeless = true});
  const std::string msg = error_of([&] { f(zeros({2, 3})); });
  EXPECT_TRUE(Contains(msg, "compile(shapeless=true)")) << msg;
  EXPECT_TRUE(Contains(msg, "does not allow other input shapes")) << msg;
  auto h = compile([](const Array& x) { return matmul(x, ones({4, 3})); }, {.shapeless = true});
  const std::string fixed = error_of([&] { h(zeros({2, 4})); });
  EXPECT_TRUE(Contains(fixed, "dimension 1 of argument 0 (size 4 in this call) cannot vary")) << fixed;
  auto g = compile([](const Array& x) { return reshape(x, {-1}); }, {.shapeless = true});
  EXPECT_EQ(g(zeros({2, 3})).shape(), (Shape{6}));  // -1 keeps the dims free
}

TEST_F(FunctionCompile, ReadingAPlaceholderWhileTracingIsAClearError) {
  auto f = compile([](const Array& x) { return x * x.item<float>(); });
  const std::string msg = error_of([&] { f(ones({2})); });
  EXPECT_TRUE(Contains(msg, "placeholders")) << msg;
  EXPECT_TRUE(Contains(msg, "shape [2], float32")) << msg;
  auto g = compile([](const Array& x) {
    Array y = x + 1.0f;
    eval(y);
    return y;
  });
  EXPECT_TRUE(Contains(error_of([&] { g(ones({2})); }), "placeholders"));
}

// An array saved from inside a trace holds placeholders forever. Using it later once crashed a
// shapeless compile (an input beyond the trace's own was indexed) and failed an unshapeless one
// with vector::_M_range_check; reading it blamed a trace that was no longer running.
TEST_F(FunctionCompile, AnArrayThatEscapedATraceIsAClearError) {
  Array leaked;
  auto f = compile([&](const Array& x) {
    leaked = x * 2.0f;
    return x;
  });
  f(ones({3}));
  EXPECT_TRUE(Contains(error_of([&] { (leaked + 1.0f).tensor(); }), "was read after that trace ended"));
  for (bool shapeless : {false, true}) {
    auto g = compile([&](const Array& x) { return x + leaked; }, {.shapeless = shapeless});
    const std::string msg = error_of([&] { g(ones({3})); });
    EXPECT_TRUE(Contains(msg, "was used by a compiled function after that trace ended")) << msg;
    EXPECT_TRUE(Contains(msg, "list the variable in compile's `outputs`")) << msg;
  }
}

TEST_F(FunctionCompile, CapturedStateUpdatesAcrossCalls) {
  Array total = zeros({2});
  Array calls(Tensor::scalar<int64_t>(0));
  auto accumulate = compile(
      [&](const Array& x) {
        total = total + x;
        calls = calls + Array(Tensor::scalar<int64_t>(1));
        return sum(total);
      },
      {.inputs = {&total, &calls}, .outputs = {&total, &calls}});
  const int c0 = compile_count();
  Array s;
  for (int i = 1; i <= 3; ++i) s = accumulate(full({2}, i));
  EXPECT_EQ(compile_count(), c0 + 1);
  EXPECT_EQ(total.to_vector<float>(), (std::vector<float>{6, 6}));
  EXPECT_EQ(calls.item<int64_t>(), 3);
  EXPECT_FLOAT_EQ(s.item<float>(), 12.0f);
}

TEST_F(FunctionCompile, RandomStateAsCapturedStateDrawsFreshNumbersPerCall) {
  auto noisy = compile([](const Array& x) { return x + random::normal({4}); },
                       {.inputs = {&random::state()}, .outputs = {&random::state()}});
  random::seed(11);
  Tensor a = noisy(zeros({4})).tensor(), b = noisy(zeros({4})).tensor();
  EXPECT_FALSE(equal(a, b));
  random::seed(11);  // the same draws as the uncompiled function
  disable_compile();
  Tensor a2 = noisy(zeros({4})).tensor();
  enable_compile();
  EXPECT_TRUE(allclose(a, a2));
}

TEST_F(FunctionCompile, MlpTrainingStepCompiledMatchesUncompiled) {
  use_backend(std::make_shared<CpuBackend>());
  testing::MlpParams eager = testing::init_mlp(20, 16, 5, 3), compiled = eager;
  Array x(random_tensor({8, 20}, 4));
  Array labels(std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2}, {8});
  Array y = one_hot(labels, 5);
  auto step = compile([&](const Array& xb, const Array& yb) { return testing::mlp_sgd_step(compiled, xb, yb, 0.1f); },
                      {.inputs = compiled.all(), .outputs = compiled.all()});
  const int c0 = compile_count();
  float first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    Array l1 = testing::mlp_sgd_step(eager, x, y, 0.1f);
    eval({eager.w1, eager.b1, eager.w2, eager.b2, l1});
    Array l2 = step(x, y);
    EXPECT_NEAR(l1.item<float>(), l2.item<float>(), 1e-5);
    if (i == 0) first = l2.item<float>();
    last = l2.item<float>();
  }
  EXPECT_EQ(compile_count(), c0 + 1);
  EXPECT_LT(last, first);  // it trains
  for (auto [e, c] : {std::pair{&eager.w1, &compiled.w1}, {&eager.b1, &compiled.b1}, {&eager.w2, &compiled.w2},
                      {&eager.b2, &compiled.b2}})
    EXPECT_TRUE(allclose(e->tensor(), c->tensor(), 1e-5, 1e-6)) << max_abs_diff(e->tensor(), c->tensor());
}

TEST_F(FunctionCompile, NestedCompiledFunctionsInline) {
  auto inner = compile([](const Array& x) { return relu(x) + 1.0f; });
  auto outer = compile([&](const Array& x) { return inner(x) * inner(-x); });
  const int c0 = compile_count();
  Array x(random_tensor({5}, 9));
  Tensor got = outer(x).tensor();
  EXPECT_EQ(compile_count(), c0 + 1);  // only the outer function was built
  EXPECT_TRUE(allclose(got, ((relu(x) + 1.0f) * (relu(-x) + 1.0f)).tensor()));
}

TEST_F(FunctionCompile, DisableCompileRunsUncompiled) {
  auto f = compile([](const Array& x) { return x * 2.0f; });
  const int c0 = compile_count();
  disable_compile();
  EXPECT_EQ(f(ones({2})).to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(compile_count(), c0);
  enable_compile();
  f(ones({2}));
  EXPECT_EQ(compile_count(), c0 + 1);
  CompileConfig c = CompileConfig::from_env([](const char* name) -> const char* {
    return std::string(name) == "INGOT_DISABLE_COMPILE" ? "1" : nullptr;
  });
  EXPECT_TRUE(c.disable_compile);
  set_compile_config(c);
  f(ones({7}));
  EXPECT_EQ(compile_count(), c0 + 1);
}

TEST_F(FunctionCompile, DebugLogNamesEachNewSignature) {
  std::vector<std::string> lines;
  CompileConfig c;
  c.backend = std::make_shared<ReferenceBackend>();
  c.debug = true;
  c.log_sink = [&](const std::string& line) { lines.push_back(line); };
  set_compile_config(c);
  auto f = compile([](const Array& x) { return x + 1.0f; });
  f(zeros({2, 3}));
  f(zeros({2, 3}));  // a cache hit logs nothing
  f(zeros({4}, DType::Float64));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(Contains(lines[0], "[COMPILE] compiled function for float32[2, 3] (1 arguments, 0 captured; signature 1 "
                                 "of this function) in "));
  EXPECT_TRUE(Contains(lines[1], "for float64[4] (1 arguments, 0 captured; signature 2 of this function)"));
}

TEST(CompileConfig, ReadsTheEnvironmentAndRejectsBadValues) {
  auto env = [](std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  CompileConfig c = CompileConfig::from_env(env({{"INGOT_AUTO_COMPILE", "1"}, {"INGOT_AUTO_COMPILE_THRESHOLD", "4"},
                                                 {"INGOT_DEBUG_COMPILE", "true"}, {"INGOT_COMPILE", "0"},
                                                 {"INGOT_INSTRUCTION_LOG", "/tmp/x.log"}}));
  EXPECT_TRUE(c.auto_compile);
  EXPECT_EQ(c.auto_compile_threshold, 4);
  EXPECT_TRUE(c.debug);
  EXPECT_FALSE(c.compile_all);
  EXPECT_EQ(c.instruction_log, "/tmp/x.log");
  testing::expect_error([&] { CompileConfig::from_env(env({{"INGOT_AUTO_COMPILE_THRESHOLD", "ten"}})); },
                        "INGOT_AUTO_COMPILE_THRESHOLD='ten'");
  testing::expect_error([&] { CompileConfig::from_env(env({{"INGOT_AUTO_COMPILE_THRESHOLD", "0"}})); }, ">= 1");
  testing::expect_error([&] { CompileConfig::from_env(env({{"INGOT_AUTO_COMPILE", "maybe"}})); },
                        "INGOT_AUTO_COMPILE='maybe'");
  CompileConfig bad;
  bad.auto_compile_threshold = 0;
  testing::expect_error([&] { set_compile_config(bad); }, "auto_compile_threshold");
}

}  // namespace
}  // namespace ingot
