// The ONNX graph walk: opsets, inputs, initializers, nodes in order, outputs; values known while
// importing are folded (a node whose inputs are all known runs on the reference interpreter, and
// its results stay tensors until a run-time value reads them). Subgraphs are walked the same way
// (import_subgraph.cpp): a name one does not define is looked up in the graphs around it.
#include <atomic>
#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>

#include "ingot/compile.h"
#include "ingot/error.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "compiler/frontend.h"
#include "frontends/onnx/importer.h"
#include "frontends/onnx/tensor_proto.h"

namespace ingot::onnx_import {
namespace {

// The newest opset the conversions were written against (ONNX 1.22); the official node tests
// of every opset up to it judge them (scripts/onnx_conformance.sh).
constexpr int64_t kMaxOpset = 27;

std::string describe(const ::onnx::NodeProto& node) {
  return "ONNX node '" + (node.name().empty() ? std::string("(unnamed)") : node.name()) + "' (" + node.op_type() + ")";
}

const ::onnx::AttributeProto* find_attr(const ::onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// Ops never folded while importing: their results are not functions of their inputs, or (If)
// their conversion folds what it can itself (the branch a known condition takes, node by node).
bool foldable(const std::string& op_type) {
  return op_type.rfind("Random", 0) != 0 && op_type != "Dropout" && op_type != "Multinomial" && op_type != "Bernoulli" &&
         op_type != "If";
}

// The element type of a node's result where the rule is simple (what Div and Pow need to tell
// integer operands from floating ones): comparisons give bool, Cast its target, index results
// int64, the rest their first operand's type.
std::optional<DType> result_dtype(const ::onnx::NodeProto& node, const NodeContext& ctx) {
  static const std::set<std::string> boolean = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
                                                "And", "Or", "Xor", "IsNaN", "IsInf"};
  static const std::set<std::string> index = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero"};
  if (boolean.count(node.op_type())) return DType::Bool;
  if (index.count(node.op_type())) return DType::Int64;
  if (node.op_type() == "Cast") {
    try {
      return dtype_of(static_cast<int>(ctx.attr_int("to", 0)), "Cast");
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  if (node.op_type() == "Where" || node.op_type() == "CastLike") return ctx.dtype(1);
  return ctx.dtype(0);
}

}  // namespace

ShapeTemplate template_of(const ::onnx::TypeProto_Tensor& t) {
  ShapeTemplate s;
  for (const auto& d : t.shape().dim()) {
    if (d.has_dim_value()) {
      s.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      try {
        s.emplace_back(d.dim_param());
      } catch (const Error&) {
        s.emplace_back(nullptr);  // a dim_param that is no symbol name ingot accepts: unknown
      }
    } else {
      s.emplace_back(nullptr);
    }
  }
  return s;
}

std::map<std::string, Conversion>& conversion_table() {
  static std::map<std::string, Conversion> table;
  return table;
}

void register_conversion(const std::string& op_type, Conversion c) { conversion_table()[op_type] = std::move(c); }
bool has_conversion(const std::string& op_type) { return conversion_table().count(op_type) != 0; }

int64_t NodeContext::axis(int64_t axis, int64_t rank, bool allow_rank) const {
  const int64_t limit = allow_rank ? rank + 1 : rank;
  if (axis < -rank || axis >= limit)
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

const std::map<std::string, Conversion>& conversions() {
  static const bool registered = [] {
    register_elementwise_conversions();
    register_nn_conversions();
    register_shape_conversions();
    register_pad_conversions();
    register_loss_conversions();
    register_resize_conversions();
    register_attention_conversions();
    register_norm_conversions();
    register_rnn_conversions();
    register_einsum_conversion();
    register_control_flow_conversions();
    // Last: the elementwise ops whose definition names an ONNX operator (ElementwiseForms::onnx)
    // that no converter above writes with more care (Div and Pow of integers, variadic Max/Min).
    register_catalogue_conversions();
    return true;
  }();
  (void)registered;
  return conversion_table();
}

// ---------------------------------------------------------------- NodeContext

int NodeContext::num_inputs() const { return node.input_size(); }
bool NodeContext::has_input(int i) const { return i < node.input_size() && !node.input(i).empty(); }

Connection NodeContext::in(int i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  return importer.connection(model, node.input(i));
}

std::optional<Tensor> NodeContext::known(int i) const {
  if (!has_input(i)) return std::nullopt;
  return importer.known(node.input(i));
}

Tensor NodeContext::constant_input(int i, const char* what) const {
  if (!has_input(i)) fail(std::string("its ") + what + " (input " + std::to_string(i) + ") is missing");
  std::optional<Tensor> t = known(i);
  if (!t)
    fail(std::string("its ") + what + " ('" + node.input(i) +
         "') is only known at run time; ingot needs it while importing (a value computed from sizes that "
         "are not fixed)");
  return *t;
}

std::optional<Shape> NodeContext::static_shape(int i) const {
  if (!has_input(i)) return std::nullopt;
  return importer.static_shape(node.input(i));
}

std::optional<DType> NodeContext::dtype(int i) const {
  if (!has_input(i)) return std::nullopt;
  return importer.dtype(node.input(i));
}

bool NodeContext::has_attr(const std::string& name) const { return find_attr(node, name) != nullptr; }

int64_t NodeContext::attr_int(const std::string& name, int64_t def) const {
  const auto* a = find_attr(node, name);
  if (a == nullptr) return def;
  if (a->type() != ::onnx::AttributeProto::INT) fail("attribute '" + name + "' is not an int");
  return a->i();
}

float NodeContext::attr_float(const std::string& name, float def) const {
  const auto* a = find_attr(node, name);
  if (a == nullptr) return def;
  if (a->type() != ::onnx::AttributeProto::FLOAT) fail("attribute '" + name + "' is not a float");
  return a->f();
}

std::string NodeContext::attr_string(const std::string& name, const std::string& def) const {
  const auto* a = find_attr(node, name);
  if (a == nullptr) return def;
  if (a->type() != ::onnx::AttributeProto::STRING) fail("attribute '" + name + "' is not a string");
  return a->s();
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name, std::vector<int64_t> def) const {
  const auto* a = find_attr(node, name);
  if (a == nullptr) return def;
  if (a->type() != ::onnx::AttributeProto::INTS) fail("attribute '" + name + "' is not a list of ints");
  return {a->ints().begin(), a->ints().end()};
}

const ::onnx::GraphProto& NodeContext::attr_graph(const std::string& name) const {
  const auto* a = find_attr(node, name);
  if (a == nullptr) fail("its subgraph attribute '" + name + "' is missing");
  if (a->type() != ::onnx::AttributeProto::GRAPH || !a->has_g()) fail("attribute '" + name + "' is not a graph");
  return a->g();
}

Tensor NodeContext::attr_tensor(const std::string& name) const {
  const auto* a = find_attr(node, name);
  if (a == nullptr || a->type() != ::onnx::AttributeProto::TENSOR) fail("attribute '" + name + "' is not a tensor");
  return to_tensor(a->t(), importer.external_dir());
}

std::vector<Connection> NodeContext::op_n(const std::string& op, const std::vector<IOKey>& ins, int outputs,
                                          Attrs attrs) const {
  std::vector<std::string> in_names, out_names;
  Links links;
  for (size_t i = 0; i < ins.size(); ++i) {
    in_names.push_back("in" + std::to_string(i));
    links.emplace_back(in_names.back(), ins[i]);
  }
  for (int i = 0; i < outputs; ++i) out_names.push_back("out" + std::to_string(i));
  const Model block = Model::primitive(op, in_names, out_names, std::move(attrs));
  std::map<std::string, Connection> handles = model.add(block, links);
  std::vector<Connection> out;
  for (const std::string& n : out_names) out.push_back(handles.at(n));
  return out;
}

Connection NodeContext::op(const std::string& op, const std::vector<IOKey>& ins, Attrs attrs) const {
  return op_n(op, ins, 1, std::move(attrs))[0];
}

Connection NodeContext::scalar(double v, DType dt) const {
  static std::atomic<int> serial{0};
  return model.constant("onnx_scalar_" + std::to_string(serial++), Tensor::full(dt, {}, v));
}

void NodeContext::fail(const std::string& why) const { INGOT_FAIL(describe(node), ": ", why); }

std::string NodeContext::where() const { return describe(node); }

// ---------------------------------------------------------------- Importer

Importer::Importer(const ::onnx::ModelProto& proto, std::string external_dir, std::map<std::string, Tensor> constants,
                   bool trainable)
    : proto_(proto), external_dir_(std::move(external_dir)), fixed_inputs_(std::move(constants)), trainable_(trainable) {}

bool Importer::defines(const std::string& name) const {
  return wires_.count(name) || known_.count(name) || (enclosing_ != nullptr && enclosing_->defines(name));
}

bool Importer::trainable(const std::string& name) const {
  if (trainable_names_.count(name)) return true;
  if (wires_.count(name) || known_.count(name)) return false;
  return enclosing_ != nullptr && enclosing_->trainable(name);
}

std::optional<Tensor> Importer::known(const std::string& name) const {
  if (auto it = known_.find(name); it != known_.end()) return it->second;
  if (wires_.count(name) || enclosing_ == nullptr) return std::nullopt;
  return enclosing_->known(name);
}

std::optional<Shape> Importer::static_shape(const std::string& name) const {
  if (auto it = known_.find(name); it != known_.end()) return it->second.shape();
  if (auto it = shapes_.find(name); it != shapes_.end()) return it->second;
  if (!wires_.count(name)) return enclosing_ != nullptr ? enclosing_->static_shape(name) : std::nullopt;
  if (!inferred_.count(name)) {
    // ingot's shape inference over the model so far, once for every wire not asked about yet
    // (ONNX's Shape of a Transpose's result, say, in a file without value_info). An ONNX If or
    // Loop decides at run time, so the model so far may hold run-time control flow.
    std::vector<std::string> names;
    std::vector<int> wires;
    for (const auto& [n, c] : wires_)
      if (!shapes_.count(n) && inferred_.insert(n).second) {
        names.push_back(n);
        wires.push_back(c.wire_index());
      }
    CompileOptions options;
    options.dynamic_control_flow = true;
    const std::vector<std::optional<Shape>> found = static_wire_shapes(model_, wires, options);
    for (size_t i = 0; i < names.size(); ++i)
      if (found[i]) inferred_shapes_[names[i]] = *found[i];
  }
  if (auto it = inferred_shapes_.find(name); it != inferred_shapes_.end()) return it->second;
  return std::nullopt;
}

std::optional<DType> Importer::dtype(const std::string& name) const {
  if (auto it = known_.find(name); it != known_.end()) return it->second.dtype();
  if (auto it = dtypes_.find(name); it != dtypes_.end()) return it->second;
  if (wires_.count(name) || enclosing_ == nullptr) return std::nullopt;
  return enclosing_->dtype(name);
}

Connection Importer::connection(Model& m, const std::string& name) {
  if (&m == &model_) {
    if (auto it = wires_.find(name); it != wires_.end()) return it->second;
    if (auto it = known_.find(name); it != known_.end()) {
      // A constant (or trainable parameter) takes its ONNX name, unless a graph output has that
      // name (then it is a copy).
      const std::string terminal = output_names_.count(name) ? name + "_initializer" : name;
      if (trainable_names_.count(name)) {
        const Tensor& v = it->second;
        wires_[name] = m.parameter(terminal, Init::zeros(), ShapeTemplate(v.shape().begin(), v.shape().end()));
        m.set_types({{terminal, v.dtype()}});
        params_[terminal] = v;
        return wires_[name];
      }
      return wires_[name] = m.constant(terminal, it->second);
    }
    if (enclosing_ != nullptr && enclosing_->defines(name)) {
      if (!enclosing_->trainable(name))
        if (const std::optional<Tensor> v = enclosing_->known(name)) return wires_[name] = m.constant(name, *v);
      // A value of an enclosing graph known only at run time (or trained): a free input of this
      // subgraph under its name, which the control-flow block links to the enclosing value.
      std::optional<ShapeTemplate> shape;
      if (const std::optional<Shape> s = enclosing_->static_shape(name)) shape = ShapeTemplate(s->begin(), s->end());
      captured_.push_back(name);
      // Its element type and size stay known here (dtype() stops at this graph's wires, and the
      // conversions of Div, Pow and the like need the type).
      const std::optional<DType> dt = enclosing_->dtype(name);
      if (dt) dtypes_[name] = *dt;
      if (const std::optional<Shape> s = enclosing_->static_shape(name)) shapes_[name] = *s;
      return wires_[name] = m.input(name, shape, dt);
    }
    INGOT_FAIL("ONNX graph: value '", name, "' is read before any node produces it (the graph is not in order)");
  }
  // A model of one node being folded: every input is known.
  const std::optional<Tensor> v = known(name);
  INGOT_CHECK(v.has_value(), "ONNX import: folding reads an unknown value '", name, "'");
  return m.constant(name, *v);
}

void Importer::fold(const ::onnx::NodeProto& node, const Conversion& c) {
  Model t;
  NodeContext ctx{*this, t, node, opset_, {}, {}};
  const std::vector<Connection> outs = c(ctx);
  bool any = false;
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty() || ctx.known_outputs.count(i)) continue;
    INGOT_CHECK(static_cast<size_t>(i) < outs.size(), describe(node), ": the conversion gives no output ", i);
    const Connection& o = outs[static_cast<size_t>(i)];
    t.expose(o.name().empty() ? o : apply("identity", o), "o" + std::to_string(i));
    any = true;
  }
  TensorMap r;
  CompileOptions options;
  options.dynamic_control_flow = true;  // a folded loop's body may branch on its iteration number
  if (any) r = compile(t, ReferenceBackend(), options).evaluate({});
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    auto k = ctx.known_outputs.find(i);
    known_[node.output(i)] = k != ctx.known_outputs.end() ? k->second : r.at("o" + std::to_string(i));
  }
}

void Importer::convert(const ::onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    INGOT_FAIL(describe(node), ": operators of domain '", node.domain(), "' are not supported (only the default ONNX domain)");
  const auto& table = conversions();
  auto it = table.find(node.op_type());
  if (it == table.end()) INGOT_FAIL(describe(node), ": ingot has no conversion for ONNX operator ", node.op_type());
  // What the node reads: its inputs, and the values of this graph its subgraphs read by name.
  std::set<std::string> reads(node.input().begin(), node.input().end());
  for (const auto& a : node.attribute())
    if (a.type() == ::onnx::AttributeProto::GRAPH && a.has_g()) {
      const std::set<std::string> inner = names_read_from_outside(a.g(), depth_ + 1);
      reads.insert(inner.begin(), inner.end());
    }
  reads.erase("");
  bool all_known = foldable(node.op_type());
  // (A trainable initializer is a value of the model, not of the import: nothing folds it away.)
  for (const std::string& in : reads)
    if (!known(in) || trainable(in)) all_known = false;
  try {
    if (all_known) {
      fold(node, it->second);
      return;
    }
    NodeContext ctx{*this, model_, node, opset_, {}, {}};
    const std::vector<Connection> outs = it->second(ctx);
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (auto k = ctx.known_outputs.find(i); k != ctx.known_outputs.end()) {
        known_[node.output(i)] = k->second;
        continue;
      }
      INGOT_CHECK(static_cast<size_t>(i) < outs.size(), describe(node), ": output ", i, " ('", node.output(i),
                  "') is not supported by ingot's conversion");
      wires_[node.output(i)] = outs[static_cast<size_t>(i)];
      if (auto t = ctx.output_dtypes.find(i); t != ctx.output_dtypes.end()) dtypes_[node.output(i)] = t->second;
      if (!dtypes_.count(node.output(i)))
        if (const std::optional<DType> t = result_dtype(node, ctx)) dtypes_[node.output(i)] = *t;
    }
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("ONNX", 0) == 0) throw;
    INGOT_FAIL(describe(node), ": ", what);
  }
}

