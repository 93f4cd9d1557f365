// The CPU backend's kernel cache: hits skip the compiler, changed flags miss, corrupt entries are
// detected and rebuilt (never loaded), and concurrent builds (threads, processes) of the same
// model into one directory all succeed. Each test uses its own temporary cache directory.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backends/cpu/cache.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

extern char** environ;

using namespace ingot;
using ingot::testing::random_tensor;
using ingot::testing::TempDir;

namespace {

// A small graph y = tanh(x * w + 1); `salt` changes a constant so tests can make distinct models.
Graph small_graph(double salt = 1.0) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId w = g.add_input("w");
  ValueId c = g.add_constant("one", Tensor::full(DType::Float32, {}, salt));
  g.set_output("y", g.add_op("tanh", {g.add_op("add", {g.add_op("mul", {x, w}), c})}));
  infer_shapes(g, {{x, {"N", 8}, "", "x"}, {w, {8}, "", "w"}});
  infer_types(g);
  return g;
}

void expect_runs_right(const Executable& exe, const Graph& g) {
  Tensor x = random_tensor({3, 8}, 1), w = random_tensor({8}, 2);
  std::vector<Tensor> ins = {x, w};
  std::vector<Tensor> want = ReferenceBackend().lower(g, {})->run(ins);
  std::vector<Tensor> got = exe.run(ins);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(allclose(got[0], want[0], 1e-5, 1e-6)) << got[0].str() << " vs " << want[0].str();
}

CpuBackend::CpuOptions options_in(const std::string& dir) {
  CpuBackend::CpuOptions o;
  o.cache_dir = dir;
  return o;
}

std::vector<std::filesystem::path> files_with_ext(const std::string& dir, const std::string& ext) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ext && e.path().filename().string()[0] != '.') out.push_back(e.path());
  return out;
}

TEST(CpuCache, HitDoesNotInvokeTheCompiler) {
  TempDir dir("ingot-cpu-cache");
  Graph g = small_graph(1.25);
  const int before = CpuBackend::compile_count();
  auto a = CpuBackend(options_in(dir.path)).lower(g, {});
  EXPECT_EQ(CpuBackend::compile_count(), before + 1);
  auto b = CpuBackend(options_in(dir.path)).lower(g, {});  // memory hit
  EXPECT_EQ(CpuBackend::compile_count(), before + 1);
  cpu::clear_memory_cache();
  auto c = CpuBackend(options_in(dir.path)).lower(g, {});  // disk hit
  EXPECT_EQ(CpuBackend::compile_count(), before + 1);
  expect_runs_right(*a, g);
  expect_runs_right(*c, g);
  EXPECT_EQ(files_with_ext(dir.path, ".so").size(), 1u);
  EXPECT_EQ(files_with_ext(dir.path, ".manifest").size(), 1u);
  EXPECT_EQ(files_with_ext(dir.path, ".cpp").size(), 1u);
}

TEST(CpuCache, ChangedFlagsOrOptionsMiss) {
  TempDir dir("ingot-cpu-cache");
  Graph g = small_graph(1.5);
  const int before = CpuBackend::compile_count();
  CpuBackend::CpuOptions o = options_in(dir.path);
  CpuBackend(o).lower(g, {});
  o.extra_flags = {"-DINGOT_SOME_FLAG=1"};
  auto b = CpuBackend(o).lower(g, {});
  EXPECT_EQ(CpuBackend::compile_count(), before + 2);
  o.num_threads = 1;  // changes the generated source
  auto c = CpuBackend(o).lower(g, {});
  EXPECT_EQ(CpuBackend::compile_count(), before + 3);
  expect_runs_right(*b, g);
  expect_runs_right(*c, g);
  o.cache = false;  // no caching at all: always builds
  auto d = CpuBackend(o).lower(g, {});
  EXPECT_EQ(CpuBackend::compile_count(), before + 4);
  expect_runs_right(*d, g);
}

