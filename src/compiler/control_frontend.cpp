// The frontend's part of control-flow blocks (include/ingot/control_blocks.h): each If, While
// or Scan block becomes one `if`, `while` or `scan` node (src/ops/control_flow.cpp). Every body
// is flattened and resolved like a model of its own, then copied into a subgraph whose formal
// parameters follow the node's operands; conditions and next values are built from their
// expressions (src/models/expression.h).
#include <algorithm>
#include <map>
#include <set>

#include "compiler/frontend.h"
#include "ingot/error.h"
#include "ir/inline.h"
#include "models/expression.h"

namespace ingot {

using detail::ControlFlow;
using detail::Expression;

namespace {

std::string join(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

std::string block_name(const FlatNode& n) {
  const std::string kind = n.control->kind == "if" ? "If" : n.control->kind == "while" ? "While" : "Scan";
  return kind + " '" + n.scope + "'";
}

// A body resolved like a model: its parameters become formal inputs (the node lifts them).
Graph resolve_body(const Model& body, const CompileOptions& options, const std::string& where) {
  CompileOptions body_options;
  body_options.inference = options.inference;
  body_options.dynamic_control_flow = options.dynamic_control_flow;  // for control flow nested in the body
  ResolvedModel r;
  try {
    r = resolve_terminals(flatten(body), body_options);
  } catch (const Error& e) {
    INGOT_FAIL(where, ": ", e.what());
  }
  for (const auto& [name, v] : r.graph.outputs())
    INGOT_CHECK(name.rfind(detail::kStatePrefix, 0) != 0, where,
                ": a running statistic (BatchNorm2d in training mode) cannot be updated inside a branch or loop "
                "body; compile with inference = true or move the block out of it");
  for (ValueId leaf : r.graph.leaves())
    if (r.graph.value(leaf).kind == ValueKind::Parameter) r.graph.value(leaf).kind = ValueKind::Input;
  return std::move(r.graph);
}

// The first model input or parameter (in leaf order) `v` is computed from, or nothing when only
// constants are.
std::optional<std::string> data_read_by(const Graph& g, ValueId v) {
  const std::vector<bool> reads = values_reaching(g, v);
  for (ValueId leaf : g.leaves()) {
    const Value& val = g.value(leaf);
    if (reads[static_cast<size_t>(leaf)] && (val.kind == ValueKind::Input || val.kind == ValueKind::Parameter))
      return val.name;
  }
  return std::nullopt;
}

// Builds the node's subgraphs from the bodies and expressions.
class SubgraphBuilder {
 public:
  SubgraphBuilder(const FlatNode& n, const CompileOptions& options) : n_(n), c_(*n.control), options_(options) {}

  // A graph whose formal inputs follow the node's operands (after an if's condition), each named
  // by the formal it binds in body `body` (-1: any); ignored operands get placeholder names.
  Graph formals(int body) const {
    Graph g;
    for (size_t k = 0; k < c_.operands.size(); ++k) {
      const ControlFlow::Operand& o = c_.operands[k];
      const bool bound = o.body < 0 || o.body == body;
      g.add_input(bound ? o.formal : "unused." + std::to_string(k));
    }
    return g;
  }

  // Body `b` inlined into `sub`; returns its outputs by name.
  std::map<std::string, ValueId> inline_body(Graph& sub, size_t b) const {
    const std::string where = block_name(n_) + ", " + c_.body_names[b];
    const Graph body = resolve_body(c_.bodies[b], options_, where);
    const std::vector<ValueId> formals = sub.leaves_of(ValueKind::Input);
    std::vector<ValueId> args;
    for (ValueId leaf : body.leaves_of(ValueKind::Input)) {
      const std::string& name = body.value(leaf).name;
      ValueId arg = -1;
      for (ValueId f : formals)
        if (sub.value(f).name == name) arg = f;
      INGOT_CHECK(arg >= 0, where, " reads '", name, "', which the block does not pass it");
      args.push_back(arg);
    }
    const std::vector<ValueId> outs = inline_graph(sub, body, args, join(n_.scope, c_.body_names[b]));
    std::map<std::string, ValueId> by_name;
    for (size_t k = 0; k < outs.size(); ++k) by_name[body.outputs()[k].first] = outs[k];
    return by_name;
  }

  Expression parse(const std::string& text, const std::string& what) const {
    return Expression::parse(text, block_name(n_) + ": " + what);
  }

  // `e` built into `sub` (as a bool condition with `condition`): names read body outputs first,
  // then the formal inputs.
  ValueId expression(Graph& sub, const Expression& e, const std::map<std::string, ValueId>& outputs,
                     const std::string& what, bool condition = false) const {
    const auto lookup = [&](const std::string& name) -> ValueId {
      if (const auto it = outputs.find(name); it != outputs.end()) return it->second;
      for (ValueId f : sub.leaves_of(ValueKind::Input))
        if (sub.value(f).name == name) return f;
      INGOT_FAIL(block_name(n_), ": ", what, " \"", e.text(), "\" reads '", name,
                 "', which is neither a loop variable, a body output nor a terminal of the block");
    };
    const std::string scope = join(n_.scope, "expression");
    return condition ? e.emit_condition(sub, lookup, scope) : e.emit(sub, lookup, scope);
  }

  std::vector<Graph> build() const {
    if (c_.kind == "if") {
      std::vector<Graph> branches;
      for (size_t b = 0; b < 2; ++b) {
        Graph sub = formals(static_cast<int>(b));
        const std::map<std::string, ValueId> outs = inline_body(sub, b);
        for (const std::string& r : c_.body_results) {
          const auto it = outs.find(r);
          INGOT_CHECK(it != outs.end(), block_name(n_), ": ", c_.body_names[b], " does not produce '", r, "'");
          sub.set_output(r, it->second);
        }
        branches.push_back(std::move(sub));
      }
      return branches;
    }
    Graph body = formals(0);
    const std::map<std::string, ValueId> outs = inline_body(body, 0);
    for (const auto& [var, next] : c_.loop_variables) {
      const std::string what = "loop_vars['" + var + "']";
      body.set_output(var, expression(body, parse(next, what), outs, what));
    }
    for (const std::string& y : c_.body_results) body.set_output("y." + y, expression(body, parse(y, "ys"), outs, "ys"));
    if (c_.kind == "scan") return {std::move(body)};
    Graph cond = formals(0);
    cond.set_output("cond", expression(cond, parse(c_.condition, "condition"), {}, "condition", true));
    return {std::move(cond), std::move(body)};
  }

 private:
  const FlatNode& n_;
  const ControlFlow& c_;
  const CompileOptions& options_;
};

// Whether a while's trip count depends on data: the condition's formals, closed over the next
// values of the loop variables it reads, include an operand computed from an input or parameter.
std::optional<std::string> trip_count_reads_data(const Graph& g, const std::vector<ValueId>& operands,
                                                 const Graph& cond, const Graph& body) {
  std::vector<bool> read = inputs_reaching(cond, cond.outputs()[0].second);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < body.outputs().size(); ++i) {
      if (!read[i]) continue;
      const std::vector<bool> more = inputs_reaching(body, body.outputs()[i].second);
      for (size_t j = 0; j < more.size(); ++j)
        if (more[j] && !read[j]) read[j] = grew = true;
    }
  }
  for (size_t j = 0; j < read.size(); ++j)
    if (read[j])
      if (auto data = data_read_by(g, operands[j])) return data;
  return std::nullopt;
}

}  // namespace

