// The `ingot` program, run as a user would run it.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

using namespace ingot::cli_test;

TEST(Cli, Help) {
  Result r = run_cli("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("ingot dump <model>"), std::string::npos);
  EXPECT_NE(r.output.find("ingot demo"), std::string::npos);
  EXPECT_EQ(run_cli("").status, 1);  // no command: usage, non-zero
}

TEST(Cli, DumpBundledModels) {
  Result r = run_cli("dump cnn");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("conv2d"), std::string::npos) << r.output;
  r = run_cli("dump mlp --shape input=8,784 --format json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.front(), '{');
  r = run_cli("dump mlp --format dot");
  EXPECT_NE(r.output.find("digraph"), std::string::npos) << r.output;
  r = run_cli("summary cnn");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("total parameters"), std::string::npos) << r.output;
}

TEST(Cli, SaveAndReloadJson) {
  std::string path = (std::filesystem::temp_directory_path() / ("ingot_cli_" + std::to_string(::getpid()) + ".json")).string();
  Result r = run_cli("save mlp " + path);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_cli("dump " + path + " --shape input=N,784");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("matmul"), std::string::npos) << r.output;
  std::filesystem::remove(path);
}

TEST(Cli, ErrorsAreClear) {
  Result r = run_cli("dump nosuchmodel");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("Unknown model 'nosuchmodel'"), std::string::npos) << r.output;
  r = run_cli("dump mlp --format xml");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("xml"), std::string::npos) << r.output;
  r = run_cli("dump cnn --shape input=N,3");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("Cannot infer shape"), std::string::npos) << r.output;
  r = run_cli("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos) << r.output;
  r = run_cli("dump mlp --bogus");
  EXPECT_NE(r.output.find("Unknown option '--bogus'"), std::string::npos) << r.output;
}

TEST(Cli, DemoComparesBackends) {
  Result r = run_cli("demo --batch 2");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* part : {"== mlp ==", "== cnn ==", "shapes:", "types:", "optimized graph:", "speedup",
                           "max |cpu - reference|",
                           "== train mlp ==", "== train cnn ==", "epoch 2/2 [", "samples/s", "accuracy reached"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
}

// Without a C++ compiler (none on PATH, $INGOT_CXX missing) the CPU backend cannot build: the error
// says so and names the way out, which then works.
TEST(Cli, NoCompilerNamesTheReferenceFallback) {
  const std::string env = "env INGOT_CXX=/nonexistent/ingot-no-cxx CXX= PATH=/nonexistent ";
  const std::string cli = std::string(INGOT_CLI_PATH);
  auto run_without_compiler = [&](const std::string& args) {
    return run_cli_as(env + cli + " " + args);
  };
  Result r = run_without_compiler("demo --batch 2");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no usable C++ compiler"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ingot demo --backend reference"), std::string::npos) << r.output;
  r = run_without_compiler("demo --batch 2 --backend reference");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* part : {"== mlp ==", "== cnn ==", "compile: reference", "== train cnn ==", "(reference backend)",
                           "accuracy reached"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  EXPECT_EQ(r.output.find("cpu cold"), std::string::npos) << r.output;
  r = run_cli("demo --backend gpu");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--backend expects reference or cpu, got 'gpu'"), std::string::npos) << r.output;
}
