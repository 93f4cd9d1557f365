#include "programs.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <sstream>

#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "ir/op_registry.h"

namespace ingot::fuzz {
namespace {

std::mutex coverage_mu;
std::map<std::string, int>& coverage_counts() {
  static std::map<std::string, int> counts;
  return counts;
}
// Ops whose shape and dtype rules accepted operands that their reference kernel then refused:
// the rules should have (a compile-time error instead of a run-time one). Reported, not fuzzed.
std::map<std::string, std::string>& rule_gap_map() {
  static std::map<std::string, std::string> gaps;
  return gaps;
}

// Uniform values in [lo, hi) from a seeded generator.
Tensor random_values(const Shape& shape, std::mt19937_64& rng, double lo, double hi) {
  Tensor t(DType::Float64, shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(rng);
  return t.astype(DType::Float32);
}

// Whether `op` accepts `inputs` (their static shapes and dtypes) with no attributes: its shape
// and dtype rules run on a one-node graph.
bool accepts(const OpDef& op, const Graph& g, const std::vector<ValueId>& inputs, const Attrs& attrs) {
  Graph t;
  std::vector<ValueId> leaves;
  std::vector<ShapeConstraint> cs;
  for (ValueId v : inputs) {
    const ValueId l = t.add_input("x" + std::to_string(leaves.size()));
    t.value(l).dtype = g.value(v).dtype;
    ShapeTemplate s;
    for (const SymDim& d : g.value(v).shape) s.emplace_back(d.value);
    cs.push_back({l, s, "", "fuzz"});
    leaves.push_back(l);
  }
  try {
    const std::vector<ValueId> outs = t.add_node(op.name, leaves, attrs, op.num_outputs);
    infer_shapes(t, cs);
    infer_types(t);
    for (ValueId o : outs)
      if (!is_static(t.value(o).shape)) return false;
    verify(t);
  } catch (const Error&) {
    return false;
  }
  // The reference kernel on zeros of those shapes: what the rules accept it must run.
  std::vector<Tensor> zeros;
  for (ValueId v : inputs) {
    Shape s;
    for (const SymDim& d : g.value(v).shape) s.push_back(d.value);
    zeros.push_back(Tensor::full(g.value(v).dtype, s, 0.0));
  }
  std::vector<Tensor> outs(static_cast<size_t>(op.num_outputs));
  try {
    op.eval(t.nodes().back(), zeros, outs);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(coverage_mu);
    rule_gap_map().emplace(op.name, e.what());
    return false;
  }
  return true;
}

}  // namespace

Batch random_batch(uint64_t seed, const ProgramOptions& po) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  Batch b;
  b.seed = seed;
  Graph& g = b.graph;
  std::vector<const OpDef*> ops;
  for (const OpDef* op : all_ops())
    if (op->fusion != FusionClass::Source && op->eval != nullptr) ops.push_back(op);
  // Sizes with 1s (broadcasting), vector tails (17, 33) and a size past one vector.
  const std::vector<int64_t> sizes = {1, 2, 3, 5, 8, 17, 33};
  std::vector<ShapeConstraint> cs;
  for (int p = 0; p < po.programs_per_graph; ++p) {
    const std::string prefix = "p" + std::to_string(p) + "_";
    // A base shape and inputs of it or broadcastable to it.
    Shape base;
    const int rank = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < rank; ++d) base.push_back(sizes[rng() % sizes.size()]);
    std::vector<ValueId> pool;
    const int n_inputs = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n_inputs; ++i) {
      Shape s = base;
      if (i > 0)
        for (int64_t& d : s)
          if (rng() % 3 == 0) d = 1;
      if (i > 0 && rng() % 4 == 0) s.erase(s.begin());
      const std::string name = prefix + "x" + std::to_string(i);
      const ValueId v = g.add_input(name);
      g.value(v).dtype = DType::Float32;
      ShapeTemplate t;
      for (int64_t d : s) t.emplace_back(d);
      cs.push_back({v, t, "", "fuzz input"});
      b.inputs[name] = random_values(s, rng, -2.0, 2.0);
      pool.push_back(v);
    }
    infer_shapes(g, cs);
    int made = 0;
    for (int attempt = 0; attempt < po.ops * 40 && made < po.ops; ++attempt) {
      const OpDef& op = *ops[rng() % ops.size()];
      const int hi = op.max_inputs < 0 ? op.min_inputs + 2 : op.max_inputs;
      const int arity = op.min_inputs + static_cast<int>(rng() % static_cast<uint64_t>(hi - op.min_inputs + 1));
      if (arity == 0) continue;
      std::vector<ValueId> in;
      for (int k = 0; k < arity; ++k) {
        // Mostly recent values, so programs grow deep rather than wide.
        const size_t n = pool.size();
        const size_t pick = rng() % 2 ? n - 1 - rng() % std::min<size_t>(n, 3) : rng() % n;
        in.push_back(pool[pick]);
      }
      Attrs attrs;
      if (op.sample_attrs != nullptr) {
        std::vector<Shape> shapes;
        for (ValueId v : in) {
          Shape s;
          for (const SymDim& d : g.value(v).shape) s.push_back(d.value);
          shapes.push_back(s);
        }
        attrs = op.sample_attrs(shapes, rng());
      }
      if (!accepts(op, g, in, attrs)) continue;
      const std::vector<ValueId> outs = g.add_node(op.name, in, attrs, op.num_outputs);
      // Shapes now, so the next draw's acceptance check sees them.
      infer_shapes(g, cs);
      infer_types(g);
      pool.insert(pool.end(), outs.begin(), outs.end());
      ++made;
      std::lock_guard<std::mutex> lock(coverage_mu);
      ++coverage_counts()[op.name];
    }
  }
  // Every value nothing reads is an output, so nothing is dead code.
  std::vector<int> reads(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) ++reads[static_cast<size_t>(v)];
  for (const Node& n : g.nodes())
    for (ValueId v : n.outputs)
      if (reads[static_cast<size_t>(v)] == 0) g.set_output("out" + std::to_string(v), v);
  infer_shapes(g, cs);
  infer_types(g);
  verify(g);
  return b;
}

