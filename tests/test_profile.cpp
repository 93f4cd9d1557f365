// The profile recorder: records only while a session is active, from many threads, and the
// reference and CPU backends report one event per node / generated kernel.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "ingot/ingot.h"
#include "ingot/profile.h"
#include "op_test_util.h"
#include "runtime/atomic_file.h"

using namespace ingot;

namespace {

PhysicalModel small_mlp(const Backend& backend) {
  Model m;
  m += Linear(8);
  m += Relu();
  m += Linear(3);
  CompileOptions o;
  o.shapes = {{"input", {2, 5}}};
  return compile(m, backend, o);
}

}  // namespace

TEST(Profile, RecordsOnlyWhileActive) {
  EXPECT_FALSE(profile::active());
  profile::record("before", "test", "", 0, 10);  // no session: dropped
  profile::Session s;
  EXPECT_TRUE(profile::active());
  const int64_t t = profile::now_ns();
  profile::record("k", "test", "detail", t, t + 1000);
  { profile::Scope scope("scoped", "test"); }
  s.stop();
  EXPECT_FALSE(profile::active());
  profile::record("after", "test", "", 0, 10);
  const std::vector<profile::Event> ev = s.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].name, "k");
  EXPECT_EQ(ev[0].duration_ns, 1000);
  EXPECT_EQ(ev[0].detail, "detail");
  EXPECT_EQ(ev[1].name, "scoped");
}

TEST(Profile, OverlappingSessionsEachGetEvents) {
  profile::Session outer;
  profile::record("a", "test", "", 0, 5);
  {
    profile::Session inner;
    profile::record("b", "test", "", 0, 5);
    EXPECT_EQ(inner.events().size(), 1u);
  }
  EXPECT_TRUE(profile::active());
  EXPECT_EQ(outer.events().size(), 2u);
}

TEST(Profile, ThreadSafeAndRowsAggregate) {
  profile::Session s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 250; ++i) profile::record(t % 2 ? "odd" : "even", "test", "", 0, 2 + t % 2);
    });
  for (auto& th : threads) th.join();
  const auto rows = s.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "odd");  // 500 x 3 ns beats 500 x 2 ns
  EXPECT_EQ(rows[0].count, 500);
  EXPECT_EQ(rows[0].total_ns, 1500);
  EXPECT_NEAR(rows[0].share + rows[1].share, 1.0, 1e-12);
  EXPECT_NE(s.summary().find("odd"), std::string::npos);
}

TEST(Profile, ChromeTraceIsValidJson) {
  profile::Session s;
  profile::record("k\"1", "cpu", "from \xff scope", 1000, 3000);
  s.stop();
  ingot::testing::TempDir dir;
  s.write_chrome_trace(dir.path + "/trace.json");
  const auto j = nlohmann::json::parse(read_file(dir.path + "/trace.json"));
  ASSERT_EQ(j["traceEvents"].size(), 1u);
  EXPECT_EQ(j["traceEvents"][0]["name"], "k\"1");
  EXPECT_EQ(j["traceEvents"][0]["ph"], "X");
  EXPECT_DOUBLE_EQ(j["traceEvents"][0]["dur"].get<double>(), 2.0);
}

TEST(Profile, ReferenceBackendReportsEachNode) {
  PhysicalModel pm = small_mlp(ReferenceBackend());
  TensorMap params = pm.randomize_params(0);
  TensorMap in = {{"input", Tensor::full(DType::Float32, {2, 5}, 0.5)}};
  pm.evaluate(params, in);  // not recorded
  profile::Session s;
  pm.evaluate(params, in);
  s.stop();
  EXPECT_EQ(s.events().size(), pm.graph().nodes().size());
  for (const profile::Event& e : s.events()) EXPECT_EQ(e.category, "reference");
}

TEST(Profile, CpuBackendReportsEachKernel) {
  ingot::testing::TempDir cache;
  CpuBackend::CpuOptions o;
  o.cache_dir = cache.path;
  PhysicalModel pm = small_mlp(CpuBackend(o));
  TensorMap params = pm.randomize_params(0);
  TensorMap in = {{"input", Tensor::full(DType::Float32, {2, 5}, 0.5)}};
  const Tensor off = pm.evaluate(params, in).at("output");
  profile::Session s;
  const Tensor on = pm.evaluate(params, in).at("output");
  pm.evaluate(params, in);
  s.stop();
  EXPECT_TRUE(equal(off, on));
  const auto rows = s.rows();
  ASSERT_FALSE(rows.empty());
  int64_t events = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r.category, "cpu");
    EXPECT_EQ(r.count, 2) << r.name;
    EXPECT_EQ(r.name.rfind('k', 0), 0u) << r.name;  // generated kernel names, k0_...
    events += r.count;
  }
  EXPECT_EQ(events, static_cast<int64_t>(s.events().size()));
}