void Importer::read_value_info(const ::onnx::GraphProto& g) {
  // Static sizes and element types of intermediate values, where the file records them
  // (value_info). ONNX's own shape inference (libonnx) is not run: on a hostile file it divides
  // by zero (found by fuzz_onnx), and an importer of downloaded files must not crash.
  for (const auto& vi : g.value_info()) {
    if (!vi.type().has_tensor_type()) continue;
    try {
      dtypes_[vi.name()] = dtype_of(vi.type().tensor_type().elem_type(), vi.name());
    } catch (const Error&) {
    }
    if (!vi.type().tensor_type().has_shape()) continue;
    Shape s;
    bool fixed = true;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      fixed = fixed && d.has_dim_value() && d.dim_value() >= 0;
      s.push_back(d.dim_value());
    }
    if (fixed) shapes_[vi.name()] = s;
  }
}

void Importer::read_initializers(const ::onnx::GraphProto& g, bool trainable) {
  for (const auto& init : g.initializer()) {
    INGOT_CHECK(!init.name().empty(), "ONNX graph: an initializer has no name");
    known_[init.name()] = to_tensor(init, external_dir_);
    if (trainable && is_floating(known_[init.name()].dtype())) trainable_names_.insert(init.name());
  }
}

Connection Importer::output_wire(const std::string& name) {
  Connection c = connection(model_, name);
  // An output that is also an input, an initializer or another output gets a copy of its own.
  if (!c.name().empty()) c = apply("identity", c);
  return c;
}