// CompileOptions::code_transformers rewrite the source before it is keyed and built: a
// transformed model is its own cache entry and runs what the transformer wrote; a transformer
// that throws or empties the source is an error naming it; the reference backend refuses them.
TEST(CpuCache, CodeTransformersRewriteWhatIsBuiltAndKeyed) {
  TempDir dir("ingot-cpu-cache");
  Graph g = small_graph(1.75);
  CompileOptions plain, tanh_to_sigmoid;
  tanh_to_sigmoid.code_transformers = {
      [](const std::string& s) {
        std::string out = s;
        const std::string from = "ig_vtanh(static_cast<float>", to = "ig_vsigmoid(static_cast<float>";
        const size_t at = out.rfind(from);  // the kernel's call, after the prelude's definitions
        EXPECT_NE(at, std::string::npos);
        return out.replace(at, from.size(), to);
      },
      [](const std::string& s) { return s + "\n// second transformer\n"; }};
  const int before = CpuBackend::compile_count();
  auto a = CpuBackend(options_in(dir.path)).lower(g, plain);
  auto b = CpuBackend(options_in(dir.path)).lower(g, tanh_to_sigmoid);
  EXPECT_EQ(CpuBackend::compile_count(), before + 2);  // two sources, two entries
  expect_runs_right(*a, g);
  EXPECT_NE(b->source().find("// second transformer"), std::string::npos);
  const std::vector<Tensor> ins = {random_tensor({3, 8}, 1), random_tensor({8}, 2)};
  const Tensor got = b->run(ins)[0], pre = a->run(ins)[0];  // sigmoid(u) = (1 + tanh(u / 2)) / 2, not tanh(u)
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float t = pre.data<float>()[i], u = std::atanh(t);
    EXPECT_NEAR(got.data<float>()[i], 1 / (1 + std::exp(-u)), 1e-4) << i;
  }
  CompileOptions throwing, emptying;
  throwing.code_transformers = {[](const std::string&) -> std::string { throw std::runtime_error("no thanks"); }};
  emptying.code_transformers = {[](const std::string& s) { return s; }, [](const std::string&) { return std::string(); }};
  using ingot::testing::Contains, ingot::testing::error_of;
  EXPECT_TRUE(Contains(error_of([&] { CpuBackend(options_in(dir.path)).lower(g, throwing); }),
                       "transformer 0 failed: no thanks"));
  EXPECT_TRUE(Contains(error_of([&] { CpuBackend(options_in(dir.path)).lower(g, emptying); }),
                       "transformer 1 returned empty source"));
  EXPECT_THROW(ReferenceBackend().lower(g, tanh_to_sigmoid), Error);
}

void corrupt_and_check(const std::function<void(const std::string& so, const std::string& manifest)>& damage, double salt) {
  TempDir dir("ingot-cpu-cache");
  Graph g = small_graph(salt);
  CpuBackend(options_in(dir.path)).lower(g, {});
  auto so = files_with_ext(dir.path, ".so"), man = files_with_ext(dir.path, ".manifest");
  ASSERT_EQ(so.size(), 1u);
  ASSERT_EQ(man.size(), 1u);
  damage(so[0].string(), man[0].string());
  cpu::clear_memory_cache();
  const int before = CpuBackend::compile_count();
  auto exe = CpuBackend(options_in(dir.path)).lower(g, {});
  EXPECT_EQ(CpuBackend::compile_count(), before + 1) << "the damaged entry must be rebuilt";
  expect_runs_right(*exe, g);
  cpu::clear_memory_cache();
  auto again = CpuBackend(options_in(dir.path)).lower(g, {});  // the rebuilt entry is good
  EXPECT_EQ(CpuBackend::compile_count(), before + 1);
  expect_runs_right(*again, g);
}

TEST(CpuCache, TruncatedLibraryIsRebuilt) {
  corrupt_and_check([](const std::string& so, const std::string&) { std::filesystem::resize_file(so, 100); }, 2.0);
}

TEST(CpuCache, OverwrittenLibraryOfSameSizeIsRebuilt) {
  corrupt_and_check([](const std::string& so, const std::string&) {
    const auto size = std::filesystem::file_size(so);
    std::ofstream(so, std::ios::binary | std::ios::trunc) << std::string(size, 'x');
  }, 2.5);
}

