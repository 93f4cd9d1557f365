// Control-flow simplification, on what is known at compile time:
//  - an `if` whose condition is a constant becomes the nodes of the branch it takes;
//  - a loop that runs no iteration becomes its operands (a `while` whose max_iterations is 0 or
//    whose condition is false from the start, a `scan` over zero steps: its stacked outputs
//    empty constants), and a loop that runs exactly one becomes its body's nodes;
//  - an operand that is a constant of the enclosing graph and the same in every iteration (an
//    if's operand, a loop's invariant) becomes a constant inside the subgraphs, where constant
//    folding and the other passes (run inside subgraphs by the pass manager) can use it.
// A while's trip count is fixed at compile time when its condition reads only loop variables
// whose first values are constants and whose next values, through the body, read only such
// variables and constants (a counter against a constant bound); the pass then runs just that
// part of the loop with the reference kernels, up to kMaxSimulatedIterations. The graph is
// rebuilt in order with inlined nodes where the loop stood, so they are optimized, fused and
// planned with the rest; nodes keep the shapes and dtypes inference gave them in the subgraph.
#include <optional>
#include <set>

#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "ir/op_registry.h"
#include "ingot/error.h"
#include "ir/inline.h"
#include "ir/interpret.h"
#include "ops/control_flow_vjp.h"

namespace ingot {
namespace {

constexpr int64_t kMaxSimulatedIterations = 10000;

bool is_constant(const Graph& g, ValueId v) { return g.value(v).kind == ValueKind::Constant; }

bool constant_condition(const Graph& g, const Node& n, bool* taken) {
  if (n.op != "if") return false;
  const Value& c = g.value(n.inputs[0]);
  if (c.kind != ValueKind::Constant || c.constant.numel() != 1) return false;
  *taken = c.constant.item(0) != 0.0;
  return true;
}

// The first operand that is the same in every iteration (all of an if's after the condition),
// and the subgraph formal that operand i binds.
size_t first_invariant(const Node& n) {
  if (n.op == "if") return 1;
  if (n.op == "while") return n.outputs.size();
  return static_cast<size_t>(ops::num_carry(n) + ops::num_xs(n));
}
size_t formal_of(const Node& n, size_t operand) { return n.op == "if" ? operand - 1 : operand; }

// Every read of formal `f` of `sub` reads `value` instead; false when nothing read it. The
// formal stays, unread: the interface does not change.
bool bind_constant(Graph& sub, size_t f, const Value& value) {
  const ValueId formal = sub.leaves_of(ValueKind::Input)[f];
  bool read = false;
  for (const Node& n : sub.nodes())
    for (ValueId v : n.inputs) read = read || v == formal;
  for (const auto& [name, v] : sub.outputs()) read = read || v == formal;
  if (!read) return false;
  const ValueId c = sub.add_constant(sub.value(formal).name, value.constant);
  copy_value_info(sub.value(c), sub.value(formal));
  sub.value(c).weak_type = value.weak_type;
  for (Node& n : sub.nodes())
    for (ValueId& v : n.inputs)
      if (v == formal) v = c;
  for (auto& [name, v] : sub.outputs())
    if (v == formal) v = c;
  return true;
}

// `sub` reduced to the results `keep` and what they read, its formals named "formal.<i>" so
// that the inputs left after dead-code elimination can be matched to the operands.
Graph reduced(const Graph& sub, const std::vector<size_t>& keep) {
  Graph g = sub;
  const std::vector<ValueId> formals = g.leaves_of(ValueKind::Input);
  for (size_t i = 0; i < formals.size(); ++i) g.value(formals[i]).name = "formal." + std::to_string(i);
  std::vector<std::pair<std::string, ValueId>> outputs;
  for (size_t k : keep) outputs.push_back(g.outputs()[k]);
  g.outputs() = std::move(outputs);
  remove_dead_nodes(g);
  return g;
}

std::vector<Tensor> run_reduced(const Graph& g, const std::vector<std::optional<Tensor>>& state) {
  std::vector<Tensor> args;
  for (ValueId v : g.leaves_of(ValueKind::Input)) args.push_back(*state[std::stoul(g.value(v).name.substr(7))]);
  return Interpreter(g).run(args);
}

// How many iterations the while runs, when that is fixed at compile time (see the top).
std::optional<int64_t> constant_trip_count(const Graph& g, const Node& n) {
  const Graph& cond = n.subgraphs[0];
  const Graph& body = n.subgraphs[1];
  const size_t carried = n.outputs.size();
  std::vector<bool> read = inputs_reaching(cond, cond.outputs()[0].second);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < carried; ++i) {
      if (!read[i]) continue;
      const std::vector<bool> more = inputs_reaching(body, body.outputs()[i].second);
      for (size_t j = 0; j < more.size(); ++j)
        if (more[j] && !read[j]) read[j] = grew = true;
    }
  }
  std::vector<std::optional<Tensor>> state(n.inputs.size());
  std::vector<size_t> tracked;
  for (size_t j = 0; j < read.size(); ++j) {
    if (!read[j]) continue;
    if (!is_constant(g, n.inputs[j])) return std::nullopt;
    state[j] = g.value(n.inputs[j]).constant;
    if (j < carried) tracked.push_back(j);
  }
  const Graph cond_part = reduced(cond, {0}), body_part = reduced(body, tracked);
  const int64_t max_iterations = n.attrs.get_int("max_iterations", 0);
  try {
    for (int64_t count = 0; count < kMaxSimulatedIterations; ++count) {
      if ((max_iterations > 0 && count == max_iterations) || run_reduced(cond_part, state)[0].item(0) == 0.0)
        return count;
      const std::vector<Tensor> next = run_reduced(body_part, state);
      for (size_t k = 0; k < tracked.size(); ++k) state[tracked[k]] = next[k];
    }
  } catch (const Error&) {
    // An error in the loop is reported when it runs, in context.
  }
  return std::nullopt;
}

