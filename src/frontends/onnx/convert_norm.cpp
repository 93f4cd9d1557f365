// ONNX normalizations over groups of axes that ingot's own norms (layer_norm over trailing dims,
// batch_norm with given statistics) do not cover: InstanceNormalization, GroupNormalization and
// MeanVarianceNormalization, each written with `moments` (mean and biased variance in one pass,
// accumulated in double) and elementwise ops. The window functions (HannWindow, HammingWindow,
// BlackmanWindow) are constants of a size known while importing.
#include <cmath>
#include <numbers>
#include <numeric>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"
#include "frontends/onnx/tensor_proto.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

// (x - mean) / sqrt(variance + eps) with the statistics over `axes` (kept as size 1).
Connection normalized(NodeContext& c, const Connection& x, const std::vector<int64_t>& axes, double eps) {
  const std::vector<Connection> mv = c.op_n("moments", {x}, 2, {{"axes", axes}, {"keepdims", int64_t{1}}});
  return (x - mv[0]) * c.op("rsqrt", {mv[1] + eps});
}

// A per-channel [C] vector shaped to multiply [N, C, d1, ...] of rank `rank`.
Connection per_channel(const Connection& v, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank - 1), 1);
  shape[0] = -1;
  return v.reshape(shape);
}

int64_t rank_of(NodeContext& c, const char* what, int64_t at_least) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail(std::string(what) + " needs the input's rank while importing");
  const auto r = static_cast<int64_t>(s->size());
  if (r < at_least) c.fail("its input has rank " + std::to_string(r) + ", not at least " + std::to_string(at_least));
  return r;
}

// InstanceNormalization: each (n, c) plane normalized over its spatial dims, then scale[c] and
// B[c].
Outs instance_norm(NodeContext& c) {
  const int64_t r = rank_of(c, "InstanceNormalization", 3);
  std::vector<int64_t> axes(static_cast<size_t>(r - 2));
  std::iota(axes.begin(), axes.end(), int64_t{2});
  const Connection y = normalized(c, c.in(0), axes, c.attr_float("epsilon", 1e-5f));
  return {y * per_channel(c.in(1), r) + per_channel(c.in(2), r)};
}

// GroupNormalization: the channels in num_groups groups, each (n, group) normalized over its
// channels and spatial dims; then scale and bias per channel (opset 21) or per group (opset 18).
Outs group_norm(NodeContext& c) {
  const std::optional<Shape> s = c.static_shape(0);
  if (!s || s->size() < 3) c.fail("GroupNormalization needs the input's size (rank 3 or more) while importing");
  const int64_t r = static_cast<int64_t>(s->size()), channels = (*s)[1];
  const int64_t groups = c.attr_int("num_groups", 0);
  if (groups <= 0 || channels % groups != 0)
    c.fail("num_groups " + std::to_string(groups) + " does not divide the " + std::to_string(channels) + " channels");
  if (c.attr_int("stash_type", 1) != 1) c.fail("stash_type other than float32 is not supported");
  std::vector<int64_t> grouped = {0, groups, -1};  // [N, G, C / G * spatial]
  Connection y = normalized(c, c.in(0).reshape(grouped), {2}, c.attr_float("epsilon", 1e-5f));
  y = c.op("reshape_like", {y, c.in(0)});
  Connection scale = c.in(1), bias = c.in(2);
  const std::optional<Shape> ss = c.static_shape(1);
  if (c.opset < 21 || (ss && ss->size() == 1 && (*ss)[0] == groups && groups != channels)) {
    // One value per group: repeated over the group's channels.
    std::vector<int64_t> idx(static_cast<size_t>(channels));
    for (int64_t ch = 0; ch < channels; ++ch) idx[static_cast<size_t>(ch)] = ch / (channels / groups);
    const Tensor table = Tensor::from_vector<int64_t>(idx, {channels});
    scale = c.op("gather", {scale, table}, {{"axis", int64_t{0}}});
    bias = c.op("gather", {bias, table}, {{"axis", int64_t{0}}});
  }
  return {y * per_channel(scale, r) + per_channel(bias, r)};
}

// MeanVarianceNormalization: (x - mean) / sqrt(variance) over `axes` (default N, H, W), with
// ONNX's reference epsilon of 1e-9.
Outs mean_variance_norm(NodeContext& c) {
  rank_of(c, "MeanVarianceNormalization", 1);
  return {normalized(c, c.in(0), c.attr_ints("axes", {0, 2, 3}), 1e-9)};
}

// HannWindow, HammingWindow, BlackmanWindow: sum_k a_k cos(2 pi k n / N) for n < size, with N =
// size (periodic, the default) or size - 1 (symmetric); output_datatype an ONNX element type.
Outs window(NodeContext& c, const std::vector<double>& a) {
  const std::vector<int64_t> sizes = c.constant_input(0, "size").astype(DType::Int64).to_vector<int64_t>();
  if (sizes.size() != 1 || sizes[0] < 0 || sizes[0] > (int64_t{1} << 24))
    c.fail("its size must be one value between 0 and 2^24");
  const int64_t size = sizes[0];
  const double period = static_cast<double>(c.attr_int("periodic", 1) != 0 ? size : size - 1);
  Tensor w(DType::Float64, {size});
  for (int64_t n = 0; n < size; ++n) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k)
      v += a[k] * std::cos(2 * std::numbers::pi * static_cast<double>(k) * static_cast<double>(n) / period);
    w.data<double>()[n] = period > 0 ? v : 1.0;  // a window of one sample is [1]
  }
  const DType dt = dtype_of(static_cast<int>(c.attr_int("output_datatype", 1)), "its output_datatype");
  return {c.op("identity", {w.astype(dt)})};
}

}  // namespace

void register_norm_conversions() {
  register_conversion("InstanceNormalization", instance_norm);
  register_conversion("GroupNormalization", group_norm);
  register_conversion("MeanVarianceNormalization", mean_variance_norm);
  register_conversion("HannWindow", [](NodeContext& c) { return window(c, {0.5, -0.5}); });
  register_conversion("HammingWindow", [](NodeContext& c) { return window(c, {25.0 / 46.0, -21.0 / 46.0}); });
  register_conversion("BlackmanWindow", [](NodeContext& c) { return window(c, {0.42, -0.5, 0.08}); });
}

}  // namespace ingot::onnx_import
