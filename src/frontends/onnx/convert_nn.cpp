// ONNX network operators: MatMul, Gemm, Conv, BatchNormalization (inference), MaxPool,
// ConvTranspose, AveragePool, LpPool, GlobalAveragePool, LRN, Softmax, LogSoftmax, Flatten, the Reduce family,
// LayerNormalization and Gelu.
#include <algorithm>
#include <limits>
#include <numeric>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

// A window operator's geometry (Conv, MaxPool, AveragePool) as 2-D: a 1-D window [k] over
// [N, C, L] is the 2-D window [1, k] over [N, C, 1, L]. pads are [top, left, bottom, right];
// auto_pad SAME_* is resolved from the input's static size.
struct Window {
  bool one_d = false;
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::optional<Shape> input;  // [N, C, H, W] where known while importing
};

Window window_of(NodeContext& c, std::vector<int64_t> kernel) {
  Window w;
  if (kernel.size() != 1 && kernel.size() != 2)
    c.fail("only 1-D and 2-D windows are supported (kernel of " + std::to_string(kernel.size()) + " dims)");
  w.one_d = kernel.size() == 1;
  const size_t k = kernel.size();
  auto lift = [&](std::vector<int64_t> v, int64_t pad_value) {
    if (w.one_d) v.insert(v.begin(), pad_value);
    return v;
  };
  auto attr = [&](const char* name, int64_t def) {
    std::vector<int64_t> v = c.attr_ints(name, std::vector<int64_t>(k, def));
    if (v.size() != k) c.fail(std::string("'") + name + "' has " + std::to_string(v.size()) + " values for a " + std::to_string(k) + "-D window");
    return lift(v, 1);
  };
  w.kernel = lift(kernel, 1);
  w.strides = attr("strides", 1);
  w.dilations = attr("dilations", 1);
  w.input = c.static_shape(0);
  if (w.input && w.one_d && w.input->size() == 3) w.input->insert(w.input->begin() + 2, 1);
  if (w.input && w.input->size() != 4) w.input.reset();
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (pads.size() != 2 * k) c.fail("'pads' has " + std::to_string(pads.size()) + " values for a " + std::to_string(k) + "-D window");
  if (w.one_d) pads = {0, pads[0], 0, pads[1]};
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!w.input) c.fail("auto_pad " + auto_pad + " needs the input's size while importing");
    for (size_t i = 0; i < 2; ++i) {
      const int64_t in = (*w.input)[2 + i], st = w.strides[i];
      const int64_t out = (in + st - 1) / st;
      const int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * st + eff - in);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[2 + i] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    c.fail("auto_pad '" + auto_pad + "' is not an ONNX auto_pad value");
  }
  for (int64_t p : pads)
    if (p < 0) c.fail("negative pads are not ONNX window pads");
  w.pads = pads;
  return w;
}

// The input as the 2-D window op reads it, and its result back in the node's rank.
Connection to_2d(const Window& w, const Connection& x) { return w.one_d ? x.reshape({0, 0, 1, -1}) : x; }
Connection from_2d(const Window& w, const Connection& y) { return w.one_d ? y.reshape({0, 0, -1}) : y; }

// `x` [N, C, H, W] padded by pads [top, left, bottom, right] of `value`.
Connection pad_spatial(NodeContext& c, const Connection& x, const std::vector<int64_t>& pads, double value) {
  const Connection y = pad_axis(c, x, 4, 2, pads[0], pads[2], value);
  return pad_axis(c, y, 4, 3, pads[1], pads[3], value);
}

bool symmetric(const std::vector<int64_t>& pads) { return pads[0] == pads[2] && pads[1] == pads[3]; }

Outs conv(NodeContext& c) {
  const std::optional<Shape> ws = c.static_shape(1);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {});
  if (kernel.empty() && ws && ws->size() >= 3) kernel.assign(ws->begin() + 2, ws->end());
  if (kernel.empty()) c.fail("its kernel size is unknown (no kernel_shape, and the weight's size is only known at run time)");
  Window w = window_of(c, kernel);
  Connection x = to_2d(w, c.in(0));
  // Asymmetric padding: explicit zeros, then the convolution without padding.
  if (!symmetric(w.pads)) {
    x = pad_spatial(c, x, w.pads, 0.0);
    w.pads = {0, 0, 0, 0};
  }
  std::vector<IOKey> ins = {x, w.one_d ? c.in(1).reshape({0, 0, 1, -1}) : c.in(1)};
  if (c.has_input(2)) ins.push_back(c.in(2));
  return {from_2d(w, c.op("conv2d", ins, {{"stride", w.strides}, {"padding", std::vector<int64_t>{w.pads[0], w.pads[1]}},
                                          {"dilation", w.dilations}, {"groups", c.attr_int("group", 1)}}))};
}

