// Model::summary: one row per top-level block with its inferred input/output shapes, dtypes and
// parameter count, computed from the same graph compile builds.
#include <algorithm>
#include <array>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "ingot/compile.h"
#include "models/model_impl.h"

namespace ingot {

namespace {

std::string top_scope(const std::string& scope) { return scope.substr(0, scope.find('.')); }

std::string join_shapes(const Graph& g, const std::vector<ValueId>& vs) {
  std::string s;
  for (ValueId v : vs) s += (s.empty() ? "" : ", ") + to_string(g.value(v).shape);
  return s.empty() ? "-" : s;
}

}  // namespace

std::string Model::summary(const std::map<std::string, ShapeTemplate>& shapes) const {
  CompileOptions options;
  options.shapes = shapes;
  Graph g = build_graph(*this, options);

  std::map<std::string, std::string> type_of;
  std::vector<std::string> order;
  for (const detail::Block& b : impl_->blocks) {
    type_of[b.instance] = b.model->type_name();
    order.push_back(b.instance);
  }
  struct Row {
    std::vector<ValueId> ins, outs;
    std::set<ValueId> params;
    DType dtype = DType::Float32;
  };
  std::map<std::string, Row> rows;
  std::map<ValueId, std::string> group_of;
  for (const Node& n : g.nodes())
    for (ValueId v : n.outputs) group_of[v] = top_scope(n.scope);
  std::vector<int> readers_outside(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs)
      if (group_of.count(v) && group_of[v] != top_scope(n.scope)) ++readers_outside[v];
  for (const Node& n : g.nodes()) {
    Row& r = rows[top_scope(n.scope)];
    for (ValueId v : n.inputs) {
      const Value& val = g.value(v);
      if (val.kind == ValueKind::Parameter) r.params.insert(v);
      bool from_outside = val.producer < 0 ? val.kind != ValueKind::Parameter && val.kind != ValueKind::Constant
                                           : group_of[v] != top_scope(n.scope);
      if (from_outside && std::find(r.ins.begin(), r.ins.end(), v) == r.ins.end()) r.ins.push_back(v);
    }
    for (ValueId v : n.outputs) {
      if (readers_outside[v] > 0 || g.find_output(g.value(v).name)) r.outs.push_back(v);
      r.dtype = g.value(v).dtype;
    }
  }

  std::vector<std::array<std::string, 6>> table = {{"block", "type", "inputs", "outputs", "dtype", "params"}};
  int64_t total = 0;
  for (const std::string& name : order) {
    auto it = rows.find(name);
    if (it == rows.end()) continue;  // removed (no output needs it)
    int64_t count = 0;
    bool symbolic = false;
    for (ValueId p : it->second.params) {
      if (is_static(g.value(p).shape)) count += numel(to_shape(g.value(p).shape));
      else symbolic = true;
    }
    total += count;
    table.push_back({name, type_of[name], join_shapes(g, it->second.ins), join_shapes(g, it->second.outs),
                     std::string(dtype_name(it->second.dtype)), std::to_string(count) + (symbolic ? "+" : "")});
  }
  std::array<size_t, 6> width{};
  for (const auto& row : table)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size() + 2);
  size_t rule = 0;
  for (size_t w : width) rule += w;
  std::ostringstream os;
  for (size_t r = 0; r < table.size(); ++r) {
    for (size_t c = 0; c < table[r].size(); ++c) os << std::left << std::setw(static_cast<int>(width[c])) << table[r][c];
    os << "\n";
    if (r == 0) os << std::string(rule, '-') << "\n";
  }
  os << std::string(rule, '-') << "\n";
  os << "total parameters: " << total << "\n";
  for (const auto& [name, v] : g.outputs())
    os << "output '" << name << "': " << dtype_name(g.value(v).dtype) << to_string(g.value(v).shape) << "\n";
  return os.str();
}

}  // namespace ingot
