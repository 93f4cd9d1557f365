#include "compiler/shape_inference.h"

#include <algorithm>
#include <map>
#include <optional>

#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {

std::string describe_value(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (!val.name.empty()) return val.name;
  if (val.producer >= 0) {
    const Node& n = g.node(val.producer);
    return n.op + " output" + (n.scope.empty() ? "" : " in '" + n.scope + "'");
  }
  return "%" + std::to_string(v);
}

namespace {

class Engine final : public ShapeInfer {
 public:
  explicit Engine(Graph& g) : g_(g), shapes_(g.values().size()) {}

  ShapeInferenceReport run(const std::vector<ShapeConstraint>& constraints, bool trace = false) {
    ShapeInferenceReport report;
    if (trace) trace_ = &report.trace;
    for (const Value& v : g_.values()) {
      if (v.producer < 0 && v.shape_known) {  // constants and pre-shaped leaves
        where_ = "the value of '" + v.name + "'";
        set_rank(v.id, static_cast<int>(v.shape.size()));
        for (size_t i = 0; i < v.shape.size(); ++i)
          if (v.shape[i].known()) bind(dim(v.id, static_cast<int>(i)), v.shape[i].value);
      }
    }
    for (;;) {
      fixpoint(constraints, report);
      if (deferred_.empty()) break;
      // Two unknown dims broadcast against each other: NumPy would need one of them to be 1
      // or both equal. Take them as equal (the common case); evaluate checks at run time.
      for (const auto& d : deferred_) {
        report.assumptions.push_back("assumed " + root_label(d.a) + " == " + root_label(d.b) +
                                     " where '" + d.where + "' broadcasts them");
        unify(d.a, d.b);
        unify(d.out, d.a);
      }
      deferred_.clear();
    }
    for (const std::string& a : subgraph_assumptions_) report.assumptions.push_back(a);
    write_back();
    return report;
  }

  // One node whose inputs already have shapes: symbols become variables by name, the rule runs
  // to a fixpoint, and only the node's outputs are written.
  void run_node(const Node& n) {
    node_ = &n;
    where_ = n.op + (n.scope.empty() ? "" : " in '" + n.scope + "'");
    for (ValueId v : n.inputs) {
      const SymShape& s = g_.value(v).shape;
      if (has_rank(v)) continue;
      set_rank(v, static_cast<int>(s.size()));
      for (size_t i = 0; i < s.size(); ++i) {
        const DimVar d = dim(v, static_cast<int>(i));
        if (s[i].known()) bind(d, s[i].value);
        else unify(d, symbol_var("", s[i].symbol));
      }
    }
    for (;;) {
      do {
        changed_ = false;
        deferred_.clear();
        get_op(n.op).shape(*this);
      } while (changed_);
      if (deferred_.empty()) break;
      for (const auto& d : deferred_) {
        unify(d.a, d.b);
        unify(d.out, d.a);
      }
    }
    for (ValueId v : n.outputs) {
      if (!shapes_[v]) fail("the rule gave no rank to output " + std::to_string(v));
      Value& val = g_.value(v);
      val.shape.clear();
      for (size_t i = 0; i < shapes_[v]->size(); ++i) {
        const DimVar r = find((*shapes_[v])[i]);
        if (size_[r] >= 0) val.shape.emplace_back(size_[r]);
        else if (!symbol_[r].empty()) val.shape.emplace_back(symbol_[r]);
        else val.shape.emplace_back("v" + std::to_string(v) + "_" + std::to_string(i));
      }
      val.shape_known = true;
    }
    node_ = nullptr;
  }

