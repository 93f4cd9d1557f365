#include "programs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
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

// `t` with a NaN, an inf, a -inf, a 0 or a -0 in about one element in eight (at least one).
Tensor with_special_values(const Tensor& t, std::mt19937_64& rng) {
  Tensor s = t.astype(DType::Float32);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  for (int64_t i = 0; i < s.numel(); ++i)
    if (i == 0 || rng() % 8 == 0) s.data<float>()[i] = specials[rng() % 5];
  return s;
}

// A dimension: small sizes with 1s (broadcasting), vector tails (17, 33, 63, 127), and now and
// then a 0 (zero-size values) when `zero` allows.
int64_t random_size(std::mt19937_64& rng, bool zero) {
  static const std::vector<int64_t> common = {1, 2, 3, 5, 8, 17, 33}, rare = {63, 127};
  if (zero && rng() % 150 == 0) return 0;
  if (rng() % 10 == 0) return rare[rng() % rare.size()];
  return common[rng() % common.size()];
}

// An operand of a drawn op: a value of the program, or a tensor an OperandSampler gives (fed as
// a new input).
struct Operand {
  ValueId value = -1;           // the program's value (when `fed` is empty)
  std::optional<Tensor> fed;    // else this tensor
  Shape shape;
  DType dtype = DType::Float32;
};

// Whether `op` accepts `operands` (their static shapes and dtypes) with `attrs`: its shape and
// dtype rules run on a one-node graph.
// *ignores_values: the result is the same for zeros as for other inputs (zeros_like, ones_like):
// drawn as often as the rest, such ops make much of a program constant.
bool accepts(const OpDef& op, const std::vector<Operand>& operands, const Attrs& attrs, bool* ignores_values) {
  Graph t;
  std::vector<ValueId> leaves;
  std::vector<ShapeConstraint> cs;
  for (const Operand& o : operands) {
    const ValueId l = t.add_input("x" + std::to_string(leaves.size()));
    t.value(l).dtype = o.dtype;
    ShapeTemplate s;
    for (int64_t d : o.shape) s.emplace_back(d);
    cs.push_back({l, s, "", "fuzz"});
    leaves.push_back(l);
  }
  try {
    const std::vector<ValueId> outs = t.add_node(op.name, leaves, attrs, op.num_outputs);
    infer_shapes(t, cs);
    infer_types(t);
    for (ValueId o : outs) {
      if (!is_static(t.value(o).shape)) return false;
      // (kMaxValueElements: four times the inputs' cap still reaches the threaded and blocked
      // kernel paths.)
      int64_t numel = 1;
      for (const SymDim& d : t.value(o).shape) numel *= std::max<int64_t>(d.value, 1);
      if (numel > kMaxValueElements) return false;
    }
    verify(t);
  } catch (const Error&) {
    return false;
  }
  // The reference kernel on zeros of those shapes (fed operands as given): what the rules
  // accept it must run.
  std::vector<Tensor> zeros;
  for (const Operand& o : operands) zeros.push_back(o.fed ? *o.fed : Tensor::full(o.dtype, o.shape, 0.0));
  std::vector<Tensor> outs(static_cast<size_t>(op.num_outputs));
  try {
    op.eval(t.nodes().back(), zeros, outs);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(coverage_mu);
    rule_gap_map().emplace(op.name, e.what());
    return false;
  }
  *ignores_values = false;
  std::vector<Tensor> others, outs2(outs.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& z = zeros[i];
    others.push_back(is_floating(z.dtype()) && !operands[i].fed ? Tensor::full(z.dtype(), z.shape(), 1.375) : z);
  }
  try {
    op.eval(t.nodes().back(), others, outs2);
    *ignores_values = true;
    for (size_t i = 0; i < outs.size(); ++i) *ignores_values = *ignores_values && outs[i].numel() > 0 && equal(outs[i], outs2[i]);
  } catch (const Error&) {
  }
  return true;
}

// ---------------------------------------------------------------- control flow

