#include "ingot/model.h"

#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "ingot/error.h"
#include "models/model_impl.h"

namespace ingot {

using detail::ModelImpl;
using detail::Wire;
using detail::WireRole;

// ---------------------------------------------------------------- Init

std::string Init::str() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::Zeros: return "zeros";
    case Kind::Ones: return "ones";
    case Kind::Constant: os << "constant(" << a << ")"; break;
    case Kind::Uniform: os << "uniform(" << a << ", " << b << ")"; break;
    case Kind::Normal: os << "normal(" << a << ", " << b << ")"; break;
    case Kind::FanInUniform: os << "fan_in(" << fan_in_axis << ")"; break;
    case Kind::FanInAllButFirst: return "fan_in_all_but_first";
  }
  return os.str();
}

Init Init::parse(const std::string& s) {
  if (s == "zeros") return zeros();
  if (s == "ones") return ones();
  if (s == "fan_in_all_but_first") return fan_in_all_but_first();
  auto open = s.find('(');
  if (open != std::string::npos && s.back() == ')') {
    std::string head = s.substr(0, open);
    std::string args = s.substr(open + 1, s.size() - open - 2);
    double a = 0, b = 0;
    char comma = 0;
    std::istringstream is(args);
    is >> a;
    bool two = static_cast<bool>(is >> comma >> b) && comma == ',';
    if (head == "constant") return constant(a);
    if (head == "uniform" && two) return uniform(a, b);
    if (head == "normal" && two) return {Kind::Normal, a, b};
    if (head == "fan_in") return fan_in(static_cast<int>(a));
  }
  INGOT_FAIL("Unknown initializer '", s,
             "': expected zeros, ones, constant(v), uniform(lo, hi), normal(mean, std), "
             "fan_in(axis) or fan_in_all_but_first");
}

// ---------------------------------------------------------------- ModelImpl

