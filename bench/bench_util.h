// Helpers every benchmark shares: medians of repeated runs, fresh cache folders so a "cold"
// figure really starts from an empty cache, and the JSON pieces every results file carries (the
// machine it ran on and the versions involved), so no figure is read without its context.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ingot/error.h"

namespace ingot::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The median (-1 for no samples).
inline double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median milliseconds of `reps` calls, after `warmup` untimed calls.
inline double time_ms(const std::function<void()>& fn, int reps, int warmup = 1) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(ms_since(t0));
  }
  return median(t);
}

// A new empty folder under the system's temp directory, named after `tag`.
inline std::string fresh_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("ingot-bench-" + tag + "-XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  INGOT_CHECK(mkdtemp(buf.data()) != nullptr, "mkdtemp failed for ", tmpl);
  return buf.data();
}

// The CPU's model name from /proc/cpuinfo ("unknown" elsewhere).
inline std::string read_cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

// A JSON string literal (quotes and backslashes escaped, control characters dropped).
inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o + "\"";
}

// The "machine" object of every results file: CPU model, hardware threads, threads the run used.
inline std::string machine_json(int threads_used) {
  return "{\"cpu\": " + json_str(read_cpu_model()) +
         ", \"hardware_threads\": " + std::to_string(std::thread::hardware_concurrency()) +
         ", \"threads_used\": " + std::to_string(threads_used) + "}";
}

// The threads a run that does not set them uses: OpenMP's OMP_NUM_THREADS (scripts/bench.sh sets
// it for every framework), else every hardware thread.
inline int default_threads() {
  const char* e = getenv("OMP_NUM_THREADS");
  const int n = e ? atoi(e) : 0;
  return n > 0 ? n : static_cast<int>(std::thread::hardware_concurrency());
}

// When the run ended, UTC ("2026-11-23 01:43"): make_table.py states it (a file's mtime is not
// when it was measured once git has checked it out).
inline std::string measured_utc_json() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return json_str(buf);
}

// The "versions" object: the compiler that built the benchmark, then `extra` (name, version) pairs.
inline std::string versions_json(const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  std::string o = "{\"bench_built_with\": " + json_str(std::string("g++ ") + __VERSION__);
  for (const auto& [k, v] : extra) o += ", " + json_str(k) + ": " + json_str(v);
  return o + "}";
}

// A JSON number; NaN and infinities (a ratio over a missing figure) become null.
inline std::string json_num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace ingot::bench
