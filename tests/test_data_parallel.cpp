// Data-parallel training (CompileOptions::data_parallel; include/ingot/distributed.h).
//
// DataParallelSingle: a plain run's group of one: the gradient_buckets pass (buckets, their
// placement, overlap off), shard_batch, checkpoints, options. DataParallelRanks: under ctest's
// `mpirun -np 2` / `-np 4` (distributed_2_ranks / distributed_4_ranks, with the DistributedRanks
// tests): a data-parallel run equals single-process training on the global batch, every rank's
// parameters are identical after every step, BatchNorm running statistics are averaged, only
// rank 0 writes checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <fstream>

#include <unistd.h>

#include "compiler/passes/passes.h"
#include "distributed/started.h"
#include "ingot/distributed.h"
#include "ingot/serialize.h"
#include "train_test_util.h"

namespace ingot {
namespace {

namespace dist = ingot::distributed;
using testing::batch_of;
using testing::classifier_options;
using testing::classifier_train_model;
using testing::error_of;

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

CompileOptions dp_options(int64_t batch, int64_t bucket_bytes = int64_t{1} << 20, bool overlap = true) {
  CompileOptions o = classifier_options(DType::Float32, batch);
  o.data_parallel = true;
  o.gradient_bucket_bytes = bucket_bytes;
  o.gradient_overlap = overlap;
  return o;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ingot_dp_" + std::to_string(::getpid()) + "_" + name)).string();
}

// ------------------------------------------------------------------ the group of one

class DataParallelSingle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::size() != 1) GTEST_SKIP() << "a plain run's group of one";
  }
};

TEST_F(DataParallelSingle, GradientsAreReducedInBucketsStartedWhenComputedAndWaitedWhenRead) {
  // 4 gradients (two weights, two biases): one bucket when buckets are large, one per gradient at 0 bytes.
  const TrainStep big = compile_train_step(classifier_train_model(), CpuBackend(), SGD({.lr = 0.1}), dp_options(6));
  EXPECT_EQ(count_ops(big.graph(), "all_reduce_start"), 1);
  EXPECT_EQ(count_ops(big.graph(), "all_reduce_wait"), 1);
  const TrainStep each = compile_train_step(classifier_train_model(), CpuBackend(), SGD({.lr = 0.1}), dp_options(6, 0));
  const Graph& g = each.graph();
  ASSERT_EQ(count_ops(g, "all_reduce_start"), 4);
  // Placement: a start right after the last producer of its operands; a wait right before the
  // first reader of its results; the optimizer reads only waited values.
  for (const Node& n : g.nodes()) {
    if (n.op == "all_reduce_start") {
      NodeId last = -1;
      for (ValueId v : n.inputs) last = std::max(last, g.value(v).producer);
      NodeId prev = n.id - 1;
      while (prev >= 0 && g.nodes()[static_cast<size_t>(prev)].op == "all_reduce_start") --prev;
      EXPECT_EQ(prev, last) << "start " << n.id;
    }
    if (n.op == "all_reduce_wait") {
      NodeId first = static_cast<NodeId>(g.nodes().size());
      for (const Node& r : g.nodes())
        for (ValueId v : r.inputs)
          for (ValueId o : n.outputs)
            if (v == o) first = std::min(first, r.id);
      NodeId next = n.id + 1;
      while (next < static_cast<NodeId>(g.nodes().size()) && g.nodes()[static_cast<size_t>(next)].op == "all_reduce_wait") ++next;
      EXPECT_EQ(next, first) << "wait " << n.id;
    }
  }
  // Without overlap each wait follows its start.
  const TrainStep blocking =
      compile_train_step(classifier_train_model(), CpuBackend(), SGD({.lr = 0.1}), dp_options(6, 0, false));
  const Graph& gb = blocking.graph();
  for (const Node& n : gb.nodes()) {
    if (n.op == "all_reduce_start") {
      EXPECT_EQ(gb.nodes()[static_cast<size_t>(n.id + 1)].op, "all_reduce_wait");
    }
  }
  // optimization_level none: no buckets, one blocking all-reduce per gradient (and per loss / metric).
  CompileOptions none = dp_options(6);
  none.optimization_level = "none";
  const TrainStep plain = compile_train_step(classifier_train_model(), CpuBackend(), SGD({.lr = 0.1}), none);
  EXPECT_EQ(count_ops(plain.graph(), "all_reduce_start"), 0);
  EXPECT_GE(count_ops(plain.graph(), "all_reduce"), 4);
}

