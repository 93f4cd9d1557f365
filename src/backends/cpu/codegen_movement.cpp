#include "backends/cpu/codegen_movement.h"

#include <limits>
#include <sstream>

#include "ingot/dtype.h"
#include "ingot/error.h"

namespace ingot::cpu {
namespace {

constexpr int kMaxRank = 16;  // the prelude kernels' fixed arrays

// An int64 as a C++ literal (the smallest one has no literal of its own).
std::string i64(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "std::numeric_limits<int64_t>::min()";
  return std::to_string(v) + "LL";
}

std::string product(const std::vector<std::string>& d, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to && i < d.size(); ++i) s += (s.empty() ? "" : " * ") + d[i];
  return s.empty() ? "1" : "(" + s + ")";
}

std::string list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return "{" + (s.empty() ? std::string("0") : s) + "}";
}

int axis_of(const Node& n, int rank, int64_t dflt = 0) {
  const int64_t a = n.attrs.get_int("axis", dflt);
  return static_cast<int>(a < 0 ? a + rank : a);
}

bool axis_ok(const Node& n, int rank, int64_t dflt = 0) {
  const int64_t a = n.attrs.get_int("axis", dflt);
  return rank >= 1 && a >= -rank && a < rank;
}

// A slice's per-axis start / end / step over a tensor of `rank` (axes not sliced: the whole dim),
// or false when the attributes are not a valid slice.
bool slice_bounds(const Node& n, int rank, std::vector<std::string>& start, std::vector<std::string>& end,
                  std::vector<std::string>& step) {
  const std::vector<int64_t> starts = n.attrs.get_ints("starts", {}), ends = n.attrs.get_ints("ends", {});
  const std::vector<int64_t> steps = n.attrs.get_ints("steps", std::vector<int64_t>(starts.size(), 1));
  std::vector<int64_t> axes = n.attrs.get_ints("axes", {});
  if (!n.attrs.has("axes"))
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (!n.attrs.has("starts") || !n.attrs.has("ends") || ends.size() != starts.size() || steps.size() != starts.size() || axes.size() != starts.size()) return false;
  start.assign(static_cast<size_t>(rank), "0");
  end.assign(static_cast<size_t>(rank), i64(std::numeric_limits<int64_t>::max()));
  step.assign(static_cast<size_t>(rank), "1");
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)] || steps[i] == 0 ||
        steps[i] == std::numeric_limits<int64_t>::min())
      return false;
    seen[static_cast<size_t>(a)] = true;
    start[static_cast<size_t>(a)] = i64(starts[i]);
    end[static_cast<size_t>(a)] = i64(ends[i]);
    step[static_cast<size_t>(a)] = i64(steps[i]);
  }
  return true;
}

std::string slice_call(const std::string& ctype, int mode, const std::string& x, const std::vector<std::string>& full,
                       const std::vector<std::string>& start, const std::vector<std::string>& end,
                       const std::vector<std::string>& step) {
  std::ostringstream k;
  k << "  {\n    const int64_t full[] = " << list(full) << ", start[] = " << list(start) << ", end[] = " << list(end)
    << ", step[] = " << list(step) << ";\n    ig_slice_copy<" << ctype << ", " << mode << ">(" << x << ", y, "
    << full.size() << ", full, start, end, step);\n  }\n";
  return k.str();
}

}  // namespace

// A slice of leading rows (axis 0, start >= 0, step 1, the row count known): one contiguous block.
bool leading_rows_slice(const Graph& g, const Node& n) {
  const std::vector<int64_t> axes = n.attrs.get_ints("axes", {0}), steps = n.attrs.get_ints("steps", {1});
  const SymShape& xs = g.value(n.inputs[0]).shape;
  return axes == std::vector<int64_t>{0} && steps == std::vector<int64_t>{1} && !xs.empty() && xs[0].known() &&
         n.attrs.get_ints("starts", {}).size() == 1 && n.attrs.get_ints("starts")[0] >= 0 &&
         g.value(n.inputs[0]).dtype == g.value(n.outputs[0]).dtype;
}

// A concat along axis 0 of static inputs of the output's dtype: the inputs' blocks one after another.
bool leading_blocks_concat(const Graph& g, const Node& n) {
  auto dt = [&](ValueId v) { return g.value(v).dtype; };
  auto rank = [&](ValueId v) { return static_cast<int>(g.value(v).shape.size()); };
  const int r = rank(n.outputs[0]);
  const int64_t axis = n.attrs.get_int("axis", 0);
  bool ok = r >= 1 && (axis == 0 || axis == -r);
  for (ValueId v : n.inputs) ok = ok && dt(v) == dt(n.outputs[0]) && is_static(g.value(v).shape);
  return ok;
}

