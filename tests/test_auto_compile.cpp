// Hot-path auto-compile: the switch after exactly N evaluations (by counters; tests wait for
// the background build through wait_for_background_compiles, never on time), INGOT_COMPILE,
// fallback on an injected build failure, the [COMPILE] log, the instruction log and regions.
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>

#include "array_mlp.h"
#include "ingot/cpu_backend.h"
#include "ingot/function_compile.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using testing::Contains;
using testing::error_of;
using testing::random_tensor;

class AutoCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_auto_compile();
    config_.auto_compile = true;
    config_.auto_compile_threshold = 3;
    config_.backend = std::make_shared<ReferenceBackend>();
    config_.log_sink = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(line);
    };
    apply();
  }
  void TearDown() override {
    wait_for_background_compiles();
    set_compile_config(CompileConfig::from_env());
    reset_auto_compile();
  }
  void apply() { set_compile_config(config_); }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  int lines_with(const std::string& part) {
    int n = 0;
    for (const std::string& l : log()) n += l.find(part) != std::string::npos;
    return n;
  }

  // One evaluation of the same graph structure: matmul -> relu -> sum.
  static Tensor step(const Array& x, const Array& w) {
    Array y = sum(relu(matmul(x, w)));
    eval(y);
    return y.tensor();
  }

  CompileConfig config_;
  std::mutex mu_;
  std::vector<std::string> log_;
};

TEST_F(AutoCompile, SwitchesAfterExactlyThresholdEvaluations) {
  Array x(random_tensor({4, 6}, 1)), w(random_tensor({6, 5}, 2));
  const Tensor want = step(x, w);
  for (int i = 1; i < 3; ++i) step(x, w);
  AutoCompileStats s = auto_compile_stats();
  EXPECT_EQ(s.evaluations, 3);
  EXPECT_EQ(s.eager_runs, 3);
  EXPECT_EQ(s.compiles_started, 1);  // queued by the 3rd evaluation
  wait_for_background_compiles();
  EXPECT_EQ(auto_compile_stats().compiles_finished, 1);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(allclose(step(x, w), want));
  s = auto_compile_stats();
  EXPECT_EQ(s.eager_runs, 3);
  EXPECT_EQ(s.compiled_runs, 4);
  EXPECT_EQ(s.compiles_started, 1);
  EXPECT_EQ(s.distinct_graphs, 1);
}

TEST_F(AutoCompile, NewDataSameShapesReusesTheBuildNewShapeRecompiles) {
  config_.debug = true;
  apply();
  Array w(random_tensor({6, 5}, 2));
  for (int i = 0; i < 3; ++i) step(Array(random_tensor({4, 6}, 10 + i)), w);
  wait_for_background_compiles();
  Array x(random_tensor({4, 6}, 99));
  EXPECT_TRUE(allclose(step(x, w), sum(relu(matmul(x, w))).tensor()));
  EXPECT_EQ(auto_compile_stats().compiled_runs, 1);
  for (int i = 0; i < 3; ++i) step(Array(random_tensor({8, 6}, 20 + i)), w);
  wait_for_background_compiles();
  EXPECT_EQ(auto_compile_stats().compiles_started, 2);
  EXPECT_EQ(lines_with("[COMPILE] hot sequence matmul -> relu -> sum (seen 3 times)"), 1);
  EXPECT_EQ(lines_with("[COMPILE] recompiling matmul -> relu -> sum: new shape (input 0: [8, 6], was [4, 6])"), 1)
      << log().size();
  Array w64(random_tensor({6, 5}, 2, -1, 1, DType::Float64));
  for (int i = 0; i < 3; ++i) step(Array(random_tensor({8, 6}, 30 + i, -1, 1, DType::Float64)), w64);
  wait_for_background_compiles();
  EXPECT_EQ(lines_with("[COMPILE] recompiling matmul -> relu -> sum: new dtype (input 0: float64, was float32)"), 1);
}

