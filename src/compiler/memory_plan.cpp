#include "compiler/memory_plan.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {

namespace {
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
}  // namespace

std::string human_bytes(int64_t b) {
  std::ostringstream os;
  os.precision(3);
  if (b >= (int64_t{1} << 20)) os << static_cast<double>(b) / (1 << 20) << " MiB";
  else os << static_cast<double>(b) / 1024 << " KiB";
  return os.str();
}

std::string MemoryPlan::str() const {
  if (!planned) return "not planned (" + reason + ")";
  std::ostringstream os;
  os << strategy << ": planned peak " << human_bytes(planned_peak_bytes) << ", lower bound "
     << human_bytes(lower_bound_bytes) << ", unplanned " << human_bytes(unplanned_bytes) << ", "
     << tensors.size() << " tensors, " << inplace_count << " in place";
  if (!assumption.empty()) os << " (" << assumption << ")";
  return os.str();
}

MemoryPlan plan_memory(const Graph& g, const std::string& strategy, bool inplace) {
  INGOT_CHECK(strategy == "greedy" || strategy == "none", "Option 'memory_planning': unknown strategy '",
              strategy, "' (valid: greedy, none)");
  MemoryPlan plan;
  plan.strategy = strategy;
  const int num_nodes = static_cast<int>(g.nodes().size());
  for (const Value& v : g.values()) {
    if (v.producer < 0) continue;
    if (!is_static(v.shape)) {
      plan.reason = "symbolic: '" + (v.name.empty() ? "%" + std::to_string(v.id) : v.name) +
                    "' has shape " + to_string(v.shape);
      return plan;
    }
  }
  std::vector<int> last(g.values().size(), -1);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) last[v] = n.id;
  for (const auto& [name, v] : g.outputs()) last[v] = num_nodes;
  std::vector<int> index(g.values().size(), -1);
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.outputs) {
      const Value& val = g.value(v);
      PlannedTensor t;
      t.value = v;
      t.bytes = numel(to_shape(val.shape)) * static_cast<int64_t>(dtype_size(val.dtype));
      t.first = n.id;
      t.last = std::max(last[v], n.id);
      index[v] = static_cast<int>(plan.tensors.size());
      plan.tensors.push_back(t);
      plan.unplanned_bytes += t.bytes;
    }
  }
  // In-place decisions: an elementwise node's single output over an input that dies here.
  std::vector<BufferRequest> requests;
  for (const PlannedTensor& t : plan.tensors) requests.push_back({t.bytes, t.first, t.last, -1});
  if (inplace && strategy == "greedy") {
    std::vector<bool> taken(plan.tensors.size(), false);
    for (const Node& n : g.nodes()) {
      if (get_op(n.op).fusion != FusionClass::Elementwise || n.outputs.size() != 1) continue;
      const size_t oi = static_cast<size_t>(index[n.outputs[0]]);
      PlannedTensor& out = plan.tensors[oi];
      const Value& ov = g.value(n.outputs[0]);
      for (ValueId in : n.inputs) {
        const Value& iv = g.value(in);
        if (iv.producer < 0 || index[in] < 0) continue;
        const size_t ii = static_cast<size_t>(index[in]);
        const PlannedTensor& it = plan.tensors[ii];
        if (it.last != n.id || taken[ii] || it.bytes != out.bytes || iv.shape != ov.shape ||
            dtype_size(iv.dtype) != dtype_size(ov.dtype))
          continue;
        taken[ii] = true;
        out.reuses = in;
        requests[oi].reuses = static_cast<int>(ii);
        ++plan.inplace_count;
        break;
      }
    }
  }
  const BufferPlacement placed = place_buffers(requests, strategy);
  for (size_t i = 0; i < plan.tensors.size(); ++i) plan.tensors[i].offset = placed.offsets[i];
  plan.planned_peak_bytes = placed.arena_bytes;
  plan.lower_bound_bytes = placed.lower_bound_bytes;
  plan.planned = true;
  return plan;
}

