// Hot-path auto-compile (GT-style, keyed on structure, shapes and dtypes).
//
// Every evaluated graph gets a structural key (ops, wiring, attributes, input shapes and
// dtypes; not data). A key evaluated `auto_compile_threshold` times is queued for a build on a
// background thread, and the eager path carries on without waiting; once the build is ready the
// next evaluation of that key runs the compiled executable instead of the eager ops (never both).
// A failed build logs one warning and leaves that key eager for good.
//
// A graph holding a collective (all_reduce, ...) is built at once instead, as INGOT_COMPILE does:
// every rank of the group then switches to the compiled executable at the same evaluation. With a
// background build each rank would switch when its own build is ready, and the compiled graph may
// run its collectives differently from the eager one (CSE merges two identical ones), so the
// ranks would disagree on which collective comes next.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "ingot/error.h"
#include "ir/op_registry.h"
#include "trace/array_impl.h"
#include "trace/hot_path.h"
#include "trace/trace_state.h"

namespace ingot {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

using Signature = std::vector<std::pair<DType, Shape>>;

bool has_collective(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (get_op(n.op).collective) return true;
    for (const Graph& sub : n.subgraphs)
      if (has_collective(sub)) return true;
  }
  return false;
}

Signature input_signature(const Graph& g) {
  Signature s;
  for (ValueId id : g.leaves()) s.emplace_back(g.value(id).dtype, to_shape(g.value(id).shape));
  return s;
}

// Why a graph with the same op sequence as one compiled before needs a build of its own.
std::string recompile_reason(const Signature& before, const Signature& now) {
  if (before.size() != now.size())
    return "new structure (" + std::to_string(now.size()) + " inputs, was " + std::to_string(before.size()) + ")";
  for (size_t i = 0; i < now.size(); ++i)
    if (now[i].first != before[i].first)
      return "new dtype (input " + std::to_string(i) + ": " + std::string(dtype_name(now[i].first)) + ", was " +
             std::string(dtype_name(before[i].first)) + ")";
  for (size_t i = 0; i < now.size(); ++i)
    if (now[i].second != before[i].second)
      return "new shape (input " + std::to_string(i) + ": " + to_string(now[i].second) + ", was " +
             to_string(before[i].second) + ")";
  return "new attributes or wiring";
}

struct Entry {
  enum class State { Counting, Building, Ready, Failed };
  State state = State::Counting;
  int64_t count = 0;
  std::string ops;  // for logs
  uint64_t hash = 0;
  BuiltGraph built;
  double eager_ms = 0, compiled_ms = 0;
  int64_t eager_n = 0, compiled_n = 0;
  bool speedup_logged = false;
};

constexpr int kSpeedupAfter = 3;  // compiled runs averaged before the speedup line