// A scan's static number of steps, or nullopt.
std::optional<int64_t> scan_length(const Graph& g, const Node& n) {
  const SymShape& s = g.value(n.inputs[static_cast<size_t>(ops::num_carry(n))]).shape;
  if (s.empty() || !s[0].known()) return std::nullopt;
  return s[0].value;
}

std::vector<int64_t> static_dims(const SymShape& s) {
  std::vector<int64_t> out;
  for (const SymDim& d : s) {
    if (!d.known()) return {};
    out.push_back(d.value);
  }
  return out;
}

// What replaces node n in `out` (its results, by output index), or nullopt to keep the node.
struct Rewrite {
  std::vector<ValueId> results;
  std::string note;
};

std::optional<Rewrite> rewrite(Graph& out, const Graph& g, const Node& n, const std::vector<ValueId>& map) {
  const std::string what = n.op + (n.scope.empty() ? "" : " in '" + n.scope + "'");
  auto operand = [&](size_t i) { return map[static_cast<size_t>(n.inputs[i])]; };
  std::vector<ValueId> operands;
  for (size_t i = 0; i < n.inputs.size(); ++i) operands.push_back(operand(i));
  bool taken = false;
  if (constant_condition(g, n, &taken)) {
    const std::vector<ValueId> args(operands.begin() + 1, operands.end());
    return Rewrite{inline_graph(out, n.subgraphs[taken ? 0 : 1], args, n.scope),
                   what + ": the condition is a constant; the " + std::string(taken ? "then" : "else") + " branch inlined"};
  }
  if (n.op == "while") {
    const std::optional<int64_t> trips =
        n.attrs.get_int("max_iterations", -1) == 0 ? std::optional<int64_t>(0) : constant_trip_count(g, n);
    if (trips == 0)
      return Rewrite{std::vector<ValueId>(operands.begin(), operands.begin() + static_cast<std::ptrdiff_t>(n.outputs.size())),
                     what + ": runs no iteration; the loop is its operands"};
    if (trips == 1)
      return Rewrite{inline_graph(out, n.subgraphs[1], operands, n.scope), what + ": runs one iteration; its body inlined"};
    return std::nullopt;
  }
  if (n.op != "scan") return std::nullopt;
  const std::optional<int64_t> steps = scan_length(g, n);
  const size_t c = static_cast<size_t>(ops::num_carry(n)), x = static_cast<size_t>(ops::num_xs(n));
  if (steps == 0) {
    std::vector<ValueId> results(operands.begin(), operands.begin() + static_cast<std::ptrdiff_t>(c));
    for (size_t k = c; k < n.outputs.size(); ++k)
      if (static_dims(g.value(n.outputs[k]).shape).empty()) return std::nullopt;
    for (size_t k = c; k < n.outputs.size(); ++k) {
      const Value& y = g.value(n.outputs[k]);
      const std::vector<int64_t> dims = static_dims(y.shape);
      const ValueId empty = out.add_constant(y.name, Tensor::full(y.dtype, dims, 0));
      copy_value_info(out.value(empty), y);
      results.push_back(empty);
    }
    return Rewrite{results, what + ": scans no step; its carries are its operands, its outputs empty"};
  }
  if (steps != 1) return std::nullopt;
  // One step: xs[0] without the leading axis in, each y with a leading axis of 1 out (static
  // shapes only, checked before anything is added). An empty one is an empty constant of its
  // shape, not a reshape: reshape reads a 0 in its target as "copy the input's dim" (ONNX's
  // rule), so [1, 0] -> [0] was refused by the reference kernel (found by the program fuzzer's
  // judge inlining a one-step scan with an empty y, seed 54057).
  for (size_t j = c; j < c + x; ++j)
    if (static_dims(g.value(n.inputs[j]).shape).empty()) return std::nullopt;
  for (size_t k = c; k < n.outputs.size(); ++k)
    if (static_dims(g.value(n.outputs[k]).shape).empty()) return std::nullopt;
  auto reshaped = [&](ValueId v, const std::vector<int64_t>& dims, const Value& like) {
    return reshape_static(out, v, like.dtype, dims, "empty_" + like.name, n.scope);
  };
  std::vector<ValueId> args = operands;
  for (size_t j = c; j < c + x; ++j) {
    const std::vector<int64_t> dims = static_dims(g.value(n.inputs[j]).shape);
    args[j] = reshaped(operands[j], std::vector<int64_t>(dims.begin() + 1, dims.end()), g.value(n.inputs[j]));
  }
  std::vector<ValueId> results = inline_graph(out, n.subgraphs[0], args, n.scope);
  for (size_t k = c; k < results.size(); ++k) {
    const Value& y = g.value(n.outputs[k]);
    results[k] = reshaped(results[k], static_dims(y.shape), y);
    copy_value_info(out.value(results[k]), y);
  }
  return Rewrite{results, what + ": scans one step; its body inlined"};
}