std::vector<Variation> variations() {
  std::vector<Variation> v;
  for (const char* level : {"none", "low", "medium", "high"}) {
    Variation x{std::string("level ") + level, {}};
    x.options.optimization_level = level;
    v.push_back(x);
  }
  for (const std::string pass : {"constant_folding", "simplify", "cse", "dce", "fusion", "layout"}) {
    Variation x{pass + " off", {}};
    x.options.optimizations[pass] = false;
    v.push_back(x);
  }
  for (Layout l : {Layout::Nchw8c, Layout::Nchw16c, Layout::Nhwc}) {
    Variation x{"layout_target " + std::string(layout_name(l)), {}};
    x.options.layout_target = std::string(layout_name(l));
    v.push_back(x);
  }
  Variation none{"memory_planning none", {}};
  none.options.memory_planning = "none";
  v.push_back(none);
  return v;
}

std::string Finding::str() const {
  std::ostringstream os;
  os << "seed " << seed << ", " << variation << ": output '" << output << "' is off by " << error
     << " from the float64 run (the float32 reference by " << reference_error << ")\n"
     << graph_text;
  return os.str();
}

namespace {

std::vector<Tensor> leaf_inputs(const Graph& g, const std::map<std::string, Tensor>& by_name, DType as) {
  std::vector<Tensor> ins;
  for (ValueId id : g.leaves())
    if (g.value(id).kind != ValueKind::Constant) ins.push_back(by_name.at(g.value(id).name).astype(as));
  return ins;
}

// max |a - b| over max(1, max |b|) on the elements where both are finite; a NaN or inf where the
// other has none counts as a full mismatch (1e30).
double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double scale = 1, worst = 0;
  for (double x : b)
    if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) worst = 1e30;
      continue;
    }
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) worst = 1e30;
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst >= 1e30 ? worst : worst / scale;
}

}  // namespace

std::optional<Finding> check(const Batch& batch, const Variation& v, const CpuBackend::CpuOptions& cpu_options) {
  const Graph& g = batch.graph;
  Graph opt = g;
  optimize(opt, v.options);
  auto run_cpu = [&] {
    return CpuBackend(cpu_options).lower(opt, v.options)->run(leaf_inputs(opt, batch.inputs, DType::Float32));
  };
  std::vector<Tensor> want;
  try {
    want = ReferenceBackend().lower(g, {})->run(leaf_inputs(g, batch.inputs, DType::Float32));
  } catch (const Error& e) {
    // A program its data makes invalid (an index out of range, say): the CPU backend must refuse
    // it too, with an error rather than a result.
    try {
      run_cpu();
    } catch (const Error&) {
      return std::nullopt;
    }
    return Finding{batch.seed, v.name, std::string("(the reference refused: ") + e.what() + ")", print_graph(g), 1e30, 0};
  }
  const std::vector<Tensor> got = run_cpu();
  INGOT_CHECK(got.size() == want.size(), "fuzz: the optimized graph has ", got.size(), " outputs, the original ",
              want.size());
  std::optional<std::vector<Tensor>> truth;  // the float64 run, computed at the first disagreement
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].dtype() != want[i].dtype() || got[i].shape() != want[i].shape())
      return Finding{batch.seed, v.name, g.outputs()[i].first, print_graph(g), 1e30, 0};
    if (!is_floating(want[i].dtype())) {
      if (!equal(got[i], want[i])) return Finding{batch.seed, v.name, g.outputs()[i].first, print_graph(g), 1e30, 0};
      continue;
    }
    if (relative_error(got[i], want[i]) <= 1e-4) continue;
    if (!truth) {
      Graph g64 = g;
      for (ValueId id : g64.leaves()) g64.value(id).dtype = DType::Float64;
      infer_types(g64);
      truth = ReferenceBackend().lower(g64, {})->run(leaf_inputs(g64, batch.inputs, DType::Float64));
    }
    const Tensor& t = (*truth)[i];
    const double err = relative_error(got[i].astype(DType::Float64), t), ref = relative_error(want[i].astype(DType::Float64), t);
    if (err > 4 * ref + 1e-4) return Finding{batch.seed, v.name, g.outputs()[i].first, print_graph(g), err, ref};
  }
  return std::nullopt;
}

std::map<std::string, std::string> rule_gaps() {
  std::lock_guard<std::mutex> lock(coverage_mu);
  return rule_gap_map();
}

std::map<std::string, int> coverage() {
  std::map<std::string, int> c;
  for (const OpDef* op : all_ops()) c[op->name] = 0;
  std::lock_guard<std::mutex> lock(coverage_mu);
  for (const auto& [name, n] : coverage_counts()) c[name] = n;
  return c;
}

}  // namespace ingot::fuzz
