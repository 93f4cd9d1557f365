// ONNX network operators: MatMul, Gemm, Conv, BatchNormalization (inference), MaxPool,
// AveragePool, GlobalAveragePool, Softmax, LogSoftmax, Flatten, the Reduce family,
// LayerNormalization and Gelu.
#include <algorithm>
#include <numeric>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

// ONNX pads [begin..., end...] for two spatial dims as ingot's symmetric [ph, pw]; auto_pad
// SAME_* resolved from the input's static size.
std::vector<int64_t> spatial_padding(NodeContext& c, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                     const std::vector<int64_t>& dilations) {
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attr_ints("pads", {0, 0, 0, 0});
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const std::optional<Shape> s = c.static_shape(0);
    if (!s || s->size() != 4) c.fail("auto_pad " + auto_pad + " needs the input's size while importing");
    for (int i = 0; i < 2; ++i) {
      const int64_t in = (*s)[static_cast<size_t>(2 + i)], st = strides[static_cast<size_t>(i)];
      const int64_t out = (in + st - 1) / st;
      const int64_t eff = (kernel[static_cast<size_t>(i)] - 1) * dilations[static_cast<size_t>(i)] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * st + eff - in);
      pads[static_cast<size_t>(i)] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[static_cast<size_t>(2 + i)] = total - pads[static_cast<size_t>(i)];
    }
  } else if (auto_pad != "NOTSET") {
    c.fail("auto_pad '" + auto_pad + "' is not an ONNX auto_pad value");
  }
  if (pads.size() != 4) c.fail("only 2-D windows are supported (pads has " + std::to_string(pads.size()) + " values)");
  if (pads[0] != pads[2] || pads[1] != pads[3])
    c.fail("asymmetric padding (pads " + std::to_string(pads[0]) + "," + std::to_string(pads[1]) + "," +
           std::to_string(pads[2]) + "," + std::to_string(pads[3]) + ") is not supported yet");
  return {pads[0], pads[1]};
}

std::vector<int64_t> pair_or(NodeContext& c, const char* name, int64_t def) {
  std::vector<int64_t> v = c.attr_ints(name, {def, def});
  if (v.size() != 2) c.fail(std::string("only 2-D windows are supported ('") + name + "' has " + std::to_string(v.size()) + " values)");
  return v;
}

Outs conv(NodeContext& c) {
  const std::optional<Shape> ws = c.static_shape(1);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {});
  if (kernel.empty() && ws && ws->size() == 4) kernel = {(*ws)[2], (*ws)[3]};
  if (kernel.size() != 2) c.fail("only 2-D convolutions are supported");
  const std::vector<int64_t> strides = pair_or(c, "strides", 1), dilations = pair_or(c, "dilations", 1);
  const std::vector<int64_t> pad = spatial_padding(c, kernel, strides, dilations);
  std::vector<IOKey> ins = {c.in(0), c.in(1)};
  if (c.has_input(2)) ins.push_back(c.in(2));
  return {c.op("conv2d", ins,
               {{"stride", strides}, {"padding", pad}, {"dilation", dilations}, {"groups", c.attr_int("group", 1)}})};
}

Outs pool(NodeContext& c, const char* op) {
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {});
  if (kernel.size() != 2) c.fail("only 2-D pooling is supported");
  if (c.attr_int("ceil_mode", 0) != 0) c.fail("ceil_mode = 1 is not supported yet");
  const std::vector<int64_t> dilations = pair_or(c, "dilations", 1);
  if (dilations != std::vector<int64_t>{1, 1}) c.fail("dilated pooling is not supported");
  const std::vector<int64_t> strides = pair_or(c, "strides", 1);
  const std::vector<int64_t> pad = spatial_padding(c, kernel, strides, dilations);
  if (pad[0] > kernel[0] / 2 || pad[1] > kernel[1] / 2) c.fail("padding over half the window is not supported");
  Attrs a = {{"kernel", kernel}, {"stride", strides}, {"padding", pad}};
  if (std::string(op) == "avg_pool2d") a.set("count_include_pad", c.attr_int("count_include_pad", 0));
  if (c.node.output_size() > 1 && !c.node.output(1).empty()) c.fail("MaxPool's indices output is not supported");
  return {c.op(op, {c.in(0)}, std::move(a))};
}

