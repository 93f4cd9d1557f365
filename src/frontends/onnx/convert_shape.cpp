// ONNX operators on shapes and layouts: Constant, Shape, Gather, Unsqueeze, Squeeze, Concat,
// Reshape, Transpose, Slice, ConstantOfShape, Range, Expand, and the indexing ones (Trilu, Tile,
// Split, GatherElements, CumSum, CumProd, OneHot, ...). The shape arithmetic exporters emit
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) is folded while importing: Shape of a value
// of fixed size is a known tensor, and a node whose inputs are all known runs then.
#include <algorithm>
#include <cmath>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"
#include "frontends/onnx/tensor_proto.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

// Values computed while importing are held in memory: at most this many elements each.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 24;

std::vector<int64_t> ints_of(const Tensor& t) { return t.astype(DType::Int64).to_vector<int64_t>(); }

// Axes from the attribute (before `input_from`) or from input `index`.
std::vector<int64_t> axes_of(NodeContext& c, int64_t input_from, int index) {
  if (c.opset < input_from) return c.attr_ints("axes", {});
  return c.has_input(index) ? ints_of(c.constant_input(index, "axes")) : std::vector<int64_t>{};
}

Outs constant(NodeContext& c) {
  Tensor v;
  if (c.has_attr("value")) v = c.attr_tensor("value");
  else if (c.has_attr("value_float")) v = Tensor::full(DType::Float32, {}, c.attr_float("value_float", 0));
  else if (c.has_attr("value_int")) v = Tensor::full(DType::Int64, {}, static_cast<double>(c.attr_int("value_int", 0)));
  else if (c.has_attr("value_ints")) {
    const std::vector<int64_t> xs = c.attr_ints("value_ints");
    v = Tensor::from_vector<int64_t>(xs, {static_cast<int64_t>(xs.size())});
  } else {
    c.fail("only value, value_float, value_int and value_ints constants are supported");
  }
  c.known_outputs[0] = v;
  return {};
}

Outs shape(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("the size of its input is only known at run time (symbolic shape arithmetic is not supported yet)");
  const int64_t r = static_cast<int64_t>(s->size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  start = std::clamp(start < 0 ? start + r : start, int64_t{0}, r);
  end = std::clamp(end < 0 ? end + r : end, int64_t{0}, r);
  const std::vector<int64_t> dims(s->begin() + start, s->begin() + std::max(start, end));
  c.known_outputs[0] = Tensor::from_vector<int64_t>(dims, {static_cast<int64_t>(dims.size())});
  return {};
}

Outs squeeze(NodeContext& c) {
  std::vector<int64_t> axes = axes_of(c, 13, 1);
  const std::optional<Shape> s = c.static_shape(0);
  if (s) {
    const int64_t r = static_cast<int64_t>(s->size());
    std::vector<bool> drop(s->size(), false);
    if (axes.empty())
      for (size_t i = 0; i < s->size(); ++i) drop[i] = (*s)[i] == 1;
    for (int64_t a : axes) {
      const int64_t k = a < 0 ? a + r : a;
      if (k < 0 || k >= r || (*s)[static_cast<size_t>(k)] != 1) c.fail("axis " + std::to_string(a) + " is not of size 1");
      drop[static_cast<size_t>(k)] = true;
    }
    std::vector<int64_t> out;
    for (size_t i = 0; i < s->size(); ++i)
      if (!drop[i]) out.push_back((*s)[i]);
    return {c.in(0).reshape(out)};
  }
  if (axes.empty()) c.fail("Squeeze without axes needs the input's size while importing");
  // A max over size-1 axes is the element itself: a squeeze that needs no static size.
  return {c.op("max", {c.in(0)}, {{"axes", axes}, {"keepdims", int64_t{0}}})};
}

Outs reshape(NodeContext& c) {
  std::vector<int64_t> target = c.opset < 5 ? c.attr_ints("shape") : ints_of(c.constant_input(1, "target shape"));
  if (c.attr_int("allowzero", 0) != 0 && std::find(target.begin(), target.end(), 0) != target.end())
    c.fail("allowzero = 1 with a 0 in the shape is not supported");
  return {c.in(0).reshape(target)};
}

Outs slice(NodeContext& c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes", {});
  } else {
    starts = ints_of(c.constant_input(1, "starts"));
    ends = ints_of(c.constant_input(2, "ends"));
    if (c.has_input(3)) axes = ints_of(c.constant_input(3, "axes"));
    if (c.has_input(4)) steps = ints_of(c.constant_input(4, "steps"));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  return {c.op("slice", {c.in(0)}, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}})};
}

