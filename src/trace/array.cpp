// Array handles and op recording. Every op goes through record(): literals take their
// operand's dtype, then the op registry's own shape and dtype rules run on a one-node graph, so
// a bad op fails at the line that wrote it, with the registry's message.
#include <cmath>

#include "compiler/shape_inference.h"
#include "ingot/array.h"
#include "ingot/error.h"
#include "ir/op_registry.h"
#include "trace/array_impl.h"
#include "trace/trace_state.h"

namespace ingot {

using detail::ArrayImpl;
using detail::OpRecord;

namespace {

std::shared_ptr<ArrayImpl> data_impl(Tensor t) {
  INGOT_CHECK(t.defined(), "Array: the tensor is undefined");
  auto impl = std::make_shared<ArrayImpl>();
  impl->dtype = t.dtype();
  impl->shape = t.shape();
  impl->data = std::move(t);
  return impl;
}

std::shared_ptr<ArrayImpl> literal_impl(Tensor t, double value) {
  auto impl = data_impl(std::move(t));
  impl->literal = true;
  impl->literal_value = value;
  return impl;
}

const ArrayImpl& checked(const Array& a, const char* what) {
  INGOT_CHECK(a.defined(), what, ": the array is undefined (default-constructed)");
  return *a.impl();
}

// A scalar literal takes the dtype of the first array operand it meets that is neither a
// literal nor bool (the rule type inference applies to weak scalars in the IR).
std::vector<std::shared_ptr<ArrayImpl>> resolve_literals(const std::vector<Array>& inputs) {
  std::vector<std::shared_ptr<ArrayImpl>> out;
  const ArrayImpl* strong = nullptr;
  for (const Array& a : inputs)
    if (!a.impl()->literal && a.dtype() != DType::Bool && !strong) strong = a.impl().get();
  for (const Array& a : inputs) {
    std::shared_ptr<ArrayImpl> impl = a.impl();
    if (impl->literal && strong && impl->dtype != strong->dtype) {
      const double x = impl->literal_value;
      const bool integral_value = x == std::floor(x) && std::isfinite(x);
      if (is_floating(strong->dtype) || (is_integral(strong->dtype) && integral_value))
        impl = literal_impl(Tensor::full(strong->dtype, {}, x), x);
    }
    out.push_back(std::move(impl));
  }
  return out;
}

}  // namespace

Array::Array(Tensor value) : impl_(data_impl(std::move(value))) {}
Array::Array(float value) : impl_(literal_impl(Tensor::scalar<float>(value), value)) {}
Array::Array(double value) : impl_(literal_impl(Tensor::scalar<float>(static_cast<float>(value)), value)) {}
Array::Array(int value) : impl_(literal_impl(Tensor::scalar<int32_t>(value), value)) {}

DType Array::dtype() const { return checked(*this, "Array::dtype").dtype; }
const Shape& Array::shape() const { return checked(*this, "Array::shape").shape; }
int64_t Array::dim(int axis) const {
  const int r = ndim();
  INGOT_CHECK(axis >= -r && axis < r, "Array::dim: axis ", axis, " out of range for rank ", r);
  return shape()[static_cast<size_t>(axis < 0 ? axis + r : axis)];
}
bool Array::is_evaluated() const { return checked(*this, "Array::is_evaluated").data.defined(); }
bool Array::is_placeholder() const { return checked(*this, "Array::is_placeholder").placeholder; }

const Tensor& Array::tensor() const {
  checked(*this, "Array::tensor");
  if (!impl_->data.defined()) detail::eval_now({*this});  // at once, even inside a CompileRegion
  return impl_->data;
}

Array Array::astype(DType t) const { return ingot::astype(*this, t); }

std::vector<Array> op_n(const std::string& name, const std::vector<Array>& inputs, Attrs attrs) {
  const OpDef& def = get_op(name);
  for (size_t i = 0; i < inputs.size(); ++i)
    INGOT_CHECK(inputs[i].defined(), "ingot::", name, ": input ", i, " is undefined (default-constructed)");
  const int n = static_cast<int>(inputs.size());
  INGOT_CHECK(n >= def.min_inputs && (def.max_inputs < 0 || n <= def.max_inputs), "ingot::", name, ": takes ",
              def.min_inputs, def.max_inputs == def.min_inputs ? "" : "..",
              def.max_inputs == def.min_inputs ? "" : (def.max_inputs < 0 ? "any" : std::to_string(def.max_inputs)),
              " inputs, got ", n);
  INGOT_CHECK(def.subgraph_names.empty(), "ingot::", name, ": a control-flow op; use cond, while_loop or scan");
  return detail::record_op(name, resolve_literals(inputs), std::move(attrs), {}, def.num_outputs);
}

namespace detail {

std::vector<Array> record_op(const std::string& name, std::vector<std::shared_ptr<ArrayImpl>> inputs, Attrs attrs,
                             std::vector<Graph> subgraphs, int num_outputs) {
  auto record = std::make_shared<OpRecord>();
  record->op = name;
  record->attrs = std::move(attrs);
  record->inputs = std::move(inputs);
  record->num_outputs = num_outputs;
  record->subgraphs = std::move(subgraphs);

  // The registry's shape and dtype rules on a one-node graph with concrete input shapes.
  Graph g;
  std::vector<ValueId> ins;
  for (const auto& impl : record->inputs) {
    ValueId v = g.add_input("in" + std::to_string(ins.size()));
    Value& val = g.value(v);
    val.dtype = impl->dtype;
    val.shape.assign(impl->shape.begin(), impl->shape.end());
    val.shape_known = true;
    ins.push_back(v);
  }
  std::vector<ValueId> outs = g.add_node(name, ins, record->attrs, num_outputs);
  if (!record->subgraphs.empty()) g.node(0).subgraphs = record->subgraphs;
  try {
    verify(g);
    infer_shapes(g, {});
    infer_types(g);
  } catch (const Error& e) {
    INGOT_FAIL("ingot::", name, ": ", e.what());
  }
  if (!record->subgraphs.empty()) record->subgraphs = g.node(0).subgraphs;  // now with inferred shapes
  std::vector<Array> result;
  for (int k = 0; k < num_outputs; ++k) {
    const Value& v = g.value(outs[static_cast<size_t>(k)]);
    INGOT_CHECK(is_static(v.shape), "ingot::", name, ": output shape ", to_string(v.shape),
                " is not determined by the input shapes");
    auto impl = std::make_shared<ArrayImpl>();
    impl->dtype = v.dtype;
    impl->shape = to_shape(v.shape);
    impl->record = record;
    impl->index = k;
    result.emplace_back(std::move(impl));
  }
  return result;
}

}  // namespace detail

Array op(const std::string& name, const std::vector<Array>& inputs, Attrs attrs) {
  std::vector<Array> out = op_n(name, inputs, std::move(attrs));
  INGOT_CHECK(out.size() == 1, "ingot::op: '", name, "' has ", out.size(), " outputs; use op_n");
  return out[0];
}

// ---- creation

Array array(Tensor value) { return Array(std::move(value)); }
Array full(Shape shape, double value, DType dtype) { return Array(Tensor::full(dtype, std::move(shape), value)); }
Array zeros(Shape shape, DType dtype) { return full(std::move(shape), 0, dtype); }
Array ones(Shape shape, DType dtype) { return full(std::move(shape), 1, dtype); }
Array arange(int64_t n, DType dtype) {
  INGOT_CHECK(n >= 0, "ingot::arange: negative length ", n);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i);
  return Array(Tensor::from_vector<double>(v, {n}).astype(dtype));
}
Array scalar(double value) { return Array(value); }