namespace detail {

namespace {
int islower_(int c) { return std::islower(c); }
int isupper_(int c) { return std::isupper(c); }
int isdigit_(int c) { return std::isdigit(c); }
}  // namespace

std::string to_snake_case(const std::string& type_name) {
  std::string out;
  for (size_t i = 0; i < type_name.size(); ++i) {
    char c = type_name[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      // A word starts at an upper-case letter after a lower-case one or a digit ("BatchNorm"),
      // or at the last capital of an acronym followed by lower case ("MSELoss" -> mse_loss).
      auto at = [&](size_t k, int (*pred)(int)) {
        return k < type_name.size() && pred(static_cast<unsigned char>(type_name[k]));
      };
      bool boundary = i > 0 && (at(i - 1, islower_) || at(i - 1, isdigit_) ||
                                (at(i - 1, isupper_) && at(i + 1, islower_)));
      if (boundary) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<int> ModelImpl::producer_of_wire() const {
  std::vector<int> producer(wires.size(), -1);
  for (size_t b = 0; b < blocks.size(); ++b)
    for (size_t t = 0; t < blocks[b].wires.size(); ++t)
      if (blocks[b].is_output[t]) producer[blocks[b].wires[t]] = static_cast<int>(b);
  return producer;
}

std::vector<bool> ModelImpl::consumed_wires() const {
  std::vector<bool> used(wires.size(), false);
  for (const Block& b : blocks)
    for (size_t t = 0; t < b.wires.size(); ++t)
      if (!b.is_output[t]) used[b.wires[t]] = true;
  return used;
}

std::string ModelImpl::terminal_name(int w) const {
  const Wire& wire = wires[w];
  if (!wire.name.empty()) return wire.name;
  if (w == cin) return "input";
  if (w == cout) return "output";
  return wire.auto_name;
}

std::vector<int> ModelImpl::input_wires() const {
  std::vector<int> out;
  std::vector<int> producer = producer_of_wire();
  for (size_t w = 0; w < wires.size(); ++w)
    if (producer[w] < 0) out.push_back(static_cast<int>(w));
  return out;
}

std::vector<int> ModelImpl::output_wires() const {
  std::vector<int> out;
  std::vector<int> producer = producer_of_wire();
  std::vector<bool> used = consumed_wires();
  for (size_t w = 0; w < wires.size(); ++w) {
    if (producer[w] < 0) continue;
    const Wire& wire = wires[w];
    if (wire.exposed || static_cast<int>(w) == cout || (!wire.name.empty() && !used[w]))
      out.push_back(static_cast<int>(w));
  }
  return out;
}

std::vector<int> ModelImpl::compiled_output_wires() const {
  std::vector<int> out;
  std::vector<int> producer = producer_of_wire();
  for (size_t w = 0; w < wires.size(); ++w)
    if (producer[w] >= 0 && wires[w].exposed) out.push_back(static_cast<int>(w));
  if (out.empty() && cout >= 0 && producer[static_cast<size_t>(cout)] >= 0) out.push_back(cout);
  return out;
}

int ModelImpl::find_wire(const std::string& terminal) const {
  for (size_t w = 0; w < wires.size(); ++w)
    if (terminal_name(static_cast<int>(w)) == terminal) return static_cast<int>(w);
  return -1;
}

int ModelImpl::new_wire(std::string name, std::string auto_name) {
  Wire w;
  w.name = std::move(name);
  w.auto_name = std::move(auto_name);
  wires.push_back(std::move(w));
  return static_cast<int>(wires.size()) - 1;
}

int ModelImpl::canonical_input_index() const {
  if (primitive()) return input_names.empty() ? -1 : 0;
  if (cin < 0) return -1;
  std::vector<int> ins = input_wires();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == cin) return static_cast<int>(i);
  return -1;
}

std::string ModelImpl::terminal_linked_by(const std::string& link, const std::vector<TerminalInfo>& terms) const {
  for (const TerminalInfo& t : terms)
    if (t.name == link) return link;
  // "input" and "output" name the canonical terminals of a block that has none named so.
  const int canonical = link == "input" ? canonical_input_index() : link == "output" ? canonical_output_index() : -1;
  return canonical >= 0 ? terms[static_cast<size_t>(canonical)].name : "";
}

int ModelImpl::canonical_output_index() const {
  if (primitive()) return output_names.empty() ? -1 : static_cast<int>(input_names.size());
  if (cout < 0) return -1;
  std::vector<int> ins = input_wires(), outs = output_wires();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i] == cout) return static_cast<int>(ins.size() + i);
  return -1;
}

}  // namespace detail

// ---------------------------------------------------------------- IOKey

IOKey::IOKey(const Connection& c) : owner_(c.impl_), wire_(c.wire_) {
  INGOT_CHECK(c.valid(), "IOKey from an invalid (default-constructed) Connection");
}

IOKey::IOKey(double scalar) : value_(Tensor::scalar<float>(static_cast<float>(scalar))), weak_(true) {}

// ---------------------------------------------------------------- Model

Model::Model() : impl_(std::make_unique<ModelImpl>()) { impl_->self = this; }

Model Model::primitive(std::string op, std::vector<std::string> inputs,
                       std::vector<std::string> outputs, Attrs attrs, std::string type_name) {
  INGOT_CHECK(!op.empty(), "Model::primitive: empty op name");
  std::set<std::string> seen;
  for (const auto& n : inputs) INGOT_CHECK(seen.insert(n).second, "Primitive '", op, "': terminal '", n, "' named twice");
  for (const auto& n : outputs) INGOT_CHECK(seen.insert(n).second, "Primitive '", op, "': terminal '", n, "' named twice");
  Model m;
  m.impl_->op = op;
  m.impl_->input_names = std::move(inputs);
  m.impl_->output_names = std::move(outputs);
  m.impl_->attrs = std::move(attrs);
  m.impl_->type_name = type_name.empty() ? op : std::move(type_name);
  return m;
}

