// The native CPU backend benchmark (issue 3), every figure measured in this one run:
//   1. gelu (erf form) on a 32x1000x4096 float32 array: CpuBackend vs ReferenceBackend, and a
//      memcpy of the same bytes, so the achieved GB/s (read + write) sits beside memcpy's. Each
//      evaluate returns a new output tensor; the honest baseline is a memcpy into a new tensor
//      each time too. "warm": the buffer cache (set_buffer_cache_limit) recycles the previous
//      output's pages; "fresh": cache off, every output is new memory (page faults);
//   2. ExampleMLP (batch 128) and ExampleCNN (batch 32, 3x224x224) forward, inference:
//      CpuBackend vs ReferenceBackend, achieved GFLOP/s, and compile time cold (empty cache
//      directory), warm in memory (second compile in the process), warm from disk (in-memory
//      cache cleared) and warm from disk in a fresh child process;
//   3. the library GEMM peak: one 2048x2048x2048 float32 matmul through CpuBackend (OpenBLAS);
//   4. per model: the compiler's planned peak (memory_plan) beside the arena the CPU backend
//      actually runs with (its materialized buffers, planned in its own schedule).
// Timings are medians of a few repetitions after one warm-up (the reference backend's large
// cases run once, without warm-up). Nothing here asserts timing.
//
//   ./scripts/bench.sh            (builds, runs this, runs the Python peers, rewrites README)
//   build-bench/bench_cpu [--quick] [bench/results/cpu.json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cache.h"
#include "backends/cpu/executable.h"
#include "backends/cpu/toolchain.h"
#include "compiler/memory_plan.h"
#include "compiler/passes/passes.h"
#include "bench_util.h"
#include "dense_work.h"
#include "ingot/ingot.h"
#include "ingot/models.h"

using namespace ingot;
using namespace ingot::bench;

namespace {

constexpr int kThreads = 2;

CpuBackend cpu_backend(const std::string& cache_dir) {
  CpuBackend::CpuOptions o;
  o.cache_dir = cache_dir;
  o.num_threads = kThreads;
  return CpuBackend(o);
}

Tensor filled(Shape shape, double scale) {
  Tensor t(DType::Float32, std::move(shape));
  float* p = t.data<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(scale * std::sin(0.37 * static_cast<double>(i % 100003)));
  return t;
}

// ---- the models ----------------------------------------------------------------------------

Model gelu_model() {
  Model m;
  Connection x = m.input("x");
  m.expose(apply("gelu", x), "y");
  return m;
}

struct CompileTimes {
  double cold_ms = 0, warm_memory_ms = 0, warm_disk_ms = 0, warm_disk_child_ms = -1;
  bool disk_hit = false;
};

// Child-process mode: one compile against an existing cache directory; prints its milliseconds.
double compile_once_ms(const std::string& which, const std::string& dir, CompileOptions o) {
  const Model m = example_model(which);
  auto t0 = Clock::now();
  PhysicalModel pm = compile(m, cpu_backend(dir), o);
  return ms_since(t0);
}

CompileOptions model_options(const std::string& which, int64_t batch) {
  CompileOptions o;
  o.inference = true;
  o.shapes["input"] = which == "mlp" ? ShapeTemplate{batch, 784} : ShapeTemplate{batch, 3, 224, 224};
  return o;
}

CompileTimes compile_times(const std::string& which, const Model& model, const CompileOptions& o,
                           const std::string& self, int64_t batch, PhysicalModel* out) {
  CompileTimes ct;
  const std::string dir = fresh_dir(which);
  cpu::clear_memory_cache();  // a library with the same key built earlier would be a memory hit
  auto t0 = Clock::now();
  *out = compile(model, cpu_backend(dir), o);
  ct.cold_ms = ms_since(t0);
  t0 = Clock::now();
  { PhysicalModel again = compile(model, cpu_backend(dir), o); }
  ct.warm_memory_ms = ms_since(t0);
  std::vector<double> disk;
  for (int i = 0; i < 3; ++i) {
    cpu::clear_memory_cache();
    const int before = CpuBackend::compile_count();
    t0 = Clock::now();
    { PhysicalModel again = compile(model, cpu_backend(dir), o); }
    disk.push_back(ms_since(t0));
    ct.disk_hit = CpuBackend::compile_count() == before;
  }
  ct.warm_disk_ms = median(disk);
  // A fresh process: nothing of this one's caches (dlopen handles, memoized toolchain) helps it.
  std::vector<double> child;
  for (int i = 0; i < 3; ++i) {
    const std::string cmd = "'" + self + "' --compile-once " + which + " " + std::to_string(batch) + " '" + dir + "'";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) break;
    char buf[256] = {0};
    std::string text;
    while (fgets(buf, sizeof buf, p)) text += buf;
    if (pclose(p) != 0) break;
    child.push_back(std::atof(text.c_str()));
  }
  if (!child.empty()) ct.warm_disk_child_ms = median(child);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return ct;
}