// ConvTranspose: the input gradient of the convolution it inverts (conv2d_input_grad, whose
// weight layout [C_in, C_out / group, kh, kw] is ConvTranspose's), computed at full size (no
// padding: stride (in - 1) + dilated kernel), then cropped by the pads and extended with zeros by
// output_padding, as ONNX defines the output. 1-D as 2-D over a unit height; sizes must be known.
Outs conv_transpose(NodeContext& c) {
  const std::optional<Shape> ws = c.static_shape(1);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {});
  if (kernel.empty() && ws && ws->size() >= 3) kernel.assign(ws->begin() + 2, ws->end());
  if (kernel.empty()) c.fail("its kernel size is unknown (no kernel_shape, and the weight's size is only known at run time)");
  if (!ws || ws->size() != kernel.size() + 2) c.fail("its weight's size must be known while importing");
  const size_t k = kernel.size();
  if (k != 1 && k != 2) c.fail("only 1-D and 2-D windows are supported (kernel of " + std::to_string(k) + " dims)");
  const std::optional<Shape> xs = c.static_shape(0);
  if (!xs || xs->size() != k + 2) c.fail("the input's size must be known while importing");
  const int64_t group = c.attr_int("group", 1);
  auto attr = [&](const char* name, int64_t def) {
    std::vector<int64_t> v = c.attr_ints(name, std::vector<int64_t>(k, def));
    if (v.size() != k) c.fail(std::string("'") + name + "' has " + std::to_string(v.size()) + " values");
    return v;
  };
  const std::vector<int64_t> strides = attr("strides", 1), dilations = attr("dilations", 1), out_pad = attr("output_padding", 0);
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (pads.size() != 2 * k) c.fail("'pads' has " + std::to_string(pads.size()) + " values");
  std::vector<int64_t> out_shape = c.attr_ints("output_shape", {});
  if (!out_shape.empty() && out_shape.size() != k) out_shape.assign(out_shape.end() - static_cast<int64_t>(k), out_shape.end());
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> full(k), length(k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = (*xs)[2 + i], eff = (kernel[i] - 1) * dilations[i] + 1;
    full[i] = strides[i] * (in - 1) + eff;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t target = out_shape.empty() ? in * strides[i] : out_shape[i];
      const int64_t total = full[i] + out_pad[i] - target;
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[k + i] = total - pads[i];
    } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
      c.fail("auto_pad '" + auto_pad + "' is not an ONNX auto_pad value");
    }
    length[i] = out_shape.empty() ? full[i] + out_pad[i] - pads[i] - pads[k + i] : out_shape[i];
    if (length[i] < 0) c.fail("its output would have a negative size");
  }
  const int64_t c_out = (*ws)[1] * group;
  Shape like = {(*xs)[0], c_out};
  for (size_t i = 0; i < k; ++i) like.push_back(full[i]);
  Connection x = c.in(0), w = c.in(1);
  std::vector<int64_t> st = strides, dil = dilations;
  if (k == 1) {
    x = x.reshape({0, 0, 1, -1});
    w = w.reshape({0, 0, 1, -1});
    like.insert(like.begin() + 2, 1);
    st.insert(st.begin(), 1);
    dil.insert(dil.begin(), 1);
  }
  const std::optional<DType> dt = c.dtype(0);
  if (!dt) c.fail("the element type of its input is unknown");
  Connection y = c.op("conv2d_input_grad", {x, w, Tensor::full(*dt, like, 0)},
                      {{"stride", st}, {"padding", std::vector<int64_t>{0, 0}}, {"dilation", dil}, {"groups", group}});
  for (size_t i = 0; i < k; ++i) {  // (the result is 4-D here, also for 1-D)
    const int64_t axis = k == 1 ? 3 : static_cast<int64_t>(2 + i);
    y = pad_axis(c, y, 4, axis, -pads[i], length[i] + pads[i] - full[i], 0.0);
  }
  if (k == 1) y = y.reshape({0, 0, -1});
  if (c.has_input(2)) y = y + c.in(2).reshape(k == 1 ? std::vector<int64_t>{1, -1, 1} : std::vector<int64_t>{1, -1, 1, 1});
  return {y};
}

