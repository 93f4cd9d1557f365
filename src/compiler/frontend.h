// The first two compile stages: flatten a logical model into primitive nodes over global wires,
// then resolve terminals (names, key sets, data/parameter/constant kinds, training vs inference
// mode, discards) into an IR graph plus the shape constraints inference must satisfy.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/shape_inference.h"
#include "ingot/compile.h"
#include "models/model_impl.h"

namespace ingot {

struct FlatWire {
  std::string name;  // global: top-level terminal names, "<instance path>.<name>" inside blocks
  bool top_level = false;
  std::vector<ShapeConstraint> shapes;  // value ids filled in by resolve
  std::optional<DType> dtype;
  std::optional<Tensor> value;
  bool weak = false;
  detail::WireRole role = detail::WireRole::Unspecified;
  std::optional<Init> init;
  int producer = -1;  // flat node index
  bool output = false;  // an output of the top-level model
};

struct FlatNode {
  std::string op;
  Attrs attrs;
  std::vector<int> inputs, outputs;  // wire indices
  std::string scope;  // instance path, "mlp.linear_1.matmul_0"
  // Control-flow blocks: what the node is built from, and the block's terminal names in the
  // order of `inputs` and `outputs`.
  std::shared_ptr<const detail::ControlFlow> control;
  std::vector<std::string> input_terminals, output_terminals;
  std::string backend;  // Node::backend: the innermost enclosing block's set_attribute("backend", ...)
};

struct FlatModel {
  std::vector<FlatWire> wires;
  std::vector<FlatNode> nodes;
  std::vector<std::string> notes;  // what flattening decided, for `verbose`
};

// A model flattened as a block (a control-flow body): its outputs are its output terminals
// (ModelImpl::output_wires: exposed wires, the canonical output, named wires nothing reads).
FlatModel flatten(const Model& model);
// A model flattened for compile: its outputs are the exposed wires, or the canonical output when
// none is exposed (ModelImpl::compiled_output_wires), plus `extra_outputs` (CompileOptions::outputs:
// wire names, "<instance path>.<name>" inside blocks; an unknown name is an error). Dangling wires
// that are not outputs are left to dead-code elimination and listed in `notes`.
FlatModel flatten_for_compile(const Model& model, const std::vector<std::string>& extra_outputs);

struct ResolvedModel {
  Graph graph;
  std::vector<ShapeConstraint> constraints;
  std::vector<std::string> notes;  // what resolution decided, for `verbose`
};

ResolvedModel resolve_terminals(const FlatModel& flat, const CompileOptions& options);

// Control-flow blocks (src/compiler/control_frontend.cpp). At flatten: gives each parameter
// lifted out of a body the initializer, dtype and shape templates the body gives it.
void merge_lifted_parameters(const FlatNode& n, FlatModel& out);
// At resolve: appends the block's `if`, `while` or `scan` node to `g`, its subgraphs built from
// the bodies, reading `inputs` (one value per input terminal); returns one value per output
// terminal. A condition that reads data without options.dynamic_control_flow is an error.
std::vector<ValueId> add_control_node(Graph& g, const FlatNode& n, const std::vector<ValueId>& inputs,
                                      const CompileOptions& options);

// The shape of each of `wires` (top-level wire indices of `model`, Connection::wire_index) as
// shape inference over the model so far fixes it for inference (`options.inference` is set);
// nullopt where a dimension stays symbolic or inference cannot size it. For an importer that
// needs a size while it builds the model (ONNX's Shape of an intermediate value): one flatten,
// resolve and inference for all the wires asked.
std::vector<std::optional<Shape>> static_wire_shapes(const Model& model, const std::vector<int>& wires,
                                                     CompileOptions options = {});

}  // namespace ingot
