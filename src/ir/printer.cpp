// Graph dumps: readable text (MLIR-like), JSON (lossless; read back by graph_from_json) and
// Graphviz DOT.
//
// Dumps are a debugging tool, so they print any graph, including one that fails verify(): ids
// are printed as numbers and only looked up after a range check. User-supplied text (value,
// output and op names, scopes, shape symbols, string attributes) never reaches the output
// unescaped.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ingot/error.h"
#include "ingot/graph.h"
#include "ir/graph_json.h"
#include "ir/op_registry.h"

namespace ingot {

std::string escape_string(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

DumpFormat parse_dump_format(std::string_view s) {
  if (s == "text") return DumpFormat::Text;
  if (s == "json") return DumpFormat::Json;
  if (s == "dot") return DumpFormat::Dot;
  INGOT_FAIL("Unknown dump format '", escape_string(s), "': expected one of text, json, dot");
}

namespace {

// ---------------------------------------------------------------------------------------------
// Formatting shared by the text and DOT dumps.

std::string quote(std::string_view s) { return "\"" + escape_string(s) + "\""; }

// Identifier-like text prints bare; anything else is quoted, so it cannot be misread.
bool is_plain(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  });
}
std::string plain_or_quoted(std::string_view s) { return is_plain(s) ? std::string(s) : quote(s); }

const Value* find_value(const Graph& g, ValueId id) {
  return id >= 0 && static_cast<size_t>(id) < g.values().size() ? &g.value(id) : nullptr;
}

std::string value_id(ValueId id) { return "%" + std::to_string(id); }

template <class R, class F>
std::string join(const R& items, F&& format, const char* sep = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    out += format(item);
    first = false;
  }
  return out;
}

// The shortest text that reads back as the same number.
template <class F>
std::string format_float(F x) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

std::string_view short_dtype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int8: return "i8";
    case DType::Int16: return "i16";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::UInt8: return "u8";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "bf16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "?";
}

std::string_view short_kind(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "input";
    case ValueKind::Parameter: return "param";
    case ValueKind::Constant: return "const";
    case ValueKind::Intermediate: return "intermediate";
  }
  return "?";
}

std::string dim_str(const SymDim& d) {
  if (d.known()) return std::to_string(d.value);
  return d.symbol.empty() ? "?" : plain_or_quoted(d.symbol);
}

// `f32[N, 3]`; only meaningful when v.shape_known.
std::string type_str(const Value& v) {
  return std::string(short_dtype(v.dtype)) + "[" + join(v.shape, dim_str) + "]";
}

// Calls f(x) for every element of `t` in row-major order, typed (an int64 never passes
// through double, so it prints exactly).
template <class F>
void for_each_element(const Tensor& t, F&& f) {
  Tensor c = t.contiguous();
  dispatch_dtype(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) f(p[i]);
  });
}

template <class T>
std::string element_str(T x) {
  if constexpr (std::is_same_v<T, bool>)
    return x ? "true" : "false";
  else if constexpr (std::is_integral_v<T>)
    return std::to_string(x);
  else if constexpr (std::is_same_v<T, double>)
    return format_float(x);
  else
    return format_float(static_cast<float>(x));  // float, Half, BFloat16
}

std::string nested_elements(const std::vector<std::string>& elems, const Shape& shape, size_t dim,
                            size_t& next) {
  if (dim == shape.size()) return elems[next++];
  std::string s = "[";
  for (int64_t i = 0; i < shape[dim]; ++i)
    s += (i ? ", " : "") + nested_elements(elems, shape, dim + 1, next);
  return s + "]";
}

// `2` for a scalar, `[[1, 2], [3, 4]]` for a matrix.
std::string constant_str(const Tensor& t) {
  std::vector<std::string> elems;
  for_each_element(t, [&](auto x) { elems.push_back(element_str(x)); });
  size_t next = 0;
  return nested_elements(elems, t.shape(), 0, next);
}

constexpr int64_t kMaxInlineElements = 8;

bool prints_inline(const Value& v) {
  return v.kind == ValueKind::Constant && v.constant.defined() &&
         v.constant.numel() <= kMaxInlineElements;
}