bool movement_native(const Graph& g, const Node& n) {
  auto dt = [&](ValueId v) { return g.value(v).dtype; };
  auto rank = [&](ValueId v) { return static_cast<int>(g.value(v).shape.size()); };
  auto index_type = [&](ValueId v) { return is_integral(dt(v)) && dt(v) != DType::Bool; };
  if (n.outputs.size() != 1) return false;
  const DType t = dt(n.outputs[0]);
  const int r = rank(n.outputs[0]);
  if (r > kMaxRank) return false;
  std::vector<std::string> a, b, c;
  if (n.op == "slice") return dt(n.inputs[0]) == t && slice_bounds(n, r, a, b, c);
  if (n.op == "slice_scatter")
    return n.inputs.size() == 2 && dt(n.inputs[0]) == t && rank(n.inputs[0]) == r && slice_bounds(n, r, a, b, c);
  if (n.op == "concat" || n.op == "concat_part") {
    bool ok = n.attrs.has("axis") && axis_ok(n, r);
    for (ValueId v : n.inputs) ok = ok && dt(v) == t && rank(v) == r;
    if (n.op == "concat_part") {
      const int64_t index = n.attrs.get_int("index", -1);
      ok = ok && index >= 0 && index + 1 < static_cast<int64_t>(n.inputs.size());
    }
    return ok;
  }
  if (n.op == "take_along_axis")
    return dt(n.inputs[0]) == t && index_type(n.inputs[1]) && rank(n.inputs[0]) == r && rank(n.inputs[1]) == r &&
           axis_ok(n, r, std::numeric_limits<int64_t>::max());
  if (n.op == "scatter_add" || n.op == "index_add")
    return (t == DType::Float32 || t == DType::Float64) && dt(n.inputs[2]) == t && index_type(n.inputs[1]) &&
           (n.op == "index_add" || n.attrs.has("axis")) && axis_ok(n, r) && rank(n.inputs[1]) <= kMaxRank;
  return false;
}

std::string movement_body(const Node& n, const std::vector<std::vector<std::string>>& in_dims,
                          const std::vector<std::string>& out_dims, const std::string& ctype) {
  const int r = static_cast<int>(out_dims.size());
  std::vector<std::string> start, end, step;
  if (n.op == "slice" || n.op == "slice_scatter") {
    INGOT_CHECK(slice_bounds(n, r, start, end, step), n.op, ": invalid slice attributes");
    const bool scatter = n.op == "slice_scatter";
    return slice_call(ctype, scatter ? 1 : 0, "x0", scatter ? in_dims[1] : in_dims[0], start, end, step);
  }
  if (n.op == "concat" || n.op == "concat_part") {
    const int ax = axis_of(n, r);
    const size_t axs = static_cast<size_t>(ax);
    start.assign(static_cast<size_t>(r), "0");
    end.assign(static_cast<size_t>(r), i64(std::numeric_limits<int64_t>::max()));
    step.assign(static_cast<size_t>(r), "1");
    std::string at = "0";
    if (n.op == "concat_part") {  // (grad, x0, x1, ...): the rows grad took from x<index>
      const size_t index = static_cast<size_t>(n.attrs.get_int("index"));
      for (size_t i = 1; i <= index; ++i) at += " + " + in_dims[i][axs];
      start[axs] = "(" + at + ")";
      end[axs] = "(" + at + " + " + in_dims[index + 1][axs] + ")";
      return slice_call(ctype, 0, "x0", in_dims[0], start, end, step);
    }
    std::string k;
    for (size_t i = 0; i < in_dims.size(); ++i) {  // each input written into its rows of y
      start[axs] = "(" + at + ")";
      end[axs] = "(" + at + " + " + in_dims[i][axs] + ")";
      k += slice_call(ctype, 2, "x" + std::to_string(i), out_dims, start, end, step);
      at += " + " + in_dims[i][axs];
    }
    return k;
  }
  std::ostringstream k;
  if (n.op == "take_along_axis") {
    const int ax = axis_of(n, r, std::numeric_limits<int64_t>::max());
    const std::vector<std::string>& xd = in_dims[0];
    const size_t axs = static_cast<size_t>(ax);
    k << "  return ig_take_along_axis(ctx, x0, x1, y, " << product(xd, 0, axs) << ", " << xd[axs] << ", "
      << in_dims[1][axs] << ", " << product(xd, axs + 1, xd.size()) << ", " << ax << ");\n";
    return k.str();
  }
  if (n.op == "scatter_add" || n.op == "index_add") {  // (like, indices, updates)
    const int ax = axis_of(n, r);
    const std::vector<std::string>& xd = in_dims[0];
    const size_t axs = static_cast<size_t>(ax);
    const bool index_add = n.op == "index_add";
    const std::string ni = index_add ? product(in_dims[1], 0, in_dims[1].size()) : in_dims[1][axs];
    k << "  return ig_scatter_add<" << (index_add ? 1 : 0) << ">(ctx, x1, x2, y, " << product(xd, 0, axs) << ", "
      << xd[axs] << ", " << ni << ", " << product(xd, axs + 1, xd.size()) << ", " << ax << ");\n";
    return k.str();
  }
  INGOT_FAIL("movement_body: ", n.op, " is not a movement kernel");
}

}  // namespace ingot::cpu