Model Importer::run() {
  for (const auto& o : proto_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
  INGOT_CHECK(opset_ > 0, "ONNX model: no opset of the default domain is imported");
  INGOT_CHECK(opset_ >= 7 && opset_ <= kMaxOpset, "ONNX model: opset ", opset_, " is outside the opsets ingot imports (7 to ",
              kMaxOpset, ")");
  INGOT_CHECK(proto_.has_graph(), "ONNX model: no graph");
  const ::onnx::GraphProto& g = proto_.graph();

  read_value_info(g);
  for (const auto& out : g.output()) output_names_.insert(out.name());
  read_initializers(g, trainable_);
  for (const auto& [name, value] : fixed_inputs_) {
    bool is_input = false;
    for (const auto& input : g.input()) is_input = is_input || input.name() == name;
    INGOT_CHECK(is_input, "ONNX import: a constant was given for '", name, "', which is not an input of the graph");
    known_[name] = value;
  }
  for (const auto& input : g.input()) {
    if (known_.count(input.name())) continue;  // an initializer listed as an input (IR < 4): a constant
    INGOT_CHECK(input.type().has_tensor_type(), "ONNX graph input '", input.name(), "' is not a tensor");
    const auto& tt = input.type().tensor_type();
    const DType dt = dtype_of(tt.elem_type(), "ONNX graph input '" + input.name() + "'");
    dtypes_[input.name()] = dt;
    std::optional<ShapeTemplate> shape;
    if (tt.has_shape()) {
      shape = template_of(tt);
      Shape s;
      bool fixed = true;
      for (const auto& d : tt.shape().dim()) {
        fixed = fixed && d.has_dim_value();
        s.push_back(d.dim_value());
      }
      if (fixed) shapes_[input.name()] = s;
    }
    wires_[input.name()] = model_.input(input.name(), shape, dt);
  }
  // Every operator ingot cannot convert, its subgraphs' included, listed at once with its node
  // count (rather than the first one met), so a user sees the whole gap of a model in one error.
  {
    std::map<std::string, int> missing;
    count_missing_conversions(g, 0, missing);
    if (!missing.empty()) {
      std::string list;
      for (const auto& [op, n] : missing)
        list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(n) + (n == 1 ? " node)" : " nodes)");
      INGOT_FAIL("ONNX model: ingot has no conversion for ONNX operator", missing.size() == 1 ? " " : "s ", list,
                 " (operators of other domains than the default are not supported)");
    }
  }
  for (const auto& node : g.node()) convert(node);
  INGOT_CHECK(g.output_size() > 0, "ONNX graph: no outputs");
  for (const auto& input : g.input())
    for (const auto& out : g.output())
      INGOT_CHECK(input.name() != out.name() || known_.count(input.name()), "ONNX graph output '", out.name(),
                  "' is also a graph input: ingot's inputs and outputs need distinct names");
  std::vector<Connection> outs;
  for (const auto& out : g.output()) outs.push_back(output_wire(out.name()));
  // The first graph input and output are the canonical ones (what `+=` links), which ingot
  // calls "input" and "output" while they have no name of their own.
  model_.set_cout(outs[0]);
  for (const auto& input : g.input())
    if (wires_.count(input.name())) {
      model_.set_cin(wires_.at(input.name()));
      break;
    }
  for (int i = 0; i < g.output_size(); ++i) model_.expose(outs[static_cast<size_t>(i)], g.output(i).name());
  return model_;
}

}  // namespace ingot::onnx_import

