// ONNX Resize (opsets 10 on) and Upsample: separable per axis, as ONNX defines it. For each
// resized axis the importer computes, in double and following ONNX's reference step by step
// (coordinate transformation, the interpolation taps and their coefficients, edge clamping,
// exclude_outside, antialias), the matrix W [out, in] with out[i] = sum_j W[i][j] in[j]. An axis
// whose every row picks one input element (nearest mode) is a gather through an index table,
// exact for any dtype; otherwise the axis moves last and is multiplied by W transposed. Sizes must
// be known while importing; tf_crop_and_resize's points outside the image take
// extrapolation_value through a constant mask.
#include <algorithm>
#include <cmath>

#include "ingot/error.h"
#include "frontends/onnx/importer.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

struct ResizeRule {
  std::string mode = "nearest", coordinates = "half_pixel", nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

// The interpolation coefficients at `ratio` (in (0, 1]) for a scale factor.
std::vector<double> coefficients(const ResizeRule& r, double ratio, double scale) {
  if (r.mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    if (r.nearest_mode == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (r.nearest_mode == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (r.nearest_mode == "floor") return {1, 0};
    return {0, 1};  // ceil
  }
  if (r.mode == "linear") {
    if (!r.antialias) return {1 - ratio, ratio};
    const double s = std::min(scale, 1.0);
    const int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1), footprint = 2 - 2 * start;
    std::vector<double> c;
    double sum = 0;
    for (int64_t i = start; i < start + footprint; ++i) {
      c.push_back(std::clamp(1 - std::abs((static_cast<double>(i) - ratio) * s), 0.0, 1.0));
      sum += c.back();
    }
    for (double& v : c) v /= sum;
    return c;
  }
  const double a = r.cubic_a;  // cubic
  if (!r.antialias) {
    const double p = ratio + 1, q = 1 - ratio, q1 = q + 1;
    return {((a * p - 5 * a) * p + 8 * a) * p - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
            ((a + 2) * q - (a + 3)) * q * q + 1, ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a};
  }
  const double s = std::min(scale, 1.0);
  auto k = [a](double x) {
    x = std::abs(x);
    if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
    if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    return 0.0;
  };
  const int64_t start = static_cast<int64_t>(std::floor(-2 / s) + 1), end = 2 - start;
  std::vector<double> c;
  double sum = 0;
  for (int64_t i = start; i < end; ++i) {
    c.push_back(k(s * (static_cast<double>(i) - ratio)));
    sum += c.back();
  }
  for (double& v : c) v /= sum;
  return c;
}

struct AxisPlan {
  std::vector<double> w;        // [out, in], row-major
  std::vector<bool> outside;    // tf_crop_and_resize: the output points that extrapolate
  bool any_outside = false;
};

AxisPlan plan_axis(const NodeContext& c, const ResizeRule& r, int64_t in, int64_t out, double scale, double roi0, double roi1) {
  AxisPlan p;
  p.w.assign(static_cast<size_t>(out * in), 0.0);
  p.outside.assign(static_cast<size_t>(out), false);
  const double out_width = scale * static_cast<double>(in);
  for (int64_t i = 0; i < out; ++i) {
    const double y = static_cast<double>(i);
    double x = 0;
    if (r.coordinates == "align_corners") x = out_width == 1 ? 0 : y * static_cast<double>(in - 1) / (out_width - 1);
    else if (r.coordinates == "asymmetric") x = y / scale;
    else if (r.coordinates == "tf_crop_and_resize") {
      x = out_width == 1 ? (roi1 - roi0) * static_cast<double>(in - 1) / 2
                         : y * (roi1 - roi0) * static_cast<double>(in - 1) / (out_width - 1);
      x += roi0 * static_cast<double>(in - 1);
      if (x < 0 || x > static_cast<double>(in - 1)) {
        p.outside[static_cast<size_t>(i)] = p.any_outside = true;
        continue;
      }
    } else if (r.coordinates == "pytorch_half_pixel") x = out_width == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    else if (r.coordinates == "half_pixel") x = (y + 0.5) / scale - 0.5;
    else if (r.coordinates == "half_pixel_symmetric") {
      const double offset = static_cast<double>(in) / 2 * (1 - static_cast<double>(out) / out_width);
      x = offset + (y + 0.5) / scale - 0.5;
    } else {
      c.fail("coordinate_transformation_mode '" + r.coordinates + "' is not an ONNX mode");
    }
    const double floor_x = std::floor(x);
    const double ratio = x == floor_x ? 1.0 : x - floor_x;
    std::vector<double> coeff = coefficients(r, ratio, scale);
    const int64_t n = static_cast<int64_t>(coeff.size()), pad = (n + 1) / 2;
    const double xp = x + static_cast<double>(pad), pp = std::floor(xp), frac = xp - pp;
    const int64_t offset = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    const int64_t start = static_cast<int64_t>(pp) + offset - pad;
    if (r.exclude_outside) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (start + j < 0 || start + j >= in) coeff[static_cast<size_t>(j)] = 0;
        sum += coeff[static_cast<size_t>(j)];
      }
      for (double& v : coeff) v /= sum == 0 ? 1 : sum;
    }
    for (int64_t j = 0; j < n; ++j)
      p.w[static_cast<size_t>(i * in + std::clamp<int64_t>(start + j, 0, in - 1))] += coeff[static_cast<size_t>(j)];
  }
  return p;
}