Outs constant_of_shape(NodeContext& c) {
  const std::vector<int64_t> dims = ints_of(c.constant_input(0, "shape"));
  Tensor value = c.has_attr("value") ? c.attr_tensor("value") : Tensor::full(DType::Float32, {1}, 0.0);
  if (value.numel() != 1) c.fail("its value must hold one element");
  for (int64_t d : dims)
    if (d < 0) c.fail("negative dimension " + std::to_string(d));
  const Shape shape(dims.begin(), dims.end());
  const std::optional<int64_t> n = checked_numel(shape);
  if (!n) c.fail("its shape " + to_string(shape) + " has too many elements");
  if (*n <= kMaxFoldedElements) {
    c.known_outputs[0] = Tensor::full(value.dtype(), shape, value.item(0));
    return {};
  }
  // Too large to hold while importing: a scalar broadcast when the model runs.
  return {c.op("broadcast_to", {c.model.constant("constant_of_shape_" + c.node.output(0), value.reshape({}))},
               {{"shape", dims}})};
}

Outs range(NodeContext& c) {
  const Tensor start = c.constant_input(0, "start"), limit = c.constant_input(1, "limit"), delta = c.constant_input(2, "delta");
  const double s = start.item(0), l = limit.item(0), d = delta.item(0);
  if (d == 0) c.fail("delta is 0");
  const double n = std::max(0.0, std::ceil((l - s) / d));
  if (n > static_cast<double>(kMaxFoldedElements)) c.fail("more than " + std::to_string(kMaxFoldedElements) + " elements");
  Tensor out(DType::Float64, {static_cast<int64_t>(n)});
  for (int64_t i = 0; i < out.numel(); ++i) out.data<double>()[i] = s + static_cast<double>(i) * d;
  c.known_outputs[0] = out.astype(start.dtype());
  return {};
}

Outs expand(NodeContext& c) {
  std::vector<int64_t> target = ints_of(c.constant_input(1, "shape"));
  // ONNX broadcasts both ways: a 1 in the target keeps the input's size there.
  if (const std::optional<Shape> s = c.static_shape(0)) {
    if (s->size() > target.size()) target.insert(target.begin(), s->size() - target.size(), 1);
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t& t = target[target.size() - s->size() + i];
      if (t == 1) t = (*s)[i];
    }
  }
  return {c.op("broadcast_to", {c.in(0)}, {{"shape", target}})};
}

// Size: the element count, known where the input's size is.
Outs size(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (s) {
    c.known_outputs[0] = Tensor::full(DType::Int64, {}, static_cast<double>(numel(*s)));
    return {};
  }
  return {c.op("numel", {c.in(0)}, {{"dtype", std::string("int64")}})};
}

