// Control flow in the generated code: an `if`, `while` or `scan` node becomes a real branch or
// loop in the caller's generated function, around direct calls to its subgraphs' generated
// functions (compiled into the same library, each in a namespace of its own), so an iteration
// costs a function call per subgraph and no trip through the host.
//
// What the host prepares once per call (ingot_subgraph, abi.h): each subgraph's dimensions,
// constants and arena, planned for the shapes its node gives it; for a loop body, a second buffer
// per carried value. Carried values alternate between the node's result buffers and those
// spares (each iteration reads one set and writes the other, so nothing is allocated or copied
// per iteration); after the loop, results that ended in the spares are copied into the node's
// buffers once. A scan reads each step's slice of its xs in place and writes each step's results
// straight into their row of the stacked outputs.
//
// Subgraph results the subgraph's function does not write (an input or constant returned as is,
// one value returned twice) are copied by the caller after the call, as the host does for a
// graph's outputs.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot::cpu {

struct GeneratedCode;

// One control-flow node as its caller's generator sees it.
struct ControlSite {
  const Graph& graph;  // the graph holding the node
  const Node& node;
  int first_subgraph = 0;                  // ingot_host::subgraphs index of node.subgraphs[0]
  std::vector<const GeneratedCode*> code = {};  // per subgraph: its generated code
  std::vector<std::string> function = {};       // per subgraph: the qualified name of its ig_run
  std::function<std::string(ValueId)> ptr = {};                 // a value's buffer (typed pointer)
  std::function<std::string(ValueId, size_t)> numel_from = {};  // elements of a value from an axis on
  std::function<std::string(ValueId, size_t)> dim = {};         // a value's size along an axis
  std::function<std::string(DType)> ctype = {};                 // the C++ element type of a dtype
};

// The subgraph parameter (index among its Input leaves) that each input of its generated
// function is, in GeneratedCode::inputs order.
std::vector<size_t> subgraph_params_of_inputs(const Graph& sub, const GeneratedCode& code);

// The statements that run the node (inside the caller's ig_run: `ctx` is in scope; a failing
// subgraph returns 1 with its message in ctx->error).
void emit_control(const ControlSite& site, std::ostream& out);

}  // namespace ingot::cpu
