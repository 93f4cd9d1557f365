#include "ingot/graph.h"

#include <sstream>

#include "ingot/error.h"

namespace ingot {

const Attr& Attrs::at(const std::string& key) const {
  auto it = map_.find(key);
  INGOT_CHECK(it != map_.end(), "Missing attribute '", key, "'");
  return it->second;
}

int64_t Attrs::get_int(const std::string& key) const {
  const Attr& a = at(key);
  if (auto* p = std::get_if<int64_t>(&a)) return *p;
  INGOT_FAIL("Attribute '", key, "' is not an integer: ", attr_to_string(a));
}
int64_t Attrs::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double Attrs::get_float(const std::string& key) const {
  const Attr& a = at(key);
  if (auto* p = std::get_if<double>(&a)) return *p;
  if (auto* p = std::get_if<int64_t>(&a)) return static_cast<double>(*p);
  INGOT_FAIL("Attribute '", key, "' is not a number: ", attr_to_string(a));
}
double Attrs::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
const std::string& Attrs::get_string(const std::string& key) const {
  const Attr& a = at(key);
  if (auto* p = std::get_if<std::string>(&a)) return *p;
  INGOT_FAIL("Attribute '", key, "' is not a string: ", attr_to_string(a));
}
std::string Attrs::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
std::vector<int64_t> Attrs::get_ints(const std::string& key) const {
  const Attr& a = at(key);
  if (auto* p = std::get_if<std::vector<int64_t>>(&a)) return *p;
  if (auto* p = std::get_if<int64_t>(&a)) return {*p};
  INGOT_FAIL("Attribute '", key, "' is not a list of integers: ", attr_to_string(a));
}
std::vector<int64_t> Attrs::get_ints(const std::string& key, std::vector<int64_t> fallback) const {
  return has(key) ? get_ints(key) : fallback;
}
std::vector<double> Attrs::get_floats(const std::string& key) const {
  const Attr& a = at(key);
  if (auto* p = std::get_if<std::vector<double>>(&a)) return *p;
  if (auto* p = std::get_if<double>(&a)) return {*p};
  INGOT_FAIL("Attribute '", key, "' is not a list of numbers: ", attr_to_string(a));
}
DType Attrs::get_dtype(const std::string& key) const { return parse_dtype(get_string(key)); }

std::string attr_to_string(const Attr& a) {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          os << '"' << v << '"';
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          os << v;
        } else {
          os << '[';
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
          os << ']';
        }
      },
      a);
  return os.str();
}

std::string_view value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Intermediate: return "intermediate";
    case ValueKind::Input: return "input";
    case ValueKind::Parameter: return "parameter";
    case ValueKind::Constant: return "constant";
  }
  return "?";
}

ValueId Graph::add_input(std::string name, ValueKind kind) {
  Value v;
  v.id = static_cast<ValueId>(values_.size());
  v.name = std::move(name);
  v.kind = kind;
  v.differentiable = kind == ValueKind::Parameter;
  values_.push_back(std::move(v));
  leaves_.push_back(values_.back().id);
  return values_.back().id;
}

ValueId Graph::add_constant(std::string name, Tensor value) {
  ValueId id = add_input(std::move(name), ValueKind::Constant);
  Value& v = values_[id];
  v.dtype = value.dtype();
  v.shape.assign(value.shape().begin(), value.shape().end());
  v.shape_known = true;
  v.constant = std::move(value);
  return id;
}

std::vector<ValueId> Graph::add_node(std::string op, std::vector<ValueId> inputs, Attrs attrs,
                                     int num_outputs, std::string scope) {
  for (ValueId in : inputs)
    INGOT_CHECK(in >= 0 && in < static_cast<ValueId>(values_.size()), "Node '", op,
                "' reads undefined value %", in);
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.op = std::move(op);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.scope = std::move(scope);
  for (int i = 0; i < num_outputs; ++i) {
    Value v;
    v.id = static_cast<ValueId>(values_.size());
    v.producer = n.id;
    v.producer_output = i;
    values_.push_back(std::move(v));
    n.outputs.push_back(values_.back().id);
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Graph::set_output(std::string name, ValueId v) {
  for (auto& [n, id] : outputs_) {
    if (n == name) {
      id = v;
      return;
    }
  }
  outputs_.emplace_back(std::move(name), v);
}

std::vector<ValueId> Graph::leaves_of(ValueKind kind) const {
  std::vector<ValueId> out;
  for (ValueId id : leaves_)
    if (values_[id].kind == kind) out.push_back(id);
  return out;
}

std::optional<ValueId> Graph::find_leaf(const std::string& name) const {
  for (ValueId id : leaves_)
    if (values_[id].name == name) return id;
  return std::nullopt;
}

std::optional<ValueId> Graph::find_output(const std::string& name) const {
  for (const auto& [n, id] : outputs_)
    if (n == name) return id;
  return std::nullopt;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values_.size(), 0);
  for (const Node& n : nodes_)
    for (ValueId in : n.inputs) ++uses[in];
  for (const auto& [name, id] : outputs_) ++uses[id];
  return uses;
}

std::vector<ValueId> Graph::compact(const std::vector<bool>& keep_node) {
  std::vector<bool> keep_value(values_.size(), false);
  for (const Node& n : nodes_) {
    if (!keep_node[n.id]) continue;
    for (ValueId v : n.inputs) keep_value[v] = true;
    for (ValueId v : n.outputs) keep_value[v] = true;
  }
  for (const auto& [name, id] : outputs_) keep_value[id] = true;

  std::vector<ValueId> remap(values_.size(), -1);
  std::vector<Value> values;
  for (Value& v : values_) {
    if (!keep_value[v.id]) continue;
    remap[v.id] = static_cast<ValueId>(values.size());
    values.push_back(std::move(v));
    values.back().id = remap[values.back().id];
  }
  std::vector<NodeId> node_remap(nodes_.size(), -1);
  std::vector<Node> nodes;
  for (Node& n : nodes_) {
    if (!keep_node[n.id]) continue;
    node_remap[n.id] = static_cast<NodeId>(nodes.size());
    for (ValueId& v : n.inputs) v = remap[v];
    for (ValueId& v : n.outputs) v = remap[v];
    n.id = node_remap[n.id];
    nodes.push_back(std::move(n));
  }
  for (Value& v : values)
    if (v.producer >= 0) v.producer = node_remap[v.producer];
  std::vector<ValueId> leaves;
  for (ValueId id : leaves_)
    if (remap[id] >= 0) leaves.push_back(remap[id]);
  for (auto& [name, id] : outputs_) id = remap[id];
  values_ = std::move(values);
  nodes_ = std::move(nodes);
  leaves_ = std::move(leaves);
  return remap;
}

}  // namespace ingot
