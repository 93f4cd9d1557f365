#include "shrink.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/passes/passes.h"
#include "ingot/serialize.h"
#include "ir/graph_json.h"
#include "runtime/atomic_file.h"

namespace ingot::fuzz {
namespace {

struct Shrinker {
  const Variation& v;
  const CpuBackend::CpuOptions& cpu;
  int budget;
  bool by_error;  // the original finding was an exception, not a wrong value

  // Whether `b` still fails the way the original did (an exception only counts when the
  // original was one: a step that breaks the program differently is no smaller reproducer).
  bool fails(const Batch& b) {
    if (budget <= 0) return false;
    --budget;
    try {
      return check(b, v, cpu).has_value();
    } catch (const std::exception&) {
      return by_error;
    }
  }
};

// `b` without the nodes no output needs, and without the inputs nothing reads.
Batch pruned(Batch b) {
  remove_dead_nodes(b.graph);
  std::map<std::string, Tensor> inputs, special;
  for (ValueId id : b.graph.leaves_of(ValueKind::Input)) {
    const std::string& name = b.graph.value(id).name;
    inputs[name] = b.inputs.at(name);
    special[name] = b.special_inputs.at(name);
  }
  b.inputs = std::move(inputs);
  b.special_inputs = std::move(special);
  return b;
}

// Node `n`'s result replaced by `by` everywhere it is read.
Batch bypassed(const Batch& b, NodeId n, ValueId by) {
  Batch c = b;
  replace_uses(c.graph, c.graph.node(n).outputs[0], by);
  return pruned(std::move(c));
}

// Node `n`'s result replaced by a new input of its shape and dtype.
Batch replaced_by_input(const Batch& b, NodeId n, int serial) {
  Batch c = b;
  const Value out = c.graph.value(c.graph.node(n).outputs[0]);
  const std::string name = "s" + std::to_string(serial);
  const ValueId leaf = c.graph.add_input(name);
  c.graph.value(leaf).dtype = out.dtype;
  c.graph.value(leaf).shape = out.shape;
  c.graph.value(leaf).shape_known = true;
  Shape s;
  for (const SymDim& d : out.shape) s.push_back(d.value);
  std::mt19937_64 rng(static_cast<uint64_t>(serial) * 7919 + b.seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  Tensor t(DType::Float64, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = is_floating(out.dtype) ? u(rng) : 0.0;
  c.inputs[name] = t.astype(out.dtype);
  c.special_inputs[name] = c.inputs[name];
  replace_uses(c.graph, c.graph.node(n).outputs[0], leaf);
  return pruned(std::move(c));
}

}  // namespace

Batch shrink(const Batch& failing, const Variation& v, const CpuBackend::CpuOptions& cpu, int max_checks) {
  bool by_error = false;
  try {
    if (!check(failing, v, cpu)) return failing;  // nothing to shrink
  } catch (const std::exception&) {
    by_error = true;
  }
  Shrinker s{v, cpu, max_checks, by_error};
  Batch best = failing;
  // One output, and what it needs.
  for (size_t i = 0; i < failing.graph.outputs().size(); ++i) {
    Batch c = failing;
    c.graph.outputs() = {failing.graph.outputs()[i]};
    c = pruned(std::move(c));
    if (s.fails(c)) {
      best = std::move(c);
      break;
    }
  }
  best.programs = 1;
  // Nodes out, from the last, until a whole sweep removes none.
  int serial = 0;
  for (bool changed = true; changed && s.budget > 0;) {
    changed = false;
    for (NodeId n = static_cast<NodeId>(best.graph.nodes().size()) - 1; n >= 0 && s.budget > 0; --n) {
      if (n >= static_cast<NodeId>(best.graph.nodes().size())) continue;
      const Node node = best.graph.node(n);
      if (node.outputs.size() != 1) continue;
      const Value& out = best.graph.value(node.outputs[0]);
      std::vector<Batch> candidates;
      for (ValueId in : node.inputs) {
        const Value& x = best.graph.value(in);
        if (x.dtype == out.dtype && x.shape == out.shape) candidates.push_back(bypassed(best, n, in));
      }
      candidates.push_back(replaced_by_input(best, n, serial++));
      for (Batch& c : candidates)
        if (c.graph.nodes().size() < best.graph.nodes().size() && s.fails(c)) {
          best = std::move(c);
          changed = true;
          break;
        }
    }
  }
  return best;
}

void save_reproducer(const std::string& dir, const Batch& b, const Variation& v, const Finding& f) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path d(dir);
  write_file_atomic((d / "graph.json").string(), print_graph(b.graph, DumpFormat::Json));
  write_file_atomic((d / "graph.txt").string(), print_graph(b.graph));
  write_file_atomic((d / "inputs.safetensors").string(), to_safetensors_bytes(b.inputs));
  write_file_atomic((d / "special_inputs.safetensors").string(), to_safetensors_bytes(b.special_inputs));
  write_file_atomic((d / "variation.txt").string(), v.name + "\n");
  write_file_atomic((d / "seed.txt").string(), std::to_string(b.seed) + "\n");
  write_file_atomic((d / "finding.txt").string(), f.str());
}

namespace {
std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  INGOT_CHECK(in.good(), "fuzz reproducer: cannot read ", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
}  // namespace

Batch load_reproducer(const std::string& dir, std::string* variation) {
  const std::filesystem::path d(dir);
  Batch b;
  b.graph = graph_from_json(read_text(d / "graph.json"));
  verify(b.graph);
  b.inputs = load_safetensors((d / "inputs.safetensors").string());
  b.special_inputs = load_safetensors((d / "special_inputs.safetensors").string());
  const std::string seed = first_line(read_text(d / "seed.txt"));
  try {
    b.seed = std::stoull(seed);
  } catch (const std::exception&) {
    INGOT_FAIL("fuzz reproducer: ", (d / "seed.txt").string(), " holds no seed: '", seed, "'");
  }
  b.programs = 1;
  for (ValueId id : b.graph.leaves_of(ValueKind::Input))
    INGOT_CHECK(b.inputs.count(b.graph.value(id).name) && b.special_inputs.count(b.graph.value(id).name),
                "fuzz reproducer: ", dir, " has no value for input '", b.graph.value(id).name, "'");
  *variation = first_line(read_text(d / "variation.txt"));
  return b;
}

}  // namespace ingot::fuzz
