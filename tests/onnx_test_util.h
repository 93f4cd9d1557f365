// Writing small ONNX models in tests with the protobuf API (the same generated classes the
// importer reads), so each import test states its graph beside its expectations.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "frontends/onnx/exporter.h"
#include "ingot/tensor.h"
#include "onnx/onnx_pb.h"

namespace ingot::onnx_test {

using DimSpec = std::variant<int64_t, std::string>;

// The exporter's own conversions (src/frontends/onnx/exporter.h).
using onnx_export::onnx_type;
using onnx_export::tensor_proto;

// The graph-building calls of a model's graph and of a subgraph (an If's branch, a Loop's or
// Scan's body) alike.
struct OnnxGraph {
  ::onnx::GraphProto* g;

  // A typed input; `dims` empty with `rank_known` false leaves its shape out.
  void input(const std::string& name, DType t, const std::vector<DimSpec>& dims, bool rank_known = true) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx_type(t));
    if (!rank_known) return;
    auto* s = tt->mutable_shape();
    for (const DimSpec& d : dims) {
      auto* dim = s->add_dim();
      if (std::holds_alternative<int64_t>(d)) dim->set_dim_value(std::get<int64_t>(d));
      else dim->set_dim_param(std::get<std::string>(d));
    }
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  void initializer(const std::string& name, const Tensor& t) { *g->add_initializer() = tensor_proto(name, t); }

  ::onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& ins,
                          const std::vector<std::string>& outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g->node_size()));
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return *n;
  }
};

// The protos live in bases constructed before OnnxGraph, which points into them.
template <class Proto>
struct ProtoHolder {
  Proto proto;
};

// A subgraph of its own, set as a node's attribute with attr(node, "body", sub.proto).
struct OnnxSubgraph : ProtoHolder<::onnx::GraphProto>, OnnxGraph {
  explicit OnnxSubgraph(const std::string& name) : OnnxGraph{&proto} { proto.set_name(name); }
  OnnxSubgraph(const OnnxSubgraph&) = delete;
};

struct OnnxModel : ProtoHolder<::onnx::ModelProto>, OnnxGraph {
  explicit OnnxModel(int64_t opset = 17) : OnnxGraph{proto.mutable_graph()} {
    proto.set_ir_version(8);
    proto.set_producer_name("ingot tests");
    auto* o = proto.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
  }
  OnnxModel(const OnnxModel&) = delete;
  ::onnx::GraphProto& graph() { return *proto.mutable_graph(); }
  std::string bytes() const { return proto.SerializeAsString(); }
};

inline void attr(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr(::onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void attr(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

inline void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
inline void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a->add_strings(x);
}

inline void attr(::onnx::NodeProto& n, const std::string& name, const ::onnx::GraphProto& g) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

}  // namespace ingot::onnx_test
