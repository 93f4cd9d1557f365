// The profile recorder: a process-wide list of recording sessions behind one mutex, and an
// atomic count of them that instrumented code reads first (so recording costs nothing when off).
#include "ingot/profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/atomic_file.h"

namespace ingot::profile {

struct Session::State {
  int64_t origin_ns = 0;
  bool recording = false;
  mutable std::mutex mu;  // guards events
  std::vector<Event> events;
};

namespace {

std::atomic<int> g_recording{0};
std::mutex g_sessions_mu;
std::vector<std::shared_ptr<Session::State>> g_sessions;  // the recording ones

uint64_t thread_number() {
  static std::atomic<uint64_t> next{0};
  thread_local const uint64_t mine = next++;
  return mine;
}

}  // namespace

bool active() { return g_recording.load(std::memory_order_relaxed) > 0; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(std::string_view name, std::string_view category, std::string_view detail, int64_t start_ns,
            int64_t end_ns) {
  if (!active()) return;
  const uint64_t tid = thread_number();
  std::lock_guard<std::mutex> lock(g_sessions_mu);
  for (const auto& s : g_sessions) {
    std::lock_guard<std::mutex> events_lock(s->mu);
    s->events.push_back(Event{std::string(name), std::string(category), std::string(detail),
                              start_ns - s->origin_ns, end_ns - start_ns, tid});
  }
}

Session::Session() : state_(std::make_shared<State>()) {
  state_->origin_ns = now_ns();
  state_->recording = true;
  std::lock_guard<std::mutex> lock(g_sessions_mu);
  g_sessions.push_back(state_);
  g_recording.fetch_add(1, std::memory_order_relaxed);
}

Session::~Session() { stop(); }

void Session::stop() {
  std::lock_guard<std::mutex> lock(g_sessions_mu);
  if (!state_->recording) return;
  state_->recording = false;
  g_sessions.erase(std::find(g_sessions.begin(), g_sessions.end(), state_));
  g_recording.fetch_sub(1, std::memory_order_relaxed);
}

bool Session::recording() const {
  std::lock_guard<std::mutex> lock(g_sessions_mu);
  return state_->recording;
}

std::vector<Event> Session::events() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->events;
}

std::vector<KernelStats> Session::rows() const {
  std::map<std::pair<std::string, std::string>, KernelStats> by_name;
  int64_t all = 0;
  for (const Event& e : events()) {
    KernelStats& k = by_name[{e.name, e.category}];
    k.name = e.name;
    k.category = e.category;
    k.count += 1;
    k.total_ns += e.duration_ns;
    all += e.duration_ns;
  }
  std::vector<KernelStats> out;
  for (auto& [key, k] : by_name) {
    k.share = all > 0 ? static_cast<double>(k.total_ns) / static_cast<double>(all) : 0.0;
    out.push_back(std::move(k));
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::string Session::summary() const {
  const std::vector<KernelStats> rs = rows();
  size_t width = 6;
  for (const KernelStats& k : rs) width = std::max(width, k.name.size());
  std::ostringstream os;
  os << std::left << std::setw(static_cast<int>(width)) << "kernel" << "  " << std::setw(9) << "backend" << std::right
     << std::setw(7) << "count" << std::setw(12) << "total ms" << std::setw(12) << "mean us" << std::setw(8) << "share"
     << "\n";
  int64_t all = 0;
  for (const KernelStats& k : rs) {
    all += k.total_ns;
    os << std::left << std::setw(static_cast<int>(width)) << k.name << "  " << std::setw(9) << k.category << std::right
       << std::setw(7) << k.count << std::setw(12) << std::fixed << std::setprecision(3) << k.total_ns / 1e6
       << std::setw(12) << std::setprecision(1) << k.total_ns / 1e3 / static_cast<double>(k.count) << std::setw(7)
       << std::setprecision(1) << k.share * 100 << "%\n";
  }
  os << std::left << std::setw(static_cast<int>(width)) << "total" << "  " << std::setw(9) << "" << std::right << std::setw(7)
     << "" << std::setw(12) << std::fixed << std::setprecision(3) << all / 1e6 << "\n";
  return os.str();
}

std::string Session::chrome_trace() const {
  using Json = nlohmann::ordered_json;
  Json events = Json::array();
  for (const Event& e : this->events()) {
    Json ev = {{"name", e.name}, {"cat", e.category}, {"ph", "X"},
               {"ts", static_cast<double>(e.start_ns) / 1e3}, {"dur", static_cast<double>(e.duration_ns) / 1e3},
               {"pid", 1}, {"tid", e.thread}};
    if (!e.detail.empty()) ev["args"] = {{"detail", e.detail}};
    events.push_back(std::move(ev));
  }
  Json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  // Names are arbitrary bytes; invalid UTF-8 becomes U+FFFD rather than failing the dump.
  return trace.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

void Session::write_chrome_trace(const std::string& path) const { write_file_atomic(path, chrome_trace()); }

}  // namespace ingot::profile
