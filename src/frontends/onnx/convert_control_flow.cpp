// ONNX control flow: If, Loop and Scan. Each subgraph (then_branch, else_branch, body) is
// imported by the same importer as a Model of its own (Importer::import_subgraph) and becomes the
// body of an ingot If, While or Scan block (include/ingot/control_blocks.h); the names a subgraph
// reads from the graphs around it (ONNX's implicit capture) are free inputs of that Model, linked
// to those values when the block is added.
//
//   If    condition known while importing: the taken branch's nodes join the graph (and fold
//         where they can). Otherwise an If block; ONNX names each branch's outputs its own way,
//         so both are exposed under the same names, by position.
//   Loop  a While block whose loop variables are an iteration counter, the condition and the
//         loop-carried values, while "i < M and cond" (either part where the Loop omits M or
//         cond; max_iterations = M where M is known). A Loop with scan outputs is a Scan over the
//         iteration numbers 0..M-1 instead (ingot's while stacks no outputs), which needs M known
//         while importing and a condition that stays true.
//   Scan  a Scan block. Inputs scanned along another axis than 0 are transposed first, inputs
//         scanned the other way than the block flipped (slice with step -1); outputs likewise
//         after it. Opset 8's batched form runs one Scan block per batch entry (its batch size
//         known while importing), with sequence_lens only where every sequence is whole.
//
// ingot's block terminals that conditions and next values read are names of their own
// ("onnx_iteration", "onnx_v0"), none of them a name the subgraph uses: ONNX names may hold any
// character, and an expression reads only [A-Za-z0-9_.]. ONNX defines If and Loop as run-time
// choices, so the blocks are marked as such (detail::decided_at_run_time): an imported model
// compiles without the dynamic_control_flow option logical models need.
#include <algorithm>
#include <limits>
#include <set>

#include "frontends/onnx/importer.h"
#include "ingot/control_blocks.h"
#include "models/model_impl.h"
#include "ingot/error.h"