// A step that throws between a bucket's start and its wait used to leave the bucket's buffer in
// the table of started all-reduces until exit; its scope drops what it started and never
// finished, and nothing else.
TEST_F(DataParallelSingle, AScopeDropsWhatItStartedAndNeverFinished) {
  namespace detail = ingot::distributed::detail;
  const Tensor x = ingot::testing::random_tensor({4}, 1, -1, 1);
  const int64_t before = detail::start_all_reduce({x}, dist::ReduceOp::Sum);
  int64_t abandoned = -1;
  try {
    const detail::StartedScope step;
    const int64_t finished = detail::start_all_reduce({x}, dist::ReduceOp::Sum);
    abandoned = detail::start_all_reduce({x}, dist::ReduceOp::Sum);
    EXPECT_TRUE(allclose(detail::finish_all_reduce(finished).at(0), x, 0, 0));
    throw std::runtime_error("the step failed before its wait");
  } catch (const std::runtime_error&) {
  }
  try {
    detail::finish_all_reduce(abandoned);
    ADD_FAILURE() << "the abandoned ticket is still held";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("names no started all-reduce"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(allclose(detail::finish_all_reduce(before).at(0), x, 0, 0)) << "started before the scope: kept";
}

TEST_F(DataParallelSingle, AGroupOfOneTrainsAsWithoutDataParallel) {
  for (const bool reference : {false, true}) {
    std::unique_ptr<Backend> backend = reference ? std::unique_ptr<Backend>(new ReferenceBackend()) : std::make_unique<CpuBackend>();
    const TrainStep plain = compile_train_step(classifier_train_model(), *backend, Adam({.lr = 0.05}), classifier_options(DType::Float32, 6));
    const TrainStep dp = compile_train_step(classifier_train_model(), *backend, Adam({.lr = 0.05}), dp_options(6, 64));
    EXPECT_TRUE(dp.data_parallel());
    EXPECT_EQ(dp.group_size(), 1);
    TensorMap p1 = plain.randomize_params(3), p2 = dp.randomize_params(3);
    OptimizerState s1 = plain.init_state(p1), s2 = dp.init_state(p2);
    for (int step = 0; step < 5; ++step) {
      const TensorMap batch = batch_of(6, static_cast<uint64_t>(step), DType::Float32);
      const StepResult a = plain.run(p1, s1, batch), b = dp.run(p2, s2, batch);
      EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::abs(a.loss)) << step;
      EXPECT_NEAR(a.metrics.at("accuracy").item(), b.metrics.at("accuracy").item(), 1e-6);
    }
    for (const auto& [name, t] : p1) EXPECT_LT(max_abs_diff(t, p2.at(name)), 1e-5) << name;
  }
}

TEST_F(DataParallelSingle, ShardBatchSplitsEveryTensorAlongTheAxis) {
  const Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3});
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 3}, {4});
  const TensorMap s = dist::shard_batch({{"x", x}, {"y", y}}, 1, 2);
  EXPECT_EQ(s.at("x").to_vector<float>(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(s.at("y").to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  const TensorMap cols = dist::shard_batch({{"x", x}}, 2, 3, 1);
  EXPECT_EQ(cols.at("x").to_vector<float>(), (std::vector<float>{2, 5, 8, 11}));
  EXPECT_EQ(dist::shard_batch({{"x", x}}).at("x").to_vector<float>(), x.to_vector<float>());  // the live group of one
  EXPECT_NE(error_of([&] { dist::shard_batch({{"x", x}}, 0, 3); }).find("'x' has 4 entries along axis 0, which do not split into 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dist::shard_batch({{"x", x}}, 0, 2, 2); }).find("axis 2 is out of range for 'x'"), std::string::npos);
  EXPECT_NE(error_of([&] { dist::shard_batch({{"x", x}}, 2, 2); }).find("rank 2 is not a rank of a group of 2"), std::string::npos);
  EXPECT_NE(error_of([&] { dist::shard_batch({{"s", Tensor::scalar<float>(1)}}, 0, 1); }).find("'s' is a scalar"),
            std::string::npos);
}

TEST_F(DataParallelSingle, CheckpointsRoundTripAndRefuseWhatDoesNotFit) {
  const TrainStep step = compile_train_step(classifier_train_model(), CpuBackend(), Adam({.lr = 0.05}), dp_options(6));
  TensorMap params = step.randomize_params(1);
  OptimizerState state = step.init_state(params);
  for (int i = 0; i < 3; ++i) step.run(params, state, batch_of(6, static_cast<uint64_t>(i), DType::Float32));
  const std::string path = temp_path("ckpt.safetensors");
  step.save_checkpoint(path, params, state);
  TensorMap loaded = step.randomize_params(9);
  OptimizerState loaded_state = step.init_state(loaded);
  step.load_checkpoint(path, loaded, loaded_state);
  EXPECT_EQ(loaded_state.step, 3);
  for (const auto& [name, t] : params) EXPECT_TRUE(equal(t, loaded.at(name))) << name;
  for (const auto& [name, t] : state.slots) EXPECT_TRUE(equal(t, loaded_state.slots.at(name))) << name;
  // Training on from the checkpoint continues exactly.
  const TensorMap batch = batch_of(6, 7, DType::Float32);
  EXPECT_EQ(step.run(params, state, batch).loss, step.run(loaded, loaded_state, batch).loss);

  const TrainStep sgd = compile_train_step(classifier_train_model(), CpuBackend(), SGD({.lr = 0.1}), dp_options(6));
  EXPECT_NE(error_of([&] { sgd.load_checkpoint(path, loaded, loaded_state); }).find("was written by Adam, this step uses SGD"),
            std::string::npos);
  std::map<std::string, Tensor> entries = load_safetensors(path);
  entries.erase("slot:m:linear_0.weight");
  save_safetensors(path, entries, {{"step", "3"}, {"optimizer", "Adam"}});
  EXPECT_NE(error_of([&] { step.load_checkpoint(path, loaded, loaded_state); }).find("has no optimizer slot 'm:linear_0.weight'"),
            std::string::npos);
  entries = load_safetensors(path);
  entries["param:linear_0.weight"] = Tensor(DType::Float32, {2, 2});
  save_safetensors(path, entries, {{"step", "3"}, {"optimizer", "Adam"}});
  EXPECT_NE(error_of([&] { step.load_checkpoint(path, loaded, loaded_state); }).find("'param:linear_0.weight' is float32[2, 2]"),
            std::string::npos);
  std::ofstream(path, std::ios::trunc) << "not a checkpoint";
  EXPECT_NE(error_of([&] { step.load_checkpoint(path, loaded, loaded_state); }).find(path), std::string::npos);
  std::remove(path.c_str());
}

TEST_F(DataParallelSingle, OptionsAreCheckedByName) {
  CompileOptions o;
  o.set("data_parallel", "true");
  o.set("gradient_bucket_bytes", "4096");
  o.set("gradient_overlap", "false");
  EXPECT_TRUE(o.data_parallel);
  EXPECT_EQ(o.gradient_bucket_bytes, 4096);
  EXPECT_FALSE(o.gradient_overlap);
  EXPECT_NE(error_of([&] { o.set("gradient_bucket_bytes", "-1"); }).find("Option 'gradient_bucket_bytes'"), std::string::npos);
  EXPECT_NE(error_of([&] { o.set("gradient_bucket_bytes", "1MB"); }).find("expected a whole number of bytes"), std::string::npos);
}

// ------------------------------------------------------------------ under mpirun

class DataParallelRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::size() < 2) GTEST_SKIP() << "needs several ranks: ctest runs it as distributed_2_ranks / distributed_4_ranks";
    r = dist::rank();
    n = dist::size();
  }
  int r = 0, n = 1;
};

// Every rank holds bit-identical tensors: rank 0's, broadcast, compared bit for bit.
void expect_identical_across_ranks(const TensorMap& params, const std::string& when) {
  for (const auto& [name, t] : params)
    EXPECT_TRUE(equal(t, dist::broadcast(t, 0))) << name << " differs from rank 0's " << when;
}

TEST_F(DataParallelRanks, TrainingEqualsSingleProcessTrainingOnTheGlobalBatch) {
  struct Case {
    const char* name;
    std::unique_ptr<Optimizer> opt;
    const char* reduction;
    int64_t bucket;
    bool overlap;
    bool reference;
  };
  std::vector<Case> cases;
  cases.push_back({"SGD momentum, mean loss, buckets of 256 bytes", std::make_unique<SGD>(SGDOptions{.lr = 0.2, .momentum = 0.9}), "mean", 256, true, false});
  cases.push_back({"Adam, sum loss, one bucket, no overlap", std::make_unique<Adam>(AdamOptions{.lr = 0.02}), "sum", 1 << 20, false, false});
  cases.push_back({"AdamW on the reference backend", std::make_unique<AdamW>(), "mean", 0, true, true});
  const int64_t local = 3, global = local * n;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Model body;
    body += Linear(8);
    body += Tanh();
    body += Linear(3);
    TrainModel model(body);
    model.add_loss(CrossEntropyLoss("none"), {{"input", "output"}, {"target", "target"}}, c.reduction, 0.5, "ce");
    model.add_regularization("l2", 0.01, "*weight");
    model.add_metric(ClassAccuracy(), {{"input", "output"}, {"target", "target"}}, "accuracy");
    std::unique_ptr<Backend> backend = c.reference ? std::unique_ptr<Backend>(new ReferenceBackend()) : std::make_unique<CpuBackend>();
    const TrainStep single = compile_train_step(model, *backend, *c.opt, classifier_options(DType::Float32, global));
    const TrainStep dp = compile_train_step(model, *backend, *c.opt, dp_options(local, c.bucket, c.overlap));
    EXPECT_EQ(dp.group_size(), n);
    TensorMap ps = single.randomize_params(11), pd;
    if (r == 0) {
      for (const auto& [name, t] : ps) pd.emplace(name, t.clone());
    } else {
      pd = dp.randomize_params(static_cast<uint64_t>(100 + r));  // other values: the first run gives them rank 0's
    }
    OptimizerState ss = single.init_state(ps), sd = dp.init_state(pd);
    for (int step = 0; step < 20; ++step) {
      const TensorMap batch = batch_of(global, static_cast<uint64_t>(step), DType::Float32);
      const StepResult a = single.run(ps, ss, batch);
      const StepResult b = dp.run(pd, sd, dist::shard_batch(batch));
      EXPECT_NEAR(b.loss, a.loss, 1e-5 * std::abs(a.loss)) << "step " << step;
      EXPECT_NEAR(b.losses.at("ce").item(), a.losses.at("ce").item(), 1e-5 * std::abs(a.losses.at("ce").item()));
      EXPECT_NEAR(b.metrics.at("accuracy").item(), a.metrics.at("accuracy").item(), 1e-6);
      expect_identical_across_ranks(pd, "after step " + std::to_string(step));
    }
    for (const auto& [name, t] : ps) EXPECT_LT(max_abs_diff(t, pd.at(name)), 1e-4) << name;
  }
}

