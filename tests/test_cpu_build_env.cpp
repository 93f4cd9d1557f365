// Where and how the CPU backend builds, as a user sees it: the build command `verbose` prints
// (run by hand on the file_path file) and the cache directory it falls back to.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The printed command builds the file_path file, not the cache's copy, and builds it right: run
// through the shell in a fresh directory, it makes a library that dlopen loads with its entry.
TEST(CpuBuildEnv, VerboseBuildCommandBuildsTheFilePathFile) {
  TempDir dir("ingot-by-hand");
  Model m;
  Connection x = m.input("x");
  m.expose(apply("tanh", x * 2.0) + x, "y");
  CompileOptions o;
  o.shapes["x"] = {3, 5};
  o.verbose = true;
  o.file_path = dir.path + "/model.cpp";
  ::testing::internal::CaptureStderr();
  compile(m, CpuBackend(cpu_test::cpu_options()), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string marker = "[cpu] build the file_path file " + o.file_path + " by hand: ";
  const size_t at = err.find(marker);
  ASSERT_NE(at, std::string::npos) << err;
  const std::string command = err.substr(at + marker.size(), err.find('\n', at) - at - marker.size());
  EXPECT_NE(command.find(o.file_path), std::string::npos) << command;
  EXPECT_EQ(command.find(cpu_test::suite_cache_dir()), std::string::npos) << command;
  ASSERT_TRUE(fs::exists(o.file_path));
  const std::string library = dir.path + "/model.so";
  ASSERT_FALSE(fs::exists(library));
  ASSERT_EQ(std::system(("cd '" + dir.path + "' && " + command).c_str()), 0) << command;
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(handle, "ingot_entry"), nullptr);
  ::dlclose(handle);
}

}  // namespace
}  // namespace ingot
