// The judges of fuzz/checks.cpp (see judges.h).
#include "judges.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "ir/inline.h"

namespace ingot::fuzz {
namespace {

// Runs `op` (with `attrs`) on the reference over `values`; its output `index`.
// (`subgraphs`: a control-flow op's.)
Tensor reference_op(const std::string& op, const Attrs& attrs, int outputs, int index, const std::vector<Tensor>& values,
                    const std::vector<Graph>& subgraphs) {
  Graph one;
  std::vector<ValueId> operands;
  std::vector<ShapeConstraint> cs;
  for (size_t k = 0; k < values.size(); ++k) {
    operands.push_back(one.add_input("operand" + std::to_string(k)));
    one.value(operands.back()).dtype = values[k].dtype();
    cs.push_back({operands.back(), ShapeTemplate(values[k].shape().begin(), values[k].shape().end()), "", "fuzz operand"});
  }
  const std::vector<ValueId> outs = one.add_node(op, operands, attrs, outputs);
  one.node(one.value(outs[0]).producer).subgraphs = subgraphs;
  one.set_output("result", outs.at(static_cast<size_t>(index)));
  infer_shapes(one, cs);
  infer_types(one);
  return ReferenceBackend().lower(one, {})->run(values).at(0);
}

// Output `output` of `g` recomputed by the reference from the CPU's values: the nodes `nodes`
// (ascending ids, the graph's order) run by the reference, each value they read from outside the
// set taken from the CPU's run (`got`, at `probed`) or, for a leaf, from `inputs`.
Tensor reference_on_cpu_values(const Graph& g, const std::set<NodeId>& nodes, size_t output,
                               const std::map<ValueId, size_t>& probed, const std::vector<Tensor>& got,
                               const std::map<std::string, Tensor>& inputs) {
  Graph tail;
  std::map<ValueId, ValueId> to_tail;
  std::vector<ShapeConstraint> cs;
  std::vector<Tensor> feed;
  auto read = [&](ValueId x) {
    if (to_tail.count(x)) return to_tail.at(x);
    const Value& val = g.value(x);
    if (val.kind == ValueKind::Constant) return to_tail[x] = tail.add_constant(val.name, val.constant);
    const ValueId id = tail.add_input("v" + std::to_string(x));
    const Tensor t = val.producer >= 0 ? got[probed.at(x)] : inputs.at(val.name).astype(val.dtype);
    tail.value(id).dtype = t.dtype();
    cs.push_back({id, ShapeTemplate(t.shape().begin(), t.shape().end()), "", "fuzz judge"});
    feed.push_back(t);
    return to_tail[x] = id;
  };
  for (NodeId p : nodes) {
    const Node& n = g.node(p);
    std::vector<ValueId> operands;
    for (ValueId in : n.inputs) operands.push_back(read(in));
    const std::vector<ValueId> outs = tail.add_node(n.op, operands, n.attrs, static_cast<int>(n.outputs.size()));
    tail.node(tail.value(outs[0]).producer).subgraphs = n.subgraphs;
    for (size_t k = 0; k < outs.size(); ++k) to_tail[n.outputs[k]] = outs[k];
  }
  tail.set_output("result", read(g.outputs()[output].second));
  infer_shapes(tail, cs);
  infer_types(tail);
  return ReferenceBackend().lower(tail, {})->run(feed).at(0);
}

// A new value of `g` with the given static shape and dtype (what inference would give it).
ValueId typed(Graph& g, ValueId v, DType dtype, const std::vector<int64_t>& dims) {
  set_static_type(g.value(v), dtype, dims);
  return v;
}

std::string empty_name(const Graph& g) { return "empty_" + std::to_string(g.values().size()); }

// A scan's stack (an xs, or a stacked ys: the steps first, so rank 1 or more): its dims when
// every one is known, else nullopt.
std::optional<Shape> stack_dims(const Value& v) {
  if (!v.shape_known || v.shape.empty() || !is_static(v.shape)) return std::nullopt;
  return to_shape(v.shape);
}

// Scan node `n` of `g` written out into `out` step by step (`map`: g's values to out's): xs[t]
// sliced off its stack, the body inlined, each step's ys in their rows (row t, so a reverse scan
// fills them last first) and stacked. nullopt unless its shapes are static and it runs 2 to 8
// steps (the control-flow simplification inlines 0 and 1).
std::optional<std::vector<ValueId>> unrolled_scan(Graph& out, const Graph& g, const Node& n,
                                                  const std::vector<ValueId>& map) {
  constexpr int64_t kMaxSteps = 8;
  const size_t c = static_cast<size_t>(n.attrs.get_int("num_carry")), x = static_cast<size_t>(n.attrs.get_int("num_xs"));
  if (x == 0) return std::nullopt;
  for (size_t j = c; j < c + x; ++j)
    if (!stack_dims(g.value(n.inputs[j]))) return std::nullopt;
  for (size_t k = c; k < n.outputs.size(); ++k)
    if (!stack_dims(g.value(n.outputs[k]))) return std::nullopt;
  const int64_t steps = (*stack_dims(g.value(n.inputs[c])))[0];
  if (steps < 2 || steps > kMaxSteps) return std::nullopt;
  const bool reverse = n.attrs.get_int("reverse", 0) != 0;
  std::vector<ValueId> args;
  for (ValueId v : n.inputs) args.push_back(map[static_cast<size_t>(v)]);
  std::vector<std::vector<ValueId>> rows(n.outputs.size() - c, std::vector<ValueId>(static_cast<size_t>(steps)));
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t t = reverse ? steps - 1 - step : step;
    std::vector<ValueId> operands = args;
    for (size_t j = c; j < c + x; ++j) {
      const Value& xs = g.value(n.inputs[j]);
      std::vector<int64_t> dims = *stack_dims(xs);
      dims[0] = 1;
      const ValueId row = typed(out,
                                out.add_op("slice", {args[j]},
                                           {{"starts", std::vector<int64_t>{t}}, {"ends", std::vector<int64_t>{t + 1}},
                                            {"axes", std::vector<int64_t>{0}}, {"steps", std::vector<int64_t>{1}}},
                                           n.scope),
                                xs.dtype, dims);
      operands[j] = reshape_static(out, row, xs.dtype, std::vector<int64_t>(dims.begin() + 1, dims.end()), empty_name(out), n.scope);
    }
    const std::vector<ValueId> results = inline_graph(out, n.subgraphs[0], operands, n.scope);
    for (size_t i = 0; i < c; ++i) args[i] = results[i];
    for (size_t k = c; k < results.size(); ++k) {
      std::vector<int64_t> dims = *stack_dims(g.value(n.outputs[k]));
      dims[0] = 1;
      rows[k - c][static_cast<size_t>(t)] = reshape_static(out, results[k], g.value(n.outputs[k]).dtype, dims, empty_name(out), n.scope);
    }
  }
  std::vector<ValueId> finals(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(c));
  for (size_t k = c; k < n.outputs.size(); ++k) {
    const Value& y = g.value(n.outputs[k]);
    finals.push_back(typed(out, out.add_op("concat", rows[k - c], {{"axis", int64_t{0}}}, n.scope), y.dtype, *stack_dims(y)));
  }
  return finals;
}

// `g` with its scans of 2 to 8 static steps unrolled (unrolled_scan); nullopt when none is.
std::optional<Graph> with_scans_unrolled(const Graph& g) {
  Graph out;
  std::vector<ValueId> map = copy_leaves(out, g);
  int unrolled = 0;
  for (const Node& n : g.nodes()) {
    const std::optional<std::vector<ValueId>> r = n.op == "scan" ? unrolled_scan(out, g, n, map) : std::nullopt;
    if (!r) {
      copy_node(out, g, n, map);
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) map[static_cast<size_t>(n.outputs[k])] = (*r)[k];
    ++unrolled;
  }
  if (unrolled == 0) return std::nullopt;
  for (const auto& [name, v] : g.outputs()) out.set_output(name, map[static_cast<size_t>(v)]);
  return out;
}

// The reference's values of `vs` when `g` runs on `inputs`: the program run once with each of
// them exposed as an extra output (a value already an output is exposed again under its new name).
std::vector<Tensor> reference_values(const Graph& g, const std::vector<ValueId>& vs,
                                     const std::map<std::string, Tensor>& inputs) {
  Graph probe = g;
  for (size_t k = 0; k < vs.size(); ++k) probe.set_output("reference_value_" + std::to_string(k), vs[k]);
  const std::vector<Tensor> ran = run_reference(probe, inputs);
  return std::vector<Tensor>(ran.end() - static_cast<std::ptrdiff_t>(vs.size()), ran.end());
}

// How many iterations while node `n` runs from `operands` (the reference's values): the loop
// replayed on the reference, its cond and body lowered on their own, as the while's own kernel
// runs them; nullopt past kMaxIterations.
std::optional<int64_t> while_trips(const Node& n, std::vector<Tensor> operands) {
  constexpr int64_t kMaxIterations = 8;
  const int64_t max_iterations = n.attrs.get_int("max_iterations", -1);
  const std::unique_ptr<Executable> cond = ReferenceBackend().lower(n.subgraphs[0], {});
  const std::unique_ptr<Executable> body = ReferenceBackend().lower(n.subgraphs[1], {});
  for (int64_t t = 0;; ++t) {
    if (t == max_iterations) return t;
    const std::vector<double> holds = cond->run(operands).at(0).astype(DType::Float64).to_vector<double>();
    if (holds.size() != 1 || holds[0] == 0) return t;
    if (t == kMaxIterations) return std::nullopt;
    std::vector<Tensor> next = body->run(operands);
    for (size_t i = 0; i < n.outputs.size(); ++i) operands[i] = std::move(next[i]);
  }
}

// `g` with each while written out: its body inlined once per iteration the reference runs it for
// `inputs` (up to 8), each iteration's carried values feeding the next, the condition dropped;
// nullopt when no while is. What the CPU computes in a loop of several iterations is then in
// the judges' sight op by op, as a scan's steps are.
std::optional<Graph> with_whiles_unrolled(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::vector<NodeId> whiles;
  std::vector<ValueId> operand_values;
  for (const Node& n : g.nodes()) {
    if (n.op != "while") continue;
    whiles.push_back(n.id);
    operand_values.insert(operand_values.end(), n.inputs.begin(), n.inputs.end());
  }
  if (whiles.empty()) return std::nullopt;
  const std::vector<Tensor> ran = reference_values(g, operand_values, inputs);  // while by while
  size_t at = 0;
  std::map<NodeId, int64_t> trips;
  for (NodeId w : whiles) {
    const Node& n = g.node(w);
    const std::vector<Tensor> operands(ran.begin() + static_cast<std::ptrdiff_t>(at),
                                       ran.begin() + static_cast<std::ptrdiff_t>(at + n.inputs.size()));
    at += n.inputs.size();
    try {
      if (const std::optional<int64_t> t = while_trips(n, operands)) trips[w] = *t;
    } catch (const Error&) {  // a body the reference does not lower on its own stays a loop
    }
  }
  if (trips.empty()) return std::nullopt;
  Graph out;
  std::vector<ValueId> map = copy_leaves(out, g);
  for (const Node& n : g.nodes()) {
    const auto it = trips.find(n.id);
    if (it == trips.end()) {
      copy_node(out, g, n, map);
      continue;
    }
    std::vector<ValueId> state;
    for (ValueId v : n.inputs) state.push_back(map[static_cast<size_t>(v)]);
    for (int64_t t = 0; t < it->second; ++t) {
      const std::vector<ValueId> next = inline_graph(out, n.subgraphs[1], state, n.scope);
      std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(n.outputs.size()), state.begin());
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) map[static_cast<size_t>(n.outputs[k])] = state[k];
  }
  for (const auto& [name, v] : g.outputs()) out.set_output(name, map[static_cast<size_t>(v)]);
  return out;
}

}  // namespace

