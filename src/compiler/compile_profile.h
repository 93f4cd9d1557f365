// Compile-time profiling (CompileOptions::profile): how long each stage of a compile took, the
// passes inside "optimize" and the backend's steps inside "lower" (the CPU backend: generating
// C++, building it or loading it from the cache), as nested spans. A compile with `profile` on
// opens a CompileProfileSession; ProfileScope marks a span wherever one is open on this thread
// and costs a branch where none is.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ingot {

struct ProfileSpan {
  std::string name;
  int depth = 0;          // 0: a stage; 1: a pass or backend step inside it; ...
  double start_ms = 0;    // since the session opened
  double duration_ms = 0;
};

// The spans of one compile, in the order they opened. Writes them (`finish`) as JSON that is
// also a Chrome trace ({"traceEvents": [...]}: chrome://tracing and Perfetto open it), or, with
// no path, as a table on stderr.
class CompileProfileSession {
 public:
  // Active only when `enabled` and no session is open on this thread (an outer compile owns it).
  CompileProfileSession(bool enabled, std::string output_path);
  ~CompileProfileSession();
  CompileProfileSession(const CompileProfileSession&) = delete;
  CompileProfileSession& operator=(const CompileProfileSession&) = delete;
  // Writes the profile (atomically) and closes the session; a no-op when it is not active.
  void finish();

 private:
  friend class ProfileScope;
  bool active_ = false;
  std::string output_path_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<ProfileSpan> spans_;
  int depth_ = 0;
};

class ProfileScope {
 public:
  explicit ProfileScope(const std::string& name);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  CompileProfileSession* session_;
  size_t index_ = 0;
};

// Spans as JSON with a Chrome trace's "traceEvents" (exposed for tests).
std::string profile_json(const std::vector<ProfileSpan>& spans);

}  // namespace ingot
