#include "compiler/frontend.h"

#include <algorithm>
#include <map>
#include <set>

#include "ingot/error.h"
#include "ir/inline.h"
#include "ir/op_registry.h"

namespace ingot {

using detail::ModelImpl;
using detail::WireRole;

namespace {

std::string join(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

// Copies what a model's wire says into the global wire it maps to.
void merge_wire(const ModelImpl& m, int w, const std::string& path, FlatWire& g) {
  const detail::Wire& wire = m.wires[w];
  std::string where = path.empty() ? "'" + m.terminal_name(w) + "'"
                                   : "'" + m.terminal_name(w) + "' of '" + path + "'";
  for (const ShapeTemplate& t : wire.shapes)
    g.shapes.push_back({-1, t, path, "shape " + to_string(t) + " of " + where});
  if (wire.dtype) {
    if (g.dtype && *g.dtype != *wire.dtype)
      INGOT_FAIL("Type mismatch at '", g.name, "': ", where, " requires ", dtype_name(*wire.dtype),
                 " but it is ", dtype_name(*g.dtype), " elsewhere");
    g.dtype = wire.dtype;
  }
  if (wire.value && !g.value) {
    g.value = wire.value;
    g.weak = wire.weak;
  }
  if (wire.role == WireRole::Parameter) {
    g.role = WireRole::Parameter;
    if (!g.init && wire.init) g.init = wire.init;
  } else if (wire.role == WireRole::Input && g.role == WireRole::Unspecified) {
    g.role = WireRole::Input;
  }
}

// `backend`: the backend key the enclosing blocks give (the innermost marked one wins).
void flatten_into(const ModelImpl& m, const std::string& path, const std::string& backend, std::vector<int>& map,
                  FlatModel& out) {
  for (size_t w = 0; w < m.wires.size(); ++w) {
    if (map[w] < 0) {
      FlatWire g;
      g.name = join(path, m.terminal_name(static_cast<int>(w)));
      g.top_level = path.empty();
      out.wires.push_back(std::move(g));
      map[w] = static_cast<int>(out.wires.size()) - 1;
    }
    merge_wire(m, static_cast<int>(w), path, out.wires[map[w]]);
  }
  for (const detail::Block& b : m.blocks) {
    const ModelImpl& child = b.model->impl();
    std::string scope = join(path, b.instance);
    const std::string& child_backend = child.backend.empty() ? backend : child.backend;
    if (child.primitive()) {
      FlatNode n{child.op, child.attrs, {}, {}, scope, child.control, {}, {}, child_backend};
      for (size_t t = 0; t < b.wires.size(); ++t) {
        (b.is_output[t] ? n.outputs : n.inputs).push_back(map[b.wires[t]]);
        (b.is_output[t] ? n.output_terminals : n.input_terminals).push_back(b.terminals[t]);
      }
      for (int w : n.outputs) out.wires[w].producer = static_cast<int>(out.nodes.size());
      if (n.control) merge_lifted_parameters(n, out);
      out.nodes.push_back(std::move(n));
      continue;
    }
    // A nested model: its terminal wires are the wires its links name here.
    std::vector<int> child_map(child.wires.size(), -1);
    std::vector<int> terms = child.input_wires();
    for (int w : child.output_wires()) terms.push_back(w);
    for (size_t t = 0; t < terms.size(); ++t) child_map[terms[t]] = map[b.wires[t]];
    flatten_into(child, scope, child_backend, child_map, out);
  }
}

}  // namespace

namespace {

// The model's wires and primitive nodes, no wire marked an output yet; `map`: each top-level
// wire's flat wire.
FlatModel flatten_wires(const Model& model, std::vector<int>& map) {
  const ModelImpl& m = model.impl();
  INGOT_CHECK(!m.primitive(), "compile needs a composite Model; wrap primitive '", m.op,
              "' with `Model m; m |= block;`");
  INGOT_CHECK(!m.blocks.empty(), "Model has no blocks to compile");
  FlatModel out;
  map.assign(m.wires.size(), -1);
  flatten_into(m, "", m.backend, map, out);
  std::map<std::string, int> seen;
  for (size_t i = 0; i < out.wires.size(); ++i) {
    auto [it, fresh] = seen.emplace(out.wires[i].name, static_cast<int>(i));
    INGOT_CHECK(fresh, "Terminal name '", out.wires[i].name,
                "' is used by two different wires; rename one of them");
  }
  return out;
}

std::string names_of(const FlatModel& flat, bool inputs_only) {
  std::string s;
  for (const FlatWire& w : flat.wires)
    if (w.top_level && (!inputs_only || w.producer < 0)) s += (s.empty() ? "" : ", ") + w.name;
  return s;
}

int find_wire(const FlatModel& flat, const std::string& name) {
  for (size_t i = 0; i < flat.wires.size(); ++i)
    if (flat.wires[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

FlatModel flatten(const Model& model) {
  std::vector<int> map;
  FlatModel out = flatten_wires(model, map);
  for (int w : model.impl().output_wires()) out.wires[map[w]].output = true;
  return out;
}

FlatModel flatten_for_compile(const Model& model, const std::vector<std::string>& extra_outputs) {
  const ModelImpl& m = model.impl();
  std::vector<int> map;
  FlatModel out = flatten_wires(model, map);
  for (int w : m.compiled_output_wires()) out.wires[map[w]].output = true;
  for (const std::string& name : extra_outputs) {
    const int w = find_wire(out, name);
    INGOT_CHECK(w >= 0, "outputs: '", name, "' is not a wire of the model (wires: ", names_of(out, false),
                "; a wire inside a block is named by its path, e.g. 'linear_0.output')");
    out.wires[static_cast<size_t>(w)].output = true;
  }
  // What a block would make outputs (named wires nothing reads, the canonical output) but the
  // compiled model does not: dead-code elimination removes them and whatever only they need.
  for (int w : m.output_wires())
    if (!out.wires[map[w]].output)
      out.notes.push_back("output '" + out.wires[map[w]].name +
                          "' not exposed: eliminated (ask for it with outputs=[...])");
  return out;
}

// ---------------------------------------------------------------- resolve

namespace {

struct KeySets {
  std::map<std::string, std::string> set_of;  // key -> which set named it

  void add(const std::string& key, const std::string& set) {
    auto [it, fresh] = set_of.emplace(key, set);
    INGOT_CHECK(fresh || it->second == set, "Key '", key, "' is in both ", it->second, " and ",
                set, "; a key belongs to one key set");
  }
};

// Kahn's algorithm over wires; a leftover node is on a cycle, which is reported by its blocks.
std::vector<int> topological_order(const FlatModel& flat) {
  const size_t n = flat.nodes.size();
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (size_t i = 0; i < n; ++i)
    for (int w : flat.nodes[i].inputs)
      if (int p = flat.wires[w].producer; p >= 0) {
        ++indegree[i];
        users[p].push_back(static_cast<int>(i));
      }
  std::vector<int> order, ready;
  for (size_t i = n; i-- > 0;)
    if (indegree[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int u : users[i])
      if (--indegree[u] == 0) ready.push_back(u);
    std::sort(ready.rbegin(), ready.rend());  // stable: keep insertion order where free
  }
  if (order.size() != n) {
    std::string blocks;
    for (size_t i = 0; i < n; ++i)
      if (indegree[i] > 0) {
        std::string wires;
        for (int w : flat.nodes[i].outputs) wires += (wires.empty() ? "" : ", ") + flat.wires[w].name;
        blocks += "\n  " + flat.nodes[i].scope + " (" + flat.nodes[i].op + ") -> " + wires;
      }
    INGOT_FAIL("The model has a cycle: these blocks depend on their own outputs:", blocks);
  }
  return order;
}

// A value produced under a generated name ("linear_0.add_0.output") takes the name the user gave
// the wire it also flows into ("logits"). Leaves keep their own names: they are terminals.
void adopt_terminal_name(Graph& g, ValueId v, const std::string& wire_name) {
  Value& val = g.value(v);
  bool generated = val.name.find('.') != std::string::npos;
  if (val.producer >= 0 && generated && wire_name.find('.') == std::string::npos) val.name = wire_name;
}

Tensor initial_value_for(const FlatWire& w, const std::map<std::string, Tensor>& constants) {
  auto it = constants.find(w.name);
  return it != constants.end() ? it->second : *w.value;
}

// (1 - momentum) state + momentum value (value * count / (count - 1) with a count): see kStateUpdate.
ValueId running_update(Graph& g, const std::vector<ValueId>& in, double momentum, const std::string& scope) {
  auto scalar = [&](double x) { return add_weak_scalar(g, x); };  // takes the statistic's dtype
  auto op = [&](const char* name, ValueId a, ValueId b) { return g.add_node(name, {a, b}, {}, 1, scope)[0]; };
  ValueId value = in[1];
  if (in.size() == 3) value = op("mul", value, op("div", in[2], op("sub", in[2], scalar(1.0))));
  return op("add", op("mul", in[0], scalar(1.0 - momentum)), op("mul", value, scalar(momentum)));
}

}  // namespace

ResolvedModel resolve_terminals(const FlatModel& flat, const CompileOptions& options) {
  ResolvedModel out;
  KeySets sets;
  auto check_input_key = [&](const std::string& key, const char* set) {
    int w = find_wire(flat, key);
    INGOT_CHECK(w >= 0, set, ": '", key, "' is not a terminal of the model (inputs: ",
                names_of(flat, true), ")");
    INGOT_CHECK(flat.wires[w].producer < 0, set, ": '", key, "' is produced by block '",
                flat.nodes[flat.wires[w].producer].scope, "'; only inputs can be in ", set);
    sets.add(key, set);
  };
  for (const auto& [k, v] : options.constant_keys) check_input_key(k, "constant_keys");
  for (const auto& k : options.data_keys) check_input_key(k, "data_keys");
  for (const auto& k : options.trainable_keys) check_input_key(k, "trainable_keys");
  for (const auto& k : options.discard_keys) {
    int w = find_wire(flat, k);
    INGOT_CHECK(w >= 0 && (flat.wires[w].producer < 0 || flat.wires[w].output), "discard_keys: '",
                k, "' is not an input or output of the model (terminals: ", names_of(flat, false), ")");
    sets.add(k, "discard_keys");
  }
  for (const auto& [k, s] : options.shapes)
    INGOT_CHECK(find_wire(flat, k) >= 0, "shapes: '", k, "' is not a terminal of the model (terminals: ",
                names_of(flat, false), ")");
  for (const auto& [k, t] : options.types)
    INGOT_CHECK(find_wire(flat, k) >= 0, "types: '", k, "' is not a terminal of the model (terminals: ",
                names_of(flat, false), ")");

  // Which wires are alive: discarding an input removes everything computed from it.
  std::vector<bool> dead_wire(flat.wires.size(), false);
  for (const auto& k : options.discard_keys) {
    int w = find_wire(flat, k);
    if (flat.wires[w].producer < 0) dead_wire[w] = true;
  }

  Graph& g = out.graph;
  std::vector<ValueId> value_of(flat.wires.size(), -1);
  auto leaf = [&](int w) -> ValueId {
    if (value_of[w] >= 0) return value_of[w];
    const FlatWire& fw = flat.wires[w];
    std::string set = sets.set_of.count(fw.name) ? sets.set_of[fw.name] : "";
    ValueId id;
    if (set == "constant_keys" || (fw.value && set.empty())) {
      Tensor t = initial_value_for(fw, options.constant_keys);
      id = g.add_constant(fw.name, t);  // its shape is known: inference binds it directly
      g.value(id).weak_type = fw.weak && set.empty();
    } else {
      bool param = set == "trainable_keys" || (set.empty() && fw.role == WireRole::Parameter);
      id = g.add_input(fw.name, param ? ValueKind::Parameter : ValueKind::Input);
      Value& v = g.value(id);
      v.differentiable = param;
      v.init = (fw.init ? *fw.init : Init::normal(0.02)).str();
      v.dtype = fw.dtype.value_or(DType::Float32);
    }
    if (auto t = options.types.find(fw.name); t != options.types.end()) {
      Value& v = g.value(id);
      if (v.kind == ValueKind::Constant) {
        v.constant = v.constant.astype(t->second);
        v.weak_type = false;
      }
      v.dtype = t->second;
    } else if (fw.dtype && g.value(id).kind == ValueKind::Constant && g.value(id).dtype != *fw.dtype) {
      INGOT_FAIL("Type mismatch at '", fw.name, "': expected ", dtype_name(*fw.dtype), ", got ",
                 dtype_name(g.value(id).dtype), " (its value)");
    }
    value_of[w] = id;
    return id;
  };

  std::vector<std::pair<std::string, ValueId>> state_updates;  // "state:<parameter>" -> next value
  for (int i : topological_order(flat)) {
    const FlatNode& n = flat.nodes[i];
    bool dead = false;
    for (int w : n.inputs) dead = dead || dead_wire[w];
    if (dead) {
      for (int w : n.outputs) dead_wire[w] = true;
      continue;
    }
    std::vector<ValueId> ins;
    for (int w : n.inputs) ins.push_back(flat.wires[w].producer >= 0 ? value_of[w] : leaf(w));
    if (n.op == detail::kStateUpdate) {
      INGOT_CHECK((ins.size() == 2 || ins.size() == 3) && n.outputs.size() == 1 && g.value(ins[0]).producer < 0,
                  "state_update at '", n.scope, "' needs (state, value, [count]) inputs with state a model input");
      g.value(ins[0]).differentiable = false;
      value_of[n.outputs[0]] = ins[0];
      if (!options.inference) {
        const size_t nodes_before = g.nodes().size();
        state_updates.emplace_back(detail::kStatePrefix + g.value(ins[0]).name,
                                   running_update(g, ins, n.attrs.get_float("momentum"), n.scope));
        for (size_t k = nodes_before; k < g.nodes().size(); ++k) g.nodes()[k].backend = n.backend;
      }
      continue;
    }
    if (n.op == detail::kSelectByMode) {
      INGOT_CHECK(ins.size() == 2 && n.outputs.size() == 1, "select_by_mode at '", n.scope,
                  "' needs (training, inference) inputs and one output");
      value_of[n.outputs[0]] = ins[options.inference ? 1 : 0];
      adopt_terminal_name(g, value_of[n.outputs[0]], flat.wires[n.outputs[0]].name);
      continue;
    }
    INGOT_CHECK(find_op(n.op) != nullptr, "Unknown op '", n.op, "' in block '", n.scope, "'");
    const size_t nodes_before = g.nodes().size();
    std::vector<ValueId> outs = n.control ? add_control_node(g, n, ins, options)
                                          : g.add_node(n.op, ins, n.attrs, static_cast<int>(n.outputs.size()), n.scope);
    for (size_t k = nodes_before; k < g.nodes().size(); ++k) g.nodes()[k].backend = n.backend;
    for (size_t k = 0; k < outs.size(); ++k) {
      value_of[n.outputs[k]] = outs[k];
      g.value(outs[k]).name = flat.wires[n.outputs[k]].name;
    }
  }

  std::set<std::string> discarded(options.discard_keys.begin(), options.discard_keys.end());
  for (size_t w = 0; w < flat.wires.size(); ++w) {
    const FlatWire& fw = flat.wires[w];
    if (!fw.output) continue;
    if (discarded.count(fw.name) || dead_wire[w]) {
      out.notes.push_back("output '" + fw.name + "' discarded");
      continue;
    }
    ValueId v = value_of[w];
    if (v < 0) v = leaf(static_cast<int>(w));
    adopt_terminal_name(g, v, fw.name);
    g.set_output(fw.name, v);
  }
  for (const auto& [name, v] : state_updates)
    if (!g.find_output(name)) g.set_output(name, v);
  INGOT_CHECK(!g.outputs().empty(), "The model has no outputs left to compute",
              discarded.empty() ? "; expose one (IOKey(name).expose() or Model::expose)" : " after discard_keys");

  // Dead-code elimination: keep only nodes that reach an output.
  std::vector<bool> needed(g.values().size(), false), keep(g.nodes().size(), false);
  for (const auto& [name, v] : g.outputs()) needed[v] = true;
  for (size_t i = g.nodes().size(); i-- > 0;) {
    const Node& n = g.nodes()[i];
    for (ValueId v : n.outputs) keep[i] = keep[i] || needed[v];
    if (keep[i])
      for (ValueId v : n.inputs) needed[v] = true;
  }
  size_t before = g.nodes().size();
  // Constraints on the values that survive dead-code elimination, renumbered with the graph.
  std::vector<ShapeConstraint> constraints;
  for (size_t w = 0; w < flat.wires.size(); ++w)
    for (ShapeConstraint c : flat.wires[w].shapes)
      if (value_of[w] >= 0 && needed[value_of[w]]) {
        c.value = value_of[w];
        constraints.push_back(std::move(c));
      }
  for (const auto& [k, s] : options.shapes) {
    int w = find_wire(flat, k);
    if (value_of[w] >= 0 && needed[value_of[w]])
      constraints.push_back({value_of[w], s, "", "shapes['" + k + "']"});
  }
  std::vector<ValueId> remap = g.compact(keep);
  if (before != g.nodes().size())
    out.notes.push_back("removed " + std::to_string(before - g.nodes().size()) +
                        " nodes that no output needs");
  for (ShapeConstraint& c : constraints) {
    c.value = remap[c.value];
    out.constraints.push_back(std::move(c));
  }
  // Named constants one a line; the unnamed literals blocks make (batch norm's eps, a scale) by count.
  int64_t literals = 0;
  for (const Value& v : g.values())
    if (v.kind == ValueKind::Constant) {
      if (v.name.empty()) ++literals;
      else out.notes.push_back("'" + v.name + "' is a constant");
    }
  if (literals > 0) out.notes.push_back(std::to_string(literals) + " unnamed literal constants");
  return out;
}


std::vector<std::optional<Shape>> static_wire_shapes(const Model& model, const std::vector<int>& wires,
                                                     CompileOptions options) {
  std::vector<std::optional<Shape>> out(wires.size());
  const ModelImpl& m = model.impl();
  if (m.primitive() || m.blocks.empty()) return out;
  FlatModel flat;
  std::vector<int> map(m.wires.size(), -1);
  flatten_into(m, "", m.backend, map, flat);
  for (int w : m.output_wires()) flat.wires[map[w]].output = true;
  for (int w : wires) {
    INGOT_CHECK(w >= 0 && static_cast<size_t>(w) < map.size(), "static_wire_shapes: wire ", w, " is not in the model");
    flat.wires[map[w]].output = true;  // kept by dead-code elimination, found by its name
  }
  options.inference = true;
  try {
    ResolvedModel r = resolve_terminals(flat, options);
    infer_shapes(r.graph, r.constraints);
    for (size_t i = 0; i < wires.size(); ++i) {
      const std::optional<ValueId> v = r.graph.find_output(flat.wires[map[wires[i]]].name);
      if (!v || !r.graph.value(*v).shape_known || !is_static(r.graph.value(*v).shape)) continue;
      Shape s;
      for (const SymDim& d : r.graph.value(*v).shape) s.push_back(d.value);
      out[i] = s;
    }
  } catch (const Error&) {
    // A model that does not infer yet (a size only known at run time): nothing is fixed.
  }
  return out;
}

}  // namespace ingot
