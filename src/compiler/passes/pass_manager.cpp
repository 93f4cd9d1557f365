#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include "compiler/passes/passes.h"
#include "compiler/compile_profile.h"
#include "compiler/shape_inference.h"
#include "compiler/target_options.h"
#include "ingot/error.h"
#include "runtime/atomic_file.h"

namespace ingot {

std::string PassReport::summary() const {
  return pass + ": " + std::to_string(changes) + (changes == 1 ? " change" : " changes");
}

PassContext pass_context(const CompileOptions& options) {
  PassContext ctx;
  ctx.inference = options.inference;
  ctx.mixed_precision = options.mixed_precision;
  ctx.layout_target = options.layout_target;
  ctx.gradient_bucket_bytes = options.gradient_bucket_bytes;
  ctx.gradient_overlap = options.gradient_overlap;
  ctx.chunk_bytes = batch_chunk_bytes(options, ctx.chunk_bytes);  // hints: throughput, optimize_for memory
  return ctx;
}

const std::vector<PassInfo>& builtin_passes() {
  static const std::vector<PassInfo> passes = {
      {"constant_folding", 1, fold_constants, "runs nodes whose inputs are all constants at compile time"},
      {"control_flow", 1, simplify_control_flow, "an if on a constant condition becomes the branch it takes; a while of max_iterations 0 its operands"},
      {"simplify", 1, simplify, "x*1, x+0, x-0, x/1, broadcast scalars read directly, transpose/reshape chains, no-op casts and identities"},
      {"cse", 2, eliminate_common_subexpressions, "merges nodes with the same op, attrs and inputs"},
      {"attention", 2, fuse_attention, "softmax(q k^T * scale + masks) v written out becomes one scaled_dot_product_attention"},
      {"conv_bn_folding", 2, fold_conv_batch_norm, "folds batch_norm into conv2d: constant statistics, or run-time parameters in inference"},
      {"mixed_precision", 99, apply_mixed_precision, "matmul/conv2d in bfloat16/float16 (option mixed_precision)"},
      {"batch_chunking", 2, chunk_batch, "inference: the per-sample region (conv, pooling, elementwise) in batch chunks"},
      {"layout", 2, choose_layout, "channels-last buffers around convolutions (plan_layouts) for backends; does not rewrite"},
      {"dce", 1, eliminate_dead_code, "removes nodes that reach no output"},
      {"gradient_buckets", 1, bucket_gradient_all_reduce, "data-parallel gradient all-reduces in buckets, started when computed and waited for when read"},
      {"fusion", 2, fusion_pass, "fusion decisions (plan_fusion) for backends; does not rewrite"},
  };
  return passes;
}

std::vector<std::string> pass_names() {
  std::vector<std::string> out;
  for (const PassInfo& p : builtin_passes()) out.push_back(p.name);
  return out;
}

int optimization_level_index(const std::string& level) {
  static const std::vector<std::string> levels = {"none", "low", "medium", "high"};
  for (size_t i = 0; i < levels.size(); ++i)
    if (levels[i] == level) return static_cast<int>(i);
  INGOT_FAIL("Option 'optimization_level': unknown level '", level,
             "' (valid levels: none, low, medium, high)");
}

bool pass_enabled(const CompileOptions& options, const std::string& name) {
  auto it = options.optimizations.find(name);
  if (it != options.optimizations.end()) return it->second;
  if (name == "mixed_precision") return options.mixed_precision != "none";
  for (const PassInfo& p : builtin_passes())
    if (p.name == name) return optimization_level_index(options.optimization_level) >= p.min_level;
  INGOT_FAIL("Unknown optimization pass '", name, "'");
}

FusionPlan fusion_plan_for(const Graph& g, const CompileOptions& options) {
  return pass_enabled(options, "fusion") ? plan_fusion(g) : unfused_plan(g);
}

// ---------------------------------------------------------------- helpers

void replace_uses(Graph& g, ValueId from, ValueId to) {
  if (from == to) return;
  for (Node& n : g.nodes())
    for (ValueId& v : n.inputs)
      if (v == from) v = to;
  for (auto& [name, v] : g.outputs())
    if (v == from) v = to;
}

int remove_dead_nodes(Graph& g) {
  std::vector<bool> needed(g.values().size(), false), keep(g.nodes().size(), false);
  for (const auto& [name, v] : g.outputs()) needed[v] = true;
  int removed = 0;
  for (size_t i = g.nodes().size(); i-- > 0;) {
    const Node& n = g.nodes()[i];
    for (ValueId v : n.outputs) keep[i] = keep[i] || needed[v];
    if (keep[i])
      for (ValueId v : n.inputs) needed[v] = true;
    else
      ++removed;
  }
  bool unused_leaf = false;
  for (ValueId id : g.leaves()) unused_leaf = unused_leaf || !needed[id];
  if (removed > 0 || unused_leaf) g.compact(keep);
  return removed;
}

void reorder_nodes(Graph& g, const std::vector<NodeId>& order) {
  INGOT_CHECK(order.size() == g.nodes().size(), "reorder_nodes: order has ", order.size(),
              " entries for ", g.nodes().size(), " nodes");
  std::vector<Node> nodes;
  nodes.reserve(order.size());
  for (NodeId id : order) nodes.push_back(std::move(g.nodes()[static_cast<size_t>(id)]));
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = static_cast<NodeId>(i);
    for (ValueId v : nodes[i].outputs) g.value(v).producer = static_cast<NodeId>(i);
  }
  g.nodes() = std::move(nodes);
}

