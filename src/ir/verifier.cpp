// Structural verification of a Graph: see verify() in ingot/graph.h.
//
// Nodes are walked in order, tracking which values have been defined so far; that single pass
// finds use-before-def, self-reference and double definition. Values and graph outputs are
// checked afterwards, once every producer is known. INGOT_CHECK builds its message only on
// failure, so the message arguments may assume the failing case (e.g. a valid node index).
#include <algorithm>
#include <string>
#include <vector>

#include "ingot/error.h"
#include "ingot/graph.h"
#include "ir/graph_json.h"
#include "ir/op_registry.h"

namespace ingot {
namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g)
      : g_(g), produced_by_(g.values().size(), -1), in_leaf_list_(g.values().size(), false) {}

  void run() {
    check_ids_and_leaf_list();
    for (size_t i = 0; i < g_.nodes().size(); ++i) check_node(static_cast<NodeId>(i));
    for (const Value& v : g_.values()) check_value(v);
    for (const auto& [name, id] : g_.outputs())
      INGOT_CHECK(in_range(id), "graph output \"", escape_string(name), "\" refers to %", id,
                  ", which does not exist (the graph has ", g_.values().size(), " values)");
  }

 private:
  bool in_range(ValueId id) const {
    return id >= 0 && static_cast<size_t>(id) < g_.values().size();
  }

  // `%3` or `%3 "name"`.
  std::string value_ref(ValueId id) const {
    std::string s = "%" + std::to_string(id);
    if (in_range(id) && !g_.value(id).name.empty())
      s += " \"" + escape_string(g_.value(id).name) + "\"";
    return s;
  }

  static std::string scope_suffix(const Node& n) {
    return n.scope.empty() ? "" : " (scope '" + escape_string(n.scope) + "')";
  }

  // `node #2 'relu' (scope 'mlp.act')`.
  std::string node_ref(NodeId index) const {
    const Node& n = g_.node(index);
    return "node #" + std::to_string(index) + " '" + escape_string(n.op) + "'" + scope_suffix(n);
  }

  // `value %3 "h": `.
  std::string value_where(ValueId id) const { return "value " + value_ref(id) + ": "; }

  // `node #2 'relu': input 1 `.
  std::string slot_ref(NodeId index, const char* slot, size_t k) const {
    return node_ref(index) + ": " + slot + " " + std::to_string(k) + " ";
  }

  void check_ids_and_leaf_list() {
    for (size_t i = 0; i < g_.values().size(); ++i)
      INGOT_CHECK(g_.values()[i].id == static_cast<ValueId>(i), "value at index ", i, " has id %",
                  g_.values()[i].id);
    for (size_t i = 0; i < g_.nodes().size(); ++i)
      INGOT_CHECK(g_.nodes()[i].id == static_cast<NodeId>(i), "node at index ", i, " has id #",
                  g_.nodes()[i].id);
    for (ValueId id : g_.leaves()) {
      INGOT_CHECK(in_range(id) && g_.value(id).kind != ValueKind::Intermediate,
                  "the graph's leaf list names ", value_ref(id),
                  ", which is not an input, parameter or constant");
      in_leaf_list_[id] = true;
    }
  }

  void check_node(NodeId index) {
    const Node& n = g_.node(index);
    const OpDef* def = find_op(n.op);
    INGOT_CHECK(def != nullptr, "Unknown op '", escape_string(n.op), "' at node #", index,
                scope_suffix(n));
    check_arity(index, *def);
    for (size_t k = 0; k < n.inputs.size(); ++k) check_input(index, k);
    for (size_t k = 0; k < n.outputs.size(); ++k) check_output(index, k);
    check_subgraphs(index, *def);
  }

  // Each subgraph is a whole graph of its own (verified the same way), fed only through its data
  // inputs: no parameters inside; the op's own check matches them with the node.
  void check_subgraphs(NodeId index, const OpDef& def) const {
    const Node& n = g_.node(index);
    INGOT_CHECK(n.subgraphs.size() == def.subgraph_names.size(), node_ref(index), ": has ", n.subgraphs.size(),
                " subgraphs, the op owns ", def.subgraph_names.size());
    for (size_t k = 0; k < n.subgraphs.size(); ++k) {
      const Graph& sub = n.subgraphs[k];
      try {
        verify(sub);
        INGOT_CHECK(sub.leaves_of(ValueKind::Parameter).empty(),
                    "a subgraph holds no parameters (pass them in as operands of the node)");
      } catch (const Error& e) {
        INGOT_FAIL(node_ref(index), ": subgraph ", k, ": ", e.what());
      }
    }
    if (def.check_subgraphs == nullptr) return;
    try {
      def.check_subgraphs(n);
    } catch (const Error& e) {
      INGOT_FAIL(node_ref(index), ": ", e.what());
    }
  }

  // "2", "1 to 3" or "at least 1".
  static std::string arity_text(const OpDef& def) {
    std::string min = std::to_string(def.min_inputs);
    if (def.max_inputs < 0) return "at least " + min;
    if (def.max_inputs == def.min_inputs) return min;
    return min + " to " + std::to_string(def.max_inputs);
  }

  void check_arity(NodeId index, const OpDef& def) const {
    const Node& n = g_.node(index);
    int got = static_cast<int>(n.inputs.size());
    bool ok = got >= def.min_inputs && (def.max_inputs < 0 || got <= def.max_inputs);
    INGOT_CHECK(ok, node_ref(index), ": takes ", arity_text(def), " inputs, got ", got);
    INGOT_CHECK(def.num_outputs < 0 || static_cast<int>(n.outputs.size()) == def.num_outputs, node_ref(index), ": has ",
                n.outputs.size(), " outputs, the op produces ", def.num_outputs);
  }

  void check_input(NodeId index, size_t k) const {
    const Node& n = g_.node(index);
    ValueId id = n.inputs[k];
    INGOT_CHECK(in_range(id), slot_ref(index, "input", k), "refers to %", id,
                ", which does not exist (the graph has ", g_.values().size(), " values)");
    const Value& v = g_.value(id);
    if (v.kind != ValueKind::Intermediate || produced_by_[id] >= 0) return;  // defined earlier
    INGOT_CHECK(std::find(n.outputs.begin(), n.outputs.end(), id) == n.outputs.end(),
                slot_ref(index, "input", k), value_ref(id),
                " is an output of the same node (self-reference)");
    bool defined_later = v.producer > index && static_cast<size_t>(v.producer) < g_.nodes().size();
    INGOT_CHECK(!defined_later, slot_ref(index, "input", k), value_ref(id),
                " is used before its definition at ", node_ref(v.producer));
    INGOT_FAIL(slot_ref(index, "input", k), value_ref(id), " is not produced by any earlier node");
  }

  void check_output(NodeId index, size_t k) {
    const Node& n = g_.node(index);
    ValueId id = n.outputs[k];
    INGOT_CHECK(in_range(id), slot_ref(index, "output", k), "refers to %", id,
                ", which does not exist (the graph has ", g_.values().size(), " values)");
    const Value& v = g_.value(id);
    INGOT_CHECK(v.kind == ValueKind::Intermediate, slot_ref(index, "output", k), value_ref(id),
                " is a graph ", value_kind_name(v.kind), ", which no node may produce");
    INGOT_CHECK(produced_by_[id] < 0, slot_ref(index, "output", k), value_ref(id),
                " is already produced by ", node_ref(produced_by_[id]));
    INGOT_CHECK(v.producer == index && v.producer_output == static_cast<int>(k),
                slot_ref(index, "output", k), value_ref(id), " records its producer as node #",
                v.producer, " output ", v.producer_output);
    produced_by_[id] = index;
  }

  void check_value(const Value& v) const {
    if (v.kind == ValueKind::Intermediate) {
      INGOT_CHECK(produced_by_[v.id] >= 0, value_where(v.id),
                  "intermediate value is not produced by any node (it records producer node #",
                  v.producer, ")");
      return;
    }
    INGOT_CHECK(v.producer == -1, value_where(v.id), "a graph ", value_kind_name(v.kind),
                " must have producer -1, found node #", v.producer);
    INGOT_CHECK(in_leaf_list_[v.id], value_where(v.id), "a graph ", value_kind_name(v.kind),
                " missing from the graph's leaf list");
    if (v.kind == ValueKind::Constant) check_constant(v);
  }

  void check_constant(const Value& v) const {
    const Tensor& t = v.constant;
    INGOT_CHECK(t.defined(), value_where(v.id), "constant has no tensor");
    INGOT_CHECK(t.dtype() == v.dtype, value_where(v.id), "constant tensor is ",
                dtype_name(t.dtype()), " but the value says ", dtype_name(v.dtype));
    SymShape expected(t.shape().begin(), t.shape().end());
    INGOT_CHECK(v.shape_known && v.shape == expected, value_where(v.id),
                "constant tensor has shape ", to_string(t.shape()), " but the value says ",
                v.shape_known ? to_string(v.shape) : "unknown");
  }

  const Graph& g_;
  std::vector<NodeId> produced_by_;  // per value: the node that defined it so far, or -1
  std::vector<bool> in_leaf_list_;
};

}  // namespace

void verify(const Graph& g) { Verifier(g).run(); }

}  // namespace ingot