// Split into parts along `axis`: sizes from the input `split` (opset 13 on) or attribute, or
// equal parts (num_outputs from opset 18, else one per output), the last smaller if need be.
Outs split(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("Split needs the input's size while importing");
  const int64_t ax = c.axis(c.attr_int("axis", 0), static_cast<int64_t>(s->size()));
  const int64_t dim = (*s)[static_cast<size_t>(ax)];
  std::vector<int64_t> sizes;
  if (c.opset >= 13 && c.has_input(1)) sizes = ints_of(c.constant_input(1, "split"));
  else if (c.opset < 13) sizes = c.attr_ints("split", {});
  if (sizes.empty()) {
    const int64_t n = c.attr_int("num_outputs", c.node.output_size());
    if (n <= 0) c.fail("no outputs");
    const int64_t part = (dim + n - 1) / n;
    for (int64_t at = 0; at < dim; at += part) sizes.push_back(std::min(part, dim - at));
  }
  if (static_cast<int>(sizes.size()) != c.node.output_size())
    c.fail(std::to_string(sizes.size()) + " parts for " + std::to_string(c.node.output_size()) + " outputs");
  Outs out;
  int64_t at = 0;
  for (int64_t n : sizes) {
    out.push_back(c.op("slice", {c.in(0)}, {{"starts", std::vector<int64_t>{at}}, {"ends", std::vector<int64_t>{at + n}},
                                            {"axes", std::vector<int64_t>{ax}}, {"steps", std::vector<int64_t>{1}}}));
    at += n;
  }
  if (at != dim) c.fail("the parts add up to " + std::to_string(at) + ", not the axis' size " + std::to_string(dim));
  return out;
}

// Trilu: the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, the rest
// zero; the mask is a constant of the matrix size.
Outs trilu(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || s->size() < 2) c.fail("Trilu needs the input's size (rank 2 or more) while importing");
  const int64_t k = c.has_input(1) ? c.constant_input(1, "k").astype(DType::Int64).to_vector<int64_t>().at(0) : 0;
  const bool upper = c.attr_int("upper", 1) != 0;
  const int64_t rows = (*s)[s->size() - 2], cols = (*s)[s->size() - 1];
  Tensor mask(DType::Bool, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask.data<bool>()[i * cols + j] = upper ? j - i >= k : j - i <= k;
  const Connection x = c.in(0);
  return {c.op("where", {mask, x, c.op("zeros_like", {x})})};
}

// Tile: each axis repeated, as a gather of the axis' indices in turn.
Outs tile(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("Tile needs the input's size while importing");
  const std::vector<int64_t> repeats = ints_of(c.constant_input(1, "repeats"));
  if (repeats.size() != s->size()) c.fail("its repeats have " + std::to_string(repeats.size()) + " values for rank " + std::to_string(s->size()));
  Connection y = c.op("identity", {c.in(0)});
  for (size_t a = 0; a < repeats.size(); ++a) {
    if (repeats[a] < 0) c.fail("a negative repeat count");
    if (repeats[a] == 1) continue;
    const int64_t n = (*s)[a];
    if (n * repeats[a] > kMaxFoldedElements) c.fail("its index table is too large");
    std::vector<int64_t> idx;
    for (int64_t r = 0; r < repeats[a]; ++r)
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    y = c.op("gather", {y, Tensor::from_vector<int64_t>(idx, {static_cast<int64_t>(idx.size())})}, {{"axis", static_cast<int64_t>(a)}});
  }
  return {y};
}

// CumSum and CumProd: the running sum (product) along `axis` (an input known while importing) in
// log2(n) steps of shifted adds (multiplies), Hillis-Steele: exact for integers, with no [n, n]
// matrix. exclusive shifts the results by one; reverse runs from the end.
Outs cumulative(NodeContext& c, const char* op, double identity) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("it needs the input's size while importing");
  const int64_t r = static_cast<int64_t>(s->size());
  const std::vector<int64_t> axes = ints_of(c.constant_input(1, "axis"));
  if (axes.size() != 1) c.fail("its axis must be one value, got " + std::to_string(axes.size()));
  const int64_t axis = c.axis(axes[0], r);
  const int64_t n = (*s)[static_cast<size_t>(axis)];
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  const Connection x = c.in(0);
  // `like` filled with the operation's identity (0 or 1) in its own dtype.
  auto identities = [&](const Connection& like) {
    const Connection zeros = c.op("zeros_like", {like});
    return identity == 0.0 ? zeros : c.op("add", {zeros, identity});
  };
  if (n == 0 || (exclusive && n == 1)) return {identities(x)};
  // y moved k places along the axis, toward its end (reverse: its start), identities coming in.
  auto shifted = [&](const Connection& y, int64_t k) {
    const Connection fill = identities(y.slice(axis, 0, k));
    return reverse ? c.op("concat", {y.slice(axis, k, n), fill}, {{"axis", axis}})
                   : c.op("concat", {fill, y.slice(axis, 0, n - k)}, {{"axis", axis}});
  };
  Connection y = c.op("identity", {x});
  for (int64_t k = 1; k < n; k *= 2) y = c.op(op, {y, shifted(y, k)});
  return {exclusive ? shifted(y, 1) : y};
}