void merge_lifted_parameters(const FlatNode& n, FlatModel& out) {
  const ControlFlow& c = *n.control;
  std::vector<std::optional<FlatModel>> bodies(c.bodies.size());
  for (size_t t = 0; t < n.input_terminals.size(); ++t)
    for (const ControlFlow::Operand& o : c.operands) {
      if (!o.lifted || o.terminal != n.input_terminals[t]) continue;
      const size_t b = static_cast<size_t>(o.body);
      if (!bodies[b]) bodies[b] = flatten(c.bodies[b]);
      FlatWire& outer = out.wires[static_cast<size_t>(n.inputs[t])];
      const std::string scope = join(n.scope, c.body_names[b]);
      for (const FlatWire& inner : bodies[b]->wires) {
        if (inner.name != o.formal) continue;
        for (ShapeConstraint sc : inner.shapes) {
          sc.scope = join(scope, sc.scope);
          sc.origin += " (in " + scope + ")";
          outer.shapes.push_back(std::move(sc));
        }
        if (!outer.dtype) outer.dtype = inner.dtype;
        if (!outer.init) outer.init = inner.init;
        outer.role = detail::WireRole::Parameter;
      }
    }
}

std::vector<ValueId> add_control_node(Graph& g, const FlatNode& n, const std::vector<ValueId>& inputs,
                                      const CompileOptions& options) {
  const ControlFlow& c = *n.control;
  std::map<std::string, ValueId> terminal;
  for (size_t i = 0; i < inputs.size(); ++i) terminal[n.input_terminals[i]] = inputs[i];

  std::vector<ValueId> operands;
  if (c.kind == "if") {
    const Expression cond = Expression::parse(c.condition, block_name(n) + ": condition");
    const auto read = [&](const std::string& name) {
      const auto it = terminal.find(name);
      INGOT_CHECK(it != terminal.end(), block_name(n), ": its condition reads '", name, "', which is not a terminal of it");
      return it->second;
    };
    const ValueId holds = cond.emit(g, read, join(n.scope, "condition"));
    if (const auto data = data_read_by(g, holds); data && !options.dynamic_control_flow && !c.run_time)
      INGOT_FAIL(block_name(n), ": its condition \"", c.condition, "\" reads '", *data,
                 "', which is only known at run time; compile with dynamic_control_flow = true to branch at run "
                 "time, or fix it at compile time (constant_keys)");
    operands.push_back(holds);
  }
  for (const ControlFlow::Operand& o : c.operands) {
    const auto it = terminal.find(o.terminal);
    INGOT_CHECK(it != terminal.end(), block_name(n), ": it reads '", o.terminal, "', which is not a terminal of it");
    operands.push_back(it->second);
  }

  std::vector<Graph> subgraphs = SubgraphBuilder(n, options).build();
  if (c.kind == "while" && !options.dynamic_control_flow && !c.run_time)
    if (const auto data = trip_count_reads_data(g, operands, subgraphs[0], subgraphs[1]))
      INGOT_FAIL(block_name(n), ": whether it runs another iteration (\"", c.condition, "\") depends on '", *data,
                 "', which is only known at run time; compile with dynamic_control_flow = true");

  const size_t num_results = c.kind == "if" ? c.body_results.size() : c.loop_variables.size() + c.body_results.size();
  const std::vector<ValueId> results =
      g.add_node(c.kind, operands, n.attrs, static_cast<int>(num_results), n.scope);
  g.node(g.value(results[0]).producer).subgraphs = std::move(subgraphs);
  std::vector<ValueId> out;
  for (const std::string& t : n.output_terminals)
    for (const auto& [name, index] : c.results)
      if (name == t) out.push_back(results[index]);
  return out;
}

}  // namespace ingot
