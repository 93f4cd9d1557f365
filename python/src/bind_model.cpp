// Logical models: Model (with |=, +=, calling a block to link its terminals), Connection
// arithmetic, IOKey and the model zoo with keyword arguments.
#include <tuple>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "ingot/control_blocks.h"
#include "ingot/error.h"
#include "ingot/models.h"

namespace ingot::python {

namespace {

// LayerNorm / RMSNorm's trailing dims from Python: normalized_shape (an int or a sequence of
// ints: their sizes) or normalized_dims (their count), not both; neither: the last dim.
NormOptions norm_options(const char* block, nb::handle normalized_shape, double eps, bool affine,
                         std::optional<int> normalized_dims) {
  NormOptions o;
  o.eps = eps;
  o.affine = affine;
  if (!normalized_shape.is_none()) {
    if (normalized_dims)
      throw nb::type_error((std::string(block) + ": give normalized_shape or normalized_dims, not both").c_str());
    if (nb::isinstance<nb::int_>(normalized_shape)) o.normalized_shape = {nb::cast<int64_t>(normalized_shape)};
    else o.normalized_shape = nb::cast<std::vector<int64_t>>(normalized_shape);
    if (o.normalized_shape.empty())
      throw nb::type_error((std::string(block) + ": normalized_shape is empty").c_str());
  } else if (normalized_dims) {
    o.normalized_dims = *normalized_dims;
  }
  return o;
}

// What a terminal may be linked to: a wire name, an IOKey, a Connection, a number (a weak
// scalar constant) or an array (a constant).
IOKey to_iokey(nb::handle v, const std::string& terminal) {
  if (nb::isinstance<IOKey>(v)) return nb::cast<IOKey>(v);
  if (nb::isinstance<nb::str>(v)) return IOKey(nb::cast<std::string>(v));
  if (nb::isinstance<Connection>(v)) return IOKey(nb::cast<Connection>(v));
  if (nb::isinstance<nb::float_>(v) || (nb::isinstance<nb::int_>(v) && !nb::isinstance<nb::bool_>(v)))
    return IOKey(nb::cast<double>(v));
  return IOKey(to_tensor(v, "terminal '" + terminal + "'").clone());
}

Links to_links(const nb::kwargs& kwargs) {
  Links links;
  for (auto [k, v] : kwargs) {
    const std::string name = nb::cast<std::string>(k);
    links.emplace_back(name, to_iokey(v, name));
  }
  return links;
}

std::map<std::string, ShapeTemplate> to_shapes(const std::optional<nb::dict>& d) {
  std::map<std::string, ShapeTemplate> out;
  if (d)
    for (auto [k, v] : *d) out[nb::cast<std::string>(k)] = to_shape_template(v);
  return out;
}

std::vector<int64_t> to_ints(nb::handle obj) {
  std::vector<int64_t> v;
  if (obj.is_none()) return v;
  if (nb::isinstance<nb::int_>(obj)) return {nb::cast<int64_t>(obj)};
  for (nb::handle x : obj) v.push_back(nb::cast<int64_t>(x));
  return v;
}

// A branch or loop body from Python: a block, or a block called with its links.
BlockCall to_block_call(nb::handle v, const char* what) {
  if (nb::isinstance<BlockCall>(v)) return nb::cast<BlockCall>(v);
  if (nb::isinstance<Model>(v)) return BlockCall{nb::cast<Model>(v), {}};
  throw nb::type_error((std::string(what) + " must be a block (ml.Model) or a called block (block(input=...))").c_str());
}

// A dict of names from Python, in its order: {loop variable: next value}, {output: loop variable}.
NameMap to_name_map(const std::optional<nb::dict>& d) {
  NameMap out;
  if (d)
    for (auto [k, v] : *d) {
      const std::string key = nb::cast<std::string>(k);
      if (!nb::isinstance<nb::str>(v))
        throw nb::type_error(("'" + key + "' must map to a name or an expression (a str)").c_str());
      out.emplace_back(key, nb::cast<std::string>(v));
    }
  return out;
}

InitialState to_initial_state(const std::optional<nb::dict>& d) {
  InitialState out;
  if (d)
    for (auto [k, v] : *d) {
      const std::string key = nb::cast<std::string>(k);
      out.emplace_back(key, to_iokey(v, key));
    }
  return out;
}

Model conv2d(std::optional<int64_t> in_channels, std::optional<int64_t> out_channels, nb::handle kernel_size,
             int64_t stride, int64_t padding, int64_t dilation, int64_t groups, bool use_bias) {
  INGOT_CHECK(out_channels.has_value(), "Conv2d: out_channels is required (Conv2d(in_channels, out_channels, kernel_size) "
                                        "or Conv2d(out_channels=..., kernel_size=...))");
  Conv2dOptions o;
  o.out_channels = *out_channels;
  o.in_channels = in_channels;
  const std::vector<int64_t> k = to_ints(kernel_size);
  INGOT_CHECK(k.size() == 1 || k.size() == 2, "Conv2d: kernel_size must be an int or a pair, got ", k.size(), " values");
  o.kernel_size = k[0];
  if (k.size() == 2) {
    o.kernel_h = k[0];
    o.kernel_w = k[1];
  }
  o.stride = stride;
  o.padding = padding;
  o.dilation = dilation;
  o.groups = groups;
  o.use_bias = use_bias;
  return Conv2d(o);
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<IOKey>(m, "IOKey",
                    "What a terminal is linked to: a wire name plus optional shape, dtype, value and exposure.\n\n"
                    "    ml.IOKey('logits', expose=True)\n    ml.IOKey('x', shape=[None, 3], dtype='float32')")
      .def(
          "__init__",
          [](IOKey* self, std::optional<std::string> name, nb::handle shape, nb::handle dtype, nb::handle value, bool expose) {
            new (self) IOKey(name ? IOKey(*name) : IOKey());
            if (!shape.is_none()) self->shape(to_shape_template(shape));
            if (!dtype.is_none()) self->dtype(to_dtype(dtype));
            if (!value.is_none()) self->value(to_tensor(value, "IOKey value").clone());
            if (expose) self->expose();
          },
          nb::arg("name").none() = nb::none(), nb::kw_only(), nb::arg("shape").none() = nb::none(),
          nb::arg("dtype").none() = nb::none(), nb::arg("value").none() = nb::none(), nb::arg("expose") = false,
          "Creates a key. `shape` is a template ([None, 3, 'N', 'Batch...'], the variadic run also as\n"
          "('Batch', ...) or a bare ... when anonymous), `dtype` a dtype name or\n"
          "NumPy dtype, `value` an array (the wire becomes a constant), `expose` makes it an output.");

  nb::class_<Connection> conn(m, "Connection",
                              "A wire of a model. Arithmetic on connections of one model adds primitive blocks to it.");
  conn.def_prop_ro("name", &Connection::name, "The wire's name ('' for unnamed wires).")
      .def_prop_ro("T", &Connection::T, "All axes reversed.")
      .def("transpose", [](const Connection& c, std::vector<int64_t> perm) { return perm.empty() ? c.T() : c.transpose(perm); },
           nb::arg("perm") = std::vector<int64_t>{}, "Permutes the axes (no perm: reverses them).")
      .def("reshape", &Connection::reshape, nb::arg("shape"), "Reshape; -1 is inferred, 0 copies the input's dim.")
      .def("sum", &Connection::sum, nb::arg("axes") = std::vector<int64_t>{}, nb::arg("keepdims") = false,
           "Sum over `axes` (all when empty).")
      .def("mean", &Connection::mean, nb::arg("axes") = std::vector<int64_t>{}, nb::arg("keepdims") = false,
           "Mean over `axes` (all when empty).")
      .def("max", &Connection::max, nb::arg("axes") = std::vector<int64_t>{}, nb::arg("keepdims") = false,
           "Maximum over `axes` (all when empty).")
      .def("cast", [](const Connection& c, nb::handle dtype) { return c.cast(to_dtype(dtype)); }, nb::arg("dtype"),
           "Converts to `dtype`.")
      .def("slice", &Connection::slice, nb::arg("axis"), nb::arg("start"), nb::arg("end"), nb::arg("step") = 1,
           "Elements start:end:step of `axis` (the axis stays).")
      .def("__getitem__", [](const Connection& c, int64_t i) { return c[i]; }, nb::arg("index"),
           "Index `index` of axis 0 (the axis is dropped).")
      .def("__neg__", [](const Connection& a) { return -a; }, "Adds a neg block.")
      .def("__add__", [](const Connection& a, const Connection& b) { return a + b; })
      .def("__add__", [](const Connection& a, double b) { return a + b; })
      .def("__radd__", [](const Connection& a, double b) { return b + a; })
      .def("__sub__", [](const Connection& a, const Connection& b) { return a - b; })
      .def("__sub__", [](const Connection& a, double b) { return a - b; })
      .def("__rsub__", [](const Connection& a, double b) { return b - a; })
      .def("__mul__", [](const Connection& a, const Connection& b) { return a * b; })
      .def("__mul__", [](const Connection& a, double b) { return a * b; })
      .def("__rmul__", [](const Connection& a, double b) { return b * a; })
      .def("__truediv__", [](const Connection& a, const Connection& b) { return a / b; })
      .def("__truediv__", [](const Connection& a, double b) { return a / b; })
      .def("__rtruediv__", [](const Connection& a, double b) { return b / a; })
      .def("__matmul__", [](const Connection& a, const Connection& b) { return matmul(a, b); })
      .def("__pow__", [](const Connection& a, const Connection& b) { return pow(a, b); })
      .def("__pow__", [](const Connection& a, double b) { return pow(a, b); });

  m.def(
      "apply",
      [](const std::string& op, const Connection& x, const nb::kwargs& attrs) {
        Attrs a;
        for (auto [k, v] : attrs) a.set(nb::cast<std::string>(k), to_attr(v, nb::cast<std::string>(k)));
        return apply(op, x, a);
      },
      nb::arg("op"), nb::arg("x"), nb::arg("attrs"),
      "Applies a unary op of the catalogue by name: ml.apply('gelu', x, approximate='tanh').");

  nb::class_<BlockCall>(m, "BlockCall", "A block together with the terminal links it will be added with.");

  nb::class_<Model>(m, "Model",
                    "A logical model: blocks with named terminals. `m |= block(...)` adds a block, linking only\n"
                    "the terminals named in the call; `m += block` also links its input to m's current output.")
      .def(nb::init<>(), "An empty model.")
      .def_static(
          "primitive",
          [](const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
             const std::string& type_name, const nb::kwargs& attrs) {
            Attrs a;
            for (auto [k, v] : attrs) a.set(nb::cast<std::string>(k), to_attr(v, nb::cast<std::string>(k)));
            return Model::primitive(op, std::move(inputs), std::move(outputs), a, type_name);
          },
          nb::arg("op"), nb::arg("inputs"), nb::arg("outputs") = std::vector<std::string>{"output"},
          nb::arg("type_name") = "", nb::arg("attrs"),
          "A block wrapping one op of the catalogue (`ingot ops`), with the named input and output\n"
          "terminals and the op's attributes as keywords: Model.primitive('conv2d', ['input', 'weight'], stride=[2, 2]).")
      .def("__ior__", [](Model& self, const Model& b) -> Model& { return self |= b; }, nb::rv_policy::none,
           "m |= block: adds the block, linking only the terminals its call names.")
      .def("__ior__", [](Model& self, const BlockCall& c) -> Model& { return self |= c; }, nb::rv_policy::none,
           "m |= block: adds the block, linking only the terminals its call names.")
      .def("__iadd__", [](Model& self, const Model& b) -> Model& { return self += b; }, nb::rv_policy::none,
           "m += block: adds the block and links its input to the current output.")
      .def("__iadd__", [](Model& self, const BlockCall& c) -> Model& { return self += c; }, nb::rv_policy::none,
           "m += block: adds the block and links its input to the current output.")
      .def("__call__", [](const Model& self, const nb::kwargs& links) { return self(to_links(links)); },
           "Links terminals for the next |= or +=: block(input='x', output=ml.IOKey('y', expose=True)).")
      .def(
          "add",
          [](Model& self, const Model& block, const std::string& name, const nb::kwargs& links) {
            return self.add(block, to_links(links), name);
          },
          nb::arg("block"), nb::arg("name") = "", nb::arg("links"),
          "Adds `block` (optionally named) linking the keyword terminals; returns {terminal: Connection}.")
      .def("input", [](Model& self, const std::string& name, nb::handle shape, nb::handle dtype) {
             return self.input(name, shape.is_none() ? std::nullopt : std::optional(to_shape_template(shape)),
                               dtype.is_none() ? std::nullopt : std::optional(to_dtype(dtype)));
           }, nb::arg("name"), nb::arg("shape").none() = nb::none(), nb::arg("dtype").none() = nb::none(),
           "A named input wire (created if absent), optionally with a shape template and dtype.")
      .def("parameter", [](Model& self, const std::string& name, const std::string& init, nb::handle shape) {
             return self.parameter(name, Init::parse(init),
                                   shape.is_none() ? std::nullopt : std::optional(to_shape_template(shape)));
           }, nb::arg("name"), nb::arg("init") = "fan_in(0)", nb::arg("shape").none() = nb::none(),
           "A trainable parameter wire; `init` is 'zeros', 'ones', 'normal(0, 0.02)', 'fan_in(0)', ...")
      .def("constant", [](Model& self, const std::string& name, nb::handle value) {
             return self.constant(name, to_tensor(value, "constant '" + name + "'").clone());
           }, nb::arg("name"), nb::arg("value"), "A constant wire holding a copy of `value`.")
      .def("connection", &Model::connection, nb::arg("name"), "The named wire (created if absent).")
      .def_prop_ro("cin", &Model::cin, "The canonical input wire.")
      .def_prop_ro("cout", &Model::cout, "The canonical output wire.")
      .def("expose", &Model::expose, nb::arg("connection"), nb::arg("name"), "Names a wire and makes it an output.")
      .def("set_cin", &Model::set_cin, nb::arg("connection"), "Sets the canonical input.")
      .def("set_cout", &Model::set_cout, nb::arg("connection"), "Sets the canonical output.")
      .def("set_shapes", [](Model& self, const nb::dict& shapes) -> Model& { return self.set_shapes(to_shapes(shapes)); },
           nb::arg("shapes"), nb::rv_policy::none, "Shape templates by terminal name.")
      .def("set_types", [](Model& self, const nb::dict& types) -> Model& {
             std::map<std::string, DType> t;
             for (auto [k, v] : types) t[nb::cast<std::string>(k)] = to_dtype(v);
             return self.set_types(t);
           }, nb::arg("types"), nb::rv_policy::none, "Dtypes by terminal name.")
      .def("set_values", [](Model& self, const nb::dict& values) -> Model& {
             TensorMap t = to_tensor_map(values, "value");
             for (auto& [k, v] : t) v = v.clone();
             return self.set_values(t);
           }, nb::arg("values"), nb::rv_policy::none, "Constant values by terminal name (copied).")
      .def("set_name", &Model::set_name, nb::arg("name"), nb::rv_policy::none, "The block's name inside its parent.")
      .def("set_attribute", [](Model& self, const std::string& name, nb::handle value) -> Model& {
             // The name first, so that an unknown attribute is reported as such whatever its value.
             if (name != "backend") self.attribute(name);  // throws: unknown attribute, listing the valid ones
             if (!nb::isinstance<nb::str>(value))
               throw nb::type_error(("set_attribute('" + name + "', ...): the value must be a str (a key of compile's "
                                     "backend_map), got " + py_str(nb::handle(value.type()).attr("__name__"))).c_str());
             return self.set_attribute(name, nb::cast<std::string>(value));
           }, nb::arg("name"), nb::arg("value"), nb::rv_policy::none,
           "Sets a named attribute of this block. 'backend': a key of ml.compile's backend_map; that backend compiles "
           "this block's nodes, the default backend the rest (the innermost marked block wins).")
      .def("get_attribute", &Model::attribute, nb::arg("name"),
           "The attribute's value, or None when it is not set (an unknown name is an error).")
      .def_prop_ro("type_name", &Model::type_name, "'Linear', 'Model', or the op name of a primitive.")
      .def("input_keys", &Model::input_keys, "The model's input terminals.")
      .def("output_keys", &Model::output_keys, "The model's output terminals.")
      .def("terminals", [](const Model& self) {
             nb::list out;
             for (const TerminalInfo& t : self.terminals()) {
               nb::dict d;
               d["name"] = t.name;
               d["role"] = t.role == TerminalInfo::Role::Input ? "input" : t.role == TerminalInfo::Role::Parameter ? "parameter" : "output";
               out.append(d);
             }
             return out;
           }, "Each terminal as {'name', 'role'}.")
      .def("summary", [](const Model& self, std::optional<nb::dict> shapes) { return self.summary(to_shapes(shapes)); },
           nb::arg("shapes").none() = nb::none(), "One row per block: type, shapes, dtype, parameter count.")
      .def("to_json", &Model::to_json, "The block tree as versioned JSON.")
      .def_static("from_json", &Model::from_json, nb::arg("json"), "A model from to_json's text.")
      .def("save", &Model::save, nb::arg("path"), "Writes to_json to `path` (atomically).")
      .def_static("load", &Model::load, nb::arg("path"), "Reads a model saved with save().")
      .def("__copy__", [](const Model& self) { return Model(self); })
      .def("__deepcopy__", [](const Model& self, nb::handle) { return Model(self); }, nb::arg("memo"));

  // --- the zoo (include/ingot/models.h), keyword arguments as in the C++ API ---
  m.def("Linear",
        [](std::optional<int64_t> in_features, std::optional<int64_t> out_features, std::optional<int64_t> dimension,
           bool use_bias) {
          // Linear(10) and Linear(dimension=10): the output size; Linear(128, 10): PyTorch's (in, out).
          if (in_features && !out_features && !dimension) std::swap(in_features, out_features);
          if (out_features && dimension)
            throw nb::type_error("Linear: give the output size once (out_features or dimension), not both");
          if (!out_features) out_features = dimension;
          if (!out_features) throw nb::type_error("Linear: the output size is missing: Linear(10), Linear(128, 10) or Linear(dimension=10)");
          LinearOptions o;
          o.out_features = *out_features;
          o.in_features = in_features;
          o.use_bias = use_bias;
          return Linear(o);
        },
        nb::arg("in_features").none() = nb::none(), nb::arg("out_features").none() = nb::none(), nb::kw_only(),
        nb::arg("dimension").none() = nb::none(), nb::arg("use_bias") = true,
        "y = x @ weight + bias with weight [in, out]. Linear(10) or Linear(dimension=10): 10 outputs, `in`\n"
        "inferred from the input; Linear(128, 10) (PyTorch's order): `in` is 128, and an input whose last\n"
        "dim is not 128 is a shape error at compile.");
  m.def("Conv2d", &conv2d, nb::arg("in_channels").none() = nb::none(), nb::arg("out_channels").none() = nb::none(),
        nb::kw_only(), nb::arg("kernel_size") = 3, nb::arg("stride") = 1, nb::arg("padding") = 0, nb::arg("dilation") = 1,
        nb::arg("groups") = 1, nb::arg("use_bias") = true,
        "NCHW convolution, PyTorch argument order: Conv2d(3, 64, kernel_size=3). in_channels may be None\n"
        "(inferred): Conv2d(out_channels=64, kernel_size=3). kernel_size is an int or (kh, kw).");
  m.def("BatchNorm2d",
        [](std::optional<int64_t> num_features, double eps, double momentum) {
          BatchNorm2dOptions o;
          o.num_features = num_features;
          o.eps = eps;
          o.momentum = momentum;
          return BatchNorm2d(o);
        },
        nb::arg("num_features").none() = nb::none(), nb::arg("eps") = 1e-5, nb::arg("momentum") = 0.1,
        "Per-channel normalization of [N, C, H, W]; running statistics with compile(inference=True).\n"
        "BatchNorm2d(64) (PyTorch's form): C is 64, checked at compile; BatchNorm2d(): C inferred.");
  // LayerNorm and RMSNorm take the same arguments (norm_options).
  using NormBlock = Model (*)(const NormOptions&);
  for (const auto& [name, block, doc] : std::vector<std::tuple<const char*, NormBlock, const char*>>{
           {"LayerNorm", &LayerNorm,
            "Normalizes over trailing dims: LayerNorm(512) or LayerNorm([4, 5]) (PyTorch's normalized_shape:\n"
            "their sizes, checked at compile), LayerNorm(normalized_dims=2) (their count, sizes inferred), or\n"
            "LayerNorm() (the last dim)."},
           {"RMSNorm", &RMSNorm,
            "x / sqrt(mean(x**2) + eps) * weight over trailing dims (no centering, no bias); the trailing dims\n"
            "as for LayerNorm."}}) {
    const char* block_name = name;  // (clang 14 cannot capture a structured binding)
    const NormBlock make = block;
    m.def(
        name,
        [block_name, make](nb::handle normalized_shape, double eps, bool affine, std::optional<int> normalized_dims) {
          return make(norm_options(block_name, normalized_shape, eps, affine, normalized_dims));
        },
        nb::arg("normalized_shape").none() = nb::none(), nb::arg("eps") = 1e-5, nb::arg("affine") = true, nb::kw_only(),
        nb::arg("normalized_dims").none() = nb::none(), doc);
  }
  m.def("MultiHeadAttention",
        [](int64_t embed_dim, int64_t num_heads, std::optional<int64_t> num_kv_heads, bool causal, bool masked,
           bool use_bias) {
          MultiHeadAttentionOptions o;
          o.embed_dim = embed_dim;
          o.num_heads = num_heads;
          o.num_kv_heads = num_kv_heads;
          o.causal = causal;
          o.masked = masked;
          o.use_bias = use_bias;
          return MultiHeadAttention(o);
        },
        nb::arg("embed_dim"), nb::arg("num_heads"), nb::kw_only(), nb::arg("num_kv_heads").none() = nb::none(),
        nb::arg("causal") = false, nb::arg("masked") = false, nb::arg("use_bias") = true,
        "Self-attention on [B, S, embed_dim]: q_proj / k_proj / v_proj, the fused attention op, out_proj.\n"
        "num_kv_heads < num_heads: grouped-query attention; masked adds a 'mask' terminal (bool: True\n"
        "attends; float: added to the scores).");
  m.def("TransformerEncoderLayer",
        [](int64_t d_model, int64_t num_heads, int64_t ffn_dim, std::optional<int64_t> num_kv_heads, bool causal,
           bool masked, bool norm_first, bool rms_norm, const std::string& activation, double eps) {
          TransformerEncoderLayerOptions o;
          o.d_model = d_model;
          o.num_heads = num_heads;
          o.ffn_dim = ffn_dim;
          o.num_kv_heads = num_kv_heads;
          o.causal = causal;
          o.masked = masked;
          o.norm_first = norm_first;
          o.rms_norm = rms_norm;
          o.activation = activation;
          o.eps = eps;
          return TransformerEncoderLayer(o);
        },
        nb::arg("d_model"), nb::arg("num_heads"), nb::arg("ffn_dim"), nb::kw_only(),
        nb::arg("num_kv_heads").none() = nb::none(), nb::arg("causal") = false, nb::arg("masked") = false,
        nb::arg("norm_first") = false, nb::arg("rms_norm") = false, nb::arg("activation") = "gelu",
        nb::arg("eps") = 1e-5,
        "Self-attention and a feed-forward block (linear1, activation, linear2), each with a residual\n"
        "add and a norm: post-norm (BERT) or norm_first (GPT-2, LLaMA); rms_norm picks RMSNorm.");
  m.def("Relu", &Relu, "max(x, 0).");
  m.def("Gelu", &Gelu, nb::arg("tanh_approximation") = false, "GELU, erf form or tanh approximation.");
  m.def("Sigmoid", &Sigmoid, "1 / (1 + exp(-x)).");
  m.def("Tanh", &Tanh, "tanh(x).");
  m.def("Softmax", &Softmax, nb::arg("axis") = -1, "softmax over `axis`.");
  m.def("LogSoftmax", &LogSoftmax, nb::arg("axis") = -1, "log_softmax over `axis`.");
  m.def("Dropout", &Dropout, nb::arg("p") = 0.5, nb::arg("seed") = 0,
        "Training: zeroes elements with probability p (seeded); inference: identity.");
  m.def("MaxPool2d", &MaxPool2d, nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(), nb::arg("padding") = 0,
        nb::arg("ceil_mode") = false,
        "Max pooling (stride defaults to kernel_size; ceil_mode as in PyTorch: a last window past the padded end "
        "where the floor rule stops short).");
  m.def("AvgPool2d", &AvgPool2d, nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(), nb::arg("padding") = 0,
        "Average pooling (stride defaults to kernel_size).");
  m.def("GlobalAvgPool2d", &GlobalAvgPool2d, "[N, C, H, W] -> [N, C].");
  m.def("Flatten", &Flatten, "[N, d1, d2, ...] -> [N, d1*d2*...].");
  m.def("Embedding", &Embedding, nb::arg("num_embeddings"), nb::arg("dim"), "Rows of weight [num_embeddings, dim] by index.");
  m.def("Add", &Add, "left + right.");
  m.def("Multiply", &Multiply, "left * right.");
  m.def("Identity", &Identity, "input -> output unchanged.");
  m.def("MLP", &MLP, nb::arg("widths"), nb::arg("activation") = "relu",
        "Linear layers of `widths` with `activation` between them.");
  m.def("MSELoss", &MSELoss, nb::arg("reduction") = "mean", "Mean squared error of input and target.");
  m.def("CrossEntropyLoss", &CrossEntropyLoss, nb::arg("reduction") = "mean", nb::arg("one_hot_target") = false,
        "Cross entropy of logits and integer (or one-hot) targets.");
  m.def("Relu6", &Relu6, "min(max(x, 0), 6): MobileNet's clamped ReLU.");
  m.def("BasicBlock", &BasicBlock, nb::arg("planes"), nb::arg("stride") = 1, nb::arg("downsample") = false,
        "ResNet's basic block (torchvision's module names: conv1, bn1, conv2, bn2, downsample.0/.1).");
  m.def("Bottleneck", &Bottleneck, nb::arg("planes"), nb::arg("stride") = 1, nb::arg("downsample") = false,
        nb::arg("groups") = 1, nb::arg("base_width") = 64,
        "ResNet's bottleneck (4 * planes out; ResNeXt with groups > 1), torchvision's module names.");
  m.def("InvertedResidual", &InvertedResidual, nb::arg("in_channels"), nb::arg("out_channels"), nb::arg("stride"),
        nb::arg("expand_ratio"), "MobileNetV2's inverted residual (torchvision's module names).");
  m.def("ResNet18", &ResNet18, nb::arg("num_classes") = 1000,
        "torchvision's ResNet-18: [N, 3, H, W] -> logits; parameters named as its state dict (fc.weight is [in, out]).");
  m.def("ResNet50", &ResNet50, nb::arg("num_classes") = 1000,
        "torchvision's ResNet-50: [N, 3, H, W] -> logits; parameters named as its state dict (fc.weight is [in, out]).");
  m.def("MobileNetV2", &MobileNetV2, nb::arg("num_classes") = 1000, nb::arg("width_mult") = 1.0,
        "torchvision's MobileNetV2: [N, 3, H, W] -> logits; parameters named as its state dict (classifier.1.weight is [in, out]).");
  auto recurrent = [&m](const char* name, Model (*make)(const RecurrentOptions&), const char* doc) {
    m.def(
        name,
        [make](int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
               bool bidirectional, const std::string& nonlinearity) {
          RecurrentOptions o;
          o.input_size = input_size;
          o.hidden_size = hidden_size;
          o.num_layers = num_layers;
          o.bias = bias;
          o.batch_first = batch_first;
          o.bidirectional = bidirectional;
          o.nonlinearity = nonlinearity;
          return make(o);
        },
        nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("num_layers") = 1, nb::arg("bias") = true,
        nb::arg("batch_first") = false, nb::arg("bidirectional") = false, nb::arg("nonlinearity") = "tanh", doc);
  };
  recurrent("LSTM", &LSTM,
            "torch.nn.LSTM as a block (gates i, f, g, o; parameters weight_ih_l0 [4H, in], weight_hh_l0,\n"
            "bias_ih_l0, bias_hh_l0, '_reverse' for the backward direction, so a state dict loads as is).\n"
            "Terminals: input [T, N, in] ([N, T, in] with batch_first), output [T, N, D*H], h_n and c_n\n"
            "[num_layers*D, N, H]; zero initial states. Each layer is a Scan over its time steps.");
  recurrent("GRU", &GRU,
            "torch.nn.GRU as a block (gates r, z, n; PyTorch's parameter names and layout). Terminals:\n"
            "input, output, h_n, as for LSTM.");
  recurrent("RNN", &RNN,
            "torch.nn.RNN as a block (h' = tanh or relu of x W_ih^T + b_ih + h W_hh^T + b_hh; PyTorch's\n"
            "parameter names). Terminals: input, output, h_n, as for LSTM.");
  m.def(
      "If",
      [](const std::string& condition, nb::handle then_branch, nb::handle else_branch) {
        return If(condition, to_block_call(then_branch, "then_branch"), to_block_call(else_branch, "else_branch"));
      },
      nb::arg("condition"), nb::arg("then_branch"), nb::arg("else_branch"),
      "then_branch where `condition` (a terminal name or an expression over terminals, e.g. 'x_norm > 1')\n"
      "holds, else else_branch; both produce the same outputs. A condition that reads data needs\n"
      "compile(..., dynamic_control_flow=True). See include/ingot/control_blocks.h.");
  m.def(
      "While",
      [](const std::string& condition, nb::handle body, const std::optional<nb::dict>& initial_state,
         const std::optional<nb::dict>& loop_vars, const std::optional<nb::dict>& output_vars,
         std::optional<int64_t> max_iterations) {
        return While(condition, to_block_call(body, "body"), to_initial_state(initial_state), to_name_map(loop_vars),
                     to_name_map(output_vars), max_iterations);
      },
      nb::arg("condition"), nb::arg("body"), nb::arg("initial_state").none() = nb::none(),
      nb::arg("loop_vars").none() = nb::none(), nb::arg("output_vars").none() = nb::none(),
      nb::arg("max_iterations").none() = nb::none(),
      "Runs `body` while `condition` (an expression over loop variables and terminals, e.g.\n"
      "'step < max_steps') holds. initial_state: {loop variable: wire name or constant};\n"
      "loop_vars: {loop variable: body output or expression, e.g. 'step + 1'}; output_vars:\n"
      "{output terminal: loop variable}. max_iterations bounds the loop (gradients through a\n"
      "data-dependent trip count need it).");
  m.def(
      "Scan",
      [](nb::handle body, const std::optional<nb::dict>& xs, const std::optional<nb::dict>& initial_state,
         const std::optional<nb::dict>& loop_vars, const std::optional<nb::dict>& ys,
         const std::optional<nb::dict>& output_vars, bool reverse) {
        ScanOptions o;
        o.xs = to_name_map(xs);
        o.initial_state = to_initial_state(initial_state);
        o.loop_vars = to_name_map(loop_vars);
        o.ys = to_name_map(ys);
        o.output_vars = to_name_map(output_vars);
        o.reverse = reverse;
        return Scan(to_block_call(body, "body"), o);
      },
      nb::arg("body"), nb::arg("xs").none() = nb::none(), nb::arg("initial_state").none() = nb::none(),
      nb::arg("loop_vars").none() = nb::none(), nb::arg("ys").none() = nb::none(),
      nb::arg("output_vars").none() = nb::none(), nb::arg("reverse") = false,
      "Runs `body` once per step of the leading axis of its sequences. xs: {body input: sequence\n"
      "terminal}; initial_state / loop_vars / output_vars: carried loop variables as for While;\n"
      "ys: {output terminal: body output}, stacked along a new leading axis; reverse: last step first.");
  m.def("ExampleCNN", &ExampleCNN, nb::arg("num_classes") = 10, "The bundled CNN.");
  m.def("ExampleMLP", &ExampleMLP, "The bundled MLP 784 -> 256 -> 10.");
}

}  // namespace ingot::python