// OneHot: values[1] where an index (a negative one counts from depth) equals the position along
// the new axis, values[0] elsewhere, so an index out of range gives values[0] throughout.
Outs one_hot(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("OneHot needs the indices' rank while importing");
  const int64_t r = static_cast<int64_t>(s->size()) + 1;
  const int64_t axis = c.axis(c.attr_int("axis", -1), r);
  const std::vector<double> depths = c.constant_input(1, "depth").astype(DType::Float64).to_vector<double>();
  if (depths.size() != 1) c.fail("its depth must be one value");
  if (!(depths[0] >= 1 && depths[0] <= static_cast<double>(kMaxFoldedElements)))
    c.fail("depth " + std::to_string(depths[0]) + " is not between 1 and " + std::to_string(kMaxFoldedElements));
  const auto depth = static_cast<int64_t>(depths[0]);
  const Connection idx = c.op("cast", {c.in(0)}, {{"dtype", std::string("int64")}});
  const Connection wrapped = c.op("where", {c.op("less", {idx, Tensor::scalar<int64_t>(0)}),
                                            c.op("add", {idx, Tensor::scalar<int64_t>(depth)}), idx});
  Shape iota_shape(static_cast<size_t>(r), 1);
  iota_shape[static_cast<size_t>(axis)] = depth;
  std::vector<int64_t> iota(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i) iota[static_cast<size_t>(i)] = i;
  const Connection hot = c.op("equal", {c.op("expand_dims", {wrapped}, {{"axes", std::vector<int64_t>{axis}}}),
                                        Tensor::from_vector<int64_t>(iota, iota_shape)});
  const Connection values = c.in(2);
  return {c.op("where", {hot, values.slice(0, 1, 2), values.slice(0, 0, 1)})};
}

// ScatterElements: `add` adds the updates' scatter into the data; `none` replaces the data
// where an update lands (ONNX leaves repeated indices undefined there; the last is not chosen).
Outs scatter_elements(NodeContext& c) {
  const std::string reduction = c.attr_string("reduction", "none");
  const Attrs a = {{"axis", c.attr_int("axis", 0)}};
  const Connection data = c.in(0), scattered = c.op("scatter_add", {data, c.in(1), c.in(2)}, a);
  if (reduction == "add") return Outs{c.op("add", {data, scattered})};
  if (reduction != "none") c.fail("reduction '" + reduction + "' is not supported (none and add are)");
  const Connection ones = c.op("add", {c.op("zeros_like", {c.in(2)}), 1.0});
  const Connection hit = c.op("greater", {c.op("scatter_add", {data, c.in(1), ones}, a), 0.0});
  return Outs{c.op("where", {hit, scattered, data})};
}

// SpaceToDepth: each blocksize x blocksize patch of [N, C, H, W] into channels
// ([N, C * b * b, H / b, W / b]), as ONNX's reshape-transpose-reshape.
Outs space_to_depth(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || s->size() != 4) c.fail("SpaceToDepth needs the input's size (rank 4) while importing");
  const int64_t b = c.attr_int("blocksize", 0), ch = (*s)[1], h = (*s)[2], w = (*s)[3];
  if (b <= 0 || h % b != 0 || w % b != 0) c.fail("blocksize " + std::to_string(b) + " does not divide H and W");
  return {c.in(0).reshape({0, ch, h / b, b, w / b, b}).transpose({0, 3, 5, 1, 2, 4}).reshape({0, ch * b * b, h / b, w / b})};
}

