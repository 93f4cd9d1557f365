// The model zoo (include/ingot/models.h). Every block is a composite Model whose type name
// ("Linear") names its instances ("linear_0"); its terminals are wires declared with
// Model::input / Model::parameter, so parameters carry their initializer and shape template.
#include "ingot/models.h"

#include <string>

#include "ingot/error.h"
#include "models/model_impl.h"
#include "models/zoo_util.h"

namespace ingot {

namespace {

using zoo::add_op;
using zoo::block;

// The reserved primitive that the compiler resolves to `training` or, when compiled with
// `inference`, to `inference`; the unused path is removed as dead code.
Connection select_by_mode(Model& m, const Connection& training, const Connection& inference) {
  return add_op(m, detail::kSelectByMode, {{"training", training}, {"inference", inference}});
}

// A one-op block: "input" -> op -> "output".
Model unary_block(const std::string& type, const std::string& op, Attrs attrs = {}) {
  Model m = block(type);
  m.set_cout(apply(op, m.input("input"), std::move(attrs)));
  return m;
}

// A two-input block: "left", "right" -> op -> "output".
Model binary_block(const std::string& type, const std::string& op) {
  Model m = block(type);
  Connection left = m.input("left"), right = m.input("right");
  m.set_cout(add_op(m, op, {{"left", left}, {"right", right}}));
  return m;
}

std::vector<int64_t> pair(int64_t v) { return {v, v}; }

void check_reduction(const std::string& reduction) {
  INGOT_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none",
              "Unknown reduction '", reduction, "' (expected mean, sum or none)");
}

Connection reduce(const Connection& x, const std::string& reduction) {
  if (reduction == "mean") return x.mean();
  if (reduction == "sum") return x.sum();
  return x;
}

Model pool_block(const std::string& type, const std::string& op, int64_t kernel_size,
                 std::optional<int64_t> stride, int64_t padding, bool ceil_mode = false) {
  INGOT_CHECK(kernel_size > 0, type, ": kernel_size must be positive, got ", kernel_size);
  INGOT_CHECK(!stride || *stride > 0, type, ": stride must be positive, got ", stride.value_or(0));
  INGOT_CHECK(padding >= 0, type, ": padding must be non-negative, got ", padding);
  Attrs a = {{"kernel", pair(kernel_size)}, {"stride", pair(stride.value_or(kernel_size))}, {"padding", pair(padding)}};
  if (ceil_mode) a.set("ceil_mode", int64_t{1});
  return unary_block(type, op, std::move(a));
}

// log p[i, target[i]] for log-probabilities logp [N, C] and integer targets [N]: one element
// per row, picked with take_along_axis on the targets seen as a column [N, 1].
Connection picked_log_prob(Model& m, const Connection& logp, const Connection& target) {
  Connection picked = add_op(m, "take_along_axis", {{"input", logp}, {"indices", target.reshape({0, 1})}},
                             {{"axis", int64_t{1}}});
  return picked.reshape({0});
}

Model activation(const std::string& name) {
  if (name == "relu") return Relu();
  if (name == "gelu") return Gelu();
  if (name == "tanh") return Tanh();
  if (name == "sigmoid") return Sigmoid();
  INGOT_FAIL("Unknown activation '", name, "' (expected relu, gelu, tanh, sigmoid or none)");
}

}  // namespace

// LayerNorm and RMSNorm (zoo_util.h): `op` over the trailing dims NormOptions names, weight (and,
// with `bias`, bias) of their shape when affine; given sizes fix the input's trailing dims.
Model zoo::trailing_norm(const char* name, const char* op, const NormOptions& o, bool bias) {
  const int dims = o.normalized_shape.empty() ? o.normalized_dims : static_cast<int>(o.normalized_shape.size());
  INGOT_CHECK(dims >= 1, name, ": normalized_dims must be >= 1, got ", dims);
  INGOT_CHECK(o.eps > 0, name, ": eps must be positive, got ", o.eps);
  for (int64_t d : o.normalized_shape) INGOT_CHECK(d > 0, name, ": normalized_shape sizes must be positive, got ", d);
  Model m = block(name);
  std::optional<ShapeTemplate> sizes;
  if (!o.normalized_shape.empty()) sizes = ShapeTemplate(o.normalized_shape.begin(), o.normalized_shape.end());
  ShapeTemplate input_shape{"lead..."};
  if (sizes) input_shape.insert(input_shape.end(), sizes->begin(), sizes->end());
  Links inputs = {{"input", sizes ? m.input("input", input_shape) : m.input("input")}};
  if (o.affine) {
    inputs.emplace_back("weight", m.parameter("weight", Init::ones(), sizes));
    if (bias) inputs.emplace_back("bias", m.parameter("bias", Init::zeros(), sizes));
  }
  m.set_cout(add_op(m, op, inputs, {{"axis", int64_t{-dims}}, {"eps", o.eps}}));
  return m;
}

