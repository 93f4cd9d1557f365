#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "compiler/frontend.h"
#include "compiler/shape_inference.h"
#include "ingot/compile.h"
#include "ingot/error.h"
#include "runtime/atomic_file.h"

namespace ingot {

// ---------------------------------------------------------------- options

namespace {
bool parse_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  INGOT_FAIL("Option '", name, "': expected true or false, got '", v, "'");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}
}  // namespace

std::vector<std::string> CompileOptions::option_names() {
  return {"shapes", "types", "constant_keys", "data_keys", "trainable_keys", "discard_keys",
          "static_shapes", "inference", "jit", "file_path", "dump_graph", "dump_format", "verbose"};
}

void CompileOptions::set(const std::string& name, const std::string& value) {
  if (name == "static_shapes") static_shapes = parse_bool(name, value);
  else if (name == "inference") inference = parse_bool(name, value);
  else if (name == "jit") jit = parse_bool(name, value);
  else if (name == "verbose") verbose = parse_bool(name, value);
  else if (name == "file_path") file_path = value;
  else if (name == "dump_graph") dump_graph = value;
  else if (name == "dump_format") { parse_dump_format(value); dump_format = value; }
  else if (name == "data_keys") data_keys = split(value, ',');
  else if (name == "trainable_keys") trainable_keys = split(value, ',');
  else if (name == "discard_keys") discard_keys = split(value, ',');
  else {
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
}

// ---------------------------------------------------------------- stages

namespace {

class StageLog {
 public:
  explicit StageLog(bool verbose) : verbose_(verbose) {}
  template <class F>
  auto run(const char* stage, F&& f) {
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

Graph front_half(const Model& model, const CompileOptions& options, StageLog& log) {
  options.validate();
  FlatModel flat = log.run("flatten", [&] {
    FlatModel f = flatten(model);
    log.note(std::to_string(f.nodes.size()) + " primitive blocks over " +
             std::to_string(f.wires.size()) + " wires");
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
    ShapeInferenceReport report = infer_shapes(g, resolved.constraints);
    log.note("fixpoint after " + std::to_string(report.iterations) + " sweeps");
    for (auto& a : report.assumptions) log.note(a);
    for (const Value& v : g.values())
      if (v.producer < 0 || g.find_output(v.name)) log.note("'" + v.name + "': " + to_string(v.shape));
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

}  // namespace

Graph build_graph(const Model& model, const CompileOptions& options) {
  StageLog log(options.verbose);
  return front_half(model, options, log);
}

PhysicalModel compile(const Model& model, const Backend& backend, const CompileOptions& options) {
  StageLog log(options.verbose);
  Graph g = front_half(model, options, log);
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
  return log.run("function generation", [&] {
    PhysicalModel pm(std::move(g), be, opts, exe);
    log.note("inputs: " + std::to_string(pm.input_names().size()) + ", parameters: " +
             std::to_string(pm.parameter_names().size()) + ", outputs: " +
             std::to_string(pm.output_names().size()) + (options.jit ? "" : " (lowering on first evaluate)"));
    return pm;
  });
}

}  // namespace ingot
