// Where and how the CPU backend builds, as a user sees it: the build command `verbose` prints
// (run by hand on the file_path file) and the cache directory it falls back to.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/cpu/cache.h"
#include "backends/cpu/toolchain.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::TempDir;

// A script standing in for the compiler: `--version` prints `version` and counts its runs.
std::string fake_compiler(const std::string& dir, const std::string& version) {
  const std::string path = dir + "/fake-c++";
  std::ofstream(path) << "#!/bin/sh\necho run >> " << dir << "/runs\necho '" << version << "'\n";
  EXPECT_EQ(::chmod(path.c_str(), 0755), 0);
  return path;
}

int runs(const std::string& dir) {
  std::ifstream in(dir + "/runs");
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// The compiler's version is part of every cache key. A new process reads it from the memo in the
// cache directory instead of running `--version`, while the compiler file is the one the memo
// names; a changed compiler, or a memo that is not one, runs it again.
TEST(CpuBuildEnv, CompilerVersionIsMemoizedUntilTheCompilerChanges) {
  TempDir bin("ingot-fake-cc"), first("ingot-memo"), second("ingot-memo"), third("ingot-memo"), fourth("ingot-memo");
  const std::string cc = fake_compiler(bin.path, "fake c++ 1.0");
  // The cache directory need not exist yet (the first compile into it creates it).
  EXPECT_EQ(cpu::find_toolchain(cc, first.path + "/new").version, "fake c++ 1.0");
  EXPECT_EQ(runs(bin.path), 1);
  std::vector<fs::path> memos;
  for (const auto& e : fs::directory_iterator(first.path + "/new")) memos.push_back(e.path());
  ASSERT_EQ(memos.size(), 1u);
  // Another directory holding the same memo (what a new process finds): no run.
  fs::copy_file(memos[0], second.path + "/" + memos[0].filename().string());
  EXPECT_EQ(cpu::find_toolchain(cc, second.path).version, "fake c++ 1.0");
  EXPECT_EQ(runs(bin.path), 1);
  // The compiler replaced (new contents, size and time): the memo no longer applies.
  ::usleep(10000);
  fake_compiler(bin.path, "fake c++ 2.0.1");
  fs::copy_file(memos[0], third.path + "/" + memos[0].filename().string());
  EXPECT_EQ(cpu::find_toolchain(cc, third.path).version, "fake c++ 2.0.1");
  EXPECT_EQ(runs(bin.path), 2);
  // A damaged memo is not read.
  std::ofstream(fourth.path + "/" + memos[0].filename().string()) << "ingot-toolchain 1\n" << cc << "\ngarbage\n";
  EXPECT_EQ(cpu::find_toolchain(cc, fourth.path).version, "fake c++ 2.0.1");
  EXPECT_EQ(runs(bin.path), 3);
}

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

// The error private_cache_dir(root) raises, or "" when it accepts the directory.
std::string refusal(const std::string& root) {
  try {
    cpu::private_cache_dir(root);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(CpuBuildEnv, PrivateCacheDirIsOursAloneOrRefused) {
  TempDir root("ingot-private");
  const std::string dir = root.path + "/ingot-cache-" + std::to_string(::geteuid());
  EXPECT_EQ(cpu::private_cache_dir(root.path), dir);
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(refusal(root.path), "");  // it exists and is ours: accepted again

  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // planted world-writable
  std::string err = refusal(root.path);
  EXPECT_TRUE(Contains(err, "refusing the cache directory '" + dir + "': other users can write to it (mode 777)"));
  EXPECT_TRUE(Contains(err, "$INGOT_CACHE_DIR"));
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  EXPECT_TRUE(Contains(refusal(root.path), "(mode 770)"));
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);

  if (::geteuid() == 0) {  // only root can give the directory away
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    EXPECT_TRUE(Contains(refusal(root.path), "it belongs to user 65534, not to this user (0)"));
  }
  fs::remove_all(dir);
  fs::create_directory_symlink(root.path, dir);  // a link to a directory someone else chose
  EXPECT_TRUE(Contains(refusal(root.path), "it is not a directory"));
}

// With none of $INGOT_CACHE_DIR, $XDG_CACHE_HOME and $HOME (in a child process, so the test's
// environment is untouched) the cache goes to the per-user /tmp/ingot-cache-<uid>.
TEST(CpuBuildEnv, NoHomeFallsBackToAPerUserTmpDir) {
  const std::string want = "/tmp/ingot-cache-" + std::to_string(::geteuid());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (const char* v : {"INGOT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) ::unsetenv(v);
    int status = 1;
    try {
      status = cpu::default_cache_dir() == want ? 0 : 2;
    } catch (...) {
      status = 3;
    }
    ::_exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: another directory, 3: refused";
  struct stat st {};
  ASSERT_EQ(::lstat(want.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace ingot
