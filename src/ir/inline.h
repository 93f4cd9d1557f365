// Copying one graph's nodes into another: what inlines an `if` branch taken on a constant
// condition, and what builds the gradient graphs of control-flow ops from their subgraphs.
#pragma once

#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot {

// The value fields a copy keeps (the id, kind, producer and constant are the new graph's).
void copy_value_info(Value& to, const Value& from);

// Adds `from`'s leaves (inputs and constants, in leaf order, each with its value info) to
// `into`, which has none yet: the start of a graph rebuilt node by node. Returns the map from
// from's value ids to into's, -1 where a value is not copied yet.
std::vector<ValueId> copy_leaves(Graph& into, const Graph& from);

// Appends node `n` of `from` to `into`: its inputs read through `map` (from's value ids to
// into's), its attributes, subgraphs, output shapes and dtypes kept; its outputs are recorded in
// `map`. `scope` replaces the node's scope when the node has none.
void copy_node(Graph& into, const Graph& from, const Node& n, std::vector<ValueId>& map, const std::string& scope = "");

// Appends `sub`'s nodes to `into`, its data inputs (in leaf order) read as `args`, its constants
// copied in as new constants (named uniquely among into's leaves). Each node keeps its shapes,
// dtypes, attributes and subgraphs; `scope` replaces an empty node scope when not empty. Returns
// into's values for sub's outputs, in order.
std::vector<ValueId> inline_graph(Graph& into, const Graph& sub, const std::vector<ValueId>& args,
                                  const std::string& scope = "");

// Records a static shape and dtype in `v` (what inference would give a value added after it ran).
void set_static_type(Value& v, DType dtype, const std::vector<int64_t>& dims);

// `v` (of `dtype`) in the static shape `dims`, its dtype and shape recorded in the value: a
// reshape, or, when the shape holds no element, an empty constant named `empty_name` (a reshape
// target's 0 means "copy the input's dim", so [1, 0] -> [0] cannot be a reshape).
ValueId reshape_static(Graph& g, ValueId v, DType dtype, const std::vector<int64_t>& dims, const std::string& empty_name,
                       const std::string& scope);

// A scalar literal: a constant that takes the dtype of the operand it meets (weak type), as a
// Python number does.
ValueId add_weak_scalar(Graph& g, double value);

// Which of `g`'s values value `v` is computed from (itself included), by value id.
std::vector<bool> values_reaching(const Graph& g, ValueId v);
// Which of `g`'s data inputs (in leaf order) value `v` is computed from.
std::vector<bool> inputs_reaching(const Graph& g, ValueId v);

}  // namespace ingot