// Whether a non-float output where the CPU backend and the reference disagree is explained by
// float rounding. Where float data turns into non-float data (a comparison, argmax, a cast to an
// integer type: the boundary ops), float operands that the two computed a few units in the last
// place apart can flip a result: tanh(x) != x flips where the CPU's tanh, within its 1.33 ulp,
// lands on x (found by the fuzzer, seed 50058, through a scatter_add of the comparison). The
// program is run again with every boundary op's operands and result as extra outputs; it is
// explained when each boundary op's operands agree within float tolerance, the op run by the
// reference on the CPU's operands gives the CPU's result exactly, and the non-float ops after the
// boundary, run by the reference on the CPU's boundary results, give the CPU's output exactly.
bool explained_by_float_rounding(const Graph& g, size_t output, const Variation& v,
                                 const std::map<std::string, Tensor>& inputs, const CpuBackend::CpuOptions& cpu,
                                 double operand_tol) {
  // The output's non-float cone: the nodes after the boundary, and the boundary nodes.
  std::set<NodeId> after, boundary;
  std::vector<ValueId> stack = {g.outputs()[output].second};
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    const NodeId p = g.value(v).producer;
    if (p < 0 || after.count(p) || boundary.count(p)) continue;
    const Node& n = g.node(p);
    bool reads_float = false;
    for (ValueId in : n.inputs) reads_float = reads_float || is_floating(g.value(in).dtype);
    if (reads_float) {
      boundary.insert(p);
      continue;
    }
    after.insert(p);
    for (ValueId in : n.inputs) stack.push_back(in);
  }
  if (boundary.empty()) return false;
  // The probe: the program with each boundary op's operands and results as outputs.
  Graph probe = g;
  std::map<ValueId, size_t> probed;  // value -> its output index in the probe
  for (NodeId b : boundary) {
    std::vector<ValueId> vs = g.node(b).inputs;
    vs.insert(vs.end(), g.node(b).outputs.begin(), g.node(b).outputs.end());
    for (ValueId x : vs)
      if (!probed.count(x)) {
        probed[x] = probe.outputs().size();
        probe.set_output("probe_" + std::to_string(x), x);
      }
  }
  const std::vector<Tensor> got = run_on_cpu(probe, v, inputs, cpu);
  const std::vector<Tensor> want = run_reference(probe, inputs);
  for (NodeId b : boundary) {
    const Node& n = g.node(b);
    std::vector<Tensor> operands;
    for (ValueId in : n.inputs) {
      const Tensor &a = got[probed.at(in)], &r = want[probed.at(in)];
      if (a.dtype() != r.dtype() || a.shape() != r.shape()) return false;
      if (is_floating(r.dtype()) ? relative_error(a.astype(DType::Float64), r.astype(DType::Float64)) > operand_tol
                                 : !equal(a, r))
        return false;
      operands.push_back(a);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Tensor redone = reference_op(n.op, n.attrs, static_cast<int>(n.outputs.size()), static_cast<int>(k), operands,
                                          n.subgraphs);
      const Tensor& cpu_result = got[probed.at(n.outputs[k])];
      if (redone.dtype() != cpu_result.dtype() || redone.shape() != cpu_result.shape() || !equal(redone, cpu_result))
        return false;
    }
  }
  // The non-float ops after the boundary, on the CPU's boundary results.
  const Tensor redone = reference_on_cpu_values(g, after, output, probed, got, inputs);
  const Tensor& cpu_output = got[output];
  return redone.dtype() == cpu_output.dtype() && redone.shape() == cpu_output.shape() && equal(redone, cpu_output);
}