namespace {
void copy_impl(const ModelImpl& from, ModelImpl& to) {
  to.op = from.op;
  to.input_names = from.input_names;
  to.output_names = from.output_names;
  to.attrs = from.attrs;
  to.control = from.control;
  to.default_links = from.default_links;
  to.type_name = from.type_name;
  to.instance_name = from.instance_name;
  to.backend = from.backend;
  to.wires = from.wires;
  to.cin = from.cin;
  to.cout = from.cout;
  to.blocks.clear();
  for (const detail::Block& b : from.blocks) {
    detail::Block c;
    c.model = std::make_unique<Model>(*b.model);
    c.instance = b.instance;
    c.terminals = b.terminals;
    c.wires = b.wires;
    c.is_output = b.is_output;
    to.blocks.push_back(std::move(c));
  }
}
}  // namespace

Model::Model(const Model& other) : impl_(std::make_unique<ModelImpl>()) {
  copy_impl(*other.impl_, *impl_);
  impl_->self = this;
}
Model& Model::operator=(const Model& other) {
  if (this != &other) {
    auto fresh = std::make_unique<ModelImpl>();
    copy_impl(*other.impl_, *fresh);
    impl_ = std::move(fresh);
    impl_->self = this;
  }
  return *this;
}
Model::Model(Model&& other) noexcept : impl_(std::move(other.impl_)) {
  if (impl_) impl_->self = this;
}
Model& Model::operator=(Model&& other) noexcept {
  impl_ = std::move(other.impl_);
  if (impl_) impl_->self = this;
  return *this;
}
Model::~Model() = default;

bool Model::is_primitive() const { return impl_->primitive(); }
const std::string& Model::op() const { return impl_->op; }
const std::string& Model::type_name() const { return impl_->type_name; }
const Attrs& Model::attrs() const { return impl_->attrs; }

std::vector<TerminalInfo> Model::terminals() const {
  std::vector<TerminalInfo> out;
  const ModelImpl& m = *impl_;
  if (m.primitive()) {
    for (const auto& n : m.input_names) {
      const bool lifted = m.control && m.control->is_lifted(n);  // a parameter of a control-flow body
      out.push_back({n, lifted ? TerminalInfo::Role::Parameter : TerminalInfo::Role::Input, {}, {}});
    }
    for (const auto& n : m.output_names) out.push_back({n, TerminalInfo::Role::Output, {}, {}});
    return out;
  }
  auto info = [&](int w, TerminalInfo::Role role) {
    const Wire& wire = m.wires[w];
    TerminalInfo t{m.terminal_name(w), role, {}, wire.dtype};
    if (!wire.shapes.empty()) t.shape = wire.shapes.front();
    return t;
  };
  for (int w : m.input_wires())
    out.push_back(info(w, m.wires[w].role == WireRole::Parameter ? TerminalInfo::Role::Parameter
                                                                 : TerminalInfo::Role::Input));
  for (int w : m.output_wires()) out.push_back(info(w, TerminalInfo::Role::Output));
  return out;
}

std::vector<std::string> Model::input_keys() const {
  std::vector<std::string> out;
  for (const auto& t : terminals())
    if (t.role != TerminalInfo::Role::Output) out.push_back(t.name);
  return out;
}

std::vector<std::string> Model::output_keys() const {
  std::vector<std::string> out;
  for (const auto& t : terminals())
    if (t.role == TerminalInfo::Role::Output) out.push_back(t.name);
  return out;
}

BlockCall Model::operator()(Links links) const { return BlockCall{*this, std::move(links)}; }

