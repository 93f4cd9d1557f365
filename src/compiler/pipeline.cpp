#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <cmath>

#include "compiler/autodiff.h"
#include "compiler/checkpointing.h"
#include "compiler/compile_profile.h"
#include "compiler/frontend.h"
#include "compiler/gradient_pipeline.h"
#include "compiler/memory_plan.h"
#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "compiler/target_options.h"
#include "ingot/compile.h"
#include "ingot/error.h"
#include "runtime/atomic_file.h"

namespace ingot {

// ---------------------------------------------------------------- options

namespace {
bool is_pass(const std::string& name) {
  const std::vector<std::string> names = pass_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The built-in passes, comma-separated, for error messages.
std::string pass_list() {
  std::string passes;
  for (const auto& n : pass_names()) passes += (passes.empty() ? "" : ", ") + n;
  return passes;
}

// Unknown pass names in `optimizations` are errors listing the valid ones.
void check_pass_names(const std::map<std::string, bool>& optimizations) {
  for (const auto& [name, on] : optimizations)
    INGOT_CHECK(is_pass(name), "Option 'optimizations': unknown pass '", name, "' (valid passes: ", pass_list(), ")");
}
}  // namespace

std::vector<std::string> CompileOptions::option_names() {
  return {"shapes", "types", "constant_keys", "data_keys", "trainable_keys", "discard_keys",
          "outputs", "static_shapes", "inference", "dynamic_control_flow", "jit", "file_path", "dump_graph", "dump_format", "verbose", "profile", "profile_output", "trace_shapes",
          "optimization_level", "optimizations", "custom_passes", "code_transformers", "dump_after_each_pass",
          "layout_target", "memory_planning", "max_memory_gb", "mixed_precision", "gradient_checkpointing",
          "checkpoint_segments", "data_parallel", "gradient_bucket_bytes", "gradient_overlap",
          "hints", "target_hardware", "cpu_options", "optimize_for"};
}

void CompileOptions::set(const std::string& name, const std::string& value) {
  if (name == "static_shapes") static_shapes = parse_bool(name, value);
  else if (name == "inference") inference = parse_bool(name, value);
  else if (name == "dynamic_control_flow") dynamic_control_flow = parse_bool(name, value);
  else if (name == "jit") jit = parse_bool(name, value);
  else if (name == "verbose") verbose = parse_bool(name, value);
  else if (name == "profile") profile = parse_bool(name, value);
  else if (name == "trace_shapes") trace_shapes = parse_bool(name, value);
  else if (name == "profile_output") profile_output = value;
  else if (name == "file_path") file_path = value;
  else if (name == "dump_graph") dump_graph = value;
  else if (name == "dump_format") { parse_dump_format(value); dump_format = value; }
  else if (name == "data_keys") data_keys = split_list(value, ',');
  else if (name == "trainable_keys") trainable_keys = split_list(value, ',');
  else if (name == "discard_keys") discard_keys = split_list(value, ',');
  else if (name == "outputs") outputs = split_list(value, ',');
  else if (name == "optimization_level") { optimization_level_index(value); optimization_level = value; }
  else if (name == "optimizations") {
    // "cse=off,fusion=on" (a bare name means on)
    std::map<std::string, bool> m;
    for (const std::string& item : split_list(value, ',')) {
      size_t eq = item.find('=');
      std::string pass = item.substr(0, eq);
      m[pass] = eq == std::string::npos ? true : parse_bool("optimizations['" + pass + "']", item.substr(eq + 1));
    }
    // Only the names here: whether the set agrees with the other options (mixed_precision) is
    // validate()'s, once every option is set, whatever the order of set() calls.
    check_pass_names(m);
    optimizations = std::move(m);
  }
  else if (name == "dump_after_each_pass") dump_after_each_pass = parse_bool(name, value);
  else if (name == "gradient_checkpointing") gradient_checkpointing = parse_bool(name, value);
  else if (name == "data_parallel") data_parallel = parse_bool(name, value);
  else if (name == "gradient_overlap") gradient_overlap = parse_bool(name, value);
  else if (name == "gradient_bucket_bytes") {
    size_t used = 0;
    long long n = -1;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    INGOT_CHECK(used == value.size() && !value.empty() && n >= 0,
                "Option 'gradient_bucket_bytes': expected a whole number of bytes >= 0, got '", value, "'");
    gradient_bucket_bytes = n;
  }
  else if (name == "checkpoint_segments") {
    size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    INGOT_CHECK(used == value.size() && !value.empty() && n <= 1000000,
                "Option 'checkpoint_segments': expected a whole number of segments, got '", value, "'");
    CompileOptions probe;
    probe.checkpoint_segments = static_cast<int>(n);
    probe.validate();
    checkpoint_segments = static_cast<int>(n);
  }
  else if (name == "layout_target") { parse_layout_target(value); layout_target = value; }
  else if (name == "memory_planning") { CompileOptions probe; probe.memory_planning = value; probe.validate(); memory_planning = value; }
  else if (name == "mixed_precision") { CompileOptions probe; probe.mixed_precision = value; probe.validate(); mixed_precision = value; }
  else if (name == "max_memory_gb") {
    double x = 0;
    size_t used = 0;
    try {
      x = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    INGOT_CHECK(used == value.size() && !value.empty(), "Option 'max_memory_gb': expected a number of GiB, got '", value, "'");
    CompileOptions probe;
    probe.max_memory_gb = x;
    probe.validate();
    max_memory_gb = x;
  }
  else if (set_target_option(*this, name, value)) {
    // hints, target_hardware, cpu_options, optimize_for (compiler/target_options.h)
  } else {
    std::string valid;
    for (const auto& n : option_names()) valid += (valid.empty() ? "" : ", ") + n;
    INGOT_FAIL("Unknown compile option '", name, "' (valid options: ", valid,
               "; shapes, types and constant_keys take structured values)");
  }
}

void CompileOptions::validate() const {
  try {
    parse_dump_format(dump_format);
  } catch (const Error& e) {
    INGOT_FAIL("Option 'dump_format': ", e.what());
  }
  for (const auto& [k, s] : shapes) {
    int variadic = 0;
    for (const Dim& d : s) variadic += d.kind() == Dim::Kind::Variadic;
    INGOT_CHECK(variadic <= 1, "Option 'shapes': '", k, "' has more than one variadic part in ",
                to_string(s));
  }
  for (const auto& [k, t] : constant_keys)
    INGOT_CHECK(t.defined(), "Option 'constant_keys': '", k, "' has no value");
  optimization_level_index(optimization_level);
  check_pass_names(optimizations);
  for (const CustomPass& cp : custom_passes) {
    INGOT_CHECK(!cp.name.empty(), "Option 'custom_passes': a custom pass has no name");
    INGOT_CHECK(static_cast<bool>(cp.fn), "Option 'custom_passes': custom pass '", cp.name, "' has no function");
    INGOT_CHECK(cp.after == "start" || cp.after == "end" || is_pass(cp.after), "Option 'custom_passes': custom pass '",
                cp.name, "' runs after unknown point '", cp.after, "' (valid points: start, ", pass_list(), ", end)");
  }
  parse_layout_target(layout_target);
  INGOT_CHECK(memory_planning == "greedy" || memory_planning == "none", "Option 'memory_planning': unknown strategy '",
              memory_planning, "' (valid: greedy, none)");
  INGOT_CHECK(std::isfinite(max_memory_gb) && max_memory_gb >= 0, "Option 'max_memory_gb': must be a non-negative number of GiB (0 = no limit), got ",
              max_memory_gb);
  INGOT_CHECK(checkpoint_segments >= 1, "Option 'checkpoint_segments': must be at least 1, got ", checkpoint_segments);
  INGOT_CHECK(gradient_bucket_bytes >= 0, "Option 'gradient_bucket_bytes': must be >= 0, got ", gradient_bucket_bytes);
  INGOT_CHECK(mixed_precision == "none" || mixed_precision == "bfloat16" || mixed_precision == "float16",
              "Option 'mixed_precision': unknown type '", mixed_precision, "' (valid: none, bfloat16, float16)");
  validate_target_options(*this);
  // Combinations that would otherwise silently do nothing.
  const auto mp = optimizations.find("mixed_precision");
  INGOT_CHECK(mp == optimizations.end() || !mp->second || mixed_precision != "none",
              "Option 'optimizations': the mixed_precision pass is enabled but option 'mixed_precision' is \"none\", "
              "so it has no type to use; set mixed_precision to bfloat16 or float16 (which also enables the pass)");
  INGOT_CHECK(!dump_after_each_pass || !dump_graph.empty(),
              "Option 'dump_after_each_pass' is set but 'dump_graph' is empty: the per-pass files are named "
              "<dump_graph>.<index>.<pass>.<ext>; set dump_graph to a path (or \"-\" for stdout)");
}

namespace {

// Enforces max_memory_gb on `plan` (of the `graph` named in the messages).
void check_memory_limit(const MemoryPlan& plan, const CompileOptions& options, const std::string& graph) {
  if (options.max_memory_gb <= 0) return;
  // Without a plan there is no peak to compare: failing here beats a limit that silently does
  // nothing (a symbolic batch can be any size).
  INGOT_CHECK(plan.planned, "Option 'max_memory_gb' (", options.max_memory_gb, " GiB) cannot be checked for the ",
              graph, ": its memory plan has no size (", plan.reason,
              "); give every symbolic dimension a size in `shapes` (or set static_shapes) to bound it, bound the "
              "batch with hints input_batch_size_range, or set max_memory_gb to 0");
  const double limit = options.max_memory_gb * 1024.0 * 1024.0 * 1024.0;
  const int64_t need = options.memory_planning == "none" ? plan.unplanned_bytes : plan.planned_peak_bytes;
  INGOT_CHECK(static_cast<double>(need) <= limit, "Memory plan exceeds max_memory_gb: the planned peak is ",
              static_cast<double>(need) / (1024.0 * 1024.0 * 1024.0), " GiB (", need,
              " bytes, memory_planning = ", options.memory_planning, ") but max_memory_gb is ",
              options.max_memory_gb, " GiB");
}

}  // namespace

// ---------------------------------------------------------------- stages

namespace {

class StageLog {
 public:
  explicit StageLog(bool verbose) : verbose_(verbose) {}
  template <class F>
  auto run(const char* stage, F&& f) {
    const ProfileScope span(stage);
    auto t0 = std::chrono::steady_clock::now();
    auto result = f();
    if (verbose_) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << "[ingot] " << stage << " (" << ms << " ms)";
      for (const std::string& line : lines_) std::cerr << "\n[ingot]   " << line;
      std::cerr << "\n";
    }
    lines_.clear();
    return result;
  }
  void note(std::string line) { lines_.push_back(std::move(line)); }

 private:
  bool verbose_;
  std::vector<std::string> lines_;
};

void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  write_file_atomic(path, text);
}

// Flatten, resolve terminals, infer shapes and dtypes, verify: the graph autodiff differentiates.
Graph inferred_half(const Model& model, const CompileOptions& options, StageLog& log) {
  options.validate();
  FlatModel flat = log.run("flatten", [&] {
    FlatModel f = flatten_for_compile(model, options.outputs);
    log.note(std::to_string(f.nodes.size()) + " primitive blocks over " +
             std::to_string(f.wires.size()) + " wires");
    for (const std::string& n : f.notes) log.note(n);
    return f;
  });
  ResolvedModel resolved = log.run("resolve terminals", [&] {
    ResolvedModel r = resolve_terminals(flat, options);
    const Graph& g = r.graph;
    log.note(std::to_string(g.leaves_of(ValueKind::Input).size()) + " inputs, " +
             std::to_string(g.leaves_of(ValueKind::Parameter).size()) + " parameters, " +
             std::to_string(g.leaves_of(ValueKind::Constant).size()) + " constants, " +
             std::to_string(g.outputs().size()) + " outputs; mode: " +
             (options.inference ? "inference" : "training"));
    for (auto& n : r.notes) log.note(n);
    return r;
  });
  Graph g = std::move(resolved.graph);
  log.run("shape inference", [&] {
    ShapeInferenceReport report = infer_shapes(g, resolved.constraints, options.trace_shapes);
    for (const std::string& line : report.trace) std::cerr << "[ingot] shape: " << line << "\n";
    log.note("fixpoint after " + std::to_string(report.iterations) + " sweeps");
    for (auto& a : report.assumptions) log.note(a);
    if (std::string batch = apply_batch_range(g, resolved.constraints, options); !batch.empty()) log.note(batch);
    for (const Value& v : g.values())  // the terminals (not the unnamed literals)
      if (!v.name.empty() && (v.producer < 0 || g.find_output(v.name))) log.note("'" + v.name + "': " + to_string(v.shape));
    if (options.static_shapes)
      for (const Value& v : g.values())
        INGOT_CHECK(is_static(v.shape), "static_shapes is set but '", describe_value(g, v.id),
                    "' has shape ", to_string(v.shape), "; give every symbolic dimension a size in `shapes`");
    return 0;
  });
  log.run("type inference", [&] {
    infer_types(g);
    for (const auto& [name, v] : g.outputs()) log.note("'" + name + "': " + std::string(dtype_name(g.value(v).dtype)));
    return 0;
  });
  log.run("verify", [&] {
    verify(g);
    return 0;
  });
  return g;
}

void optimize_stage(Graph& g, const CompileOptions& options, StageLog& log) {
  log.run("optimize", [&] {
    log.note("level: " + options.optimization_level);
    optimize(g, options, [&](const std::string& line) { log.note(line); });
    return 0;
  });
}

}  // namespace

Graph build_graph(const Model& model, const CompileOptions& options) {
  StageLog log(options.verbose);
  Graph g = inferred_half(model, options, log);
  optimize_stage(g, options, log);
  return g;
}

Graph build_inferred_graph(const Model& model, const CompileOptions& options) {
  StageLog log(options.verbose);
  return inferred_half(model, options, log);
}

JointGraph build_joint_graph(const Graph& forward, const std::vector<std::string>& seeded,
                             const std::vector<std::string>& wrt, const Backend& backend,
                             const CompileOptions& options, const JointGraphExtension& extend) {
  StageLog log(options.verbose);
  JointGraph joint;
  Graph& g = joint.graph;
  g = forward;
  const auto forward_nodes = static_cast<NodeId>(g.nodes().size());
  log.run("autodiff", [&] {
    const size_t nodes_before = g.nodes().size();
    auto taken = [&](const std::string& name) { return g.find_leaf(name) || g.find_output(name); };
    std::vector<std::pair<ValueId, ValueId>> seeds;
    for (const std::string& name : seeded) {
      const ValueId out = *g.find_output(name);
      const std::string input = "cotangent:" + name;
      INGOT_CHECK(!taken(input), "Cannot name the cotangent of '", name, "': the model already has a terminal '",
                  input, "'");
      const ValueId cot = g.add_input(input);
      Value& v = g.value(cot);
      v.shape = g.value(out).shape;
      v.dtype = g.value(out).dtype;
      v.shape_known = true;
      seeds.emplace_back(out, cot);
      joint.cotangent_inputs[input] = name;
    }
    std::vector<ValueId> leaves;
    for (const std::string& name : wrt) leaves.push_back(*g.find_leaf(name));
    const std::vector<ValueId> grads = append_backward(g, seeds, leaves);
    for (size_t i = 0; i < grads.size(); ++i) {
      const std::string output = "grad:" + wrt[i];
      INGOT_CHECK(!taken(output), "Cannot name the gradient of '", wrt[i], "': the model already has a terminal '",
                  output, "'");
      g.set_output(output, grads[i]);
      joint.gradient_outputs[output] = wrt[i];
    }
    std::string seeds_text;
    for (const std::string& name : seeded) seeds_text += (seeds_text.empty() ? "" : ", ") + name;
    log.note("seeded outputs: " + (seeds_text.empty() ? std::string("none") : seeds_text) + "; " +
             std::to_string(grads.size()) + " gradients; " + std::to_string(g.nodes().size() - nodes_before) +
             " backward nodes after " + std::to_string(nodes_before) + " forward nodes");
    verify(g);
    return 0;
  });
  if (extend.fn)
    log.run(extend.stage.c_str(), [&] {
      extend.fn(joint, [&](const std::string& line) { log.note(line); });
      verify(g);
      return 0;
    });
  std::optional<Graph> plain;  // the same joint graph without checkpointing, for the memory report
  if (checkpointing_enabled(options))  // the option, or optimize_for = "memory"
    log.run("gradient checkpointing", [&] {
      plain = g;
      joint.checkpoint = apply_gradient_checkpointing(g, forward_nodes, options.checkpoint_segments);
      log.note(joint.checkpoint.str());
      verify(g);
      return 0;
    });
  optimize_stage(g, options, log);
  log.run("memory planning", [&] {
    joint.memory_plan = std::make_shared<const MemoryPlan>(plan_memory_for(g, options));
    log.note(joint.memory_plan->str());
    check_memory_limit(*joint.memory_plan, options, "forward + backward graph");
    if (plain) {
      StageLog quiet(false);
      optimize_stage(*plain, options, quiet);
      joint.plain_memory_plan = std::make_shared<const MemoryPlan>(plan_memory_for(*plain, options));
      if (joint.memory_plan->planned && joint.plain_memory_plan->planned)
        log.note("gradient checkpointing: planned peak " + human_bytes(joint.memory_plan->planned_peak_bytes) + ", " +
                 human_bytes(joint.plain_memory_plan->planned_peak_bytes) + " without (saves " +
                 human_bytes(joint.plain_memory_plan->planned_peak_bytes - joint.memory_plan->planned_peak_bytes) + ")");
    }
    return 0;
  });
  joint.executable = log.run("lower", [&] {
    std::shared_ptr<const Executable> e = backend.lower(g, options);
    log.note("backend: " + backend.name() + ", " + std::to_string(g.nodes().size()) + " nodes (forward + backward)");
    joint.arena_bytes = e->arena_bytes();  // the plain graph is not built: worked out below
    joint.plain_arena_bytes = plain ? backend.arena_bytes(*plain, options) : joint.arena_bytes;
    if (plain && joint.arena_bytes > 0)
      log.note("gradient checkpointing: backend arena " + human_bytes(joint.arena_bytes) + ", " +
               human_bytes(joint.plain_arena_bytes) + " without");
    return e;
  });
  return joint;
}

GradientMemory joint_memory(const JointGraph& joint) {
  GradientMemory m;
  auto peak = [](const std::shared_ptr<const MemoryPlan>& p) { return p && p->planned ? p->planned_peak_bytes : 0; };
  m.planned_peak_bytes = peak(joint.memory_plan);
  m.without_checkpointing_bytes = joint.plain_memory_plan ? peak(joint.plain_memory_plan) : m.planned_peak_bytes;
  m.recomputed_nodes = joint.checkpoint.recomputed_nodes;
  m.arena_bytes = joint.arena_bytes;
  m.without_checkpointing_arena_bytes = joint.plain_arena_bytes;
  return m;
}

PhysicalModel compile(const Model& model, const Backend& backend, const CompileOptions& options) {
  CompileProfileSession profile(options.profile, options.profile_output);
  StageLog log(options.verbose);
  PhysicalModel pm = compile_inferred(inferred_half(model, options, log), backend, options);
  profile.finish();
  return pm;
}

PhysicalModel compile_inferred(Graph inferred, const Backend& backend, const CompileOptions& options) {
  CompileProfileSession profile(options.profile, options.profile_output);  // unless compile() opened one
  check_target_backend(options, backend.name());
  StageLog log(options.verbose);
  Graph unoptimized;
  if (!options.inference) unoptimized = inferred;
  std::map<std::string, ValueKind> terminals;  // the model's inputs and parameters, before optimization
  for (ValueId id : inferred.leaves())
    if (inferred.value(id).kind != ValueKind::Constant) terminals[inferred.value(id).name] = inferred.value(id).kind;
  Graph g = std::move(inferred);
  optimize_stage(g, options, log);
  MemoryPlan plan = log.run("memory planning", [&] {
    MemoryPlan p = plan_memory_for(g, options);
    log.note(p.str());
    check_memory_limit(p, options, "model");
    return p;
  });
  if (!options.dump_graph.empty())
    write_text(options.dump_graph, print_graph(g, parse_dump_format(options.dump_format)));
  auto opts = std::make_shared<const CompileOptions>(options);
  std::shared_ptr<const Backend> be = backend.clone();
  std::shared_ptr<const Executable> exe;
  if (options.jit) {
    exe = log.run("lower", [&] {
      std::shared_ptr<const Executable> e = be->lower(g, options);
      log.note("backend: " + be->name() + ", " + std::to_string(g.nodes().size()) + " nodes");
      if (!options.file_path.empty()) {
        write_text(options.file_path, e->source());
        log.note("wrote " + options.file_path);
      }
      return e;
    });
  }
  PhysicalModel result = log.run("function generation", [&] {
    PhysicalModel pm(std::move(g), be, opts, exe);
    pm.set_memory_plan(std::move(plan));
    for (ValueId id : pm.graph().leaves()) terminals.erase(pm.graph().value(id).name);
    pm.set_optimized_away(std::move(terminals));
    if (!options.inference) pm.set_differentiation_graph(std::move(unoptimized));
    log.note("inputs: " + std::to_string(pm.input_names().size()) + ", parameters: " +
             std::to_string(pm.parameter_names().size()) + ", outputs: " +
             std::to_string(pm.output_names().size()) + (options.jit ? "" : " (lowering on first evaluate)"));
    return pm;
  });
  profile.finish();
  return result;
}

}  // namespace ingot