void check_annotated(const Graph& g, const std::string& after) {
  verify(g);
  for (const Value& v : g.values())
    INGOT_CHECK(v.shape_known, "after ", after, ": '", describe_value(g, v.id), "' has no shape");
}

// ---------------------------------------------------------------- the manager

namespace {

// Re-runs shape inference when a custom pass left values without shapes: leaves keep their
// shapes (symbols by name), everything produced is inferred again.
void reannotate(Graph& g) {
  bool missing = false;
  for (const Value& v : g.values()) missing = missing || !v.shape_known;
  if (missing) infer_shapes_from_leaves(g);
  infer_types(g);
}

std::string dump_extension(const std::string& format) {
  if (format == "json") return "json";
  if (format == "dot") return "dot";
  return "txt";
}

// The passes that also run inside control-flow subgraphs: those that only rewrite a graph's own
// nodes. (conv_bn_folding, batch_chunking and layout plan across a whole network; fusion and
// memory planning of a subgraph are its lowering's, which plans each subgraph by itself.)
// mixed_precision casts a loop body's matmuls as it casts the graph's: otherwise a matmul would
// run in float16 or float32 depending on whether loop-invariant code motion had moved it out of
// the loop (found by the program fuzzer, seed 500193).
bool runs_in_subgraphs(const std::string& name) {
  return name == "constant_folding" || name == "control_flow" || name == "simplify" || name == "cse" ||
         name == "attention" || name == "dce" || name == "mixed_precision";
}

std::string subgraph_label(const Node& n, size_t k) {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"if", {"then", "else"}}, {"while", {"cond", "body"}}, {"scan", {"body"}}};
  const auto it = names.find(n.op);
  const std::string which = it != names.end() && k < it->second.size() ? it->second[k] : "subgraph " + std::to_string(k);
  return n.op + (n.scope.empty() ? "" : " '" + n.scope + "'") + " " + which;
}

// The passes level high repeats after the others, and how many rounds at most.
constexpr int kHighCleanupRounds = 4;
bool is_cleanup_pass(const std::string& name) {
  return name == "constant_folding" || name == "simplify" || name == "cse" || name == "dce";
}

}  // namespace

PassReport run_keeping_interface(Graph& sub, PassFn fn, const PassContext& ctx) {
  // Extra outputs keep every formal input alive, in order, even where nothing reads it any more.
  const std::vector<ValueId> formals = sub.leaves_of(ValueKind::Input);
  const size_t results = sub.outputs().size();
  for (size_t i = 0; i < formals.size(); ++i) sub.set_output("interface." + std::to_string(i), formals[i]);
  PassReport r = fn(sub, ctx);
  INGOT_CHECK(sub.outputs().size() == results + formals.size() && sub.leaves_of(ValueKind::Input).size() == formals.size(),
              "a pass changed a subgraph's interface");
  sub.outputs().resize(results);
  return r;
}

