// Training step figures: the compiled training step (forward + backward + optimizer update in one
// executable, CPU backend) against the eager path (PhysicalModel::evaluate with gradients, then
// Optimizer::update on the host), for the bundled MLP (784 -> 256 -> 10, batch 128) and the
// seeds' CNN (batch 32, 3x64x64; --quick: 3x16x16), both with SGD (lr 0.01, momentum 0.9) on
// softmax cross-entropy: the same workloads as bench/peers.py's train_mlp and train_cnn.
//
// Memory: the planned peak of each training step (the compiler's plan) and the CPU backend's
// arena (what its executable allocates for intermediates), with and without gradient
// checkpointing (checkpoint_segments 2), plus a deep MLP where activations dominate.
//
// The physical limit beside each step: its dense FLOPs (dense_work.h) over the library GEMM's
// peak, measured in the same run, is the least time any implementation on this machine needs.
//
//   ./scripts/build.sh release && build/release/bench_train [--quick] [bench/results/train.json]
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "bench_util.h"
#include "dense_work.h"
#include "ingot/ingot.h"

using namespace ingot;
using namespace ingot::bench;

namespace {

ShapeTemplate template_of_shape(const Shape& s) {
  ShapeTemplate t;
  for (int64_t d : s) t.emplace_back(d);
  return t;
}

std::string json_shape(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

TrainModel with_cross_entropy(const Model& model) {
  TrainModel tm(model);
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  return tm;
}

CompileOptions options_for(const Shape& input_shape, bool checkpointing) {
  CompileOptions o;
  o.shapes = {{"input", template_of_shape(input_shape)}};
  o.gradient_checkpointing = checkpointing;
  o.checkpoint_segments = 2;
  return o;
}

// The planned peak and the CPU arena of a training step without and with gradient checkpointing.
struct Memory {
  std::string model;
  Shape input_shape;
  int64_t peak_bytes = 0, checkpointed_bytes = 0;
  int64_t arena_bytes = 0, checkpointed_arena_bytes = 0;
  int recomputed_nodes = 0;
};

Memory memory_of(const std::string& model_name, const Model& model, const Shape& input_shape) {
  const GradientMemory m =
      compile_train_step(with_cross_entropy(model), CpuBackend(), SGD(), options_for(input_shape, true)).gradient_memory();
  return {model_name,    input_shape,           m.without_checkpointing_bytes, m.planned_peak_bytes,
          m.without_checkpointing_arena_bytes, m.arena_bytes, m.recomputed_nodes};
}

std::string memory_text(const Memory& m) {
  std::ostringstream s;
  s << "planned peak " << m.peak_bytes / (1024.0 * 1024.0) << " MiB, checkpointed "
    << m.checkpointed_bytes / (1024.0 * 1024.0) << " MiB; CPU arena " << m.arena_bytes / (1024.0 * 1024.0)
    << " MiB, checkpointed " << m.checkpointed_arena_bytes / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

struct Row {
  std::string key, workload;
  Shape input_shape;
  double compiled_ms = 0, eager_ms = 0;
  double loss_difference = 0;  // |compiled - eager| loss after the timed steps (same start, same steps)
  double flops = 0;            // dense FLOPs of one step
  Memory memory;
};

Row bench_step(const std::string& key, const std::string& workload, const Model& model, const Shape& input_shape,
               int64_t classes, double flops, int reps) {
  const TrainModel tm = with_cross_entropy(model);
  const CompileOptions o = options_for(input_shape, false);
  const SGD sgd({.lr = 0.01, .momentum = 0.9});
  const TrainStep step = compile_train_step(tm, CpuBackend(), sgd, o);
  const PhysicalModel eager = compile(tm, CpuBackend(), o);
  Tensor x(DType::Float32, input_shape), y(DType::Int64, {input_shape[0]});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37 % 101) / 101.0 - 0.5);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = i % classes;
  const TensorMap batch = {{"input", x}, {"target", y}};
  TensorMap p1 = step.randomize_params(0), p2 = eager.randomize_params(0);
  for (auto& [name, t] : p1) t = t.clone();  // the two paths must not share buffers
  OptimizerState s1 = step.init_state(p1), s2 = sgd.init(p2);
  Row r;
  r.key = key;
  r.workload = workload;
  r.input_shape = input_shape;
  r.flops = flops;
  double compiled_loss = 0, eager_loss = 0;
  auto compiled_step = [&] { compiled_loss = step.run(p1, s1, batch).loss; };
  auto eager_step = [&] {
    const Evaluation e = evaluate_loss(eager, p2, batch);
    eager_loss = e.outputs.at(kFinalCost).item();
    sgd.update(p2, e.gradients, s2);
  };
  // Each path in a loop of its own, as bench/peers_train.py times PyTorch and JAX: the median of
  // `reps` consecutive steps after two warm-up steps (a loop alternating the two paths measured
  // each step with the other's data in the caches and the OpenMP threads gone to sleep).
  r.compiled_ms = time_ms(compiled_step, reps, 2);
  r.eager_ms = time_ms(eager_step, reps, 2);
  r.loss_difference = std::abs(compiled_loss - eager_loss);
  r.memory = memory_of(key, model, input_shape);
  std::cout << workload << ": compiled step " << r.compiled_ms << " ms, eager (evaluate + update) " << r.eager_ms
            << " ms (" << r.eager_ms / r.compiled_ms << "x), " << gflops_at(r.flops, r.compiled_ms)
            << " GFLOP/s, |loss difference| " << r.loss_difference << ", "
            << memory_text(r.memory) << "\n";
  return r;
}

std::string json_memory(const Memory& m) {
  std::ostringstream js;
  js << "{\"model\": \"" << m.model << "\", \"input_shape\": " << json_shape(m.input_shape)
     << ", \"peak_bytes\": " << m.peak_bytes << ", \"checkpointed_bytes\": " << m.checkpointed_bytes
     << ", \"arena_bytes\": " << m.arena_bytes << ", \"checkpointed_arena_bytes\": " << m.checkpointed_arena_bytes
     << ", \"checkpoint_segments\": 2, \"recomputed_nodes\": " << m.recomputed_nodes << "}";
  return js.str();
}

Model deep_mlp(int layers, int64_t width) {
  Model m;
  for (int i = 0; i < layers; ++i) {
    m += Linear(width);
    m += Relu();
  }
  m += Linear(10);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string out = "bench/results/train.json";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else out = argv[i];
  }
  try {
    const int64_t side = quick ? 16 : 64;
    std::vector<Row> rows;
    rows.push_back(bench_step("train_mlp", "MLP 784-256-10, batch 128", ExampleMLP(), {128, 784}, 10,
                              training_step_flops(mlp_flops(128), mlp_first_layer_flops(128)), quick ? 5 : 50));
    rows.push_back(bench_step("train_cnn", "CNN, batch 32, 3x" + std::to_string(side) + "x" + std::to_string(side),
                              ExampleCNN(), {32, 3, side, side}, 10,
                              training_step_flops(cnn_flops(32, side), cnn_first_layer_flops(32, side)), quick ? 2 : 5));
    // Activations dominate here (1024 rows, 16 layers), as in the models checkpointing is for.
    const Memory deep = memory_of("deep MLP 16 x 256, batch 1024", deep_mlp(16, 256), {1024, 256});
    std::cout << deep.model << ": " << memory_text(deep) << "\n";
    const std::string gemm_dir = fresh_dir("train-gemm");
    CpuBackend::CpuOptions gemm_options;
    gemm_options.cache_dir = gemm_dir;
    const GemmPeak gemm = gemm_peak(CpuBackend(gemm_options), quick ? 1024 : 2048);
    std::filesystem::remove_all(gemm_dir);
    std::cout << "library GEMM peak (" << gemm.n << "^3 float32 matmul through CpuBackend): " << gemm.gflops
              << " GFLOP/s\n";
    for (const Row& r : rows)
      std::cout << r.workload << ": " << r.flops / 1e9 << " GFLOP a step, at least " << r.flops / (gemm.gflops * 1e9) * 1e3
                << " ms at the GEMM peak; the compiled step reaches "
                << 100 * gflops_at(r.flops, r.compiled_ms) / gemm.gflops << "% of it\n";
    std::ostringstream js;
    js << "{\n  \"tool\": \"bench_train\",\n  \"quick\": " << (quick ? "true" : "false")
       << ",\n  \"measured_utc\": " << measured_utc_json() << ",\n  \"machine\": " << machine_json(default_threads()) << ",\n  \"versions\": " << versions_json()
       << ",\n  \"optimizer\": \"SGD lr 0.01 momentum 0.9\",\n  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      js << "    {\"key\": \"" << r.key << "\", \"workload\": \"" << r.workload << "\", \"input_shape\": "
         << json_shape(r.input_shape) << ", \"flops\": " << r.flops << ", \"compiled_step_ms\": " << r.compiled_ms
         << ", \"compiled_gflops\": " << json_num(gflops_at(r.flops, r.compiled_ms)) << ", \"eager_ms\": " << r.eager_ms
         << ", \"loss_difference\": " << r.loss_difference << ", \"memory\": " << json_memory(r.memory) << "}"
         << (i + 1 < rows.size() ? ",\n" : "\n");
    }
    js << "  ],\n  \"gemm\": {\"n\": " << gemm.n << ", \"ms\": " << gemm.ms << ", \"gflops\": " << gemm.gflops
       << "},\n  \"checkpointing\": [" << json_memory(deep) << "],\n  \"ratios\": {";
    // eager / compiled step (above 1: the compiled step is faster); checkpointed / plain peak.
    for (const Row& r : rows)
      js << "\"" << r.key << "_fraction_of_gemm_peak\": " << json_num(gflops_at(r.flops, r.compiled_ms) / gemm.gflops)
         << ", \"" << r.key << "_eager_over_compiled\": " << json_num(r.eager_ms / r.compiled_ms) << ", \"" << r.key
         << "_checkpointed_over_plain_peak\": "
         << json_num(static_cast<double>(r.memory.checkpointed_bytes) / static_cast<double>(r.memory.peak_bytes)) << ", ";
    js << "\"deep_mlp_checkpointed_over_plain_peak\": "
       << json_num(static_cast<double>(deep.checkpointed_bytes) / static_cast<double>(deep.peak_bytes)) << "}\n}\n";
    std::ofstream(out) << js.str();
    std::cout << "wrote " << out << "\n";
  } catch (const Error& e) {
    std::cerr << "bench_train: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
