// ONNX export: the graph walk. Leaves become graph inputs (data) or initializers (parameters,
// with the values given, and constants), every node becomes ONNX nodes through its op's emitter
// (export_ops.cpp; control flow's subgraphs are walked the same way, export_control_flow.cpp),
// and each graph output an Identity under the output's name, so outputs that are leaves or other
// outputs need no special case. The file is written atomically.
#include "frontends/onnx/exporter.h"

#include <cstring>

#include "ingot/compile.h"
#include "ingot/error.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "runtime/atomic_file.h"

namespace ingot::onnx_export {

int onnx_type(DType t) {
  using TP = ::onnx::TensorProto;
  switch (t) {
    case DType::Float32: return TP::FLOAT;
    case DType::Float64: return TP::DOUBLE;
    case DType::Float16: return TP::FLOAT16;
    case DType::BFloat16: return TP::BFLOAT16;
    case DType::Int64: return TP::INT64;
    case DType::Int32: return TP::INT32;
    case DType::Int16: return TP::INT16;
    case DType::Int8: return TP::INT8;
    case DType::UInt8: return TP::UINT8;
    case DType::Bool: return TP::BOOL;
  }
  INGOT_FAIL("ONNX export: dtype ", dtype_name(t), " has no ONNX element type");
}

::onnx::TensorProto tensor_proto(const std::string& name, const Tensor& t) {
  ::onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx_type(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  const Tensor c = t.contiguous();
  p.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), c.nbytes()));
  return p;
}

void set_attr(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_attr(::onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void set_attr(::onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void set_attr(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}
void set_attr(::onnx::NodeProto& n, const std::string& name, const ::onnx::TensorProto& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::TENSOR);
  *a->mutable_t() = v;
}
void set_attr(::onnx::NodeProto& n, const std::string& name, const ::onnx::GraphProto& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = v;
}

void set_type(::onnx::ValueInfoProto& vi, const Value& v) {
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(v.dtype));
  if (!v.shape_known) return;
  auto* s = tt->mutable_shape();
  for (const SymDim& d : v.shape) {
    auto* dim = s->add_dim();
    if (d.known()) dim->set_dim_value(d.value);
    else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
  }
}

// ---------------------------------------------------------------- EmitContext

std::string EmitContext::in(int i) const { return ex.name_of(node.inputs.at(static_cast<size_t>(i))); }
DType EmitContext::in_dtype(int i) const { return g.value(node.inputs.at(static_cast<size_t>(i))).dtype; }
std::string EmitContext::out(int i) const { return ex.name_of(node.outputs.at(static_cast<size_t>(i))); }
DType EmitContext::out_dtype(int i) const { return g.value(node.outputs.at(static_cast<size_t>(i))).dtype; }

std::string EmitContext::in_as(int i, DType t) const {
  if (in_dtype(i) == t) return in(i);
  return add("Cast", {in(i)}, {}, [&](::onnx::NodeProto& n) { set_attr(n, "to", int64_t{onnx_type(t)}); });
}

std::string EmitContext::add(const std::string& op_type, const std::vector<std::string>& inputs,
                             std::vector<std::string> outputs,
                             const std::function<void(::onnx::NodeProto&)>& set_attrs) const {
  if (outputs.empty()) outputs.push_back(ex.fresh(node.op));
  ::onnx::NodeProto* n = ex.graph().add_node();
  n->set_op_type(op_type);
  n->set_name(ex.fresh("n_" + node.op));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  if (set_attrs) set_attrs(*n);
  return outputs[0];
}

std::string EmitContext::constant(const Tensor& t) const {
  const std::string name = ex.fresh("c");
  *ex.graph().add_initializer() = tensor_proto(name, t);
  return name;
}

std::string EmitContext::ints(const std::vector<int64_t>& v) const {
  return constant(Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}));
}

std::string EmitContext::scalar(double v, DType t) const { return constant(Tensor::full(t, {}, v)); }

void EmitContext::fail(const std::string& why) const {
  INGOT_FAIL("ONNX export: node '", node.op, "'", node.scope.empty() ? "" : " (in " + node.scope + ")", ": ", why);
}

// ---------------------------------------------------------------- Exporter

