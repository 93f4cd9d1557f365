// The ONNX importer's working state, shared by the graph walk (import.cpp) and the op
// conversions (convert_*.cpp): a conversion reads its node's inputs as Connections of the model
// being built, or as tensors where it needs values known while importing (a Reshape's target,
// Unsqueeze's axes), and returns its outputs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ingot/model.h"
#include "onnx/onnx_pb.h"

namespace ingot::onnx_import {

class Importer;

// One node's conversion: its inputs (node.input order; an empty name is an omitted optional
// input) as the importer holds them, the results as connections of `model`.
struct NodeContext {
  Importer& importer;
  Model& model;
  const ::onnx::NodeProto& node;
  int64_t opset;  // of the default domain

  int num_inputs() const;
  bool has_input(int i) const;  // present and not omitted
  Connection in(int i) const;   // throws naming the node when absent
  // A value known while importing (an initializer, a Constant, or shape arithmetic on those);
  // nullopt when it is only known at run time.
  std::optional<Tensor> known(int i) const;
  // Like known(), but a clear error when the value is not known.
  Tensor constant_input(int i, const char* what) const;
  // The static shape of input i (a graph input's, a known value's, or the file's value_info);
  // nullopt if unknown.
  std::optional<Shape> static_shape(int i) const;
  // The element type of input i (as for static_shape, or propagated from the node that made it).
  std::optional<DType> dtype(int i) const;

  // Attributes (defaults where absent); throws naming the node on a wrong attribute type.
  bool has_attr(const std::string& name) const;
  // A subgraph attribute (If's branches, Loop's and Scan's body); throws when absent.
  const ::onnx::GraphProto& attr_graph(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t def) const;
  float attr_float(const std::string& name, float def) const;
  std::string attr_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> def = {}) const;
  Tensor attr_tensor(const std::string& name) const;

  // The catalogue op `op` on these operands (a primitive block with inputs in0, in1, ...): a
  // Connection, or a number (a weak-typed scalar, which takes the other operand's dtype; write
  // 0.0, not 0).
  Connection op(const std::string& op, const std::vector<IOKey>& ins, Attrs attrs = {}) const;
  std::vector<Connection> op_n(const std::string& op, const std::vector<IOKey>& ins, int outputs,
                               Attrs attrs = {}) const;
  Connection scalar(double v, DType dt) const;  // a constant of that dtype
  [[noreturn]] void fail(const std::string& why) const;
  std::string where() const;  // "ONNX node 'loop_1' (Loop)", as fail() names it
  // `axis` of a value of rank `rank` as 0..rank-1 (0..rank with `allow_rank`: Flatten's split
  // point), counting a negative one from the end; out of range fails naming both. Every axis
  // from a file goes through here before it indexes a shape.
  int64_t axis(int64_t axis, int64_t rank, bool allow_rank = false) const;

  // A result known while importing (Shape of a value of fixed size): output i is this tensor,
  // whatever the conversion returns for it.
  std::map<int, Tensor> known_outputs;
  // Element types of results the importer cannot tell from the op (a control-flow node's, which
  // are its subgraph's).
  std::map<int, DType> output_dtypes;
};

using Conversion = std::function<std::vector<Connection>(NodeContext&)>;

// The conversions by ONNX op type (default domain), filled by the convert_*.cpp files.
const std::map<std::string, Conversion>& conversions();
void register_conversion(const std::string& op_type, Conversion c);
bool has_conversion(const std::string& op_type);  // registered so far
void register_elementwise_conversions();
void register_nn_conversions();
void register_shape_conversions();
void register_pad_conversions();
void register_loss_conversions();
void register_resize_conversions();
void register_attention_conversions();
void register_norm_conversions();
void register_rnn_conversions();
void register_einsum_conversion();
void register_control_flow_conversions();
// The elementwise ops that name their ONNX operator (ElementwiseForms::onnx) and have no
// converter of their own: registered last.
void register_catalogue_conversions();

// `x` (of rank `rank`, the element type of the node's input 0) with `before` and `after`
// elements of `value` (plus `fed_value`, a scalar known at run time, where given) added along
// `axis`; negative amounts crop (convert_pad.cpp).
Connection pad_axis(const NodeContext& c, const Connection& x, int rank, int64_t axis, int64_t before, int64_t after,
                    double value, const Connection* fed_value = nullptr);

// A formal input of an ONNX subgraph (a Loop or Scan body's graph input): the free input of the
// body Model it becomes, and what is known of it from the enclosing graph.
struct FormalInput {
  std::string terminal;  // its name in the body Model (a name condition expressions can read)
  std::optional<ShapeTemplate> shape;
  std::optional<DType> dtype;
  std::optional<Tensor> value;  // known while importing: a constant of the body instead
};

