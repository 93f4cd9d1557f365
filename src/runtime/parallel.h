// parallel_for: splits [0, n) into chunks and runs them on a small persistent thread pool.
//
//   ingot::parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
//     for (int64_t r = begin; r < end; ++r) process(r);
//   });
//
// The pool has `parallel_num_threads()` threads including the caller (hardware concurrency,
// or the environment variable INGOT_NUM_THREADS). Work smaller than `grain` indices runs inline
// on the caller, as does any parallel_for issued from inside a chunk (nested calls never wait
// on the pool, so they cannot deadlock). The first exception thrown by a chunk is rethrown on
// the caller once every chunk has finished or been skipped. Safe to call from several threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ingot {

int parallel_num_threads();

namespace detail {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
// Runs fn(ctx, b, e) over chunks of at least `grain` covering [0, n), n > grain >= 1.
void parallel_run(int64_t n, int64_t grain, void* ctx, ChunkFn fn);
}  // namespace detail

template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  // A plain function pointer plus context instead of std::function: no allocation per call.
  detail::parallel_run(n, grain, &f, [](void* ctx, int64_t begin, int64_t end) {
    (*static_cast<std::remove_reference_t<F>*>(ctx))(begin, end);
  });
}

}  // namespace ingot
