// Training step figures: the compiled training step (forward + backward + optimizer update in one
// executable, CPU backend) against the eager path (PhysicalModel::evaluate with gradients, then
// Optimizer::update on the host), for the bundled MLP (784 -> 256 -> 10, batch 128, SGD) and the
// seeds' CNN (batch 32, 3x64x64; --quick: 3x16x16), plus the step's planned peak memory.
//
//   ./scripts/build.sh release && build/release/bench_train [--quick] [bench/results/train.json]
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "bench_util.h"
#include "ingot/ingot.h"

using namespace ingot;
using namespace ingot::bench;

namespace {

ShapeTemplate template_of_shape(const Shape& s) {
  ShapeTemplate t;
  for (int64_t d : s) t.emplace_back(d);
  return t;
}


struct Row {
  std::string workload;
  double compiled_ms, eager_ms;
  int64_t planned_peak_bytes;
};

Row bench_step(const std::string& workload, const Model& model, const Shape& input_shape, int64_t classes, int reps) {
  TrainModel tm(model);
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  CompileOptions o;
  o.shapes = {{"input", template_of_shape(input_shape)}};
  const SGD sgd({.lr = 0.01, .momentum = 0.9});
  const TrainStep step = compile_train_step(tm, CpuBackend(), sgd, o);
  const PhysicalModel eager = compile(tm, CpuBackend(), o);
  Tensor x(DType::Float32, input_shape), y(DType::Int64, {input_shape[0]});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37 % 101) / 101.0 - 0.5);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = i % classes;
  const TensorMap batch = {{"input", x}, {"target", y}};
  TensorMap p1 = step.randomize_params(0), p2 = eager.randomize_params(0);
  OptimizerState s1 = step.init_state(p1), s2 = sgd.init(p2);
  Row r{workload, 0, 0, step.planned_peak_bytes()};
  r.compiled_ms = time_ms([&] { step.run(p1, s1, batch); }, reps);
  r.eager_ms = time_ms([&] {
    const Evaluation e = evaluate_loss(eager, p2, batch);
    sgd.update(p2, e.gradients, s2);
  }, reps);
  std::cout << workload << ": compiled step " << r.compiled_ms << " ms, eager (evaluate + update) " << r.eager_ms
            << " ms (" << r.eager_ms / r.compiled_ms << "x), planned peak " << r.planned_peak_bytes / (1024.0 * 1024.0)
            << " MiB\n";
  return r;
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
    const int reps = quick ? 3 : 20;
    const int64_t side = quick ? 16 : 64;
    std::vector<Row> rows;
    rows.push_back(bench_step("mlp 784-256-10, batch 128, SGD", ExampleMLP(), {128, 784}, 10, reps));
    rows.push_back(bench_step("cnn, batch 32, 3x" + std::to_string(side) + "x" + std::to_string(side) + ", SGD",
                         ExampleCNN(), {32, 3, side, side}, 10, quick ? 1 : 3));
    std::ostringstream js;
    js << "{\n  \"quick\": " << (quick ? "true" : "false") << ",\n  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i)
      js << "    {\"workload\": \"" << rows[i].workload << "\", \"compiled_step_ms\": " << rows[i].compiled_ms
         << ", \"eager_ms\": " << rows[i].eager_ms << ", \"planned_peak_bytes\": " << rows[i].planned_peak_bytes << "}"
         << (i + 1 < rows.size() ? ",\n" : "\n");
    js << "  ]\n}\n";
    std::ofstream(out) << js.str();
    std::cout << "wrote " << out << "\n";
  } catch (const Error& e) {
    std::cerr << "bench_train: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