// Whether an output off by more than the tolerance (a float one; or a non-float one, exactly equal
// after the amplifier) is explained by the conditioning of an op on its path: pow(a, b) with a near 0 turns an `a` a few float32 units off (batch_norm's
// x - mean, which the reference rounds once from double) into a result 3.3e-4 off where the
// reference is 3.7e-5 off (found by the fuzzer, seed 70025: a = 1.04e-4, b = -1.25); floor,
// fmod or a division by a value near 0 after an op that sums in float32 what the reference sums
// in double (the attention backward's dmask, whose terms cancel to 0) does it one or two ops
// before the output (seeds 140014, 140037, 150027). The program runs again with every value of
// the output's cone as an extra output, on both backends; the amplifying op is the first (in
// order) whose operands agree with the reference within float tolerance but whose result does
// not. It is explained when the output is what the first run gave (exposing values changed
// nothing), that op run in float64 on the CPU's own operands gives the CPU's result within `tol`
// (the op itself is right, its input was rounded as float32 allows), and the ops after it, run
// by the reference on the CPU's values, give the CPU's output within `tol`. A wrong kernel fails
// the second test if it is the amplifier, the first comparison if it comes before, the last if
// it comes after. Ops of the cone past the amplifier that do not read its results must agree with
// the reference too; the tail reads the CPU's values of them.
bool explained_by_conditioning(const Graph& g, size_t output, const Variation& v, const std::map<std::string, Tensor>& inputs,
                               const CpuBackend::CpuOptions& cpu, const Tensor& first_run, double tol, double operand_tol) {
  std::set<NodeId> cone;
  std::vector<ValueId> stack = {g.outputs()[output].second};
  while (!stack.empty()) {
    const NodeId p = g.value(stack.back()).producer;
    stack.pop_back();
    if (p < 0 || !cone.insert(p).second) continue;
    for (ValueId in : g.node(p).inputs) stack.push_back(in);
  }
  if (cone.empty()) return false;
  Graph probe = g;
  std::map<ValueId, size_t> probed;  // value -> its output index in the probe, looked up by name
  for (NodeId p : cone)
    for (ValueId x : g.node(p).outputs) probe.set_output("probe_" + std::to_string(x), x);
  for (const NodeId p : cone)
    for (ValueId x : g.node(p).outputs) {
      const auto& outs = probe.outputs();
      const std::string name = "probe_" + std::to_string(x);
      probed[x] = static_cast<size_t>(
          std::find_if(outs.begin(), outs.end(), [&](const auto& o) { return o.first == name; }) - outs.begin());
      if (probed[x] == outs.size()) probed[x] = static_cast<size_t>(  // an output already: its first name
          std::find_if(outs.begin(), outs.end(), [&](const auto& o) { return o.second == x; }) - outs.begin());
    }
  const std::vector<Tensor> got = run_on_cpu(probe, v, inputs, cpu);
  const std::vector<Tensor> want = run_reference(probe, inputs);
  if (got[output].dtype() != first_run.dtype() || got[output].shape() != first_run.shape() || !equal(got[output], first_run))
    return false;
  auto agrees = [&](ValueId x) {
    const Tensor &a = got[probed.at(x)], &r = want[probed.at(x)];
    if (a.dtype() != r.dtype() || a.shape() != r.shape()) return false;
    return is_floating(r.dtype()) ? relative_error(a.astype(DType::Float64), r.astype(DType::Float64)) <= operand_tol
                                  : equal(a, r);
  };
  NodeId amplifier = -1;
  for (NodeId p : cone) {  // ascending ids: the graph's order
    const Node& n = g.node(p);
    bool operands = true, results = true;
    for (ValueId in : n.inputs) operands = operands && (g.value(in).producer < 0 || agrees(in));
    for (ValueId x : n.outputs) results = results && agrees(x);
    if (!operands) return false;  // a departure no earlier op explains
    if (!results) {
      amplifier = p;
      break;
    }
  }
  if (amplifier < 0) return false;
  // The amplifier in float64 on the CPU's operands.
  const Node& a = g.node(amplifier);
  std::vector<Tensor> operands;
  for (ValueId in : a.inputs) {
    const Value& val = g.value(in);
    const Tensor t = val.producer >= 0 ? got[probed.at(in)]
                     : val.kind == ValueKind::Constant ? val.constant
                                                       : inputs.at(val.name).astype(val.dtype);
    operands.push_back(is_floating(t.dtype()) ? t.astype(DType::Float64) : t);
  }
  for (size_t k = 0; k < a.outputs.size(); ++k) {
    const Tensor exact = reference_op(a.op, a.attrs, static_cast<int>(a.outputs.size()), static_cast<int>(k), operands, a.subgraphs);
    const Tensor& mine = got[probed.at(a.outputs[k])];
    if (exact.shape() != mine.shape()) return false;
    // Rounded to the op's type first, as the reference rounds its double result: a float32 power
    // past float32's range is inf there too (seed 351039: pow(x, y / mean) near 3.4e38 was inf on
    // the CPU and finite in an unrounded double, read as a mismatch).
    if (is_floating(mine.dtype()) ? relative_error(mine.astype(DType::Float64),
                                                   exact.astype(mine.dtype()).astype(DType::Float64)) > tol
                                  : !equal(mine, exact.astype(mine.dtype())))
      return false;
  }
  // The ops after it are those that read its results, directly or through each other. The rest
  // of the cone past it in the graph's order (a forward op that gradient checkpointing recomputes
  // just before the backward op that reads it) must agree with the reference, and the tail reads
  // the CPU's values of them: recomputed by the reference there, they mixed its rounding of the
  // recomputed attention output into the CPU's rounding of what the division had made of it, and
  // an output 1/y^2 amplified was off by that mismatch, not by the CPU (seed 410014).
  std::set<NodeId> after = {amplifier};
  for (NodeId p : cone) {
    if (p <= amplifier) continue;
    const Node& n = g.node(p);
    bool reads_after = false;
    for (ValueId in : n.inputs) reads_after = reads_after || after.count(g.value(in).producer) > 0;
    if (reads_after) {
      after.insert(p);
      continue;
    }
    for (ValueId x : n.outputs)
      if (!agrees(x)) return false;
  }
  // The ops after it, by the reference on the CPU's values (the amplifier's results among them).
  after.erase(amplifier);
  const Tensor redone = reference_on_cpu_values(g, after, output, probed, got, inputs);
  if (redone.dtype() != first_run.dtype() || redone.shape() != first_run.shape()) return false;
  return is_floating(first_run.dtype())
             ? relative_error(first_run.astype(DType::Float64), redone.astype(DType::Float64)) <= tol
             : equal(redone, first_run);
}