TEST_F(AutoCompile, CpuBackendBuildGivesTheEagerResultsAndLogsEveryStage) {
  config_.backend = std::make_shared<CpuBackend>();
  config_.debug = true;
  apply();
  Array x(random_tensor({16, 32}, 3)), w(random_tensor({32, 8}, 4));
  const Tensor want = step(x, w);
  for (int i = 1; i < 3; ++i) step(x, w);
  wait_for_background_compiles();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(allclose(step(x, w), want, 1e-5, 1e-5));
  EXPECT_EQ(auto_compile_stats().compiled_runs, 3);
  EXPECT_EQ(lines_with("[COMPILE] hot sequence matmul -> relu -> sum (seen 3 times)"), 1);
  EXPECT_EQ(lines_with("[COMPILE] compile started: matmul -> relu -> sum (graph "), 1);
  EXPECT_EQ(lines_with("[COMPILE] compile finished: matmul -> relu -> sum in "), 1);
  EXPECT_EQ(lines_with("[COMPILE] speedup matmul -> relu -> sum: eager "), 1);
}

TEST_F(AutoCompile, InjectedBuildFailureFallsBackToEagerWithOneWarning) {
  config_.inject_build_failure = true;
  apply();
  Array x(random_tensor({4, 6}, 1)), w(random_tensor({6, 5}, 2));
  const Tensor want = sum(relu(matmul(x, w))).tensor();
  reset_auto_compile();
  for (int i = 0; i < 8; ++i) {
    EXPECT_NO_THROW(EXPECT_TRUE(allclose(step(x, w), want)));
    if (i == 3) wait_for_background_compiles();
  }
  AutoCompileStats s = auto_compile_stats();
  EXPECT_EQ(s.compile_failures, 1);
  EXPECT_EQ(s.compiles_started, 1);
  EXPECT_EQ(s.eager_runs, 8);
  EXPECT_EQ(s.compiled_runs, 0);
  EXPECT_EQ(lines_with("[COMPILE] warning: compile failed for matmul -> relu -> sum, staying eager"), 1);
  EXPECT_EQ(lines_with("injected build failure"), 1);
}

TEST_F(AutoCompile, CompileEverythingRunsCompiledFromTheFirstEvaluation) {
  config_.auto_compile = false;
  config_.compile_all = true;
  apply();
  Array x(random_tensor({4, 6}, 1)), w(random_tensor({6, 5}, 2));
  step(x, w);
  EXPECT_EQ(auto_compile_stats().compiled_runs, 1);
  EXPECT_EQ(auto_compile_stats().eager_runs, 0);
}

TEST_F(AutoCompile, OffByDefaultAndUnderDisableCompile) {
  config_.auto_compile = false;
  apply();
  Array x(random_tensor({4, 6}, 1)), w(random_tensor({6, 5}, 2));
  for (int i = 0; i < 5; ++i) step(x, w);
  config_.auto_compile = true;
  apply();
  disable_compile();
  for (int i = 0; i < 5; ++i) step(x, w);
  enable_compile();
  EXPECT_EQ(auto_compile_stats().compiles_started, 0);
  EXPECT_EQ(auto_compile_stats().eager_runs, 10);
}

TEST_F(AutoCompile, InstructionLogHasOneLinePerEvaluation) {
  testing::TempDir dir;
  config_.instruction_log = dir.path + "/instructions.log";
  apply();
  Array x(random_tensor({4, 6}, 1)), w(random_tensor({6, 5}, 2));
  for (int i = 0; i < 3; ++i) step(x, w);
  wait_for_background_compiles();
  step(x, w);
  std::ifstream in(config_.instruction_log);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Contains(lines[static_cast<size_t>(i)], " mode=eager graph="));
  EXPECT_TRUE(Contains(lines[3], " mode=compiled graph="));
  EXPECT_TRUE(Contains(lines[3], " ops=matmul -> relu -> sum"));
  EXPECT_EQ(lines[3].rfind("t=", 0), 0u);
}