// One program of a batch: its nodes [first, end) and its leaves, in order.
struct ProgramSpan {
  NodeId first = 0, end = 0;
  std::vector<ValueId> leaves;
};

// A scalar literal of `g` (weak: it takes the dtype it meets, so the float64 run keeps it).
ValueId literal(Graph& g, double v, DType t = DType::Float32) {
  const ValueId c = g.add_constant("c" + std::to_string(g.values().size()), Tensor::full(t, {}, v));
  g.value(c).weak_type = true;
  return c;
}

// `t` repeated `times` times along a new leading axis.
Tensor tiled(const Tensor& t, int64_t times) {
  Shape s = t.shape();
  s.insert(s.begin(), times);
  Tensor r(t.dtype(), s);
  const Tensor c = t.contiguous();
  for (int64_t i = 0; i < times; ++i)
    std::memcpy(static_cast<char*>(r.raw_data()) + static_cast<size_t>(i) * c.nbytes(), c.raw_data(), c.nbytes());
  return r;
}

// Rebuilds a batch's straight-line graph with some programs wrapped in control flow (see
// programs.h): the graph, its inputs and special inputs are replaced.
struct Wrapper {
  const Graph& from;
  const std::map<std::string, Tensor>& from_inputs;
  const std::map<std::string, Tensor>& from_special;
  std::mt19937_64& rng;
  Graph to;
  std::map<std::string, Tensor> inputs, special;
  std::vector<ShapeConstraint> cs;

  ValueId outer(const std::string& name, const Tensor& t, const Tensor& s) {
    const ValueId id = to.add_input(name);
    to.value(id).dtype = t.dtype();
    ShapeTemplate tt;
    for (int64_t d : t.shape()) tt.emplace_back(d);
    cs.push_back({id, tt, "", "fuzz control flow"});
    inputs[name] = t;
    special[name] = s;
    return id;
  }
  ValueId outer_leaf(ValueId leaf) {
    const std::string& name = from.value(leaf).name;
    return outer(name, from_inputs.at(name), from_special.at(name));
  }
  Shape shape_of(ValueId v) const {
    Shape s;
    for (const SymDim& d : from.value(v).shape) s.push_back(d.value);
    return s;
  }
  // A subgraph's parameter standing for `from`'s value v.
  static ValueId param(Graph& sub, const std::string& name, DType dtype) {
    const ValueId id = sub.add_input(name);
    sub.value(id).dtype = dtype;
    return id;
  }
  // The program's nodes copied into `sub`, its leaves given by `map`; fills `map` on.
  void copy_program(const ProgramSpan& p, Graph& sub, std::map<ValueId, ValueId>& map) const {
    for (NodeId n = p.first; n < p.end; ++n) {
      const Node& node = from.node(n);
      std::vector<ValueId> ins;
      for (ValueId v : node.inputs) ins.push_back(map.at(v));
      const std::vector<ValueId> outs = sub.add_node(node.op, ins, node.attrs, static_cast<int>(node.outputs.size()), node.scope);
      for (size_t k = 0; k < outs.size(); ++k) map[node.outputs[k]] = outs[k];
    }
  }
  std::vector<ValueId> control(const std::string& op, const std::vector<ValueId>& operands, Attrs attrs, int outputs,
                               std::vector<Graph> subs) {
    const std::vector<ValueId> outs = to.add_node(op, operands, std::move(attrs), outputs, "fuzz");
    to.node(to.value(outs[0]).producer).subgraphs = std::move(subs);
    std::lock_guard<std::mutex> lock(coverage_mu);
    ++coverage_counts()[op];
    return outs;
  }

  void plain(const ProgramSpan& p, const std::vector<std::pair<std::string, ValueId>>& outs) {
    std::map<ValueId, ValueId> map;
    for (ValueId l : p.leaves) map[l] = outer_leaf(l);
    copy_program(p, to, map);
    for (const auto& [name, v] : outs) to.set_output(name, map.at(v));
  }

