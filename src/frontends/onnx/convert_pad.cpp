// Padding: ONNX Pad (constant, edge, reflect and wrap modes), and the explicit padding the
// window operators need where ingot's own padding is symmetric (asymmetric Conv and pooling
// pads, ceil_mode). Written with catalogue ops, so gradients come with them: a constant border is
// a concat of the input with constant blocks, the other modes a gather with an index table.
#include <algorithm>
#include <limits>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

std::vector<int64_t> ints_of(const Tensor& t) { return t.astype(DType::Int64).to_vector<int64_t>(); }

// The source index of each output position along an axis of n elements padded by `before` and
// `after`, in an index-table mode.
std::vector<int64_t> index_table(const std::string& mode, int64_t n, int64_t before, int64_t after) {
  std::vector<int64_t> idx;
  for (int64_t i = -before; i < n + after; ++i) {
    int64_t j = i;
    if (mode == "edge") {
      j = std::clamp<int64_t>(i, 0, n - 1);
    } else if (mode == "wrap") {
      j = ((i % n) + n) % n;
    } else {  // reflect: mirrored about the edge elements, which are not repeated
      const int64_t period = 2 * (n - 1);
      j = period == 0 ? 0 : ((i % period) + period) % period;
      if (j >= n) j = period - j;
    }
    idx.push_back(j);
  }
  return idx;
}

Outs pad(NodeContext& c) {
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    c.fail("mode '" + mode + "' is not an ONNX Pad mode (constant, edge, reflect or wrap)");
  std::vector<int64_t> pads, axes;
  double value = 0;
  std::optional<Connection> fed_value;
  if (c.opset < 11) {
    pads = c.attr_ints(c.opset < 2 ? "paddings" : "pads");
    value = c.attr_float("value", 0.0f);
  } else {
    pads = ints_of(c.constant_input(1, "pads"));
    if (c.has_input(2)) {
      if (const std::optional<Tensor> v = c.known(2)) {
        if (v->numel() != 1) c.fail("its constant_value has " + std::to_string(v->numel()) + " elements, not one");
        value = v->item(0);
      } else {
        fed_value = c.in(2);  // a value fed at run time
      }
    }
    if (c.has_input(3)) axes = ints_of(c.constant_input(3, "axes"));
  }
  const std::optional<Shape> s = c.static_shape(0);
  int64_t rank = s ? static_cast<int64_t>(s->size()) : -1;
  if (axes.empty()) {
    if (pads.size() % 2 != 0) c.fail("its pads have an odd count (" + std::to_string(pads.size()) + ")");
    if (rank >= 0 && static_cast<int64_t>(pads.size()) != 2 * rank)
      c.fail("its pads have " + std::to_string(pads.size()) + " values for an input of rank " + std::to_string(rank));
    rank = static_cast<int64_t>(pads.size() / 2);
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  } else {
    if (rank < 0) c.fail("its axes input needs the input's rank while importing");
    if (pads.size() != 2 * axes.size()) c.fail("its pads do not hold two values per axis");
  }
  const int64_t k = static_cast<int64_t>(axes.size());
  Connection y = c.in(0);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t axis = c.axis(axes[static_cast<size_t>(i)], rank);
    const int64_t before = pads[static_cast<size_t>(i)], after = pads[static_cast<size_t>(i + k)];
    if (before == 0 && after == 0) continue;
    if (mode == "constant" || (before <= 0 && after <= 0)) {
      y = pad_axis(c, y, static_cast<int>(rank), axis, before, after, value, fed_value ? &*fed_value : nullptr);
      continue;
    }
    if (!s) c.fail("mode '" + mode + "' needs the input's size while importing");
    const int64_t n = (*s)[static_cast<size_t>(axis)];
    if (n == 0) c.fail("mode '" + mode + "' pads an empty axis");
    const std::vector<int64_t> idx = index_table(mode, n, before, after);
    if (idx.empty()) c.fail("its pads crop axis " + std::to_string(axis) + " below zero elements");
    y = c.op("gather", {y, Tensor::from_vector<int64_t>(idx, {static_cast<int64_t>(idx.size())})}, {{"axis", axis}});
  }
  return {k == 0 ? c.op("identity", {y}) : y};
}

}  // namespace

Connection pad_axis(const NodeContext& c, const Connection& x, int rank, int64_t axis, int64_t before, int64_t after,
                    double value, const Connection* fed_value) {
  Connection y = x;
  // Negative amounts crop.
  if (before < 0 || after < 0)
    y = y.slice(axis, std::max<int64_t>(0, -before), after < 0 ? after : std::numeric_limits<int64_t>::max());
  const std::optional<DType> dt = c.dtype(0);
  if (!dt) c.fail("the element type of its input is unknown (ONNX type inference gave none)");
  // A border of `width` elements: a 1-wide slice of the input made zero (so it has the input's
  // other sizes, whatever they are at run time) plus a constant that broadcasts it to `width`.
  auto border = [&](int64_t width) {
    Shape bs(static_cast<size_t>(rank), 1);
    bs[static_cast<size_t>(axis)] = width;
    const Connection b = c.op("add", {c.op("zeros_like", {y.slice(axis, 0, 1)}), Tensor::full(*dt, bs, value)});
    return fed_value ? c.op("add", {b, *fed_value}) : b;
  };
  std::vector<IOKey> parts;
  if (before > 0) parts.push_back(border(before));
  parts.push_back(y);
  if (after > 0) parts.push_back(border(after));
  return parts.size() == 1 ? y : c.op("concat", parts, {{"axis", axis}});
}

namespace {

// CenterCropPad: each of `axes` (default all) cropped or zero-padded to the size `shape` gives,
// centred (an odd difference puts the extra element at the end).
Outs center_crop_pad(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("CenterCropPad needs the input's size while importing");
  const int64_t r = static_cast<int64_t>(s->size());
  const std::vector<int64_t> sizes = ints_of(c.constant_input(1, "shape"));
  std::vector<int64_t> axes = c.attr_ints("axes", {});
  if (axes.empty())
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  if (axes.size() != sizes.size()) c.fail("its shape has " + std::to_string(sizes.size()) + " values for " + std::to_string(axes.size()) + " axes");
  Connection y = c.op("identity", {c.in(0)});
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = c.axis(axes[i], r);
    if (sizes[i] < 0) c.fail("a negative size");
    const int64_t d = sizes[i] - (*s)[static_cast<size_t>(a)];  // > 0 pads, < 0 crops
    const int64_t before = d / 2, after = d - d / 2;              // truncation: the odd one at the end
    if (d != 0) y = pad_axis(c, y, static_cast<int>(r), a, before, after, 0.0);
  }
  return {y};
}

}  // namespace

void register_pad_conversions() {
  register_conversion("Pad", pad);
  register_conversion("CenterCropPad", center_crop_pad);
}

}  // namespace ingot::onnx_import
