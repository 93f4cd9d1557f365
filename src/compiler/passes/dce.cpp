// Dead code elimination: nodes whose outputs reach no graph output are removed, and so are the
// leaves (inputs, parameters, constants) only they read, so an output nobody asks for is neither
// computed nor are its parameters required.
#include "compiler/passes/passes.h"

namespace ingot {

PassReport eliminate_dead_code(Graph& g, const PassContext&) {
  PassReport report;
  size_t leaves = g.leaves().size();
  report.changes = remove_dead_nodes(g);
  if (report.changes) report.notes.push_back("removed " + std::to_string(report.changes) + " dead nodes");
  if (g.leaves().size() != leaves)
    report.notes.push_back("dropped " + std::to_string(leaves - g.leaves().size()) + " unused leaves");
  return report;
}

}  // namespace ingot
