// The control-flow ops' gradient rules (the ops themselves: control_flow.cpp). Each builds its
// backward computation out of the same ops: an `if` over the branches' backward graphs, a reverse
// `scan` over the body's backward graph, and a `while` with max_iterations as the scan of
// max_iterations steps that computes the same loop, differentiated by the scan's rule.
#include <string>
#include <utility>
#include <vector>

#include "compiler/autodiff.h"
#include "compiler/shape_inference.h"
#include "ingot/error.h"
#include "ir/inline.h"
#include "ops/control_flow_vjp.h"

namespace ingot::ops {
namespace {

// `sub` grown by its backward graph: inputs (sub's inputs..., a cotangent per `seeded` output...),
// outputs the gradients of its inputs `wrt` (zeros where no path leads).
Graph backward_graph(const Graph& sub, const std::vector<size_t>& seeded, const std::vector<size_t>& wrt) {
  Graph g = sub;
  const std::vector<ValueId> params = g.leaves_of(ValueKind::Input);
  std::vector<std::pair<ValueId, ValueId>> seeds;
  for (size_t k : seeded) {
    const ValueId out = g.outputs()[k].second;
    const ValueId cot = g.add_input("d_" + g.outputs()[k].first);
    copy_value_info(g.value(cot), g.value(out));
    g.value(cot).name = "d_" + g.outputs()[k].first;
    seeds.emplace_back(out, cot);
  }
  std::vector<ValueId> w;
  for (size_t i : wrt) w.push_back(params[i]);
  const std::vector<ValueId> grads = append_backward(g, seeds, w);
  g.outputs().clear();
  for (size_t j = 0; j < grads.size(); ++j) g.set_output("d" + std::to_string(wrt[j]), grads[j]);
  return g;
}

bool differentiable(VjpContext& c, int input) { return c.needs_grad(input) && is_floating(c.dtype(c.in(input))); }

}  // namespace

// if: the same if over the branches' backward graphs, fed the operands and the cotangents.
// (Both rules copy the node: adding backward nodes may move the graph's node list.)
void if_vjp(VjpContext& c) {
  const Node n = c.node();
  std::vector<size_t> seeded, wrt;
  std::vector<ValueId> inputs(n.inputs.begin(), n.inputs.end());
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (c.grad_out(static_cast<int>(k)) >= 0 && is_floating(c.dtype(c.out(static_cast<int>(k))))) {
      seeded.push_back(k);
      inputs.push_back(c.grad_out(static_cast<int>(k)));
    }
  for (int i = 1; i < c.num_inputs(); ++i)
    if (differentiable(c, i)) wrt.push_back(static_cast<size_t>(i - 1));
  if (seeded.empty() || wrt.empty()) return;
  const std::vector<ValueId> grads =
      c.op_with_subgraphs("if", inputs, {}, {backward_graph(n.subgraphs[0], seeded, wrt),
                                             backward_graph(n.subgraphs[1], seeded, wrt)},
                          static_cast<int>(wrt.size()));
  for (size_t j = 0; j < wrt.size(); ++j) c.set_grad(static_cast<int>(wrt[j]) + 1, grads[j]);
}

// scan: a second forward scan stacks the carry entering each step; a scan the other way round
// then runs each step's backward graph, carrying the carry's cotangent and the invariants'
// accumulated gradients, and stacking the gradients of the xs. Only the carries are saved (a
// checkpoint per step): each backward step recomputes the body's intermediates from its carry.
void scan_vjp(VjpContext& c) {
  const Node n = c.node();
  const Graph& body = n.subgraphs[0];
  const size_t nc = static_cast<size_t>(num_carry(n)), nx = static_cast<size_t>(num_xs(n));
  const size_t ni = n.inputs.size() - nc - nx, ny = n.outputs.size() - nc;
  const int64_t reverse = n.attrs.get_int("reverse", 0);
  const std::vector<ValueId> params = body.leaves_of(ValueKind::Input);
  std::vector<size_t> wrt_inv, wrt_xs;
  for (size_t j = 0; j < ni; ++j)
    if (differentiable(c, static_cast<int>(nc + nx + j))) wrt_inv.push_back(j);
  for (size_t j = 0; j < nx; ++j)
    if (differentiable(c, static_cast<int>(nc + j))) wrt_xs.push_back(j);
  bool any_carry = false;
  for (size_t i = 0; i < nc; ++i) any_carry = any_carry || differentiable(c, static_cast<int>(i));
  if (!any_carry && wrt_inv.empty() && wrt_xs.empty()) return;

  // 1. The carries entering each step, stacked: body's next carry, and its carry input as a y.
  std::vector<ValueId> carries_in;
  if (nc > 0) {
    Graph stacker = body;
    std::vector<std::pair<std::string, ValueId>> outs(stacker.outputs().begin(), stacker.outputs().begin() + static_cast<std::ptrdiff_t>(nc));
    for (size_t i = 0; i < nc; ++i) outs.emplace_back("carry_in" + std::to_string(i), params[i]);
    stacker.outputs() = outs;
    const std::vector<ValueId> r = c.op_with_subgraphs(
        "scan", std::vector<ValueId>(n.inputs.begin(), n.inputs.end()),
        {{"num_carry", static_cast<int64_t>(nc)}, {"num_xs", static_cast<int64_t>(nx)}, {"reverse", reverse}},
        {stacker}, static_cast<int>(2 * nc));
    carries_in.assign(r.begin() + static_cast<std::ptrdiff_t>(nc), r.end());
  }

  // 2. The backward body: (dc..., dacc..., c_t..., x_t..., dy_t..., inv...) ->
  //    (dc_prev..., dacc + dinv_t..., dx_t...).
  Graph back;
  auto input_like = [&](const std::string& name, const Value& like) {
    const ValueId v = back.add_input(name);
    copy_value_info(back.value(v), like);
    back.value(v).name = name;
    return v;
  };
  std::vector<ValueId> dc, dacc, args, dy;
  for (size_t i = 0; i < nc; ++i) dc.push_back(input_like("dc" + std::to_string(i), body.value(params[i])));
  for (size_t j : wrt_inv) dacc.push_back(input_like("dacc" + std::to_string(j), body.value(params[nc + nx + j])));
  for (size_t i = 0; i < nc + nx; ++i) args.push_back(input_like("step_in" + std::to_string(i), body.value(params[i])));
  for (size_t k = 0; k < ny; ++k) dy.push_back(input_like("dy" + std::to_string(k), body.value(body.outputs()[nc + k].second)));
  for (size_t j = 0; j < ni; ++j) args.push_back(input_like("inv" + std::to_string(j), body.value(params[nc + nx + j])));
  const std::vector<ValueId> outs = inline_graph(back, body, args, "scan.backward");
  std::vector<std::pair<ValueId, ValueId>> seeds;
  for (size_t i = 0; i < nc; ++i)
    if (is_floating(back.value(outs[i]).dtype)) seeds.emplace_back(outs[i], dc[i]);
  for (size_t k = 0; k < ny; ++k)
    if (is_floating(back.value(outs[nc + k]).dtype)) seeds.emplace_back(outs[nc + k], dy[k]);
  std::vector<ValueId> w;
  std::vector<size_t> float_carries;
  for (size_t i = 0; i < nc; ++i)
    if (is_floating(back.value(args[i]).dtype)) {
      float_carries.push_back(i);
      w.push_back(args[i]);
    }
  for (size_t j : wrt_xs) w.push_back(args[nc + j]);
  for (size_t j : wrt_inv) w.push_back(args[nc + nx + j]);
  const std::vector<ValueId> grads = append_backward(back, seeds, w);
  std::vector<ValueId> results = dc;  // a carry without a gradient (an integer counter) passes its zeros on
  for (size_t f = 0; f < float_carries.size(); ++f) results[float_carries[f]] = grads[f];
  for (size_t j = 0; j < wrt_inv.size(); ++j) {
    const ValueId sum = back.add_op("add", {dacc[j], grads[float_carries.size() + wrt_xs.size() + j]}, {}, "scan.backward");
    infer_node(back, back.value(sum).producer);
    results.push_back(sum);
  }
  for (size_t j = 0; j < wrt_xs.size(); ++j) results.push_back(grads[float_carries.size() + j]);
  for (size_t r = 0; r < results.size(); ++r) back.set_output("g" + std::to_string(r), results[r]);

  // 3. The reverse scan over it.
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < nc; ++i) {
    const ValueId g = c.grad_out(static_cast<int>(i));
    inputs.push_back(g >= 0 ? g : c.zeros_like(c.out(static_cast<int>(i))));
  }
  for (size_t j : wrt_inv) inputs.push_back(c.zeros_like(c.in(static_cast<int>(nc + nx + j))));
  inputs.insert(inputs.end(), carries_in.begin(), carries_in.end());
  for (size_t j = 0; j < nx; ++j) inputs.push_back(c.in(static_cast<int>(nc + j)));
  for (size_t k = 0; k < ny; ++k) {
    const ValueId g = c.grad_out(static_cast<int>(nc + k));
    inputs.push_back(g >= 0 ? g : c.zeros_like(c.out(static_cast<int>(nc + k))));
  }
  for (size_t j = 0; j < ni; ++j) inputs.push_back(c.in(static_cast<int>(nc + nx + j)));
  const std::vector<ValueId> r = c.op_with_subgraphs(
      "scan", inputs,
      {{"num_carry", static_cast<int64_t>(nc + wrt_inv.size())},
       {"num_xs", static_cast<int64_t>(nc + nx + ny)},
       {"reverse", static_cast<int64_t>(reverse == 0)}},
      {back}, static_cast<int>(results.size()));
  for (size_t i = 0; i < nc; ++i) c.set_grad(static_cast<int>(i), r[i]);
  for (size_t j = 0; j < wrt_inv.size(); ++j) c.set_grad(static_cast<int>(nc + nx + wrt_inv[j]), r[nc + j]);
  for (size_t j = 0; j < wrt_xs.size(); ++j) c.set_grad(static_cast<int>(nc + wrt_xs[j]), r[nc + wrt_inv.size() + j]);
}

