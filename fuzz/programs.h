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
// Control flow: after a batch's straight-line programs are drawn, some (control_flow_percent of
// them, by a generator of their own, so a seed's programs stay the same) are wrapped, each in one
// of: a scan over a leading axis of length 0..4 (its float inputs scanned as xs or, at random,
// passed whole as invariants, which loop-invariant code motion hoists; a float32 output also
// updates a carry, carry * 0.5 + out, from an input of its shape; every output stacked as a y;
// reverse at random); an if on a bool scalar input, or now and then a constant (inlined), whose
// then graph is the program and whose else graph the program with its float32 outputs negated;
// a while with an int32 counter i from 0 or 1 (a constant or an input) up to a bound n of 0..3
// (a constant or an input), carrying every output (a float32 one as in the scan, another as the
// program's value) with max_iterations 0..3 on three loops in four (the others have no gradient:
// the gradient variations skip such a batch as not differentiable). Trip counts of 0 and 1 reach
// the compiler's loop simplification, constant operands its moving them into subgraphs, and the
// reference interpreter on the unoptimized graph stays the oracle. The shrinker removes whole
// control-flow nodes but does not shrink inside their subgraphs.
//
// A finding is an output where the CPU backend differs from the reference beyond float32
// rounding: relative to the output's largest magnitude, and only when the CPU result is also
// further from a float64 run of the same program than the float32 reference is. Gradient
// variations differentiate every program (a random cotangent per output) and check the
// gradients twice: the CPU backend's against the reference's, and the reference's, in float64,
// against central finite differences, so a wrong gradient rule is caught even where the
// compiled and the eager paths agree.
//
// A finding is shrunk (shrink.h) to a small program and saved as a reproducer directory that
// the regression test replays (fuzz/regressions/programs/).
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

// A program's inputs have at most kMaxInputElements elements, and no value it computes more than
// kMaxValueElements: broadcasting and outer products would otherwise grow values without bound
// (a few such steps once took the generator past 20 GB).
inline constexpr int64_t kMaxInputElements = 65536;
inline constexpr int64_t kMaxValueElements = 4 * kMaxInputElements;

struct ProgramOptions {
  int ops = 8;                  // nodes per program
  int programs_per_graph = 6;   // independent programs batched into one graph (one build)
  int control_flow_percent = 25;  // of the programs, wrapped in a scan, an if or a while (0: none)
};

// Independent random programs in one graph, with their inputs by leaf name. `special_inputs`:
// the same inputs with a NaN, an inf, a -inf or a signed zero in some elements (the special
// values variation runs on them).
struct Batch {
  uint64_t seed = 0;
  Graph graph;
  std::map<std::string, Tensor> inputs, special_inputs;
  int programs = 0;
};
Batch random_batch(uint64_t seed, const ProgramOptions& options = {});

// A way users compile: an optimization level, a pass switched off, a layout target, threads,
// mixed precision, inputs with special values, gradients (with or without checkpointing).
struct Variation {
  std::string name;
  CompileOptions options;
  int threads = 0;              // > 0: CpuOptions::num_threads
  bool special_values = false;  // run on Batch::special_inputs
  bool non_contiguous = false;  // the CPU backend's inputs are strided views (rank >= 2)
  bool shapeless = false;       // the CPU backend compiles the program with symbolic dimensions
  bool gradients = false;       // differentiate every program (see above)
};
// Every level; at the default level each pass switched off in turn, every layout target, memory
// planning off, 1, 2 and 4 threads, bfloat16 and float16 mixed precision, special values,
// non-contiguous inputs, shapeless compiles, and gradients at the default and the highest level
// and with checkpointing.
std::vector<Variation> variations();
// The variation of that name (a reproducer names its own); throws ingot::Error if none is.
Variation variation_named(const std::string& name);

struct Finding {
  uint64_t seed = 0;
  std::string variation, output, graph_text;
  double error = 0, reference_error = 0;  // against the float64 run: the CPU's, the reference's
  std::string str() const;
};

// Compiles `batch` under `v` for the CPU backend and compares every output with the reference
// interpreter on the unoptimized graph (gradients: see above). nullopt when all agree, or when
// both refuse the program with an ingot::Error (its data can make it invalid: an index out of
// range).
std::optional<Finding> check(const Batch& batch, const Variation& v, const CpuBackend::CpuOptions& cpu = {});

// What the gradient and shapeless variations could check so far in this process: batches
// differentiated, and skipped because a program crosses an op with no gradient rule; batches
// compiled with symbolic shapes, and skipped because a rule needs a static size (a sampled
// reshape's target shape).
struct CheckStats {
  long differentiated = 0, not_differentiable = 0, shapeless = 0, not_shapeless = 0;
};
CheckStats check_stats();

// max |got - want| over max(1, max |want|) on the elements where both are finite; a NaN or inf
// where the other has none counts as a full mismatch (1e30).
double relative_error(const Tensor& got, const Tensor& want);

// How often each op of the registry was drawn and kept so far in this process (every op appears;
// 0: never generated).
std::map<std::string, int> coverage();
// Ops whose shape and dtype rules accepted operands their reference kernel refused, with the
// kernel's error: rule gaps (an error at run time that type inference should have given).
std::map<std::string, std::string> rule_gaps();

}  // namespace ingot::fuzz
