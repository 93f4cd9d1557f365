// ResNet-18's training step on the CPU backend: forward, backward and an SGD update (lr 0.01,
// momentum 0.9) on softmax cross-entropy, compiled as one executable (compile_train_step), batch
// norm in training mode. The PyTorch side of the same step is bench/vision_torch.py --train;
// scripts/bench_vision.sh runs both and puts the row in the README's "## Vision models".
//
//   build/release/bench_resnet_train [batch] [size] [reps] [out.json]   (default 8 224 5)
//   INGOT_BENCH_PROFILE=1 also prints the kernels of one profiled step.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <vector>

#include "bench_util.h"
#include "ingot/ingot.h"
#include "ingot/profile.h"

using namespace ingot;
using namespace ingot::bench;

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 8, size = argc > 2 ? std::atoll(argv[2]) : 224;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const std::string out = argc > 4 ? argv[4] : "";
  try {
    TrainModel tm(ResNet18(1000));
    tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
    CompileOptions o;
    o.shapes = {{"input", {batch, 3, size, size}}};
    const TrainStep step = compile_train_step(tm, CpuBackend(), SGD({.lr = 0.01, .momentum = 0.9}), o);
    TensorMap params = step.randomize_params(0);
    OptimizerState state = step.init_state(params);
    Tensor x(DType::Float32, {batch, 3, size, size}), y(DType::Int64, {batch});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37 % 101) / 101.0 - 0.5);
    for (int64_t i = 0; i < batch; ++i) y.data<int64_t>()[i] = i * 7 % 1000;
    const TensorMap data = {{"input", x}, {"target", y}};
    double loss = 0;
    std::vector<double> times;
    for (int i = 0; i < reps + 2; ++i) {
      const double ms = time_ms([&] { loss = step.run(params, state, data).loss; }, 1, 0);
      if (i >= 2) times.push_back(ms);  // two warm-up steps
    }
    if (std::getenv("INGOT_BENCH_PROFILE") != nullptr) {  // one profiled step: where the time goes
      profile::Session prof;
      step.run(params, state, data);
      std::cout << prof.summary().substr(0, 4000) << "\n";
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::cout << "ResNet-18 training step, batch " << batch << ", 3x" << size << "x" << size << ": " << median
              << " ms (" << times.front() << "-" << times.back() << "), loss " << loss << "\n";
    if (!out.empty()) {
      std::ofstream f(out);
      f << "{\"tool\": \"bench_resnet_train\", \"measured_utc\": " << measured_utc_json() << ", \"machine\": "
        << machine_json(default_threads()) << ", \"model\": \"resnet18\", \"batch\": " << batch << ", \"size\": " << size
        << ", \"optimizer\": \"SGD lr 0.01 momentum 0.9\", \"ms\": " << median << ", \"min_ms\": " << times.front()
        << ", \"max_ms\": " << times.back() << ", \"reps\": " << reps << ", \"loss\": " << loss << "}\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_resnet_train: " << e.what() << "\n";
    return 1;
  }
}
