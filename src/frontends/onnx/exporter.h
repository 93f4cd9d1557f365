// The ONNX exporter's working state, shared by the graph walk (export.cpp) and the per-op
// emitters (export_ops.cpp, export_control_flow.cpp): an ingot IR graph (shapes and dtypes
// inferred) becomes an ONNX GraphProto of opset 17, one or a few ONNX nodes per ingot node; the
// subgraphs of control-flow nodes become the If's, Loop's and Scan's subgraphs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ingot/physical_model.h"
#include "onnx/onnx_pb.h"

namespace ingot::onnx_export {

constexpr int64_t kOpset = 17;

// The ONNX TensorProto.DataType of an ingot dtype.
int onnx_type(DType t);
// `t` as a TensorProto with raw little-endian data.
::onnx::TensorProto tensor_proto(const std::string& name, const Tensor& t);

class Exporter;

// What an op's emitter sees: the node, its operands' and results' ONNX names and types, and
// helpers that append ONNX nodes and constants.
struct EmitContext {
  Exporter& ex;
  const Graph& g;
  const Node& node;

  std::string in(int i) const;                 // ONNX name of input i
  DType in_dtype(int i) const;
  std::string out(int i = 0) const;            // ONNX name of output i
  DType out_dtype(int i = 0) const;
  int num_inputs() const { return static_cast<int>(node.inputs.size()); }
  // Input i converted to `t` (a Cast node where the dtypes differ).
  std::string in_as(int i, DType t) const;
  // Appends an ONNX node; returns its first output's name (`outputs` empty: one fresh name).
  std::string add(const std::string& op_type, const std::vector<std::string>& inputs,
                  std::vector<std::string> outputs = {},
                  const std::function<void(::onnx::NodeProto&)>& set_attrs = {}) const;
  std::string constant(const Tensor& t) const;            // an initializer
  std::string ints(const std::vector<int64_t>& v) const;  // a 1-D int64 initializer
  std::string scalar(double v, DType t) const;            // a 0-D initializer of type t
  [[noreturn]] void fail(const std::string& why) const;
};

using Emitter = std::function<void(EmitContext&)>;
const std::map<std::string, Emitter>& emitters();

// Attribute helpers for set_attrs.
void set_attr(::onnx::NodeProto& n, const std::string& name, int64_t v);
void set_attr(::onnx::NodeProto& n, const std::string& name, float v);
void set_attr(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);
void set_attr(::onnx::NodeProto& n, const std::string& name, const std::string& v);
void set_attr(::onnx::NodeProto& n, const std::string& name, const ::onnx::TensorProto& v);
void set_attr(::onnx::NodeProto& n, const std::string& name, const ::onnx::GraphProto& v);
// `vi`'s type: `v`'s element type and, where inferred, its shape (symbols as dim_params).
void set_type(::onnx::ValueInfoProto& vi, const Value& v);

// The emitters of the control-flow ops (if, while, scan: export_control_flow.cpp).
void add_control_flow_emitters(std::map<std::string, Emitter>& table);

class Exporter {
 public:
  // `params`: the values of the graph's parameters (each becomes an initializer).
  Exporter(const Graph& g, const TensorMap& params);
  ::onnx::ModelProto run();

  // Of the graph being written (the model's, or a subgraph's while write_subgraph runs).
  std::string name_of(ValueId v) const { return frames_.back().names.at(static_cast<size_t>(v)); }
  ::onnx::GraphProto& graph() { return *frames_.back().into; }
  // A name no value of the model has, in any of its graphs (ONNX names are unique across them).
  std::string fresh(const std::string& hint);

  // Writes `sub` (a subgraph of the node being emitted) into `into`: its formal inputs are the
  // ONNX values named `formals` (in leaf order: values of an enclosing graph, or `into`'s own
  // inputs), its constants `into`'s initializers, its nodes written by their ops' emitters.
  // Returns the ONNX names of its outputs. `into` may be the graph being written (the ops then
  // join it) or a GraphProto of its own, a branch or body, whose outputs declare_outputs adds.
  std::vector<std::string> write_subgraph(const Graph& sub, const std::vector<std::string>& formals,
                                          ::onnx::GraphProto& into);
  // Declares `values` (ONNX names of `sub`'s outputs, as write_subgraph returned them) as the
  // outputs of `into`, each a fresh name of its own with `sub`'s output's type.
  void declare_outputs(const Graph& sub, const std::vector<std::string>& values, ::onnx::GraphProto& into);

 private:
  // A graph being written: its values' ONNX names and the GraphProto its nodes go into.
  struct Frame {
    const Graph* g;
    std::vector<std::string> names;
    ::onnx::GraphProto* into;
  };
  // Writes the current frame's constants as initializers, its nodes, and its intermediate
  // values' types.
  void write_body();

  const Graph& g_;
  const TensorMap& params_;
  ::onnx::ModelProto model_;
  std::vector<Frame> frames_;
  std::map<std::string, int> taken_;
};

}  // namespace ingot::onnx_export
