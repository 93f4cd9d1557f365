#include "compiler/target_options.h"

#include <algorithm>
#include <sstream>

#include "ingot/error.h"
#include "runtime/parallel.h"

namespace ingot {

bool parse_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  INGOT_FAIL("Option '", name, "': expected true or false, got '", v, "'");
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

namespace {

const std::vector<std::string> kHints = {"input_batch_size_range", "inference_priority"};
const std::vector<std::string> kCpuOptions = {"num_threads", "vectorize"};
const std::vector<std::string> kTargets = {"cpu"};
const std::vector<std::string> kOptimizeFor = {"default", "latency", "throughput", "memory", "size"};
const std::vector<std::string> kPriorities = {"latency", "throughput"};

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

bool one_of(const std::string& v, const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), v) != names.end();
}

// A whole number (what: "Option 'hints': input_batch_size_range's lower end").
int64_t parse_whole(const std::string& what, const std::string& text) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  INGOT_CHECK(used == text.size() && !text.empty(), what, ": expected a whole number, got '", text, "'");
  return n;
}

// "key=value,key=value" of `option`, each key one of `keys`; fn(key, value) takes each.
template <class F>
void parse_items(const std::string& option, const std::string& spec, const std::vector<std::string>& keys, F&& fn) {
  for (const std::string& item : split_list(spec, ',')) {
    const size_t eq = item.find('=');
    INGOT_CHECK(eq != std::string::npos, "Option '", option, "': expected key=value items, got '", item,
                "' (valid keys: ", joined(keys), ")");
    const std::string key = item.substr(0, eq);
    INGOT_CHECK(one_of(key, keys), "Option '", option, "': unknown key '", key, "' (valid keys: ", joined(keys), ")");
    fn(key, item.substr(eq + 1));
  }
}

CompileOptions::Hints parse_hints(const std::string& spec) {
  CompileOptions::Hints h;
  parse_items("hints", spec, kHints, [&](const std::string& key, const std::string& v) {
    if (key == "inference_priority") {
      h.inference_priority = v;
      return;
    }
    const size_t colon = v.find(':');
    INGOT_CHECK(colon != std::string::npos, "Option 'hints': input_batch_size_range must be a (lo, hi) pair, got '",
                v, "' (as a string: \"lo:hi\")");
    h.input_batch_size_range = std::pair{parse_whole("Option 'hints': input_batch_size_range's lo", v.substr(0, colon)),
                                         parse_whole("Option 'hints': input_batch_size_range's hi", v.substr(colon + 1))};
  });
  return h;
}

CompileOptions::CpuTuning parse_cpu_options(const std::string& spec) {
  CompileOptions::CpuTuning t;
  parse_items("cpu_options", spec, kCpuOptions, [&](const std::string& key, const std::string& v) {
    if (key == "vectorize") {
      t.vectorize = parse_bool("cpu_options['vectorize']", v);
      return;
    }
    const int64_t n = parse_whole("Option 'cpu_options': num_threads", v);
    INGOT_CHECK(n >= 1 && n <= 4096, "Option 'cpu_options': num_threads must be a whole number from 1 to 4096, got ", n);
    t.num_threads = static_cast<int>(n);
  });
  return t;
}

std::string range_text(const std::pair<int64_t, int64_t>& r) {
  return "(" + std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
}

// Constraints fixing dim 0 of every run-time input whose dim 0 is symbolic to `batch`.
std::vector<ShapeConstraint> batch_constraints(const Graph& g, int64_t batch) {
  std::vector<ShapeConstraint> out;
  for (ValueId id : g.leaves_of(ValueKind::Input)) {
    const Value& v = g.value(id);
    if (v.shape.empty() || v.shape[0].known()) continue;
    ShapeTemplate t(v.shape.size(), Dim::unknown());
    t[0] = Dim(batch);
    out.push_back({id, t, "", "hints['input_batch_size_range']"});
  }
  return out;
}

}  // namespace

std::vector<std::string> target_option_names() { return {"hints", "target_hardware", "cpu_options", "optimize_for"}; }

bool set_target_option(CompileOptions& o, const std::string& name, const std::string& value) {
  CompileOptions probe;  // checked alone, so the order of set() calls does not matter
  if (name == "hints") probe.hints = parse_hints(value);
  else if (name == "cpu_options") probe.cpu_options = parse_cpu_options(value);
  else if (name == "target_hardware") probe.target_hardware = value;
  else if (name == "optimize_for") probe.optimize_for = value;
  else return false;
  validate_target_options(probe);
  if (name == "hints") o.hints = probe.hints;
  else if (name == "cpu_options") o.cpu_options = probe.cpu_options;
  else if (name == "target_hardware") o.target_hardware = value;
  else o.optimize_for = value;
  return true;
}

