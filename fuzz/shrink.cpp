#include "shrink.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
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
  bool refusal;   // the original finding: the reference refused the program, the CPU did not

  // Whether `b` still fails the way the original did (an exception only counts when the
  // original was one, and a program the reference refuses when the original was one: a step
  // that breaks the program differently is no smaller reproducer. Seed 54057's wrong-looking
  // value shrank into an index that sizes of 1 put out of range in an op no output read, which
  // the reference refused and the CPU's dead-code elimination never ran).
  bool fails(const Batch& b) {
    if (budget <= 0) return false;
    --budget;
    try {
      const std::optional<Finding> f = check(b, v, cpu);
      return f.has_value() && is_refusal(*f) == refusal;
    } catch (const std::exception&) {
      return by_error;
    }
  }

  static bool is_refusal(const Finding& f) { return f.output.rfind("(the reference refused", 0) == 0; }
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

// Node `n`'s results replaced by new inputs of their shapes and dtypes (each result its own: a
// top_k's values and indices, so that its k no longer pins the sizes around it).
Batch replaced_by_input(const Batch& b, NodeId n, int serial) {
  Batch c = b;
  const std::vector<ValueId> outs = c.graph.node(n).outputs;
  for (size_t k = 0; k < outs.size(); ++k) {
    const Value out = c.graph.value(outs[k]);
    const std::string name = "s" + std::to_string(serial) + (outs.size() > 1 ? "_" + std::to_string(k) : "");
    const ValueId leaf = c.graph.add_input(name);
    c.graph.value(leaf).dtype = out.dtype;
    c.graph.value(leaf).shape = out.shape;
    c.graph.value(leaf).shape_known = true;
    Shape s;
    for (const SymDim& d : out.shape) s.push_back(d.value);
    std::mt19937_64 rng(static_cast<uint64_t>(serial) * 7919 + b.seed + k);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    Tensor t(DType::Float64, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = is_floating(out.dtype) ? u(rng) : 0.0;
    c.inputs[name] = t.astype(out.dtype);
    c.special_inputs[name] = c.inputs[name];
    replace_uses(c.graph, outs[k], leaf);
  }
  return pruned(std::move(c));
}

// `t`'s leading elements in the (no larger) `shape`.
Tensor leading(const Tensor& t, const Shape& shape) {
  Tensor c = t.contiguous().clone();
  auto owner = std::make_shared<Tensor>(c);
  return Tensor::wrap(owner->raw_data(), c.dtype(), shape, contiguous_strides(c.shape()), owner).contiguous().clone();
}

// Every input dimension of size `from` made `to` (each input keeps its leading elements, so
// sizes that broadcast or match still do), shapes inferred again. nullopt when the program's
// rules refuse the new size (a reshape's target, a slice past the end).
std::optional<Batch> resized(const Batch& b, int64_t from, int64_t to) {
  Batch c = b;
  Graph& g = c.graph;
  std::vector<ShapeConstraint> cs;
  for (ValueId id : g.leaves()) {
    ShapeTemplate t;
    Shape s;
    for (const SymDim& d : g.value(id).shape) {
      const int64_t n = g.value(id).kind == ValueKind::Input && d.value == from ? to : d.value;
      t.emplace_back(n);
      s.push_back(n);
    }
    cs.push_back({id, t, "", "fuzz shrink"});
    if (g.value(id).kind != ValueKind::Input) continue;
    const std::string& name = g.value(id).name;
    c.inputs[name] = leading(b.inputs.at(name), s);
    c.special_inputs[name] = leading(b.special_inputs.at(name), s);
  }
  for (Value& v : g.values()) {
    v.shape.clear();
    v.shape_known = false;
  }
  try {
    if (!infer_shapes(g, cs).assumptions.empty()) return std::nullopt;
    infer_types(g);
    verify(g);
    for (const Value& v : g.values())
      if (!is_static(v.shape)) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  return c;
}

}  // namespace

Batch shrink(const Batch& failing, const Variation& v, const CpuBackend::CpuOptions& cpu, int max_checks,
             const std::string& failing_output) {
  bool by_error = false, refusal = false;
  try {
    const std::optional<Finding> f = check(failing, v, cpu);
    if (!f) return failing;  // nothing to shrink
    refusal = Shrinker::is_refusal(*f);
  } catch (const std::exception&) {
    by_error = true;
  }
  Shrinker s{v, cpu, max_checks, by_error, refusal};
  Batch best = failing;
  // One output, and what it needs: the one the finding names first (a batch has hundreds of
  // outputs, and each try is a build), then the others in turn.
  std::vector<size_t> order;
  for (size_t i = 0; i < failing.graph.outputs().size(); ++i)
    if (failing.graph.outputs()[i].first == failing_output) order.insert(order.begin(), i);
    else order.push_back(i);
  for (size_t i : order) {
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
      std::vector<Batch> candidates;
      if (node.outputs.size() == 1) {
        const Value& out = best.graph.value(node.outputs[0]);
        for (ValueId in : node.inputs) {
          const Value& x = best.graph.value(in);
          if (x.dtype == out.dtype && x.shape == out.shape) candidates.push_back(bypassed(best, n, in));
        }
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
  // Then the sizes: each distinct input size, largest first, made 1, 2 or half while it fails.
  for (bool changed = true; changed && s.budget > 0;) {
    changed = false;
    std::set<int64_t, std::greater<>> sizes;
    for (ValueId id : best.graph.leaves_of(ValueKind::Input))
      for (const SymDim& d : best.graph.value(id).shape)
        if (d.value > 1) sizes.insert(d.value);
    for (int64_t from : sizes) {
      for (int64_t to : {int64_t{1}, int64_t{2}, from / 2}) {
        if (to >= from || s.budget <= 0) continue;
        std::optional<Batch> c = resized(best, from, to);
        if (c && s.fails(*c)) {
          best = std::move(*c);
          changed = true;
          break;
        }
      }
      if (changed) break;
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