  // --- ShapeInfer ---
  const Node& node() const override { return *node_; }
  bool has_rank(ValueId v) const override { return shapes_[v].has_value(); }
  int rank(ValueId v) const override {
    if (!shapes_[v]) fail("rank of '" + describe_value(g_, v) + "' is not known yet");
    return static_cast<int>(shapes_[v]->size());
  }
  DimVar dim(ValueId v, int axis) const override {
    int r = rank(v);
    if (axis < -r || axis >= r)
      fail("axis " + std::to_string(axis) + " out of range for '" + describe_value(g_, v) +
           "' of rank " + std::to_string(r));
    return (*shapes_[v])[static_cast<size_t>(axis < 0 ? axis + r : axis)];
  }
  void set_rank(ValueId v, int r) override {
    if (shapes_[v]) {
      if (static_cast<int>(shapes_[v]->size()) != r)
        conflict(v, "it has rank " + std::to_string(shapes_[v]->size()) + " (shape " +
                        shape_str(v) + ") but must have rank " + std::to_string(r));
      return;
    }
    std::vector<DimVar> dims;
    for (int i = 0; i < r; ++i) dims.push_back(fresh());
    shapes_[v] = std::move(dims);
    changed_ = true;
  }
  void unify(DimVar a, DimVar b) override {
    DimVar ra = find(a), rb = find(b);
    if (ra == rb) return;
    if (size_[ra] >= 0 && size_[rb] >= 0 && size_[ra] != size_[rb])
      mismatch(size_[ra], origin_[ra], size_[rb], origin_[rb]);
    // The root keeps the size, the user's symbol name and the origin of whichever has them.
    if (size_[rb] >= 0 && size_[ra] < 0) std::swap(ra, rb);
    if (size_[ra] >= 0 && size_[rb] < 0) traced(rb, size_[ra]);  // rb's dims get ra's size
    if (size_[ra] < 0 && symbol_[ra].empty() && !symbol_[rb].empty()) std::swap(ra, rb);
    parent_[rb] = ra;
    if (symbol_[ra].empty()) symbol_[ra] = symbol_[rb];
    if (origin_[ra].empty()) origin_[ra] = origin_[rb];
    changed_ = true;
  }
  void bind(DimVar d, int64_t size) override {
    DimVar r = find(d);
    if (size_[r] == size) return;
    if (size < 0) fail("negative dimension " + std::to_string(size));
    if (size_[r] >= 0) mismatch(size_[r], origin_[r], size, where_);
    traced(r, size);
    size_[r] = size;
    origin_[r] = where_;
    changed_ = true;
  }
  std::optional<int64_t> value(DimVar d) const override {
    int64_t s = size_[find(d)];
    return s >= 0 ? std::optional<int64_t>(s) : std::nullopt;
  }
  void broadcast(DimVar a, DimVar b, DimVar out) override {
    auto va = value(a), vb = value(b);
    if (va == 1) unify(out, b);
    if (vb == 1) unify(out, a);
    if (va == 1 || vb == 1) return;
    if (va && vb) {
      if (*va != *vb) fail("dimensions " + std::to_string(*va) + " and " + std::to_string(*vb) +
                           " do not broadcast");
      unify(out, a);
      unify(a, b);
    } else if (va) {
      unify(out, a);  // b is 1 or equal to a: either way out is a
    } else if (vb) {
      unify(out, b);
    } else if (find(a) == find(b)) {
      unify(out, a);
    } else {
      deferred_.push_back({a, b, out, where_});
    }
  }
  DimVar root(DimVar d) const override { return find(d); }
  void assume(const std::string& what) override {
    const std::string a = what + " (" + where_ + ")";
    if (std::find(subgraph_assumptions_.begin(), subgraph_assumptions_.end(), a) == subgraph_assumptions_.end())
      subgraph_assumptions_.push_back(a);
  }
  [[noreturn]] void fail(const std::string& message) const override {
    std::string subject = node_ ? describe_value(g_, node_->outputs.at(0)) : current_value_;
    INGOT_FAIL("Cannot infer shape for '", subject, "' (", where_, "): ", message);
  }

 private:
  struct Deferred {
    DimVar a, b, out;
    std::string where;
  };

