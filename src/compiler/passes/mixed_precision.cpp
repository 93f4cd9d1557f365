// Mixed precision: every matmul, conv2d and scaled_dot_product_attention (and its gradient)
// whose operands are float32 (an attention's bool mask aside) runs in the low type
// (PassContext::mixed_precision: "bfloat16" or "float16"): cast nodes convert its float operands
// to the low type and its results back to float32, so every other op and the graph's outputs
// keep their float32 types (as PyTorch's autocast does for these ops; the attention's gradients
// are rounded once to the low type, as autocast's are). A convolution's gradients (conv2d_input_grad,
// conv2d_weight_grad, also ONNX's ConvTranspose) take their two operands in the low type too, but
// not the third, `like`, whose type is their result's: they accumulate the low-precision products
// into a float32 result that is never rounded to the low type (PyTorch rounds a bf16 conv's
// gradients to bf16). The reference kernels accumulate low-precision inputs in float32
// (attention: in double, its softmax included).
#include <functional>
#include <map>
#include <span>
#include <utility>

#include "compiler/layout_plan.h"
#include "compiler/passes/passes.h"
#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {

std::vector<NodeId> run_in_dtype(Graph& g, const std::function<std::optional<DType>(const Node&)>& compute,
                                 const std::string& suffix, const std::function<bool(const Node&, size_t)>& converts) {
  const size_t count = g.nodes().size();
  std::vector<std::vector<NodeId>> before(count), after(count);  // new nodes around each node
  // Each value's converted form, made once per type and shared by every node that reads it (a
  // weight read by its forward matmul and by the backward's, an activation by three projections).
  std::map<std::pair<ValueId, DType>, ValueId> converted;
  std::vector<size_t> changed;
  for (size_t i = 0; i < count; ++i) {
    const Node node = g.nodes()[i];
    const std::optional<DType> t = compute(node);
    if (!t) continue;
    // v in type *t: a constant converted here, once, not on every call; a transpose's result as
    // the transpose of its converted input (the same values: a rounding commutes with moving
    // elements), so a backend that reads a transposed matmul operand in place (the CPU backend's
    // folded transposes) still can, and the input's conversion is shared with its other readers;
    // a widened low value as the value itself; anything else through a cast node placed before
    // node i.
    const std::function<ValueId(ValueId)> low = [&](ValueId v) -> ValueId {
      auto [it, fresh] = converted.try_emplace({v, *t}, ValueId{-1});
      if (!fresh) return it->second;
      const Value& x = g.value(v);
      ValueId made = -1;
      if (x.kind == ValueKind::Constant) {
        std::string name = x.name + "." + suffix;
        if (x.name.empty() || g.find_leaf(name)) name = "converted_" + std::to_string(g.values().size());
        const Tensor converted_value = x.constant.astype(*t);
        const SymShape shape = x.shape;
        const bool known = x.shape_known;
        made = g.add_constant(name, converted_value);
        g.value(made).shape = shape;
        g.value(made).shape_known = known;
      } else if (const NodeId p = x.producer;
                 p >= 0 && g.node(p).op == "cast" && g.value(g.node(p).inputs[0]).dtype == *t && is_floating(x.dtype) &&
                 dtype_size(x.dtype) > dtype_size(*t)) {
        // A widening cast of a value already in the type (a low result cast back to float32):
        // narrowing it again gives that value exactly.
        made = g.node(p).inputs[0];
      } else {
        // (Narrowing only: a transpose moves fewer bytes in the low type, and the caller's dce
        // removes the one left unread; the CPU backend's widening runs no dce after.)
        const bool through = p >= 0 && g.node(p).op == "transpose" && g.node(p).outputs.size() == 1 &&
                             g.value(g.node(p).inputs[0]).dtype == x.dtype && dtype_size(*t) < dtype_size(x.dtype);
        const SymShape shape = x.shape;  // (x and node p's fields are copied: low() and add_op grow the graph)
        if (through) {
          const Attrs attrs = g.node(p).attrs;
          const std::string scope = g.node(p).scope;
          made = g.add_op("transpose", {low(g.node(p).inputs[0])}, attrs, scope);
        } else {
          made = g.add_op("cast", {v}, {{"dtype", std::string(dtype_name(*t))}}, node.scope);
        }
        g.value(made).dtype = *t;
        g.value(made).shape = shape;
        g.value(made).shape_known = true;
        before[i].push_back(g.value(made).producer);
      }
      converted[{v, *t}] = made;  // `it` may be stale: low() recursed and the map grew
      return made;
    };
    std::vector<ValueId> ins;
    std::vector<DType> in_types;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const ValueId v = node.inputs[k];
      // A bool mask stays a bool mask; an operand in the type already, or one `converts` keeps, stays.
      if (!is_floating(g.value(v).dtype) || g.value(v).dtype == *t || (converts && !converts(node, k))) {
        ins.push_back(v);
        in_types.push_back(g.value(v).dtype);
        continue;
      }
      in_types.push_back(*t);
      ins.push_back(low(v));
    }
    g.nodes()[i].inputs = ins;
    changed.push_back(i);
    // The results' types under the op's own rule: one that stays (a gradient shaped and typed like
    // an operand left as it was) needs no cast back.
    std::vector<DType> computed(node.outputs.size(), *t);  // an op without a dtype rule: the type
    if (const DTypeRule rule = get_op(node.op).dtype) rule(g.nodes()[i], in_types, std::span<DType>(computed));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId out = node.outputs[o];
      const DType result = g.value(out).dtype;
      if (computed[o] == result) continue;
      ValueId back = g.add_op("cast", {out}, {{"dtype", std::string(dtype_name(result))}}, node.scope);
      replace_uses(g, out, back);
      g.node(g.value(back).producer).inputs = {out};  // replace_uses rewrote the cast's own input
      Value& b = g.value(back);
      b.dtype = result;
      b.shape = g.value(out).shape;
      b.shape_known = true;
      b.name = g.value(out).name;
      g.value(out).name = b.name.empty() ? "" : b.name + "." + suffix;
      g.value(out).dtype = computed[o];
      after[i].push_back(b.producer);
    }
  }
  if (changed.empty()) return {};
  std::vector<NodeId> order, new_id(count);
  for (size_t i = 0; i < count; ++i) {
    for (NodeId n : before[i]) order.push_back(n);
    new_id[i] = static_cast<NodeId>(order.size());
    order.push_back(static_cast<NodeId>(i));
    for (NodeId n : after[i]) order.push_back(n);
  }
  reorder_nodes(g, order);
  std::vector<NodeId> r;
  for (size_t i : changed) r.push_back(new_id[i]);
  return r;
}