// Terminals: input, weight [in, out] (fan_in(0): U(±1/sqrt(in))), bias [out] (zeros), output.
Model Linear(const LinearOptions& o) {
  INGOT_CHECK(o.out_features > 0, "Linear: out_features must be positive, got ", o.out_features);
  INGOT_CHECK(!o.in_features || *o.in_features > 0, "Linear: in_features must be positive, got ", o.in_features.value_or(0));
  Model m = block("Linear");
  // A given in_features fixes the input's last dim (a mismatch is a shape error naming it).
  Connection x = o.in_features ? m.input("input", ShapeTemplate{"lead...", *o.in_features}) : m.input("input");
  Connection y = matmul(x, m.parameter("weight", Init::fan_in(0),
                                       ShapeTemplate{o.in_features ? Dim(*o.in_features) : Dim("in"), o.out_features}));
  if (o.use_bias) y = y + m.parameter("bias", Init::zeros(), ShapeTemplate{o.out_features});
  m.set_cout(y);
  return m;
}

Model Linear(int64_t out_features, bool use_bias) {
  LinearOptions o;
  o.out_features = out_features;
  o.use_bias = use_bias;
  return Linear(o);
}

// Terminals: input, weight [out, in/groups, kh, kw] (U(±1/sqrt(in/groups*kh*kw))), bias [out]
// (zeros), output.
Model Conv2d(const Conv2dOptions& o) {
  const int64_t kh = o.kernel_h.value_or(o.kernel_size), kw = o.kernel_w.value_or(o.kernel_size);
  INGOT_CHECK(o.out_channels > 0, "Conv2d: out_channels must be positive, got ", o.out_channels);
  INGOT_CHECK(kh > 0 && kw > 0, "Conv2d: kernel size must be positive, got ", kh, "x", kw);
  INGOT_CHECK(o.stride > 0 && o.dilation > 0, "Conv2d: stride and dilation must be positive");
  INGOT_CHECK(o.padding >= 0, "Conv2d: padding must be non-negative, got ", o.padding);
  INGOT_CHECK(o.groups > 0 && o.out_channels % o.groups == 0, "Conv2d: groups (", o.groups,
              ") must be positive and divide out_channels (", o.out_channels, ")");
  INGOT_CHECK(!o.in_channels || (*o.in_channels > 0 && *o.in_channels % o.groups == 0),
              "Conv2d: in_channels (", o.in_channels.value_or(0),
              ") must be positive and divisible by groups (", o.groups, ")");
  Model m = block("Conv2d");
  Dim per_group = o.in_channels ? Dim(*o.in_channels / o.groups) : Dim("in_per_group");
  Links inputs = {{"input", m.input("input")},
                  {"weight", m.parameter("weight", Init::fan_in_all_but_first(),
                                         ShapeTemplate{o.out_channels, per_group, kh, kw})}};
  if (o.use_bias)
    inputs.emplace_back("bias", m.parameter("bias", Init::zeros(), ShapeTemplate{o.out_channels}));
  m.set_cout(add_op(m, "conv2d", inputs,
                    {{"stride", pair(o.stride)},
                     {"padding", pair(o.padding)},
                     {"dilation", pair(o.dilation)},
                     {"groups", o.groups}}));
  return m;
}

Model Conv2d(int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding) {
  Conv2dOptions o;
  o.out_channels = out_channels;
  o.kernel_size = kernel_size;
  o.stride = stride;
  o.padding = padding;
  return Conv2d(o);
}