// ---- elementwise

Array operator+(const Array& a, const Array& b) { return op("add", {a, b}); }
Array operator-(const Array& a, const Array& b) { return op("sub", {a, b}); }
Array operator*(const Array& a, const Array& b) { return op("mul", {a, b}); }
Array operator/(const Array& a, const Array& b) { return op("div", {a, b}); }
Array operator%(const Array& a, const Array& b) { return op("mod", {a, b}); }
Array operator-(const Array& a) { return op("neg", {a}); }
Array operator<(const Array& a, const Array& b) { return op("less", {a, b}); }
Array operator<=(const Array& a, const Array& b) { return op("less_equal", {a, b}); }
Array operator>(const Array& a, const Array& b) { return op("greater", {a, b}); }
Array operator>=(const Array& a, const Array& b) { return op("greater_equal", {a, b}); }
Array equal(const Array& a, const Array& b) { return op("equal", {a, b}); }
Array not_equal(const Array& a, const Array& b) { return op("not_equal", {a, b}); }
Array pow(const Array& a, const Array& b) { return op("pow", {a, b}); }
Array mod(const Array& a, const Array& b) { return op("mod", {a, b}); }
Array fmod(const Array& a, const Array& b) { return op("fmod", {a, b}); }
Array maximum(const Array& a, const Array& b) { return op("maximum", {a, b}); }
Array minimum(const Array& a, const Array& b) { return op("minimum", {a, b}); }
Array where(const Array& cond, const Array& a, const Array& b) { return op("where", {cond, a, b}); }
Array exp(const Array& x) { return op("exp", {x}); }
Array log(const Array& x) { return op("log", {x}); }
Array sqrt(const Array& x) { return op("sqrt", {x}); }
Array rsqrt(const Array& x) { return op("rsqrt", {x}); }
Array sin(const Array& x) { return op("sin", {x}); }
Array cos(const Array& x) { return op("cos", {x}); }
Array tanh(const Array& x) { return op("tanh", {x}); }
Array sigmoid(const Array& x) { return op("sigmoid", {x}); }
Array erf(const Array& x) { return op("erf", {x}); }
Array gelu(const Array& x, bool tanh_approximation) {
  return op("gelu", {x}, {{"approximate", std::string(tanh_approximation ? "tanh" : "none")}});
}
Array abs(const Array& x) { return op("abs", {x}); }
Array relu(const Array& x) { return op("relu", {x}); }
Array sign(const Array& x) { return op("sign", {x}); }
Array floor(const Array& x) { return op("floor", {x}); }
Array ceil(const Array& x) { return op("ceil", {x}); }
Array square(const Array& x) { return op("mul", {x, x}); }
Array astype(const Array& x, DType t) { return op("cast", {x}, {{"dtype", std::string(dtype_name(t))}}); }

