// ingot::distributed and the collective ops.
//
// DistributedSingle: the size-1 group of a plain run (always runs).
// DistributedRanks: run by ctest under `mpirun -np 2` and `-np 4` (distributed_2_ranks,
// distributed_4_ranks); skipped in a plain run. Collectives against expected values for every
// dtype, their vjps against identities and finite differences, the CPU backend, and mismatches.
// DistributedFaults: one mpirun each (they leave the group unusable): a late rank is named
// within the timeout; a killed rank ends the job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "compiler/checkpointing.h"
#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "cpu_test_util.h"
#include "ingot/distributed.h"
#include "ingot/function_compile.h"
#include "ingot/transforms.h"
#include "op_test_util.h"

namespace ingot {
namespace {

namespace dist = ingot::distributed;
using testing::error_of;

const DType kNumberTypes[] = {DType::Int8,    DType::Int16,   DType::Int32,    DType::Int64,  DType::UInt8,
                              DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

// Rank r's operand: small non-negative integers (exact in every dtype, sums included), different
// per rank and element.
Tensor operand(int r, Shape shape, DType dtype) {
  Tensor t(DType::Float64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = static_cast<double>((3 * r + 5 * i) % 7);
  return t.astype(dtype);
}

std::vector<double> values(const Tensor& t) { return t.astype(DType::Float64).to_vector<double>(); }

// The collective ops on lazy arrays, evaluated now.
Tensor run(const Array& a) { return a.tensor(); }

void expect_close(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
}

// ------------------------------------------------------------------ the size-1 group

class DistributedSingle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::size() != 1) GTEST_SKIP() << "a plain run's size-1 group (this process runs under mpirun)";
  }
};

TEST_F(DistributedSingle, APlainRunIsRankZeroOfOne) {
  dist::init();
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::size(), 1);
  dist::barrier();
}

TEST_F(DistributedSingle, EveryCollectiveReturnsItsOperandForEveryDtype) {
  for (DType t : kNumberTypes) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor x = operand(0, {2, 3}, t);
    for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max}) {
      EXPECT_EQ(values(dist::all_reduce(x, op)), values(x));
    }
    if (is_floating(t)) {
      EXPECT_EQ(values(dist::all_reduce(x, dist::ReduceOp::Mean)), values(x));
    }
    EXPECT_EQ(values(dist::all_gather(x)), values(x));
    EXPECT_EQ(values(dist::broadcast(x, 0)), values(x));
    EXPECT_EQ(values(dist::reduce_scatter(x)), values(x));
    EXPECT_EQ(values(dist::reduce(x, 0)), values(x));
    EXPECT_EQ(dist::all_gather(x).dtype(), t);
  }
  const Tensor flags = Tensor::from_vector<bool>({true, false}, {2});
  EXPECT_EQ(dist::all_gather(flags).to_vector<bool>(), (std::vector<bool>{true, false}));
}