TEST_F(DataParallelRanks, BatchNormRunningStatisticsAreAveragedAcrossRanks) {
  const TrainModel tm = testing::batch_norm_train_model(testing::batch_norm_body(0.5));
  CompileOptions o = testing::batch_norm_options();
  o.data_parallel = true;
  const TrainStep step = compile_train_step(tm, CpuBackend(), SGD({.lr = 0.1}), o);
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  TensorMap batch = {{"input", testing::random_tensor({2, 2, 2, 2}, static_cast<uint64_t>(r), -1, 1, DType::Float32)},
                     {"target", testing::random_tensor({2, 2}, 7, -1, 1, DType::Float32)}};
  std::string mean_name;
  for (const auto& [name, t] : params)
    if (name.find("running_mean") != std::string::npos) mean_name = name;
  ASSERT_FALSE(mean_name.empty());
  const Tensor before = dist::broadcast(params.at(mean_name), 0);
  step.run(params, state, batch);
  expect_identical_across_ranks(params, "after a step");
  // running_mean = (1 - momentum) before + momentum * mean over ranks of each rank's batch mean.
  const Tensor x = batch.at("input");
  for (int64_t c = 0; c < 2; ++c) {
    double local_mean = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 4; ++i) local_mean += x.item((b * 2 + c) * 4 + i) / 8;
    const double global_mean = dist::all_reduce(Tensor::scalar<double>(local_mean), dist::ReduceOp::Mean).item();
    EXPECT_NEAR(params.at(mean_name).item(c), 0.5 * before.item(c) + 0.5 * global_mean, 1e-5) << c;
  }
}