TEST(CpuCache, DamagedOrMissingManifestIsRebuilt) {
  corrupt_and_check([](const std::string&, const std::string& man) { std::ofstream(man, std::ios::trunc) << "garbage"; }, 3.0);
  corrupt_and_check([](const std::string&, const std::string& man) { std::filesystem::remove(man); }, 3.5);
  corrupt_and_check([](const std::string& so, const std::string&) { std::filesystem::remove(so); }, 3.75);
}

TEST(CpuCache, TwoThreadsCompileTheSameModel) {
  TempDir dir("ingot-cpu-cache");
  Graph g = small_graph(4.0);
  std::unique_ptr<Executable> a, b;
  std::string err;
  std::thread t1([&] {
    try { a = CpuBackend(options_in(dir.path)).lower(g, {}); } catch (const std::exception& e) { err += e.what(); }
  });
  std::thread t2([&] {
    try { b = CpuBackend(options_in(dir.path)).lower(g, {}); } catch (const std::exception& e) { err += e.what(); }
  });
  t1.join();
  t2.join();
  ASSERT_TRUE(err.empty()) << err;
  expect_runs_right(*a, g);
  expect_runs_right(*b, g);
}

// Run by TwoProcessesCompileTheSameModel in child processes (skipped otherwise).
TEST(CpuCache, HelperCompileInDir) {
  const char* dir = std::getenv("INGOT_CPU_CACHE_HELPER_DIR");
  if (dir == nullptr) GTEST_SKIP() << "helper for TwoProcessesCompileTheSameModel";
  Graph g = small_graph(5.0);
  const int before = CpuBackend::compile_count();
  auto exe = CpuBackend(options_in(dir)).lower(g, {});
  expect_runs_right(*exe, g);
  // Tell the parent whether this process ran the compiler.
  std::ofstream(std::string(dir) + "/.compiles-" + std::to_string(::getpid())) << CpuBackend::compile_count() - before;
}

TEST(CpuCache, TwoProcessesCompileTheSameModel) {
  if (std::getenv("INGOT_CPU_CACHE_HELPER_DIR") != nullptr) GTEST_SKIP();
  TempDir dir("ingot-cpu-cache");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> env_strings = {"INGOT_CPU_CACHE_HELPER_DIR=" + dir.path};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=CpuCache.HelperCompileInDir";
  std::vector<char*> argv = {const_cast<char*>(self.c_str()), filter.data(), nullptr};
  pid_t pids[2];
  for (pid_t& p : pids) {
    ASSERT_EQ(::posix_spawn(&p, self.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  }
  for (pid_t p : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(p, &status, 0), p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed, status " << status;
  }
  EXPECT_EQ(files_with_ext(dir.path, ".so").size(), 1u);
  // The per-key lock serializes them: one compiled, the other loaded what it wrote.
  int compiles = 0;
  for (pid_t p : pids) {
    std::ifstream in(dir.path + "/.compiles-" + std::to_string(p));
    int n = -1;
    ASSERT_TRUE(in >> n) << "child " << p << " left no compile count";
    compiles += n;
  }
  EXPECT_EQ(compiles, 1);
  // The entry is valid: a fresh lookup loads it without compiling.
  cpu::clear_memory_cache();
  const int before = CpuBackend::compile_count();
  Graph g = small_graph(5.0);
  auto exe = CpuBackend(options_in(dir.path)).lower(g, {});
  EXPECT_EQ(CpuBackend::compile_count(), before);
  expect_runs_right(*exe, g);
}

TEST(CpuCache, HashIsStable) {
  EXPECT_EQ(cpu::fnv1a128_hex(""), "6c62272e07bb014262b821756295c58d");
  EXPECT_EQ(cpu::fnv1a128_hex("a"), "d228cb696f1a8caf78912b704e4a8964");
  EXPECT_NE(cpu::fnv1a128_hex("ab"), cpu::fnv1a128_hex("ba"));
}

}  // namespace