  // trace_shapes: the dims of `root`'s class (still without a size) get `size` from where_.
  void traced(DimVar root, int64_t size) {
    if (trace_ == nullptr) return;
    std::vector<std::string> dims;
    for (size_t v = 0; v < shapes_.size(); ++v) {
      if (!shapes_[v]) continue;
      for (size_t i = 0; i < shapes_[v]->size(); ++i)
        if (find((*shapes_[v])[i]) == root)
          dims.push_back("'" + describe_value(g_, static_cast<ValueId>(v)) + "'[" + std::to_string(i) + "]");
    }
    if (dims.empty()) return;  // a symbol's variable, no value's dimension yet
    std::string list;
    for (size_t k = 0; k < dims.size() && k < 4; ++k) list += (k ? ", " : "") + dims[k];
    if (dims.size() > 4) list += " and " + std::to_string(dims.size() - 4) + " more";
    trace_->push_back("sweep " + std::to_string(sweep_) + ", " + where_ + ": " + list + " = " + std::to_string(size));
  }

  DimVar fresh() {
    parent_.push_back(static_cast<DimVar>(parent_.size()));
    size_.push_back(-1);
    symbol_.emplace_back();
    origin_.emplace_back();
    return parent_.back();
  }
  DimVar find(DimVar d) const {
    while (parent_[d] != d) d = parent_[d] = parent_[parent_[d]];
    return d;
  }
  std::string root_label(DimVar d) const {
    DimVar r = find(d);
    if (size_[r] >= 0) return std::to_string(size_[r]);
    return symbol_[r].empty() ? "an unknown dimension" : "'" + symbol_[r] + "'";
  }
  std::string shape_str(ValueId v) const {
    std::string s = "[";
    for (size_t i = 0; i < shapes_[v]->size(); ++i) {
      DimVar r = find((*shapes_[v])[i]);
      s += (i ? ", " : "");
      s += size_[r] >= 0 ? std::to_string(size_[r]) : symbol_[r].empty() ? "?" : symbol_[r];
    }
    return s + "]";
  }
  [[noreturn]] void mismatch(int64_t a, const std::string& from_a, int64_t b,
                             const std::string& from_b) const {
    fail("a dimension is " + std::to_string(a) + (from_a.empty() ? "" : " (from " + from_a + ")") +
         " but must also be " + std::to_string(b) + (from_b.empty() ? "" : " (from " + from_b + ")"));
  }
  [[noreturn]] void conflict(ValueId v, const std::string& message) const {
    INGOT_FAIL("Cannot infer shape for '", describe_value(g_, v), "' (", where_, "): ", message);
  }

  DimVar symbol_var(const std::string& scope, const std::string& name) {
    auto key = scope + "\x1f" + name;
    auto it = symbols_.find(key);
    if (it != symbols_.end()) return it->second;
    DimVar d = fresh();
    symbol_[d] = name;
    symbols_[key] = d;
    return d;
  }