TEST_F(DistributedSingle, MistakesAreClearErrors) {
  const Tensor b = Tensor::from_vector<bool>({true}, {1});
  EXPECT_NE(error_of([&] { dist::all_reduce(b, dist::ReduceOp::Sum); }).find("needs numbers, got bool"), std::string::npos);
  EXPECT_NE(error_of([&] { dist::all_reduce(operand(0, {2}, DType::Int32), dist::ReduceOp::Mean); })
                .find("a mean needs a float dtype, got int32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dist::broadcast(operand(0, {2}, DType::Float32), 1); })
                .find("root 1 is not a rank of this group of 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dist::all_gather(Tensor::scalar<float>(1)); }).find("rank >= 1"), std::string::npos);
  EXPECT_NE(error_of([] { dist::parse_reduce_op("min"); }).find("expected sum, mean or max"), std::string::npos);
  EXPECT_NE(error_of([] { dist::set_timeout(-1); }).find(">= 0"), std::string::npos);
}

// Shape rules read the group size recorded on the node, so a graph for 4 ranks infers without one.
TEST_F(DistributedSingle, ShapeRulesUseTheRecordedGroupSize) {
  const Array x = array(operand(0, {3, 2}, DType::Float32));
  EXPECT_EQ(op("all_gather", {x}, {{"group_size", int64_t{4}}}).shape(), (Shape{12, 2}));
  const Array y = array(operand(0, {8, 2}, DType::Float32));
  EXPECT_EQ(op("reduce_scatter", {y}, {{"group_size", int64_t{4}}}).shape(), (Shape{2, 2}));
  EXPECT_NE(error_of([&] { op("reduce_scatter", {x}, {{"group_size", int64_t{2}}}); })
                .find("the leading dimension (3) must be divisible by the group's size (2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { op("all_reduce", {x}, {}); }).find("group_size"), std::string::npos);
  EXPECT_NE(error_of([&] { op("all_reduce", {x}, {{"group_size", int64_t{1}}, {"op", std::string("min")}}); })
                .find("expected sum, mean or max"),
            std::string::npos);
  // Running a graph built for another group is refused, naming the sizes.
  const std::string e = error_of([&] { run(op("all_gather", {x}, {{"group_size", int64_t{4}}})); });
  EXPECT_NE(e.find("built for a group of 4 ranks (attribute group_size) but runs in a group of 1"), std::string::npos) << e;
}

TEST_F(DistributedSingle, LazyArraysGradientsAndCompiledFunctionsRunTheCollectives) {
  const Tensor xt = testing::random_tensor({4, 3}, 7);
  const Array x = array(xt);
  for (const Array& y : {dist::all_sum(x), dist::all_mean(x), dist::all_max(x), dist::all_gather(x), dist::broadcast(x),
                         dist::reduce_scatter(x)}) {
    EXPECT_EQ(run(y).to_vector<float>(), xt.to_vector<float>());
  }
  const Array g = grad([](const Array& v) { return sum(dist::all_sum(v) * v); })(x);
  std::vector<double> twice = values(xt);
  for (double& v : twice) v *= 2;
  expect_close(run(g), twice);
  // The CPU backend runs them through its host callback.
  CompileConfig c;
  c.backend = std::make_shared<CpuBackend>(cpu_test::cpu_options());
  set_compile_config(c);
  auto f = compile([](const Array& v) {
    return std::vector<Array>{dist::all_sum(v * 2.0f) + 1.0f, dist::all_gather(v), dist::reduce_scatter(v)};
  });
  const int builds = CpuBackend::compile_count();
  const std::vector<Array> out = f(x);
  eval(out);
  set_compile_config(CompileConfig::from_env());
  EXPECT_EQ(CpuBackend::compile_count(), builds + 1);
  expect_close(run(out[0]), values(run(x * 2.0f + 1.0f)));
  EXPECT_EQ(run(out[1]).to_vector<float>(), xt.to_vector<float>());
  EXPECT_EQ(run(out[2]).to_vector<float>(), xt.to_vector<float>());
}

// A build without MPI started as several ranks says what to install: this test binary again, with
// the variables Open MPI's launcher sets (in a build with MPI they would make it call MPI_Init).
TEST_F(DistributedSingle, WithoutMpiAMultiRankLaunchNamesThePackages) {
  if (dist::mpi_available()) GTEST_SKIP() << "this build has MPI (the error is for builds without it)";
  const std::string command = "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 /proc/" + std::to_string(::getpid()) +
                              "/exe --gtest_filter=DistributedSingle.APlainRunIsRankZeroOfOne 2>&1";
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  EXPECT_NE(::pclose(p), 0) << out;
  EXPECT_NE(out.find("launched as rank 1 of 2, but this ingot was built without MPI; install Open MPI (apt-get install "
                     "libopenmpi-dev openmpi-bin)"),
            std::string::npos)
      << out;
}

// A collective's value is known only at run time on every rank: constant folding leaves it.
TEST_F(DistributedSingle, ConstantFoldingLeavesCollectives) {
  Graph g;
  const ValueId c = g.add_constant("c", operand(0, {3}, DType::Float32));
  g.set_output("y", g.add_op("all_reduce", {c}, {{"group_size", int64_t{1}}}));
  infer_shapes(g, {});
  infer_types(g);
  const PassReport r = fold_constants(g);
  EXPECT_EQ(r.changes, 0);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "all_reduce");
}

// Gradient checkpointing keeps a collective's result instead of recomputing it (which would
// communicate once more). Forward: all_reduce, exp (segment 0), exp (1), exp (2); the backward
// node reads the all_reduce's result, which a plain op in its place would have recomputed.
TEST_F(DistributedSingle, CheckpointingKeepsCollectiveResults) {
  auto checkpointed = [](const std::string& first, const Attrs& attrs) {
    Graph g;
    const ValueId x = g.add_input("x");
    g.value(x).dtype = DType::Float32;
    const ValueId a = g.add_op(first, {x}, attrs);
    const ValueId d = g.add_op("exp", {g.add_op("exp", {g.add_op("exp", {a})})});
    g.set_output("y", d);
    g.set_output("dx", g.add_op("mul", {a, d}));  // the "backward"
    infer_shapes(g, {{x, testing::template_of({4}), "", "test"}});
    infer_types(g);
    const CheckpointReport r = apply_gradient_checkpointing(g, 4, 3);
    int copies = 0;
    for (const Node& n : g.nodes()) copies += n.op == first;
    return std::pair{r.recomputed_nodes, copies};
  };
  EXPECT_EQ(checkpointed("all_reduce", {{"group_size", int64_t{1}}}), (std::pair{0, 1}));
  EXPECT_EQ(checkpointed("tanh", {}), (std::pair{1, 2}));  // a plain op there is recomputed
}

// ------------------------------------------------------------------ under mpirun

class DistributedRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::size() < 2) GTEST_SKIP() << "needs several ranks: ctest runs it as distributed_2_ranks / distributed_4_ranks";
    r = dist::rank();
    n = dist::size();
  }
  int r = 0, n = 1;
};

TEST_F(DistributedRanks, RankAndSizeComeFromTheLauncher) {
  EXPECT_EQ(n, std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(r, std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  dist::barrier();
}

TEST_F(DistributedRanks, CollectivesMatchTheExpectedValuesForEveryDtype) {
  const Shape shape{static_cast<int64_t>(2 * n), 3};
  const int64_t m = numel(shape);
  std::vector<std::vector<double>> xs;  // every rank's operand, as this rank computes it
  for (int p = 0; p < n; ++p) xs.push_back(values(operand(p, shape, DType::Float64)));
  for (DType t : kNumberTypes) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor x = operand(r, shape, t);
    std::vector<double> sum(m, 0), max(m, 0), gathered;
    for (int p = 0; p < n; ++p) {
      for (int64_t i = 0; i < m; ++i) {
        sum[i] += xs[p][i];
        max[i] = std::max(max[i], xs[p][i]);
      }
      gathered.insert(gathered.end(), xs[p].begin(), xs[p].end());
    }
    Tensor y = dist::all_reduce(x, dist::ReduceOp::Sum);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(values(y), sum);
    EXPECT_EQ(values(dist::all_reduce(x, dist::ReduceOp::Max)), max);
    if (is_floating(t)) {
      std::vector<double> mean = sum;
      for (double& v : mean) v /= n;  // n is 2 or 4: exact in every float type
      EXPECT_EQ(values(dist::all_reduce(x, dist::ReduceOp::Mean)), mean);
    }
    y = dist::all_gather(x);
    EXPECT_EQ(y.shape(), (Shape{shape[0] * n, 3}));
    EXPECT_EQ(values(y), gathered);
    EXPECT_EQ(values(dist::broadcast(x, n - 1)), xs[static_cast<size_t>(n - 1)]);
    y = dist::reduce_scatter(x);
    EXPECT_EQ(y.shape(), (Shape{2, 3}));
    EXPECT_EQ(values(y), std::vector<double>(sum.begin() + r * 6, sum.begin() + (r + 1) * 6));
    EXPECT_EQ(values(dist::reduce(x, 0)), r == 0 ? sum : std::vector<double>(m, 0.0));
  }
  // bool moves (gather, broadcast) but is not reduced.
  const Tensor b = Tensor::from_vector<bool>({r % 2 == 0}, {1});
  const std::vector<bool> gathered = dist::all_gather(b).to_vector<bool>();
  for (int p = 0; p < n; ++p) {
    EXPECT_EQ(gathered[static_cast<size_t>(p)], p % 2 == 0);
  }
  EXPECT_EQ(dist::broadcast(b, 1).to_vector<bool>(), std::vector<bool>{false});
}

TEST_F(DistributedRanks, TheOpsOnLazyArraysAndTheCpuBackendAgree) {
  const Array x = array(operand(r, {static_cast<int64_t>(n), 2}, DType::Float32));
  auto all = [](const Array& v) {
    return std::vector<Array>{dist::all_sum(v), dist::all_mean(v), dist::all_max(v),
                              dist::all_gather(v), dist::broadcast(v, 1), dist::reduce_scatter(v)};
  };
  const std::vector<Array> eager = all(x);
  eval(eager);
  CompileConfig c;
  c.backend = std::make_shared<CpuBackend>(cpu_test::cpu_options());
  set_compile_config(c);
  auto f = compile(all);
  const int builds = CpuBackend::compile_count();
  const std::vector<Array> compiled = f(x);
  eval(compiled);
  set_compile_config(CompileConfig::from_env());
  EXPECT_EQ(CpuBackend::compile_count(), builds + 1);  // generated code, the collectives through run_node
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t k = 0; k < eager.size(); ++k) {
    EXPECT_EQ(compiled[k].shape(), eager[k].shape()) << k;
    EXPECT_EQ(run(compiled[k]).to_vector<float>(), run(eager[k]).to_vector<float>()) << k;
  }
  EXPECT_EQ(run(eager[3]).shape(), (Shape{static_cast<int64_t>(n) * n, 2}));
}

// Hot-path auto-compile builds a graph with a collective at once (not in the background), so
// every rank switches to the compiled executable at the same evaluation.
TEST_F(DistributedRanks, AutoCompileSwitchesEveryRankAtTheSameEvaluation) {
  reset_auto_compile();
  CompileConfig c;
  c.auto_compile = true;
  c.auto_compile_threshold = 2;
  c.backend = std::make_shared<CpuBackend>(cpu_test::cpu_options());
  set_compile_config(c);
  for (int k = 0; k < 4; ++k) {
    const Array y = dist::all_sum(array(operand(r, {3}, DType::Float32)) * 2.0f);
    std::vector<double> want(3, 0);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < 3; ++i) want[i] += 2 * values(operand(p, {3}, DType::Float64))[i];
    EXPECT_EQ(values(run(y)), want) << k;
  }
  const AutoCompileStats stats = auto_compile_stats();
  set_compile_config(CompileConfig::from_env());
  reset_auto_compile();
  EXPECT_EQ(stats.compiled_runs, 3);  // evaluations 2, 3 and 4: the build ran in place at the 2nd
  EXPECT_EQ(stats.eager_runs, 1);
}

