// ONNX export of control flow: ingot's if, while and scan nodes as ONNX's If, Loop and Scan,
// their subgraphs written by the same walk as the main graph (Exporter::write_subgraph). An
// ingot subgraph takes everything it reads as operands; ONNX's subgraphs read the enclosing
// graph's values by name instead, so an operand that is not a loop variable or a scanned slice
// (an if's operands, a loop's invariants) is bound to the enclosing value's ONNX name.
//
//   if(cond, ops...)          If(cond as bool): then_branch / else_branch, no inputs
//   while(carried, inv)       Loop(M = max_iterations or none, the condition tested on the first
//                             values, carried...): the body runs ingot's body, then the
//                             condition on its results (cond_out)
//   scan(carry, xs, inv)      Scan(carry..., xs...) {num_scan_inputs; every direction reverse
//                             when the scan is}: ingot's reverse scan stacks each step's result
//                             where its slice came from, which is ONNX's "prepend"
#include "frontends/onnx/exporter.h"
#include "ingot/error.h"
#include "ops/control_flow_vjp.h"

namespace ingot::onnx_export {
namespace {

// A graph input of `into` named `name`, typed as `v`.
std::string add_input(::onnx::GraphProto& into, const std::string& name, const Value& v) {
  auto* vi = into.add_input();
  vi->set_name(name);
  set_type(*vi, v);
  return name;
}

// `vi` named `name`, a scalar of `t` (a Loop body's iteration number and conditions).
std::string scalar(::onnx::ValueInfoProto& vi, const std::string& name, DType t) {
  vi.set_name(name);
  vi.mutable_type()->mutable_tensor_type()->set_elem_type(onnx_type(t));
  vi.mutable_type()->mutable_tensor_type()->mutable_shape();  // rank 0
  return name;
}

// `value` (of `sub`'s output 0, a one-element bool) as the bool scalar ONNX's Loop condition is.
std::string scalar_condition(EmitContext& c, const Graph& sub, const std::string& value, ::onnx::GraphProto& into) {
  const Value& v = sub.value(sub.outputs()[0].second);
  std::string out = value;
  if (v.dtype != DType::Bool) {
    const std::string cast = c.ex.fresh("cond_bool");
    auto* n = into.add_node();
    n->set_op_type("Cast");
    n->set_name(c.ex.fresh("n_cast"));
    n->add_input(out);
    n->add_output(cast);
    set_attr(*n, "to", int64_t{onnx_type(DType::Bool)});
    out = cast;
  }
  if (v.shape_known && v.shape.empty()) return out;
  const std::string shape = c.ex.fresh("scalar_shape"), scalar = c.ex.fresh("cond_scalar");
  *into.add_initializer() = tensor_proto(shape, Tensor(DType::Int64, {0}));
  auto* n = into.add_node();
  n->set_op_type("Reshape");
  n->set_name(c.ex.fresh("n_reshape"));
  n->add_input(out);
  n->add_input(shape);
  n->add_output(scalar);
  return scalar;
}

// A branch or body of its own: `sub` with formals `formals`, its outputs declared.
::onnx::GraphProto subgraph(EmitContext& c, const Graph& sub, const std::vector<std::string>& formals,
                            const std::string& name) {
  ::onnx::GraphProto g;
  g.set_name(c.ex.fresh(name));
  c.ex.declare_outputs(sub, c.ex.write_subgraph(sub, formals, g), g);
  return g;
}

void emit_if(EmitContext& c) {
  std::vector<std::string> operands;
  for (int i = 1; i < c.num_inputs(); ++i) operands.push_back(c.in(i));
  const ::onnx::GraphProto then_branch = subgraph(c, c.node.subgraphs[0], operands, "then_branch");
  const ::onnx::GraphProto else_branch = subgraph(c, c.node.subgraphs[1], operands, "else_branch");
  std::vector<std::string> outs;
  for (size_t k = 0; k < c.node.outputs.size(); ++k) outs.push_back(c.out(static_cast<int>(k)));
  c.add("If", {c.in_as(0, DType::Bool)}, outs, [&](::onnx::NodeProto& n) {
    set_attr(n, "then_branch", then_branch);
    set_attr(n, "else_branch", else_branch);
  });
}

void emit_while(EmitContext& c) {
  const Graph& cond = c.node.subgraphs[0];
  const Graph& body = c.node.subgraphs[1];
  const size_t carried = c.node.outputs.size(), n = c.node.inputs.size();
  std::vector<std::string> operands;
  for (size_t i = 0; i < n; ++i) operands.push_back(c.in(static_cast<int>(i)));
  // ONNX tests the condition before the first iteration on the Loop's cond input: the condition
  // graph on the first values, written into this graph.
  const std::string first = scalar_condition(c, cond, c.ex.write_subgraph(cond, operands, c.ex.graph())[0], c.ex.graph());

  ::onnx::GraphProto loop_body;
  loop_body.set_name(c.ex.fresh("loop_body"));
  scalar(*loop_body.add_input(), c.ex.fresh("iteration"), DType::Int64);
  scalar(*loop_body.add_input(), c.ex.fresh("cond_in"), DType::Bool);
  const std::vector<ValueId> formals = body.leaves_of(ValueKind::Input);
  std::vector<std::string> inside = operands;  // the invariants keep their enclosing names
  for (size_t k = 0; k < carried; ++k)
    inside[k] = add_input(loop_body, c.ex.fresh("carried_in"), body.value(formals[k]));
  std::vector<std::string> next = c.ex.write_subgraph(body, inside, loop_body);
  for (size_t k = 0; k < carried; ++k) inside[k] = next[k];
  const std::string cond_out = scalar_condition(c, cond, c.ex.write_subgraph(cond, inside, loop_body)[0], loop_body);
  // Outputs: cond_out, then the carried values (typed as the body's results).
  auto* id = loop_body.add_node();
  id->set_op_type("Identity");
  id->set_name(c.ex.fresh("n_output"));
  id->add_input(cond_out);
  id->add_output(scalar(*loop_body.add_output(), c.ex.fresh("cond_out"), DType::Bool));
  c.ex.declare_outputs(body, next, loop_body);

  std::string trip;
  if (c.node.attrs.has("max_iterations")) trip = c.constant(Tensor::scalar<int64_t>(c.node.attrs.get_int("max_iterations")));
  std::vector<std::string> ins = {trip, first}, outs;
  for (size_t k = 0; k < carried; ++k) {
    ins.push_back(operands[k]);
    outs.push_back(c.out(static_cast<int>(k)));
  }
  c.add("Loop", ins, outs, [&](::onnx::NodeProto& node) { set_attr(node, "body", loop_body); });
}

void emit_scan(EmitContext& c) {
  const Graph& body = c.node.subgraphs[0];
  const size_t carry = static_cast<size_t>(ops::num_carry(c.node)), xs = static_cast<size_t>(ops::num_xs(c.node));
  const bool reverse = c.node.attrs.get_int("reverse", 0) != 0;
  const std::vector<ValueId> formals = body.leaves_of(ValueKind::Input);
  ::onnx::GraphProto scan_body;
  scan_body.set_name(c.ex.fresh("scan_body"));
  std::vector<std::string> inside, ins;
  for (size_t i = 0; i < c.node.inputs.size(); ++i) {
    const std::string outer = c.in(static_cast<int>(i));
    if (i >= carry + xs) {
      inside.push_back(outer);  // an invariant: read by name
      continue;
    }
    ins.push_back(outer);
    inside.push_back(add_input(scan_body, c.ex.fresh(i < carry ? "carry_in" : "x_t"), body.value(formals[i])));
  }
  c.ex.declare_outputs(body, c.ex.write_subgraph(body, inside, scan_body), scan_body);
  std::vector<std::string> outs;
  for (size_t k = 0; k < c.node.outputs.size(); ++k) outs.push_back(c.out(static_cast<int>(k)));
  const size_t ys = c.node.outputs.size() - carry;
  c.add("Scan", ins, outs, [&](::onnx::NodeProto& n) {
    set_attr(n, "body", scan_body);
    set_attr(n, "num_scan_inputs", static_cast<int64_t>(xs));
    if (!reverse) return;
    set_attr(n, "scan_input_directions", std::vector<int64_t>(xs, 1));
    if (ys > 0) set_attr(n, "scan_output_directions", std::vector<int64_t>(ys, 1));
  });
}

}  // namespace

void add_control_flow_emitters(std::map<std::string, Emitter>& table) {
  table["if"] = emit_if;
  table["while"] = emit_while;
  table["scan"] = emit_scan;
}

}  // namespace ingot::onnx_export
