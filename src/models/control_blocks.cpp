// If, While and Scan blocks (include/ingot/control_blocks.h): what each block reads and returns,
// worked out and checked when it is built, so that a misnamed loop variable or a malformed
// condition fails here, naming the block and the name. The frontend builds the node
// (src/compiler/control_frontend.cpp).
#include "ingot/control_blocks.h"

#include <algorithm>
#include <memory>
#include <set>

#include "ingot/error.h"
#include "models/expression.h"
#include "models/model_impl.h"

namespace ingot {

namespace {

using detail::ControlFlow;
using detail::Expression;
using detail::ModelImpl;

std::string list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void push_unique(std::vector<std::string>& names, const std::string& name) {
  if (!contains(names, name)) names.push_back(name);
}

// A branch or body as a model of its own: the block with its links, and every terminal the links
// leave out linked to a wire of its own name (a Linear's parameters: "weight", "bias").
Model body_model(const BlockCall& call) {
  if (call.links.empty() && !call.block.is_primitive()) return call.block;
  Links links = call.links;
  const std::vector<TerminalInfo> terms = call.block.terminals();
  for (const TerminalInfo& t : terms) {
    bool linked = false;
    for (const auto& [name, key] : call.links) linked = linked || call.block.impl().terminal_linked_by(name, terms) == t.name;
    if (!linked) links.emplace_back(t.name, IOKey(t.name));
  }
  Model m;
  m |= BlockCall{call.block, links};
  return m;
}

// A body's free inputs (data), its parameters and its outputs, by terminal name.
struct BodyTerminals {
  std::vector<std::string> inputs, parameters, outputs;
};

BodyTerminals terminals_of(const Model& body) {
  const ModelImpl& m = body.impl();
  BodyTerminals t;
  for (int w : m.input_wires()) {
    if (m.wires[static_cast<size_t>(w)].value) continue;  // a constant of the body
    const bool parameter = m.wires[static_cast<size_t>(w)].role == detail::WireRole::Parameter;
    (parameter ? t.parameters : t.inputs).push_back(m.terminal_name(w));
  }
  for (int w : m.output_wires()) t.outputs.push_back(m.terminal_name(w));
  return t;
}

// The block: a primitive whose terminals are linked by name (or to a loop variable's first value)
// unless the caller links them otherwise.
Model control_block(std::shared_ptr<ControlFlow> c, const std::string& type, const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs, Attrs attrs, Links default_links) {
  for (const std::string& out : outputs)
    INGOT_CHECK(!contains(inputs, out), type, ": '", out,
                "' would be both an input and an output of the block; give the output another name");
  Model m = Model::primitive(c->kind, inputs, outputs, std::move(attrs), type);
  m.impl().control = std::move(c);
  m.impl().default_links = std::move(default_links);
  return m;
}

// Parameters of body `b`, lifted to parameter terminals "<body name>.<name>".
void lift_parameters(ControlFlow& c, size_t b, const BodyTerminals& t, std::vector<std::string>& inputs) {
  for (const std::string& p : t.parameters) {
    const std::string terminal = c.body_names[b] + "." + p;
    inputs.push_back(terminal);
    c.operands.push_back({terminal, p, static_cast<int>(b), true});
  }
}

// Loop variables from initial_state and loop_vars: their first values become input terminals
// named after them, their next values are parsed here. Returns their names in order.
std::vector<std::string> loop_variables(ControlFlow& c, const std::string& type, const InitialState& initial_state,
                                        const NameMap& loop_vars, std::vector<std::string>& inputs, Links& links) {
  std::vector<std::string> vars;
  for (const auto& [name, first] : initial_state) {
    INGOT_CHECK(!name.empty(), type, ": a loop variable in initial_state has an empty name");
    INGOT_CHECK(!contains(vars, name), type, ": loop variable '", name, "' is in initial_state twice");
    vars.push_back(name);
  }
  for (const auto& [name, next] : loop_vars)
    INGOT_CHECK(contains(vars, name), type, ": loop_vars gives a next value to '", name,
                "', which is not a loop variable (initial_state has: ", list(vars), ")");
  for (const std::string& v : vars) {
    const auto next = std::find_if(loop_vars.begin(), loop_vars.end(), [&](const auto& p) { return p.first == v; });
    INGOT_CHECK(next != loop_vars.end(), type, ": loop variable '", v,
                "' has no next value; give it one in loop_vars (a body output or an expression)");
    Expression::parse(next->second, type + ": loop_vars['" + v + "']");  // syntax errors now, not at compile
    c.loop_variables.emplace_back(v, next->second);
    inputs.push_back(v);
    c.operands.push_back({v, v});
    for (const auto& [name, first] : initial_state)
      if (name == v) links.emplace_back(v, first);
  }
  return vars;
}

// Names a loop's condition and next values read that are neither loop variables nor body
// outputs: terminals of the block passed to every iteration unchanged.
std::vector<std::string> loop_invariants(const ControlFlow& c, const BodyTerminals& body,
                                         const std::vector<std::string>& vars, const std::vector<std::string>& xs_inputs) {
  std::vector<std::string> out;
  for (const std::string& in : body.inputs)
    if (!contains(vars, in) && !contains(xs_inputs, in)) push_unique(out, in);
  std::vector<std::string> read;
  if (!c.condition.empty()) read = Expression::parse(c.condition, "condition").names();
  for (const auto& [v, next] : c.loop_variables)
    for (const std::string& n : Expression::parse(next, "next value").names())
      if (!contains(body.outputs, n)) read.push_back(n);
  for (const std::string& n : read)
    if (!contains(vars, n) && !contains(xs_inputs, n)) push_unique(out, n);
  return out;
}

// The output terminals that return loop variables' last values.
void loop_outputs(ControlFlow& c, const std::string& type, const NameMap& output_vars,
                  const std::vector<std::string>& vars, std::vector<std::string>& outputs) {
  for (const auto& [out, var] : output_vars) {
    const auto it = std::find(vars.begin(), vars.end(), var);
    INGOT_CHECK(it != vars.end(), type, ": output_vars['", out, "'] returns '", var,
                "', which is not a loop variable (initial_state has: ", list(vars), ")");
    outputs.push_back(out);
    c.results.emplace_back(out, static_cast<size_t>(it - vars.begin()));
  }
}

Links links_by_name(const std::vector<std::string>& names, Links links = {}) {
  for (const std::string& n : names) {
    bool linked = false;
    for (const auto& [t, k] : links) linked = linked || t == n;
    if (!linked) links.emplace_back(n, IOKey(n));
  }
  return links;
}

}  // namespace

namespace detail {
Model decided_at_run_time(Model block) {
  INGOT_CHECK(block.impl().control, "decided_at_run_time: '", block.type_name(), "' is not a control-flow block");
  auto c = std::make_shared<ControlFlow>(*block.impl().control);
  c->run_time = true;
  block.impl().control = std::move(c);
  return block;
}
}  // namespace detail

Model If(const std::string& condition, const BlockCall& then_branch, const BlockCall& else_branch) {
  auto c = std::make_shared<ControlFlow>();
  c->kind = "if";
  c->condition = condition;
  const Expression cond = Expression::parse(condition, "If: condition");
  c->bodies = {body_model(then_branch), body_model(else_branch)};
  c->body_names = {"then_branch", "else_branch"};
  const BodyTerminals t = terminals_of(c->bodies[0]), e = terminals_of(c->bodies[1]);
  std::vector<std::string> sorted_t = t.outputs, sorted_e = e.outputs;
  std::sort(sorted_t.begin(), sorted_t.end());
  std::sort(sorted_e.begin(), sorted_e.end());
  INGOT_CHECK(sorted_t == sorted_e, "If: both branches must produce the same outputs; then_branch produces ",
              list(t.outputs), " and else_branch produces ", list(e.outputs));
  INGOT_CHECK(!t.outputs.empty(), "If: the branches produce no outputs; name them when linking the branches");

  std::vector<std::string> inputs;
  for (const BodyTerminals* b : {&t, &e})
    for (const std::string& in : b->inputs)
      if (!contains(inputs, in)) {
        inputs.push_back(in);
        c->operands.push_back({in, in});
      }
  for (const std::string& n : cond.names()) push_unique(inputs, n);
  const std::vector<std::string> read = inputs;
  lift_parameters(*c, 0, t, inputs);
  lift_parameters(*c, 1, e, inputs);
  c->body_results = t.outputs;
  for (size_t k = 0; k < t.outputs.size(); ++k) c->results.emplace_back(t.outputs[k], k);
  std::vector<std::string> linked = read;
  linked.insert(linked.end(), t.outputs.begin(), t.outputs.end());
  return control_block(c, "If", inputs, t.outputs, {}, links_by_name(linked));
}

Model While(const std::string& condition, const BlockCall& body, const InitialState& initial_state,
            const NameMap& loop_vars, const NameMap& output_vars, std::optional<int64_t> max_iterations) {
  auto c = std::make_shared<ControlFlow>();
  c->kind = "while";
  c->condition = condition;
  Expression::parse(condition, "While: condition");
  INGOT_CHECK(!initial_state.empty(), "While: initial_state is empty; a loop needs at least one loop variable");
  INGOT_CHECK(!output_vars.empty(), "While: output_vars is empty; name the loop variables the loop returns");
  INGOT_CHECK(!max_iterations || *max_iterations >= 0, "While: max_iterations must be at least 0, got ",
              max_iterations.value_or(0));
  c->max_iterations = max_iterations;
  c->bodies = {body_model(body)};
  c->body_names = {"body"};
  const BodyTerminals b = terminals_of(c->bodies[0]);

  std::vector<std::string> inputs, outputs;
  Links links;
  const std::vector<std::string> vars = loop_variables(*c, "While", initial_state, loop_vars, inputs, links);
  const std::vector<std::string> invariants = loop_invariants(*c, b, vars, {});
  for (const std::string& n : invariants) {
    inputs.push_back(n);
    c->operands.push_back({n, n});
  }
  lift_parameters(*c, 0, b, inputs);
  loop_outputs(*c, "While", output_vars, vars, outputs);
  Attrs attrs;
  attrs.set("num_invariant", static_cast<int64_t>(c->operands.size() - vars.size()));
  if (max_iterations) attrs.set("max_iterations", *max_iterations);
  std::vector<std::string> by_name = invariants;
  by_name.insert(by_name.end(), outputs.begin(), outputs.end());
  return control_block(c, "While", inputs, outputs, std::move(attrs), links_by_name(by_name, links));
}

Model Scan(const BlockCall& body, const ScanOptions& o) {
  auto c = std::make_shared<ControlFlow>();
  c->kind = "scan";
  c->reverse = o.reverse;
  INGOT_CHECK(!o.xs.empty(), "Scan: xs is empty; give at least one sequence to scan ({body input, sequence})");
  INGOT_CHECK(!o.ys.empty() || !o.output_vars.empty(), "Scan: ys and output_vars are both empty; name what it returns");
  c->bodies = {body_model(body)};
  c->body_names = {"body"};
  const BodyTerminals b = terminals_of(c->bodies[0]);

  // The sequences come first among the terminals: the canonical input, which += chains into.
  std::vector<std::string> inputs, outputs, firsts;
  Links links;
  const std::vector<std::string> vars = loop_variables(*c, "Scan", o.initial_state, o.loop_vars, firsts, links);
  std::vector<std::string> xs_inputs, sequences;
  for (const auto& [in, sequence] : o.xs) {
    INGOT_CHECK(contains(b.inputs, in), "Scan: xs feeds '", in, "', which the body does not read (its inputs: ",
                list(b.inputs), ")");
    INGOT_CHECK(!contains(vars, in), "Scan: '", in, "' is both a loop variable and a scanned input");
    INGOT_CHECK(!contains(xs_inputs, in), "Scan: xs feeds '", in, "' twice");
    xs_inputs.push_back(in);
    if (!contains(inputs, sequence)) inputs.push_back(sequence);
    sequences.push_back(sequence);
    c->operands.push_back({sequence, in});
  }
  c->num_xs = o.xs.size();
  inputs.insert(inputs.end(), firsts.begin(), firsts.end());
  const std::vector<std::string> invariants = loop_invariants(*c, b, vars, xs_inputs);
  for (const std::string& n : invariants) {
    INGOT_CHECK(!contains(sequences, n), "Scan: '", n, "' is a scanned sequence and is also read whole");
    inputs.push_back(n);
    c->operands.push_back({n, n});
  }
  lift_parameters(*c, 0, b, inputs);
  loop_outputs(*c, "Scan", o.output_vars, vars, outputs);
  for (const auto& [out, y] : o.ys) {
    INGOT_CHECK(contains(b.outputs, y) || contains(vars, y), "Scan: ys['", out, "'] stacks '", y,
                "', which is neither a body output (", list(b.outputs), ") nor a loop variable");
    outputs.push_back(out);
    c->results.emplace_back(out, vars.size() + c->body_results.size());
    c->body_results.push_back(y);
  }
  Attrs attrs;
  attrs.set("num_carry", static_cast<int64_t>(vars.size()));
  attrs.set("num_xs", static_cast<int64_t>(o.xs.size()));
  attrs.set("reverse", static_cast<int64_t>(o.reverse ? 1 : 0));
  std::vector<std::string> by_name = sequences;
  by_name.insert(by_name.end(), invariants.begin(), invariants.end());
  by_name.insert(by_name.end(), outputs.begin(), outputs.end());
  return control_block(c, "Scan", inputs, outputs, std::move(attrs), links_by_name(by_name, links));
}

}  // namespace ingot