// DepthToSpace: the inverse, channels into blocksize x blocksize patches, in DCR (depth-column-
// row, the default) or CRD order.
Outs depth_to_space(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || s->size() != 4) c.fail("DepthToSpace needs the input's size (rank 4) while importing");
  const int64_t b = c.attr_int("blocksize", 0), ch = (*s)[1], h = (*s)[2], w = (*s)[3];
  if (b <= 0 || ch % (b * b) != 0) c.fail("blocksize " + std::to_string(b) + " squared does not divide the channels");
  const std::string mode = c.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") c.fail("mode '" + mode + "' is not DCR or CRD");
  const int64_t cb = ch / (b * b);
  const Connection t = mode == "DCR" ? c.in(0).reshape({0, b, b, cb, h, w}).transpose({0, 3, 4, 1, 5, 2})
                                     : c.in(0).reshape({0, cb, b, b, h, w}).transpose({0, 1, 4, 2, 5, 3});
  return {t.reshape({0, cb, h * b, w * b})};
}

// EyeLike: ones on the k-th diagonal of a 2-D shape like the input's, of `dtype` (default the
// input's), zeros elsewhere.
Outs eye_like(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || s->size() != 2) c.fail("EyeLike needs the input's size (rank 2) while importing");
  const int64_t rows = (*s)[0], cols = (*s)[1], k = c.attr_int("k", 0);
  if (rows * cols > kMaxFoldedElements) c.fail("its matrix is too large");
  const std::optional<DType> in = c.dtype(0);
  const DType dt = c.has_attr("dtype") ? dtype_of(static_cast<int>(c.attr_int("dtype", 1)), "its dtype")
                                       : in.value_or(DType::Float32);
  Tensor eye(DType::Float64, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) eye.data<double>()[i * cols + j] = j - i == k ? 1.0 : 0.0;
  return {c.op("identity", {eye.astype(dt)})};
}

// The index tuples of GatherND / ScatterND (the last axis of `indices`, k values, past the
// first `b` batch dims) as flat indices into data seen as [batch * d_b * ... * d_(b+k-1), rest...]
// (negative components count from the end): `flat` has the indices' shape less its last axis.
struct FlatTuples {
  Connection flat;
  std::vector<int64_t> flat_data_shape;
};

FlatTuples flat_tuples(NodeContext& c, const Shape& ds, const Shape& is, int64_t b, const std::string& op) {
  const int64_t k = is.back();
  const auto dr = static_cast<int64_t>(ds.size()), ir = static_cast<int64_t>(is.size());
  if (b < 0 || b >= ir || b + k > dr)
    c.fail(op + ": batch_dims " + std::to_string(b) + " and tuples of " + std::to_string(k) + " do not fit data of rank " + std::to_string(dr));
  int64_t batch = 1, span = 1;
  for (int64_t a = 0; a < b; ++a) batch *= ds[static_cast<size_t>(a)];
  std::vector<int64_t> dims(static_cast<size_t>(k)), strides(static_cast<size_t>(k));
  for (int64_t j = k - 1; j >= 0; --j) {
    dims[static_cast<size_t>(j)] = ds[static_cast<size_t>(b + j)];
    strides[static_cast<size_t>(j)] = span;
    span *= dims[static_cast<size_t>(j)];
  }
  std::vector<int64_t> flat_shape = {batch * span};
  for (int64_t a = b + k; a < dr; ++a) flat_shape.push_back(ds[static_cast<size_t>(a)]);
  const Shape tuple_shape = {k};
  const Connection idx = c.op("cast", {c.in(1)}, {{"dtype", std::string("int64")}});
  const Connection wrapped = c.op("where", {c.op("less", {idx, Tensor::scalar<int64_t>(0)}),
                                            c.op("add", {idx, Tensor::from_vector<int64_t>(dims, tuple_shape)}), idx});
  Connection flat = c.op("sum", {c.op("mul", {wrapped, Tensor::from_vector<int64_t>(strides, tuple_shape)})},
                         {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}});
  if (b > 0) {  // + the batch's linear index times the span, broadcast over the tuples' other dims
    Shape bshape(static_cast<size_t>(ir - 1), 1);
    std::vector<int64_t> base(static_cast<size_t>(batch));
    for (int64_t a = 0; a < b; ++a) bshape[static_cast<size_t>(a)] = is[static_cast<size_t>(a)];
    for (int64_t i = 0; i < batch; ++i) base[static_cast<size_t>(i)] = i * span;
    flat = c.op("add", {flat, Tensor::from_vector<int64_t>(base, bshape)});
  }
  return {flat, flat_shape};
}

