// Algebraic simplification, to a fixpoint:
//   x*1, 1*x, x+0, 0+x, x-0, x/1   -> x   (the constant all ones / zeros)
//   transpose(transpose(x, p), q)   -> transpose(x, p∘q), or x when that is the identity
//   transpose(x, identity)          -> x
//   reshape(reshape(x))             -> reshape(x)
//   reshape(x) to x's own shape     -> x
//   cast(x) to x's own dtype        -> x
//   identity(x), dropout(x, training=0), broadcast_to(x) to x's own shape -> x
// A replacement only happens when x has exactly the dtype and shape of the value it replaces, so
// x*1 that promotes (int * 1.0) or broadcasts (x[3] * ones[2, 3]) is kept.
#include <numeric>

#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {

namespace {

bool all_equal_to(const Value& v, double x) {
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
      if (n.op == "mul" || n.op == "add") {
        double unit = n.op == "mul" ? 1.0 : 0.0;
        for (size_t k = 0; k < 2 && repl < 0; ++k)
          if (all_equal_to(g.value(in(1 - k)), unit) && same_type_and_shape(g, in(k), out)) repl = in(k);
        what = n.op == "mul" ? "x*1" : "x+0";
      } else if (n.op == "sub" || n.op == "div") {
        double unit = n.op == "div" ? 1.0 : 0.0;
        if (all_equal_to(g.value(in(1)), unit) && same_type_and_shape(g, in(0), out)) repl = in(0);
        what = n.op == "div" ? "x/1" : "x-0";
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