// Terminals: input [N, C, H, W], weight [C] (ones), bias [C] (zeros), running_mean [C] (zeros),
// running_var [C] (ones), output. Training normalizes with the batch's moments over N, H, W and
// declares the running statistics' next values (state "state:<name>", as PyTorch:
// (1 - momentum) running + momentum batch, the variance unbiased); inference uses them.
Model BatchNorm2d(const BatchNorm2dOptions& o) {
  const double eps = o.eps, momentum = o.momentum;
  INGOT_CHECK(eps > 0, "BatchNorm2d: eps must be positive, got ", eps);
  INGOT_CHECK(momentum >= 0 && momentum <= 1, "BatchNorm2d: momentum must be in [0, 1], got ",
              momentum);
  INGOT_CHECK(!o.num_features || *o.num_features > 0, "BatchNorm2d: num_features must be positive, got ",
              o.num_features.value_or(0));
  Model m = block("BatchNorm2d");
  const Dim c = o.num_features ? Dim(*o.num_features) : Dim("C");  // given: the input's channels must match
  Connection x = m.input("input", ShapeTemplate{nullptr, c, nullptr, nullptr});
  Connection weight = m.parameter("weight", Init::ones(), ShapeTemplate{c});
  Connection bias = m.parameter("bias", Init::zeros(), ShapeTemplate{c});
  Connection running_mean = m.parameter("running_mean", Init::zeros(), ShapeTemplate{c});
  Connection running_var = m.parameter("running_var", Init::ones(), ShapeTemplate{c});
  auto moments =
      m.add(Model::primitive("moments", {"input"}, {"mean", "variance"},
                             {{"axes", std::vector<int64_t>{0, 2, 3}}, {"keepdims", int64_t{0}}}),
            {{"input", x}});
  auto normalize = [&](const Connection& mean, const Connection& var) {
    return add_op(
        m, "batch_norm",
        {{"input", x}, {"weight", weight}, {"bias", bias}, {"mean", mean}, {"variance", var}},
        {{"eps", eps}});
  };
  Connection training = normalize(moments.at("mean"), moments.at("variance"));
  Connection count = add_op(m, "numel", {{"input", x}},
                            {{"axes", std::vector<int64_t>{0, 2, 3}}, {"dtype", std::string("float32")}});
  add_op(m, detail::kStateUpdate, {{"state", running_mean}, {"value", moments.at("mean")}}, {{"momentum", momentum}});
  add_op(m, detail::kStateUpdate, {{"state", running_var}, {"value", moments.at("variance")}, {"count", count}},
         {{"momentum", momentum}});
  m.set_cout(select_by_mode(m, training, normalize(running_mean, running_var)));
  return m;
}

Model BatchNorm2d(double eps, double momentum) {
  BatchNorm2dOptions o;
  o.eps = eps;
  o.momentum = momentum;
  return BatchNorm2d(o);
}

// Terminals: input, weight and bias (ones, zeros; the shape of the normalized dims), output.
Model LayerNorm(const NormOptions& o) { return zoo::trailing_norm("LayerNorm", "layer_norm", o, true); }

Model LayerNorm(int normalized_dims, double eps, bool affine) {
  NormOptions o;
  o.normalized_dims = normalized_dims;
  o.eps = eps;
  o.affine = affine;
  return LayerNorm(o);
}

Model Relu() { return unary_block("Relu", "relu"); }
Model Gelu(bool tanh_approximation) {
  return unary_block("Gelu", "gelu",
                     {{"approximate", std::string(tanh_approximation ? "tanh" : "none")}});
}
Model Sigmoid() { return unary_block("Sigmoid", "sigmoid"); }
Model Tanh() { return unary_block("Tanh", "tanh"); }
Model Softmax(int64_t axis) { return unary_block("Softmax", "softmax", {{"axis", axis}}); }
Model LogSoftmax(int64_t axis) {
  return unary_block("LogSoftmax", "log_softmax", {{"axis", axis}});
}

Model Dropout(double p, uint64_t seed) {
  INGOT_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
  Model m = block("Dropout");
  Connection x = m.input("input");
  Connection dropped = apply(
      "dropout", x, {{"p", p}, {"seed", static_cast<int64_t>(seed)}, {"training", int64_t{1}}});
  m.set_cout(select_by_mode(m, dropped, x));
  return m;
}

Model MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding, bool ceil_mode) {
  return pool_block("MaxPool2d", "max_pool2d", kernel_size, stride, padding, ceil_mode);
}

// Padding counts towards the average (count_include_pad = 1), as in PyTorch.
Model AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding) {
  return pool_block("AvgPool2d", "avg_pool2d", kernel_size, stride, padding);
}

Model GlobalAvgPool2d() {
  return unary_block("GlobalAvgPool2d", "global_avg_pool2d", {{"keepdims", int64_t{0}}});
}

Model Flatten() {
  return unary_block("Flatten", "reshape", {{"shape", std::vector<int64_t>{0, -1}}});
}

// Terminals: input (int64 indices by default; override with the compile option `types`),
// weight [num_embeddings, dim] (normal(1), as in PyTorch), output.
Model Embedding(int64_t num_embeddings, int64_t dim) {
  INGOT_CHECK(num_embeddings > 0 && dim > 0,
              "Embedding: num_embeddings and dim must be positive, got ", num_embeddings, " and ",
              dim);
  Model m = block("Embedding");
  Connection indices = m.input("input", std::nullopt, DType::Int64);
  Connection weight = m.parameter("weight", Init::normal(1.0), ShapeTemplate{num_embeddings, dim});
  m.set_cout(
      add_op(m, "gather", {{"input", weight}, {"indices", indices}}, {{"axis", int64_t{0}}}));
  return m;
}