// Logical models reach the collectives through apply(), with the group size as an attribute.
TEST_F(DistributedRanks, LogicalModelsApplyThem) {
  Model m;
  Connection x = m.input("x");
  m.expose(apply("all_reduce", x * 2.0, {{"group_size", int64_t{n}}, {"op", std::string("max")}}), "y");
  CompileOptions o;
  o.shapes["x"] = {3};
  const PhysicalModel pm = compile(m, ReferenceBackend(), o);
  const Tensor y = pm.evaluate({}, {{"x", Tensor::from_vector<float>({float(r), 1.0f - float(r), 0.5f}, {3})}}).at("y");
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2.0f * float(n - 1), 2.0f, 1.0f}));
}

TEST_F(DistributedRanks, TheZooBlocksRunTheCollectives) {
  Model m;
  m |= Linear(2)({{"input", "input"}, {"output", "h"}});
  m |= AllReduce("mean")({{"input", "h"}, {"output", IOKey("mean").expose()}});
  m |= AllGather()({{"input", "h"}, {"output", IOKey("gathered").expose()}});
  m |= Broadcast(n - 1)({{"input", "h"}, {"output", IOKey("from_last").expose()}});
  CompileOptions o;
  o.shapes["input"] = {1, 3};
  const PhysicalModel pm = compile(m, CpuBackend(), o);
  TensorMap params = pm.randomize_params(0);  // the same on every rank
  const TensorMap out = pm.evaluate(params, {{"input", Tensor::full(DType::Float32, {1, 3}, double(r))}});
  const Tensor gathered = out.at("gathered");
  ASSERT_EQ(gathered.shape(), (Shape{n, 2}));
  for (int64_t c = 0; c < 2; ++c) {
    double mean = 0;
    for (int p = 0; p < n; ++p) mean += gathered.item(p * 2 + c) / n;
    EXPECT_NEAR(out.at("mean").item(c), mean, 1e-5);
    EXPECT_EQ(out.at("from_last").item(c), gathered.item((n - 1) * 2 + c));
  }
  EXPECT_NE(error_of([&] { AllReduce("min"); }).find("unknown reduction 'min'"), std::string::npos);
  EXPECT_NE(error_of([&] { Broadcast(n); }).find("is not a rank of this group"), std::string::npos);
}

