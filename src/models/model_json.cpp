// Model structure and settings as JSON: {"format": "ingot.model", "version": 1, "model": ...}.
// The whole block tree is written out (zoo blocks too), so loading needs no zoo lookup and the
// file diffs line by line.
#include <limits>

#include <nlohmann/json.hpp>

#include "ingot/control_blocks.h"
#include "ingot/error.h"
#include "ingot/model.h"
#include "models/model_impl.h"
#include "runtime/atomic_file.h"

namespace ingot {

using json = nlohmann::ordered_json;
using detail::ModelImpl;
using detail::Wire;
using detail::WireRole;

namespace {

constexpr int kFormatVersion = 1;

json dim_to_json(const Dim& d) {
  switch (d.kind()) {
    case Dim::Kind::Fixed: return d.value();
    case Dim::Kind::Symbol: return d.name();
    case Dim::Kind::Unknown: return nullptr;
    case Dim::Kind::Variadic: return d.name() + "...";
  }
  return nullptr;
}

Dim dim_from_json(const json& j) {
  if (j.is_null()) return Dim();
  if (j.is_number_integer()) return Dim(j.get<int64_t>());
  if (j.is_string()) return Dim(j.get<std::string>());
  INGOT_FAIL("shape entry must be an integer, a string or null, got ", j.dump());
}

json attr_to_json(const Attr& a) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>) return json{{"ints", v}};
        else if constexpr (std::is_same_v<T, std::vector<double>>) return json{{"floats", v}};
        else return v;
      },
      a);
}