Exporter::Exporter(const Graph& g, const TensorMap& params) : g_(g), params_(params) {}

std::string Exporter::fresh(const std::string& hint) {
  const std::string base = hint.empty() ? "v" : hint;
  std::string name = base;
  while (taken_.count(name)) name = base + "_" + std::to_string(taken_[base]++);
  taken_[name] += 0;
  return name;
}

void Exporter::write_body() {
  // (Not a reference to the frame: an emitter's write_subgraph pushes frames.)
  const Graph& g = *frames_.back().g;
  for (ValueId id : g.leaves())
    if (g.value(id).kind == ValueKind::Constant)
      *graph().add_initializer() = tensor_proto(name_of(id), g.value(id).constant.astype(g.value(id).dtype));
  const auto& table = emitters();
  for (const Node& n : g.nodes()) {
    auto it = table.find(n.op);
    if (it == table.end())
      INGOT_FAIL("ONNX export: op '", n.op, "'", n.scope.empty() ? "" : " (in " + n.scope + ")",
                 " has no ONNX form in ingot's exporter");
    EmitContext c{*this, g, n};
    it->second(c);
  }
  // The inferred sizes and types of intermediate values, as ONNX's shape inference would record
  // them (importers, ingot's among them, read sizes from here).
  for (const Node& n : g.nodes())
    for (ValueId o : n.outputs) {
      auto* vi = graph().add_value_info();
      vi->set_name(name_of(o));
      set_type(*vi, g.value(o));
    }
}

std::vector<std::string> Exporter::write_subgraph(const Graph& sub, const std::vector<std::string>& formals,
                                                  ::onnx::GraphProto& into) {
  Frame f{&sub, std::vector<std::string>(sub.values().size()), &into};
  const std::vector<ValueId> inputs = sub.leaves_of(ValueKind::Input);
  INGOT_CHECK(inputs.size() == formals.size(), "ONNX export: a subgraph takes ", inputs.size(), " inputs, given ",
              formals.size());
  for (size_t k = 0; k < inputs.size(); ++k) f.names[static_cast<size_t>(inputs[k])] = formals[k];
  for (ValueId v : sub.leaves()) {
    INGOT_CHECK(sub.value(v).kind != ValueKind::Parameter, "ONNX export: a subgraph holds the parameter '",
                sub.value(v).name, "'; control-flow bodies take parameters as operands");
    if (sub.value(v).kind == ValueKind::Constant) f.names[static_cast<size_t>(v)] = fresh(sub.value(v).name);
  }
  for (const Node& n : sub.nodes())
    for (ValueId o : n.outputs) f.names[static_cast<size_t>(o)] = fresh(n.op);
  frames_.push_back(std::move(f));
  write_body();
  std::vector<std::string> outs;
  for (const auto& [name, v] : sub.outputs()) outs.push_back(name_of(v));
  frames_.pop_back();
  return outs;
}

void Exporter::declare_outputs(const Graph& sub, const std::vector<std::string>& values, ::onnx::GraphProto& into) {
  for (size_t k = 0; k < values.size(); ++k) {
    const std::string name = fresh("out");
    ::onnx::NodeProto* id = into.add_node();
    id->set_op_type("Identity");
    id->set_name(fresh("n_output"));
    id->add_input(values[k]);
    id->add_output(name);
    auto* vi = into.add_output();
    vi->set_name(name);
    set_type(*vi, sub.value(sub.outputs()[k].second));
  }
}

