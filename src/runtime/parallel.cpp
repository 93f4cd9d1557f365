#include "runtime/parallel.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot {

namespace {

// True while this thread runs a chunk: nested parallel_for calls then run inline.
thread_local bool t_in_chunk = false;

struct Job {
  int64_t n = 0, chunk = 0, num_chunks = 0;
  void* ctx = nullptr;
  detail::ChunkFn fn = nullptr;
  std::atomic<int64_t> next{0};       // next chunk to claim
  std::atomic<bool> failed{false};    // skip the remaining chunks after an exception
  std::mutex m;
  std::condition_variable finished;
  int64_t done = 0;                   // chunks run or skipped, under m
  std::exception_ptr error;           // the first exception, under m

  bool exhausted() const { return next.load(std::memory_order_relaxed) >= num_chunks; }

  // Claims and runs chunks until none is left to claim.
  void work() {
    const bool outer = t_in_chunk;
    t_in_chunk = true;
    for (int64_t c; (c = next.fetch_add(1)) < num_chunks;) {
      std::exception_ptr err;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          fn(ctx, c * chunk, std::min(n, (c + 1) * chunk));
        } catch (...) {
          err = std::current_exception();
          failed = true;
        }
      }
      std::lock_guard<std::mutex> lock(m);
      if (err && !error) error = err;
      if (++done == num_chunks) finished.notify_all();
    }
    t_in_chunk = outer;
  }
};

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // The caller works on its own job too, so it finishes even when every worker is busy.
  void run(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(job);
    }
    wake_.notify_all();
    job->work();
    {
      std::unique_lock<std::mutex> lock(job->m);
      job->finished.wait(lock, [&] { return job->done == job->num_chunks; });
    }
    std::lock_guard<std::mutex> lock(m_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (*it == job) {
        queue_.erase(it);
        break;
      }
  }

 private:
  void worker_loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      std::shared_ptr<Job> job = queue_.front();
      if (job->exhausted()) {  // every chunk is claimed: it no longer needs workers
        queue_.pop_front();
        continue;
      }
      lock.unlock();
      job->work();
      lock.lock();
    }
  }

  std::mutex m_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

int threads_from_env() {
  if (const char* env = std::getenv("INGOT_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1) return static_cast<int>(std::min(v, 256L));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool p(parallel_num_threads() - 1);
  return p;
}

}  // namespace

int parallel_num_threads() {
  static const int n = threads_from_env();
  return n;
}

namespace detail {

void parallel_run(int64_t n, int64_t grain, void* ctx, ChunkFn fn) {
  const int threads = parallel_num_threads();
  if (threads == 1 || t_in_chunk) {
    fn(ctx, 0, n);
    return;
  }
  // A few chunks per thread balance uneven chunks without much claiming overhead.
  const int64_t max_chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t{4} * threads);
  auto job = std::make_shared<Job>();
  job->n = n;
  job->chunk = (n + max_chunks - 1) / max_chunks;
  job->num_chunks = (n + job->chunk - 1) / job->chunk;
  job->ctx = ctx;
  job->fn = fn;
  pool().run(job);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace detail
}  // namespace ingot