namespace {

std::string terminal_list(const std::vector<TerminalInfo>& ts) {
  std::string s;
  for (const auto& t : ts) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

}  // namespace

int ModelImpl::resolve_link(const IOKey& key, const std::string& auto_name) {
  ModelImpl& m = *this;
  int w = -1;
  if (key.wire_ >= 0) {
    INGOT_CHECK(key.owner_ == &m, "Connection '",
                static_cast<const ModelImpl*>(key.owner_)->terminal_name(key.wire_),
                "' belongs to another model; link blocks only to wires of the model they are added to");
    w = key.wire_;
  } else if (!key.name_.empty()) {
    w = m.find_wire(key.name_);
    if (w < 0) w = m.new_wire(key.name_);
  } else {
    w = m.new_wire("", auto_name);
  }
  Wire& wire = m.wires[w];
  if (key.shape_) wire.shapes.push_back(*key.shape_);
  if (key.dtype_) {
    INGOT_CHECK(!wire.dtype || *wire.dtype == *key.dtype_, "Type mismatch at '", m.terminal_name(w),
                "': set to ", dtype_name(*wire.dtype), " and to ", dtype_name(*key.dtype_));
    wire.dtype = key.dtype_;
  }
  if (key.value_) {
    wire.value = key.value_;
    wire.weak = key.weak_;
  }
  if (key.expose_) wire.exposed = true;
  return w;
}

std::map<std::string, Connection> Model::add(const Model& block, const Links& links,
                                             const std::string& instance_name) {
  ModelImpl& m = *impl_;
  INGOT_CHECK(!m.primitive(), "Cannot add blocks to primitive '", m.op, "'");
  std::vector<TerminalInfo> terms = block.terminals();

  // Instance name: requested, else "<type>_<k>" counting blocks of that type here.
  std::string instance = !instance_name.empty() ? instance_name : block.impl_->instance_name;
  if (instance.empty()) {
    std::string base = detail::to_snake_case(block.type_name());
    int k = 0;
    for (const detail::Block& b : m.blocks)
      if (b.model->type_name() == block.type_name()) ++k;
    instance = base + "_" + std::to_string(k);
  }
  for (const detail::Block& b : m.blocks)
    INGOT_CHECK(b.instance != instance, "A block named '", instance, "' is already in this model");

  Links given;
  for (const auto& [terminal, key] : links) {
    const std::string name = block.impl_->terminal_linked_by(terminal, terms);
    INGOT_CHECK(!name.empty(), block.type_name(), " has no terminal '", terminal, "' (terminals: ",
                terminal_list(terms), ")");
    given.emplace_back(name, key);
  }
  for (const auto& [terminal, key] : block.impl_->default_links) {
    bool linked = false;
    for (const auto& [t, k] : given) linked = linked || t == terminal;
    if (!linked) given.emplace_back(terminal, key);
  }

  std::vector<int> producer = m.producer_of_wire();
  detail::Block b;
  b.model = std::make_unique<Model>(block);
  b.instance = instance;
  std::map<std::string, Connection> handles;
  for (const auto& t : terms) {
    const IOKey* key = nullptr;
    for (const auto& [terminal, k] : given)
      if (terminal == t.name && key == nullptr) key = &k;  // the caller's link, before a default one
    int w = key ? m.resolve_link(*key, instance + "." + t.name)
                : m.new_wire("", instance + "." + t.name);
    bool out = t.role == TerminalInfo::Role::Output;
    if (out) {
      if (static_cast<size_t>(w) < producer.size() && producer[w] >= 0)
        INGOT_FAIL("Wire '", m.terminal_name(w), "' is already produced by block '",
                   m.blocks[producer[w]].instance, "'; ", block.type_name(), "'s output '",
                   t.name, "' cannot produce it too");
      INGOT_CHECK(!m.wires[w].value, "Wire '", m.terminal_name(w),
                  "' holds a constant and cannot be produced by a block");
    } else if (t.role == TerminalInfo::Role::Parameter &&
               m.wires[w].role == WireRole::Unspecified) {
      m.wires[w].role = WireRole::Parameter;
    }
    b.terminals.push_back(t.name);
    b.wires.push_back(w);
    b.is_output.push_back(out);
    handles.emplace(t.name, Connection(impl_.get(), w));
  }
  int ci = block.impl_->canonical_input_index(), co = block.impl_->canonical_output_index();
  if (m.blocks.empty() && m.cin < 0 && ci >= 0) m.cin = b.wires[ci];
  if (co >= 0) m.cout = b.wires[co];
  m.blocks.push_back(std::move(b));
  return handles;
}

Model& Model::operator|=(const BlockCall& call) {
  add(call.block, call.links);
  return *this;
}
Model& Model::operator|=(const Model& block) { return *this |= BlockCall{block, {}}; }

Model& Model::operator+=(const BlockCall& call) {
  if (impl_->blocks.empty() || impl_->cout < 0) return *this |= call;
  int ci = call.block.impl_->canonical_input_index();
  INGOT_CHECK(ci >= 0, "Cannot chain ", call.block.type_name(), " with +=: it has no input");
  std::string cin_name = call.block.terminals()[ci].name;
  Links links = call.links;
  bool linked = false;
  const std::vector<TerminalInfo> terms = call.block.terminals();
  for (const auto& [t, k] : links) linked = linked || call.block.impl_->terminal_linked_by(t, terms) == cin_name;
  if (!linked) links.emplace_back(cin_name, IOKey(Connection(impl_.get(), impl_->cout)));
  add(call.block, links);
  return *this;
}
Model& Model::operator+=(const Model& block) { return *this += BlockCall{block, {}}; }

// ---------------------------------------------------------------- wires

namespace {
int named_wire(ModelImpl& m, const std::string& name) {
  INGOT_CHECK(!name.empty(), "Terminal names must not be empty");
  int w = m.find_wire(name);
  return w >= 0 ? w : m.new_wire(name);
}
}  // namespace

Connection Model::input(const std::string& name, std::optional<ShapeTemplate> shape,
                        std::optional<DType> dtype) {
  int w = named_wire(*impl_, name);
  Wire& wire = impl_->wires[w];
  wire.role = WireRole::Input;
  if (shape) wire.shapes.push_back(*shape);
  if (dtype) wire.dtype = dtype;
  if (impl_->cin < 0) impl_->cin = w;
  return Connection(impl_.get(), w);
}

Connection Model::parameter(const std::string& name, Init init, std::optional<ShapeTemplate> shape) {
  int w = named_wire(*impl_, name);
  Wire& wire = impl_->wires[w];
  wire.role = WireRole::Parameter;
  wire.init = init;
  if (shape) wire.shapes.push_back(*shape);
  return Connection(impl_.get(), w);
}

Connection Model::constant(const std::string& name, Tensor value) {
  int w = named_wire(*impl_, name);
  impl_->wires[w].value = std::move(value);
  return Connection(impl_.get(), w);
}

Connection Model::connection(const std::string& name) {
  return Connection(impl_.get(), named_wire(*impl_, name));
}

Connection Model::cin() {
  if (impl_->cin < 0) impl_->cin = impl_->new_wire();
  return Connection(impl_.get(), impl_->cin);
}

Connection Model::cout() {
  INGOT_CHECK(impl_->cout >= 0, "Model has no canonical output yet (add a block first)");
  return Connection(impl_.get(), impl_->cout);
}

void Model::expose(const Connection& c, const std::string& name) {
  INGOT_CHECK(c.impl_ == impl_.get(), "expose: the connection belongs to another model");
  Wire& wire = impl_->wires[c.wire_];
  if (!name.empty() && wire.name != name) {
    INGOT_CHECK(wire.name.empty(), "expose: wire '", wire.name, "' already has a name; cannot rename it to '", name, "'");
    // The wire may already answer to `name` as the canonical input or output ("input", "output").
    const int found = impl_->find_wire(name);
    INGOT_CHECK(found < 0 || found == c.wire_, "expose: model already has a terminal '", name, "'");
    wire.name = name;
  }
  wire.exposed = true;
}

void Model::set_cin(const Connection& c) {
  INGOT_CHECK(c.impl_ == impl_.get(), "set_cin: the connection belongs to another model");
  impl_->cin = c.wire_;
}
void Model::set_cout(const Connection& c) {
  INGOT_CHECK(c.impl_ == impl_.get(), "set_cout: the connection belongs to another model");
  impl_->cout = c.wire_;
}

namespace {
int terminal_wire(const ModelImpl& m, const std::string& key, const char* what) {
  int w = m.find_wire(key);
  if (w >= 0) return w;
  std::string names;
  for (size_t i = 0; i < m.wires.size(); ++i)
    names += (names.empty() ? "" : ", ") + m.terminal_name(static_cast<int>(i));
  INGOT_FAIL(what, ": model has no terminal '", key, "' (terminals: ", names, ")");
}
}  // namespace

Model& Model::set_shapes(const std::map<std::string, ShapeTemplate>& shapes) {
  INGOT_CHECK(!impl_->primitive(), "set_shapes on primitive '", impl_->op, "'; wrap it in a Model");
  for (const auto& [k, s] : shapes) impl_->wires[terminal_wire(*impl_, k, "set_shapes")].shapes.push_back(s);
  return *this;
}

Model& Model::set_types(const std::map<std::string, DType>& types) {
  INGOT_CHECK(!impl_->primitive(), "set_types on primitive '", impl_->op, "'; wrap it in a Model");
  for (const auto& [k, t] : types) impl_->wires[terminal_wire(*impl_, k, "set_types")].dtype = t;
  return *this;
}

Model& Model::set_values(const std::map<std::string, Tensor>& values) {
  INGOT_CHECK(!impl_->primitive(), "set_values on primitive '", impl_->op, "'; wrap it in a Model");
  std::vector<int> producer = impl_->producer_of_wire();
  for (const auto& [k, v] : values) {
    int w = terminal_wire(*impl_, k, "set_values");
    INGOT_CHECK(producer[w] < 0, "set_values: '", k, "' is produced by block '",
                impl_->blocks[producer[w]].instance, "', only inputs can hold values");
    impl_->wires[w].value = v;
    impl_->wires[w].weak = false;
  }
  return *this;
}

Model& Model::set_name(std::string instance_name) {
  impl_->instance_name = std::move(instance_name);
  return *this;
}

std::vector<std::string> Model::attribute_names() { return {"backend"}; }

namespace {
void check_attribute_name(const std::string& name) {
  INGOT_CHECK(name == "backend", "Unknown model attribute '", name, "' (valid attributes: backend)");
}
}  // namespace

Model& Model::set_attribute(const std::string& name, const std::string& value) {
  check_attribute_name(name);
  INGOT_CHECK(!value.empty(), "Model attribute 'backend' needs a non-empty key of compile's backend_map");
  impl_->backend = value;
  return *this;
}

std::optional<std::string> Model::attribute(const std::string& name) const {
  check_attribute_name(name);
  if (impl_->backend.empty()) return std::nullopt;
  return impl_->backend;
}

// ---------------------------------------------------------------- Connection

Model& Connection::model() const {
  INGOT_CHECK(valid(), "Connection is not attached to a model");
  return *impl_->self;
}

const std::string& Connection::name() const {
  INGOT_CHECK(valid(), "Connection is not attached to a model");
  return impl_->wires[wire_].name;
}

namespace {

Connection add_primitive(const Connection& x, const std::string& op,
                         const std::vector<std::pair<std::string, IOKey>>& inputs,
                         Attrs attrs = {}) {
  std::vector<std::string> names;
  for (const auto& [n, k] : inputs) names.push_back(n);
  Model block = Model::primitive(op, names, {"output"}, std::move(attrs));
  Links links(inputs.begin(), inputs.end());
  auto handles = x.model().add(block, links);
  return handles.at("output");
}

Connection binary(const std::string& op, const Connection& a, const IOKey& b) {
  return add_primitive(a, op, {{"left", IOKey(a)}, {"right", b}});
}

Connection binary_rev(const std::string& op, const IOKey& a, const Connection& b) {
  return add_primitive(b, op, {{"left", a}, {"right", IOKey(b)}});
}

void same_model(const Connection& a, const Connection& b, const char* op) {
  INGOT_CHECK(&a.model() == &b.model(), "Operator ", op, " on connections of two different models");
}

}  // namespace

Connection operator+(const Connection& a, const Connection& b) { same_model(a, b, "+"); return binary("add", a, b); }
Connection operator-(const Connection& a, const Connection& b) { same_model(a, b, "-"); return binary("sub", a, b); }
Connection operator*(const Connection& a, const Connection& b) { same_model(a, b, "*"); return binary("mul", a, b); }
Connection operator/(const Connection& a, const Connection& b) { same_model(a, b, "/"); return binary("div", a, b); }
Connection operator+(const Connection& a, double b) { return binary("add", a, IOKey(b)); }
Connection operator-(const Connection& a, double b) { return binary("sub", a, IOKey(b)); }
Connection operator*(const Connection& a, double b) { return binary("mul", a, IOKey(b)); }
Connection operator/(const Connection& a, double b) { return binary("div", a, IOKey(b)); }
Connection operator+(double a, const Connection& b) { return binary_rev("add", IOKey(a), b); }
Connection operator-(double a, const Connection& b) { return binary_rev("sub", IOKey(a), b); }
Connection operator*(double a, const Connection& b) { return binary_rev("mul", IOKey(a), b); }
Connection operator/(double a, const Connection& b) { return binary_rev("div", IOKey(a), b); }
Connection operator-(const Connection& a) { return apply("neg", a); }
Connection matmul(const Connection& a, const Connection& b) { same_model(a, b, "matmul"); return binary("matmul", a, b); }
Connection pow(const Connection& a, const Connection& b) { same_model(a, b, "pow"); return binary("pow", a, b); }
Connection pow(const Connection& a, double b) { return binary("pow", a, IOKey(b)); }

Connection apply(const std::string& op, const Connection& x, Attrs attrs) {
  return add_primitive(x, op, {{"input", IOKey(x)}}, std::move(attrs));
}

Connection Connection::T() const { return apply("transpose", *this); }
Connection Connection::transpose(std::vector<int64_t> perm) const {
  return apply("transpose", *this, {{"perm", std::move(perm)}});
}
Connection Connection::reshape(std::vector<int64_t> shape) const {
  return apply("reshape", *this, {{"shape", std::move(shape)}});
}
Connection Connection::sum(std::vector<int64_t> axes, bool keepdims) const {
  return apply("sum", *this, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}
Connection Connection::mean(std::vector<int64_t> axes, bool keepdims) const {
  return apply("mean", *this, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}
Connection Connection::max(std::vector<int64_t> axes, bool keepdims) const {
  return apply("max", *this, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}
Connection Connection::cast(DType t) const {
  return apply("cast", *this, {{"dtype", std::string(dtype_name(t))}});
}
Connection Connection::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
  return apply("slice", *this,
               {{"axes", std::vector<int64_t>{axis}}, {"starts", std::vector<int64_t>{start}},
                {"ends", std::vector<int64_t>{end}}, {"steps", std::vector<int64_t>{step}}});
}
Connection Connection::operator[](int64_t index) const {
  // Select = gather with a scalar index, which drops the axis (NumPy take semantics).
  return add_primitive(*this, "gather",
                       {{"input", IOKey(*this)}, {"indices", IOKey(Tensor::scalar<int64_t>(index))}},
                       {{"axis", int64_t{0}}});
}

}  // namespace ingot