// The gradient of the sum over ranks of <ct_r, fn(x_r)>: from vjp, against identities written
// out per op, and against central finite differences of that global loss (float64).
struct VjpCase {
  std::string name;
  std::function<Array(const Array&)> fn;
  Shape in, out;
  std::function<std::vector<double>(int rank, const std::vector<std::vector<double>>& xs,
                                    const std::vector<std::vector<double>>& cts)> expected;
};

TEST_F(DistributedRanks, VjpsMatchIdentitiesAndFiniteDifferences) {
  const int64_t nn = n;
  auto x_of = [](int p, const Shape& s) {  // distinct values: all_max has no ties
    Tensor t(DType::Float64, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = 0.1 * p + 0.37 * static_cast<double>((7 * i + p) % 11);
    return t;
  };
  auto ct_of = [](int p, const Shape& s) {
    Tensor t(DType::Float64, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = 1.0 + p + 0.5 * static_cast<double>(i % 3);
    return t;
  };
  auto sum_cts = [](const std::vector<std::vector<double>>& cts, size_t begin, size_t count) {
    std::vector<double> s(count, 0);
    for (const auto& ct : cts)
      for (size_t i = 0; i < count; ++i) s[i] += ct[begin + i];
    return s;
  };
  const std::vector<VjpCase> cases = {
      {"all_sum", [](const Array& v) { return dist::all_sum(v); }, {2, 3}, {2, 3},
       [&](int, const auto&, const auto& cts) { return sum_cts(cts, 0, 6); }},
      {"all_mean", [](const Array& v) { return dist::all_mean(v); }, {2, 3}, {2, 3},
       [&](int, const auto&, const auto& cts) {
         std::vector<double> s = sum_cts(cts, 0, 6);
         for (double& v : s) v /= static_cast<double>(cts.size());
         return s;
       }},
      {"all_max", [](const Array& v) { return dist::all_max(v); }, {2, 3}, {2, 3},
       [&](int p, const auto& xs, const auto& cts) {
         std::vector<double> s = sum_cts(cts, 0, 6);
         for (size_t i = 0; i < 6; ++i)
           for (const auto& other : xs) s[i] = other[i] > xs[static_cast<size_t>(p)][i] ? 0.0 : s[i];
         return s;
       }},
      {"all_gather", [](const Array& v) { return dist::all_gather(v); }, {2, 3}, {2 * nn, 3},
       [&](int p, const auto&, const auto& cts) { return sum_cts(cts, static_cast<size_t>(p) * 6, 6); }},
      {"reduce_scatter", [](const Array& v) { return dist::reduce_scatter(v); }, {2 * nn, 3}, {2, 3},
       [&](int, const auto&, const auto& cts) {
         std::vector<double> s;
         for (const auto& ct : cts) s.insert(s.end(), ct.begin(), ct.end());
         return s;
       }},
      {"broadcast", [](const Array& v) { return dist::broadcast(v, 1); }, {2, 3}, {2, 3},
       [&](int p, const auto&, const auto& cts) { return p == 1 ? sum_cts(cts, 0, 6) : std::vector<double>(6, 0.0); }},
  };
  for (const VjpCase& vc : cases) {
    SCOPED_TRACE(vc.name);
    std::vector<std::vector<double>> xs, cts;
    for (int p = 0; p < n; ++p) {
      xs.push_back(values(x_of(p, vc.in)));
      cts.push_back(values(ct_of(p, vc.out)));
    }
    const Tensor x = x_of(r, vc.in), ct = ct_of(r, vc.out);
    auto fn = [&](const std::vector<Array>& a) { return std::vector<Array>{vc.fn(a[0])}; };
    const auto [outs, grads] = vjp(fn, {array(x)}, {array(ct)});
    const std::vector<double> dx = values(run(grads[0]));
    EXPECT_EQ(dx, vc.expected(r, xs, cts));
    // Finite differences of L = sum over ranks of <ct_r, fn(x_r)>, nudging element i of rank p.
    auto global_loss = [&](int p, int64_t i, double eps) {
      Tensor xp = x.clone();
      if (r == p) xp.data<double>()[i] += eps;
      return run(dist::all_sum(sum(vc.fn(array(xp)) * array(ct)))).item(0);
    };
    const double eps = 1e-4;
    for (int p = 0; p < n; ++p)
      for (int64_t i : {int64_t{0}, numel(vc.in) - 1}) {
        const double fd = (global_loss(p, i, eps) - global_loss(p, i, -eps)) / (2 * eps);
        const double analytic = run(dist::broadcast(array(Tensor::scalar<double>(dx[static_cast<size_t>(i)])), p)).item(0);
        EXPECT_NEAR(fd, analytic, 1e-6) << "rank " << p << ", element " << i;
      }
  }
}

TEST_F(DistributedRanks, MismatchedShapesAreReportedOnEveryRankNotDeadlocked) {
  const Tensor x = operand(r, {2, r == 0 ? int64_t{3} : int64_t{4}}, DType::Float32);
  const std::string e = error_of([&] { dist::all_reduce(x, dist::ReduceOp::Sum); });
  EXPECT_NE(e.find("the ranks run different collectives: rank 0 runs all_reduce(sum)"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 runs all_reduce(sum) #"), std::string::npos) << e;
  EXPECT_NE(e.find("of float32[2, 4]"), std::string::npos) << e;
  EXPECT_NE(e.find("(rank " + std::to_string(r) + " of "), std::string::npos) << e;
  // A different collective on one rank is named too, and the group stays usable afterwards.
  const Tensor y = operand(r, {static_cast<int64_t>(n)}, DType::Float32);
  const std::string e2 = error_of([&] { r == 1 ? dist::all_gather(y) : dist::all_reduce(y, dist::ReduceOp::Max); });
  EXPECT_NE(e2.find("rank 1 runs all_gather #"), std::string::npos) << e2;
  EXPECT_EQ(values(dist::all_reduce(operand(0, {2}, DType::Float32), dist::ReduceOp::Sum))[1], 5.0 * n);
}

TEST_F(DistributedRanks, ReduceScatterRefusesALeadingDimensionNotDivisibleBySize) {
  const Tensor x = operand(r, {static_cast<int64_t>(n) + 1, 2}, DType::Float32);
  const std::string e = error_of([&] { dist::reduce_scatter(x); });
  EXPECT_NE(e.find("must be divisible by the group's size (" + std::to_string(n) + ")"), std::string::npos) << e;
}

TEST_F(DistributedRanks, AGraphBuiltForAnotherGroupSizeIsRefused) {
  const Array x = array(operand(r, {2}, DType::Float32));
  const std::string e = error_of([&] { run(op("all_reduce", {x}, {{"group_size", int64_t{n + 1}}})); });
  EXPECT_NE(e.find("built for a group of " + std::to_string(n + 1) + " ranks"), std::string::npos) << e;
  dist::barrier();
}

// ------------------------------------------------------------------ faults (one mpirun each)

class DistributedFaults : public DistributedRanks {};

// Rank 1 never reaches the collective (it raised and went on): the others fail within the
// timeout, naming it, and the group refuses further collectives.
TEST_F(DistributedFaults, ALateRankIsNamedWithinTheTimeout) {
  dist::set_timeout(2);
  if (r == 1) return;
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { dist::all_reduce(operand(r, {4}, DType::Float32), dist::ReduceOp::Sum); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e.find("rank 1 did not reach all_reduce(sum) #"), std::string::npos) << e;
  EXPECT_NE(e.find("within 2 s"), std::string::npos) << e;
  EXPECT_LT(waited, 10.0);
  EXPECT_NE(error_of([] { dist::barrier(); }).find("unusable after an earlier failure"), std::string::npos);
  EXPECT_EQ(dist::rank(), r);  // local questions still answer
}

// Rank 1 dies: the job ends (mpirun names the rank; or the others' timeout does) instead of hanging.
TEST_F(DistributedFaults, AKilledRankEndsTheJob) {
  dist::set_timeout(10);
  if (r == 1) std::raise(SIGKILL);
  const std::string e = error_of([&] { dist::all_reduce(operand(r, {4}, DType::Float32), dist::ReduceOp::Sum); });
  std::printf("rank %d: %s\n", r, e.c_str());
  EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace ingot
