// The library GEMM of the CPU backend (the host's sgemm: oneDNN's dnnl_sgemm, what generated
// matmuls call) timed on given shapes, for bench/conv_bound.py: each line of stdin is
// "m k n", and each line of stdout "m k n best_ms", the best of `reps` calls of the row-major
// float32 product [m, k] x [k, n] with both operands and the result hot in cache after the first
// call (an optimistic time: inside a network the weights stream from memory). Threads: oneDNN's
// OpenMP count (OMP_NUM_THREADS).
//
//   build/release/bench_gemm_shapes [reps]   (default 15)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <vector>

#include "backends/cpu/dnnl_gemm.h"
#include "bench_util.h"

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  const ingot::cpu::HostSgemm sgemm = ingot::cpu::host_sgemm();
  if (sgemm == nullptr) {
    std::cerr << "bench_gemm_shapes: this build has no oneDNN (libdnnl-dev), so no library sgemm to time\n";
    return 2;
  }
  long long m = 0, k = 0, n = 0;
  while (std::cin >> m >> k >> n) {
    if (m < 1 || k < 1 || n < 1 || m * k > (1LL << 31) || k * n > (1LL << 31) || m * n > (1LL << 31)) {
      std::cerr << "bench_gemm_shapes: shape " << m << " " << k << " " << n << " out of range (each side 1.. and 2^31 elements)\n";
      return 2;
    }
    std::vector<float> a, b, c;
    try {
      a.assign(static_cast<size_t>(m * k), 0.5f);
      b.assign(static_cast<size_t>(k * n), 0.25f);
      c.assign(static_cast<size_t>(m * n), 0.0f);
    } catch (const std::bad_alloc&) {
      std::cerr << "bench_gemm_shapes: out of memory for " << m << " " << k << " " << n << "\n";
      return 2;
    }
    double best_ms = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = ingot::bench::Clock::now();
      if (sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n) != 0) {
        std::cerr << "bench_gemm_shapes: sgemm failed on " << m << " " << k << " " << n << "\n";
        return 1;
      }
      best_ms = std::min(best_ms, ingot::bench::ms_since(t0));
    }
    std::printf("%lld %lld %lld %.6f\n", m, k, n, best_ms);
    std::fflush(stdout);
  }
  return 0;
}