// MaxPool and AveragePool. ingot's pooling pads symmetrically, by at most half the window, and
// max_pool2d has ceil_mode (the same rule as ONNX's); other padding (asymmetric pads, an average's
// ceil_mode extra end) is explicit: -inf for max, and for an average
// that leaves padding out of its count, the window sums of the input over those of a mask of
// ones (count_include_pad = 0 counts the input; 1 the input and the ONNX pads, never the
// ceil_mode extra).
Outs pool(NodeContext& c, bool max) {
  const Window w = window_of(c, c.attr_ints("kernel_shape", {}));
  if (w.dilations != std::vector<int64_t>{1, 1}) c.fail("dilated pooling is not supported");
  const std::vector<int64_t>&kernel = w.kernel, &strides = w.strides, &pads = w.pads;
  const Connection x = to_2d(w, c.in(0));
  if (c.node.output_size() > 1 && !c.node.output(1).empty()) c.fail("MaxPool's indices output is not supported");
  const bool count_pad = !max && c.attr_int("count_include_pad", 0) != 0;
  // ceil_mode: the windows that start inside the input or its left padding, where the floor
  // rule stops short of the end, get extra end padding.
  std::vector<int64_t> extra = {0, 0};
  if (c.attr_int("ceil_mode", 0) != 0) {
    const std::optional<Shape>& s = w.input;
    if (!s) c.fail("ceil_mode = 1 needs the input's size while importing");
    for (size_t i = 0; i < 2; ++i) {
      const int64_t span = (*s)[2 + i] + pads[i] + pads[2 + i] - kernel[i];
      if (span < 0) continue;
      int64_t out = (span + strides[i] - 1) / strides[i] + 1;
      if ((out - 1) * strides[i] >= (*s)[2 + i] + pads[i]) --out;
      extra[i] = std::max<int64_t>(0, (out - 1) * strides[i] + kernel[i] - ((*s)[2 + i] + pads[i] + pads[2 + i]));
    }
  }
  const bool fits = symmetric(pads) && pads[0] <= kernel[0] / 2 && pads[1] <= kernel[1] / 2;
  const bool native = fits && (max || extra == std::vector<int64_t>{0, 0});
  Attrs a = {{"kernel", kernel}, {"stride", strides}, {"padding", std::vector<int64_t>{pads[0], pads[1]}}};
  if (native) {
    if (max && extra != std::vector<int64_t>{0, 0}) a.set("ceil_mode", int64_t{1});
    if (max) return {from_2d(w, c.op("max_pool2d", {x}, std::move(a)))};
    a.set("count_include_pad", int64_t{count_pad ? 1 : 0});
    return {from_2d(w, c.op("avg_pool2d", {x}, std::move(a)))};
  }
  a.set("padding", std::vector<int64_t>{0, 0});
  const std::vector<int64_t> all = {pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]};
  if (max) return {from_2d(w, c.op("max_pool2d", {pad_spatial(c, x, all, -std::numeric_limits<double>::infinity())}, a))};
  a.set("count_include_pad", int64_t{1});
  const Connection sums = c.op("avg_pool2d", {pad_spatial(c, x, all, 0.0)}, a);
  // The mask: ones over what counts (one channel, so the count costs 1/C of the sums), zeros over
  // the rest of the padded extent.
  const Connection ones = c.op("add", {c.op("zeros_like", {x.slice(1, 0, 1)}), 1.0});
  const Connection mask = count_pad ? pad_spatial(c, pad_spatial(c, ones, pads, 1.0), {0, 0, extra[0], extra[1]}, 0.0)
                                    : pad_spatial(c, ones, all, 0.0);
  return {from_2d(w, c.op("div", {sums, c.op("avg_pool2d", {mask}, a)}))};
}