Model Add() { return binary_block("Add", "add"); }
Model Multiply() { return binary_block("Multiply", "mul"); }
Model Identity() { return unary_block("Identity", "identity"); }

Model MLP(const std::vector<int64_t>& widths, const std::string& activation_name) {
  INGOT_CHECK(!widths.empty(), "MLP: needs at least one width");
  if (activation_name != "none") activation(activation_name);  // reject bad names up front
  Model m = block("MLP");
  for (size_t i = 0; i < widths.size(); ++i) {
    m += Linear(widths[i]);
    if (i + 1 < widths.size() && activation_name != "none") m += activation(activation_name);
  }
  return m;
}

Model MSELoss(const std::string& reduction) {
  check_reduction(reduction);
  Model m = block("MSELoss");
  Connection diff = m.input("input") - m.input("target");
  m.set_cout(reduce(diff * diff, reduction));
  return m;
}

// loss[i] = -sum_c target[i, c] * log_softmax(input)[i, c]; with integer targets the sum picks
// the target class (see picked_log_prob). "mean" averages over the batch, as in PyTorch.
Model CrossEntropyLoss(const std::string& reduction, bool one_hot_target) {
  check_reduction(reduction);
  Model m = block("CrossEntropyLoss");
  Connection logits = m.input("input", ShapeTemplate{"N", "C"});
  Connection logp = apply("log_softmax", logits, {{"axis", int64_t{1}}});
  Connection loss =
      one_hot_target
          ? -(logp * m.input("target", ShapeTemplate{"N", "C"})).sum({1})
          : -picked_log_prob(m, logp, m.input("target", ShapeTemplate{"N"}, DType::Int64));
  m.set_cout(reduce(loss, reduction));
  return m;
}

// loss = -(t log p + (1 - t) log(1 - p)); each log is clamped at -100, as in PyTorch, so that
// p = 0 or 1 gives a finite loss.
Model BCELoss(const std::string& reduction) {
  check_reduction(reduction);
  Model m = block("BCELoss");
  Connection p = m.input("input"), t = m.input("target");
  auto clamped_log = [&](const Connection& x) {
    return add_op(m, "maximum", {{"left", apply("log", x)}, {"right", IOKey(-100.0)}});
  };
  m.set_cout(reduce(-(t * clamped_log(p) + (1.0 - t) * clamped_log(1.0 - p)), reduction));
  return m;
}

// The same loss from logits x, in the stable form max(x, 0) - x t + log(1 + exp(-|x|)): no
// exp overflows and no log of 0 for any x.
Model BCEWithLogitsLoss(const std::string& reduction) {
  check_reduction(reduction);
  Model m = block("BCEWithLogitsLoss");
  Connection x = m.input("input"), t = m.input("target");
  Connection softplus_neg_abs = apply("log", 1.0 + apply("exp", -apply("abs", x)));
  m.set_cout(reduce(apply("relu", x) - x * t + softplus_neg_abs, reduction));
  return m;
}

// Fraction of rows whose largest logit is the target class.
Model ClassAccuracy() {
  Model m = block("ClassAccuracy");
  Connection logits = m.input("input", ShapeTemplate{"N", "C"});
  Connection target = m.input("target", ShapeTemplate{"N"}, DType::Int64);
  Connection predicted = add_op(m, "argmax", {{"input", logits}}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
  Connection hit = add_op(m, "equal", {{"left", predicted}, {"right", target}});
  m.set_cout(hit.cast(DType::Float32).mean());
  return m;
}

// Intermediate wires are named so that get_shapes() reports them.
Model ExampleCNN(int64_t num_classes) {
  Conv2dOptions first;
  first.out_channels = 64;
  first.kernel_size = 3;
  first.in_channels = 3;
  Model m = block("ExampleCNN");
  m += Conv2d(first)({{"output", "conv1"}});
  m += BatchNorm2d()({{"output", "bn1"}});
  m += Relu()({{"output", "relu1"}});
  m += Conv2d(128, 3)({{"output", "conv2"}});
  m += GlobalAvgPool2d()({{"output", "pool"}});
  m += Linear(num_classes);
  return m;
}

Model ExampleMLP() {
  Model m = block("ExampleMLP");
  m += Linear(256)({{"input", IOKey("input").shape({nullptr, 784})}});
  m += Relu();
  m += Linear(10);
  return m;
}

Model example_model(const std::string& name) {
  if (name == "cnn") return ExampleCNN();
  if (name == "mlp") return ExampleMLP();
  std::string names;
  for (const auto& n : example_model_names()) names += (names.empty() ? "" : ", ") + n;
  INGOT_FAIL("Unknown example model '", name, "' (bundled: ", names, ")");
}

std::vector<std::string> example_model_names() { return {"cnn", "mlp"}; }

}  // namespace ingot
