// The dense work of the bundled models (matmul and convolution multiply-adds, counted as 2 FLOPs
// each; the elementwise work beside them is under 1% and left out) and the machine's GEMM peak
// measured through the same backend, so that a benchmark can print how close a time is to what
// the machine can do at all.
#pragma once

#include <cstdint>

#include "bench_util.h"
#include "ingot/ingot.h"

namespace ingot::bench {

// The rate of `flops` done in `ms` milliseconds, in GFLOP/s.
inline double gflops_at(double flops, double ms) { return flops / (ms * 1e-3) / 1e9; }

// ExampleMLP: 784 -> 256 -> 10.
inline double mlp_first_layer_flops(int64_t batch) { return 2.0 * batch * 784 * 256; }
inline double mlp_flops(int64_t batch) { return mlp_first_layer_flops(batch) + 2.0 * batch * 256 * 10; }

// ExampleCNN on 3 x side x side: conv 3->64 3x3, conv 64->128 3x3 (both unpadded), global
// average pool, linear 128 -> 10.
inline double cnn_first_layer_flops(int64_t batch, int64_t side) {
  return 2.0 * batch * 64 * static_cast<double>((side - 2) * (side - 2)) * (3 * 9);
}
inline double cnn_flops(int64_t batch, int64_t side) {
  return cnn_first_layer_flops(batch, side) + 2.0 * batch * 128 * static_cast<double>((side - 4) * (side - 4)) * (64 * 9) +
         2.0 * batch * 128 * 10;
}

// One training step: the forward, every weight gradient (as much work again) and every input
// gradient except the first layer's (the data needs none).
inline double training_step_flops(double forward_flops, double first_layer_flops) {
  return 3.0 * forward_flops - first_layer_flops;
}

struct GemmPeak {
  int64_t n = 0;
  double ms = 0, gflops = 0;
};

// An n x n x n float32 matmul compiled for `backend`, median of 3: the library GEMM's peak here.
inline GemmPeak gemm_peak(const Backend& backend, int64_t n) {
  Model m;
  Connection a = m.input("a"), b = m.input("b");
  m.expose(matmul(a, b), "c");
  CompileOptions o;
  o.shapes["a"] = {n, n};
  o.shapes["b"] = {n, n};
  PhysicalModel mm = compile(m, backend, o);
  Tensor ta = Tensor::full(DType::Float32, {n, n}, 0.5), tb = Tensor::full(DType::Float32, {n, n}, 0.25);
  GemmPeak g;
  g.n = n;
  g.ms = time_ms([&] { (void)mm.evaluate({}, {{"a", ta}, {"b", tb}}); }, 3);
  g.gflops = gflops_at(2.0 * static_cast<double>(n) * n * n, g.ms);
  return g;
}

}  // namespace ingot::bench
