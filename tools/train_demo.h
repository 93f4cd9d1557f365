// `ingot demo`, training part: trains the bundled MLP and CNN with the compiled training step on
// the native CPU backend, on small generated datasets (no downloads), with a progress bar.
// `ingot demo --data-parallel` under mpirun trains them data parallel: each rank steps on its
// shard of every global batch; rank 0 prints the progress, every rank's throughput and the
// accuracy.
#pragma once

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/random.h"
#include "ingot/ingot.h"

namespace ingot::demo {

// A labelled dataset held as whole tensors: inputs [N, ...] and int64 classes [N].
struct Dataset {
  Tensor x;
  Tensor y;
  int64_t size() const { return y.numel(); }
  // Rows [start, start + n) as a batch.
  TensorMap batch(int64_t start, int64_t n) const {
    Shape xs = x.shape();
    xs[0] = n;
    const int64_t row = x.numel() / x.shape()[0];
    Tensor bx(x.dtype(), xs), by(DType::Int64, {n});
    std::copy_n(x.data<float>() + start * row, n * row, bx.data<float>());
    std::copy_n(y.data<int64_t>() + start, n, by.data<int64_t>());
    return {{"input", bx}, {"target", by}};
  }
};

// `classes` blobs in `features` dims: each class has a random centre (from `centres`), each sample
// (from `seed`) is its centre plus uniform noise larger than the centres' spread per dimension.
inline Dataset blobs(int64_t n, int64_t features, int64_t classes, uint64_t centres, uint64_t seed) {
  Dataset d{Tensor(DType::Float32, {n, features}), Tensor(DType::Int64, {n})};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(rng::uniform01(seed, static_cast<uint64_t>(i)) * classes) % classes;
    d.y.data<int64_t>()[i] = c;
    for (int64_t j = 0; j < features; ++j) {
      const double centre = rng::uniform01(centres + static_cast<uint64_t>(c), static_cast<uint64_t>(j)) * 2 - 1;
      const double noise = rng::uniform01(seed + 100, static_cast<uint64_t>(i * features + j)) * 2 - 1;
      d.x.data<float>()[i * features + j] = static_cast<float>(centre + 1.5 * noise);
    }
  }
  return d;
}

// Images [N, 3, size, size]: noise, plus a brighter square in the quadrant and channel that the
// class names (4 classes: one per quadrant, channel = class % 3).
inline Dataset quadrant_images(int64_t n, int64_t size, uint64_t seed) {
  Dataset d{Tensor(DType::Float32, {n, 3, size, size}), Tensor(DType::Int64, {n})};
  const int64_t half = size / 2;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = static_cast<int64_t>(rng::uniform01(seed, static_cast<uint64_t>(i)) * 4) % 4;
    d.y.data<int64_t>()[i] = c;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t h = 0; h < size; ++h)
        for (int64_t w = 0; w < size; ++w) {
          const int64_t k = ((i * 3 + ch) * size + h) * size + w;
          const bool lit = ch == c % 3 && (h >= half) == (c / 2 == 1) && (w >= half) == (c % 2 == 1);
          d.x.data<float>()[k] =
              static_cast<float>(rng::uniform01(seed + 7, static_cast<uint64_t>(k)) - 0.5 + (lit ? 0.8 : 0.0));
        }
  }
  return d;
}

inline void progress(std::ostream& out, int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss,
                     double accuracy, double samples_per_s) {
  const int width = 24;
  const int filled = static_cast<int>(width * done / total);
  std::string bar = std::string(static_cast<size_t>(filled), '=') + (filled < width ? ">" : "") +
                    std::string(static_cast<size_t>(width - filled - (filled < width ? 1 : 0)), ' ');
  char line[160];
  std::snprintf(line, sizeof line, "\r  epoch %lld/%lld [%s] %5lld/%lld  loss %.4f  accuracy %5.1f%%  %.0f samples/s",
                static_cast<long long>(epoch), static_cast<long long>(epochs), bar.c_str(),
                static_cast<long long>(done), static_cast<long long>(total), loss, 100 * accuracy, samples_per_s);
  out << line << std::flush;
}

