// The communication thread behind started all-reduces (see started.h).
#include "distributed/started.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "ingot/error.h"

namespace ingot::distributed::detail {
namespace {

struct Job {
  std::vector<Shape> shapes;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  Tensor packed;  // the operands back to back; the reduced values once done
  std::exception_ptr error;
  bool done = false;
  std::thread::id owner = std::this_thread::get_id();  // the thread that started it
};

thread_local bool on_communication_thread = false;

class Started {
 public:
  int64_t start(std::shared_ptr<Job> job, bool run_here) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t ticket = next_ticket_++;
    jobs_.emplace(ticket, job);
    if (run_here) {
      lock.unlock();
      run(*job);
      lock.lock();
      job->done = true;
      return ticket;
    }
    if (!thread_started_) {
      // Detached and never joined: at exit it waits on the condition variable and calls no MPI.
      std::thread([this] { loop(); }).detach();
      thread_started_ = true;
    }
    queue_.push_back(std::move(job));
    ++unfinished_;
    work_.notify_one();
    return ticket;
  }

  std::shared_ptr<Job> finish(int64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = jobs_.find(ticket);
    INGOT_CHECK(it != jobs_.end(), "all_reduce_wait: ticket ", ticket,
                " names no started all-reduce (finished already, or never started)");
    std::shared_ptr<Job> job = it->second;
    done_.wait(lock, [&] { return job->done; });
    jobs_.erase(it);
    return job;
  }

  int64_t next_ticket() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_ticket_;
  }

  // Forgets the unfinished tickets from `first` on that this thread started; a job still queued
  // or running keeps itself alive (the queue and the thread hold it) until it has run.
  void drop_unfinished(int64_t first) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = jobs_.lower_bound(first); it != jobs_.end();)
      it = it->second->owner == std::this_thread::get_id() ? jobs_.erase(it) : std::next(it);
  }

  void drain() {
    if (on_communication_thread) return;
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return unfinished_ == 0; });
  }

 private:
  static void run(Job& job) {
    try {
      job.packed = all_reduce(job.packed, job.op);
    } catch (...) {
      job.error = std::current_exception();
    }
  }

  void loop() {
    on_communication_thread = true;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      run(*job);
      {
        std::lock_guard<std::mutex> lock(mu_);
        job->done = true;
        --unfinished_;
      }
      done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<int64_t, std::shared_ptr<Job>> jobs_;  // started, not yet finished
  int64_t next_ticket_ = 1;
  int unfinished_ = 0;  // queued or running on the thread
  bool thread_started_ = false;
};

Started& started() {
  static Started* s = new Started();  // never destroyed: the detached thread may outlive statics
  return *s;
}

}  // namespace

int64_t start_all_reduce(const std::vector<Tensor>& xs, ReduceOp op) {
  INGOT_CHECK(!xs.empty(), "all_reduce_start: nothing to reduce");
  auto job = std::make_shared<Job>();
  job->dtype = xs[0].dtype();
  job->op = op;
  int64_t total = 0;
  for (const Tensor& x : xs) {
    INGOT_CHECK(x.dtype() == job->dtype, "all_reduce_start: the tensors of one bucket must share a dtype, got ",
                dtype_name(job->dtype), " and ", dtype_name(x.dtype()));
    job->shapes.push_back(x.shape());
    total += x.numel();
  }
  job->packed = Tensor::uninitialized(job->dtype, {total});
  char* dst = static_cast<char*>(job->packed.raw_data());
  for (const Tensor& x : xs) {
    const Tensor c = x.contiguous();
    std::memcpy(dst, c.raw_data(), c.nbytes());
    dst += c.nbytes();
  }
  return started().start(std::move(job), size() == 1);
}

std::vector<Tensor> finish_all_reduce(int64_t ticket) {
  const std::shared_ptr<Job> job = started().finish(ticket);
  if (job->error) std::rethrow_exception(job->error);
  std::vector<Tensor> out;
  const char* src = static_cast<const char*>(job->packed.raw_data());
  for (const Shape& s : job->shapes) {
    Tensor t = Tensor::uninitialized(job->dtype, s);
    std::memcpy(t.raw_data(), src, t.nbytes());
    src += t.nbytes();
    out.push_back(std::move(t));
  }
  return out;
}

void finish_started() { started().drain(); }

StartedScope::StartedScope() : first_ticket_(started().next_ticket()) {}
StartedScope::~StartedScope() { started().drop_unfinished(first_ticket_); }

}  // namespace ingot::distributed::detail