BufferPlacement place_buffers(const std::vector<BufferRequest>& requests, const std::string& strategy) {
  INGOT_CHECK(strategy == "greedy" || strategy == "none", "Option 'memory_planning': unknown strategy '",
              strategy, "' (valid: greedy, none)");
  // Logical buffers: each root (a request that reuses nothing) with the union of its members'
  // lifetimes. `root[i]`: the request whose buffer request i lives in.
  std::vector<int> root(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const int r = requests[i].reuses;
    INGOT_CHECK(r < static_cast<int>(i), "place_buffers: request ", i, " reuses a later request ", r);
    root[i] = r >= 0 ? root[static_cast<size_t>(r)] : static_cast<int>(i);
  }
  struct Buffer {
    int64_t bytes = 0;
    int first = 0, last = 0;
    int64_t offset = 0;
  };
  std::map<int, Buffer> buffers;
  int steps = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& t = requests[i];
    steps = std::max(steps, t.last + 1);
    auto [it, fresh] = buffers.try_emplace(root[i], Buffer{t.bytes, t.first, t.last, 0});
    if (!fresh) {
      it->second.first = std::min(it->second.first, t.first);
      it->second.last = std::max(it->second.last, t.last);
      it->second.bytes = std::max(it->second.bytes, t.bytes);
    }
  }
  BufferPlacement out;
  // Lower bound: the most bytes live at one step.
  std::vector<int64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (const auto& [r, b] : buffers)
    for (int s = b.first; s <= b.last; ++s) live[static_cast<size_t>(s)] += b.bytes;
  for (int64_t l : live) out.lower_bound_bytes = std::max(out.lower_bound_bytes, l);

  std::vector<std::pair<int, Buffer*>> order;
  for (auto& [r, b] : buffers) order.emplace_back(r, &b);
  if (strategy == "none") {
    int64_t off = 0;
    for (auto& [r, b] : order) {
      b->offset = off;
      off += aligned(b->bytes);
    }
  } else {
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      if (a.second->bytes != b.second->bytes) return a.second->bytes > b.second->bytes;
      return a.second->first < b.second->first;
    });
    std::vector<Buffer*> placed;
    for (auto& [r, b] : order) {
      std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of conflicting buffers
      for (Buffer* p : placed)
        if (p->first <= b->last && b->first <= p->last) busy.emplace_back(p->offset, p->offset + aligned(p->bytes));
      std::sort(busy.begin(), busy.end());
      // Best fit: the smallest gap that holds it, else the end.
      const int64_t need = aligned(b->bytes);
      int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
      for (const auto& [s, e] : busy) {
        if (s > cursor && s - cursor >= need && s - cursor < best_gap) {
          best = cursor;
          best_gap = s - cursor;
        }
        cursor = std::max(cursor, e);
      }
      b->offset = best >= 0 ? best : cursor;
      placed.push_back(b);
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    out.offsets.push_back(buffers[root[i]].offset);
    out.arena_bytes = std::max(out.arena_bytes, out.offsets.back() + aligned(requests[i].bytes));
  }
  return out;
}

void check_buffer_placement(const std::vector<BufferRequest>& rs, const BufferPlacement& placement) {
  INGOT_CHECK(placement.offsets.size() == rs.size(), "buffer placement: ", placement.offsets.size(),
              " offsets for ", rs.size(), " requests");
  for (size_t i = 0; i < rs.size(); ++i) {
    const int64_t oi = placement.offsets[i];
    INGOT_CHECK(oi >= 0 && oi % kAlign == 0 && oi + rs[i].bytes <= placement.arena_bytes, "buffer placement: request ",
                i, " at ", oi, " is misaligned or outside the arena");
    for (size_t j = i + 1; j < rs.size(); ++j) {
      const int64_t oj = placement.offsets[j];
      const bool time = rs[i].first <= rs[j].last && rs[j].first <= rs[i].last;
      const bool space = oi < oj + rs[j].bytes && oj < oi + rs[i].bytes;
      if (!time || !space || rs[i].bytes == 0 || rs[j].bytes == 0) continue;
      const bool inplace_pair = rs[j].reuses == static_cast<int>(i) && rs[i].last == rs[j].first && oi == oj;
      INGOT_CHECK(inplace_pair, "buffer placement: requests ", i, " [", rs[i].first, ", ", rs[i].last, "] and ", j,
                  " [", rs[j].first, ", ", rs[j].last, "] overlap in the arena");
    }
  }
}

void check_memory_plan(const Graph& g, const MemoryPlan& plan) {
  if (!plan.planned) return;
  const auto& ts = plan.tensors;
  for (size_t i = 0; i < ts.size(); ++i) {
    INGOT_CHECK(ts[i].offset >= 0 && ts[i].offset + ts[i].bytes <= plan.planned_peak_bytes,
                "memory plan: tensor %", ts[i].value, " outside the arena");
    for (size_t j = i + 1; j < ts.size(); ++j) {
      const PlannedTensor &a = ts[i], &b = ts[j];
      bool time = a.first <= b.last && b.first <= a.last;
      bool space = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      if (!time || !space || a.bytes == 0 || b.bytes == 0) continue;
      // Allowed only for an in-place pair: b overwrites a at the node where a dies.
      bool inplace_pair = (b.reuses == a.value && a.last == b.first && a.offset == b.offset) ||
                          (a.reuses == b.value && b.last == a.first && a.offset == b.offset);
      if (!inplace_pair) {
        const Node& n = g.node(b.first);
        INGOT_FAIL("memory plan: %", a.value, " [", a.first, ", ", a.last, "] and %", b.value, " [",
                   b.first, ", ", b.last, "] (", n.op, ") overlap in the arena");
      }
    }
  }
}

}  // namespace ingot