  void apply(const ShapeConstraint& c) {
    const ShapeTemplate& t = c.shape;
    int variadic_at = -1;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i].kind() != Dim::Kind::Variadic) continue;
      if (variadic_at >= 0)
        conflict(c.value, "shape template " + to_string(t) + " has more than one variadic part");
      variadic_at = static_cast<int>(i);
    }
    const int fixed = static_cast<int>(t.size()) - (variadic_at >= 0 ? 1 : 0);
    std::vector<DimVar>* run = nullptr;
    if (variadic_at >= 0 && !t[variadic_at].name().empty()) {
      auto key = c.scope + "\x1f" + t[variadic_at].name() + "...";
      auto it = variadics_.find(key);
      if (it != variadics_.end()) run = &it->second;
      if (!has_rank(c.value) && run) set_rank(c.value, fixed + static_cast<int>(run->size()));
      if (has_rank(c.value) && !run) {
        int len = rank(c.value) - fixed;
        if (len < 0)
          conflict(c.value, "it has rank " + std::to_string(rank(c.value)) +
                                " but shape template " + to_string(t) + " needs at least " +
                                std::to_string(fixed) + " dimensions");
        std::vector<DimVar> dims;
        for (int i = 0; i < len; ++i) dims.push_back(dim(c.value, variadic_at + i));
        run = &(variadics_[key] = std::move(dims));
        changed_ = true;
      }
    } else if (variadic_at < 0) {
      set_rank(c.value, fixed);
    }
    if (!has_rank(c.value)) return;
    const int r = rank(c.value);
    if (r < fixed)
      conflict(c.value, "it has rank " + std::to_string(r) + " but shape template " +
                            to_string(t) + " needs " + (variadic_at >= 0 ? "at least " : "") +
                            std::to_string(fixed) + " dimensions");
    for (int i = 0; i < static_cast<int>(t.size()); ++i) {
      if (i == variadic_at) continue;
      int axis = (variadic_at >= 0 && i > variadic_at) ? r - (static_cast<int>(t.size()) - i) : i;
      DimVar d = dim(c.value, axis);
      switch (t[i].kind()) {
        case Dim::Kind::Fixed: bind(d, t[i].value()); break;
        case Dim::Kind::Symbol: unify(d, symbol_var(c.scope, t[i].name())); break;
        default: break;
      }
    }
    if (run) {
      int len = r - fixed;
      if (static_cast<int>(run->size()) != len)
        conflict(c.value, "its variadic part '" + t[variadic_at].name() + "...' has " +
                              std::to_string(len) + " dimensions here but " +
                              std::to_string(run->size()) + " elsewhere");
      for (int i = 0; i < len; ++i) unify(dim(c.value, variadic_at + i), (*run)[i]);
    }
  }

  void fixpoint(const std::vector<ShapeConstraint>& constraints, ShapeInferenceReport& report) {
    do {
      changed_ = false;
      deferred_.clear();
      sweep_ = ++report.iterations;
      node_ = nullptr;
      for (const ShapeConstraint& c : constraints) {
        where_ = c.origin.empty() ? "shape template " + to_string(c.shape) : c.origin;
        current_value_ = describe_value(g_, c.value);
        apply(c);
      }
      for (const Node& n : g_.nodes()) {
        node_ = &n;
        where_ = n.op + (n.scope.empty() ? "" : " in '" + n.scope + "'");
        get_op(n.op).shape(*this);
      }
      node_ = nullptr;
    } while (changed_);
  }

  void write_back() {
    std::map<DimVar, std::string> generated;
    std::map<std::string, DimVar> taken;  // display name -> root, to keep names distinct
    for (Value& v : g_.values()) {
      if (!shapes_[v.id]) {
        current_value_ = describe_value(g_, v.id);
        where_ = v.producer >= 0 ? g_.node(v.producer).op : std::string(value_kind_name(v.kind));
        // A data input with a generated name is a block terminal nothing was linked to.
        bool unconnected = v.kind == ValueKind::Input && v.name.find('.') != std::string::npos;
        if (unconnected)
          INGOT_FAIL("Cannot infer shape for '", current_value_, "': it is an unconnected input of block '",
                     v.name.substr(0, v.name.rfind('.')),
                     "'; link it to a wire (e.g. chain the block with +=) or give it a shape");
        INGOT_FAIL("Cannot infer shape for '", current_value_,
                   "': nothing determines its rank; give it a shape (compile option `shapes` or "
                   "set_shapes)");
      }
      v.shape.clear();
      for (DimVar d : *shapes_[v.id]) {
        DimVar r = find(d);
        if (size_[r] >= 0) {
          v.shape.emplace_back(size_[r]);
          continue;
        }
        std::string name = symbol_[r];
        if (name.empty()) {
          auto it = generated.find(r);
          name = it != generated.end() ? it->second : "u" + std::to_string(generated.size() + 1);
          generated[r] = name;
        }
        // Two distinct roots with one user name (scoped symbols): suffix the later one.
        for (int k = 2; taken.count(name) && taken[name] != r; ++k)
          name = symbol_[r] + "_" + std::to_string(k);
        taken[name] = r;
        v.shape.emplace_back(name);
      }
      v.shape_known = true;
    }
  }

  Graph& g_;
  std::vector<std::optional<std::vector<DimVar>>> shapes_;
  mutable std::vector<DimVar> parent_;
  std::vector<int64_t> size_;
  std::vector<std::string> symbol_;
  std::vector<std::string> origin_;
  std::map<std::string, DimVar> symbols_;
  std::map<std::string, std::vector<DimVar>> variadics_;
  std::vector<Deferred> deferred_;
  std::vector<std::string> subgraph_assumptions_;  // assume(): reported by run()
  std::vector<std::string>* trace_ = nullptr;  // trace_shapes: where each step goes
  int sweep_ = 0;
  const Node* node_ = nullptr;
  std::string where_;
  std::string current_value_;
  bool changed_ = false;
};

}  // namespace