// --- while: its gradient is the gradient of the scan that computes the same loop ---------------
//
// A while with max_iterations runs at most that many iterations, so the scan of max_iterations
// steps over (running, carried...) computes the same loop: each step runs the body where the
// loop still runs and its condition holds, and otherwise passes the carried values on unchanged
// (an `if`). Its final carry is the while's result, and scan_vjp differentiates it: it stacks the
// carried values entering each step and runs the steps' backward graphs in reverse, where the
// steps after the loop stopped are the identity. The forward pass keeps the while itself.

namespace {

// One step of the loop as a scan body: (running, carried..., tick, invariants...) ->
// (running and cond, the body's or the unchanged carried values...). `tick` is the scanned
// operand, one per possible iteration; the body does not read it.
Graph while_step(const Node& n) {
  const Graph& cond = n.subgraphs[0];
  const Graph& body = n.subgraphs[1];
  const std::vector<ValueId> params = body.leaves_of(ValueKind::Input);
  const size_t num_carried = n.outputs.size();
  Graph step;
  auto input_like = [&](Graph& g, const Value& like) {
    const ValueId v = g.add_input(like.name);
    copy_value_info(g.value(v), like);
    return v;
  };
  auto bool_scalar_input = [&](const std::string& name) {
    const ValueId v = step.add_input(name);
    step.value(v).dtype = DType::Bool;
    step.value(v).shape_known = true;
    return v;
  };
  const ValueId running = bool_scalar_input("running");
  std::vector<ValueId> operands;  // the while's: carried..., invariants...
  for (size_t i = 0; i < num_carried; ++i) operands.push_back(input_like(step, body.value(params[i])));
  bool_scalar_input("tick");
  for (size_t i = num_carried; i < params.size(); ++i) operands.push_back(input_like(step, body.value(params[i])));

  ValueId holds = inline_graph(step, cond, operands, "while.step")[0];
  if (!step.value(holds).shape.empty()) {  // cond may return its one element as [1]; the flag is a scalar
    holds = step.add_op("reshape", {holds}, {{"shape", std::vector<int64_t>{}}}, "while.step");
    infer_node(step, step.value(holds).producer);
  }
  const ValueId go = step.add_op("where", {running, holds, running}, {}, "while.step");
  infer_node(step, step.value(go).producer);

  // Where the loop has stopped, the carried values pass through.
  Graph pass;
  std::vector<ValueId> pass_in;
  for (ValueId p : params) pass_in.push_back(input_like(pass, body.value(p)));
  for (size_t i = 0; i < num_carried; ++i) pass.set_output(body.outputs()[i].first, pass_in[i]);

  std::vector<ValueId> if_inputs = {go};
  if_inputs.insert(if_inputs.end(), operands.begin(), operands.end());
  const std::vector<ValueId> next =
      step.add_node("if", if_inputs, {}, static_cast<int>(num_carried), "while.step");
  step.node(step.value(next[0]).producer).subgraphs = {body, pass};
  infer_node(step, step.value(next[0]).producer);

  step.set_output("running", go);
  for (size_t i = 0; i < num_carried; ++i) step.set_output(body.outputs()[i].first, next[i]);
  return step;
}

// The while's gradient context seen as the scan's: scan_vjp runs on it unchanged. The scan's
// operands are (running, carried..., ticks, invariants...) and its results (running, carried...);
// the flag and the ticks have no counterpart in the while and take no gradient, and the carried
// results are the while's own results, so their cotangents are the while's.
class WhileAsScan final : public VjpContext {
 public:
  WhileAsScan(VjpContext& loop, Node scan, size_t num_carried)
      : loop_(loop), scan_(std::move(scan)), num_carried_(static_cast<int>(num_carried)) {}

