// The CPU executable's arena: one buffer per arena slot of the generated code, placed by the
// memory planner's placement. CpuBackend::arena_bytes works it out for a graph without running
// the compiler, so gradient checkpointing can report the arena of the graph it did not build.
#include "backends/cpu/executable.h"
#include "compiler/passes/passes.h"

namespace ingot {

std::vector<BufferRequest> cpu::arena_requests(const Graph& graph, const GeneratedCode& code,
                                               const std::vector<Shape>& shapes) {
  std::vector<BufferRequest> requests;
  for (const ArenaSlot& slot : code.arena_slots) {
    const Value& v = graph.value(slot.value);
    const int64_t bytes = numel(shapes[static_cast<size_t>(v.id)]) * static_cast<int64_t>(dtype_size(v.dtype));
    requests.push_back({bytes, slot.first, slot.last, slot.reuses});
  }
  return requests;
}

int64_t CpuBackend::arena_bytes(const Graph& graph, const CompileOptions& options) const {
  // The code lower would generate (on the same widened graph), without building it.
  const cpu::LoweringInput in = cpu::lowering_input(graph, options_, options);
  const Graph& g = in.widened ? *in.widened : graph;
  std::vector<Shape> shapes;
  for (const Value& v : g.values()) {
    if (!is_static(v.shape)) return 0;  // sized per call, from the input shapes
    shapes.push_back(to_shape(v.shape));
  }
  const cpu::PreparedCode prepared =
      cpu::prepare_code(g, fusion_plan_for(g, options), options_, options.memory_planning, in.layout,
                        options_.cache ? cpu::cache_dir_of(options_) : "");
  return place_buffers(cpu::arena_requests(g, prepared.code, shapes), options.memory_planning).arena_bytes;
}

}  // namespace ingot