  // scan(carry..., xs..., invariants...): a random length T (0..4), float inputs scanned or
  // whole at random, a float32 output's carry = carry * 0.5 + out, every output a y.
  void scan(const ProgramSpan& p, const std::string& prefix, const std::vector<std::pair<std::string, ValueId>>& outs) {
    const int64_t steps = static_cast<int64_t>(rng() % 5);
    std::vector<ValueId> xs, invariants;
    for (ValueId l : p.leaves)
      (is_floating(from.value(l).dtype) && rng() % 3 != 0 ? xs : invariants).push_back(l);
    if (xs.empty()) {  // a scan needs one: the first float leaf (the program's first input)
      for (auto it = invariants.begin(); it != invariants.end(); ++it)
        if (is_floating(from.value(*it).dtype)) {
          xs.push_back(*it);
          invariants.erase(it);
          break;
        }
    }
    std::vector<size_t> carried;
    for (size_t k = 0; k < outs.size(); ++k)
      if (from.value(outs[k].second).dtype == DType::Float32) carried.push_back(k);
    Graph body;
    std::vector<ValueId> carry_params;
    for (size_t k : carried) carry_params.push_back(param(body, "carry" + std::to_string(k), DType::Float32));
    std::map<ValueId, ValueId> map;
    for (ValueId l : xs) map[l] = param(body, from.value(l).name, from.value(l).dtype);
    for (ValueId l : invariants) map[l] = param(body, from.value(l).name, from.value(l).dtype);
    copy_program(p, body, map);
    std::vector<ValueId> results;
    for (size_t i = 0; i < carried.size(); ++i)
      results.push_back(body.add_op("add", {body.add_op("mul", {carry_params[i], literal(body, 0.5)}), map.at(outs[carried[i]].second)}));
    for (const auto& [name, v] : outs) results.push_back(map.at(v));
    for (size_t i = 0; i < results.size(); ++i) body.set_output("r" + std::to_string(i), results[i]);
    std::vector<ValueId> operands;
    for (size_t k : carried) {
      const Tensor init = random_values(shape_of(outs[k].second), rng, -1.0, 1.0);
      operands.push_back(outer(prefix + "carry" + std::to_string(k), init, init));
    }
    for (ValueId l : xs) {
      const std::string& name = from.value(l).name;
      const Tensor& t = from_inputs.at(name);
      if (name.find("_x") != std::string::npos) {  // a program input: new values every step
        Shape s = t.shape();
        s.insert(s.begin(), steps);
        const Tensor v = random_values(s, rng, -2.0, 2.0);
        operands.push_back(outer(name, v, with_special_values(v, rng)));
      } else {  // an operand a sampler fed (its values may matter): the same at every step
        operands.push_back(outer(name, tiled(t, steps), tiled(from_special.at(name), steps)));
      }
    }
    for (ValueId l : invariants) operands.push_back(outer_leaf(l));
    const Attrs attrs = {{"num_carry", static_cast<int64_t>(carried.size())},
                         {"num_xs", static_cast<int64_t>(xs.size())},
                         {"reverse", static_cast<int64_t>(rng() % 2)}};
    const std::vector<ValueId> r = control("scan", operands, attrs, static_cast<int>(results.size()), {body});
    // Output names differ from every input's (ONNX export, which the round-trip test runs on these
    // programs, needs distinct names).
    for (size_t i = 0; i < carried.size(); ++i) to.set_output(prefix + "carry" + std::to_string(carried[i]) + "_out", r[i]);
    for (size_t k = 0; k < outs.size(); ++k) to.set_output(outs[k].first, r[carried.size() + k]);
  }