// ---- reductions

namespace {
Array reduce(const char* name, const Array& x, std::vector<int64_t> axes, bool keepdims) {
  return op(name, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}
}  // namespace

Array sum(const Array& x, std::vector<int64_t> axes, bool keepdims) { return reduce("sum", x, std::move(axes), keepdims); }
Array mean(const Array& x, std::vector<int64_t> axes, bool keepdims) { return reduce("mean", x, std::move(axes), keepdims); }
Array max(const Array& x, std::vector<int64_t> axes, bool keepdims) { return reduce("max", x, std::move(axes), keepdims); }
Array min(const Array& x, std::vector<int64_t> axes, bool keepdims) { return reduce("min", x, std::move(axes), keepdims); }
Array argmax(const Array& x, int64_t axis, bool keepdims) {
  return op("argmax", {x}, {{"axis", axis}, {"keepdims", int64_t{keepdims}}});
}
std::pair<Array, Array> moments(const Array& x, std::vector<int64_t> axes, bool keepdims) {
  std::vector<Array> mv = op_n("moments", {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
  return {mv[0], mv[1]};
}

std::pair<Array, Array> top_k(const Array& x, int64_t k, int64_t axis, bool largest) {
  std::vector<Array> vi = op_n("top_k", {x}, {{"k", k}, {"axis", axis}, {"largest", int64_t{largest}}});
  return {vi[0], vi[1]};
}
Array softmax(const Array& x, int64_t axis) { return op("softmax", {x}, {{"axis", axis}}); }
Array log_softmax(const Array& x, int64_t axis) { return op("log_softmax", {x}, {{"axis", axis}}); }
Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, const std::optional<Array>& mask,
                                   double scale, bool causal, int64_t causal_offset) {
  std::vector<Array> operands = {q, k, v};
  if (mask) operands.push_back(*mask);
  return op("scaled_dot_product_attention", operands,
            {{"scale", scale}, {"causal", int64_t{causal}}, {"causal_offset", causal_offset}});
}
Array layer_norm(const Array& x, const Array& weight, const Array& bias, int64_t axis, double eps) {
  return op("layer_norm", {x, weight, bias}, {{"axis", axis}, {"eps", eps}});
}
Array rms_norm(const Array& x, const std::optional<Array>& weight, int64_t axis, double eps) {
  std::vector<Array> operands = {x};
  if (weight) operands.push_back(*weight);
  return op("rms_norm", operands, {{"axis", axis}, {"eps", eps}});
}

// ---- linear algebra

Array matmul(const Array& a, const Array& b) { return op("matmul", {a, b}); }
Array conv2d(const Array& x, const Array& w, std::vector<int64_t> stride, std::vector<int64_t> padding) {
  return op("conv2d", {x, w}, {{"stride", std::move(stride)}, {"padding", std::move(padding)}});
}
Array max_pool2d(const Array& x, std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> padding,
                 bool ceil_mode) {
  Attrs a = {{"kernel", kernel}, {"stride", stride.empty() ? kernel : std::move(stride)}, {"padding", std::move(padding)}};
  if (ceil_mode) a.set("ceil_mode", int64_t{1});
  return op("max_pool2d", {x}, std::move(a));
}

// ---- movement

Array reshape(const Array& x, std::vector<int64_t> shape) { return op("reshape", {x}, {{"shape", std::move(shape)}}); }
Array transpose(const Array& x, std::vector<int64_t> perm) {
  Attrs attrs;
  if (!perm.empty()) attrs.set("perm", std::move(perm));
  return op("transpose", {x}, std::move(attrs));
}
Array broadcast_to(const Array& x, std::vector<int64_t> shape) {
  return op("broadcast_to", {x}, {{"shape", std::move(shape)}});
}
Array slice(const Array& x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
            std::vector<int64_t> steps) {
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  return op("slice", {x},
            {{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"axes", std::move(axes)}, {"steps", std::move(steps)}});
}
Array concatenate(const std::vector<Array>& xs, int64_t axis) { return op("concat", xs, {{"axis", axis}}); }
Array take(const Array& x, const Array& indices, int64_t axis) { return op("gather", {x, indices}, {{"axis", axis}}); }
Array take_along_axis(const Array& x, const Array& indices, int64_t axis) {
  return op("take_along_axis", {x, indices}, {{"axis", axis}});
}
Array one_hot(const Array& labels, int64_t classes, DType dtype) {
  INGOT_CHECK(is_integral(labels.dtype()), "ingot::one_hot: labels must be integers, got ", dtype_name(labels.dtype()));
  INGOT_CHECK(classes > 0, "ingot::one_hot: classes must be positive, got ", classes);
  Array cls = reshape(arange(classes, labels.dtype()), {classes});
  std::vector<int64_t> shape = labels.shape();
  shape.push_back(1);
  return astype(equal(reshape(labels, shape), cls), dtype);
}

// ---- random

namespace random {
namespace {
Array key_or_new(const Array& key) { return key.defined() ? key : new_key(); }
}  // namespace

Array& state() {
  static thread_local Array s(Tensor::scalar<int64_t>(0));
  return s;
}
void seed(uint64_t s) { state() = Array(Tensor::scalar<int64_t>(static_cast<int64_t>(s))); }
Array new_key() {
  Array key = state();
  state() = key + Array(Tensor::scalar<int64_t>(1));
  return key;
}
Array uniform(Shape shape, double low, double high, DType dtype, const Array& key) {
  return op("random_uniform", {key_or_new(key)},
            {{"shape", std::move(shape)}, {"low", low}, {"high", high}, {"seed", int64_t{0x1f}},
             {"dtype", std::string(dtype_name(dtype))}});
}
Array normal(Shape shape, double mean, double std, DType dtype, const Array& key) {
  return op("random_normal", {key_or_new(key)},
            {{"shape", std::move(shape)}, {"mean", mean}, {"std", std}, {"seed", int64_t{0x2f}},
             {"dtype", std::string(dtype_name(dtype))}});
}
}  // namespace random

Array dropout(const Array& x, double p, const Array& key) {
  return op("dropout", {x, key.defined() ? key : random::new_key()},
            {{"p", p}, {"seed", int64_t{0x3f}}, {"training", int64_t{1}}});
}

}  // namespace ingot
