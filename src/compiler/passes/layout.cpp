// Layout choice: at optimization_level=high, conv2d nodes get the attribute layout = "nhwc" as a
// hint that a CPU backend may run them channels-last (converting at the group boundary). It does
// not change the IR's semantics: tensors stay NCHW in the graph, and the reference backend ignores
// the attribute (it always computes NCHW).
#include "compiler/passes/passes.h"

namespace ingot {

PassReport choose_layout(Graph& g, const PassContext&) {
  PassReport report;
  for (Node& n : g.nodes()) {
    if (n.op != "conv2d" || n.attrs.has("layout")) continue;
    n.attrs.set("layout", std::string("nhwc"));
    ++report.changes;
    report.notes.push_back("conv2d" + (n.scope.empty() ? "" : " in '" + n.scope + "'") + ": layout nhwc");
  }
  return report;
}

}  // namespace ingot
