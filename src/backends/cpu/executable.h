// Lowering with an explicit fusion plan (CpuBackend::lower passes fusion_plan_for(graph, options));
// tests use it to exercise fused groups whatever the fusion pass decides today.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cache.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/toolchain.h"
#include "compiler/fusion_plan.h"
#include "compiler/memory_plan.h"
#include "ingot/cpu_backend.h"

namespace ingot::cpu {

// What lower_with_plan builds: the generated code (with its arena slots) and the toolchain.
struct PreparedCode {
  Toolchain toolchain;
  GeneratedCode code;
};
// `cache_dir`: the resolved cache directory (cache_dir_of), where the toolchain's version memo
// lives; "" when caching is off.
PreparedCode prepare_code(const Graph& graph, const FusionPlan& plan, const CpuBackend::CpuOptions& options,
                          const std::string& memory_planning, Layout layout, const std::string& cache_dir);

// The backend's options as a compile's hints and targets tune them (compiler/target_options.h):
// num_threads (threads per call), vectorize and optimize_size.
CpuBackend::CpuOptions tuned_options(const CpuBackend::CpuOptions& options, const CompileOptions& compile);
// Whether bfloat16 matmuls run the host's bf16 matmul (host_gemm_bf16, with library products on)
// rather than being widened to float32: lower, arena_bytes and verbose decide it alike.
bool native_bf16_matmul(const CpuBackend::CpuOptions& options);

// What lower compiles for a graph, and arena_bytes sizes without compiling: the graph with
// mixed precision's dense ops widened where this host runs them in float32 (native_bf16_matmul,
// dnnl_native_bf16_conv; nullopt when none is), and the layout its buffers are planned for.
struct LoweringInput {
  std::optional<Graph> widened;
  Layout layout = Layout::Nchw;
};
LoweringInput lowering_input(const Graph& graph, const CpuBackend::CpuOptions& cpu, const CompileOptions& options);

// CpuOptions::cache_dir, else default_cache_dir().
inline std::string cache_dir_of(const CpuBackend::CpuOptions& options) {
  return options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
}

// One request per arena slot of `code`, sized for `shapes` (every value's, by id).
std::vector<BufferRequest> arena_requests(const Graph& graph, const GeneratedCode& code, const std::vector<Shape>& shapes);

// layout: the target layout (requested_layout(g, options, target)); buffers are stored as plan_layouts
// decides for this backend and that target, or all NCHW for Layout::Nchw. file_path (CompileOptions::file_path): where compile writes the
// source; `verbose` then prints the command that builds that file, not the cache's copy.
// `transformers` (CompileOptions::code_transformers) rewrite the generated source, in order,
// before it is keyed, built and written.
std::unique_ptr<Executable> lower_with_plan(const Graph& graph, const FusionPlan& plan,
                                            const CpuBackend::CpuOptions& options, bool verbose,
                                            const std::string& memory_planning = "greedy",
                                            Layout layout = host_layout(), const std::string& file_path = "",
                                            const std::vector<CodeTransformer>& transformers = {});

// What a CPU executable runs with for these input shapes (planned at load for static shapes, on
// the first call otherwise): the arena requests (one per intermediate buffer, steps = generated
// schedule) and their placement, oneDNN's kernel per conv2d, the buffers not stored NCHW.
struct ExecutionPlan {
  std::vector<BufferRequest> requests;
  BufferPlacement placement;
  std::vector<std::string> conv_implementations;
  std::vector<ValueId> channels_last_values;
};
ExecutionPlan execution_plan(const Executable& exe, const std::vector<Shape>& input_shapes);

}  // namespace ingot::cpu