void validate_target_options(const CompileOptions& o) {
  INGOT_CHECK(one_of(o.target_hardware, kTargets), "Option 'target_hardware': ingot cannot compile for '",
              o.target_hardware, "' here (supported: ", joined(kTargets),
              "; every backend of this build runs on this machine's CPU)");
  INGOT_CHECK(one_of(o.optimize_for, kOptimizeFor), "Option 'optimize_for': unknown goal '", o.optimize_for,
              "' (valid: ", joined(kOptimizeFor), ")");
  const std::string& p = o.hints.inference_priority;
  INGOT_CHECK(p.empty() || one_of(p, kPriorities), "Option 'hints': unknown inference_priority '", p,
              "' (valid: ", joined(kPriorities), ")");
  if (const auto& r = o.hints.input_batch_size_range)
    INGOT_CHECK(r->first >= 1 && r->first <= r->second, "Option 'hints': input_batch_size_range ", range_text(*r),
                " must be (lo, hi) with 1 <= lo <= hi");
  INGOT_CHECK(o.cpu_options.num_threads >= 0, "Option 'cpu_options': num_threads must be at least 1, got ",
              o.cpu_options.num_threads);
  INGOT_CHECK(p.empty() || !one_of(o.optimize_for, kPriorities) || p == o.optimize_for, "Option 'optimize_for' is '",
              o.optimize_for, "' but hints['inference_priority'] is '", p, "': give one priority");
  INGOT_CHECK(o.optimize_for != "memory" || o.memory_planning != "none",
              "Option 'optimize_for' is 'memory' but memory_planning is 'none' (every tensor its own memory); "
              "use memory_planning 'greedy'");
}

void check_target_backend(const CompileOptions& o, const std::string& backend) {
  if (backend == "cpu") return;
  const CompileOptions::CpuTuning none;
  INGOT_CHECK(o.cpu_options.num_threads == none.num_threads && o.cpu_options.vectorize == none.vectorize,
              "Option 'cpu_options' tunes the CPU backend's generated code (CpuBackend), not the ", backend,
              " backend's");
  INGOT_CHECK(o.optimize_for != "size", "Option 'optimize_for': 'size' builds the CPU backend's generated library "
              "with -Os (CpuBackend); the ", backend, " backend builds none (valid for it: default, latency, "
              "throughput, memory)");
}

std::string inference_priority(const CompileOptions& o) {
  if (!o.hints.inference_priority.empty()) return o.hints.inference_priority;
  return one_of(o.optimize_for, kPriorities) ? o.optimize_for : "";
}

int threads_per_call(const CompileOptions& o, int backend_threads) {
  if (o.cpu_options.num_threads > 0) return o.cpu_options.num_threads;
  if (backend_threads > 0) return backend_threads;
  const std::string p = inference_priority(o);
  if (p == "throughput") return 1;  // one call per core, calls running side by side
  if (p == "latency") return parallel_num_threads();
  return 0;
}

int64_t batch_chunk_bytes(const CompileOptions& o, int64_t default_bytes) {
  int64_t bytes = default_bytes;
  if (inference_priority(o) == "throughput") bytes = std::min<int64_t>(bytes, int64_t{64} << 20);
  if (o.optimize_for == "memory") bytes = std::min<int64_t>(bytes, int64_t{16} << 20);
  return bytes;
}

bool checkpointing_enabled(const CompileOptions& o) { return o.gradient_checkpointing || o.optimize_for == "memory"; }

std::string apply_batch_range(Graph& g, const std::vector<ShapeConstraint>& constraints, const CompileOptions& o) {
  const auto& r = o.hints.input_batch_size_range;
  if (!r) return "";
  bool any = false;
  for (ValueId id : g.leaves_of(ValueKind::Input)) {
    const Value& v = g.value(id);
    if (v.shape.empty()) continue;
    any = true;
    INGOT_CHECK(!v.shape[0].known() || (v.shape[0].value >= r->first && v.shape[0].value <= r->second),
                "Option 'hints': input '", v.name, "' has batch ", v.shape[0].value,
                " (its dim 0) at compile time, outside input_batch_size_range ", range_text(*r));
  }
  INGOT_CHECK(any, "Option 'hints': input_batch_size_range is given but no run-time input has a dim 0 to hold a batch");
  if (r->first != r->second) return "hints: batch (dim 0 of the inputs) in " + range_text(*r) + ", checked on evaluate";
  std::vector<ShapeConstraint> all = constraints;
  const std::vector<ShapeConstraint> fixed = batch_constraints(g, r->first);
  if (fixed.empty()) return "hints: batch " + std::to_string(r->first) + " already static";
  all.insert(all.end(), fixed.begin(), fixed.end());
  infer_shapes(g, all);
  return "hints: batch fixed to " + std::to_string(r->first) + " at compile time (input_batch_size_range " +
         range_text(*r) + ") in " + std::to_string(fixed.size()) + " inputs";
}

MemoryPlan plan_memory_for(const Graph& g, const CompileOptions& o) {
  MemoryPlan plan = plan_memory(g, o.memory_planning);
  const auto& r = o.hints.input_batch_size_range;
  if (plan.planned || !r) return plan;
  const std::vector<ShapeConstraint> top = batch_constraints(g, r->second);
  if (top.empty()) return plan;
  Graph at_top = g;
  try {
    infer_shapes(at_top, top);
  } catch (const Error& e) {
    INGOT_FAIL("Option 'hints': the model does not hold a batch of ", r->second,
               " (the top of input_batch_size_range): ", e.what());
  }
  MemoryPlan worst = plan_memory(at_top, o.memory_planning);
  if (!worst.planned) return plan;  // other dimensions are unknown too
  worst.assumption = "at batch " + std::to_string(r->second) + ", the top of hints input_batch_size_range";
  return worst;
}

void check_batch_range(const CompileOptions& o, const std::string& input, const Shape& shape) {
  const auto& r = o.hints.input_batch_size_range;
  if (!r || shape.empty()) return;
  INGOT_CHECK(shape[0] >= r->first && shape[0] <= r->second, "Input '", input, "' has batch ", shape[0],
              " (its dim 0), outside the compile option hints['input_batch_size_range'] = ", range_text(*r));
}

}  // namespace ingot