  // if(cond, inputs...): then the program, else the program with its float32 outputs negated;
  // the condition an input, or now and then a constant (inlined by the compiler).
  void branch(const ProgramSpan& p, const std::string& prefix, const std::vector<std::pair<std::string, ValueId>>& outs) {
    std::vector<Graph> subs;
    for (const bool negated : {false, true}) {
      Graph sub;
      std::map<ValueId, ValueId> map;
      for (ValueId l : p.leaves) map[l] = param(sub, from.value(l).name, from.value(l).dtype);
      copy_program(p, sub, map);
      for (size_t k = 0; k < outs.size(); ++k) {
        const ValueId v = map.at(outs[k].second);
        const bool f32 = from.value(outs[k].second).dtype == DType::Float32;
        sub.set_output("r" + std::to_string(k), negated && f32 ? sub.add_op("mul", {v, literal(sub, -1.0)}) : v);
      }
      subs.push_back(std::move(sub));
    }
    const Tensor c = Tensor::full(DType::Bool, {}, static_cast<double>(rng() % 2));
    std::vector<ValueId> operands;
    if (rng() % 4 == 0) {
      operands.push_back(to.add_constant(prefix + "cond", c));
    } else {
      operands.push_back(outer(prefix + "cond", c, c));
    }
    for (ValueId l : p.leaves) operands.push_back(outer_leaf(l));
    const std::vector<ValueId> r = control("if", operands, {}, static_cast<int>(outs.size()), std::move(subs));
    for (size_t k = 0; k < outs.size(); ++k) to.set_output(outs[k].first, r[k]);
  }

  // while(i, carried..., n, inputs...): while i < n (0..3; each a constant or an input), i += 1
  // and a float32 output's carry = carry * 0.5 + out (another output's carry = out); max_iterations
  // (0..3) on most loops, so most are differentiable.
  void loop(const ProgramSpan& p, const std::string& prefix, const std::vector<std::pair<std::string, ValueId>>& outs) {
    auto counter = [&](const std::string& name, int64_t value) {
      const Tensor t = Tensor::full(DType::Int32, {}, static_cast<double>(value));
      if (rng() % 2) return to.add_constant(prefix + name, t);
      return outer(prefix + name, t, t);
    };
    std::vector<ValueId> operands = {counter("i", static_cast<int64_t>(rng() % 2))};
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& out = from.value(outs[k].second);
      const Tensor init = out.dtype == DType::Float32 ? random_values(shape_of(out.id), rng, -1.0, 1.0)
                                                      : Tensor::full(out.dtype, shape_of(out.id), 0.0);
      operands.push_back(outer(prefix + "carry" + std::to_string(k), init, init));
    }
    operands.push_back(counter("n", static_cast<int64_t>(rng() % 4)));
    for (ValueId l : p.leaves) operands.push_back(outer_leaf(l));
    std::vector<Graph> subs;
    for (const bool is_body : {false, true}) {
      Graph sub;
      const ValueId i = param(sub, "i", DType::Int32);
      std::vector<ValueId> carries;
      for (size_t k = 0; k < outs.size(); ++k)
        carries.push_back(param(sub, "carry" + std::to_string(k), from.value(outs[k].second).dtype));
      const ValueId n = param(sub, "n", DType::Int32);
      std::map<ValueId, ValueId> map;
      for (ValueId l : p.leaves) map[l] = param(sub, from.value(l).name, from.value(l).dtype);
      if (!is_body) {
        sub.set_output("r0", sub.add_op("less", {i, n}));
      } else {
        copy_program(p, sub, map);
        sub.set_output("r0", sub.add_op("add", {i, literal(sub, 1, DType::Int32)}));
        for (size_t k = 0; k < outs.size(); ++k) {
          const ValueId v = map.at(outs[k].second);
          const bool f32 = from.value(outs[k].second).dtype == DType::Float32;
          sub.set_output("r" + std::to_string(k + 1),
                         f32 ? sub.add_op("add", {sub.add_op("mul", {carries[k], literal(sub, 0.5)}), v}) : v);
        }
      }
      subs.push_back(std::move(sub));
    }
    Attrs attrs = {{"num_invariant", static_cast<int64_t>(1 + p.leaves.size())}};
    if (rng() % 4 != 0) attrs.set("max_iterations", static_cast<int64_t>(rng() % 4));
    const std::vector<ValueId> r = control("while", operands, attrs, static_cast<int>(1 + outs.size()), std::move(subs));
    to.set_output(prefix + "i_out", r[0]);
    for (size_t k = 0; k < outs.size(); ++k) to.set_output(outs[k].first, r[k + 1]);
  }
};

}  // namespace