// GatherND: each index tuple picks a slice of `data` past its first batch_dims dims: one gather
// of the flat indices from data seen as [batch * d_b * ... * d_(b+k-1), rest...].
Outs gather_nd(NodeContext& c) {
  const std::optional<Shape> ds = c.static_shape(0), is = c.static_shape(1);
  if (!ds || !is || is->empty()) c.fail("GatherND needs the sizes of data and indices while importing");
  const FlatTuples t = flat_tuples(c, *ds, *is, c.attr_int("batch_dims", 0), "GatherND");
  return {c.op("gather", {c.in(0).reshape(t.flat_data_shape), t.flat}, {{"axis", int64_t{0}}})};
}

// ScatterND: a copy of `data` with the slice each index tuple names replaced by (reduction
// `none`) or increased by (`add`) the matching slice of `updates` (shaped indices[:-1] +
// data[k:]): an index_add of the updates' rows into data seen as [d_0 * ... * d_(k-1), rest...].
// As with ScatterElements, `none` leaves repeated tuples undefined in ONNX; here they add up.
Outs scatter_nd(NodeContext& c) {
  const std::optional<Shape> ds = c.static_shape(0), is = c.static_shape(1), us = c.static_shape(2);
  if (!ds || !is || !us || is->empty()) c.fail("ScatterND needs the sizes of data, indices and updates while importing");
  const std::string reduction = c.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") c.fail("reduction '" + reduction + "' is not supported (none and add are)");
  const FlatTuples t = flat_tuples(c, *ds, *is, 0, "ScatterND");
  Shape want_updates(is->begin(), is->end() - 1);
  want_updates.insert(want_updates.end(), ds->begin() + is->back(), ds->end());
  if (*us != want_updates) c.fail("updates of shape " + to_string(*us) + ", expected " + to_string(want_updates));
  int64_t tuples = 1;
  for (size_t a = 0; a + 1 < is->size(); ++a) tuples *= (*is)[a];
  std::vector<int64_t> rows_shape = {tuples};
  rows_shape.insert(rows_shape.end(), t.flat_data_shape.begin() + 1, t.flat_data_shape.end());
  const Connection data = c.in(0).reshape(t.flat_data_shape), index = t.flat.reshape({tuples});
  const Connection rows = c.in(2).reshape(rows_shape);
  const Attrs axis0 = {{"axis", int64_t{0}}};
  const Connection scattered = c.op("index_add", {data, index, rows}, axis0);
  const std::vector<int64_t> out_shape(ds->begin(), ds->end());
  if (reduction == "add") return {c.op("add", {data, scattered}).reshape(out_shape)};
  const Connection ones = c.op("add", {c.op("zeros_like", {rows}), 1.0});
  const Connection hit = c.op("greater", {c.op("index_add", {data, index, ones}, axis0), 0.0});
  return {c.op("where", {hit, scattered, data}).reshape(out_shape)};
}