// Attribute values: floats always show a '.', 'e' or "inf"/"nan", so 1.0 and 1 stay apart.
std::string attr_scalar_str(int64_t x) { return std::to_string(x); }
std::string attr_scalar_str(double x) {
  std::string s = format_float(x);
  return s.find_first_of(".en") == std::string::npos ? s + ".0" : s;
}
std::string attr_str(const Attr& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
          return quote(v);
        else if constexpr (std::is_arithmetic_v<T>)
          return attr_scalar_str(v);
        else
          return "[" + join(v, [](auto x) { return attr_scalar_str(x); }) + "]";
      },
      a);
}

// The types (and names) of a node's outputs: `f32[4] "h", ?`; empty when nothing is known.
std::string output_types(const Graph& g, const Node& n) {
  bool any = false;
  std::string s = join(n.outputs, [&](ValueId id) {
    const Value* v = find_value(g, id);
    if (!v) return std::string("<invalid>");
    std::string part = v->shape_known ? type_str(*v) : "?";
    if (!v->name.empty()) part += " " + quote(v->name);
    any = any || v->shape_known || !v->name.empty();
    return part;
  });
  return any ? s : "";
}

// ---------------------------------------------------------------------------------------------
// Text.

std::string leaf_str(const Graph& g, ValueId id) {
  const Value* v = find_value(g, id);
  if (!v) return value_id(id) + " <invalid>";
  std::string s = value_id(id) + " " + std::string(short_kind(v->kind));
  if (v->shape_known) s += ": " + type_str(*v);
  if (!v->name.empty()) s += " " + quote(v->name);
  if (prints_inline(*v)) s += " = " + constant_str(v->constant);
  return s;
}

std::string node_line(const Graph& g, const Node& n) {
  std::string s = "  ";
  if (!n.outputs.empty()) s += join(n.outputs, value_id) + " = ";
  s += plain_or_quoted(n.op) + "(" + join(n.inputs, value_id) + ")";
  if (!n.attrs.items().empty())
    s +=
        " {" +
        join(n.attrs.items(),
             [](const auto& kv) { return plain_or_quoted(kv.first) + "=" + attr_str(kv.second); }) +
        "}";
  std::string types = output_types(g, n);
  if (!types.empty()) s += " : " + types;
  if (!n.scope.empty()) s += "  # " + plain_or_quoted(n.scope);
  return s + "\n";
}

// A control-flow op's name for its subgraph k ("then", "body"), or "subgraph k".
std::string subgraph_name(const Node& n, size_t k) {
  const OpDef* def = find_op(n.op);
  if (def != nullptr && k < def->subgraph_names.size()) return def->subgraph_names[k];
  return "subgraph " + std::to_string(k);
}

std::string print_text(const Graph& g, const std::string& indent = "") {
  std::string s =
      "graph(" + join(g.leaves(), [&](ValueId id) { return leaf_str(g, id); }) + ") {\n";
  for (const Node& n : g.nodes()) {
    s += indent + node_line(g, n);
    // Subgraphs nest under their node, indented; their ids are their own.
    for (size_t k = 0; k < n.subgraphs.size(); ++k)
      s += indent + "    " + subgraph_name(n, k) + " " + print_text(n.subgraphs[k], indent + "    ");
  }
  s += indent + "  return";
  if (!g.outputs().empty())
    s += " " + join(g.outputs(), [](const auto& out) {
           return plain_or_quoted(out.first) + "=" + value_id(out.second);
         });
  return s + "\n" + indent + "}\n";
}

// ---------------------------------------------------------------------------------------------
// Graphviz DOT. Labels are built from already escaped or plain text, then escaped once more for
// DOT: a backslash and quote for the string, <>{}| so record-style parsing never applies, and &
// because Graphviz decodes HTML entities in labels.

std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (std::string_view("\"\\<>{}|").find(c) != std::string_view::npos)
      out += {'\\', c};
    else
      out += c;
  }
  return out;
}

std::string dot_label(const std::vector<std::string>& lines) {
  return "\"" + join(lines, dot_escape, "\\n") + "\"";
}

std::string_view dot_leaf_style(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "style=filled, fillcolor=\"#cfe8ff\"";
    case ValueKind::Parameter: return "style=filled, fillcolor=\"#ffe8b0\"";
    case ValueKind::Constant: return "style=\"filled,dashed\", fillcolor=\"#eeeeee\"";
    case ValueKind::Intermediate: break;
  }
  return "style=dotted";
}

