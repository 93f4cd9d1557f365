// Profiling: per-kernel wall times of physical-model evaluations.
//
//   ingot::profile::Session prof;            // records from here...
//   pm.evaluate(params, inputs);
//   std::cout << prof.summary();             // per kernel: count, total, mean, share
//   prof.write_chrome_trace("trace.json");   // chrome://tracing or ui.perfetto.dev
//                                            // ...until prof is destroyed or stop()ped
//
// Executables report each kernel (the reference backend: each node; the CPU backend: each
// generated kernel and each reference-kernel callback) only while at least one session is
// recording, so the cost when profiling is off is one relaxed atomic load per evaluate or kernel.
// Sessions may overlap and be used from several threads: every active session gets every event.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::profile {

struct Event {
  std::string name;      // the kernel: "k3_fused_add_relu", "n5_matmul", ...
  std::string category;  // the backend: "cpu", "reference"
  std::string detail;    // what it computes and where from (ops, model scope); may be empty
  int64_t start_ns = 0;  // steady clock, relative to the session's start
  int64_t duration_ns = 0;
  uint64_t thread = 0;  // small per-thread number, stable within the process
};

// One row of Session::rows(): all events of one name.
struct KernelStats {
  std::string name;
  std::string category;
  int64_t count = 0;
  int64_t total_ns = 0;
  double share = 0;  // of the sum over all kernels
};

// True while any session records. Instrumented code checks this before taking timestamps.
bool active();
// Nanoseconds on the steady clock.
int64_t now_ns();
// Adds an event (absolute steady-clock times) to every recording session; no-op when none is.
void record(std::string_view name, std::string_view category, std::string_view detail, int64_t start_ns,
            int64_t end_ns);

// Times a scope when a session is recording at construction (nothing otherwise).
class Scope {
 public:
  Scope(std::string_view name, std::string_view category, std::string_view detail = {})
      : on_(active()), name_(name), category_(category), detail_(detail), start_(on_ ? now_ns() : 0) {}
  ~Scope() {
    if (on_) record(name_, category_, detail_, start_, now_ns());
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
  std::string_view name_, category_, detail_;
  int64_t start_;
};

// A recording session: starts on construction, stops on stop() or destruction.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void stop();  // idempotent; events recorded so far stay readable
  bool recording() const;
  std::vector<Event> events() const;
  // Per kernel name, sorted by total time (largest first).
  std::vector<KernelStats> rows() const;
  // A table: kernel, backend, count, total ms, mean us, share.
  std::string summary() const;
  // Chrome trace event format (complete "X" events, microseconds), readable by chrome://tracing
  // and ui.perfetto.dev.
  std::string chrome_trace() const;
  void write_chrome_trace(const std::string& path) const;  // atomic write

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ingot::profile