  const Node& node() const override { return scan_; }
  const SymShape& shape(ValueId v) const override { return loop_.shape(v); }
  DType dtype(ValueId v) const override { return loop_.dtype(v); }
  ValueId grad_out(int i) const override { return i == 0 ? -1 : loop_.grad_out(i - 1); }
  bool needs_grad(int i) const override {
    const int k = while_operand(i);
    return k >= 0 && loop_.needs_grad(k);
  }
  std::vector<ValueId> op_n(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                            int num_outputs) override {
    return loop_.op_n(op, std::move(inputs), std::move(attrs), num_outputs);
  }
  std::vector<ValueId> op_with_subgraphs(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                                         std::vector<Graph> subgraphs, int num_outputs) override {
    return loop_.op_with_subgraphs(op, std::move(inputs), std::move(attrs), std::move(subgraphs), num_outputs);
  }
  ValueId scalar(double value, DType dtype) override { return loop_.scalar(value, dtype); }
  void set_grad(int i, ValueId grad) override {
    if (const int k = while_operand(i); k >= 0) loop_.set_grad(k, grad);
  }

 private:
  // The while's operand at the scan's operand i, or -1 for the flag and the ticks.
  int while_operand(int i) const {
    if (i == 0 || i == num_carried_ + 1) return -1;
    return i <= num_carried_ ? i - 1 : i - 2;
  }

