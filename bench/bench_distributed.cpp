// Data-parallel training and the collectives on this machine (scripts/bench_distributed.sh runs
// it; README "Distributed (MPI)" has the figures).
//
//   bench_distributed train [--threads N] [--quick]   training throughput of the bundled MLP and
//       CNN on the global batch: as one process (N threads), or under mpirun as data parallel
//       ranks (each on its shard), there with gradient overlap on and off
//   bench_distributed allreduce [--quick]             under mpirun: all-reduce bandwidth of
//       ingot's distributed::all_reduce against MPI_Allreduce itself on the same buffers
//
// Rank 0 prints one line per figure ("key value") and, with --out FILE, writes them as JSON.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "bench_util.h"
#include "ingot/ingot.h"
#include "../tools/train_demo.h"

#ifdef INGOT_BENCH_HAVE_MPI
#include <mpi.h>
#endif

namespace {

using namespace ingot;
namespace dist = ingot::distributed;

struct Figures {
  std::vector<std::pair<std::string, double>> rows;
  void add(const std::string& key, double value) {
    rows.emplace_back(key, value);
    if (dist::rank() == 0) std::printf("%-58s %12.2f\n", key.c_str(), value);
    std::fflush(stdout);
  }
};

// Median step time (ms) over `steps` steps after 3 warm-up steps, the slowest rank's.
double step_ms(const Model& model, const ShapeTemplate& sample, const demo::Dataset& data, int64_t global_batch,
               int threads, bool data_parallel, bool overlap, int64_t bucket_bytes, int steps) {
  TrainModel tm(model);
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  CompileOptions o;
  ShapeTemplate shape = {global_batch / (data_parallel ? dist::size() : 1)};
  shape.insert(shape.end(), sample.begin(), sample.end());
  o.shapes = {{"input", shape}};
  o.data_parallel = data_parallel;
  o.gradient_overlap = overlap;
  o.gradient_bucket_bytes = bucket_bytes;
  CpuBackend::CpuOptions cpu;
  cpu.num_threads = threads;
  const TrainStep step = compile_train_step(tm, CpuBackend(cpu), SGD({.lr = 0.01, .momentum = 0.9}), o);
  TensorMap params = step.randomize_params(0);
  OptimizerState state = step.init_state(params);
  const TensorMap global = data.batch(0, global_batch);
  const TensorMap batch = data_parallel ? dist::shard_batch(global) : global;
  for (int i = 0; i < 3; ++i) step.run(params, state, batch);
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    if (data_parallel) dist::barrier();  // every rank starts the step together
    const auto t0 = bench::Clock::now();
    step.run(params, state, batch);
    t.push_back(bench::ms_since(t0));
  }
  const double mine = bench::median(t);
  return data_parallel ? dist::all_reduce(Tensor::scalar<double>(mine), dist::ReduceOp::Max).item() : mine;
}

void train(Figures& f, int threads, bool quick) {
  const int steps = quick ? 5 : 20;
  const bool dp = dist::size() > 1;
  const std::string how = dp ? std::to_string(dist::size()) + " ranks x " + std::to_string(threads) + " thread"
                             : "1 process x " + std::to_string(threads) + " threads";
  struct Net {
    std::string name;
    Model model;
    ShapeTemplate sample;
    demo::Dataset data;
    int64_t batch;
  };
  std::vector<Net> nets;
  nets.push_back({"mlp", ExampleMLP(), {784}, demo::blobs(128, 784, 10, 100, 1), 128});
  nets.push_back({"cnn", ExampleCNN(4), {3, 32, 32}, demo::quadrant_images(32, 32, 2), 32});
  const int64_t default_bucket = CompileOptions().gradient_bucket_bytes, small_bucket = 64 << 10;
  for (const Net& n : nets) {
    const double ms = step_ms(n.model, n.sample, n.data, n.batch, threads, dp, true, default_bucket, steps);
    f.add(n.name + " batch " + std::to_string(n.batch) + ", " + how + ": step ms", ms);
    f.add(n.name + " batch " + std::to_string(n.batch) + ", " + how + ": samples/s", 1000.0 * static_cast<double>(n.batch) / ms);
    if (dp) {  // the overlap: buckets of 64 KiB (several per step for these models), started early or not
      for (const bool overlap : {true, false})
        f.add(n.name + ", " + how + ", 64 KiB buckets, overlap " + (overlap ? "on" : "off") + ": step ms",
              step_ms(n.model, n.sample, n.data, n.batch, threads, true, overlap, small_bucket, steps));
    }
  }
}

void allreduce(Figures& f, bool quick) {
#ifdef INGOT_BENCH_HAVE_MPI
  for (int64_t bytes = 4 << 10; bytes <= (quick ? 4 << 20 : 64 << 20); bytes *= 4) {
    const int64_t n = bytes / 4;
    const Tensor x = Tensor::full(DType::Float32, {n}, 1.0);
    const int reps = bytes >= (16 << 20) ? 5 : 20;
    const double ingot_ms = bench::time_ms([&] { (void)dist::all_reduce(x, dist::ReduceOp::Sum); }, reps, 2);
    Tensor out(DType::Float32, {n});
    const double mpi_ms = bench::time_ms(
        [&] { MPI_Allreduce(x.raw_data(), out.raw_data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
        reps, 2);
    const std::string size = bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
    // Bus bandwidth as NCCL's tests define it for all-reduce: bytes * 2 (n - 1) / n per second.
    const double factor = 2.0 * (dist::size() - 1) / dist::size();
    f.add("all_reduce " + size + ": ingot GB/s", static_cast<double>(bytes) * factor / ingot_ms / 1e6);
    f.add("all_reduce " + size + ": MPI_Allreduce GB/s", static_cast<double>(bytes) * factor / mpi_ms / 1e6);
  }
#else
  (void)f;
  (void)quick;
  std::fprintf(stderr, "bench_distributed allreduce: built without MPI\n");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    int threads = 1;
    bool quick = false;
    std::string out;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
      else if (a == "--quick") quick = true;
      else if (a == "--out" && i + 1 < argc) out = argv[++i];
      else INGOT_FAIL("unknown argument '", a, "' (usage: bench_distributed train|allreduce [--threads N] [--quick] [--out FILE])");
    }
    INGOT_CHECK(mode == "train" || mode == "allreduce", "usage: bench_distributed train|allreduce [--threads N] [--quick] [--out FILE]");
    dist::init();
    Figures f;
    if (mode == "train") train(f, threads, quick);
    else allreduce(f, quick);
    if (!out.empty() && dist::rank() == 0) {
      std::ofstream o(out);
      o << "{\n  \"machine\": " << bench::json_str(bench::read_cpu_model()) << ",\n  \"ranks\": " << dist::size()
        << ",\n  \"figures\": {\n";
      for (size_t i = 0; i < f.rows.size(); ++i)
        o << "    " << bench::json_str(f.rows[i].first) << ": " << f.rows[i].second << (i + 1 < f.rows.size() ? "," : "") << "\n";
      o << "  }\n}\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_distributed: %s\n", e.what());
    return 1;
  }
}
