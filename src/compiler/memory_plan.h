// Memory planning: where each intermediate tensor lives in one arena.
//
// Lifetimes come from the schedule (graph node order): a tensor is live from the node producing
// it to its last reader (graph outputs: to the end). Tensors whose lifetimes do not overlap may
// share memory. An elementwise node may write its output over an input that dies at that node
// when both have the same shape and element size (in-place; the plan records the reuse).
//
// Strategies: "greedy" (greedy by size: largest buffer first, each at the lowest 64-byte aligned
// offset that overlaps no placed buffer with an intersecting lifetime) and "none" (every tensor
// its own region, laid end to end). Graph inputs, parameters and constants are not planned (the
// caller owns them); graph outputs are planned like any intermediate.
//
// Symbolic shapes are not planned: the plan says "not planned (symbolic: ...)" and backends
// allocate per kernel. Compile with static sizes (`shapes`) to get a plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot {

struct PlannedTensor {
  ValueId value = -1;
  int64_t bytes = 0;
  int first = 0;  // producing node index
  int last = 0;   // last reading node index (num_nodes for graph outputs)
  int64_t offset = 0;
  ValueId reuses = -1;  // in-place: the input whose buffer this output takes over
};

// "1.55 MiB", "12 KiB": a byte count as the plans print it.
std::string human_bytes(int64_t bytes);

struct MemoryPlan {
  bool planned = false;
  std::string strategy = "none";  // greedy | none
  std::string reason;             // why not planned
  // What a plan of symbolic shapes assumed ("at batch 32, the top of hints input_batch_size_range");
  // "" for static shapes.
  std::string assumption;
  int64_t planned_peak_bytes = 0;  // arena size
  int64_t lower_bound_bytes = 0;   // max bytes simultaneously live (an in-place pair counts once)
  int64_t unplanned_bytes = 0;     // sum of all intermediate tensors (no reuse at all)
  int inplace_count = 0;
  std::vector<PlannedTensor> tensors;
  std::string str() const;  // one-line summary
};

// The placement core, shared by plan_memory and backends that plan their own schedule (the CPU
// backend plans its materialized buffers in fusion-group order at load / first call).
// A request lives over steps [first, last]; `reuses` is the index of an earlier request whose
// memory it takes over in place (that one must die at this one's `first`), or -1.
struct BufferRequest {
  int64_t bytes = 0;
  int first = 0, last = 0;
  int reuses = -1;
};
struct BufferPlacement {
  std::vector<int64_t> offsets;   // per request, 64-byte aligned
  int64_t arena_bytes = 0;        // end of the last buffer
  int64_t lower_bound_bytes = 0;  // max bytes live at one step (an in-place pair counted once)
};
// strategy "greedy": largest first, each in the best-fitting gap among buffers whose lifetimes
// intersect; "none": end to end (in-place requests still share their input's memory).
BufferPlacement place_buffers(const std::vector<BufferRequest>& requests, const std::string& strategy);
// Throws if two requests with intersecting lifetimes overlap, other than an in-place pair.
void check_buffer_placement(const std::vector<BufferRequest>& requests, const BufferPlacement& placement);

// strategy: "greedy" or "none"; `inplace` enables in-place reuse for elementwise ops.
MemoryPlan plan_memory(const Graph& g, const std::string& strategy = "greedy", bool inplace = true);

// Throws if two tensors with intersecting lifetimes overlap in the arena (tests, debugging).
void check_memory_plan(const Graph& g, const MemoryPlan& plan);

}  // namespace ingot
