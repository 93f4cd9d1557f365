#include "ir/inline.h"

#include <algorithm>

#include "ingot/error.h"

namespace ingot {

void copy_value_info(Value& to, const Value& from) {
  to.name = from.name;
  to.dtype = from.dtype;
  to.shape = from.shape;
  to.shape_known = from.shape_known;
  to.differentiable = from.differentiable;
  to.init = from.init;
  to.weak_type = from.weak_type;
}

std::vector<ValueId> copy_leaves(Graph& into, const Graph& from) {
  std::vector<ValueId> map(from.values().size(), -1);
  for (ValueId id : from.leaves()) {
    const Value& v = from.value(id);
    const ValueId nid = v.kind == ValueKind::Constant ? into.add_constant(v.name, v.constant) : into.add_input(v.name, v.kind);
    copy_value_info(into.value(nid), v);
    map[static_cast<size_t>(id)] = nid;
  }
  return map;
}

void set_static_type(Value& v, DType dtype, const std::vector<int64_t>& dims) {
  v.dtype = dtype;
  v.shape.clear();
  for (int64_t d : dims) v.shape.emplace_back(d);
  v.shape_known = true;
}

ValueId reshape_static(Graph& g, ValueId v, DType dtype, const std::vector<int64_t>& dims, const std::string& empty_name,
                       const std::string& scope) {
  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  const ValueId r = empty ? g.add_constant(empty_name, Tensor::full(dtype, dims, 0))
                          : g.add_op("reshape", {v}, {{"shape", dims}}, scope);
  set_static_type(g.value(r), dtype, dims);
  return r;
}

void copy_node(Graph& into, const Graph& from, const Node& n, std::vector<ValueId>& map, const std::string& scope) {
  std::vector<ValueId> inputs;
  for (ValueId v : n.inputs) inputs.push_back(map[static_cast<size_t>(v)]);
  const std::vector<ValueId> outs = into.add_node(n.op, inputs, n.attrs, static_cast<int>(n.outputs.size()),
                                                  n.scope.empty() ? scope : n.scope);
  if (!outs.empty()) into.node(into.value(outs[0]).producer).subgraphs = n.subgraphs;
  for (size_t k = 0; k < outs.size(); ++k) {
    copy_value_info(into.value(outs[k]), from.value(n.outputs[k]));
    map[static_cast<size_t>(n.outputs[k])] = outs[k];
  }
}

std::vector<ValueId> inline_graph(Graph& into, const Graph& sub, const std::vector<ValueId>& args,
                                  const std::string& scope) {
  std::vector<ValueId> map(sub.values().size(), -1);
  const std::vector<ValueId> params = sub.leaves_of(ValueKind::Input);
  INGOT_CHECK(params.size() == args.size(), "inline_graph: the graph takes ", params.size(), " inputs, given ",
              args.size());
  for (size_t i = 0; i < params.size(); ++i) map[static_cast<size_t>(params[i])] = args[i];
  for (ValueId id : sub.leaves_of(ValueKind::Constant)) {
    const Value& c = sub.value(id);
    const std::string name =
        c.name.empty() || into.find_leaf(c.name) ? "inlined_" + std::to_string(into.values().size()) : c.name;
    const ValueId nid = into.add_constant(name, c.constant);
    copy_value_info(into.value(nid), c);
    into.value(nid).name = name;
    map[static_cast<size_t>(id)] = nid;
  }
  for (const Node& n : sub.nodes()) copy_node(into, sub, n, map, scope);
  std::vector<ValueId> results;
  for (const auto& [name, v] : sub.outputs()) results.push_back(map[static_cast<size_t>(v)]);
  return results;
}

ValueId add_weak_scalar(Graph& g, double value) {
  const ValueId c = g.add_constant("", Tensor::full(DType::Float64, {}, value));
  g.value(c).weak_type = true;
  return c;
}

std::vector<bool> values_reaching(const Graph& g, ValueId v) {
  std::vector<bool> seen(g.values().size(), false);
  std::vector<ValueId> stack{v};
  while (!stack.empty()) {
    const ValueId x = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(x)]) continue;
    seen[static_cast<size_t>(x)] = true;
    if (const NodeId p = g.value(x).producer; p >= 0)
      for (ValueId in : g.node(p).inputs) stack.push_back(in);
  }
  return seen;
}

std::vector<bool> inputs_reaching(const Graph& g, ValueId v) {
  const std::vector<bool> seen = values_reaching(g, v);
  const std::vector<ValueId> inputs = g.leaves_of(ValueKind::Input);
  std::vector<bool> out(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) out[i] = seen[static_cast<size_t>(inputs[i])];
  return out;
}

}  // namespace ingot