struct ModelRow {
  std::string name;
  double flops = 0;
  double cpu_ms = 0, ref_ms = 0, max_abs_diff = 0;
  int cpu_reps = 0, ref_reps = 0;
  CompileTimes ct;
  // Memory: the compiler's plan (all intermediates, node order) and the CPU backend's arena
  // (only the buffers its fused kernels materialize, in its schedule).
  int64_t planned_peak = 0, lower_bound = 0, unplanned = 0, arena = 0, arena_lower_bound = 0;
  std::string conv_impls;
};

ModelRow bench_model(const std::string& which, const std::string& label, int64_t batch, int cpu_reps,
                     int ref_reps, const std::string& self) {
  ModelRow r;
  r.name = label;
  r.flops = which == "mlp" ? mlp_flops(batch) : cnn_flops(batch, 224);
  const Model model = example_model(which);
  const CompileOptions o = model_options(which, batch);
  PhysicalModel cpu = compile(model, ReferenceBackend(), o);  // placeholder, replaced below
  std::cerr << "[bench_cpu] " << label << ": compile times\n";
  r.ct = compile_times(which, model, o, self, batch, &cpu);
  PhysicalModel ref = compile(model, ReferenceBackend(), o);
  const TensorMap params = ref.randomize_params(1);
  const Tensor x = which == "mlp" ? filled({batch, 784}, 1.0) : filled({batch, 3, 224, 224}, 1.0);
  const TensorMap in = {{"input", x}};
  Tensor y_cpu, y_ref;
  std::cerr << "[bench_cpu] " << label << ": cpu x" << cpu_reps << "\n";
  r.cpu_ms = time_ms([&] { y_cpu = cpu.evaluate(params, in).at("output"); }, cpu_reps);
  r.cpu_reps = cpu_reps;
  std::cerr << "[bench_cpu] " << label << ": reference x" << ref_reps << "\n";
  r.ref_ms = time_ms([&] { y_ref = ref.evaluate(params, in).at("output"); }, ref_reps, ref_reps > 1 ? 1 : 0);
  r.ref_reps = ref_reps;
  r.max_abs_diff = max_abs_diff(y_cpu, y_ref);
  const MemoryPlan& mp = cpu.memory_plan();
  r.planned_peak = mp.planned_peak_bytes;
  r.lower_bound = mp.lower_bound_bytes;
  r.unplanned = mp.unplanned_bytes;
  const std::string dir = fresh_dir(which + "-plan");
  std::unique_ptr<Executable> exe =
      cpu::lower_with_plan(cpu.graph(), fusion_plan_for(cpu.graph(), o), cpu_backend(dir).options(), false);
  const cpu::ExecutionPlan ep = cpu::execution_plan(*exe, {x.shape()});
  r.arena = ep.placement.arena_bytes;
  r.arena_lower_bound = ep.placement.lower_bound_bytes;
  // One entry per kernel name with its count (batch chunks repeat each conv).
  std::vector<std::pair<std::string, int>> kernels;
  for (const std::string& c : ep.conv_implementations) {
    auto it = std::find_if(kernels.begin(), kernels.end(), [&](const auto& k) { return k.first == c; });
    if (it == kernels.end()) kernels.emplace_back(c, 1);
    else ++it->second;
  }
  for (const auto& [name, n] : kernels)
    r.conv_impls += (r.conv_impls.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string self = "/proc/self/exe";
  {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) self.assign(buf, static_cast<size_t>(n));
  }
  if (argc == 5 && std::string(argv[1]) == "--compile-once") {
    const int64_t batch = std::atoll(argv[3]);
    std::printf("%.4f\n", compile_once_ms(argv[2], argv[4], model_options(argv[2], batch)));
    return 0;
  }
  bool quick = false;
  std::string json_path = "bench/results/cpu.json";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = true;
    else json_path = argv[i];
  }
  setenv("OMP_NUM_THREADS", std::to_string(kThreads).c_str(), 0);
  setenv("OPENBLAS_NUM_THREADS", std::to_string(kThreads).c_str(), 0);

  // ---- 1. gelu vs memcpy ----
  const Shape gshape = quick ? Shape{4, 1000, 4096} : Shape{32, 1000, 4096};
  const Tensor gx = filled(gshape, 3.0);
  const double gbytes = static_cast<double>(gx.nbytes());
  const std::string gdir = fresh_dir("gelu");
  CompileOptions go;
  go.shapes["x"] = ShapeTemplate(gshape.begin(), gshape.end());
  std::cerr << "[bench_cpu] gelu: compile\n";
  PhysicalModel gcpu = compile(gelu_model(), cpu_backend(gdir), go);
  PhysicalModel gref = compile(gelu_model(), ReferenceBackend(), go);
  Tensor gy_cpu, gy_ref;
  std::cerr << "[bench_cpu] gelu: cpu\n";
  const int gelu_reps = 5;
  const double gelu_cpu_ms = time_ms([&] { gy_cpu = gcpu.evaluate({}, {{"x", gx}}).at("y"); }, gelu_reps);
  set_buffer_cache_limit(0);  // every output new memory
  const double gelu_fresh_ms = time_ms([&] { gy_cpu = gcpu.evaluate({}, {{"x", gx}}).at("y"); }, 3);
  set_buffer_cache_limit(size_t{4} << 30);
  // The same kernel on an array that stays in the L3 cache (16 MiB in + out): the rate the math
  // alone allows, which bounds the streaming figure when gelu is compute-bound.
  const Shape cached_shape{512, 4096};
  CompileOptions gco;
  gco.shapes["x"] = ShapeTemplate(cached_shape.begin(), cached_shape.end());
  PhysicalModel gcached = compile(gelu_model(), cpu_backend(gdir), gco);
  const Tensor gx_cached = filled(cached_shape, 3.0);
  const double cached_bytes = static_cast<double>(gx_cached.nbytes());
  Tensor gy_cached;
  const double gelu_cached_ms = time_ms([&] { gy_cached = gcached.evaluate({}, {{"x", gx_cached}}).at("y"); }, 50);
  gy_cached = Tensor();
  const double gelu_cached_gbps = 2.0 * cached_bytes / (gelu_cached_ms * 1e-3) / 1e9;
  std::cerr << "[bench_cpu] gelu: reference x1\n";
  const double gelu_ref_ms = time_ms([&] { gy_ref = gref.evaluate({}, {{"x", gx}}).at("y"); }, 1, 0);
  const double gelu_diff = max_abs_diff(gy_cpu, gy_ref);
  gy_ref = Tensor();

  // memcpy of the same bytes: into a buffer already touched (the usual bandwidth figure), on one
  // thread and split over kThreads threads; and into a fresh allocation each time (what an
  // evaluate that returns a new output tensor also pays: page faults on first touch).
  std::cerr << "[bench_cpu] memcpy\n";
  const size_t nbytes = gx.nbytes();
  std::unique_ptr<char[]> dst(new char[nbytes]);
  std::memset(dst.get(), 1, nbytes);
  const char* src = static_cast<const char*>(gx.raw_data());
  const double memcpy1_ms = time_ms([&] { std::memcpy(dst.get(), src, nbytes); }, 5);
  auto par_copy = [&](char* d) {
    std::vector<std::thread> ts;
    const size_t chunk = (nbytes + kThreads - 1) / kThreads;
    for (int t = 0; t < kThreads; ++t) {
      const size_t b = t * chunk, e = std::min(nbytes, b + chunk);
      ts.emplace_back([=] { std::memcpy(d + b, src + b, e - b); });
    }
    for (auto& t : ts) t.join();
  };
  const double memcpy2_ms = time_ms([&] { par_copy(dst.get()); }, 5);
  // Into a new tensor each call: the same allocation path as an evaluate's output.
  Tensor copy_out;
  auto copy_into_new_tensor = [&] {
    Tensor t = Tensor::uninitialized(DType::Float32, gshape);
    par_copy(static_cast<char*>(t.raw_data()));
    copy_out = t;  // the previous one is freed here, as an evaluate's previous output is
  };
  const double memcpy_warm_ms = time_ms(copy_into_new_tensor, 5);
  set_buffer_cache_limit(0);
  const double memcpy_fresh_ms = time_ms(copy_into_new_tensor, 3);
  set_buffer_cache_limit(size_t{4} << 30);
  copy_out = Tensor();
  dst.reset();
  auto gbps = [&](double ms) { return 2.0 * gbytes / (ms * 1e-3) / 1e9; };  // read + write
  const double memcpy_best_ms = std::min(memcpy1_ms, memcpy2_ms);

  // ---- 2. models ----
  std::vector<ModelRow> rows;
  rows.push_back(bench_model("mlp", "mlp (batch 128)", 128, quick ? 5 : 20, quick ? 3 : 5, self));
  const int64_t cnn_batch = quick ? 2 : 32;
  rows.push_back(bench_model("cnn", quick ? "cnn (batch 2, 3x224x224)" : "cnn (batch 32, 3x224x224)", cnn_batch,
                             quick ? 2 : 3, 1, self));

  // ---- 3. GEMM peak ----
  const int64_t gn = quick ? 1024 : 2048;
  std::cerr << "[bench_cpu] gemm " << gn << "^3\n";
  const GemmPeak gemm = gemm_peak(cpu_backend(gdir), gn);
  std::error_code ec;
  std::filesystem::remove_all(gdir, ec);

  // ---- print ----
  const cpu::Toolchain tc = cpu::find_toolchain("");
  std::printf("machine: %s, %u hardware threads; %d threads used\n", read_cpu_model().c_str(),
              std::thread::hardware_concurrency(), kThreads);
  std::printf("compiler: %s; BLAS: %s\n\n", tc.version.c_str(), tc.openblas.empty() ? "none" : tc.openblas.c_str());
  std::printf("gelu (erf) %s float32 (%.0f MiB per array)\n", to_string(gshape).c_str(), gbytes / (1 << 20));
  std::printf("  %-34s %10.2f ms  %7.2f GB/s\n", "ingot cpu", gelu_cpu_ms, gbps(gelu_cpu_ms));
  std::printf("  %-34s %10.2f ms  %7.2f GB/s  (%.1fx cpu)\n", "ingot reference (1 rep)", gelu_ref_ms, gbps(gelu_ref_ms),
              gelu_ref_ms / gelu_cpu_ms);
  std::printf("  %-34s %10.2f ms  %7.2f GB/s\n", "memcpy, 1 thread", memcpy1_ms, gbps(memcpy1_ms));
  std::printf("  %-34s %10.2f ms  %7.2f GB/s\n", "memcpy, 2 threads", memcpy2_ms, gbps(memcpy2_ms));
  std::printf("  %-34s %10.2f ms  %7.2f GB/s\n", "memcpy, 2 threads, new tensor (warm)", memcpy_warm_ms, gbps(memcpy_warm_ms));
  std::printf("  %-34s %10.2f ms  %7.2f GB/s\n", "ingot cpu, cache off (fresh)", gelu_fresh_ms, gbps(gelu_fresh_ms));
  std::printf("  %-34s %10.3f ms  %7.2f GB/s  (%.1f G elements/s: the math's ceiling)\n", "ingot cpu, [512, 4096] in L3",
              gelu_cached_ms, gelu_cached_gbps, gelu_cached_gbps / 8.0);
  std::printf("  %-34s %10.2f ms  %7.2f GB/s\n", "memcpy, new tensor, cache off", memcpy_fresh_ms, gbps(memcpy_fresh_ms));
  std::printf("  cpu / memcpy into a new tensor: warm %.1f%% (target >= 80%%), fresh %.1f%%; vs memcpy into a reused "
              "buffer %.1f%%; max|cpu-ref| %.2e\n\n",
              100.0 * memcpy_warm_ms / gelu_cpu_ms, 100.0 * memcpy_fresh_ms / gelu_fresh_ms,
              100.0 * memcpy_best_ms / gelu_cpu_ms, gelu_diff);
  std::printf("%-28s %10s %8s %10s %8s %9s %10s %10s %10s %10s %9s\n", "model", "cpu ms", "GFLOP/s", "ref ms",
              "ref/cpu", "max diff", "cold ms", "warm mem", "warm disk", "warm proc", "disk hit");
  for (const ModelRow& r : rows)
    std::printf("%-28s %10.2f %8.2f %10.2f %8.1f %9.2e %10.1f %10.3f %10.3f %10.3f %9s\n", r.name.c_str(), r.cpu_ms,
                gflops_at(r.flops, r.cpu_ms), r.ref_ms, r.ref_ms / r.cpu_ms, r.max_abs_diff, r.ct.cold_ms,
                r.ct.warm_memory_ms, r.ct.warm_disk_ms, r.ct.warm_disk_child_ms, r.ct.disk_hit ? "yes" : "NO");
  std::printf("\n%-28s %14s %14s %14s %14s %14s  %s\n", "memory (MiB)", "planned peak", "lower bound", "unplanned",
              "cpu arena", "arena lower b.", "conv2d kernels (oneDNN)");
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  for (const ModelRow& r : rows)
    std::printf("%-28s %14.2f %14.2f %14.2f %14.2f %14.2f  %s\n", r.name.c_str(), mib(r.planned_peak), mib(r.lower_bound),
                mib(r.unplanned), mib(r.arena), mib(r.arena_lower_bound), r.conv_impls.empty() ? "-" : r.conv_impls.c_str());
  std::printf("\nlibrary GEMM peak (matmul %lldx%lldx%lld through CpuBackend): %.2f ms, %.2f GFLOP/s\n",
              static_cast<long long>(gn), static_cast<long long>(gn), static_cast<long long>(gn), gemm.ms, gemm.gflops);

  // ---- JSON ----
  std::ostringstream js;
  js.precision(6);
  js << "{\n  \"tool\": \"bench_cpu\",\n  \"quick\": " << (quick ? "true" : "false") << ",\n";
  js << "  \"measured_utc\": " << measured_utc_json() << ",\n  \"machine\": " << machine_json(kThreads) << ",\n";
  js << "  \"versions\": " << versions_json({{"compiler", tc.version}, {"openblas", tc.openblas}}) << ",\n";
  js << "  \"gelu\": {\"shape\": " << json_str(to_string(gshape)) << ", \"bytes_per_array\": " << gx.nbytes()
     << ", \"cpu_ms\": " << gelu_cpu_ms << ", \"cpu_reps\": " << gelu_reps << ", \"reference_ms\": " << gelu_ref_ms
     << ", \"reference_reps\": 1, \"cpu_gbps\": " << gbps(gelu_cpu_ms) << ", \"memcpy_1t_ms\": " << memcpy1_ms
     << ", \"memcpy_2t_ms\": " << memcpy2_ms << ", \"memcpy_2t_fresh_dst_ms\": " << memcpy_fresh_ms
     << ", \"memcpy_best_gbps\": " << gbps(memcpy_best_ms) << ", \"memcpy_fresh_dst_gbps\": " << gbps(memcpy_fresh_ms)
     << ", \"memcpy_new_tensor_warm_ms\": " << memcpy_warm_ms << ", \"memcpy_new_tensor_warm_gbps\": " << gbps(memcpy_warm_ms)
     << ", \"cpu_fresh_ms\": " << gelu_fresh_ms << ", \"cpu_fresh_gbps\": " << gbps(gelu_fresh_ms)
     << ", \"cpu_in_cache_shape\": " << json_str(to_string(cached_shape)) << ", \"cpu_in_cache_ms\": " << gelu_cached_ms
     << ", \"cpu_in_cache_gbps\": " << gelu_cached_gbps
     << ", \"fraction_of_memcpy\": " << memcpy_warm_ms / gelu_cpu_ms
     << ", \"fraction_of_memcpy_fresh\": " << memcpy_fresh_ms / gelu_fresh_ms
     << ", \"fraction_of_memcpy_reused_buffer\": " << memcpy_best_ms / gelu_cpu_ms << ", \"max_abs_diff_vs_reference\": " << gelu_diff
     << "},\n";
  js << "  \"models\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ModelRow& r = rows[i];
    js << "    {\"model\": " << json_str(r.name) << ", \"flops\": " << r.flops << ", \"cpu_ms\": " << r.cpu_ms
       << ", \"cpu_reps\": " << r.cpu_reps << ", \"cpu_gflops\": " << gflops_at(r.flops, r.cpu_ms)
       << ", \"reference_ms\": " << r.ref_ms << ", \"reference_reps\": " << r.ref_reps
       << ", \"max_abs_diff_vs_reference\": " << r.max_abs_diff << ", \"compile_cold_ms\": " << r.ct.cold_ms
       << ", \"compile_warm_memory_ms\": " << r.ct.warm_memory_ms << ", \"compile_warm_disk_ms\": " << r.ct.warm_disk_ms
       << ", \"compile_warm_disk_child_process_ms\": " << r.ct.warm_disk_child_ms
       << ", \"warm_disk_was_cache_hit\": " << (r.ct.disk_hit ? "true" : "false")
       << ", \"planned_peak_bytes\": " << r.planned_peak << ", \"lower_bound_bytes\": " << r.lower_bound
       << ", \"unplanned_bytes\": " << r.unplanned << ", \"cpu_arena_bytes\": " << r.arena
       << ", \"cpu_arena_lower_bound_bytes\": " << r.arena_lower_bound << ", \"conv2d_kernels\": " << json_str(r.conv_impls)
       << "}"
       << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  js << "  ],\n  \"gemm\": {\"n\": " << gn << ", \"ms\": " << gemm.ms << ", \"gflops\": " << gemm.gflops << "},\n";
  // Every ratio the README states, precomputed (make_table.py adds the peers' in summary.json).
  js << "  \"ratios\": {\"gelu_reference_over_cpu\": " << json_num(gelu_ref_ms / gelu_cpu_ms)
     << ", \"gelu_fraction_of_memcpy\": " << json_num(memcpy_warm_ms / gelu_cpu_ms)
     << ", \"gelu_fraction_of_memcpy_fresh\": " << json_num(memcpy_fresh_ms / gelu_fresh_ms);
  for (const ModelRow& r : rows) {
    const std::string k = r.name.substr(0, r.name.find(' '));
    js << ", \"" << k << "_reference_over_cpu\": " << json_num(r.ref_ms / r.cpu_ms) << ", \"" << k
       << "_fraction_of_gemm_peak\": " << json_num(gflops_at(r.flops, r.cpu_ms) / gemm.gflops) << ", \"" << k
       << "_planned_over_lower_bound\": " << json_num(static_cast<double>(r.planned_peak) / static_cast<double>(r.lower_bound))
       << ", \"" << k << "_planned_over_unplanned\": "
       << json_num(static_cast<double>(r.planned_peak) / static_cast<double>(r.unplanned));
  }
  js << "}\n}\n";
  std::filesystem::create_directories(std::filesystem::path(json_path).parent_path().empty()
                                          ? std::filesystem::path(".")
                                          : std::filesystem::path(json_path).parent_path(),
                                      ec);
  std::ofstream(json_path) << js.str();
  std::cout << "\nwrote " << json_path << "\n";
  return 0;
}