PassReport apply_mixed_precision(Graph& g, const PassContext& ctx) {
  PassReport report;
  if (ctx.mixed_precision == "none") return report;
  const DType low = parse_dtype(ctx.mixed_precision);
  const std::vector<NodeId> changed = run_in_dtype(
      g,
      [&](const Node& node) -> std::optional<DType> {
        const bool attention = node.op == "scaled_dot_product_attention" || node.op == "scaled_dot_product_attention_grad";
        if (node.op != "matmul" && node.op != "conv2d" && !attention && !is_conv2d_gradient(node)) return std::nullopt;
        bool f32 = g.value(node.outputs[0]).dtype == DType::Float32;
        for (ValueId v : node.inputs)
          f32 = f32 && (g.value(v).dtype == DType::Float32 || (attention && g.value(v).dtype == DType::Bool));
        return f32 ? std::optional<DType>(low) : std::nullopt;
      },
      "lowp", [&](const Node& node, size_t input) { return !is_conv2d_gradient(node) || input < 2; });
  for (NodeId n : changed) {
    const Node& node = g.node(n);
    ++report.changes;
    report.notes.push_back(node.op + (node.scope.empty() ? "" : " in '" + node.scope + "'") +
                           (is_conv2d_gradient(node) ? " on " : " in ") + std::string(dtype_name(low)) +
                           (is_conv2d_gradient(node) ? " operands" : ""));
  }
  return report;
}

}  // namespace ingot