// Softmax and LogSoftmax: opset 13 on, over `axis` (default -1); before, over the input
// flattened to 2-D at `axis` (default 1).
Outs softmax(NodeContext& c, const char* op) {
  const Connection x = c.in(0);
  if (c.opset >= 13) return {c.op(op, {x}, {{"axis", c.attr_int("axis", -1)}})};
  const int64_t axis = c.attr_int("axis", 1);
  const std::optional<Shape> s = c.static_shape(0);
  const int64_t rank = s ? static_cast<int64_t>(s->size()) : -1;
  if (rank > 0 && (axis == rank - 1 || axis == -1)) return {c.op(op, {x}, {{"axis", int64_t{-1}}})};
  std::vector<int64_t> flat;
  if (axis == 1) flat = {0, -1};
  else if (axis == 0) flat = {1, -1};
  else if (s) flat = {std::accumulate(s->begin(), s->begin() + (axis < 0 ? axis + rank : axis), int64_t{1}, std::multiplies<>()), -1};
  else c.fail("softmax over a flattened axis needs the input's size while importing");
  const Connection y = c.op(op, {x.reshape(flat)}, {{"axis", int64_t{-1}}});
  return {c.op("reshape_like", {y, x})};
}

// The Reduce family: axes from the attribute or (ReduceSum from opset 13, the rest from 18) an
// input; no axes reduces all, unless noop_with_empty_axes.
Outs reduce(NodeContext& c, const char* op, int axes_input_from) {
  std::vector<int64_t> axes;
  if (c.opset >= axes_input_from) {
    if (c.has_input(1)) axes = c.constant_input(1, "axes").astype(DType::Int64).to_vector<int64_t>();
  } else {
    axes = c.attr_ints("axes", {});
  }
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return {c.op("identity", {c.in(0)})};
  const std::string o = op;
  if (o == "max" || o == "min") {
    // ONNX gives -inf (+inf) over an empty set, where ingot's max (min) has no identity.
    const std::optional<Shape> s = c.static_shape(0);
    if (!s) c.fail("the size of its input is unknown while importing (an empty reduction must be ruled out)");
    const int64_t r = static_cast<int64_t>(s->size());
    for (int64_t i = 0; i < r; ++i) {
      const bool reduced = axes.empty() || std::find_if(axes.begin(), axes.end(), [&](int64_t a) { return (a < 0 ? a + r : a) == i; }) != axes.end();
      if (reduced && (*s)[static_cast<size_t>(i)] == 0) c.fail("a reduction over an empty set is not supported");
    }
  }
  Connection x = c.in(0);
  // The composite reductions: L1, L2, sum of squares, log-sum, log-sum-exp over sums.
  if (o == "l1") x = c.op("abs", {x});
  if (o == "l2" || o == "sum_square") x = x * x;
  if (o == "log_sum_exp") x = apply("exp", x);
  Connection y = c.op(o == "max" || o == "min" || o == "mean" ? op : "sum", {x}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1)}});
  if (o == "l2") y = c.op("sqrt", {y});
  if (o == "log_sum" || o == "log_sum_exp") y = c.op("log", {y});
  return {y};
}

// ArgMax and ArgMin: the first extreme along `axis` (ingot's argmax; argmin as argmax of -x).
Outs arg_extreme(NodeContext& c, bool max) {
  if (c.attr_int("select_last_index", 0) != 0) c.fail("select_last_index = 1 is not supported");
  const Connection x = max ? c.in(0) : c.op("neg", {c.in(0)});
  return {c.op("argmax", {x}, {{"axis", c.attr_int("axis", 0)}, {"keepdims", c.attr_int("keepdims", 1)}})};
}

}  // namespace

