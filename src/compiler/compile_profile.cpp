#include "compiler/compile_profile.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "runtime/atomic_file.h"

namespace ingot {
namespace {
thread_local CompileProfileSession* current = nullptr;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CompileProfileSession::CompileProfileSession(bool enabled, std::string output_path)
    : active_(enabled && current == nullptr), output_path_(std::move(output_path)), t0_(std::chrono::steady_clock::now()) {
  if (active_) current = this;
}

CompileProfileSession::~CompileProfileSession() {
  if (current == this) current = nullptr;
}

void CompileProfileSession::finish() {
  if (!active_) return;
  current = nullptr;
  active_ = false;
  if (!output_path_.empty()) {
    write_file_atomic(output_path_, profile_json(spans_));
    return;
  }
  std::cerr << "[ingot] compile profile (ms):\n";
  for (const ProfileSpan& s : spans_) {
    char line[64];
    std::snprintf(line, sizeof line, "%10.2f  ", s.duration_ms);
    std::cerr << "[ingot] " << line << std::string(static_cast<size_t>(2 * s.depth), ' ') << s.name << "\n";
  }
}

ProfileScope::ProfileScope(const std::string& name) : session_(current) {
  if (session_ == nullptr) return;
  index_ = session_->spans_.size();
  session_->spans_.push_back({name, session_->depth_++, ms_since(session_->t0_), 0});
}

ProfileScope::~ProfileScope() {
  if (session_ == nullptr || current != session_) return;  // the session finished meanwhile
  ProfileSpan& s = session_->spans_[index_];
  s.duration_ms = ms_since(session_->t0_) - s.start_ms;
  --session_->depth_;
}

std::string profile_json(const std::vector<ProfileSpan>& spans) {
  nlohmann::json stages = nlohmann::json::array(), events = nlohmann::json::array();
  for (const ProfileSpan& s : spans) {
    stages.push_back({{"name", s.name}, {"depth", s.depth}, {"start_ms", s.start_ms}, {"ms", s.duration_ms}});
    // A "complete" event (ph X) per span, in microseconds, on one thread: nesting shows by time.
    events.push_back({{"name", s.name}, {"cat", s.depth == 0 ? "stage" : "step"}, {"ph", "X"}, {"pid", 1}, {"tid", 1},
                      {"ts", s.start_ms * 1e3}, {"dur", s.duration_ms * 1e3}});
  }
  double total = 0;
  for (const ProfileSpan& s : spans)
    if (s.depth == 0) total += s.duration_ms;
  return nlohmann::json{{"format", "ingot.compile_profile"}, {"total_ms", total}, {"stages", stages},
                        {"traceEvents", events}, {"displayTimeUnit", "ms"}}
             .dump(1) + "\n";
}

}  // namespace ingot