void run_in_subgraphs(Graph& g, PassFn fn, const PassContext& ctx, PassReport& report) {
  for (Node& n : g.nodes())
    for (size_t k = 0; k < n.subgraphs.size(); ++k) {
      Graph& sub = n.subgraphs[k];
      run_in_subgraphs(sub, fn, ctx, report);  // innermost first
      PassReport r;
      try {
        r = run_keeping_interface(sub, fn, ctx);
      } catch (const Error& e) {
        INGOT_FAIL("in the ", subgraph_label(n, k), " subgraph: ", e.what());
      }
      report.changes += r.changes;
      for (const std::string& note : r.notes) report.notes.push_back("in " + subgraph_label(n, k) + ": " + note);
    }
}

OptimizeResult optimize(Graph& g, const CompileOptions& options,
                        const std::function<void(const std::string&)>& note) {
  OptimizeResult result;
  result.nodes_before = g.nodes().size();
  const PassContext ctx = pass_context(options);
  int index = 0;
  auto say = [&](const std::string& s) {
    if (note) note(s);
  };
  auto dump = [&](const std::string& pass) {
    ++index;
    if (!options.dump_after_each_pass || options.dump_graph.empty()) return;
    std::string text = print_graph(g, parse_dump_format(options.dump_format));
    if (options.dump_graph == "-") {
      std::cout << "# after pass " << index << " (" << pass << ")\n" << text;
      return;
    }
    write_file_atomic(options.dump_graph + "." + std::to_string(index) + "." + pass + "." +
                          dump_extension(options.dump_format),
                      text);
  };
  auto run_custom = [&](const std::string& point) {
    for (const CustomPass& cp : options.custom_passes) {
      if (cp.after != point) continue;
      size_t before = g.nodes().size();
      const ProfileScope span("custom pass " + cp.name);
      try {
        cp.fn(g);
        reannotate(g);
        check_annotated(g, "custom pass '" + cp.name + "'");
      } catch (const Error& e) {
        INGOT_FAIL("Custom pass '", cp.name, "' (after ", point, "): ", e.what());
      }
      PassReport r;
      r.pass = cp.name;
      r.notes.push_back(std::to_string(before) + " -> " + std::to_string(g.nodes().size()) + " nodes");
      say("custom " + cp.name + ": " + r.notes.back());
      result.reports.push_back(r);
      dump(cp.name);
    }
  };
  // Runs built-in pass `p`, reports it (`when` follows its summary) and returns its changes.
  auto run_builtin = [&](const PassInfo& p, const std::string& when) {
    const ProfileScope span("pass " + p.name);
    PassReport r = p.fn(g, ctx);
    if (runs_in_subgraphs(p.name)) run_in_subgraphs(g, p.fn, ctx, r);
    r.pass = p.name;
    check_annotated(g, "pass '" + p.name + "'");
    const int changes = r.changes;
    say(r.summary() + when);
    for (const std::string& n : r.notes) say("  " + n);
    result.reports.push_back(std::move(r));
    dump(p.name);
    return changes;
  };
  run_custom("start");
  for (const PassInfo& p : builtin_passes()) {
    if (pass_enabled(options, p.name)) run_builtin(p, "");
    run_custom(p.name);
  }
  // Level high: the cleanup passes again, until none changes anything. conv_bn_folding,
  // mixed_precision and batch_chunking add nodes the earlier passes never saw (a weight shared by
  // two convolutions folded twice; a transpose that mixed_precision replaced by one of the
  // converted value, left unread), which cse merges and dce removes.
  if (optimization_level_index(options.optimization_level) >= 3)
    for (int round = 0; round < kHighCleanupRounds; ++round) {
      int changes = 0;
      for (const PassInfo& p : builtin_passes())
        if (is_cleanup_pass(p.name) && pass_enabled(options, p.name))
          changes += run_builtin(p, " (high, cleanup round " + std::to_string(round + 1) + ")");
      if (changes == 0) break;
    }
  run_custom("end");
  result.nodes_after = g.nodes().size();
  say(std::to_string(result.nodes_before) + " -> " + std::to_string(result.nodes_after) + " nodes");
  return result;
}

}  // namespace ingot