// Ops that stay where they are: a random op draws anew every iteration, an op that indexes
// with data may fail on an iteration that never runs, and a collective must run as many times as
// the other ranks run it.
bool hoistable(const Node& m) {
  static const std::set<std::string> kept = {"dropout", "gather", "take_along_axis", "index_add", "scatter_add",
                                             "slice_scatter"};
  return m.subgraphs.empty() && m.op.rfind("random", 0) != 0 && kept.count(m.op) == 0 && !get_op(m.op).collective;
}

// Loop-invariant code motion: the nodes of a while's or scan's body that read only invariant
// operands, constants and each other (with static shapes, so their values mean the same outside)
// run once before the loop, and the body reads their results as new invariant operands. Emits
// node n into `out` that way and returns true, or returns false when nothing moves.
bool emit_hoisting_invariants(Graph& out, const Graph& g, const Node& n, std::vector<ValueId>& map,
                              const PassContext& ctx, PassReport& report) {
  if (n.op != "while" && n.op != "scan") return false;
  const size_t b = n.op == "while" ? 1 : 0;
  const Graph& body = n.subgraphs[b];
  const std::vector<ValueId> formals = body.leaves_of(ValueKind::Input);
  std::vector<bool> invariant(body.values().size(), false), moved(body.nodes().size(), false);
  for (size_t i = first_invariant(n); i < formals.size(); ++i) invariant[static_cast<size_t>(formals[i])] = true;
  for (ValueId leaf : body.leaves())
    if (body.value(leaf).kind == ValueKind::Constant) invariant[static_cast<size_t>(leaf)] = true;
  int count = 0;
  for (const Node& m : body.nodes()) {
    bool all = hoistable(m) && !m.inputs.empty(), reads_operand = false;
    for (ValueId v : m.inputs) {
      all = all && invariant[static_cast<size_t>(v)];
      reads_operand = reads_operand || body.value(v).kind != ValueKind::Constant;  // all constants: folding's
    }
    for (ValueId v : m.outputs) all = all && body.value(v).shape_known && is_static(body.value(v).shape);
    if (!all || !reads_operand) continue;
    moved[static_cast<size_t>(m.id)] = true;
    ++count;
    for (ValueId v : m.outputs) invariant[static_cast<size_t>(v)] = true;
  }
  if (count == 0) return false;
  // The moved nodes, outside: invariant formals read the node's operands, constants are copied.
  std::vector<ValueId> outer(body.values().size(), -1);
  for (size_t i = first_invariant(n); i < formals.size(); ++i)
    outer[static_cast<size_t>(formals[i])] = map[static_cast<size_t>(n.inputs[i])];
  for (const Node& m : body.nodes()) {
    if (!moved[static_cast<size_t>(m.id)]) continue;
    for (ValueId v : m.inputs)
      if (outer[static_cast<size_t>(v)] < 0) {  // a constant of the body
        const ValueId c = out.add_constant(body.value(v).name, body.value(v).constant);
        copy_value_info(out.value(c), body.value(v));
        outer[static_cast<size_t>(v)] = c;
      }
    copy_node(out, body, m, outer, n.scope);
  }
  // What the loop still reads of them comes in as new invariant operands (the last ones).
  Node node = n;
  Graph& nb = node.subgraphs[b];
  std::vector<ValueId> extra;
  std::vector<ValueId> replacement(body.values().size(), -1);
  auto pass_in = [&](ValueId v) {
    if (replacement[static_cast<size_t>(v)] < 0) {
      for (Graph& sub : node.subgraphs) {  // a while's cond takes every operand too
        const ValueId f = sub.add_input(body.value(v).name);
        copy_value_info(sub.value(f), body.value(v));
        if (&sub == &nb) replacement[static_cast<size_t>(v)] = f;
      }
      extra.push_back(outer[static_cast<size_t>(v)]);
    }
    return replacement[static_cast<size_t>(v)];
  };
  for (Node& m : nb.nodes()) {
    if (moved[static_cast<size_t>(m.id)]) continue;
    for (ValueId& v : m.inputs)
      if (body.value(v).producer >= 0 && moved[static_cast<size_t>(body.value(v).producer)]) v = pass_in(v);
  }
  for (auto& [name, v] : nb.outputs())
    if (body.value(v).producer >= 0 && moved[static_cast<size_t>(body.value(v).producer)]) v = pass_in(v);
  run_keeping_interface(nb, eliminate_dead_code, ctx);  // the moved nodes, now unread
  std::vector<ValueId> ins;
  for (ValueId v : n.inputs) ins.push_back(map[static_cast<size_t>(v)]);
  ins.insert(ins.end(), extra.begin(), extra.end());
  Attrs attrs = n.attrs;
  if (n.op == "while") attrs.set("num_invariant", ops::num_invariant(n) + static_cast<int64_t>(extra.size()));
  const std::vector<ValueId> outs = out.add_node(n.op, ins, attrs, static_cast<int>(n.outputs.size()), n.scope);
  for (size_t k = 0; k < outs.size(); ++k) {
    copy_value_info(out.value(outs[k]), g.value(n.outputs[k]));
    map[static_cast<size_t>(n.outputs[k])] = outs[k];
  }
  out.node(out.value(outs[0]).producer).subgraphs = std::move(node.subgraphs);
  report.notes.push_back(n.op + (n.scope.empty() ? "" : " in '" + n.scope + "'") + ": " + std::to_string(count) +
                         " loop-invariant node" + (count == 1 ? "" : "s") + " moved before the loop");
  return true;
}