// LpPool: (sum of |x|^p over each window)^(1/p); the window sums are an average pool of the
// zero-padded input, counting the padding, times the window's size.
Outs lp_pool(NodeContext& c) {
  const Window w = window_of(c, c.attr_ints("kernel_shape", {}));
  if (w.dilations != std::vector<int64_t>{1, 1}) c.fail("dilated pooling is not supported");
  if (c.attr_int("ceil_mode", 0) != 0) c.fail("ceil_mode = 1 is not supported");
  const int64_t p = c.attr_int("p", 2);
  if (p <= 0) c.fail("p = " + std::to_string(p) + " is not positive");
  const Connection x = to_2d(w, c.in(0));
  const Connection powered = p == 1 ? c.op("abs", {x}) : p == 2 ? x * x : c.op("pow", {c.op("abs", {x}), static_cast<double>(p)});
  const Attrs a = {{"kernel", w.kernel}, {"stride", w.strides}, {"padding", std::vector<int64_t>{0, 0}},
                   {"count_include_pad", int64_t{1}}};
  const Connection sums = c.op("avg_pool2d", {pad_spatial(c, powered, w.pads, 0.0)}, a) *
                          static_cast<double>(w.kernel[0] * w.kernel[1]);
  const Connection y = p == 1 ? sums : p == 2 ? c.op("sqrt", {sums}) : c.op("pow", {sums, 1.0 / static_cast<double>(p)});
  return {from_2d(w, y)};
}

// LRN: x / (bias + alpha / size * (sum of x^2 over a window of `size` channels))^beta. The
// window sum is an average pool over (channels, W) of x^2 transposed to [N, H, C, W], times size.
Outs lrn(NodeContext& c) {
  const int64_t size = c.attr_int("size", 0);
  if (size <= 0) c.fail("its size must be positive");
  if (size % 2 == 0) c.fail("an even window size (" + std::to_string(size) + ") is not supported");
  const double alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f), bias = c.attr_float("bias", 1.0f);
  const Connection x = c.in(0);
  const Connection sq = (x * x).transpose({0, 2, 1, 3});
  const Connection mean = c.op("avg_pool2d", {sq}, {{"kernel", std::vector<int64_t>{size, 1}},
                                                    {"stride", std::vector<int64_t>{1, 1}},
                                                    {"padding", std::vector<int64_t>{(size - 1) / 2, 0}},
                                                    {"count_include_pad", int64_t{1}}});
  const Connection denom = c.op("pow", {mean.transpose({0, 2, 1, 3}) * alpha + bias, beta});
  return {x / denom};
}

// Softmax and LogSoftmax: opset 13 on, over `axis` (default -1); before, over the input
// flattened to 2-D at `axis` (default 1).
// The shape [product of dims before `a`, product of the rest] of ONNX's Flatten (and of Softmax
// before opset 13) for an input of static shape `s`, written out: a -1 (and ingot's 0, which
// copies a dim) cannot give a literal 0, so [0, -1] of a [0, 2, 1, 1] input had no answer.
std::vector<int64_t> flattened(const Shape& s, int64_t a) {
  const auto split = s.begin() + a;
  return {std::accumulate(s.begin(), split, int64_t{1}, std::multiplies<>()),
          std::accumulate(split, s.end(), int64_t{1}, std::multiplies<>())};
}

// A result with no elements, known while importing (no op can shape one from a reshape).
Outs empty_result(NodeContext& c, const std::vector<int64_t>& shape) {
  c.known_outputs[0] = Tensor(c.dtype(0).value_or(DType::Float32), Shape(shape.begin(), shape.end()));
  return {};
}

