// Graph optimization passes and the pass manager run by the "optimize" compile stage.
//
// Every pass takes a verified, shape- and type-annotated graph and leaves one behind (new values
// get their shapes and dtypes from the pass itself), returning a report of what it changed.
// Passes run in the order of builtin_passes(); which ones run is decided by the compile options
// `optimization_level` (none | low | medium | high) and `optimizations` (per-pass overrides).
//
//   level   passes
//   none    (nothing)
//   low     constant_folding, simplify, dce, gradient_buckets
//   medium  + cse, conv_bn_folding, batch_chunking, layout, fusion    (the default)
//   high    medium's passes, then constant_folding, simplify, cse and dce again until none of
//           them changes anything (at most 4 rounds; custom passes are not repeated)
//   mixed_precision runs when the option `mixed_precision` is not "none".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/fusion_plan.h"
#include "compiler/layout_plan.h"
#include "ingot/compile.h"
#include "ingot/graph.h"

namespace ingot {

struct PassReport {
  std::string pass;
  int changes = 0;                 // rewrites (nodes removed, merged, folded, annotated...)
  std::vector<std::string> notes;  // one line per change, for `verbose`
  std::string summary() const;     // "cse: 3 changes"
};

struct PassContext {
  bool inference = false;
  std::string mixed_precision = "none";
  // Constant folding leaves results with more elements than this unfolded (a broadcast of a
  // scalar to a huge shape would otherwise bloat the graph).
  int64_t max_fold_elements = int64_t{1} << 22;
  // Batch chunking: the most bytes of per-sample activations one chunk may keep live at a node
  // (256 MiB: the CNN at batch 32 runs in chunks of 4; single images ran about 10% slower, their
  // convolutions being less efficient than the caches gained).
  int64_t chunk_bytes = int64_t{256} << 20;
  std::string layout_target = "auto";  // CompileOptions::layout_target (the layout pass's report)
  int64_t gradient_bucket_bytes = int64_t{256} << 10;  // CompileOptions::gradient_bucket_bytes
  bool gradient_overlap = true;                      // CompileOptions::gradient_overlap
};
PassContext pass_context(const CompileOptions& options);

using PassFn = PassReport (*)(Graph&, const PassContext&);
struct PassInfo {
  std::string name;
  int min_level;  // 0 none, 1 low, 2 medium, 3 high; 99: only when enabled by its own option
  PassFn fn;
  std::string doc;
};
const std::vector<PassInfo>& builtin_passes();
std::vector<std::string> pass_names();
// "none" -> 0 ... "high" -> 3; throws listing the valid levels.
int optimization_level_index(const std::string& level);
// Whether built-in pass `name` runs under `options` (level, then `optimizations` overrides).
bool pass_enabled(const CompileOptions& options, const std::string& name);

struct OptimizeResult {
  std::vector<PassReport> reports;
  size_t nodes_before = 0, nodes_after = 0;
};
// Runs the enabled passes and the custom passes. `note` receives one line per pass report.
OptimizeResult optimize(Graph& g, const CompileOptions& options,
                        const std::function<void(const std::string&)>& note = {});

// Runs `fn` on the subgraphs of g's control-flow nodes (innermost first), keeping each one's
// interface (its formal inputs, in order, and its results); adds what it did to `report`, each
// note naming the subgraph. The pass manager does this for the passes that rewrite only a
// graph's own nodes (constant_folding, control_flow, simplify, cse, attention, dce).
void run_in_subgraphs(Graph& g, PassFn fn, const PassContext& ctx, PassReport& report);
// `fn` on one subgraph, its interface held as above (an error if the pass changed it anyway).
PassReport run_keeping_interface(Graph& sub, PassFn fn, const PassContext& ctx);

// ---- the passes (also callable directly) ----
PassReport fold_constants(Graph& g, const PassContext& ctx = {});
PassReport simplify(Graph& g, const PassContext& ctx = {});
PassReport simplify_control_flow(Graph& g, const PassContext& ctx = {});
PassReport eliminate_common_subexpressions(Graph& g, const PassContext& ctx = {});
PassReport eliminate_dead_code(Graph& g, const PassContext& ctx = {});
PassReport fold_conv_batch_norm(Graph& g, const PassContext& ctx = {});
PassReport fuse_attention(Graph& g, const PassContext& ctx = {});
PassReport apply_mixed_precision(Graph& g, const PassContext& ctx);
PassReport chunk_batch(Graph& g, const PassContext& ctx);
PassReport choose_layout(Graph& g, const PassContext& ctx = {});  // reports plan_layouts(g)
PassReport fusion_pass(Graph& g, const PassContext& ctx = {});  // reports plan_fusion(g)
PassReport bucket_gradient_all_reduce(Graph& g, const PassContext& ctx = {});

// Runs each node for which `compute` names a dtype in that dtype: cast nodes convert its floating
// inputs (not a bool mask, not one already in that dtype, and only those `converts(node, input)`
// accepts when it is given) to it, and each of its results back to that result's dtype where the
// op's dtype rule now gives another one (the result's readers, graph outputs and name move to that
// cast; the node's own result is renamed "<name>.<suffix>"). Nodes are reordered so casts sit next to their
// node. Returns the changed nodes' new ids. Used by mixed_precision (float32 -> low) and by the
// CPU backend (low -> float32, src/backends/cpu/widen.cpp).
std::vector<NodeId> run_in_dtype(Graph& g, const std::function<std::optional<DType>(const Node&)>& compute,
                                 const std::string& suffix,
                                 const std::function<bool(const Node&, size_t)>& converts = {});

// The fusion plan a backend should use: plan_fusion(g) when the "fusion" pass is enabled for
// these options, else unfused_plan(g). Backends call this themselves (the plan is not stored).
FusionPlan fusion_plan_for(const Graph& g, const CompileOptions& options);
// The layout plan for `target`: plan_layouts when the "layout" pass is enabled, else NCHW.
LayoutPlan layout_plan_for(const Graph& g, const CompileOptions& options, const LayoutTarget& target);
// The layout a compile asks for on graph `g`, for a backend running the layouts `target` says:
// Nchw when the "layout" pass is off; auto_layout when CompileOptions::layout_target is "auto"
// (and $INGOT_LAYOUT_TARGET names none); else the target named (parse_layout_target).
Layout requested_layout(const Graph& g, const CompileOptions& options, const LayoutTarget& target);

// ---- helpers shared by passes ----
// Every read of `from` (node inputs and graph outputs) reads `to` instead.
void replace_uses(Graph& g, ValueId from, ValueId to);
// Removes nodes that reach no graph output (and leaves nothing reads); returns how many.
int remove_dead_nodes(Graph& g);
// Puts the nodes in `order` (a permutation of node ids, topological) and renumbers them.
void reorder_nodes(Graph& g, const std::vector<NodeId>& order);
// Values produced in a graph by node order must be defined before use; throws otherwise.
void check_annotated(const Graph& g, const std::string& after);

}  // namespace ingot