// Inlined values keep the shapes their subgraph's own inference gave them, and an unknown dim
// there (a reshape's -1, a slice of a symbol) is named by that inference: its "u1" may be another
// dim than the graph's "u1" (program fuzzer seed 9693, shapeless: a branch's reshape to [-1] and
// the graph's strided slice both "u1", 4 and 1 at run time, which the CPU backend's binding
// refused). Where any shape is symbolic, the rebuilt graph's shapes are inferred again from its
// leaves, so every unknown gets one name in one inference.
void reinfer_symbolic_shapes(Graph& g) {
  bool symbolic = false;
  for (const Value& v : g.values()) symbolic = symbolic || !is_static(v.shape);
  if (symbolic) infer_shapes_from_leaves(g);
}

}  // namespace

PassReport simplify_control_flow(Graph& g, const PassContext& ctx) {
  PassReport report;
  // Constants that every iteration reads go into the subgraphs.
  for (Node& n : g.nodes()) {
    if (n.subgraphs.empty()) continue;
    for (size_t i = first_invariant(n); i < n.inputs.size(); ++i) {
      if (!is_constant(g, n.inputs[i])) continue;
      bool bound = false;
      for (Graph& sub : n.subgraphs) bound = bind_constant(sub, formal_of(n, i), g.value(n.inputs[i])) || bound;
      if (!bound) continue;
      ++report.changes;
      report.notes.push_back(n.op + (n.scope.empty() ? "" : " in '" + n.scope + "'") + ": constant operand '" +
                             g.value(n.inputs[i]).name + "' moved into its subgraphs");
    }
  }
  // What they make constant inside folds now (constant folding ran before this pass).
  if (report.changes > 0) {
    PassReport folded;
    run_in_subgraphs(g, fold_constants, ctx, folded);
    report.changes += folded.changes;
    for (const std::string& note : folded.notes) report.notes.push_back(note + " (constant folding)");
  }
  // Then branches and loops fixed at compile time, in a rebuilt graph.
  Graph out;
  std::vector<ValueId> map = copy_leaves(out, g);
  int rewrites = 0;
  for (const Node& n : g.nodes()) {
    std::optional<Rewrite> r = n.subgraphs.empty() ? std::nullopt : rewrite(out, g, n, map);
    if (!r) {
      if (emit_hoisting_invariants(out, g, n, map, ctx, report)) {
        ++rewrites;
        continue;
      }
      copy_node(out, g, n, map);
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) map[static_cast<size_t>(n.outputs[k])] = r->results[k];
    report.notes.push_back(r->note);
    ++rewrites;
  }
  if (rewrites == 0) return report;
  for (const auto& [name, v] : g.outputs()) out.set_output(name, map[static_cast<size_t>(v)]);
  g = std::move(out);
  report.changes += rewrites;
  reinfer_symbolic_shapes(g);
  return report;
}

}  // namespace ingot
