// Helpers for tests of epilogues folded into oneDNN primitives as post-ops (convolutions, and
// matmuls by constant weights run as 1x1 convolutions): the code the CPU backend generates with
// oneDNN, and the post-op kinds each primitive took.
#pragma once

#include <vector>

#include "backends/cpu/codegen.h"
#include "backends/cpu/dnnl_conv.h"
#include "compiler/layout_plan.h"
#include "compiler/passes/passes.h"
#include "cpu_test_util.h"

namespace ingot::cpu_test {

// The post-op kinds primitive call `c` runs, in order.
inline std::vector<cpu::ConvPostOp::Kind> kinds(const cpu::DnnlConvCall& c) {
  std::vector<cpu::ConvPostOp::Kind> k;
  for (const cpu::ConvPostOp& p : c.post_ops) k.push_back(p.kind);
  return k;
}

// The code the CPU backend generates for `g` with oneDNN: the fusion pass's plan and the layout
// plan for this backend and layout target; `dnnl_matmul`: matmuls by constant weights as 1x1
// convolutions (CodegenOptions::dnnl_matmul).
inline cpu::GeneratedCode generated_with_dnnl(const Graph& g, Layout layout = host_layout(), bool dnnl_matmul = false) {
  cpu::CodegenOptions o;
  o.dnnl = true;
  o.dnnl_matmul = dnnl_matmul;
  const LayoutPlan layouts = layout == Layout::Nchw ? nchw_plan(g) : plan_layouts(g, cpu::cpu_layout_target(true, layout));
  return cpu::generate_cpp(g, plan_fusion(g), layouts, o);
}

}  // namespace ingot::cpu_test