Outs softmax(NodeContext& c, const char* op) {
  const Connection x = c.in(0);
  if (c.opset >= 13) return {c.op(op, {x}, {{"axis", c.attr_int("axis", -1)}})};
  const int64_t axis = c.attr_int("axis", 1);
  const std::optional<Shape> s = c.static_shape(0);
  const int64_t rank = s ? static_cast<int64_t>(s->size()) : -1;
  if (rank > 0 && (axis == rank - 1 || axis == -1)) return {c.op(op, {x}, {{"axis", int64_t{-1}}})};
  std::vector<int64_t> flat;
  if (s) {
    if (numel(*s) == 0) return empty_result(c, *s);
    flat = flattened(*s, c.axis(axis, rank, true));  // (fuzz_onnx: an axis past the rank read past the shape)
  } else if (axis == 1) {
    flat = {0, -1};
  } else if (axis == 0) {
    flat = {1, -1};
  } else {
    c.fail("softmax over a flattened axis needs the input's size while importing");
  }
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

// ReduceProd: the reduced axes moved last and flattened, then halved log2(n) times (the first
// half times the second; an odd length's last element waits a step): exact for integers, and
// an empty set gives 1.
Outs reduce_prod(NodeContext& c) {
  std::vector<int64_t> axes;
  if (c.opset >= 18) {
    if (c.has_input(1)) axes = c.constant_input(1, "axes").astype(DType::Int64).to_vector<int64_t>();
  } else {
    axes = c.attr_ints("axes", {});
  }
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return {c.op("identity", {c.in(0)})};
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("ReduceProd needs the input's size while importing");
  const int64_t r = static_cast<int64_t>(s->size());
  std::vector<bool> reduced(static_cast<size_t>(r), axes.empty());
  for (int64_t a : axes) {
    reduced[static_cast<size_t>(c.axis(a, r))] = true;
  }
  std::vector<int64_t> perm, kept, out_shape;
  int64_t n = 1;
  for (int64_t i = 0; i < r; ++i)
    if (!reduced[static_cast<size_t>(i)]) {
      perm.push_back(i);
      kept.push_back((*s)[static_cast<size_t>(i)]);
    }
  for (int64_t i = 0; i < r; ++i)
    if (reduced[static_cast<size_t>(i)]) {
      perm.push_back(i);
      n *= (*s)[static_cast<size_t>(i)];
    }
  const bool keep = c.attr_int("keepdims", 1) != 0;
  for (int64_t i = 0; i < r; ++i)
    if (!reduced[static_cast<size_t>(i)] || keep) out_shape.push_back(reduced[static_cast<size_t>(i)] ? 1 : (*s)[static_cast<size_t>(i)]);
  std::vector<int64_t> flat = kept;
  flat.push_back(n);
  const int64_t last = static_cast<int64_t>(kept.size());
  Connection x = c.in(0).transpose(perm).reshape(flat);
  if (n == 0) {
    Shape ones_shape(out_shape.begin(), out_shape.end());
    return {c.op("identity", {Tensor::full(c.dtype(0).value_or(DType::Float32), ones_shape, 1.0)})};
  }
  while (n > 1) {
    const int64_t h = n / 2;
    Connection y = x.slice(last, 0, h) * x.slice(last, h, 2 * h);
    if (n % 2 != 0) y = c.op("concat", {y, x.slice(last, 2 * h, n)}, {{"axis", last}});
    x = y;
    n = h + n % 2;
  }
  return {x.reshape(out_shape)};
}

// The size and normalized index of `axis` of input 0, known while importing.
std::pair<int64_t, int64_t> static_axis(NodeContext& c, int64_t axis, const char* why) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail(std::string(why) + " needs the input's size while importing");
  const int64_t r = static_cast<int64_t>(s->size());
  const int64_t a = c.axis(axis, r);
  return {(*s)[static_cast<size_t>(a)], a};
}

// ArgMax and ArgMin: the first extreme along `axis` (ingot's argmax; argmin as argmax of -x);
// select_last_index takes the last: argmax of the axis reversed, counted back from its end.
Outs arg_extreme(NodeContext& c, bool max) {
  const int64_t axis = c.attr_int("axis", 0), keepdims = c.attr_int("keepdims", 1);
  Connection x = max ? c.in(0) : c.op("neg", {c.in(0)});
  if (c.attr_int("select_last_index", 0) == 0) return {c.op("argmax", {x}, {{"axis", axis}, {"keepdims", keepdims}})};
  const auto [n, a] = static_axis(c, axis, "select_last_index = 1");
  std::vector<int64_t> reversed;
  for (int64_t i = n - 1; i >= 0; --i) reversed.push_back(i);
  x = c.op("gather", {x, Tensor::from_vector<int64_t>(reversed, {n})}, {{"axis", a}});
  const Connection from_end = c.op("argmax", {x}, {{"axis", a}, {"keepdims", keepdims}});
  return {c.op("sub", {static_cast<double>(n - 1), from_end})};
}