Attr attr_from_json(const json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("ints")) {
    // Each an integer: a float there would convert with undefined behaviour (fuzz_model_json).
    const json& xs = j.at("ints");
    INGOT_CHECK(xs.is_array(), "attribute {\"ints\": ...} must hold a list, got ", xs.dump());
    std::vector<int64_t> out;
    for (const json& x : xs) {
      INGOT_CHECK(x.is_number_integer() && (!x.is_number_unsigned() || x.get<uint64_t>() <= static_cast<uint64_t>(
                                                                             std::numeric_limits<int64_t>::max())),
                  "attribute {\"ints\": ...} holds ", x.dump(), ", not a 64-bit integer");
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  if (j.is_object() && j.contains("floats")) return j.at("floats").get<std::vector<double>>();
  INGOT_FAIL("attribute value must be a number, a string, {\"ints\": [...]} or {\"floats\": [...]}, got ", j.dump());
}

json tensor_to_json(const Tensor& t) {
  return {{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"data", t.to_vector<double>()}};
}

Tensor tensor_from_json(const json& j) {
  DType dt = parse_dtype(j.at("dtype").get<std::string>());
  Shape shape = j.at("shape").get<Shape>();
  for (int64_t d : shape) INGOT_CHECK(d >= 0, "negative dimension in tensor shape");
  std::vector<double> data = j.at("data").get<std::vector<double>>();
  INGOT_CHECK(static_cast<int64_t>(data.size()) == numel(shape), "tensor data has ", data.size(),
              " values for shape ", to_string(shape));
  return Tensor::from_vector<double>(data, shape).astype(dt);
}

const char* role_name(WireRole r) {
  switch (r) {
    case WireRole::Input: return "input";
    case WireRole::Parameter: return "parameter";
    default: return "unspecified";
  }
}

WireRole role_from(const std::string& s) {
  if (s == "input") return WireRole::Input;
  if (s == "parameter") return WireRole::Parameter;
  INGOT_CHECK(s == "unspecified", "unknown wire role '", s, "'");
  return WireRole::Unspecified;
}

json model_to_json(const Model& model);
Model model_from_json(const json& j, const std::string& path);

// A control-flow block as the arguments it is built from (If, While, Scan): loading builds it
// again, so every check of its construction runs on what a file says.
json control_to_json(const ModelImpl& m) {
  const detail::ControlFlow& c = *m.control;
  json j{{"kind", c.kind}, {"condition", c.condition}};
  json bodies = json::array();
  for (const Model& b : c.bodies) bodies.push_back(model_to_json(b));
  j["bodies"] = bodies;
  if (c.run_time) j["run_time"] = true;
  if (c.kind == "if") return j;
  const size_t vars = c.loop_variables.size();
  json initial = json::array(), loop_vars = json::array(), output_vars = json::array(), ys = json::array(),
       xs = json::array();
  for (const auto& [var, next] : c.loop_variables) {
    loop_vars.push_back({var, next});
    for (const auto& [terminal, key] : m.default_links) {
      if (terminal != var) continue;
      INGOT_CHECK(!ModelImpl::key_is_connection(key), "Model::to_json: the first value of loop variable '", var,
                  "' is a Connection; give it as a wire name to save the model");
      json first = json::object();
      if (const auto& value = ModelImpl::key_value(key)) {
        first["value"] = tensor_to_json(*value);
        if (ModelImpl::key_weak(key)) first["weak"] = true;
      } else {
        first["name"] = ModelImpl::key_name(key);
      }
      initial.push_back({var, first});
    }
  }
  for (size_t k = 0; k < c.num_xs; ++k) xs.push_back({c.operands[vars + k].formal, c.operands[vars + k].terminal});
  for (const auto& [out, index] : c.results) {
    if (index < vars) output_vars.push_back({out, c.loop_variables[index].first});
    else ys.push_back({out, c.body_results[index - vars]});
  }
  j["initial_state"] = initial;
  j["loop_vars"] = loop_vars;
  j["output_vars"] = output_vars;
  if (c.kind == "scan") {
    j["xs"] = xs;
    j["ys"] = ys;
    j["reverse"] = c.reverse;
  }
  if (c.max_iterations) j["max_iterations"] = *c.max_iterations;
  return j;
}

NameMap name_map_from_json(const json& j, const std::string& where) {
  INGOT_CHECK(j.is_array(), "at ", where, ": expected a list of [name, name] pairs");
  NameMap out;
  for (const json& p : j) {
    INGOT_CHECK(p.is_array() && p.size() == 2, "at ", where, ": expected a [name, name] pair, got ", p.dump());
    out.emplace_back(p.at(0).get<std::string>(), p.at(1).get<std::string>());
  }
  return out;
}

Model built_from_json(const json& j, const std::string& path);

// The block, marked as deciding at run time when the file says so.
Model control_from_json(const json& j, const std::string& path) {
  Model block = built_from_json(j, path);
  return j.value("run_time", false) ? detail::decided_at_run_time(std::move(block)) : block;
}

Model built_from_json(const json& j, const std::string& path) {
  INGOT_CHECK(j.is_object(), "at ", path, ": \"control\" must be an object");
  const std::string kind = j.at("kind").get<std::string>();
  const json& bodies = j.at("bodies");
  const size_t expected = kind == "if" ? 2 : 1;
  INGOT_CHECK(kind == "if" || kind == "while" || kind == "scan", "at ", path, ": unknown control-flow kind '", kind, "'");
  INGOT_CHECK(bodies.is_array() && bodies.size() == expected, "at ", path, ": a ", kind, " block has ", expected,
              " bodies");
  std::vector<BlockCall> calls;
  for (size_t b = 0; b < bodies.size(); ++b)
    calls.push_back(BlockCall{model_from_json(bodies.at(b), path + ".bodies[" + std::to_string(b) + "]"), {}});
  if (kind == "if") return If(j.at("condition").get<std::string>(), calls[0], calls[1]);
  InitialState initial;
  const json& first = j.at("initial_state");
  INGOT_CHECK(first.is_array(), "at ", path, ": initial_state must be a list");
  for (const json& p : first) {
    INGOT_CHECK(p.is_array() && p.size() == 2 && p.at(1).is_object(), "at ", path,
                ": expected [loop variable, {\"name\" or \"value\"}], got ", p.dump());
    const json& v = p.at(1);
    IOKey key = v.contains("name") ? IOKey(v.at("name").get<std::string>()) : IOKey(tensor_from_json(v.at("value")));
    if (v.value("weak", false)) {
      const Tensor t = tensor_from_json(v.at("value"));
      INGOT_CHECK(t.numel() == 1, "at ", path, ": a weak first value must be a scalar");
      key = IOKey(t.astype(DType::Float64).data<double>()[0]);
    }
    initial.emplace_back(p.at(0).get<std::string>(), key);
  }
  const NameMap loop_vars = name_map_from_json(j.at("loop_vars"), path + ".loop_vars");
  const NameMap output_vars = name_map_from_json(j.at("output_vars"), path + ".output_vars");
  if (kind == "while") {
    std::optional<int64_t> max_iterations;
    if (j.contains("max_iterations")) max_iterations = j.at("max_iterations").get<int64_t>();
    return While(j.at("condition").get<std::string>(), calls[0], initial, loop_vars, output_vars, max_iterations);
  }
  ScanOptions o;
  o.xs = name_map_from_json(j.at("xs"), path + ".xs");
  o.ys = name_map_from_json(j.at("ys"), path + ".ys");
  o.initial_state = initial;
  o.loop_vars = loop_vars;
  o.output_vars = output_vars;
  o.reverse = j.value("reverse", false);
  return Scan(calls[0], o);
}

json model_to_json(const Model& model) {
  const ModelImpl& m = model.impl();
  json j;
  j["type"] = m.type_name;
  if (!m.instance_name.empty()) j["instance_name"] = m.instance_name;
  if (!m.backend.empty()) j["backend"] = m.backend;  // set_attribute("backend", ...)
  if (m.control) {
    j["control"] = control_to_json(m);
    return j;
  }
  if (m.primitive()) {
    j["op"] = m.op;
    j["inputs"] = m.input_names;
    j["outputs"] = m.output_names;
    json attrs = json::object();
    for (const auto& [k, v] : m.attrs.items()) attrs[k] = attr_to_json(v);
    j["attrs"] = attrs;
    return j;
  }
  json wires = json::array();
  for (const Wire& w : m.wires) {
    json jw;
    if (!w.name.empty()) jw["name"] = w.name;
    if (!w.auto_name.empty()) jw["auto_name"] = w.auto_name;
    if (w.exposed) jw["exposed"] = true;
    if (!w.shapes.empty()) {
      json shapes = json::array();
      for (const ShapeTemplate& t : w.shapes) {
        json s = json::array();
        for (const Dim& d : t) s.push_back(dim_to_json(d));
        shapes.push_back(s);
      }
      jw["shapes"] = shapes;
    }
    if (w.dtype) jw["dtype"] = dtype_name(*w.dtype);
    if (w.value) jw["value"] = tensor_to_json(*w.value);
    if (w.weak) jw["weak"] = true;
    if (w.role != WireRole::Unspecified) jw["role"] = role_name(w.role);
    if (w.init) jw["init"] = w.init->str();
    wires.push_back(jw);
  }
  json blocks = json::array();
  for (const detail::Block& b : m.blocks) {
    json links = json::object();
    for (size_t t = 0; t < b.terminals.size(); ++t) links[b.terminals[t]] = b.wires[t];
    blocks.push_back({{"instance", b.instance}, {"links", links}, {"model", model_to_json(*b.model)}});
  }
  j["wires"] = wires;
  j["blocks"] = blocks;
  j["cin"] = m.cin;
  j["cout"] = m.cout;
  return j;
}

// A wire index: an integer in int's range (a float or a huge number is a clear error, not a
// conversion with undefined behaviour; found by fuzz_model_json).
int wire_index(const json& v, const std::string& where) {
  INGOT_CHECK(v.is_number_integer(), "at ", where, ": a wire index must be an integer, got ", v.dump());
  INGOT_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max()),
              "at ", where, ": wire index ", v.dump(), " is out of range");
  const int64_t w = v.get<int64_t>();
  INGOT_CHECK(w >= -1 && w <= std::numeric_limits<int>::max(), "at ", where, ": wire index ", w, " is out of range");
  return static_cast<int>(w);
}