// `x` resized along `axis` (of rank `rank`) by the plan.
Connection apply_axis(NodeContext& c, Connection x, int64_t rank, int64_t axis, int64_t in, int64_t out, const AxisPlan& p,
                      const ResizeRule& r, DType dt) {
  // One input element per row with weight 1: a gather.
  std::vector<int64_t> pick;
  for (int64_t i = 0; i < out && static_cast<int64_t>(pick.size()) == i; ++i)
    for (int64_t j = 0; j < in; ++j) {
      const double w = p.w[static_cast<size_t>(i * in + j)];
      if (w == 1) pick.push_back(j);
      else if (w != 0) break;
    }
  Connection y;
  if (static_cast<int64_t>(pick.size()) == out) {
    y = c.op("gather", {x, Tensor::from_vector<int64_t>(pick, {out})}, {{"axis", axis}});
  } else {
    if (!is_floating(dt)) c.fail("interpolating (mode '" + r.mode + "') an integer tensor is not supported");
    std::vector<int64_t> perm;
    for (int64_t a = 0; a < rank; ++a)
      if (a != axis) perm.push_back(a);
    perm.push_back(axis);
    std::vector<int64_t> back(static_cast<size_t>(rank));
    for (int64_t a = 0; a < rank; ++a) back[static_cast<size_t>(perm[static_cast<size_t>(a)])] = a;
    Tensor wt(DType::Float64, {in, out});
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < in; ++j) wt.data<double>()[j * out + i] = p.w[static_cast<size_t>(i * in + j)];
    y = c.op("matmul", {x.transpose(perm), wt.astype(dt)}).transpose(back);
  }
  if (p.any_outside) {
    Shape ms(static_cast<size_t>(rank), 1);
    ms[static_cast<size_t>(axis)] = out;
    Tensor mask(DType::Bool, ms);
    for (int64_t i = 0; i < out; ++i) mask.data<bool>()[i] = p.outside[static_cast<size_t>(i)];
    y = c.op("where", {mask, r.extrapolation, y});
  }
  return y;
}

