// Logical models, Mithril-style: blocks with named terminals, composed into models.
//
//   Model m;
//   m |= Linear(64)({{"input", "x"}, {"output", "hidden"}});  // connect by terminal name
//   m += Relu();                                               // chain: last output -> input
//   m += Linear(10)({{"output", IOKey("logits").expose()}});
//
// A model holds *wires*. Every block terminal is linked to one wire of the model it was added
// to; linking two terminals to the same name shares the wire. A wire no block produces is an
// input of the model (data or parameter). A nested model's outputs (its output terminals) are
// the wires it exposes, its canonical output and its named wires no block reads. Compiled, a
// model's outputs are the wires it exposes, or its canonical output when it exposes none; other
// wires nothing reads are eliminated (CompileOptions::outputs keeps any wire as an extra output).
// A model is itself a block: add it to another model and its inputs and outputs are terminals.
//
// Functional composition: arithmetic on Connections adds the matching primitive blocks.
//
//   Model m;
//   Connection x = m.input("x"), w = m.parameter("w", Init::normal(0.02));
//   m.expose(matmul(x, w).sum({-1}) * 2.0, "y");
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ingot/dtype.h"
#include "ingot/graph.h"
#include "ingot/shape.h"
#include "ingot/tensor.h"

namespace ingot {

class Model;
class Connection;
namespace detail {
struct ModelImpl;
}

// How randomize_params fills a parameter. fan_in is read from the parameter's inferred shape:
// dimension `fan_in_axis` for matrices, or the product of all but `fan_in_axis` dims for conv
// weights (FanInMode::AllButOne).
struct Init {
  enum class Kind { Zeros, Ones, Constant, Uniform, Normal, FanInUniform, FanInAllButFirst };
  Kind kind = Kind::FanInUniform;
  double a = 0, b = 0;  // Constant: a; Uniform: [a, b); Normal: mean a, std b
  int fan_in_axis = 0;

  static Init zeros() { return {Kind::Zeros}; }
  static Init ones() { return {Kind::Ones}; }
  static Init constant(double v) { return {Kind::Constant, v}; }
  static Init uniform(double lo, double hi) { return {Kind::Uniform, lo, hi}; }
  static Init normal(double stddev, double mean = 0) { return {Kind::Normal, mean, stddev}; }
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = shape[axis] (Linear: [in, out], axis 0).
  static Init fan_in(int axis = 0) { return {Kind::FanInUniform, 0, 0, axis}; }
  // Same bound with fan_in = product of shape[1:] (conv weights [Cout, Cin/g, kh, kw]).
  static Init fan_in_all_but_first() { return {Kind::FanInAllButFirst}; }

  std::string str() const;  // "fan_in(0)", "normal(0, 0.02)", ... (also the JSON form)
  static Init parse(const std::string& s);
};

// What a terminal is linked to when a block is added: a wire name, a Connection of the model,
// or a constant. Extra settings constrain or expose the wire.
class IOKey {
 public:
  IOKey() = default;
  IOKey(const char* name) : name_(name) {}         // NOLINT(google-explicit-constructor)
  IOKey(std::string name) : name_(std::move(name)) {}  // NOLINT
  IOKey(const Connection& c);                       // NOLINT
  IOKey(Tensor value) : value_(std::move(value)) {}  // NOLINT
  IOKey(double scalar);                             // NOLINT: a weak-typed scalar constant

  IOKey& shape(ShapeTemplate s) { shape_ = std::move(s); return *this; }
  IOKey& dtype(DType t) { dtype_ = t; return *this; }
  IOKey& value(Tensor v) { value_ = std::move(v); return *this; }
  IOKey& expose(bool on = true) { expose_ = on; return *this; }

 private:
  friend class Model;
  friend struct detail::ModelImpl;
  std::string name_;
  const detail::ModelImpl* owner_ = nullptr;  // the model a Connection came from
  int wire_ = -1;
  std::optional<ShapeTemplate> shape_;
  std::optional<DType> dtype_;
  std::optional<Tensor> value_;
  bool weak_ = false;
  bool expose_ = false;
};

using Links = std::vector<std::pair<std::string, IOKey>>;

// A block together with the links it is added with: `Linear(10)({{"input", "x"}})`.
struct BlockCall;

// A handle to one wire of a model. Arithmetic on handles of the same model adds primitives.
class Connection {
 public:
  Connection() = default;
  const std::string& name() const;  // empty for unnamed wires
  bool valid() const { return impl_ != nullptr; }
  Model& model() const;
  int wire_index() const { return wire_; }  // its wire among its model's (for the compiler's front end)

