// What an Array handle points at, and the graph builder that turns a set of arrays into IR.
//
// An ArrayImpl is data (a Tensor), a placeholder (an input of a function compile(fn) is
// tracing), or output `index` of an OpRecord (an op of the registry over other arrays). Sibling
// outputs of a multi-output op share one OpRecord. Once evaluated an array keeps its data and
// drops its record, so finished graphs are freed as soon as nobody holds their arrays.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ingot/array.h"
#include "ingot/graph.h"

namespace ingot::detail {

struct OpRecord {
  std::string op;
  Attrs attrs;
  std::vector<std::shared_ptr<ArrayImpl>> inputs;
  int num_outputs = 1;
  std::vector<Graph> subgraphs;  // control flow (cond, while_loop, scan): the traced functions
};

// Records op `name` over `inputs` as they are (no literal resolution), with `subgraphs`: the
// registry's shape and dtype rules run at once, as for every op. Returns one array per output.
std::vector<Array> record_op(const std::string& name, std::vector<std::shared_ptr<ArrayImpl>> inputs, Attrs attrs,
                             std::vector<Graph> subgraphs, int num_outputs);

struct ArrayImpl {
  DType dtype = DType::Float32;
  Shape shape;
  Tensor data;                      // defined once evaluated (or data from the start)
  std::shared_ptr<OpRecord> record;  // null for data and placeholders
  int index = 0;                     // which output of `record`
  bool placeholder = false;
  bool literal = false;  // a scalar literal whose dtype was resolved against its operand
  double literal_value = 0;  // its exact value (a float32 literal meeting float64 keeps every digit)
};

// How a graph treats leaves that hold data.
enum class DataLeaves {
  Inputs,     // run-time inputs (eval: the graph's hash ignores values)
  Constants,  // baked into the graph (compile: constant folding sees them)
};

// The IR for computing `targets` (and, with `keep_external`, every pending array someone else
// still holds, so it is not computed twice). `leading_inputs` become the first inputs, in that
// order, whether or not anything reads them; other placeholders and (with DataLeaves::Inputs)
// data leaves follow in the order they are met. Inputs are named in0, in1, ...; outputs out0, ...
// Only leaf values carry shapes and dtypes; annotate() fills the rest.
struct LazyGraph {
  Graph graph;
  std::vector<ArrayImpl*> inputs;    // per non-constant leaf, graph.leaves() order
  std::vector<ArrayImpl*> outputs;   // per graph output
  std::vector<ValueId> input_values; // value id of each input leaf
  std::vector<std::shared_ptr<OpRecord>> records;  // keeps every array above alive meanwhile
  bool has_placeholder = false;
};
LazyGraph build_lazy_graph(const std::vector<ArrayImpl*>& targets, DataLeaves leaves, bool keep_external,
                           const std::vector<ArrayImpl*>& leading_inputs = {});

// Shape and dtype inference over the built graph's leaves (concrete shapes).
void annotate(Graph& g);

// The op names along the graph, "matmul -> relu -> sum", for logs.
std::string op_sequence(const Graph& g, size_t max_ops = 6);

// A key of the graph's structure, attributes, shapes and dtypes (not the data).
std::string structural_key(const Graph& g);

}  // namespace ingot::detail