// The DOT node a value flows out of: its producer's box, or its own ellipse.
// Names carry `prefix` ("s2_0_" inside node 2's first subgraph) so nested graphs never collide.
std::string dot_source(const Graph& g, ValueId id, const std::string& prefix) {
  const Value* v = find_value(g, id);
  bool produced = v && v->kind == ValueKind::Intermediate && v->producer >= 0 &&
                  static_cast<size_t>(v->producer) < g.nodes().size();
  return produced ? "\"" + prefix + "n" + std::to_string(v->producer) + "\""
                  : "\"" + prefix + "v" + std::to_string(id) + "\"";
}

std::string dot_leaf(const Graph& g, ValueId id, const std::string& prefix) {
  std::string head = "  \"" + prefix + "v" + std::to_string(id) + "\" [shape=ellipse, ";
  const Value* v = find_value(g, id);
  if (!v) return head + "style=dotted, label=" + dot_label({value_id(id) + " <invalid>"}) + "];\n";
  std::vector<std::string> lines = {value_id(id) + " " + std::string(short_kind(v->kind))};
  if (!v->name.empty()) lines.push_back(quote(v->name));
  if (v->shape_known) lines.push_back(type_str(*v));
  if (prints_inline(*v)) lines.push_back("= " + constant_str(v->constant));
  return head + std::string(dot_leaf_style(v->kind)) + ", label=" + dot_label(lines) + "];\n";
}

// Named by position, as dot_source refers to producers.
std::string dot_body(const Graph& g, const std::string& prefix);

std::string dot_node(const Graph& g, size_t index, const std::string& prefix) {
  const Node& n = g.nodes()[index];
  std::string name = "\"" + prefix + "n" + std::to_string(index) + "\"";
  std::vector<std::string> lines = {plain_or_quoted(n.op)};
  std::string types = output_types(g, n);
  if (!types.empty()) lines.push_back(types);
  if (!n.scope.empty()) lines.push_back("# " + plain_or_quoted(n.scope));
  std::string s = "  " + name + " [shape=box, label=" + dot_label(lines) + "];\n";
  for (ValueId in : n.inputs)
    s += "  " + dot_source(g, in, prefix) + " -> " + name + " [label=\"" + value_id(in) + "\"];\n";
  // Each subgraph is a cluster beside its node, joined to it by a dashed edge.
  for (size_t k = 0; k < n.subgraphs.size(); ++k) {
    const std::string inner = prefix + "s" + std::to_string(index) + "_" + std::to_string(k) + "_";
    s += "  subgraph \"cluster_" + inner + "\" {\n  label=" + dot_label({subgraph_name(n, k)}) +
         ";\n  style=dashed;\n" + dot_body(n.subgraphs[k], inner) + "  }\n";
    const Graph& sub = n.subgraphs[k];
    if (!sub.outputs().empty())
      s += "  \"" + inner + "out0\" -> " + name + " [style=dashed, label=" + dot_label({subgraph_name(n, k)}) + "];\n";
  }
  return s;
}

std::string dot_body(const Graph& g, const std::string& prefix) {
  std::string s;
  for (ValueId id : g.leaves()) s += dot_leaf(g, id, prefix);
  for (size_t i = 0; i < g.nodes().size(); ++i) s += dot_node(g, i, prefix);
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const auto& [name, id] = g.outputs()[i];
    std::string sink = "\"" + prefix + "out" + std::to_string(i) + "\"";
    s += "  " + sink + " [shape=invhouse, style=bold, label=" + dot_label({plain_or_quoted(name)}) +
         "];\n";
    s += "  " + dot_source(g, id, prefix) + " -> " + sink + " [label=\"" + value_id(id) + "\"];\n";
  }
  return s;
}

std::string print_dot(const Graph& g) {
  return "digraph ingot {\n  node [fontname=\"monospace\"];\n" + dot_body(g, "") + "}\n";
}

// ---------------------------------------------------------------------------------------------
// JSON. Every Value and Node field is written, so graph_from_json rebuilds the graph exactly.

using Json = nlohmann::ordered_json;
constexpr const char* kJsonFormat = "ingot.graph";
constexpr int kJsonVersion = 1;

// JSON has no NaN or infinities; they are written as the strings "nan", "inf" and "-inf".
Json float_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

