// Lowering with an explicit fusion plan (CpuBackend::lower passes plan_fusion(graph)); tests use
// it to exercise fused groups whatever the fusion pass decides today.
#pragma once

#include <memory>

#include "compiler/fusion_plan.h"
#include "ingot/cpu_backend.h"

namespace ingot::cpu {

std::unique_ptr<Executable> lower_with_plan(const Graph& graph, const FusionPlan& plan,
                                            const CpuBackend::CpuOptions& options, bool verbose);

}  // namespace ingot::cpu