namespace ingot::onnx {

bool available() { return true; }

namespace {

TrainableModel import_bytes(std::string_view bytes, const LoadOptions& options, bool trainable) {
  ::onnx::ModelProto proto;
  INGOT_CHECK(bytes.size() < (size_t{1} << 31), "ONNX model: ", bytes.size(),
              " bytes is over protobuf's 2 GB limit; store the weights as external data");
  INGOT_CHECK(proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
              "ONNX model: the bytes are not a valid ONNX ModelProto (protobuf parse failed)");
  onnx_import::Importer importer(proto, options.external_data_dir, options.constants, trainable);
  TrainableModel r;
  r.model = importer.run();
  r.params = importer.params();
  return r;
}

TrainableModel import_file(const std::string& path, const LoadOptions& options, bool trainable) {
  std::ifstream in(path, std::ios::binary);
  INGOT_CHECK(in.good(), "ONNX model: cannot open ", path);
  std::ostringstream s;
  s << in.rdbuf();
  LoadOptions o = options;
  if (o.external_data_dir.empty()) o.external_data_dir = std::filesystem::path(path).parent_path().string();
  try {
    return import_bytes(s.str(), o, trainable);
  } catch (const Error& e) {
    INGOT_FAIL(path, ": ", e.what());
  }
}

}  // namespace

Model load_bytes(std::string_view bytes, const LoadOptions& options) { return import_bytes(bytes, options, false).model; }

TrainableModel load_trainable_bytes(std::string_view bytes, const LoadOptions& options) {
  return import_bytes(bytes, options, true);
}

TrainableModel load_trainable(const std::string& path, const LoadOptions& options) {
  return import_file(path, options, true);
}

Tensor load_tensor(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INGOT_CHECK(in.good(), "ONNX tensor: cannot open ", path);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  ::onnx::TensorProto t;
  INGOT_CHECK(bytes.size() < (size_t{1} << 31) && t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
              "ONNX tensor: ", path, " is not a valid TensorProto (protobuf parse failed)");
  return onnx_import::to_tensor(t, std::filesystem::path(path).parent_path().string());
}

Model load(const std::string& path, const LoadOptions& options) { return import_file(path, options, false).model; }

}  // namespace ingot::onnx