std::optional<Graph> with_control_flow_inlined(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::vector<NodeId> ifs;
  std::vector<ValueId> conditions;
  size_t loops = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == "if") {
      ifs.push_back(n.id);
      conditions.push_back(n.inputs[0]);
    }
    loops += n.op == "scan" || n.op == "while";
  }
  if (ifs.empty() && loops == 0) return std::nullopt;
  Graph taken = g;
  if (!ifs.empty()) {
    const std::vector<Tensor> ran = reference_values(g, conditions, inputs);
    for (size_t k = 0; k < ifs.size(); ++k) {
      const Tensor& condition = ran[k];
      const ValueId c = taken.add_constant("taken_" + std::to_string(ifs[k]), condition);
      const Value& was = g.value(g.node(ifs[k]).inputs[0]);
      taken.value(c).dtype = was.dtype;
      taken.value(c).shape = was.shape;
      taken.value(c).shape_known = was.shape_known;
      taken.node(ifs[k]).inputs[0] = c;
    }
  }
  // Each `if` now has a constant condition: its branch is inlined; so is a scan of one step or a
  // while of one known iteration (what the compiler itself inlines; seed 54057: rsqrt of the
  // attention backward's dq near 0, in a one-step scan's body).
  const PassReport report = simplify_control_flow(taken);
  // Scans of up to 8 steps, written out step by step, then whiles of up to 8 iterations.
  std::optional<Graph> unrolled = with_scans_unrolled(taken);
  if (std::optional<Graph> whiles = with_whiles_unrolled(unrolled ? *unrolled : taken, inputs)) return whiles;
  if (unrolled) return unrolled;
  if (ifs.empty() && report.changes == 0) return std::nullopt;
  return taken;
}

}  // namespace ingot::fuzz