// An instruction log that cannot be opened warns once and leaves evaluation alone (it used to
// throw from the first eval() after computing, then drop lines silently).
TEST_F(AutoCompile, UnopenableInstructionLogWarnsOnceAndNeverThrows) {
  testing::TempDir dir;
  config_.instruction_log = dir.path + "/no-such-dir/instructions.log";
  apply();
  Array x(random_tensor({4, 6}, 1)), w(random_tensor({6, 5}, 2));
  const Tensor want = sum(relu(matmul(x, w))).tensor();
  for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(EXPECT_TRUE(allclose(step(x, w), want)));
  EXPECT_EQ(lines_with("[COMPILE] warning: INGOT_INSTRUCTION_LOG: cannot open '" + config_.instruction_log +
                       "' for appending"),
            1);
}

TEST_F(AutoCompile, RegionEvaluatesItsBodyAsOneUnit) {
  config_.auto_compile = false;  // a region is compiled by itself
  config_.debug = true;
  apply();
  testing::MlpParams eager = testing::init_mlp(12, 8, 3, 5), regioned = eager;
  Array x(random_tensor({6, 12}, 6));
  Array y = one_hot(Array(std::vector<int64_t>{0, 1, 2, 0, 1, 2}, {6}), 3);
  const int64_t evals_before = auto_compile_stats().evaluations;
  for (int i = 0; i < 5; ++i) {
    Array l1 = testing::mlp_sgd_step(eager, x, y, 0.2f);
    eval({eager.w1, eager.b1, eager.w2, eager.b2, l1});
    CompileRegion region("training_loop");
    Array l2 = testing::mlp_sgd_step(regioned, x, y, 0.2f);
    eval(l2);  // deferred to the end of the region...
    EXPECT_FALSE(l2.is_evaluated());
    eval({regioned.w1, regioned.b1, regioned.w2, regioned.b2});  // ...with this, as one graph
  }
  wait_for_background_compiles();
  {
    CompileRegion region("training_loop");
    Array l = testing::mlp_sgd_step(regioned, x, y, 0.2f);
    eval({l, regioned.w1, regioned.b1, regioned.w2, regioned.b2});
  }
  Array l1 = testing::mlp_sgd_step(eager, x, y, 0.2f);
  eval({eager.w1, eager.b1, eager.w2, eager.b2, l1});
  AutoCompileStats s = auto_compile_stats();
  EXPECT_EQ(s.compiles_started, 1);
  EXPECT_GE(s.compiled_runs, 1);
  EXPECT_EQ(lines_with("[COMPILE] hot region 'training_loop': matmul"), 1);
  EXPECT_GE(s.evaluations - evals_before, 6);
  for (auto [e, r] : {std::pair{&eager.w1, &regioned.w1}, {&eager.b2, &regioned.b2}})
    EXPECT_TRUE(allclose(e->tensor(), r->tensor(), 1e-5, 1e-6));
}

TEST_F(AutoCompile, ReadingDataInsideARegionEvaluatesAtOnce) {
  CompileRegion region("reads");
  Array x = ones({3}) * 2.0f;
  EXPECT_FLOAT_EQ(sum(x).item<float>(), 6.0f);
}

TEST_F(AutoCompile, RegionEndRunsOrDropsTheDeferredWorkAndChecksNesting) {
  Array a = ones({3}) * 2.0f, b = ones({3}) * 3.0f;
  CompileRegion kept("kept");
  eval(a);
  kept.end();
  EXPECT_TRUE(a.is_evaluated());
  EXPECT_TRUE(Contains(error_of([&] { kept.end(); }), "CompileRegion 'kept' has ended already"));
  CompileRegion dropped("dropped");
  eval(b);
  dropped.end(/*run_deferred=*/false);
  EXPECT_FALSE(b.is_evaluated());
  CompileRegion outer("outer");
  CompileRegion inner("inner");
  EXPECT_TRUE(Contains(error_of([&] { outer.end(); }), "cannot end before the region 'inner' opened inside it"));
  inner.end();
  outer.end();
}

}  // namespace
}  // namespace ingot