ShapeInferenceReport infer_shapes(Graph& g, const std::vector<ShapeConstraint>& constraints, bool trace) {
  Engine engine(g);
  return engine.run(constraints, trace);
}

namespace {
// The op's dtype rule over the node's input dtypes; errors name the value, op and scope.
void infer_node_dtypes(Graph& g, const Node& n) {
  std::vector<DType> in, out(n.outputs.size(), DType::Float32);
  for (ValueId v : n.inputs) in.push_back(g.value(v).dtype);
  try {
    get_op(n.op).dtype(n, in, out);
  } catch (const Error& e) {
    INGOT_FAIL("Type error at '", describe_value(g, n.outputs[0]), "' (", n.op,
               n.scope.empty() ? "" : " in '" + n.scope + "'", "): ", e.what());
  }
  for (size_t i = 0; i < out.size(); ++i) g.value(n.outputs[i]).dtype = out[i];
}

// A control-flow node's subgraphs, inferred from its operands (OpDef::infer_subgraphs).
void infer_subgraphs_of(const Graph& g, Node& n) {
  if (n.subgraphs.empty()) return;
  if (auto infer = get_op(n.op).infer_subgraphs) infer(g, n);
}
}  // namespace

ShapeInferenceReport infer_shapes_from_leaves(Graph& g) {
  std::vector<ShapeConstraint> cs;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    if (!v.shape_known || v.kind == ValueKind::Constant) continue;
    ShapeTemplate t;
    for (const SymDim& d : v.shape) t.push_back(d.known() ? Dim(d.value) : Dim(d.symbol));
    cs.push_back({id, t, "", "the shape of '" + v.name + "'"});
  }
  return infer_shapes(g, cs);
}

void infer_node(Graph& g, NodeId node) {
  Engine engine(g);
  Node& n = g.node(node);
  engine.run_node(n);
  infer_node_dtypes(g, n);
  infer_subgraphs_of(g, n);
}

namespace {
// A scalar literal (`x * 2.0`) takes the dtype of the array operand it meets, like JAX's weak
// types: float operands take it as their own float type, integer operands keep integer-valued
// literals integral. Otherwise it stays float32.
void resolve_weak_scalars(Graph& g, const Node& n) {
  DType strong = DType::Float32;
  bool found = false;
  for (ValueId v : n.inputs) {
    const Value& val = g.value(v);
    // A bool operand (where's condition, a comparison result) does not decide the literal's type.
    if (!(val.kind == ValueKind::Constant && val.weak_type) && val.dtype != DType::Bool && !found) {
      strong = val.dtype;
      found = true;
    }
  }
  for (ValueId v : n.inputs) {
    Value& val = g.value(v);
    if (!(val.kind == ValueKind::Constant && val.weak_type) || !found) continue;
    double x = val.constant.item(0);
    bool integral_value = x == static_cast<double>(static_cast<int64_t>(x));
    if (is_floating(strong) || (is_integral(strong) && integral_value)) {
      val.constant = val.constant.astype(strong);
      val.dtype = strong;
    }
    val.weak_type = false;
  }
}
}  // namespace

void infer_types(Graph& g) {
  for (Node& n : g.nodes()) {
    resolve_weak_scalars(g, n);
    infer_node_dtypes(g, n);
    infer_subgraphs_of(g, n);
  }
}

}  // namespace ingot
