// CompileOptions::profile: every compile stage, the passes inside optimize and the CPU backend's
// steps inside lower, as nested spans written as JSON that is also a Chrome trace, or printed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "ingot/ingot.h"
#include "op_test_util.h"
#include "runtime/atomic_file.h"

using namespace ingot;
using ingot::testing::TempDir;

namespace {

CompileOptions profiled(const std::string& path) {
  CompileOptions o;
  o.shapes = {{"input", {4, 784}}};
  o.profile = true;
  o.profile_output = path;
  return o;
}

TEST(CompileProfile, StagesPassesAndBackendStepsAsAChromeTrace) {
  TempDir dir("ingot-compile-profile");
  const std::string path = dir.path + "/profile.json";
  compile(ExampleMLP(), CpuBackend(), profiled(path));
  const nlohmann::json j = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(j.at("format"), "ingot.compile_profile");
  std::set<std::string> names;
  for (const auto& s : j.at("stages")) names.insert(s.at("name").get<std::string>());
  for (const char* want : {"flatten", "resolve terminals", "shape inference", "type inference", "verify", "optimize",
                           "pass fusion", "pass dce", "memory planning", "lower", "cpu: generate C++",
                           "function generation"})
    EXPECT_TRUE(names.count(want)) << want;
  bool built = false;
  for (const std::string& n : names) built = built || n.rfind("cpu: build or load", 0) == 0;
  EXPECT_TRUE(built);
  // Each pass and backend step lies inside its stage, in time and in depth.
  const auto& stages = j.at("stages");
  double total = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& s = stages[i];
    EXPECT_GE(s.at("ms").get<double>(), 0.0);
    if (s.at("depth").get<int>() == 0) {
      total += s.at("ms").get<double>();
      continue;
    }
    size_t parent = i;
    while (parent > 0 && stages[parent].at("depth").get<int>() >= s.at("depth").get<int>()) --parent;
    EXPECT_EQ(stages[parent].at("depth").get<int>(), s.at("depth").get<int>() - 1) << s;
    EXPECT_GE(s.at("start_ms").get<double>(), stages[parent].at("start_ms").get<double>() - 1e-9) << s;
    EXPECT_LE(s.at("start_ms").get<double>() + s.at("ms").get<double>(),
              stages[parent].at("start_ms").get<double>() + stages[parent].at("ms").get<double>() + 1e-6) << s;
    const std::string name = s.at("name").get<std::string>();
    if (name.rfind("pass ", 0) == 0) {
      EXPECT_EQ(stages[parent].at("name"), "optimize");
    }
    if (name.rfind("cpu: ", 0) == 0) {
      EXPECT_EQ(stages[parent].at("name"), "lower");
    }
  }
  EXPECT_NEAR(j.at("total_ms").get<double>(), total, 1e-6);
  // The Chrome trace: one complete event per span, in microseconds.
  ASSERT_EQ(j.at("traceEvents").size(), stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& e = j.at("traceEvents")[i];
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_EQ(e.at("name"), stages[i].at("name"));
    EXPECT_NEAR(e.at("dur").get<double>(), stages[i].at("ms").get<double>() * 1e3, 1e-6);
  }
}

TEST(CompileProfile, WithoutAPathItPrintsATable) {
  ::testing::internal::CaptureStderr();
  compile(ExampleMLP(), ReferenceBackend(), profiled(""));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[ingot] compile profile (ms):"), std::string::npos) << err;
  EXPECT_NE(err.find("  pass fusion"), std::string::npos) << err;  // indented under optimize
}

TEST(CompileProfile, OffByDefaultAndBadValuesAreErrors) {
  ::testing::internal::CaptureStderr();
  CompileOptions o;
  o.shapes = {{"input", {4, 784}}};
  compile(ExampleMLP(), ReferenceBackend(), o);
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("compile profile"), std::string::npos);
  EXPECT_THROW(o.set("profile", "sometimes"), Error);
  o.set("profile", "true");
  o.set("profile_output", "/nonexistent-dir/x/profile.json");
  EXPECT_THROW(compile(ExampleMLP(), ReferenceBackend(), o), Error);  // names the path it cannot write
}

}  // namespace
