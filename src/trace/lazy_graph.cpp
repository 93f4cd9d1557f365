// From arrays to IR: the pending part of the array DAG becomes a Graph whose leaves are the
// arrays that hold data (or placeholders), plus the structural key the hot path counts by.
#include <sstream>
#include <unordered_set>

#include "compiler/shape_inference.h"
#include "ingot/error.h"
#include "trace/array_impl.h"

namespace ingot::detail {

namespace {

bool pending(const ArrayImpl* a) { return !a->data.defined() && !a->placeholder; }

class Builder {
 public:
  Builder(DataLeaves leaves, LazyGraph& out) : leaves_(leaves), out_(out) {}

  ValueId leaf(ArrayImpl* a) {
    auto it = values_.find(a);
    if (it != values_.end()) return it->second;
    ValueId v;
    if (a->placeholder || leaves_ == DataLeaves::Inputs) {
      v = out_.graph.add_input("in" + std::to_string(out_.inputs.size()));
      out_.inputs.push_back(a);
      out_.input_values.push_back(v);
      out_.has_placeholder = out_.has_placeholder || a->placeholder;
    } else {
      v = out_.graph.add_constant("c" + std::to_string(values_.size()), a->data);
    }
    Value& val = out_.graph.value(v);
    val.dtype = a->dtype;
    val.shape.assign(a->shape.begin(), a->shape.end());
    val.shape_known = true;
    values_[a] = v;
    return v;
  }

  // Post-order over pending arrays, iteratively (training graphs can be deep).
  ValueId visit(ArrayImpl* root) {
    std::vector<std::pair<ArrayImpl*, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [a, next] = stack.back();
      if (values_.count(a)) {
        stack.pop_back();
        continue;
      }
      if (!pending(a)) {
        leaf(a);
        stack.pop_back();
        continue;
      }
      OpRecord* rec = a->record.get();
      INGOT_CHECK(rec != nullptr, "internal: a pending array has no op");
      auto done = nodes_.find(rec);
      if (done != nodes_.end()) {
        values_[a] = done->second[static_cast<size_t>(a->index)];
        stack.pop_back();
        continue;
      }
      if (next < rec->inputs.size()) {
        ArrayImpl* in = rec->inputs[next++].get();
        stack.emplace_back(in, 0);
        continue;
      }
      std::vector<ValueId> ins;
      for (const auto& in : rec->inputs) {
        ins.push_back(values_.at(in.get()));
        ++internal_refs_[in.get()];
        use_counts_[in.get()] = in.use_count();
      }
      std::vector<ValueId> outs = out_.graph.add_node(rec->op, ins, rec->attrs, rec->num_outputs);
      if (!rec->subgraphs.empty()) out_.graph.node(out_.graph.value(outs[0]).producer).subgraphs = rec->subgraphs;
      nodes_[rec] = outs;
      out_.records.push_back(a->record);
      values_[a] = outs[static_cast<size_t>(a->index)];
      pending_.push_back(a);
      stack.pop_back();
    }
    return values_.at(root);
  }

  // Pending arrays held by anyone outside this graph (a user's handle, a lazy array not being
  // evaluated): every holder is a shared_ptr, and the records in this graph hold internal_refs_.
  std::vector<ArrayImpl*> external() const {
    std::vector<ArrayImpl*> out;
    for (ArrayImpl* a : pending_) {
      auto it = internal_refs_.find(a);
      if (it != internal_refs_.end() && use_counts_.at(a) > it->second) out.push_back(a);
    }
    return out;
  }

 private:
  DataLeaves leaves_;
  LazyGraph& out_;
  std::unordered_map<ArrayImpl*, ValueId> values_;
  std::unordered_map<OpRecord*, std::vector<ValueId>> nodes_;
  std::unordered_map<ArrayImpl*, long> internal_refs_, use_counts_;
  std::vector<ArrayImpl*> pending_;
};

}  // namespace

LazyGraph build_lazy_graph(const std::vector<ArrayImpl*>& targets, DataLeaves leaves, bool keep_external,
                           const std::vector<ArrayImpl*>& leading_inputs) {
  LazyGraph lg;
  Builder b(leaves, lg);
  for (ArrayImpl* a : leading_inputs) b.leaf(a);
  std::vector<ValueId> outs;
  for (ArrayImpl* t : targets) outs.push_back(b.visit(t));
  std::unordered_set<ArrayImpl*> is_target(targets.begin(), targets.end());
  for (size_t i = 0; i < targets.size(); ++i) {
    lg.graph.set_output("out" + std::to_string(i), outs[i]);
    lg.outputs.push_back(targets[i]);
  }
  if (keep_external) {
    for (ArrayImpl* a : b.external()) {
      if (is_target.count(a)) continue;
      lg.graph.set_output("out" + std::to_string(lg.outputs.size()), b.visit(a));
      lg.outputs.push_back(a);
    }
  }
  return lg;
}

void annotate(Graph& g) {
  infer_shapes(g, {});
  infer_types(g);
}

std::string op_sequence(const Graph& g, size_t max_ops) {
  std::string s;
  const size_t n = g.nodes().size();
  for (size_t i = 0; i < n && i < max_ops; ++i) s += (i ? " -> " : "") + g.nodes()[i].op;
  if (n > max_ops) s += " -> ... (" + std::to_string(n) + " ops)";
  if (n == 0) s = "(no ops)";
  return s;
}

std::string structural_key(const Graph& g) {
  std::ostringstream os;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    os << (v.kind == ValueKind::Constant ? 'c' : 'i') << dtype_name(v.dtype) << to_string(v.shape) << ';';
  }
  for (const Node& n : g.nodes()) {
    os << n.op << '(';
    for (ValueId v : n.inputs) os << v << ',';
    os << ')';
    for (const auto& [k, a] : n.attrs.items()) os << k << '=' << attr_to_string(a) << ',';
    for (const Graph& sub : n.subgraphs) os << '{' << structural_key(sub) << '}';  // two branches differ here
    os << ';';
  }
  for (const auto& [name, v] : g.outputs()) os << 'o' << v << ';';
  return os.str();
}

}  // namespace ingot::detail