// An ONNX subgraph imported as a Model of its own (Importer::import_subgraph).
struct Subgraph {
  Model model;
  // Names of the enclosing graphs it reads: free inputs of `model` under the same names, linked
  // to the enclosing model's values by whoever adds the block.
  std::vector<std::string> captured;
  // Per output, in order: its value where known while importing, its element type and size.
  std::vector<std::optional<Tensor>> output_values;
  std::vector<std::optional<DType>> output_dtypes;
  std::vector<std::optional<Shape>> output_shapes;
};

// How deep subgraphs may nest (an If in a Loop body is 2): a file cannot exhaust the stack.
constexpr int kMaxSubgraphDepth = 16;

class Importer {
 public:
  // trainable: float initializers become parameters (their values in params()).
  Importer(const ::onnx::ModelProto& proto, std::string external_dir, std::map<std::string, Tensor> constants = {},
           bool trainable = false);
  Model run();
  const std::map<std::string, Tensor>& params() const { return params_; }

  // What NodeContext reads. Inside a subgraph, a name it does not define is looked up in the
  // enclosing graphs: a value known there is a constant here, any other value a captured input.
  std::optional<Tensor> known(const std::string& name) const;
  Connection connection(Model& m, const std::string& name);
  std::optional<Shape> static_shape(const std::string& name) const;
  std::optional<DType> dtype(const std::string& name) const;
  const std::string& external_dir() const { return external_dir_; }

  // Subgraph `g` (an attribute of `owner`, a node of this graph) as a Model: its graph inputs are
  // `formals`, its outputs are exposed under `outputs` (one name per graph output), and the names
  // it reads from this graph or those enclosing it are captured (Subgraph::captured).
  Subgraph import_subgraph(const ::onnx::GraphProto& g, const std::string& owner, const std::vector<FormalInput>& formals,
                           const std::vector<std::string>& outputs);
  // The nodes of `g` (an If's branch taken whatever the data: its condition is known while
  // importing) converted into this graph, as if they were its own; `g`'s outputs are then values
  // of this graph under their names.
  void inline_subgraph(const ::onnx::GraphProto& g, const std::string& owner);

 private:
  Importer(Importer& enclosing, const std::string& where);  // a subgraph's, `where` naming it
  void read_value_info(const ::onnx::GraphProto& g);
  void read_initializers(const ::onnx::GraphProto& g, bool trainable);
  void convert(const ::onnx::NodeProto& node);
  void fold(const ::onnx::NodeProto& node, const Conversion& c);
  bool defines(const std::string& name) const;  // here or in an enclosing graph
  bool trainable(const std::string& name) const;
  // The value `name` as an output of the model being built: a copy where it is an input, a
  // constant or another output already (ingot's outputs are wires of their own).
  Connection output_wire(const std::string& name);

  const ::onnx::ModelProto& proto_;
  std::string external_dir_;
  std::map<std::string, Tensor> fixed_inputs_;
  int64_t opset_ = 0;
  Importer* enclosing_ = nullptr;  // a subgraph's: the importer of the graph holding it
  int depth_ = 0;                  // subgraphs around this graph
  std::vector<std::string> captured_;
  Model model_;
  std::map<std::string, Connection> wires_;           // values of the model being built
  std::map<std::string, Tensor> known_;               // values known while importing
  std::map<std::string, Shape> shapes_;               // static shapes: graph inputs, value_info
  // Static shapes of the model's own wires, by ingot's shape inference over the model built so
  // far (for what the file's value_info leaves out); which wires it has been asked about.
  mutable std::map<std::string, Shape> inferred_shapes_;
  mutable std::set<std::string> inferred_;
  std::set<std::string> output_names_;
  std::map<std::string, DType> dtypes_;               // element types: inputs, value_info, propagated
  bool trainable_ = false;
  std::set<std::string> trainable_names_;  // float initializers, made parameters when read
  std::map<std::string, Tensor> params_;   // their values, by parameter name
};

// The shape template of an ONNX tensor type (dim_params as symbols where ingot accepts them).
ShapeTemplate template_of(const ::onnx::TypeProto_Tensor& t);
// Counts the nodes of `g` and of its subgraphs whose operator ingot has no conversion for, by
// operator; `depth` is g's nesting, checked against kMaxSubgraphDepth.
void count_missing_conversions(const ::onnx::GraphProto& g, int depth, std::map<std::string, int>& missing);
// Names `g` reads from the graphs enclosing it (read by its nodes, its own subgraphs included,
// or returned, and not defined in it); `depth` is g's nesting, checked against kMaxSubgraphDepth.
std::set<std::string> names_read_from_outside(const ::onnx::GraphProto& g, int depth);

}  // namespace ingot::onnx_import