// TopK: ingot's top_k (K an input known while importing from opset 10, an attribute before).
// The values come sorted also when sorted = 0 (ONNX leaves their order open then).
Outs top_k(NodeContext& c) {
  int64_t k = 0;
  if (c.opset < 10) {
    k = c.attr_int("k", -1);
  } else {
    const Tensor kt = c.constant_input(1, "K");
    if (kt.numel() != 1) c.fail("K must hold one value, got " + std::to_string(kt.numel()));
    k = static_cast<int64_t>(kt.astype(DType::Int64).item(0));
  }
  if (k < 0) c.fail("K must be at least 0, got " + std::to_string(k));
  return c.op_n("top_k", {c.in(0)}, 2,
                {{"k", k}, {"axis", c.attr_int("axis", -1)}, {"largest", c.attr_int("largest", 1) != 0 ? int64_t{1} : int64_t{0}}});
}

// Hardmax: 1 at the first maximum along `axis`, 0 elsewhere (before opset 13, over the input
// flattened to 2-D at `axis`, as Softmax).
Outs hardmax(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("Hardmax needs the input's size while importing");
  const int64_t r = static_cast<int64_t>(s->size());
  Connection x = c.in(0);
  int64_t axis = c.axis(c.attr_int("axis", c.opset >= 13 ? -1 : 1), r);
  int64_t n = (*s)[static_cast<size_t>(axis)];
  if (c.opset < 13) {
    const int64_t rows = std::accumulate(s->begin(), s->begin() + axis, int64_t{1}, std::multiplies<>());
    n = std::accumulate(s->begin() + axis, s->end(), int64_t{1}, std::multiplies<>());
    x = x.reshape({rows, n});
    axis = 1;
  }
  const int64_t xr = c.opset < 13 ? 2 : r;
  Shape iota_shape(static_cast<size_t>(xr), 1);
  iota_shape[static_cast<size_t>(axis)] = n;
  std::vector<int64_t> iota(static_cast<size_t>(n));
  std::iota(iota.begin(), iota.end(), int64_t{0});
  const Connection first = c.op("argmax", {x}, {{"axis", axis}, {"keepdims", int64_t{1}}});
  const Connection hot = c.op("equal", {Tensor::from_vector<int64_t>(iota, iota_shape), first});
  const std::optional<DType> dt = c.dtype(0);
  Connection y = c.op("cast", {hot}, {{"dtype", std::string(dtype_name(dt.value_or(DType::Float32)))}});
  if (c.opset < 13) y = c.op("reshape_like", {y, c.in(0)});
  return {y};
}

// The normalized axes from `axis` to the last (negative, so the rank need not be known).
std::vector<int64_t> trailing_axes(NodeContext& c, int64_t axis) {
  std::vector<int64_t> axes;
  if (const std::optional<Shape> s = c.static_shape(0)) c.axis(axis, static_cast<int64_t>(s->size()));
  if (axis < -64)  // no rank is that large: an axis from a file must not size the loop below
    c.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) {
    for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
    return axes;
  }
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("a non-negative axis needs the input's rank while importing");
  for (int64_t a = axis; a < static_cast<int64_t>(s->size()); ++a) axes.push_back(a);
  return axes;
}

// RMSNormalization: x / sqrt(mean(x^2 over axis..end) + epsilon) * scale, in float32 at least
// (stash_type 1), back in the input's type. A scale of the normalized dims' shape (the usual
// case) makes it the rms_norm op (one row kernel, statistics in double); a scale that only
// broadcasts to them, or unknown shapes, write it out.
Outs rms_norm(NodeContext& c) {
  if (c.attr_int("stash_type", 1) != 1) c.fail("stash_type other than float32 is not supported");
  const int64_t axis = c.attr_int("axis", -1);
  const std::vector<int64_t> axes = trailing_axes(c, axis);
  const double eps = c.attr_float("epsilon", 1e-5f);
  const std::optional<DType> dt = c.dtype(0);
  if (!dt) c.fail("the element type of its input is unknown");
  const std::optional<Shape> xs = c.static_shape(0), ws = c.static_shape(1);
  if (xs && ws && c.dtype(1) == dt &&
      *ws == Shape(xs->end() - static_cast<std::ptrdiff_t>(axes.size()), xs->end()))
    return {c.op("rms_norm", {c.in(0), c.in(1)}, {{"axis", axis}, {"eps", eps}})};
  const bool widen = *dt == DType::Float16 || *dt == DType::BFloat16;
  Connection x = widen ? c.in(0).cast(DType::Float32) : c.in(0);
  const Connection ms = c.op("mean", {x * x}, {{"axes", axes}, {"keepdims", int64_t{1}}});
  Connection y = x * c.op("rsqrt", {ms + eps});
  if (widen) y = y.cast(*dt);
  return {c.op("mul", {y, c.in(1)})};
}

