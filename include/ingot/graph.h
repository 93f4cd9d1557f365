// The IR every frontend lowers to and every pass and backend consumes.
//
// A Graph is a list of Nodes in topological order over SSA Values. A Value is either produced
// by exactly one node, or is a graph input (run-time data), a parameter (trainable or not), or a
// constant (its tensor lives in the graph). Nodes name their op; the op's rules live in the op
// registry (src/ir/op_registry.h), keyed by that name.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ingot/dtype.h"
#include "ingot/shape.h"
#include "ingot/tensor.h"

namespace ingot {

using ValueId = int32_t;
using NodeId = int32_t;

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

// Named op attributes with typed getters that name the attribute and op on misuse.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, Attr>> init) : map_(init) {}

  bool has(const std::string& key) const { return map_.count(key) != 0; }
  void set(const std::string& key, Attr value) { map_[key] = std::move(value); }
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;  // accepts ints too
  double get_float(const std::string& key, double fallback) const;
  const std::string& get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> fallback) const;
  std::vector<double> get_floats(const std::string& key) const;
  DType get_dtype(const std::string& key) const;  // stored as its name

  const std::map<std::string, Attr>& items() const { return map_; }
  bool operator==(const Attrs& o) const { return map_ == o.map_; }

 private:
  const Attr& at(const std::string& key) const;
  std::map<std::string, Attr> map_;
};
std::string attr_to_string(const Attr& a);

enum class ValueKind { Intermediate, Input, Parameter, Constant };
std::string_view value_kind_name(ValueKind k);

struct Value {
  ValueId id = -1;
  std::string name;  // terminal or debug name; never pasted into generated code
  ValueKind kind = ValueKind::Intermediate;
  DType dtype = DType::Float32;  // valid after type inference
  SymShape shape;                // valid after shape inference
  bool shape_known = false;
  NodeId producer = -1;  // -1 for inputs, parameters and constants
  int producer_output = 0;
  Tensor constant;           // kind == Constant
  bool differentiable = false;  // parameters default to true, data inputs to false
  std::string init;          // parameter initializer spec, see randomize_params
  bool weak_type = false;    // a scalar literal: takes the dtype of the operand it meets
};

class Graph;

struct Node {
  NodeId id = -1;
  std::string op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  std::string scope;  // the logical-model path it came from, e.g. "mlp.linear_1"
  // The backend key of the innermost logical-model block it came from that was marked with
  // set_attribute("backend", key); empty when none was. ml.compile's backend_map partitions the
  // inferred graph by it. Optimization passes do not keep it (it is read before they run).
  std::string backend;
  // The graphs a control-flow op owns (if: then, else; while: condition, body; scan: body): each
  // is a whole graph whose data inputs, in leaf order, are the formal parameters and whose
  // outputs, in order, are the results. A subgraph reads nothing of the graph around it; what it
  // needs comes in as an operand of the node (src/ops/control_flow.cpp states each op's contract).
  std::vector<Graph> subgraphs;
};

class Graph {
 public:
  ValueId add_input(std::string name, ValueKind kind = ValueKind::Input);
  ValueId add_constant(std::string name, Tensor value);
  // Appends a node; returns its output values (created here, one per op output).
  std::vector<ValueId> add_node(std::string op, std::vector<ValueId> inputs, Attrs attrs = {},
                                int num_outputs = 1, std::string scope = "");
  ValueId add_op(std::string op, std::vector<ValueId> inputs, Attrs attrs = {},
                 std::string scope = "") {
    return add_node(std::move(op), std::move(inputs), std::move(attrs), 1, std::move(scope))[0];
  }
  void set_output(std::string name, ValueId v);

  Value& value(ValueId id) { return values_.at(static_cast<size_t>(id)); }
  const Value& value(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  Node& node(NodeId id) { return nodes_.at(static_cast<size_t>(id)); }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }

  std::vector<Value>& values() { return values_; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Graph-level leaves (inputs, parameters, constants) in creation order.
  const std::vector<ValueId>& leaves() const { return leaves_; }
  std::vector<ValueId> leaves_of(ValueKind kind) const;
  const std::vector<std::pair<std::string, ValueId>>& outputs() const { return outputs_; }
  std::vector<std::pair<std::string, ValueId>>& outputs() { return outputs_; }

  std::optional<ValueId> find_leaf(const std::string& name) const;
  std::optional<ValueId> find_output(const std::string& name) const;
  // Number of node inputs reading each value, plus one per graph output naming it.
  std::vector<int> use_counts() const;

  // Rebuilds the graph keeping only `keep` nodes (in order) and renumbering ids densely.
  // Used by passes; leaves that no kept node or output reads are dropped. Returns each old
  // value id's new id (-1 where the value was dropped).
  std::vector<ValueId> compact(const std::vector<bool>& keep_node);

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> leaves_;
  std::vector<std::pair<std::string, ValueId>> outputs_;
};

// Structural checks: SSA (each value defined once, before use), op known with a valid arity,
// outputs defined. Throws ingot::Error naming the node and what is wrong.
void verify(const Graph& g);

enum class DumpFormat { Text, Json, Dot };
DumpFormat parse_dump_format(std::string_view s);  // "text" | "json" | "dot"
std::string print_graph(const Graph& g, DumpFormat format = DumpFormat::Text);

}  // namespace ingot