namespace ingot::onnx_import {

namespace {

using Outs = std::vector<Connection>;

// Every name `g` and its subgraphs use (the nesting was bounded when the model was first read).
void collect_names(const ::onnx::GraphProto& g, std::set<std::string>& names) {
  for (const auto& v : g.input()) names.insert(v.name());
  for (const auto& v : g.output()) names.insert(v.name());
  for (const auto& v : g.initializer()) names.insert(v.name());
  for (const auto& node : g.node()) {
    names.insert(node.input().begin(), node.input().end());
    names.insert(node.output().begin(), node.output().end());
    for (const auto& a : node.attribute())
      if (a.type() == ::onnx::AttributeProto::GRAPH) collect_names(a.g(), names);
  }
}

// Terminal names ingot adds to a block and its body: names an expression can read, none of them
// a name of the subgraphs (whose values keep their ONNX names inside the body).
class TerminalNames {
 public:
  explicit TerminalNames(const std::vector<const ::onnx::GraphProto*>& graphs) {
    for (const auto* g : graphs) collect_names(*g, taken_);
  }
  std::string operator()(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

 private:
  std::set<std::string> taken_;
};

std::optional<ShapeTemplate> shape_template(const std::optional<Shape>& s) {
  if (!s) return std::nullopt;
  return ShapeTemplate(s->begin(), s->end());
}

int64_t int_value(const NodeContext& c, const Tensor& t, const std::string& what) {
  if (t.numel() != 1) c.fail("its " + what + " holds " + std::to_string(t.numel()) + " elements; it needs one");
  return t.astype(DType::Int64).data<int64_t>()[0];
}

// The most iterations ingot stacks a Loop's scan outputs over (the counter it scans is a tensor
// of that many elements), unrolls a Loop whose body needs its iteration number while importing
// over, and gives a While as max_iterations (which sizes the scan its gradient runs; a larger M,
// as exporters write for "no limit", only bounds the loop through its condition).
constexpr int64_t kMaxIterations = int64_t{1} << 24, kMaxUnrolled = 1024, kMaxIterationsToDifferentiate = 1 << 20;

// `x` reversed along axis 0.
Connection flip(const Connection& x) {
  return x.slice(0, -1, std::numeric_limits<int64_t>::min(), -1);
}

// Adds `block` to the model being built: each input terminal linked as `links` says, or else (a
// name a body captured) to the value of that name; its outputs to fresh wires. Returns the wires
// of `outputs`. A plain body (not a control-flow block) passes its `captured` names: its other
// input terminals are its constants, which keep their values.
Outs add_block(NodeContext& c, const Model& block, const std::map<std::string, IOKey>& links,
               const std::vector<std::string>& outputs, const std::vector<std::string>* captured = nullptr) {
  Links all;
  for (const TerminalInfo& t : block.terminals()) {
    if (t.role == TerminalInfo::Role::Output) all.emplace_back(t.name, IOKey());
    else if (auto it = links.find(t.name); it != links.end()) all.emplace_back(t.name, it->second);
    else if (!captured || std::find(captured->begin(), captured->end(), t.name) != captured->end())
      all.emplace_back(t.name, IOKey(c.importer.connection(c.model, t.name)));
  }
  const std::map<std::string, Connection> wires = c.model.add(block, all);
  Outs outs;
  for (const std::string& o : outputs) outs.push_back(wires.at(o));
  return outs;
}

// The loop-carried part of a Loop's or Scan's body: one loop variable per carried value (its
// first value linked by add_block), its next value the body output `outputs[offset + k]`, its
// last value returned under `finals[k]`.
void carry(const std::vector<std::string>& vars, const std::vector<std::string>& outputs, size_t offset,
           const std::vector<std::string>& finals, InitialState& initial, NameMap& loop_vars, NameMap& output_vars) {
  for (size_t k = 0; k < vars.size(); ++k) {
    initial.emplace_back(vars[k], IOKey(vars[k]));  // linked by add_block
    loop_vars.emplace_back(vars[k], outputs[offset + k]);
    output_vars.emplace_back(finals[k], vars[k]);
  }
}

// ------------------------------------------------------------------------------------- If

Outs if_(NodeContext& c) {
  const ::onnx::GraphProto* branches[2] = {&c.attr_graph("then_branch"), &c.attr_graph("else_branch")};
  const char* which[2] = {"then_branch", "else_branch"};
  const int n = c.node.output_size();
  for (int b = 0; b < 2; ++b) {
    if (branches[b]->input_size() != 0)
      c.fail(std::string("its ") + which[b] + " takes " + std::to_string(branches[b]->input_size()) +
             " inputs; an If's branches take none (they read the enclosing graph's values by name)");
    if (branches[b]->output_size() != n)
      c.fail(std::string("its ") + which[b] + " returns " + std::to_string(branches[b]->output_size()) +
             " values for its " + std::to_string(n) + " outputs");
  }
  if (n == 0) return {};
  if (const std::optional<Tensor> cond = c.known(0)) {
    if (cond->numel() != 1) c.fail("its condition holds " + std::to_string(cond->numel()) + " elements; it needs one");
    const int taken = cond->item(0) != 0 ? 0 : 1;
    c.importer.inline_subgraph(*branches[taken], c.where() + ", " + which[taken]);
    Outs outs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const std::string& name = branches[taken]->output(i).name();
      if (const std::optional<Tensor> v = c.importer.known(name)) {
        c.known_outputs[i] = *v;
        continue;
      }
      outs[static_cast<size_t>(i)] = c.importer.connection(c.model, name);
      if (const std::optional<DType> t = c.importer.dtype(name)) c.output_dtypes[i] = *t;
    }
    return outs;
  }
  TerminalNames names({branches[0], branches[1]});
  std::vector<std::string> outputs;
  for (int i = 0; i < n; ++i) outputs.push_back(names("onnx_out" + std::to_string(i)));
  const Subgraph then_branch = c.importer.import_subgraph(*branches[0], c.where() + ", then_branch", {}, outputs);
  const Subgraph else_branch = c.importer.import_subgraph(*branches[1], c.where() + ", else_branch", {}, outputs);
  const std::string cond = names("onnx_cond");
  const Model block =
      ingot::detail::decided_at_run_time(If(cond, BlockCall{then_branch.model, {}}, BlockCall{else_branch.model, {}}));
  Outs outs = add_block(c, block, {{cond, IOKey(c.in(0))}}, outputs);
  for (int i = 0; i < n; ++i)
    if (const auto& t = then_branch.output_dtypes[static_cast<size_t>(i)]) c.output_dtypes[i] = *t;
  return outs;
}

// ----------------------------------------------------------------------------------- Loop

// What a Loop's conversion has worked out before it picks a While or a Scan.
struct LoopParts {
  const ::onnx::GraphProto& body;
  int carried, scans;
  bool has_trip, has_cond;
  std::string iteration, cond;                // the body's first two formals
  std::vector<std::string> vars, outputs, finals;
  std::vector<FormalInput> formals;
};

// A Loop with scan outputs whose body needs its iteration number while importing (a Slice at
// [i, i + 1)): M copies of the body, each with its iteration number known, in a row; the copies'
// scan outputs stacked.
Outs loop_unrolled(NodeContext& c, LoopParts& p, int64_t trip) {
  if (trip == 0) c.fail("it runs no iteration, and the shape of its scan outputs is unknown without one");
  std::vector<Connection> carried;
  for (int k = 0; k < p.carried; ++k) carried.push_back(c.in(2 + k));
  std::vector<std::vector<IOKey>> stacked(static_cast<size_t>(p.scans));
  std::optional<Subgraph> b;
  for (int64_t i = 0; i < trip; ++i) {
    p.formals[0].value = Tensor::scalar<int64_t>(i);
    b = c.importer.import_subgraph(p.body, c.where() + ", body (iteration " + std::to_string(i) + ")", p.formals, p.outputs);
    const std::optional<Tensor>& next = b->output_values[0];
    if (p.has_cond && (!next || next->numel() != 1 || next->item(0) == 0))
      c.fail("its body's condition ('" + p.body.output(0).name() + "') may turn false; ingot stacks scan outputs over "
             "a trip count known while importing");
    std::map<std::string, IOKey> links;
    for (int k = 0; k < p.carried; ++k) links[p.vars[static_cast<size_t>(k)]] = IOKey(carried[static_cast<size_t>(k)]);
    const Outs outs = add_block(c, b->model, links, p.outputs, &b->captured);
    for (int k = 0; k < p.carried; ++k) {
      carried[static_cast<size_t>(k)] = outs[static_cast<size_t>(1 + k)];
      // The next copy's formals take this one's shapes (an unrolled loop may change them).
      p.formals[static_cast<size_t>(2 + k)].shape = shape_template(b->output_shapes[static_cast<size_t>(1 + k)]);
    }
    for (int j = 0; j < p.scans; ++j)
      stacked[static_cast<size_t>(j)].push_back(
          c.op("expand_dims", {outs[static_cast<size_t>(1 + p.carried + j)]}, {{"axes", std::vector<int64_t>{0}}}));
  }
  Outs results = carried;
  for (int j = 0; j < p.scans; ++j) {
    results.push_back(c.op("concat", stacked[static_cast<size_t>(j)], {{"axis", int64_t{0}}}));
    if (const auto& t = b->output_dtypes[static_cast<size_t>(1 + p.carried + j)]) c.output_dtypes[p.carried + j] = *t;
  }
  for (int k = 0; k < p.carried; ++k)
    if (const std::optional<DType> t = c.dtype(2 + k)) c.output_dtypes[k] = *t;
  return results;
}

// A Loop with scan outputs: a Scan over 0..M-1 (M and a condition that stays true known), or
// unrolled where the body needs its iteration number while importing.
Outs loop_as_scan(NodeContext& c, LoopParts& p, TerminalNames& names) {
  const std::string why = " (ingot's while loops stack no outputs: it runs a Loop with scan outputs as a scan over a "
                          "trip count known while importing)";
  if (!p.has_trip) c.fail("it has " + std::to_string(p.scans) + " scan outputs and no trip count M" + why);
  const std::optional<Tensor> m = c.known(0);
  if (!m) c.fail("its trip count M ('" + c.node.input(0) + "') is only known at run time" + why);
  std::optional<Tensor> first_cond = Tensor::scalar<bool>(true);
  if (p.has_cond) first_cond = c.known(1);
  if (!first_cond) c.fail("its condition ('" + c.node.input(1) + "') is only known at run time" + why);
  int64_t trip = std::max<int64_t>(0, int_value(c, *m, "trip count M"));
  if (int_value(c, *first_cond, "condition") == 0) trip = 0;
  if (trip > kMaxIterations)
    c.fail("its trip count " + std::to_string(trip) + " is over the " + std::to_string(kMaxIterations) +
           " iterations ingot stacks scan outputs over");
  // The body sees the condition true; where its next condition is then known true too, the loop
  // runs all M iterations.
  p.formals[1].value = Tensor::full(DType::Bool, first_cond->shape(), 1);
  std::optional<Subgraph> body;
  try {
    body = c.importer.import_subgraph(p.body, c.where() + ", body", p.formals, p.outputs);
  } catch (const Error& e) {
    // Something in the body needs the iteration number while importing (the failed import
    // added nothing to this graph).
    if (std::string(e.what()).find("is only known at run time") == std::string::npos || trip > kMaxUnrolled) throw;
    return loop_unrolled(c, p, trip);
  }
  const Subgraph& b = *body;
  if (p.has_cond) {
    const std::optional<Tensor>& next = b.output_values[0];
    if (!next || next->numel() != 1 || next->item(0) == 0)
      c.fail("its body's condition ('" + p.body.output(0).name() + "') may turn false at run time" + why);
  }
  ScanOptions o;
  const std::string iterations = names("onnx_iterations");
  o.xs = {{p.iteration, iterations}};
  carry(p.vars, p.outputs, 1, p.finals, o.initial_state, o.loop_vars, o.output_vars);
  std::vector<std::string> results = p.finals;
  for (int j = 0; j < p.scans; ++j) {
    results.push_back(names("onnx_stacked" + std::to_string(j)));
    o.ys.emplace_back(results.back(), p.outputs[static_cast<size_t>(1 + p.carried + j)]);
  }
  Tensor counter(DType::Int64, {trip});
  for (int64_t i = 0; i < trip; ++i) counter.data<int64_t>()[i] = i;
  std::map<std::string, IOKey> links{{iterations, IOKey(counter)}};
  for (int k = 0; k < p.carried; ++k) links[p.vars[static_cast<size_t>(k)]] = IOKey(c.in(2 + k));
  Outs outs = add_block(c, Scan(BlockCall{b.model, {}}, o), links, results);
  for (int k = 0; k < p.carried; ++k)
    if (const std::optional<DType> t = c.dtype(2 + k)) c.output_dtypes[k] = *t;
  for (int j = 0; j < p.scans; ++j)
    if (const auto& t = b.output_dtypes[static_cast<size_t>(1 + p.carried + j)]) c.output_dtypes[p.carried + j] = *t;
  return outs;
}

Outs loop(NodeContext& c) {
  const ::onnx::GraphProto& body = c.attr_graph("body");
  if (c.num_inputs() < 2)
    c.fail("it has " + std::to_string(c.num_inputs()) +
           " inputs; a Loop takes M, cond (either may be an empty name) and its loop-carried values");
  LoopParts p{body, c.num_inputs() - 2, 0, c.has_input(0), c.has_input(1), {}, {}, {}, {}, {}, {}};
  for (int k = 0; k < p.carried; ++k)
    if (!c.has_input(2 + k)) c.fail("its loop-carried value " + std::to_string(k) + " is missing");
  if (body.input_size() != p.carried + 2)
    c.fail("its body takes " + std::to_string(body.input_size()) + " inputs; with " + std::to_string(p.carried) +
           " loop-carried values it must take " + std::to_string(p.carried + 2) +
           " (iteration_num, cond, then the carried values)");
  p.scans = body.output_size() - 1 - p.carried;
  if (p.scans < 0)
    c.fail("its body returns " + std::to_string(body.output_size()) + " values; with " + std::to_string(p.carried) +
           " loop-carried values it must return at least " + std::to_string(p.carried + 1) +
           " (cond, the carried values, then any scan outputs)");
  if (c.node.output_size() > p.carried + p.scans)
    c.fail("it has " + std::to_string(c.node.output_size()) + " outputs; its body gives " + std::to_string(p.carried) +
           " carried values and " + std::to_string(p.scans) + " scan outputs");
  if (!p.has_trip && !p.has_cond) c.fail("it has neither a trip count M nor a condition, so it never ends");

  TerminalNames names({&body});
  p.iteration = names("onnx_iteration");
  p.cond = names("onnx_cond");
  p.formals.push_back({p.iteration, ShapeTemplate{}, DType::Int64, std::nullopt});
  p.formals.push_back({p.cond, p.has_cond ? shape_template(c.static_shape(1)) : ShapeTemplate{}, DType::Bool, std::nullopt});
  p.outputs.push_back(names("onnx_cond_next"));
  for (int k = 0; k < p.carried; ++k) {
    const std::string v = "onnx_v" + std::to_string(k);
    p.vars.push_back(names(v));
    p.formals.push_back({p.vars.back(), shape_template(c.static_shape(2 + k)), c.dtype(2 + k), std::nullopt});
    p.outputs.push_back(names(v + "_next"));
    p.finals.push_back(names(v + "_last"));
  }
  for (int j = 0; j < p.scans; ++j) p.outputs.push_back(names("onnx_scan" + std::to_string(j)));
  if (p.scans > 0) return loop_as_scan(c, p, names);
  if (p.carried == 0) return {};  // no outputs: nothing can observe it

  const Subgraph b = c.importer.import_subgraph(body, c.where() + ", body", p.formals, p.outputs);
  // The condition is a loop variable, so it keeps one shape: the body's ([] or [1]).
  Connection first_cond = p.has_cond ? c.in(1) : c.scalar(1, DType::Bool);
  if (const std::optional<Shape>& s = b.output_shapes[0]; s && numel(*s) == 1 && c.static_shape(1) != *s)
    first_cond = first_cond.reshape(*s);
  std::map<std::string, IOKey> links{{p.iteration, IOKey(Tensor::scalar<int64_t>(0))}, {p.cond, IOKey(first_cond)}};
  for (int k = 0; k < p.carried; ++k) links[p.vars[static_cast<size_t>(k)]] = IOKey(c.in(2 + k));
  std::string condition;
  std::optional<int64_t> max_iterations;
  if (p.has_trip) {
    const std::string trip = names("onnx_trip_count");
    condition = p.iteration + " < " + trip;
    if (const std::optional<Tensor> m = c.known(0)) {
      const int64_t n = std::max<int64_t>(0, int_value(c, *m, "trip count M"));
      if (n <= kMaxIterationsToDifferentiate) max_iterations = n;
      links[trip] = IOKey(Tensor::scalar<int64_t>(n));
    } else {
      links[trip] = IOKey(c.in(0));
    }
  }
  if (p.has_cond) condition += (condition.empty() ? "" : " and ") + p.cond;
  InitialState initial{{p.iteration, IOKey(p.iteration)}, {p.cond, IOKey(p.cond)}};
  NameMap loop_vars{{p.iteration, p.iteration + " + 1"}, {p.cond, p.outputs[0]}}, output_vars;
  carry(p.vars, p.outputs, 1, p.finals, initial, loop_vars, output_vars);
  const Model block = ingot::detail::decided_at_run_time(
      While(condition, BlockCall{b.model, {}}, initial, loop_vars, output_vars, max_iterations));
  Outs outs = add_block(c, block, links, p.finals);
  for (int k = 0; k < p.carried; ++k)
    if (const std::optional<DType> t = c.dtype(2 + k)) c.output_dtypes[k] = *t;
  return outs;
}

// ----------------------------------------------------------------------------------- Scan

// One int per scan input or output from attribute `name` (default zeros), checked.
std::vector<int64_t> per_sequence(const NodeContext& c, const std::string& name, int64_t n, bool directions) {
  std::vector<int64_t> v = c.attr_ints(name, std::vector<int64_t>(static_cast<size_t>(n), 0));
  if (static_cast<int64_t>(v.size()) != n)
    c.fail("its " + name + " has " + std::to_string(v.size()) + " entries for " + std::to_string(n) +
           (name.find("output") != std::string::npos ? " scan outputs" : " scan inputs"));
  if (directions)
    for (int64_t d : v)
      if (d != 0 && d != 1) c.fail("its " + name + " holds " + std::to_string(d) + "; a direction is 0 (forward) or 1 (reverse)");
  return v;
}

Outs scan(NodeContext& c) {
  const ::onnx::GraphProto& body = c.attr_graph("body");
  // Opset 8: sequence_lens first, and a batch axis before each sequence's axis.
  const bool batched = c.opset < 9;
  const int first = batched ? 1 : 0;
  const int64_t num_scan = c.attr_int("num_scan_inputs", 0);
  if (num_scan < 1) c.fail("num_scan_inputs must be given and at least 1");
  const int64_t states = c.num_inputs() - first - num_scan;
  if (states < 0)
    c.fail("it has " + std::to_string(c.num_inputs()) + " inputs, fewer than its num_scan_inputs = " +
           std::to_string(num_scan) + (batched ? " plus sequence_lens" : ""));
  for (int i = first; i < c.num_inputs(); ++i)
    if (!c.has_input(i)) c.fail("its input " + std::to_string(i) + " is missing");
  if (body.input_size() != states + num_scan)
    c.fail("its body takes " + std::to_string(body.input_size()) + " inputs; with " + std::to_string(states) +
           " states and " + std::to_string(num_scan) + " scan inputs it must take " + std::to_string(states + num_scan));
  const int64_t scans = body.output_size() - states;
  if (scans < 0)
    c.fail("its body returns " + std::to_string(body.output_size()) + " values, fewer than its " +
           std::to_string(states) + " states");
  if (c.node.output_size() > states + scans)
    c.fail("it has " + std::to_string(c.node.output_size()) + " outputs; its body gives " + std::to_string(states) +
           " states and " + std::to_string(scans) + " scan outputs");
  const std::vector<int64_t> in_dirs = per_sequence(c, batched ? "directions" : "scan_input_directions", num_scan, true);
  const std::vector<int64_t> out_dirs =
      batched ? std::vector<int64_t>(static_cast<size_t>(scans), 0) : per_sequence(c, "scan_output_directions", scans, true);
  const std::vector<int64_t> in_axes =
      batched ? std::vector<int64_t>(static_cast<size_t>(num_scan), 0) : per_sequence(c, "scan_input_axes", num_scan, false);
  const std::vector<int64_t> out_axes =
      batched ? std::vector<int64_t>(static_cast<size_t>(scans), 0) : per_sequence(c, "scan_output_axes", scans, false);
  // One direction for the block: the first input's; the other inputs and outputs flip to it.
  const bool reverse = in_dirs[0] == 1;
  const int skip = batched ? 1 : 0;  // the batch axis, not the body's

  // Each sequence with its scanned axis first (its static shape along), and its static shape.
  std::vector<Connection> sequences;
  std::vector<std::optional<Shape>> seq_shapes;
  for (int64_t j = 0; j < num_scan; ++j) {
    const int i = static_cast<int>(first + states + j);
    Connection x = c.in(i);
    std::optional<Shape> s = c.static_shape(i);
    if (in_axes[static_cast<size_t>(j)] != 0) {
      if (!s)
        c.fail("its scan_input_axes[" + std::to_string(j) + "] = " + std::to_string(in_axes[static_cast<size_t>(j)]) +
               " needs the rank of scan input " + std::to_string(j) + " while importing");
      const int64_t axis = c.axis(in_axes[static_cast<size_t>(j)], static_cast<int64_t>(s->size()));
      if (axis != 0) {
        std::vector<int64_t> perm{axis};
        for (int64_t d = 0; d < static_cast<int64_t>(s->size()); ++d)
          if (d != axis) perm.push_back(d);
        x = x.transpose(perm);
        Shape t;
        for (int64_t d : perm) t.push_back((*s)[static_cast<size_t>(d)]);
        s = t;
      }
    }
    if (s && static_cast<int>(s->size()) < 1 + skip) c.fail("its scan input " + std::to_string(j) + " has no axis to scan");
    sequences.push_back(x);
    seq_shapes.push_back(s);
  }

  TerminalNames names({&body});
  std::vector<std::string> vars, slices, seqs, outputs, results;
  std::vector<FormalInput> formals;
  auto drop = [](const std::optional<Shape>& s, int n) -> std::optional<ShapeTemplate> {
    if (!s) return std::nullopt;
    return ShapeTemplate(s->begin() + n, s->end());
  };
  for (int64_t k = 0; k < states; ++k) {
    vars.push_back(names("onnx_state" + std::to_string(k)));
    formals.push_back({vars.back(), drop(c.static_shape(static_cast<int>(first + k)), skip),
                       c.dtype(static_cast<int>(first + k)), std::nullopt});
    outputs.push_back(names("onnx_state" + std::to_string(k) + "_next"));
    results.push_back(names("onnx_state" + std::to_string(k) + "_last"));
  }
  for (int64_t j = 0; j < num_scan; ++j) {
    slices.push_back(names("onnx_x" + std::to_string(j)));
    seqs.push_back(names("onnx_xs" + std::to_string(j)));
    formals.push_back({slices.back(), drop(seq_shapes[static_cast<size_t>(j)], 1 + skip),
                       c.dtype(static_cast<int>(first + states + j)), std::nullopt});
  }
  ScanOptions o;
  o.reverse = reverse;
  for (int64_t j = 0; j < num_scan; ++j) o.xs.emplace_back(slices[static_cast<size_t>(j)], seqs[static_cast<size_t>(j)]);
  for (int64_t j = 0; j < scans; ++j) outputs.push_back(names("onnx_y" + std::to_string(j)));
  carry(vars, outputs, 0, results, o.initial_state, o.loop_vars, o.output_vars);
  for (int64_t j = 0; j < scans; ++j) {
    results.push_back(names("onnx_ys" + std::to_string(j)));
    o.ys.emplace_back(results.back(), outputs[static_cast<size_t>(states + j)]);
  }
  if (states + scans == 0) return {};  // no outputs: nothing can observe it
  const Subgraph b = c.importer.import_subgraph(body, c.where() + ", body", formals, outputs);
  const Model block = Scan(BlockCall{b.model, {}}, o);

  // The block over `firsts` (states) and `xs` (each scanned along axis 0), scan outputs flipped
  // to their direction.
  auto run = [&](const std::vector<Connection>& firsts, const std::vector<Connection>& xs) {
    std::map<std::string, IOKey> links;
    for (int64_t k = 0; k < states; ++k) links[vars[static_cast<size_t>(k)]] = IOKey(firsts[static_cast<size_t>(k)]);
    for (int64_t j = 0; j < num_scan; ++j) {
      const Connection& x = xs[static_cast<size_t>(j)];
      links[seqs[static_cast<size_t>(j)]] = IOKey((in_dirs[static_cast<size_t>(j)] == 1) != reverse ? flip(x) : x);
    }
    Outs outs = add_block(c, block, links, results);
    for (int64_t j = 0; j < scans; ++j) {
      Connection& y = outs[static_cast<size_t>(states + j)];
      if ((out_dirs[static_cast<size_t>(j)] == 1) != reverse) y = flip(y);
    }
    return outs;
  };

  Outs outs;
  if (!batched) {
    std::vector<Connection> firsts;
    for (int64_t k = 0; k < states; ++k) firsts.push_back(c.in(static_cast<int>(k)));
    outs = run(firsts, sequences);
  } else {
    // Opset 8: one block per batch entry, its results stacked along the batch axis again.
    std::optional<int64_t> batch, length;
    for (const auto& s : seq_shapes)
      if (s) batch = (*s)[0], length = (*s)[1];
    if (!batch || *batch < 1) c.fail("it needs a batch size (axis 0 of its scan inputs) of at least 1 while importing");
    if (c.has_input(0)) {
      const std::optional<Tensor> lens = c.known(0);
      if (!lens)
        c.fail("its sequence_lens ('" + c.node.input(0) + "') is only known at run time; ingot scans whole sequences");
      for (int64_t i = 0; i < lens->numel(); ++i)
        if (static_cast<int64_t>(lens->item(i)) != *length)
          c.fail("its sequence_lens holds " + std::to_string(static_cast<int64_t>(lens->item(i))) +
                 " but the sequences are " + std::to_string(*length) + " long; ingot scans whole sequences only");
    }
    std::vector<Outs> per_entry;
    for (int64_t e = 0; e < *batch; ++e) {
      std::vector<Connection> firsts, xs;
      for (int64_t k = 0; k < states; ++k) firsts.push_back(c.in(static_cast<int>(first + k))[e]);
      for (const Connection& x : sequences) xs.push_back(x[e]);
      per_entry.push_back(run(firsts, xs));
    }
    for (size_t r = 0; r < results.size(); ++r) {
      std::vector<IOKey> stacked;
      for (const Outs& entry : per_entry)
        stacked.push_back(c.op("expand_dims", {entry[r]}, {{"axes", std::vector<int64_t>{0}}}));
      outs.push_back(c.op("concat", stacked, {{"axis", int64_t{0}}}));
    }
  }
  for (int64_t j = 0; j < scans; ++j) {
    const int64_t axis = out_axes[static_cast<size_t>(j)];
    if (axis == 0) continue;
    const std::optional<Shape>& y = b.output_shapes[static_cast<size_t>(states + j)];
    if (!y)
      c.fail("its scan_output_axes[" + std::to_string(j) + "] = " + std::to_string(axis) + " needs the rank of scan output " +
             std::to_string(j) + " while importing");
    const int64_t rank = static_cast<int64_t>(y->size()) + 1, a = c.axis(axis, rank);
    std::vector<int64_t> perm;
    for (int64_t d = 1; d <= a; ++d) perm.push_back(d);
    perm.push_back(0);
    for (int64_t d = a + 1; d < rank; ++d) perm.push_back(d);
    if (a != 0) outs[static_cast<size_t>(states + j)] = outs[static_cast<size_t>(states + j)].transpose(perm);
  }
  for (int64_t k = 0; k < states; ++k)
    if (const std::optional<DType> t = c.dtype(static_cast<int>(first + k))) c.output_dtypes[static_cast<int>(k)] = *t;
  for (int64_t j = 0; j < scans; ++j)
    if (const auto& t = b.output_dtypes[static_cast<size_t>(states + j)]) c.output_dtypes[static_cast<int>(states + j)] = *t;
  return outs;
}

}  // namespace

void register_control_flow_conversions() {
  register_conversion("If", if_);
  register_conversion("Loop", loop);
  register_conversion("Scan", scan);
}

}  // namespace ingot::onnx_import