TEST_F(DataParallelRanks, RanksThatCompiledDifferentStepsAreNamedAtTheFirstStep) {
  Model body;
  body += Linear(r == 1 ? 5 : 8);  // rank 1 builds another model
  body += Linear(3);
  TrainModel tm(body);
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  const TrainStep step = compile_train_step(tm, CpuBackend(), SGD({.lr = 0.1}), dp_options(3));
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  const std::string e = error_of([&] { step.run(params, state, dist::shard_batch(batch_of(3 * n, 1, DType::Float32))); });
  EXPECT_NE(e.find("data parallel ranks compiled different training steps: rank 1 differ from rank 0"), std::string::npos) << e;
  dist::barrier();  // the group is still usable
}

TEST_F(DataParallelRanks, OnlyRankZeroWritesCheckpoints) {
  const TrainStep step = compile_train_step(classifier_train_model(), CpuBackend(), SGD({.lr = 0.1}), dp_options(3));
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  step.run(params, state, dist::shard_batch(batch_of(3 * n, 1, DType::Float32)));
  // Each rank names its own file: only rank 0's exists afterwards, and it is whole when save returns.
  const std::string base = (std::filesystem::temp_directory_path() / "ingot_dp_ckpt_").string();
  const std::string mine = base + std::to_string(static_cast<int64_t>(dist::broadcast(Tensor::scalar<int64_t>(::getpid()), 0).item())) +
                           "_" + std::to_string(r) + ".safetensors";
  step.save_checkpoint(mine, params, state);
  EXPECT_EQ(std::filesystem::exists(mine), r == 0);
  const std::string rank0 = mine.substr(0, mine.rfind('_')) + "_0.safetensors";
  TensorMap loaded = step.randomize_params(5);
  OptimizerState loaded_state = step.init_state(loaded);
  step.load_checkpoint(rank0, loaded, loaded_state);  // every rank reads rank 0's file
  for (const auto& [name, t] : params) EXPECT_TRUE(equal(t, loaded.at(name))) << name;
  dist::barrier();
  if (r == 0) std::remove(rank0.c_str());
}

}  // namespace
}  // namespace ingot
