// Algebraic simplification, to a fixpoint:
//   x*1, 1*x, x+0, 0+x, x-0, x/1   -> x   (the constant all ones / zeros)
//   transpose(transpose(x, p), q)   -> transpose(x, p∘q), or x when that is the identity
//   transpose(x, identity)          -> x
//   reshape(reshape(x))             -> reshape(x)
//   reshape(x) to x's own shape     -> x
//   cast(x) to x's own dtype        -> x
//   identity(x), dropout(x, training=0), broadcast_to(x) to x's own shape -> x
//   f(x, broadcast_to(s)) -> f(x, s)  for an elementwise f and a one-element s (a scalar or a
//                                     [1, 1] constant), when x alone already gives f its shape:
//                                     elementwise ops broadcast by themselves, and the scalar
//                                     stays a scalar for the backends (no full-size buffer)
//   pow(x, 1) -> x, pow(x, 2) -> x*x  for a floating x and a one-element constant exponent (x*x is
//                                     the correctly rounded square, as the reference's pow rounds
//                                     its double result, NaN, inf and -0 included; the gradient of
//                                     sum(x**2) is 2*pow(x, 1), so both appear in training graphs,
//                                     where a generic pow cost an exp and a log an element)
// A replacement only happens when x has exactly the dtype and shape of the value it replaces, so
// x*1 that promotes (int * 1.0) or broadcasts (x[3] * ones[2, 3]) is kept. The 1 and 0 of x*1,
// x+0, x-0 and x/1 may be broadcast: broadcast_to(1) counts as 1.
#include <algorithm>
#include <numeric>
#include <optional>

#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {

namespace {

bool all_equal_to(const Graph& g, const Value& v, double x) {
  if (v.producer >= 0 && g.node(v.producer).op == "broadcast_to")
    return all_equal_to(g, g.value(g.node(v.producer).inputs[0]), x);
  if (v.kind != ValueKind::Constant || !v.constant.defined()) return false;
  const Tensor& t = v.constant;
  if (t.numel() > 4096) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.item(i) != x) return false;
  return true;
}

bool same_type_and_shape(const Graph& g, ValueId a, ValueId b) {
  const Value& va = g.value(a);
  const Value& vb = g.value(b);
  return va.dtype == vb.dtype && va.shape == vb.shape;
}

