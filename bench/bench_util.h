// Timing helpers every benchmark shares: medians of repeated runs, and fresh cache folders so a
// "cold" figure really starts from an empty cache.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
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

}  // namespace ingot::bench