// Trains `model` with `optimizer` on `train` for `epochs`, then prints and returns the accuracy on
// `test`, evaluated as the model would be deployed: an inference-mode compile (BatchNorm2d on the
// running statistics the training steps kept, Dropout off).
inline double train_and_report(const std::string& name, const Model& model, const ShapeTemplate& sample_shape,
                               const Dataset& train, const Dataset& test, int64_t batch, int64_t epochs,
                               const Optimizer& optimizer, const Backend& backend, std::ostream& out = std::cout,
                               bool data_parallel = false) {
  const int rank = data_parallel ? distributed::rank() : 0, ranks = data_parallel ? distributed::size() : 1;
  std::ostringstream elsewhere;  // ranks other than 0 keep their progress to themselves
  std::ostream& shown = rank == 0 ? out : elsewhere;
  TrainModel tm(model);
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}}, "mean", 1.0, "cross_entropy");
  tm.add_metric(ClassAccuracy(), {{"input", "output"}, {"target", "target"}}, "accuracy");
  CompileOptions o;
  ShapeTemplate shape = {"N"};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  o.shapes = {{"input", shape}};
  o.data_parallel = data_parallel;
  const auto t0 = std::chrono::steady_clock::now();
  const TrainStep step = compile_train_step(tm, backend, optimizer, o);
  const double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  shown << "== train " << name << " == " << train.size() << " samples, batch " << batch << ", " << optimizer.name()
        << ", compiled training step (" << backend.name() << " backend): " << step.graph().nodes().size()
        << " nodes, built in " << compile_ms << " ms";
  if (data_parallel) shown << "; data parallel over " << ranks << " ranks, " << batch / ranks << " samples each a step";
  shown << "\n";
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  const int64_t batches = train.size() / batch;
  double samples_per_s = 0;
  for (int64_t e = 1; e <= epochs; ++e) {
    const auto start = std::chrono::steady_clock::now();
    double loss = 0, acc = 0;
    for (int64_t b = 0; b < batches; ++b) {
      const TensorMap global = train.batch(b * batch, batch);
      const StepResult r = step.run(params, state, data_parallel ? distributed::shard_batch(global) : global);
      loss += r.loss;
      acc += r.metrics.at("accuracy").item();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      samples_per_s = static_cast<double>((b + 1) * batch) / s;
      progress(shown, e, epochs, (b + 1) * batch, batches * batch, loss / static_cast<double>(b + 1),
               acc / static_cast<double>(b + 1), samples_per_s);
    }
    shown << "\n";
  }
  if (data_parallel) {  // each rank's own rate over the last epoch (the global batch's samples a second)
    const Tensor rates = distributed::all_gather(Tensor::from_vector<double>({samples_per_s}, {1}));
    for (int r = 0; r < ranks; ++r)
      shown << "  rank " << r << " of " << ranks << ": " << static_cast<int64_t>(rates.item(r)) << " samples/s\n";
  }
  CompileOptions inference = o;
  inference.inference = true;
  inference.data_parallel = false;
  const TensorMap held_out = compile(tm, backend, inference).evaluate(params, test.batch(0, test.size()));
  const double accuracy = held_out.at("accuracy").item();
  shown << "  accuracy reached on " << test.size() << " held-out samples (inference mode): " << 100 * accuracy
        << "%\n\n";
  return accuracy;
}

struct DemoAccuracy {
  double mlp = 0, cnn = 0;
};

// Fixed seeds throughout (datasets, initial parameters), so tests can hold the demo to its figures.
inline DemoAccuracy train_bundled_models(const Backend& backend, std::ostream& out = std::cout,
                                        bool data_parallel = false) {
  DemoAccuracy a;
  a.mlp = train_and_report("mlp", ExampleMLP(), {784}, blobs(1024, 784, 10, 100, 1), blobs(512, 784, 10, 100, 2), 128,
                           2, SGD({.lr = 0.05, .momentum = 0.9}), backend, out, data_parallel);
  // 8x8 images keep the demo short: a few seconds for the CNN's 24 steps on 2 cores.
  a.cnn = train_and_report("cnn", ExampleCNN(4), {3, 8, 8}, quadrant_images(256, 8, 2), quadrant_images(128, 8, 3), 32,
                           3, Adam({.lr = 0.01}), backend, out, data_parallel);
  return a;
}

}  // namespace ingot::demo
