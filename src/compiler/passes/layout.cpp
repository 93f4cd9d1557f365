// The layout pass: which rank-4 buffers a backend stores channels-last (compiler/layout_plan.h
// states the rules). Like the fusion pass it decides without rewriting the graph: backends call
// layout_plan_for(graph, options, target), and this pass reports the decisions for a CPU target
// with the layout the compile asks for (CompileOptions::layout_target; auto: this machine's).
//
// The plan starts from every channels-last conv2d's output and carries the layout forward
// through batch_norm, the pools, channel concats and elementwise nodes whose inputs agree; then, to a fixpoint, a
// value goes back to NCHW when it is a graph output, when a reader cannot read the layout, or
// when its batch_norm / elementwise producer has a full-shape input in another layout.
#include <sstream>

#include "compiler/layout_plan.h"
#include "compiler/passes/passes.h"
#include "ir/op_registry.h"

namespace ingot {
namespace {

bool rank4(const Value& v) { return v.shape.size() == 4; }

// Nodes whose output is stored as their input 0 (the activation; the rest per-channel
// parameters): batch_norm, and the windows max_pool2d and avg_pool2d, which keep the channels.
bool follows_input0(const Node& n) { return n.op == "batch_norm" || n.op == "max_pool2d" || n.op == "avg_pool2d"; }

// A concat of rank-4 values along the channels with every channel count known (DenseNet's
// blocks, Inception's branches): in any layout it copies each input into a run of the output's
// channels, so its inputs and output can share one.
bool channel_concat(const Graph& g, const Node& n) {
  if (n.op != "concat" || n.inputs.empty() || n.outputs.size() != 1 || !rank4(g.value(n.outputs[0]))) return false;
  const int64_t axis = n.attrs.get_int("axis", 0);
  if (axis != 1 && axis != -3) return false;
  for (ValueId v : n.inputs)
    if (!rank4(g.value(v)) || !g.value(v).shape[1].known()) return false;
  return true;
}

// A channel concat's layout: the one all its inputs share, if a blocked one divides each input's
// channels into whole blocks (the output's blocks are then the inputs' blocks one after another);
// Nchw otherwise.
Layout concat_layout(const Graph& g, const Node& n, const std::vector<Layout>& of) {
  const Layout l = of[static_cast<size_t>(n.inputs[0])];
  const int block = layout_channel_block(l);
  for (ValueId v : n.inputs)
    if (of[static_cast<size_t>(v)] != l || (block > 0 && g.value(v).shape[1].value % block != 0)) return Layout::Nchw;
  return l;
}

// The layout a node's output takes: input 0's for follows_input0, concat_layout for a channel
// concat, else the one all its rank-4 inputs of the output's shape share (elementwise nodes);
// Nchw when they differ or there are none.
Layout carried_layout(const Graph& g, const Node& n, const std::vector<Layout>& of) {
  if (follows_input0(n)) return of[static_cast<size_t>(n.inputs[0])];
  if (channel_concat(g, n)) return concat_layout(g, n, of);
  const Value& y = g.value(n.outputs[0]);
  Layout l = Layout::Nchw;
  bool first = true;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& x = g.value(n.inputs[i]);
    if (!rank4(x) || x.shape != y.shape) continue;
    if (!first && of[static_cast<size_t>(x.id)] != l) return Layout::Nchw;
    l = of[static_cast<size_t>(x.id)];
    first = false;
  }
  return l;
}

bool carries_layout(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || !rank4(g.value(n.outputs[0]))) return false;
  return follows_input0(n) || channel_concat(g, n) || get_op(n.op).fusion == FusionClass::Elementwise;
}

// Whether channel blocks speed conv `n` up beyond what channels-last gives: a dense 3x3 stride-1
// conv, which oneDNN runs with its Winograd kernels on 16-channel blocks only. Its other kernels
// run as fast on NHWC as on blocks (ResNet-50's 1x1 convs: 8.4 against 8.9 ms, all 14 shapes).
bool gains_from_blocks(const Graph& g, const Node& n) {
  if (n.op != "conv2d" || n.attrs.get_int("groups", 1) != 1) return false;
  const SymShape& w = g.value(n.inputs[1]).shape;
  if (w.size() != 4 || !w[2].known() || !w[3].known() || w[2].value != 3 || w[3].value != 3) return false;
  for (const char* attr : {"stride", "dilation"})
    for (int64_t v : n.attrs.get_ints(attr, {1, 1}))
      if (v != 1) return false;
  return true;
}

}  // namespace

Layout auto_layout(const Graph& g, const LayoutTarget& target, Layout host) {
  const LayoutPlan plan = plan_layouts(g, LayoutTarget::blocked_as(host, target));
  bool blocked = false, unblocked = false;
  for (Layout l : plan.of_value) {
    blocked = blocked || layout_channel_block(l) > 0;
    unblocked = unblocked || l == Layout::Nhwc;
  }
  if (!blocked || !unblocked) return host;
  for (const Node& n : g.nodes())
    if (target.handles_layouts(g, n) && conv_runs_channels_last(g, n) && gains_from_blocks(g, n)) return host;
  return Layout::Nhwc;
}