class HotPath {
 public:
  std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& inputs, const std::string& region) {
    const std::shared_ptr<const CompileConfig> cfg = current_config();
    const bool eligible = compile_enabled() && (cfg->auto_compile || cfg->compile_all || !region.empty());
    if (!eligible && cfg->instruction_log.empty()) {
      count_eager();
      return run_eager(graph, inputs);
    }
    const std::string key = structural_key(graph);
    std::shared_ptr<Entry> e;
    std::optional<BuiltGraph> built;
    bool start_build = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.evaluations;
      auto& slot = entries_[key];
      if (!slot) {
        slot = std::make_shared<Entry>();
        slot->ops = (region.empty() ? "" : "region '" + region + "': ") + op_sequence(graph);
        slot->hash = std::hash<std::string>{}(key);
        ++stats_.distinct_graphs;
      }
      e = slot;
      ++e->count;
      // Decided before any build starts: the evaluation that queues a build runs eager.
      if (e->state == Entry::State::Ready) built = e->built;
      const int64_t threshold = cfg->compile_all ? 1 : cfg->auto_compile_threshold;
      if (eligible && e->state == Entry::State::Counting && e->count >= threshold) {
        e->state = Entry::State::Building;
        start_build = true;
        ++stats_.compiles_started;
      }
    }
    if (start_build && begin_build(cfg, graph, e, region)) {  // built in place (INGOT_COMPILE)
      std::lock_guard<std::mutex> lock(mu_);
      if (e->state == Entry::State::Ready) built = e->built;
    }
    const auto t0 = Clock::now();
    const bool compiled = built.has_value();
    std::vector<Tensor> out = compiled ? built->run(inputs) : run_eager(graph, inputs);
    const double ms = ms_between(t0, Clock::now());
    record(*cfg, *e, compiled, ms);
    return out;
  }

  AutoCompileStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return queue_.empty() && in_flight_ == 0; });
  }

  void reset() {
    wait();
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
    families_.clear();
    stats_ = {};
  }

 private:
  struct Job {
    std::shared_ptr<const CompileConfig> cfg;
    Graph graph;
    std::shared_ptr<Entry> entry;
  };

  static std::vector<Tensor> run_eager(const Graph& graph, const std::vector<Tensor>& inputs) {
    return ReferenceBackend().lower(graph, {})->run(inputs);
  }

  void count_eager() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.evaluations;
    ++stats_.eager_runs;
  }

  // Queues the build (or, for INGOT_COMPILE, builds now and returns true).
  bool begin_build(const std::shared_ptr<const CompileConfig>& cfg, const Graph& graph, const std::shared_ptr<Entry>& e,
                   const std::string& region) {
    const Signature sig = input_signature(graph);
    std::string family_key = region + "|" + op_sequence(graph, SIZE_MAX);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = families_.find(family_key);
      if (cfg->debug) {
        if (it != families_.end())
          compile_log(*cfg, "[COMPILE] recompiling " + e->ops + ": " + recompile_reason(it->second, sig));
        else
          compile_log(*cfg, std::string("[COMPILE] hot ") + (region.empty() ? "sequence " : "") + e->ops + " (seen " +
                                std::to_string(e->count) + " times)");
      }
      families_[family_key] = sig;
    }
    const bool now = cfg->compile_all || has_collective(graph);
    if (cfg->debug)
      compile_log(*cfg, "[COMPILE] compile started: " + e->ops + " (graph " + hex(e->hash) +
                            (now ? ")" : ", in the background)"));
    Job job{cfg, graph, e};
    if (now) {  // INGOT_COMPILE, or collectives (see the file's comment): build now, use it from this evaluation on
      build(job);
      return true;
    }
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    if (!worker_started_) {
      worker_started_ = true;
      std::thread([this] { work(); }).detach();
    }
    wake_.notify_one();
    return false;
  }

  void work() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
        ++in_flight_;
      }
      build(job);
      {
        std::lock_guard<std::mutex> lock(mu_);
        --in_flight_;
      }
      idle_.notify_all();
    }
  }

  void build(Job& job) {
    const CompileConfig& cfg = *job.cfg;
    Entry& e = *job.entry;
    try {
      BuiltGraph b = build_graph_executable(std::move(job.graph), {}, cfg);
      {
        std::lock_guard<std::mutex> lock(mu_);
        e.built = b;
        e.state = Entry::State::Ready;
        ++stats_.compiles_finished;
      }
      if (cfg.debug)
        compile_log(cfg, "[COMPILE] compile finished: " + e.ops + " in " + fixed(b.build_ms, 1) +
                             " ms; later evaluations run compiled");
    } catch (const std::exception& ex) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        e.state = Entry::State::Failed;
        ++stats_.compile_failures;
      }
      compile_log(cfg, "[COMPILE] warning: compile failed for " + e.ops + ", staying eager: " + ex.what());
    }
  }

  void record(const CompileConfig& cfg, Entry& e, bool compiled, double ms) {
    std::string speedup;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++(compiled ? stats_.compiled_runs : stats_.eager_runs);
      if (compiled) {
        e.compiled_ms += ms;
        ++e.compiled_n;
      } else {
        e.eager_ms += ms;
        ++e.eager_n;
      }
      if (compiled && !e.speedup_logged && e.compiled_n == kSpeedupAfter && e.eager_n > 0) {
        e.speedup_logged = true;
        const double eager = e.eager_ms / static_cast<double>(e.eager_n);
        const double comp = e.compiled_ms / static_cast<double>(e.compiled_n);
        speedup = "[COMPILE] speedup " + e.ops + ": eager " + fixed(eager, 3) + " ms -> compiled " + fixed(comp, 3) +
                  " ms per evaluation (" + fixed(comp > 0 ? eager / comp : 0, 2) + "x)";
      }
      if (!cfg.instruction_log.empty()) write_instruction(cfg, e, compiled, ms);
    }
    if (!speedup.empty() && cfg.debug) compile_log(cfg, speedup);
  }

  // One line per evaluation: time since the first one, how it ran, which graph, its ops. A log
  // that cannot be opened is a warning once per path, never an exception: the evaluation it
  // would describe has already run and its results must reach the caller.
  void write_instruction(const CompileConfig& cfg, const Entry& e, bool compiled, double ms) {
    const std::string& path = cfg.instruction_log;
    if (path != log_path_) {
      log_.close();
      log_.clear();
      log_.open(path, std::ios::app);
      log_path_ = path;
      if (!log_.good())
        compile_log(cfg, "[COMPILE] warning: INGOT_INSTRUCTION_LOG: cannot open '" + path +
                             "' for appending; evaluations are not logged");
    }
    if (!log_.good()) return;
    log_ << "t=" << fixed(ms_between(start_, Clock::now()), 3) << "ms mode=" << (compiled ? "compiled" : "eager")
         << " graph=" << hex(e.hash) << " run=" << fixed(ms, 3) << "ms ops=" << e.ops << "\n";
    log_.flush();
  }

  static std::string hex(uint64_t h) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  std::unordered_map<std::string, Signature> families_;
  AutoCompileStats stats_;
  std::deque<Job> queue_;
  int in_flight_ = 0;
  bool worker_started_ = false;
  std::ofstream log_;
  std::string log_path_;
  Clock::time_point start_ = Clock::now();
};

// Never destroyed: the worker thread may be mid-build when the process exits.
HotPath& hot_path() {
  static HotPath* h = new HotPath;
  return *h;
}

}  // namespace

std::vector<Tensor> hot_path_run(const Graph& graph, const std::vector<Tensor>& inputs, const std::string& region) {
  return hot_path().run(graph, inputs, region);
}

}  // namespace detail

AutoCompileStats auto_compile_stats() { return detail::hot_path().stats(); }
void wait_for_background_compiles() { detail::hot_path().wait(); }
void reset_auto_compile() { detail::hot_path().reset(); }

}  // namespace ingot
