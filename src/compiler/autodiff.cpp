#include "compiler/autodiff.h"


#include "compiler/shape_inference.h"
#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {
namespace {

std::string where_of(const Node& n) {
  return "'" + n.op + "'" + (n.scope.empty() ? "" : " in '" + n.scope + "'");
}

class Backward final : public VjpContext {
 public:
  Backward(Graph& g, std::vector<bool> active) : g_(g), active_(std::move(active)), grads_(g.values().size(), -1) {}

  void seed(ValueId v, ValueId cotangent) { accumulate(v, cotangent); }
  ValueId grad_of(ValueId v) const { return v < static_cast<ValueId>(grads_.size()) ? grads_[v] : -1; }

  void differentiate(NodeId id) {
    node_ = id;
    const Node& n = g_.node(id);
    bool any_out = false, any_in = false;
    for (ValueId v : n.outputs) any_out = any_out || grad_of(v) >= 0;
    for (ValueId v : n.inputs) any_in = any_in || active_[v];
    if (!any_out || !any_in) return;
    const OpDef& def = get_op(n.op);
    if (!def.vjp) {
      // Gradient ops (conv2d's and the pools') appear only in backward graphs: reaching one means
      // a gradient of a gradient, where marking inputs as data would not help.
      const bool gradient_op = n.op.size() > 5 && n.op.compare(n.op.size() - 5, 5, "_grad") == 0;
      INGOT_FAIL("Cannot differentiate through ", where_of(n), " (it produces '",
                 describe_value(g_, n.outputs[0]), "'): the op has no gradient rule",
                 gradient_op ? "; it is a gradient op, and ingot has no second-order rule for it (grad of grad "
                               "through conv2d and the pools)"
                             : "; mark the inputs that feed it as data_keys or constants, or discard the outputs "
                               "that read it");
    }
    def.vjp(*this);
  }

  // --- VjpContext ---
  const Node& node() const override { return g_.node(node_); }
  const SymShape& shape(ValueId v) const override { return g_.value(v).shape; }
  DType dtype(ValueId v) const override { return g_.value(v).dtype; }
  ValueId grad_out(int i) const override { return grad_of(out(i)); }
  bool needs_grad(int i) const override { return active_[in(i)]; }
  std::vector<ValueId> op_n(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                            int num_outputs) override {
    return op_with_subgraphs(op, std::move(inputs), std::move(attrs), {}, num_outputs);
  }
  std::vector<ValueId> op_with_subgraphs(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                                         std::vector<Graph> subgraphs, int num_outputs) override {
    // Seeding one value twice adds its cotangents before any node is differentiated (node_ < 0).
    const std::string fwd_scope = node_ < 0 ? std::string() : node().scope;
    std::string scope = fwd_scope.empty() ? "backward" : fwd_scope + ".backward";
    std::vector<ValueId> outs = g_.add_node(op, std::move(inputs), std::move(attrs), num_outputs, std::move(scope));
    g_.node(g_.value(outs[0]).producer).subgraphs = std::move(subgraphs);
    infer_node(g_, g_.value(outs[0]).producer);
    return outs;
  }
  ValueId scalar(double value, DType dtype) override {
    return g_.add_constant("", Tensor::full(DType::Float64, {}, value).astype(dtype));
  }
  void set_grad(int i, ValueId grad) override {
    if (!needs_grad(i)) return;
    const ValueId x = in(i);
    INGOT_CHECK(shape(grad) == shape(x), "Gradient rule of ", where_of(node()), " gave input ", i,
                " a gradient of shape ", to_string(shape(grad)), " but the input has shape ",
                to_string(shape(x)));
    accumulate(x, cast_like(grad, x));
  }

 private:
  void accumulate(ValueId v, ValueId grad) {
    if (grads_.size() < g_.values().size()) grads_.resize(g_.values().size(), -1);
    grads_[v] = grads_[v] < 0 ? grad : op("add", {grads_[v], grad});
  }

  Graph& g_;
  std::vector<bool> active_;
  std::vector<ValueId> grads_;
  NodeId node_ = -1;
};

}  // namespace

std::vector<ValueId> append_backward(Graph& g, const std::vector<std::pair<ValueId, ValueId>>& seeds,
                                     const std::vector<ValueId>& wrt) {
  const auto num_values = static_cast<ValueId>(g.values().size());
  const auto num_nodes = static_cast<NodeId>(g.nodes().size());
  auto check_value = [&](ValueId v, const char* what) {
    INGOT_CHECK(v >= 0 && v < num_values, "append_backward: ", what, " %", v, " is not a value of the graph");
    INGOT_CHECK(g.value(v).shape_known, "append_backward: '", describe_value(g, v),
                "' has no shape; run shape and type inference first");
  };
  for (ValueId w : wrt) check_value(w, "wrt value");
  for (const auto& [out, cot] : seeds) {
    check_value(out, "seeded value");
    check_value(cot, "cotangent");
    INGOT_CHECK(is_floating(g.value(out).dtype), "append_backward: cannot seed '", describe_value(g, out),
                "': it is ", dtype_name(g.value(out).dtype), ", and only floating-point values have gradients");
    INGOT_CHECK(g.value(cot).dtype == g.value(out).dtype, "append_backward: the cotangent of '",
                describe_value(g, out), "' is ", dtype_name(g.value(cot).dtype), ", expected ",
                dtype_name(g.value(out).dtype));
    INGOT_CHECK(g.value(cot).shape == g.value(out).shape, "append_backward: the cotangent of '",
                describe_value(g, out), "' has shape ", to_string(g.value(cot).shape), ", expected ",
                to_string(g.value(out).shape));
  }

  // Active values: floating point, reached from a wrt value, and reaching a seeded output.
  std::vector<bool> from_wrt(static_cast<size_t>(num_values), false), to_seed(static_cast<size_t>(num_values), false);
  for (ValueId w : wrt) from_wrt[w] = true;
  for (const Node& n : g.nodes()) {
    bool reached = false;
    for (ValueId v : n.inputs) reached = reached || from_wrt[v];
    for (ValueId v : n.outputs) from_wrt[v] = reached;
  }
  for (const auto& [out, cot] : seeds) to_seed[out] = true;
  for (NodeId i = num_nodes; i-- > 0;) {
    const Node& n = g.node(i);
    bool reaches = false;
    for (ValueId v : n.outputs) reaches = reaches || to_seed[v];
    if (reaches)
      for (ValueId v : n.inputs) to_seed[v] = true;
  }
  std::vector<bool> active(static_cast<size_t>(num_values));
  for (ValueId v = 0; v < num_values; ++v)
    active[v] = from_wrt[v] && to_seed[v] && is_floating(g.value(v).dtype);

  Backward bw(g, active);
  for (const auto& [out, cot] : seeds)
    if (active[out]) bw.seed(out, cot);
  for (NodeId i = num_nodes; i-- > 0;) bw.differentiate(i);

  std::vector<ValueId> result;
  for (ValueId w : wrt) {
    ValueId grad = bw.grad_of(w);
    if (grad < 0) {
      grad = g.add_node("zeros_like", {w}, {}, 1, "backward")[0];
      infer_node(g, g.value(grad).producer);
    }
    result.push_back(grad);
  }
  return result;
}

}  // namespace ingot
