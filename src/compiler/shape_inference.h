// Symbolic shape and dtype inference over a whole graph.
//
// Every dimension is a union-find variable that is either bound to a size, named by a user
// symbol ("N"), or still unknown. Op shape rules and shape templates (from terminals, set_shapes
// and the `shapes` option) are constraints over those variables; they run to a fixpoint, so a
// size known anywhere (an output, a parameter) flows to every dimension unified with it.
#pragma once

#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ingot/shape.h"

namespace ingot {

struct ShapeConstraint {
  ValueId value = -1;
  ShapeTemplate shape;
  // Symbols and variadic names are scoped: "N" in two different scopes are two symbols.
  // The compile option `shapes` uses the global scope "".
  std::string scope;
  std::string origin;  // where it came from, for error messages: "shapes['input']"
};

struct ShapeInferenceReport {
  int iterations = 0;
  std::vector<std::string> assumptions;  // e.g. broadcast of two unknown dims taken as equal
  // With `trace`: each step that gave dimensions a size, in order ("sweep 1, matmul in 'fc1':
  // 'fc1.output'[1] = 10"), the rule or shape template that did it first.
  std::vector<std::string> trace;
};

// Fills Value::shape for every value. Throws ingot::Error ("Cannot infer shape for 'x': ...")
// on contradictions or on a value whose rank nothing determines.
ShapeInferenceReport infer_shapes(Graph& g, const std::vector<ShapeConstraint>& constraints, bool trace = false);

// Infers every produced value's shape again from the leaves' current shapes (their symbols by
// name; leaves without a shape left to inference): for passes that rebuilt a graph or left
// values without shapes. Throws like infer_shapes.
ShapeInferenceReport infer_shapes_from_leaves(Graph& g);

// Infers the shapes and dtypes of one node's outputs from its inputs' (already inferred) shapes
// and dtypes, without revisiting the rest of the graph: for transforms that grow an inferred
// graph node by node (autodiff). Symbols keep their names; a size nothing determines gets a
// fresh name. Throws like infer_shapes.
void infer_node(Graph& g, NodeId node);

// Fills Value::dtype for every produced value from the leaves' dtypes, forward.
void infer_types(Graph& g);

// A readable name for value `v` in messages: its name, else "<op> output in '<scope>'".
std::string describe_value(const Graph& g, ValueId v);

}  // namespace ingot