Outs resize(NodeContext& c, bool upsample) {
  ResizeRule r;
  r.mode = c.attr_string("mode", "nearest");
  if (r.mode == "bilinear") r.mode = "linear";
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic") c.fail("mode '" + r.mode + "' is not nearest, linear or cubic");
  const std::optional<Shape> s = c.static_shape(0);
  if (!s) c.fail("the size of its input is only known at run time; ingot needs it while importing");
  const int64_t rank = static_cast<int64_t>(s->size());
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes, axes;
  auto floats = [](const Tensor& t) { return t.astype(DType::Float64).to_vector<double>(); };
  if (upsample || c.opset < 11) {
    // Upsample and Resize-10: scales (attribute before opset 9, else input 1), asymmetric coordinates.
    r.coordinates = "asymmetric";
    r.nearest_mode = upsample ? "floor" : "round_prefer_floor";
    if (upsample && c.opset < 9) {
      for (const auto& at : c.node.attribute())
        if (at.name() == "scales")
          for (float v : at.floats()) scales.push_back(v);
    } else {
      scales = floats(c.constant_input(1, "scales"));
    }
    if (upsample && r.mode == "nearest") r.nearest_mode = "floor";
  } else {
    r.coordinates = c.attr_string("coordinate_transformation_mode", "half_pixel");
    r.nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
    r.cubic_a = c.attr_float("cubic_coeff_a", -0.75f);
    r.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    r.extrapolation = c.attr_float("extrapolation_value", 0.0f);
    r.antialias = c.attr_int("antialias", 0) != 0;
    if (c.has_input(1)) roi = floats(c.constant_input(1, "roi"));
    if (c.has_input(2)) scales = floats(c.constant_input(2, "scales"));
    if (c.has_input(3)) sizes = c.constant_input(3, "sizes").astype(DType::Int64).to_vector<int64_t>();
    axes = c.attr_ints("axes", {});
  }
  if (r.mode == "nearest" && r.antialias) c.fail("antialias is not defined for mode nearest");
  for (int64_t& a : axes) a = c.axis(a, rank);
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  const size_t k = axes.size();
  if (!sizes.empty() && !scales.empty()) c.fail("both scales and sizes are given");
  if (sizes.empty() && scales.size() != k) c.fail("its scales have " + std::to_string(scales.size()) + " values for " + std::to_string(k) + " axes");
  if (!sizes.empty() && sizes.size() != k) c.fail("its sizes have " + std::to_string(sizes.size()) + " values for " + std::to_string(k) + " axes");
  if (!roi.empty() && roi.size() != 2 * k) roi.clear();
  // Per resized axis: the scale factor and the output size, as ONNX's reference derives them.
  std::vector<double> scale(k);
  std::vector<int64_t> out(k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t n = (*s)[static_cast<size_t>(axes[i])];
    if (sizes.empty()) {
      scale[i] = scales[i];
      if (!(scale[i] > 0) || !std::isfinite(scale[i])) c.fail("a scale must be positive");
      out[i] = static_cast<int64_t>(scale[i] * static_cast<double>(n));
    } else {
      if (sizes[i] < 0) c.fail("a negative size");
      out[i] = sizes[i];
      scale[i] = static_cast<double>(sizes[i]) / static_cast<double>(n);
    }
  }
  const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
  if (!sizes.empty() && policy != "stretch") {
    if (policy != "not_larger" && policy != "not_smaller") c.fail("keep_aspect_ratio_policy '" + policy + "' is not an ONNX policy");
    double common = scale[0];
    for (double v : scale) common = policy == "not_larger" ? std::min(common, v) : std::max(common, v);
    for (size_t i = 0; i < k; ++i) {
      scale[i] = common;
      out[i] = static_cast<int64_t>(common * static_cast<double>((*s)[static_cast<size_t>(axes[i])]) + 0.5);
    }
  }
  const std::optional<DType> dt = c.dtype(0);
  if (!dt) c.fail("the element type of its input is unknown");
  Connection y = c.op("identity", {c.in(0)});
  for (size_t i = 0; i < k; ++i) {
    const int64_t n = (*s)[static_cast<size_t>(axes[i])];
    const double r0 = roi.empty() ? 0.0 : roi[i], r1 = roi.empty() ? 1.0 : roi[k + i];
    if (std::abs(scale[i] - 1) < 1e-12 && out[i] == n && std::abs(r0) < 1e-12 && std::abs(r1 - 1) < 1e-12) continue;
    if (n == 0 || out[i] == 0) c.fail("resizing an empty axis or to zero elements is not supported");
    if (n * out[i] > (int64_t{1} << 26)) c.fail("its interpolation matrix would be too large");
    const AxisPlan p = plan_axis(c, r, n, out[i], scale[i], r0, r1);
    y = apply_axis(c, y, rank, axes[i], n, out[i], p, r, *dt);
  }
  return {y};
}

}  // namespace

void register_resize_conversions() {
  register_conversion("Resize", [](NodeContext& c) { return resize(c, false); });
  register_conversion("Upsample", [](NodeContext& c) { return resize(c, true); });
}

}  // namespace ingot::onnx_import
