// Function compile and hot-path auto-compile benchmark (issue 6), every figure from this run:
//   1. the MLX compile example: gelu written with array ops, x * (1 + erf(x / sqrt 2)) / 2, on a
//      32x1000x4096 float32 array: eager (op by op on the reference backend) vs compile(fn)
//      (one fused CPU kernel); the first compiled call (trace + build, cold cache) on its own;
//   2. an eager MLP training loop (784 -> 256 -> 10, batch 128, softmax cross-entropy, SGD, the
//      backward written with array ops) without and with auto-compile (threshold 10): the
//      per-iteration time before and after the switch, the iteration it switched at and the
//      background build time; and the same step under compile(fn) with captured parameters.
// Medians after a warm-up; nothing here asserts timing. PyTorch eager / torch.compile run the
// same workloads in bench/peers.py (gelu, mlp_train), Python's ml.compile in bench/bench_fncompile.py.
//
//   ./scripts/bench.sh           (builds, runs this, the peers, rewrites the README table)
//   build-bench/bench_fncompile [--quick] [bench/results/fncompile.json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "../tests/array_mlp.h"
#include "bench_util.h"
#include "ingot/ingot.h"

using namespace ingot;
using namespace ingot::bench;

namespace {

constexpr int kThreshold = 10;  // INGOT_AUTO_COMPILE_THRESHOLD's default

// A config building with the CPU backend into its own (cold) cache directory.
CompileConfig config_with_cache(const std::string& dir) {
  CpuBackend::CpuOptions o;
  o.cache_dir = dir;
  CompileConfig c;
  c.backend = std::make_shared<CpuBackend>(o);
  return c;
}

Array gelu_ops(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

Tensor filled(Shape shape, double scale) {
  Tensor t(DType::Float32, std::move(shape));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(scale * std::sin(0.37 * static_cast<double>(i % 100003)));
  return t;
}

struct Loop {
  std::vector<double> iter_ms;
  int switched_at = -1;  // first iteration (0-based) that ran compiled
};

// Eager training steps; with auto-compile on, runs until `after` iterations ran compiled.
Loop train_loop(testing::MlpParams p, const Array& x, const Array& y, int min_iters, int after, int max_iters) {
  Loop loop;
  for (int i = 0; i < max_iters; ++i) {
    const int64_t compiled_before = auto_compile_stats().compiled_runs;
    auto t0 = Clock::now();
    Array loss = testing::mlp_sgd_step(p, x, y, 0.01f);
    eval({loss, p.w1, p.b1, p.w2, p.b2});
    loop.iter_ms.push_back(ms_since(t0));
    if (loop.switched_at < 0 && auto_compile_stats().compiled_runs > compiled_before) loop.switched_at = i;
    const bool enough_after = after == 0 || (loop.switched_at >= 0 && i - loop.switched_at + 1 >= after);
    if (i + 1 >= min_iters && enough_after) break;
  }
  return loop;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json_path = "bench/results/fncompile.json";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = true;
    else json_path = argv[i];
  }
  const std::string cache = fresh_dir("fncompile");

  // ---- 1. gelu
  const Shape gshape = quick ? Shape{4, 1000, 4096} : Shape{32, 1000, 4096};
  Array gx(filled(gshape, 3.0));
  set_compile_config(config_with_cache(cache));
  const double eager_gelu = time_ms([&] { eval(gelu_ops(gx)); }, quick ? 2 : 3);
  auto compiled_gelu = compile(gelu_ops);
  auto t0 = Clock::now();
  Tensor gy = compiled_gelu(gx).tensor();
  const double gelu_first = ms_since(t0);
  const double compiled_gelu_ms = time_ms([&] { compiled_gelu(gx).tensor(); }, quick ? 3 : 5);
  const double gelu_diff = max_abs_diff(gy, gelu_ops(gx).tensor());
  std::printf("gelu %s: eager %.2f ms, compile(fn) %.2f ms (%.2fx), first call %.1f ms, max |diff| %.1e\n",
              to_string(gshape).c_str(), eager_gelu, compiled_gelu_ms, eager_gelu / compiled_gelu_ms, gelu_first,
              gelu_diff);

  // ---- 2. MLP training loop
  const int64_t batch = 128;
  testing::MlpParams params = testing::init_mlp(784, 256, 10, 1);
  Array x(filled({batch, 784}, 1.0));
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = (i * 7) % 10;
  Array y = one_hot(Array(labels, {batch}), 10);
  eval(y);
  const int iters = quick ? 12 : 40;

  set_compile_config(config_with_cache(cache));
  Loop eager = train_loop(params, x, y, iters, 0, iters);
  const double eager_iter = median(eager.iter_ms);

  CompileConfig autoc = config_with_cache(cache);
  autoc.auto_compile = true;
  autoc.auto_compile_threshold = kThreshold;
  set_compile_config(autoc);
  reset_auto_compile();
  Loop hot = train_loop(params, x, y, iters, quick ? 5 : 20, 100000);
  wait_for_background_compiles();
  std::vector<double> before(hot.iter_ms.begin(), hot.iter_ms.begin() + std::max(0, hot.switched_at));
  std::vector<double> after(hot.iter_ms.begin() + std::max(0, hot.switched_at), hot.iter_ms.end());
  // The first compiled iteration loads the library; report the steady state after it.
  if (after.size() > 1) after.erase(after.begin());
  const double before_ms = median(before), after_ms = median(after);
  // Eager time from the iteration that queued the build to the first compiled one.
  double wait_ms = 0;
  for (int i = kThreshold - 1; i < hot.switched_at; ++i) wait_ms += hot.iter_ms[static_cast<size_t>(i)];
  std::printf("mlp train step (batch %lld): eager %.2f ms/iter; auto-compile: %.2f ms/iter before the switch, "
              "%.2f ms/iter after (%.2fx), switched at iteration %d (threshold %d, %.0f ms after the build started)\n",
              static_cast<long long>(batch), eager_iter, before_ms, after_ms, before_ms / after_ms, hot.switched_at + 1,
              kThreshold, wait_ms);

  set_compile_config(config_with_cache(cache));
  testing::MlpParams cp = params;
  auto step = compile([&](const Array& xb, const Array& yb) { return testing::mlp_sgd_step(cp, xb, yb, 0.01f); },
                      {.inputs = cp.all(), .outputs = cp.all()});
  t0 = Clock::now();
  step(x, y).tensor();
  const double step_first = ms_since(t0);
  const double step_ms = time_ms([&] { step(x, y).tensor(); }, iters);
  std::printf("mlp train step under compile(fn): %.2f ms/iter (first call %.1f ms)\n", step_ms, step_first);

  std::ostringstream js;
  js << "{\n  \"tool\": \"bench_fncompile\",\n  \"quick\": " << (quick ? "true" : "false") << ",\n"
     << "  \"measured_utc\": " << measured_utc_json() << ",\n"
     << "  \"machine\": " << machine_json(default_threads()) << ",\n"
     << "  \"versions\": " << versions_json() << ",\n"
     << "  \"gelu\": {\"shape\": \"" << to_string(gshape) << "\", \"eager_ms\": " << eager_gelu
     << ", \"compiled_ms\": " << compiled_gelu_ms << ", \"compiled_first_call_ms\": " << gelu_first
     << ", \"max_abs_diff\": " << gelu_diff << "},\n"
     << "  \"mlp_train\": {\"batch\": " << batch << ", \"eager_ms\": " << eager_iter
     << ", \"auto_before_ms\": " << before_ms << ", \"auto_after_ms\": " << after_ms
     << ", \"auto_threshold\": " << kThreshold << ", \"auto_switched_at_iteration\": " << hot.switched_at + 1
     << ", \"auto_wait_ms\": " << wait_ms
     << ", \"auto_iterations\": " << hot.iter_ms.size() << ", \"compiled_fn_ms\": " << step_ms
     << ", \"compiled_fn_first_call_ms\": " << step_first << "},\n"
     // Every ratio is eager time over the other path's time (above 1: faster than eager).
     << "  \"ratios\": {\"gelu_eager_over_compiled\": " << json_num(eager_gelu / compiled_gelu_ms)
     << ", \"mlp_train_eager_over_compiled_fn\": " << json_num(eager_iter / step_ms)
     << ", \"mlp_train_eager_over_auto_before\": " << json_num(eager_iter / before_ms)
     << ", \"mlp_train_eager_over_auto_after\": " << json_num(eager_iter / after_ms) << "}\n}\n";
  const std::filesystem::path out(json_path);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  std::ofstream(json_path) << js.str();
  std::cout << "wrote " << json_path << "\n";
  std::filesystem::remove_all(cache);
  return 0;
}