LayoutPlan plan_layouts(const Graph& g, const LayoutTarget& target) {
  LayoutPlan plan = nchw_plan(g);
  std::vector<Layout>& of = plan.of_value;
  auto handles = [&](const Node& n) { return target.handles_layouts(g, n); };
  auto channels_last = [&](const Value& v) {
    const int b = target.channel_block;
    if (b > 0 && v.shape[1].known() && v.shape[1].value % b == 0) return b == 16 ? Layout::Nchw16c : Layout::Nchw8c;
    return Layout::Nhwc;
  };
  bool any = false;
  for (const Node& n : g.nodes()) {
    if (!handles(n)) continue;
    const ValueId y = n.outputs.empty() ? -1 : n.outputs[0];
    if (conv_runs_channels_last(g, n, target)) {
      of[static_cast<size_t>(y)] = bf16_conv_fits(g, n) ? Layout::Nhwc : channels_last(g.value(y));
      any = true;
    } else if (carries_layout(g, n)) {
      of[static_cast<size_t>(y)] = carried_layout(g, n, of);
    }
  }
  if (!any) return plan;
  std::vector<std::vector<NodeId>> readers(g.values().size());
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) readers[static_cast<size_t>(v)].push_back(n.id);
  // Whether reader r handles value v in layout l.
  auto reads = [&](const Node& r, ValueId v, Layout l) {
    if (!handles(r)) return false;
    if (r.op == "conv2d") {
      for (size_t i = 1; i < r.inputs.size(); ++i)
        if (r.inputs[i] == v) return false;  // weights and bias are plain
      return conv_runs_channels_last(g, r, target);
    }
    if (follows_input0(r)) return r.inputs[0] == v && of[static_cast<size_t>(r.outputs[0])] == l;
    if (channel_concat(g, r)) return of[static_cast<size_t>(r.outputs[0])] == l;
    if (r.op == "global_avg_pool2d") return true;
    return get_op(r.op).fusion == FusionClass::Elementwise && r.outputs.size() == 1 && rank4(g.value(r.outputs[0]));
  };
  bool changed = true;
  auto demote = [&](ValueId v) {
    changed = changed || of[static_cast<size_t>(v)] != Layout::Nchw;
    of[static_cast<size_t>(v)] = Layout::Nchw;
  };
  while (changed) {
    changed = false;
    for (const auto& [name, v] : g.outputs()) demote(v);
    for (const Node& n : g.nodes()) {
      if (n.outputs.size() != 1) continue;
      const ValueId y = n.outputs[0];
      if (of[static_cast<size_t>(y)] != Layout::Nchw && carries_layout(g, n) &&
          carried_layout(g, n, of) != of[static_cast<size_t>(y)])
        demote(y);
    }
    for (size_t v = 0; v < of.size(); ++v) {
      if (of[v] == Layout::Nchw) continue;
      for (NodeId r : readers[v])
        if (!reads(g.node(r), static_cast<ValueId>(v), of[v])) demote(static_cast<ValueId>(v));
    }
  }
  return plan;
}

namespace {

// Target name `name` on graph `g`: auto_layout for "auto" (unless $INGOT_LAYOUT_TARGET names
// one), else the layout named. The backend (requested_layout) and the pass's report share it.
Layout resolve_layout_target(const Graph& g, const std::string& name, const LayoutTarget& target) {
  return layout_target_is_auto(name) ? auto_layout(g, target) : parse_layout_target(name);
}

}  // namespace

Layout requested_layout(const Graph& g, const CompileOptions& options, const LayoutTarget& target) {
  return pass_enabled(options, "layout") ? resolve_layout_target(g, options.layout_target, target) : Layout::Nchw;
}

LayoutPlan layout_plan_for(const Graph& g, const CompileOptions& options, const LayoutTarget& target) {
  const Layout l = requested_layout(g, options, target);
  return l == Layout::Nchw ? nchw_plan(g) : plan_layouts(g, LayoutTarget::blocked_as(l, target));
}

PassReport choose_layout(Graph& g, const PassContext& ctx) {
  PassReport report;
  const Layout want = resolve_layout_target(g, ctx.layout_target, {});
  const LayoutPlan plan = want == Layout::Nchw ? nchw_plan(g) : plan_layouts(g, LayoutTarget::blocked_as(want, {}));
  size_t moved = 0;
  for (Layout l : plan.of_value) moved += l != Layout::Nchw;
  const int block = layout_channel_block(want);
  report.notes.push_back(std::to_string(moved) + " buffers channels-last for the CPU target " +
                         std::string(layout_name(want)) + " (layout_target " + ctx.layout_target +
                         (block > 0 ? ", " + std::to_string(block) + "-channel blocks" : "") +
                         "); the graph is unchanged, backends call layout_plan_for");
  std::istringstream lines(plan.str(g));
  for (std::string line; std::getline(lines, line);) report.notes.push_back(line);
  return report;
}

}  // namespace ingot