Batch random_batch(uint64_t seed, const ProgramOptions& po) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  Batch b;
  b.seed = seed;
  Graph& g = b.graph;
  std::vector<const OpDef*> ops;
  for (const OpDef* op : all_ops())
    // Control flow owns subgraphs a random draw cannot give it (tests/test_control_flow.cpp covers it);
    // collectives need a process group (tests/test_distributed.cpp covers them).
    if (op->fusion != FusionClass::Source && op->eval != nullptr && op->subgraph_names.empty() && !op->collective)
      ops.push_back(op);
  std::vector<ShapeConstraint> cs;
  std::vector<ProgramSpan> spans;
  for (int p = 0; p < po.programs_per_graph; ++p) {
    const std::string prefix = "p" + std::to_string(p) + "_";
    spans.push_back({static_cast<NodeId>(g.nodes().size()), 0, {}});
    // A base shape and inputs of it or broadcastable to it.
    Shape base;
    const int rank = 1 + static_cast<int>(rng() % 4);
    // A bounded element count, so a batch stays quick for the reference interpreter.
    for (int64_t numel = 1; static_cast<int>(base.size()) < rank;) {
      const int64_t d = random_size(rng, true);
      if (numel * std::max<int64_t>(d, 1) > kMaxInputElements) continue;
      numel *= std::max<int64_t>(d, 1);
      base.push_back(d);
    }
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
      b.special_inputs[name] = with_special_values(b.inputs[name], rng);
      pool.push_back(v);
      spans.back().leaves.push_back(v);
    }
    infer_shapes(g, cs);
    int made = 0, fed = 0;
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
      std::vector<Operand> operands;
      std::vector<Shape> shapes;
      for (ValueId v : in) {
        Operand o{v, std::nullopt, {}, g.value(v).dtype};
        for (const SymDim& d : g.value(v).shape) o.shape.push_back(d.value);
        shapes.push_back(o.shape);
        operands.push_back(std::move(o));
      }
      Attrs attrs;
      if (op.sample_attrs != nullptr) attrs = op.sample_attrs(shapes, rng());
      if (op.sample_operands != nullptr) {
        SampledOperands so = op.sample_operands(shapes, rng());
        attrs = std::move(so.attrs);
        for (size_t k = 0; k < so.operands.size() && k < operands.size(); ++k)
          if (so.operands[k]) operands[k] = {-1, so.operands[k], so.operands[k]->shape(), so.operands[k]->dtype()};
      }
      bool ignores_values = false;
      if (!accepts(op, operands, attrs, &ignores_values) || (ignores_values && rng() % 5 != 0)) continue;
      // Fed operands become inputs of the program (special values only in float ones).
      for (Operand& o : operands) {
        if (!o.fed) continue;
        const std::string name = prefix + "f" + std::to_string(fed++);
        o.value = g.add_input(name);
        g.value(o.value).dtype = o.dtype;
        ShapeTemplate t;
        for (int64_t d : o.shape) t.emplace_back(d);
        cs.push_back({o.value, t, "", "fuzz operand"});
        b.inputs[name] = *o.fed;
        b.special_inputs[name] = o.dtype == DType::Float32 ? with_special_values(*o.fed, rng) : *o.fed;
        spans.back().leaves.push_back(o.value);
      }
      in.clear();
      for (const Operand& o : operands) in.push_back(o.value);
      const std::vector<ValueId> outs = g.add_node(op.name, in, attrs, op.num_outputs);
      // Shapes now, so the next draw's acceptance check sees them.
      infer_shapes(g, cs);
      infer_types(g);
      pool.insert(pool.end(), outs.begin(), outs.end());
      ++made;
      std::lock_guard<std::mutex> lock(coverage_mu);
      ++coverage_counts()[op.name];
    }
    spans.back().end = static_cast<NodeId>(g.nodes().size());
  }
  b.programs = po.programs_per_graph;
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
  if (po.control_flow_percent <= 0) return b;
  // Control flow around some programs (its own generator, so the programs stay those of the seed).
  std::mt19937_64 cf_rng(seed * 0xBF58476D1CE4E5B9ull + 3);
  Wrapper w{g, b.inputs, b.special_inputs, cf_rng, {}, {}, {}, {}};
  for (size_t p = 0; p < spans.size(); ++p) {
    const std::string prefix = "p" + std::to_string(p) + "_";
    std::vector<std::pair<std::string, ValueId>> outs;
    for (const auto& [name, v] : g.outputs())
      if (g.value(v).producer >= spans[p].first && g.value(v).producer < spans[p].end) outs.emplace_back(name, v);
    const bool wrap = !outs.empty() && static_cast<int>(cf_rng() % 100) < po.control_flow_percent;
    switch (wrap ? static_cast<int>(cf_rng() % 3) : -1) {
      case 0: w.scan(spans[p], prefix, outs); break;
      case 1: w.branch(spans[p], prefix, outs); break;
      case 2: w.loop(spans[p], prefix, outs); break;
      default: w.plain(spans[p], outs);
    }
  }
  infer_shapes(w.to, w.cs);
  infer_types(w.to);
  verify(w.to);
  b.graph = std::move(w.to);
  b.inputs = std::move(w.inputs);
  b.special_inputs = std::move(w.special);
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
  for (int threads : {1, 2, 4}) {
    Variation x{"threads " + std::to_string(threads), {}};
    x.threads = threads;
    v.push_back(x);
  }
  for (const char* type : {"bfloat16", "float16"}) {
    Variation x{std::string("mixed_precision ") + type, {}};
    x.options.mixed_precision = type;
    v.push_back(x);
  }
  Variation special{"special values", {}};
  special.special_values = true;
  v.push_back(special);
  Variation strided{"non-contiguous inputs", {}};
  strided.non_contiguous = true;
  v.push_back(strided);
  Variation shapeless{"shapeless", {}};
  shapeless.shapeless = true;
  v.push_back(shapeless);
  Variation grads{"gradients", {}};
  grads.gradients = true;
  v.push_back(grads);
  Variation grads_high = grads;
  grads_high.name = "gradients, level high";
  grads_high.options.optimization_level = "high";
  v.push_back(grads_high);
  Variation checkpointed = grads;
  checkpointed.name = "gradients, checkpointing 2 segments";
  checkpointed.options.gradient_checkpointing = true;
  v.push_back(checkpointed);
  Variation grads_low = grads;  // the backward's matmuls and conv gradients on bfloat16 operands
  grads_low.name = "gradients, mixed_precision bfloat16";
  grads_low.options.mixed_precision = "bfloat16";
  v.push_back(grads_low);
  return v;
}

Variation variation_named(const std::string& name) {
  std::string known;
  for (const Variation& v : variations()) {
    if (v.name == name) return v;
    known += (known.empty() ? "" : ", ") + v.name;
  }
  INGOT_FAIL("fuzz: no variation named '", name, "' (known: ", known, ")");
}

std::map<std::string, std::string> rule_gaps() {
  std::lock_guard<std::mutex> lock(coverage_mu);
  return rule_gap_map();
}

std::map<std::string, int> coverage() {
  std::map<std::string, int> c;
  for (const OpDef* op : all_ops())
    if ((op->subgraph_names.empty() && !op->collective) || op->name == "if" || op->name == "while" || op->name == "scan")
      c[op->name] = 0;
  std::lock_guard<std::mutex> lock(coverage_mu);
  for (const auto& [name, n] : coverage_counts()) c[name] = n;
  return c;
}

}  // namespace ingot::fuzz