Model model_from_json(const json& j, const std::string& path) {
  INGOT_CHECK(j.is_object(), "at ", path, ": a model must be a JSON object");
  if (j.contains("control")) {
    Model block = control_from_json(j.at("control"), path);
    if (j.contains("instance_name")) block.set_name(j.at("instance_name").get<std::string>());
    if (j.contains("backend")) block.set_attribute("backend", j.at("backend").get<std::string>());
    return block;
  }
  if (j.contains("op")) {
    Attrs attrs;
    for (const auto& [k, v] : j.at("attrs").items()) attrs.set(k, attr_from_json(v));
    Model p = Model::primitive(j.at("op").get<std::string>(), j.at("inputs").get<std::vector<std::string>>(),
                               j.at("outputs").get<std::vector<std::string>>(), attrs,
                               j.value("type", std::string()));
    if (j.contains("instance_name")) p.set_name(j.at("instance_name").get<std::string>());
    if (j.contains("backend")) p.set_attribute("backend", j.at("backend").get<std::string>());
    return p;
  }
  Model model;
  ModelImpl& m = model.impl();
  m.type_name = j.value("type", std::string("Model"));
  m.instance_name = j.value("instance_name", std::string());
  if (j.contains("backend")) model.set_attribute("backend", j.at("backend").get<std::string>());
  for (const json& jw : j.at("wires")) {
    Wire w;
    w.name = jw.value("name", std::string());
    w.auto_name = jw.value("auto_name", std::string());
    w.exposed = jw.value("exposed", false);
    if (jw.contains("shapes"))
      for (const json& s : jw.at("shapes")) {
        ShapeTemplate t;
        for (const json& d : s) t.push_back(dim_from_json(d));
        w.shapes.push_back(std::move(t));
      }
    if (jw.contains("dtype")) w.dtype = parse_dtype(jw.at("dtype").get<std::string>());
    if (jw.contains("value")) w.value = tensor_from_json(jw.at("value"));
    w.weak = jw.value("weak", false);
    w.role = role_from(jw.value("role", std::string("unspecified")));
    if (jw.contains("init")) w.init = Init::parse(jw.at("init").get<std::string>());
    m.wires.push_back(std::move(w));
  }
  const int num_wires = static_cast<int>(m.wires.size());
  for (const json& jb : j.at("blocks")) {
    detail::Block b;
    b.instance = jb.at("instance").get<std::string>();
    b.model = std::make_unique<Model>(model_from_json(jb.at("model"), path + "." + b.instance));
    const json& links = jb.at("links");
    std::vector<TerminalInfo> terms = b.model->terminals();
    INGOT_CHECK(links.is_object() && links.size() == terms.size(), "at ", path, ".", b.instance,
                ": expected links for its ", terms.size(), " terminals, got ", links.dump());
    for (const TerminalInfo& t : terms) {
      INGOT_CHECK(links.contains(t.name), "at ", path, ".", b.instance, ": terminal '", t.name, "' is not linked");
      const int w = wire_index(links.at(t.name), path + "." + b.instance + ": terminal '" + t.name + "'");
      INGOT_CHECK(w >= 0 && w < num_wires, "at ", path, ".", b.instance, ": terminal '", t.name,
                  "' links to wire ", w, " of ", num_wires);
      b.terminals.push_back(t.name);
      b.wires.push_back(w);
      b.is_output.push_back(t.role == TerminalInfo::Role::Output);
    }
    m.blocks.push_back(std::move(b));
  }
  m.cin = j.contains("cin") ? wire_index(j.at("cin"), path + ": cin") : -1;
  m.cout = j.contains("cout") ? wire_index(j.at("cout"), path + ": cout") : -1;
  INGOT_CHECK(m.cin >= -1 && m.cin < num_wires && m.cout >= -1 && m.cout < num_wires, "at ", path,
              ": canonical input/output index out of range");
  return model;
}

}  // namespace

