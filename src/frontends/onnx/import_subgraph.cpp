// ONNX subgraphs (If's branches, Loop's and Scan's bodies) imported by the importer that reads
// the main graph: as a Model of their own whose free inputs are the names they read from the
// graphs around them (ONNX's implicit capture), or converted into the enclosing graph (the branch
// an If takes whatever the data). Nesting is bounded (kMaxSubgraphDepth): a file cannot exhaust
// the stack.
#include "frontends/onnx/importer.h"
#include "frontends/onnx/tensor_proto.h"
#include "ingot/error.h"

namespace ingot::onnx_import {

void count_missing_conversions(const ::onnx::GraphProto& g, int depth, std::map<std::string, int>& missing) {
  INGOT_CHECK(depth <= kMaxSubgraphDepth, "ONNX model: subgraphs nest more than ", kMaxSubgraphDepth, " deep");
  const auto& table = conversions();
  for (const auto& node : g.node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") ++missing["domain '" + node.domain() + "': " + node.op_type()];
    else if (!table.count(node.op_type())) ++missing[node.op_type()];
    for (const auto& a : node.attribute()) {
      if (a.type() == ::onnx::AttributeProto::GRAPH) count_missing_conversions(a.g(), depth + 1, missing);
      if (a.type() == ::onnx::AttributeProto::GRAPHS)
        for (const auto& sub : a.graphs()) count_missing_conversions(sub, depth + 1, missing);
    }
  }
}

std::set<std::string> names_read_from_outside(const ::onnx::GraphProto& g, int depth) {
  INGOT_CHECK(depth <= kMaxSubgraphDepth, "ONNX model: subgraphs nest more than ", kMaxSubgraphDepth, " deep");
  std::set<std::string> defined, read;
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& init : g.initializer()) defined.insert(init.name());
  for (const auto& node : g.node()) {
    defined.insert(node.output().begin(), node.output().end());
    read.insert(node.input().begin(), node.input().end());
    for (const auto& a : node.attribute())
      if (a.type() == ::onnx::AttributeProto::GRAPH) {
        const std::set<std::string> inner = names_read_from_outside(a.g(), depth + 1);
        read.insert(inner.begin(), inner.end());
      }
  }
  for (const auto& out : g.output()) read.insert(out.name());
  std::set<std::string> outside;
  for (const std::string& n : read)
    if (!n.empty() && !defined.count(n)) outside.insert(n);
  return outside;
}

Importer::Importer(Importer& enclosing, const std::string& where)
    : proto_(enclosing.proto_),
      external_dir_(enclosing.external_dir_),
      opset_(enclosing.opset_),
      enclosing_(&enclosing),
      depth_(enclosing.depth_ + 1) {
  INGOT_CHECK(depth_ <= kMaxSubgraphDepth, where, ": subgraphs nest more than ", kMaxSubgraphDepth, " deep");
}

Subgraph Importer::import_subgraph(const ::onnx::GraphProto& g, const std::string& owner,
                                   const std::vector<FormalInput>& formals, const std::vector<std::string>& outputs) {
  const std::string where = owner + " '" + g.name() + "'";
  INGOT_CHECK(static_cast<size_t>(g.input_size()) == formals.size() &&
                  static_cast<size_t>(g.output_size()) == outputs.size(),
              "ONNX import: ", where, " has ", g.input_size(), " inputs and ", g.output_size(), " outputs, not ",
              formals.size(), " and ", outputs.size());
  Importer sub(*this, where);
  try {
    sub.read_value_info(g);
    sub.read_initializers(g, false);  // a subgraph's initializers are constants, trained or not
    for (size_t i = 0; i < formals.size(); ++i) {
      const ::onnx::ValueInfoProto& in = g.input(static_cast<int>(i));
      const FormalInput& f = formals[i];
      INGOT_CHECK(!in.name().empty(), "input ", i, " has no name");
      INGOT_CHECK(!in.has_type() || in.type().has_tensor_type(), "its input '", in.name(),
                  "' is not a tensor (sequences and optionals are not supported)");
      // What the enclosing graph knows of the value first, the subgraph's declaration second.
      std::optional<DType> dt = f.dtype;
      std::optional<ShapeTemplate> shape = f.shape;
      if (in.type().has_tensor_type()) {
        const auto& tt = in.type().tensor_type();
        if (!dt && tt.elem_type() != 0) dt = dtype_of(tt.elem_type(), "input '" + in.name() + "'");
        if (!shape && tt.has_shape()) shape = template_of(tt);
      }
      if (dt) sub.dtypes_[in.name()] = *dt;
      if (f.value) {
        sub.known_[in.name()] = *f.value;
        continue;
      }
      if (shape) {
        Shape s;
        bool fixed = true;
        for (const Dim& d : *shape) {
          fixed = fixed && d.kind() == Dim::Kind::Fixed;
          s.push_back(d.value());
        }
        if (fixed) sub.shapes_[in.name()] = s;
      }
      sub.wires_[in.name()] = sub.model_.input(f.terminal, shape, dt);
    }
    for (const auto& node : g.node()) sub.convert(node);
    Subgraph r;
    std::vector<Connection> outs;
    for (int i = 0; i < g.output_size(); ++i) {
      const std::string& name = g.output(i).name();
      r.output_values.push_back(sub.known(name));
      r.output_dtypes.push_back(sub.dtype(name));
      r.output_shapes.push_back(sub.static_shape(name));
      outs.push_back(sub.output_wire(name));
      sub.model_.expose(outs.back(), outputs[static_cast<size_t>(i)]);
    }
    if (!outs.empty()) sub.model_.set_cout(outs[0]);
    if (!formals.empty() && g.input_size() > 0 && sub.wires_.count(g.input(0).name()))
      sub.model_.set_cin(sub.wires_.at(g.input(0).name()));
    r.model = std::move(sub.model_);
    r.captured = sub.captured_;
    return r;
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(where) != std::string::npos) throw;
    INGOT_FAIL(where, ": ", what);
  }
}

void Importer::inline_subgraph(const ::onnx::GraphProto& g, const std::string& owner) {
  const std::string where = owner + " '" + g.name() + "'";
  // ONNX names are unique across a model's graphs; one the branch would define twice is a
  // malformed file, refused rather than silently shadowed.
  auto define = [&](const std::string& name) {
    INGOT_CHECK(name.empty() || !defines(name), where, " defines '", name,
                "', a name the enclosing graph has already (ONNX names are unique across subgraphs)");
  };
  for (const auto& init : g.initializer()) define(init.name());
  read_initializers(g, false);
  read_value_info(g);
  for (const auto& node : g.node()) {
    for (const std::string& out : node.output()) define(out);
    convert(node);
  }
}

}  // namespace ingot::onnx_import