// LpNormalization: x over its L1 or L2 norm along `axis` (0 where the norm is 0).
Outs lp_norm(NodeContext& c) {
  const int64_t p = c.attr_int("p", 2), axis = c.attr_int("axis", -1);
  if (p != 1 && p != 2) c.fail("p = " + std::to_string(p) + " is not 1 or 2");
  const Connection x = c.in(0);
  const Attrs a = {{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}};
  const Connection norm = p == 1 ? c.op("sum", {c.op("abs", {x})}, a) : c.op("sqrt", {c.op("sum", {x * x}, a)});
  // A zero norm means x is all zeros there: divide by 1 instead, giving 0 (ONNX's 0 / 0 = 0).
  return {x / c.op("where", {c.op("equal", {norm, 0.0}), 1.0, norm})};
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
  register_conversion("MaxPool", [](NodeContext& c) { return pool(c, true); });
  register_conversion("AveragePool", [](NodeContext& c) { return pool(c, false); });
  register_conversion("LpPool", lp_pool);
  register_conversion("LRN", lrn);
  register_conversion("ConvTranspose", conv_transpose);
  register_conversion("Hardmax", hardmax);
  register_conversion("RMSNormalization", rms_norm);
  register_conversion("LpNormalization", lp_norm);
  register_conversion("GlobalAveragePool", [](NodeContext& c) {
    return Outs{c.op("global_avg_pool2d", {c.in(0)}, {{"keepdims", int64_t{1}}})};
  });
  register_conversion("Softmax", [](NodeContext& c) { return softmax(c, "softmax"); });
  register_conversion("LogSoftmax", [](NodeContext& c) { return softmax(c, "log_softmax"); });
  register_conversion("Flatten", [](NodeContext& c) {
    const int64_t axis = c.attr_int("axis", 1);
    if (const std::optional<Shape> s = c.static_shape(0)) {
      // (fuzz_onnx: an axis past the rank read past the shape)
      const std::vector<int64_t> flat = flattened(*s, c.axis(axis, static_cast<int64_t>(s->size()), true));
      return numel(*s) == 0 ? empty_result(c, flat) : Outs{c.in(0).reshape(flat)};
    }
    if (axis == 0) return Outs{c.in(0).reshape({1, -1})};
    if (axis == 1) return Outs{c.in(0).reshape({0, -1})};
    c.fail("Flatten at axis " + std::to_string(axis) + " needs the input's size while importing");
  });
  register_conversion("ReduceMean", [](NodeContext& c) { return reduce(c, "mean", 18); });
  register_conversion("ReduceSum", [](NodeContext& c) { return reduce(c, "sum", 13); });
  register_conversion("ReduceMax", [](NodeContext& c) { return reduce(c, "max", 18); });
  register_conversion("ReduceMin", [](NodeContext& c) { return reduce(c, "min", 18); });
  register_conversion("ReduceProd", reduce_prod);
  register_conversion("GlobalMaxPool", [](NodeContext& c) {
    const std::optional<Shape> s = c.static_shape(0);
    if (!s || s->size() < 3) c.fail("GlobalMaxPool needs the input's rank (3 or more) while importing");
    std::vector<int64_t> axes;
    for (int64_t a = 2; a < static_cast<int64_t>(s->size()); ++a) axes.push_back(a);
    return Outs{c.op("max", {c.in(0)}, {{"axes", axes}, {"keepdims", int64_t{1}}})};
  });
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
      // Checked first: an axis of -9e18 from a file made this loop run until memory ran out
      // (found by fuzz_onnx).
      std::vector<int64_t> axes;
      for (int64_t a = c.axis(axis, r); a < r; ++a) axes.push_back(a);
      const std::vector<Connection> mv = c.op_n("moments", {c.in(0)}, 2, {{"axes", axes}, {"keepdims", int64_t{1}}});
      outs.push_back(mv[0]);
      outs.push_back(c.op("rsqrt", {mv[1] + eps}));
    }
    return outs;
  });
  register_conversion("ArgMax", [](NodeContext& c) { return arg_extreme(c, true); });
  register_conversion("TopK", top_k);
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