std::string Model::to_json() const {
  json j{{"format", "ingot.model"}, {"version", kFormatVersion}, {"model", model_to_json(*this)}};
  try {
    return j.dump(2) + "\n";
  } catch (const json::type_error& e) {
    // A name that is not valid UTF-8 (an ONNX file may hold any bytes there; found by fuzz_onnx).
    INGOT_FAIL("Model::to_json: a name in the model is not valid UTF-8 (", e.what(), ")");
  }
}

Model Model::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    INGOT_FAIL("Model JSON is not valid JSON: ", e.what());
  }
  // Every field is checked for its type before it is read: json's own accessors throw on a wrong
  // type ("format": {} once ended the process), and what they throw becomes an ingot::Error too.
  INGOT_CHECK(j.is_object() && j.contains("format") && j.at("format").is_string() &&
                  j.at("format").get<std::string>() == "ingot.model",
              "Not an ingot model file: expected \"format\": \"ingot.model\"");
  INGOT_CHECK(j.contains("version") && j.at("version").is_number_integer(), "Model JSON has no integer \"version\"");
  const json& version = j.at("version");
  INGOT_CHECK(version.is_number_unsigned() ? version.get<uint64_t>() == static_cast<uint64_t>(kFormatVersion)
                                           : version.get<int64_t>() == kFormatVersion,
              "Unsupported model format version ", version.dump(), " (this ingot reads version ", kFormatVersion, ")");
  try {
    return model_from_json(j.at("model"), "model");
  } catch (const json::exception& e) {
    INGOT_FAIL("Malformed model JSON: ", e.what());
  }
}

void Model::save(const std::string& path) const { write_file_atomic(path, to_json()); }

Model Model::load(const std::string& path) {
  try {
    return from_json(read_file(path));
  } catch (const Error& e) {
    INGOT_FAIL("Cannot load model '", path, "': ", e.what());
  }
}

}  // namespace ingot