void register_nn_conversions() {
  register_conversion("MatMul", [](NodeContext& c) { return Outs{matmul(c.in(0), c.in(1))}; });
  register_conversion("Gemm", [](NodeContext& c) {
    Connection a = c.in(0), b = c.in(1);
    if (c.attr_int("transA", 0) != 0) a = a.transpose({1, 0});
    if (c.attr_int("transB", 0) != 0) b = b.transpose({1, 0});
    Connection y = matmul(a, b);
    const double alpha = c.attr_float("alpha", 1.0f), beta = c.attr_float("beta", 1.0f);
    if (alpha != 1.0) y = y * alpha;
    if (c.has_input(2) && beta != 0.0) y = y + (beta == 1.0 ? c.in(2) : c.in(2) * beta);
    return Outs{y};
  });
  register_conversion("Conv", conv);
  register_conversion("BatchNormalization", [](NodeContext& c) {
    if (c.attr_int("training_mode", 0) != 0) c.fail("training_mode = 1 is not supported (import for inference)");
    for (int i = 1; i < c.node.output_size(); ++i)
      if (!c.node.output(i).empty()) c.fail("its running statistics outputs are not supported (training mode)");
    return Outs{c.op("batch_norm", {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4)},
                     {{"eps", static_cast<double>(c.attr_float("epsilon", 1e-5f))}})};
  });
  register_conversion("MaxPool", [](NodeContext& c) { return pool(c, "max_pool2d"); });
  register_conversion("AveragePool", [](NodeContext& c) { return pool(c, "avg_pool2d"); });
  register_conversion("GlobalAveragePool", [](NodeContext& c) {
    return Outs{c.op("global_avg_pool2d", {c.in(0)}, {{"keepdims", int64_t{1}}})};
  });
  register_conversion("Softmax", [](NodeContext& c) { return softmax(c, "softmax"); });
  register_conversion("LogSoftmax", [](NodeContext& c) { return softmax(c, "log_softmax"); });
  register_conversion("Flatten", [](NodeContext& c) {
    const int64_t axis = c.attr_int("axis", 1);
    if (axis == 0) return Outs{c.in(0).reshape({1, -1})};
    if (axis == 1) return Outs{c.in(0).reshape({0, -1})};
    const std::optional<Shape> s = c.static_shape(0);
    if (!s) c.fail("Flatten at axis " + std::to_string(axis) + " needs the input's size while importing");
    const int64_t r = static_cast<int64_t>(s->size()), a = axis < 0 ? axis + r : axis;
    return Outs{c.in(0).reshape({std::accumulate(s->begin(), s->begin() + a, int64_t{1}, std::multiplies<>()), -1})};
  });
  register_conversion("ReduceMean", [](NodeContext& c) { return reduce(c, "mean", 18); });
  register_conversion("ReduceSum", [](NodeContext& c) { return reduce(c, "sum", 13); });
  register_conversion("ReduceMax", [](NodeContext& c) { return reduce(c, "max", 18); });
  register_conversion("ReduceMin", [](NodeContext& c) { return reduce(c, "min", 18); });
  register_conversion("LayerNormalization", [](NodeContext& c) {
    if (c.attr_int("stash_type", 1) != 1) c.fail("stash_type other than float32 is not supported");
    const int64_t axis = c.attr_int("axis", -1);
    const double eps = c.attr_float("epsilon", 1e-5f);
    std::vector<IOKey> ins = {c.in(0), c.in(1)};
    if (c.has_input(2)) ins.push_back(c.in(2));
    Outs outs = {c.op("layer_norm", ins, {{"axis", axis}, {"eps", eps}})};
    if (c.node.output_size() > 1) {
      // The mean and the inverse standard deviation over the normalized dims, kept as size 1.
      const std::optional<Shape> s = c.static_shape(0);
      if (!s) c.fail("its mean and inverse deviation outputs need the input's rank while importing");
      const int64_t r = static_cast<int64_t>(s->size());
      std::vector<int64_t> axes;
      for (int64_t a = axis < 0 ? axis + r : axis; a < r; ++a) axes.push_back(a);
      const std::vector<Connection> mv = c.op_n("moments", {c.in(0)}, 2, {{"axes", axes}, {"keepdims", int64_t{1}}});
      outs.push_back(mv[0]);
      outs.push_back(c.op("rsqrt", {mv[1] + eps}));
    }
    return outs;
  });
  register_conversion("ArgMax", [](NodeContext& c) { return arg_extreme(c, true); });
  register_conversion("ArgMin", [](NodeContext& c) { return arg_extreme(c, false); });
  register_conversion("ReduceL1", [](NodeContext& c) { return reduce(c, "l1", 18); });
  register_conversion("ReduceL2", [](NodeContext& c) { return reduce(c, "l2", 18); });
  register_conversion("ReduceSumSquare", [](NodeContext& c) { return reduce(c, "sum_square", 18); });
  register_conversion("ReduceLogSum", [](NodeContext& c) { return reduce(c, "log_sum", 18); });
  register_conversion("ReduceLogSumExp", [](NodeContext& c) { return reduce(c, "log_sum_exp", 18); });
  register_conversion("Gelu", [](NodeContext& c) {
    return Outs{c.op("gelu", {c.in(0)}, {{"approximate", c.attr_string("approximate", "none")}})};
  });
}

}  // namespace ingot::onnx_import