  Connection T() const;  // reverse all axes
  Connection transpose(std::vector<int64_t> perm) const;
  Connection reshape(std::vector<int64_t> shape) const;  // -1 inferred, 0 copies
  Connection sum(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  Connection mean(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  Connection max(std::vector<int64_t> axes = {}, bool keepdims = false) const;
  Connection cast(DType t) const;
  // c[i] selects index i of axis 0 (dropping it); slice keeps the axis.
  Connection operator[](int64_t index) const;
  Connection slice(int64_t axis, int64_t start, int64_t end, int64_t step = 1) const;

 private:
  friend class Model;
  friend class IOKey;
  Connection(detail::ModelImpl* impl, int wire) : impl_(impl), wire_(wire) {}
  detail::ModelImpl* impl_ = nullptr;  // stable while the Model that owns it is moved
  int wire_ = -1;
};

Connection operator+(const Connection& a, const Connection& b);
Connection operator-(const Connection& a, const Connection& b);
Connection operator*(const Connection& a, const Connection& b);
Connection operator/(const Connection& a, const Connection& b);
Connection operator+(const Connection& a, double b);
Connection operator-(const Connection& a, double b);
Connection operator*(const Connection& a, double b);
Connection operator/(const Connection& a, double b);
Connection operator+(double a, const Connection& b);
Connection operator-(double a, const Connection& b);
Connection operator*(double a, const Connection& b);
Connection operator/(double a, const Connection& b);
Connection operator-(const Connection& a);
Connection matmul(const Connection& a, const Connection& b);  // the `@` of Python
Connection pow(const Connection& a, const Connection& b);     // the `**` of Python
Connection pow(const Connection& a, double b);
// Any unary op of the catalogue by name: apply("exp", x), apply("gelu", x, {{"approximate", "tanh"}}).
Connection apply(const std::string& op, const Connection& x, Attrs attrs = {});

// A terminal of a block, as listed by Model::terminals().
struct TerminalInfo {
  std::string name;
  enum class Role { Input, Parameter, Output } role;
  std::optional<ShapeTemplate> shape;
  std::optional<DType> dtype;
};

class Model {
 public:
  Model();  // an empty composite model
  // A primitive block: one op of the catalogue with named input and output terminals.
  static Model primitive(std::string op, std::vector<std::string> inputs,
                         std::vector<std::string> outputs, Attrs attrs = {},
                         std::string type_name = "");

  Model(const Model& other);  // deep copy: blocks are values
  Model& operator=(const Model& other);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // --- composition ---
  Model& operator|=(const BlockCall& call);  // add, linking only what the call names
  Model& operator|=(const Model& block);
  Model& operator+=(const BlockCall& call);  // add, linking its input to the current output
  Model& operator+=(const Model& block);
  // Adds a block and returns handles to its terminals' wires, keyed by terminal name.
  std::map<std::string, Connection> add(const Model& block, const Links& links = {},
                                        const std::string& instance_name = "");
  BlockCall operator()(Links links) const;  // link terminals when adding this block

  // --- wires ---
  Connection input(const std::string& name, std::optional<ShapeTemplate> shape = std::nullopt,
                   std::optional<DType> dtype = std::nullopt);
  Connection parameter(const std::string& name, Init init = Init::fan_in(),
                       std::optional<ShapeTemplate> shape = std::nullopt);
  Connection constant(const std::string& name, Tensor value);
  Connection connection(const std::string& name);  // the named wire (created if absent)
  Connection cin();   // canonical input (created on an empty model)
  Connection cout();  // canonical output
  void expose(const Connection& c, const std::string& name);  // name it and make it an output
  void set_cin(const Connection& c);
  void set_cout(const Connection& c);

  // --- settings (by terminal name of this model) ---
  Model& set_shapes(const std::map<std::string, ShapeTemplate>& shapes);
  Model& set_types(const std::map<std::string, DType>& types);
  Model& set_values(const std::map<std::string, Tensor>& values);
  Model& set_name(std::string instance_name);  // name of this block inside its parent
  // Named attributes of the block. The one there is: "backend", a key of compile's backend_map
  // (Python: ml.compile(model, default, backend_map={key: backend})) whose backend compiles this
  // block's nodes; the innermost marked block wins. An unknown name or an empty value is an error.
  Model& set_attribute(const std::string& name, const std::string& value);
  std::optional<std::string> attribute(const std::string& name) const;  // nullopt when not set
  static std::vector<std::string> attribute_names();                    // {"backend"}

  // --- introspection ---
  bool is_primitive() const;
  const std::string& op() const;         // primitive only
  const std::string& type_name() const;  // "Linear", "Model", or the op name
  const Attrs& attrs() const;
  std::vector<TerminalInfo> terminals() const;
  std::vector<std::string> input_keys() const;
  std::vector<std::string> output_keys() const;
  // Blocks, shapes and parameter counts as a table; `shapes` as for compile.
  std::string summary(const std::map<std::string, ShapeTemplate>& shapes = {}) const;

  // --- persistence (structure and settings; parameters live in PhysicalModel files) ---
  std::string to_json() const;
  static Model from_json(const std::string& json);
  void save(const std::string& path) const;  // atomic write
  static Model load(const std::string& path);

  const detail::ModelImpl& impl() const { return *impl_; }
  detail::ModelImpl& impl() { return *impl_; }

 private:
  friend class Connection;
  friend class IOKey;
  std::unique_ptr<detail::ModelImpl> impl_;
};

struct BlockCall {
  Model block;
  Links links;
};

}  // namespace ingot