std::vector<int64_t> perm_of(const Node& n, size_t rank) {
  std::vector<int64_t> p = n.attrs.get_ints("perm", {});
  if (p.empty()) {
    p.resize(rank);
    for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(rank - 1 - i);
  }
  for (int64_t& x : p)
    if (x < 0) x += static_cast<int64_t>(rank);
  return p;
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// A static shape of one element ([] or [1, ..., 1]).
bool one_element(const SymShape& s) {
  for (const SymDim& d : s)
    if (d.value != 1) return false;
  return true;
}

// NumPy broadcasting of `shapes`; nullopt when two dims may differ (a symbol against another
// symbol or a size other than 1), so callers only act on shapes they can prove.
std::optional<SymShape> broadcast_of(const std::vector<SymShape>& shapes) {
  size_t rank = 0;
  for (const SymShape& s : shapes) rank = std::max(rank, s.size());
  SymShape out(rank, SymDim(1));
  for (const SymShape& s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      SymDim& o = out[rank - s.size() + i];
      const SymDim& d = s[i];
      if (d.value == 1 || d == o) continue;
      if (o.value != 1) return std::nullopt;
      o = d;
    }
  return out;
}

// f(..., broadcast_to(s), ...) with f elementwise and s one element: the input `k` that can read
// s itself, leaving f's output shape as it is; -1 when there is none.
int broadcast_scalar_input(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2 || get_op(n.op).fusion != FusionClass::Elementwise) return -1;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Value& b = g.value(n.inputs[k]);
    if (b.producer < 0 || g.node(b.producer).op != "broadcast_to") continue;
    const ValueId s = g.node(b.producer).inputs[0];
    // A weak literal would take f's other operand's dtype if types were inferred again; the
    // broadcast fixed it, so such a scalar keeps its broadcast.
    if (!one_element(g.value(s).shape) || g.value(s).dtype != b.dtype || g.value(s).weak_type) continue;
    std::vector<SymShape> shapes;
    for (size_t j = 0; j < n.inputs.size(); ++j) shapes.push_back(g.value(j == k ? s : n.inputs[j]).shape);
    const std::optional<SymShape> out = broadcast_of(shapes);
    if (out && *out == g.value(n.outputs[0]).shape) return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

PassReport simplify(Graph& g, const PassContext&) {
  PassReport report;
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<int> uses = g.use_counts();
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      Node& n = g.nodes()[i];
      if (n.outputs.size() != 1) continue;
      const ValueId out = n.outputs[0];
      if (uses[out] == 0) continue;  // already bypassed
      ValueId repl = -1;
      std::string what;
      auto in = [&](size_t k) { return n.inputs[k]; };
      if (const int k = broadcast_scalar_input(g, n); k >= 0) {
        n.inputs[static_cast<size_t>(k)] = g.node(g.value(in(static_cast<size_t>(k))).producer).inputs[0];
        report.notes.push_back(n.op + " reads a broadcast scalar directly");
        ++report.changes;
        changed = true;
        uses = g.use_counts();
        continue;
      }
      if (n.op == "mul" || n.op == "add") {
        double unit = n.op == "mul" ? 1.0 : 0.0;
        for (size_t k = 0; k < 2 && repl < 0; ++k)
          if (all_equal_to(g, g.value(in(1 - k)), unit) && same_type_and_shape(g, in(k), out)) repl = in(k);
        what = n.op == "mul" ? "x*1" : "x+0";
      } else if (n.op == "sub" || n.op == "div") {
        double unit = n.op == "div" ? 1.0 : 0.0;
        if (all_equal_to(g, g.value(in(1)), unit) && same_type_and_shape(g, in(0), out)) repl = in(0);
        what = n.op == "div" ? "x/1" : "x-0";
      } else if (n.op == "pow" && is_floating(g.value(in(0)).dtype) && same_type_and_shape(g, in(0), out) &&
                 g.value(in(1)).kind == ValueKind::Constant && one_element(g.value(in(1)).shape)) {
        if (all_equal_to(g, g.value(in(1)), 1.0)) {
          repl = in(0);
          what = "pow(x, 1)";
        } else if (all_equal_to(g, g.value(in(1)), 2.0)) {
          n.op = "mul";
          n.inputs = {in(0), in(0)};
          n.attrs = Attrs{};
          report.notes.push_back("pow(x, 2) -> x*x" + (n.scope.empty() ? "" : " in '" + n.scope + "'"));
          ++report.changes;
          changed = true;
          continue;
        }
      } else if (n.op == "identity" || (n.op == "dropout" && n.attrs.get_int("training", 0) == 0)) {
        if (same_type_and_shape(g, in(0), out)) repl = in(0);
        what = n.op;
      } else if (n.op == "cast" || n.op == "broadcast_to" || n.op == "reshape") {
        if (same_type_and_shape(g, in(0), out)) repl = in(0);
        what = n.op + " to the same " + (n.op == "cast" ? "type" : "shape");
        if (repl < 0 && n.op == "reshape") {
          const Value& x = g.value(in(0));
          if (x.producer >= 0 && g.node(x.producer).op == "reshape") {
            const Value& o = g.value(out);
            std::vector<int64_t> shape = n.attrs.get_ints("shape", {});
            bool has_zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
            if (is_static(o.shape) || !has_zero) {
              if (is_static(o.shape)) shape = to_shape(o.shape);
              n.inputs[0] = g.node(x.producer).inputs[0];
              n.attrs.set("shape", shape);
              report.notes.push_back("reshape of reshape -> one reshape");
              ++report.changes;
              changed = true;
              continue;
            }
          }
        }
      } else if (n.op == "transpose") {
        const Value& x = g.value(in(0));
        std::vector<int64_t> p = perm_of(n, x.shape.size());
        if (is_identity(p)) {
          repl = in(0);
          what = "identity transpose";
        } else if (x.producer >= 0 && g.node(x.producer).op == "transpose") {
          const Node& inner = g.node(x.producer);
          std::vector<int64_t> q = perm_of(inner, g.value(inner.inputs[0]).shape.size());
          std::vector<int64_t> composed(p.size());
          for (size_t k = 0; k < p.size(); ++k) composed[k] = q[static_cast<size_t>(p[k])];
          n.inputs[0] = inner.inputs[0];
          if (is_identity(composed)) {
            repl = n.inputs[0];
            what = "double transpose (identity)";
          } else {
            n.attrs.set("perm", composed);
            report.notes.push_back("double transpose -> one transpose");
            ++report.changes;
            changed = true;
            continue;
          }
        }
      }
      if (repl >= 0) {
        replace_uses(g, out, repl);
        uses = g.use_counts();
        report.notes.push_back("removed " + what + (n.scope.empty() ? "" : " in '" + n.scope + "'"));
        ++report.changes;
        changed = true;
      }
    }
    if (changed) remove_dead_nodes(g);
  }
  return report;
}

}  // namespace ingot
