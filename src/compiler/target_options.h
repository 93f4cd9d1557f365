// Hints and targets: the compile options CompileOptions::hints, target_hardware, cpu_options and
// optimize_for. Their string forms (CompileOptions::set), their checks (validate), and every
// decision they make, in one place:
//
//   decision                                 made by                                   where it acts
//   threads per call of the CPU backend's    cpu_options.num_threads, else               cpu::tuned_options: the
//   executable                               CpuOptions::num_threads, else the priority: generated entry point and
//                                            latency: all of ingot's threads              its loops
//                                            (parallel_num_threads()), throughput: 1
//   batch chunking's chunk size              throughput: 64 MiB, memory: 16 MiB, else     pass_context
//   (inference, static batch)                256 MiB (PassContext's default)
//   SIMD in the generated loops              cpu_options.vectorize                        codegen, build flags
//   -Os instead of -O3 for the library       optimize_for = size                          build flags
//   gradient checkpointing                   optimize_for = memory, or the option itself  build_joint_graph
//   the batch fixed at compile time          input_batch_size_range (n, n)                shape inference stage
//   memory plan (and max_memory_gb) at the   input_batch_size_range (lo, hi), lo < hi,    memory planning
//   batch hi                                 a symbolic batch
//   batches outside the range refused        input_batch_size_range                       compile, evaluate
//
// The priority is hints.inference_priority, else optimize_for when that is latency or throughput
// (the two disagreeing is an error). "The batch" is dim 0 of every run-time input.
#pragma once

#include <string>
#include <vector>

#include "compiler/memory_plan.h"
#include "compiler/shape_inference.h"
#include "ingot/compile.h"

namespace ingot {

// Option parsing shared by CompileOptions::set: "true"/"false" (1/0, on/off, yes/no), and a
// separated list without empty items.
bool parse_bool(const std::string& name, const std::string& v);
std::vector<std::string> split_list(const std::string& s, char sep);

// hints, target_hardware, cpu_options, optimize_for.
std::vector<std::string> target_option_names();
// Sets one of them from its string form (hints "input_batch_size_range=1:32,
// inference_priority=latency"; cpu_options "num_threads=4,vectorize=false"); false when `name`
// is not one of them. Unknown keys and bad values are errors naming the option and what is valid.
bool set_target_option(CompileOptions& o, const std::string& name, const std::string& value);
void validate_target_options(const CompileOptions& o);
// cpu_options and optimize_for = "size" tune the CPU backend's generated library: for another
// backend (its name()) they are an error rather than silently nothing.
void check_target_backend(const CompileOptions& o, const std::string& backend);

// ---- the decisions
std::string inference_priority(const CompileOptions& o);  // "" | latency | throughput
// Threads per call of the CPU backend's executable; 0: OpenMP's default. `backend_threads`:
// CpuBackend::CpuOptions::num_threads.
int threads_per_call(const CompileOptions& o, int backend_threads);
// Batch chunking's PassContext::chunk_bytes, from its default.
int64_t batch_chunk_bytes(const CompileOptions& o, int64_t default_bytes);
bool checkpointing_enabled(const CompileOptions& o);

// ---- input_batch_size_range
// At compile, after shape inference with `constraints`: a static batch outside the range is an
// error; with lo == hi every symbolic batch becomes lo (shapes inferred again). Returns what it
// did, for `verbose` ("" without the hint).
std::string apply_batch_range(Graph& g, const std::vector<ShapeConstraint>& constraints, const CompileOptions& o);
// plan_memory(g, options.memory_planning), except with lo < hi and a symbolic batch: the plan of
// g at batch hi, the largest the hint allows (its reason says so).
MemoryPlan plan_memory_for(const Graph& g, const CompileOptions& o);
// At run time: input `input` of shape `shape` holds a batch inside the range.
void check_batch_range(const CompileOptions& o, const std::string& input, const Shape& shape);

}  // namespace ingot