template <class T>
Json element_json(T x) {
  if constexpr (std::is_same_v<T, bool>)
    return x;
  else if constexpr (std::is_integral_v<T>)
    return static_cast<int64_t>(x);
  else if constexpr (std::is_same_v<T, double>)
    return float_json(x);
  else
    return float_json(static_cast<float>(x));  // exact: float converts to double losslessly
}

Json tensor_json(const Tensor& t) {
  Json data = Json::array();
  for_each_element(t, [&](auto x) { data.push_back(element_json(x)); });
  return {{"dtype", std::string(dtype_name(t.dtype()))}, {"shape", t.shape()}, {"data", data}};
}

// Known sizes are numbers, symbols are strings, unknown dims are null.
Json shape_json(const SymShape& shape) {
  Json j = Json::array();
  for (const SymDim& d : shape) {
    if (d.known())
      j.push_back(d.value);
    else if (!d.symbol.empty())
      j.push_back(d.symbol);
    else
      j.push_back(nullptr);
  }
  return j;
}

Json attr_json(const Attr& a) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          return {{"type", "int"}, {"value", v}};
        else if constexpr (std::is_same_v<T, double>)
          return {{"type", "float"}, {"value", float_json(v)}};
        else if constexpr (std::is_same_v<T, std::string>)
          return {{"type", "string"}, {"value", v}};
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return {{"type", "ints"}, {"value", v}};
        else {
          Json list = Json::array();
          for (double x : v) list.push_back(float_json(x));
          return {{"type", "floats"}, {"value", list}};
        }
      },
      a);
}

Json value_json(const Value& v) {
  Json j = {{"id", v.id},
            {"name", v.name},
            {"kind", std::string(value_kind_name(v.kind))},
            {"dtype", std::string(dtype_name(v.dtype))},
            {"shape", shape_json(v.shape)},
            {"shape_known", v.shape_known},
            {"producer", v.producer},
            {"producer_output", v.producer_output},
            {"differentiable", v.differentiable},
            {"init", v.init},
            {"weak_type", v.weak_type}};
  if (v.constant.defined()) j["constant"] = tensor_json(v.constant);
  return j;
}

Json graph_json(const Graph& g);

Json node_json(const Node& n) {
  Json attrs = Json::object();
  for (const auto& [key, a] : n.attrs.items()) attrs[key] = attr_json(a);
  Json j = {{"id", n.id},           {"op", n.op},     {"inputs", n.inputs},
            {"outputs", n.outputs}, {"attrs", attrs}, {"scope", n.scope}};
  if (!n.backend.empty()) j["backend"] = n.backend;  // only when marked: unmarked dumps stay as they were
  if (!n.subgraphs.empty()) {  // control flow: each subgraph as a whole graph object
    Json subs = Json::array();
    for (const Graph& sub : n.subgraphs) subs.push_back(graph_json(sub));
    j["subgraphs"] = subs;
  }
  return j;
}

Json graph_json(const Graph& g) {
  Json values = Json::array(), nodes = Json::array(), outputs = Json::array();
  for (const Value& v : g.values()) values.push_back(value_json(v));
  for (const Node& n : g.nodes()) nodes.push_back(node_json(n));
  for (const auto& [name, id] : g.outputs()) outputs.push_back({{"name", name}, {"value", id}});
  return {{"values", values}, {"nodes", nodes}, {"outputs", outputs}};
}