::onnx::ModelProto Exporter::run() {
  model_.set_ir_version(8);
  model_.set_producer_name("ingot");
  auto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  model_.mutable_graph()->set_name("ingot");

  // Names: inputs, parameters and outputs keep theirs (they are the model's interface);
  // constants keep theirs where free (passes may give two the same name), the rest are fresh.
  std::map<std::string, ValueId> interface;
  for (ValueId v : g_.leaves()) {
    const std::string& n = g_.value(v).name;
    if (g_.value(v).kind == ValueKind::Constant) continue;
    INGOT_CHECK(!n.empty(), "ONNX export: a graph input or parameter has no name");
    INGOT_CHECK(interface.emplace(n, v).second, "ONNX export: two inputs or parameters are named '", n, "'");
  }
  for (const auto& [n, v] : g_.outputs()) {
    auto [it, fresh_name] = interface.emplace(n, v);
    INGOT_CHECK(fresh_name, "ONNX export: the output '", n, "' has the name of ",
                g_.value(it->second).producer < 0 ? "an input, parameter or constant" : "another output",
                "; ONNX needs distinct names");
  }
  for (const auto& [n, v] : interface) taken_[n] = 0;
  Frame top{&g_, std::vector<std::string>(g_.values().size()), model_.mutable_graph()};
  for (ValueId v : g_.leaves())
    top.names[static_cast<size_t>(v)] = g_.value(v).kind == ValueKind::Constant ? fresh(g_.value(v).name) : g_.value(v).name;
  for (const Node& n : g_.nodes())
    for (ValueId o : n.outputs) top.names[static_cast<size_t>(o)] = fresh(n.op);
  frames_.push_back(std::move(top));

  // Inputs, and parameters with their values from params_ (constants are write_body's).
  std::vector<std::string> missing;
  for (ValueId id : g_.leaves()) {
    const Value& v = g_.value(id);
    if (v.kind == ValueKind::Input) {
      auto* vi = graph().add_input();
      vi->set_name(v.name);
      set_type(*vi, v);
    } else if (v.kind == ValueKind::Parameter) {
      auto it = params_.find(v.name);
      if (it == params_.end()) {
        missing.push_back(v.name);
        continue;
      }
      INGOT_CHECK(it->second.dtype() == v.dtype, "ONNX export: parameter '", v.name, "' is ", dtype_name(it->second.dtype()),
                  ", the model's is ", dtype_name(v.dtype));
      if (v.shape_known && is_static(v.shape))
        INGOT_CHECK(it->second.shape() == to_shape(v.shape), "ONNX export: parameter '", v.name, "' has shape ",
                    to_string(it->second.shape()), ", the model's is ", to_string(v.shape));
      *graph().add_initializer() = tensor_proto(v.name, it->second);
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    INGOT_FAIL("ONNX export: no values for the parameters ", list,
               " (pass them: the parameters become the file's initializers)");
  }
  write_body();
  for (const auto& [name, v] : g_.outputs()) {
    ::onnx::NodeProto* id = graph().add_node();
    id->set_op_type("Identity");
    id->set_name(fresh("n_output"));
    id->add_input(name_of(v));
    id->add_output(name);
    auto* vi = graph().add_output();
    vi->set_name(name);
    set_type(*vi, g_.value(v));
  }
  frames_.pop_back();
  return model_;
}

}  // namespace ingot::onnx_export

namespace ingot::onnx {

namespace {

std::string serialize(const ::onnx::ModelProto& m) {
  INGOT_CHECK(m.ByteSizeLong() < (size_t{1} << 31), "ONNX export: the model is ", m.ByteSizeLong(),
              " bytes, over protobuf's 2 GB limit (external data is not written yet)");
  return m.SerializeAsString();
}

Graph graph_of(const Model& model, const SaveOptions& options) {
  CompileOptions c;
  c.shapes = options.shapes;
  c.types = options.types;
  c.inference = true;
  // An If or a loop that decides at run time is what ONNX's If and Loop are.
  c.dynamic_control_flow = true;
  if (!options.optimized) return build_graph(model, c);
  return compile(model, ReferenceBackend(), c).graph();
}

}  // namespace

std::string save_bytes(const Model& model, const SaveOptions& options) {
  const Graph g = graph_of(model, options);
  return serialize(onnx_export::Exporter(g, options.params).run());
}

void save(const Model& model, const std::string& path, const SaveOptions& options) {
  write_file_atomic(path, save_bytes(model, options));
}

std::string save_bytes(const PhysicalModel& model, const TensorMap& params) {
  return serialize(onnx_export::Exporter(model.graph(), params).run());
}

void save_tensor(const std::string& path, const Tensor& t) {
  write_file_atomic(path, onnx_export::tensor_proto("", t).SerializeAsString());
}

void save(const PhysicalModel& model, const std::string& path, const TensorMap& params) {
  write_file_atomic(path, save_bytes(model, params));
}

}  // namespace ingot::onnx
