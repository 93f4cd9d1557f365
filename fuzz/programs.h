// The compiler's differential fuzzer: random programs drawn from the op registry, compiled for
// the CPU backend under the variations users pick, checked against the reference interpreter.
//
// Programs are built from the registry itself: an op is drawn from all_ops(), given operands
// from the values built so far, and kept only when its own shape and dtype rules accept them, so
// an op registered later is fuzzed with no change here. Ops whose attributes have no default
// (a reshape's shape, a pool's kernel) are rejected by their rules and counted as not covered
// (coverage() says which): they need an attribute sampler before this fuzzer reaches them.
// Several independent programs are batched into one graph, so one native build checks them all.
//
// A finding is an output where the CPU backend differs from the reference beyond float32
// rounding: relative to the output's largest magnitude, and only when the CPU result is also
// further from a float64 run of the same program than the float32 reference is.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/layout_plan.h"
#include "ingot/compile.h"
#include "ingot/cpu_backend.h"
#include "ingot/graph.h"

namespace ingot::fuzz {

struct ProgramOptions {
  int ops = 8;                  // nodes per program
  int programs_per_graph = 6;   // independent programs batched into one graph (one build)
};

// Independent random programs in one graph, with their inputs by leaf name.
struct Batch {
  uint64_t seed = 0;
  Graph graph;
  std::map<std::string, Tensor> inputs;
};
Batch random_batch(uint64_t seed, const ProgramOptions& options = {});

// A way users compile: an optimization level, a pass switched off, a layout target, threads.
struct Variation {
  std::string name;
  CompileOptions options;
};
// Every level; at the default level each pass switched off in turn, every layout target, and
// memory planning off.
std::vector<Variation> variations();

struct Finding {
  uint64_t seed = 0;
  std::string variation, output, graph_text;
  double error = 0, reference_error = 0;  // against the float64 run: the CPU's, the reference's
  std::string str() const;
};

// Compiles `batch` under `v` for the CPU backend and compares every output with the reference
// interpreter on the unoptimized graph. nullopt when all agree, or when both refuse the program
// with an ingot::Error (its data can make it invalid: an index out of range).
std::optional<Finding> check(const Batch& batch, const Variation& v, const CpuBackend::CpuOptions& cpu = {});

// How often each op of the registry was drawn and kept so far in this process (every op appears;
// 0: never generated).
std::map<std::string, int> coverage();
// Ops whose shape and dtype rules accepted operands their reference kernel refused, with the
// kernel's error: rule gaps (an error at run time that type inference should have given).
std::map<std::string, std::string> rule_gaps();

}  // namespace ingot::fuzz