std::string print_json(const Graph& g) {
  Json j = {{"format", kJsonFormat}, {"version", kJsonVersion}};
  j.update(graph_json(g));
  // Names are arbitrary bytes; invalid UTF-8 becomes U+FFFD rather than failing the dump.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

// A JSON element together with the path that reached it, so each error says where it is.
class In {
 public:
  In(const Json& j, std::string path) : j_(j), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    INGOT_FAIL("Invalid graph JSON at ", path_, ": ", what);
  }

  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  In operator[](const char* key) const {
    if (!j_.is_object()) fail(std::string("expected an object, got ") + j_.type_name());
    auto it = j_.find(key);
    if (it == j_.end()) fail(std::string("missing field '") + key + "'");
    return In(*it, path_ + "." + key);
  }
  std::vector<In> items() const {
    if (!j_.is_array()) fail(std::string("expected an array, got ") + j_.type_name());
    std::vector<In> out;
    for (size_t i = 0; i < j_.size(); ++i)
      out.emplace_back(j_[i], path_ + "[" + std::to_string(i) + "]");
    return out;
  }
  std::vector<std::pair<std::string, In>> entries() const {
    if (!j_.is_object()) fail(std::string("expected an object, got ") + j_.type_name());
    std::vector<std::pair<std::string, In>> out;
    for (auto it = j_.begin(); it != j_.end(); ++it)
      out.emplace_back(it.key(), In(it.value(), path_ + "." + escape_string(it.key())));
    return out;
  }

  bool is_null() const { return j_.is_null(); }
  bool is_string() const { return j_.is_string(); }
  int64_t as_int(int64_t lo, int64_t hi) const {
    bool fits = j_.is_number_integer() &&
                !(j_.is_number_unsigned() &&
                  j_.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    int64_t v = fits ? j_.get<int64_t>() : 0;
    if (!fits || v < lo || v > hi)
      fail("expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
           describe());
    return v;
  }
  double as_number() const {
    if (j_.is_number()) return j_.get<double>();
    if (j_ == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (j_ == "inf") return std::numeric_limits<double>::infinity();
    if (j_ == "-inf") return -std::numeric_limits<double>::infinity();
    fail("expected a number (or \"nan\", \"inf\", \"-inf\"), got " + describe());
  }
  bool as_bool() const {
    if (!j_.is_boolean()) fail("expected true or false, got " + describe());
    return j_.get<bool>();
  }
  const std::string& as_string() const {
    if (!j_.is_string()) fail("expected a string, got " + describe());
    return j_.get_ref<const std::string&>();
  }

 private:
  std::string describe() const {
    return j_.is_number() || j_.is_boolean() ? j_.dump() : j_.type_name();
  }

  const Json& j_;
  std::string path_;
};

DType dtype_from(const In& in) {
  const std::string& name = in.as_string();
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  in.fail("unknown dtype '" + escape_string(name) + "'");
}

ValueKind kind_from(const In& in) {
  const std::string& name = in.as_string();
  for (ValueKind k :
       {ValueKind::Intermediate, ValueKind::Input, ValueKind::Parameter, ValueKind::Constant})
    if (value_kind_name(k) == name) return k;
  in.fail("unknown value kind '" + escape_string(name) +
          "', expected intermediate, input, parameter or constant");
}

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMinInt64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// Ids referring to one of `count` values.
std::vector<ValueId> ids_from(const In& in, size_t count) {
  std::vector<ValueId> ids;
  for (const In& item : in.items())
    ids.push_back(static_cast<ValueId>(item.as_int(0, static_cast<int64_t>(count) - 1)));
  return ids;
}

SymShape sym_shape_from(const In& in) {
  SymShape shape;
  for (const In& d : in.items()) {
    if (d.is_null())
      shape.emplace_back();
    else if (!d.is_string())
      shape.push_back(SymDim(d.as_int(0, kMaxInt64)));
    else if (d.as_string().empty())
      d.fail("empty dimension symbol");
    else
      shape.push_back(SymDim(d.as_string()));
  }
  return shape;
}

template <class T>
T element_from(const In& in) {
  if constexpr (std::is_same_v<T, bool>)
    return in.as_bool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(in.as_int(std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  else if constexpr (std::is_same_v<T, double>)
    return in.as_number();
  else
    return T(static_cast<float>(in.as_number()));  // float, Half, BFloat16
}

Tensor tensor_from(const In& in) {
  DType dtype = dtype_from(in["dtype"]);
  Shape shape;
  for (const In& d : in["shape"].items()) shape.push_back(d.as_int(0, kMaxInt64));
  std::optional<int64_t> numel = checked_numel(shape);
  if (!numel) in["shape"].fail("shape " + to_string(shape) + " is too large");
  std::vector<In> data = in["data"].items();
  if (static_cast<uint64_t>(*numel) != data.size())
    in["data"].fail("has " + std::to_string(data.size()) + " elements, shape " + to_string(shape) +
                    " needs " + std::to_string(*numel));
  Tensor t(dtype, shape);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < data.size(); ++i) p[i] = element_from<T>(data[i]);
  });
  return t;
}

Attr attr_from(const In& in) {
  const std::string& type = in["type"].as_string();
  In value = in["value"];
  if (type == "int") return value.as_int(kMinInt64, kMaxInt64);
  if (type == "float") return value.as_number();
  if (type == "string") return value.as_string();
  if (type == "ints") {
    std::vector<int64_t> v;
    for (const In& x : value.items()) v.push_back(x.as_int(kMinInt64, kMaxInt64));
    return v;
  }
  if (type == "floats") {
    std::vector<double> v;
    for (const In& x : value.items()) v.push_back(x.as_number());
    return v;
  }
  in["type"].fail("unknown attribute type '" + escape_string(type) +
                  "', expected int, float, string, ints or floats");
}

Value value_from(const In& in, size_t index, size_t num_nodes) {
  Value v;
  v.id = static_cast<ValueId>(
      in["id"].as_int(static_cast<int64_t>(index), static_cast<int64_t>(index)));
  v.name = in["name"].as_string();
  v.kind = kind_from(in["kind"]);
  v.dtype = dtype_from(in["dtype"]);
  v.shape = sym_shape_from(in["shape"]);
  v.shape_known = in["shape_known"].as_bool();
  v.producer = static_cast<NodeId>(in["producer"].as_int(-1, static_cast<int64_t>(num_nodes) - 1));
  v.producer_output = static_cast<int>(in["producer_output"].as_int(0, kMaxInt32));
  v.differentiable = in["differentiable"].as_bool();
  v.init = in["init"].as_string();
  v.weak_type = in["weak_type"].as_bool();
  if (in.has("constant")) v.constant = tensor_from(in["constant"]);
  return v;
}

Graph graph_body_from(const In& root);

Node node_from(const In& in, size_t index, size_t num_values) {
  Node n;
  n.id = static_cast<NodeId>(
      in["id"].as_int(static_cast<int64_t>(index), static_cast<int64_t>(index)));
  n.op = in["op"].as_string();
  n.inputs = ids_from(in["inputs"], num_values);
  n.outputs = ids_from(in["outputs"], num_values);
  for (const auto& [key, a] : in["attrs"].entries()) n.attrs.set(key, attr_from(a));
  n.scope = in["scope"].as_string();
  if (in.has("backend")) n.backend = in["backend"].as_string();
  if (in.has("subgraphs"))
    for (const In& sub : in["subgraphs"].items()) n.subgraphs.push_back(graph_body_from(sub));
  return n;
}

Graph graph_from(const In& root) {
  const std::string& format = root["format"].as_string();
  if (format != kJsonFormat)
    root["format"].fail("unknown format '" + escape_string(format) + "', expected '" + kJsonFormat +
                        "'");
  int64_t version = root["version"].as_int(kMinInt64, kMaxInt64);
  if (version != kJsonVersion)
    root["version"].fail("unsupported version " + std::to_string(version) +
                         " (this build reads version " + std::to_string(kJsonVersion) + ")");
  return graph_body_from(root);
}

// The values, nodes and outputs of a graph (the whole dump, or a control-flow node's subgraph).
Graph graph_body_from(const In& root) {
  std::vector<In> values_in = root["values"].items();
  std::vector<In> nodes_in = root["nodes"].items();

  // Leaves must go through add_input to land in the graph's leaf list; everything else is
  // assigned field for field afterwards.
  Graph g;
  for (size_t i = 0; i < values_in.size(); ++i) {
    Value v = value_from(values_in[i], i, nodes_in.size());
    if (v.kind == ValueKind::Intermediate)
      g.values().emplace_back();
    else
      g.add_input(v.name, v.kind);
    g.values().back() = std::move(v);
  }
  for (size_t i = 0; i < nodes_in.size(); ++i)
    g.nodes().push_back(node_from(nodes_in[i], i, values_in.size()));
  for (const In& out : root["outputs"].items()) {
    auto id =
        static_cast<ValueId>(out["value"].as_int(0, static_cast<int64_t>(values_in.size()) - 1));
    g.outputs().emplace_back(out["name"].as_string(), id);
  }
  return g;
}

}  // namespace

Graph graph_from_json(const std::string& json) {
  Json root;
  try {
    root = Json::parse(json);
  } catch (const Json::exception& e) {
    INGOT_FAIL("Invalid graph JSON: ", e.what());
  }
  return graph_from(In(root, "$"));
}

std::string print_graph(const Graph& g, DumpFormat format) {
  switch (format) {
    case DumpFormat::Text: return print_text(g);
    case DumpFormat::Json: return print_json(g);
    case DumpFormat::Dot: return print_dot(g);
  }
  INGOT_FAIL("print_graph: unknown dump format ", static_cast<int>(format));
}

}  // namespace ingot