  VjpContext& loop_;
  Node scan_;
  int num_carried_;
};

}  // namespace

void while_vjp(VjpContext& c) {
  const Node n = c.node();
  INGOT_CHECK(n.attrs.has("max_iterations"), "Cannot differentiate through while",
              n.scope.empty() ? "" : " in '" + n.scope + "'",
              ": its trip count is only known at run time, and its gradient saves each iteration up to a "
              "bound the loop does not give; set max_iterations: while_loop(cond, body, init, max_iterations) in "
              "C++, ml.while_loop(cond_fun, body_fun, init_val, max_iterations=...) in Python");
  const int64_t max_iterations = n.attrs.get_int("max_iterations");
  const size_t num_carried = n.outputs.size();
  if (max_iterations == 0) {  // the loop never runs: its results are its operands
    for (size_t i = 0; i < num_carried; ++i)
      if (const ValueId g = c.grad_out(static_cast<int>(i)); g >= 0 && differentiable(c, static_cast<int>(i)))
        c.set_grad(static_cast<int>(i), g);
    return;
  }

  // The flag starts true; the ticks only give the scan its length.
  const ValueId running = c.scalar(1, DType::Bool);
  const ValueId ticks = c.op("broadcast_to", {running}, {{"shape", std::vector<int64_t>{max_iterations}}});
  Node scan;
  scan.id = n.id;
  scan.op = "scan";
  scan.scope = n.scope;
  scan.inputs = {running};
  scan.inputs.insert(scan.inputs.end(), n.inputs.begin(), n.inputs.begin() + static_cast<std::ptrdiff_t>(num_carried));
  scan.inputs.push_back(ticks);
  scan.inputs.insert(scan.inputs.end(), n.inputs.begin() + static_cast<std::ptrdiff_t>(num_carried), n.inputs.end());
  // The scan's final flag is never differentiated: `running` stands in for it (a bool scalar).
  scan.outputs = {running};
  scan.outputs.insert(scan.outputs.end(), n.outputs.begin(), n.outputs.end());
  scan.attrs = {{"num_carry", static_cast<int64_t>(num_carried + 1)}, {"num_xs", int64_t{1}}, {"reverse", int64_t{0}}};
  scan.subgraphs = {while_step(n)};
  WhileAsScan as_scan(c, std::move(scan), num_carried);
  scan_vjp(as_scan);
}

}  // namespace ingot::ops
