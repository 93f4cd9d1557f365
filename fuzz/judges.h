// The judges of fuzz/checks.cpp: when the CPU backend's output and the reference's differ beyond
// float32 rounding, whether the difference is still explained by float arithmetic (a comparison
// that rounding flipped, an ill-conditioned op that amplified its input's last bits) rather than
// by a wrong kernel. Each reruns the program with its intermediate values exposed and checks the
// explanation op by op against the reference; a wrong kernel fails some step of it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ingot/ingot.h"
#include "programs.h"

namespace ingot::fuzz {

// Shared with checks.cpp (defined there).
// The inputs of `g`'s leaves, each in its leaf's dtype (float64 in the tie-breaker's program).
std::vector<Tensor> leaf_inputs(const Graph& g, const std::map<std::string, Tensor>& by_name);
std::vector<Tensor> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs);
// `g` optimized under `v`'s options, compiled for the CPU and run on `inputs` (as non-contiguous
// views when `v` asks for them).
std::vector<Tensor> run_on_cpu(const Graph& g, const Variation& v, const std::map<std::string, Tensor>& inputs,
                               const CpuBackend::CpuOptions& cpu);
// `t`'s values as a non-contiguous view (rank >= 2): stored with its axes reversed, viewed back.
Tensor strided_view(const Tensor& t);

// Non-float output `output` of `g`: its boundary ops (float operands, non-float result) flipped by
// operands that agree with the reference within `operand_tol` (float32's tolerance; under mixed
// precision, on the cast graph, the low type's).
bool explained_by_float_rounding(const Graph& g, size_t output, const Variation& v,
                                 const std::map<std::string, Tensor>& inputs, const CpuBackend::CpuOptions& cpu,
                                 double operand_tol = 1e-4);

// Output `output` of `g` (the CPU gave `first_run`): one op on its path amplifies operands that
// agree with the reference (within `operand_tol`: float32's tolerance; under mixed precision, on
// the cast graph, the low type's) into a result that does not, and that op in float64 on the
// CPU's operands, and the ops after it on the CPU's values, give the CPU's result within `tol`.
bool explained_by_conditioning(const Graph& g, size_t output, const Variation& v, const std::map<std::string, Tensor>& inputs,
                               const CpuBackend::CpuOptions& cpu, const Tensor& first_run, double tol,
                               double operand_tol = 1e-4);

// `g` with each `if` on the branch the reference takes for `inputs`, that branch's nodes inlined
// in its place, each scan of one step and while of one known iteration inlined too, each scan of
// 2 to 8 static steps written out step by step, and each while written out for the iterations
// the reference runs (up to 8); nullopt when there is nothing to inline. The judges see a
// control-flow node as one node, so an amplifying op inside a branch was out of their sight
// (seed 53009: an `if` whose branch divides the attention backward's dk by a dv near 0); on this
// graph they see its ops one by one. Control flow nested inside a loop's body stays whole.
std::optional<Graph> with_control_flow_inlined(const Graph& g, const std::map<std::string, Tensor>& inputs);

}  // namespace ingot::fuzz