// ReverseSequence: along time_axis, the first sequence_lens[b] elements of each batch entry b
// (along batch_axis) reversed, the rest kept: a take_along_axis through an index table made from
// the lengths at run time.
Outs reverse_sequence(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || s->size() < 2) c.fail("ReverseSequence needs the input's size (rank 2 or more) while importing");
  const int64_t r = static_cast<int64_t>(s->size());
  const int64_t bt = c.attr_int("batch_axis", 1), tt = c.attr_int("time_axis", 0);
  if (!((bt == 0 && tt == 1) || (bt == 1 && tt == 0))) c.fail("batch_axis and time_axis must be 0 and 1");
  const int64_t steps = (*s)[static_cast<size_t>(tt)];
  Shape tshape(static_cast<size_t>(r), 1), lshape(static_cast<size_t>(r), 1);
  tshape[static_cast<size_t>(tt)] = steps;
  lshape[static_cast<size_t>(bt)] = -1;
  std::vector<int64_t> t(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) t[static_cast<size_t>(i)] = i;
  const Connection time = c.op("identity", {Tensor::from_vector<int64_t>(t, tshape)});
  const Connection lens = c.op("cast", {c.in(1)}, {{"dtype", std::string("int64")}}).reshape(std::vector<int64_t>(lshape.begin(), lshape.end()));
  const Connection idx = c.op("where", {c.op("less", {time, lens}),
                                        c.op("sub", {c.op("sub", {lens, Tensor::scalar<int64_t>(1)}), time}), time});
  return {c.op("take_along_axis", {c.in(0), c.op("broadcast_to_like", {idx, c.in(0)})}, {{"axis", tt}})};
}

}  // namespace

void register_shape_conversions() {
  register_conversion("CumSum", [](NodeContext& c) { return cumulative(c, "add", 0.0); });
  register_conversion("CumProd", [](NodeContext& c) { return cumulative(c, "mul", 1.0); });
  register_conversion("SpaceToDepth", space_to_depth);
  register_conversion("DepthToSpace", depth_to_space);
  register_conversion("EyeLike", eye_like);
  register_conversion("GatherND", gather_nd);
  register_conversion("ScatterND", scatter_nd);
  register_conversion("ReverseSequence", reverse_sequence);
  register_conversion("OneHot", one_hot);
  register_conversion("Trilu", trilu);
  register_conversion("Tile", tile);
  register_conversion("Size", size);
  register_conversion("Split", split);
  register_conversion("GatherElements", [](NodeContext& c) {
    return Outs{c.op("take_along_axis", {c.in(0), c.in(1)}, {{"axis", c.attr_int("axis", 0)}})};
  });
  register_conversion("ScatterElements", scatter_elements);
  register_conversion("Scatter", scatter_elements);  // its opset 9-10 name
  register_conversion("Constant", constant);
  register_conversion("Shape", shape);
  register_conversion("Gather", [](NodeContext& c) {
    return Outs{c.op("gather", {c.in(0), c.in(1)}, {{"axis", c.attr_int("axis", 0)}})};
  });
  register_conversion("Unsqueeze", [](NodeContext& c) {
    return Outs{c.op("expand_dims", {c.in(0)}, {{"axes", axes_of(c, 13, 1)}})};
  });
  register_conversion("Squeeze", squeeze);
  register_conversion("Concat", [](NodeContext& c) {
    std::vector<IOKey> ins;
    for (int i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i)) ins.push_back(c.in(i));
    return Outs{c.op("concat", ins, {{"axis", c.attr_int("axis", 0)}})};
  });
  register_conversion("Reshape", reshape);
  register_conversion("Transpose", [](NodeContext& c) {
    return Outs{c.has_attr("perm") ? c.in(0).transpose(c.attr_ints("perm")) : c.op("transpose", {c.in(0)})};
  });
  register_conversion("Slice", slice);
  register_conversion("ConstantOfShape", constant_of_shape);
  register_conversion("Range", range);
  register_conversion("Expand", expand);
}

}  // namespace ingot::onnx_import
