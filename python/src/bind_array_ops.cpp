// The op functions over ml.arrays (ml.exp, ml.sum, ml.matmul, ...) with NumPy's names and
// argument forms over the C++ array API (include/ingot/array.h), ml.op for any op of the registry
// by name, creation functions and the random ops. Arguments may be ml.arrays, Python numbers
// (weak literals: they take the other operand's dtype) or array data (copied).
#include <deque>
#include <set>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "array_convert.h"
#include "bindings.h"
#include "convert.h"
#include "ingot/error.h"
#include "ir/op_registry.h"
#include "ingot/recurrent.h"

namespace ingot::python {

namespace {

struct Unary {
  const char* name;
  Array (*fn)(const Array&);
  const char* doc;
};

const Unary kUnary[] = {
    {"exp", &ingot::exp, "e ** x, elementwise."},
    {"log", &ingot::log, "Natural logarithm, elementwise."},
    {"sqrt", &ingot::sqrt, "Square root, elementwise."},
    {"rsqrt", &ingot::rsqrt, "1 / sqrt(x), elementwise."},
    {"sin", &ingot::sin, "Sine, elementwise."},
    {"cos", &ingot::cos, "Cosine, elementwise."},
    {"tanh", &ingot::tanh, "Hyperbolic tangent, elementwise."},
    {"sigmoid", &ingot::sigmoid, "1 / (1 + exp(-x)), elementwise."},
    {"erf", &ingot::erf, "The error function, elementwise."},
    {"abs", &ingot::abs, "Absolute value, elementwise."},
    {"relu", &ingot::relu, "max(x, 0), elementwise."},
    {"sign", &ingot::sign, "-1, 0 or 1 by the sign of x, elementwise."},
    {"floor", &ingot::floor, "Largest integer <= x, elementwise."},
    {"ceil", &ingot::ceil, "Smallest integer >= x, elementwise."},
    {"square", &ingot::square, "x * x, elementwise."},
    {"negative", [](const Array& x) { return -x; }, "-x, elementwise."},
};

struct Binary {
  const char* name;
  const char* op;
  const char* doc;
};

const Binary kBinary[] = {
    {"add", "add", "x1 + x2 with NumPy broadcasting."},
    {"subtract", "sub", "x1 - x2 with NumPy broadcasting."},
    {"multiply", "mul", "x1 * x2 with NumPy broadcasting."},
    {"divide", "div", "x1 / x2 with NumPy broadcasting."},
    {"power", "pow", "x1 ** x2 with NumPy broadcasting."},
    {"mod", "mod", "x1 % x2 with the sign of x2 (NumPy mod); an integer x2 of 0 gives 0."},
    {"fmod", "fmod", "C's fmod: the remainder with the sign of x1; an integer x2 of 0 gives 0."},
    {"maximum", "maximum", "The larger of x1 and x2, elementwise."},
    {"minimum", "minimum", "The smaller of x1 and x2, elementwise."},
    {"equal", "equal", "x1 == x2, elementwise (bool)."},
    {"not_equal", "not_equal", "x1 != x2, elementwise (bool)."},
    {"less", "less", "x1 < x2, elementwise (bool)."},
    {"less_equal", "less_equal", "x1 <= x2, elementwise (bool)."},
    {"greater", "greater", "x1 > x2, elementwise (bool)."},
    {"greater_equal", "greater_equal", "x1 >= x2, elementwise (bool)."},
};

struct Reduce {
  const char* name;
  Reduction fn;
  const char* doc;
};

const Reduce kReduce[] = {
    {"sum", &ingot::sum, "Sum over `axis` (an int, a tuple of ints, or None for all axes)."},
    {"mean", &ingot::mean, "Mean over `axis` (an int, a tuple of ints, or None for all axes)."},
    {"max", &ingot::max, "Maximum over `axis` (an int, a tuple of ints, or None for all axes)."},
    {"min", &ingot::min, "Minimum over `axis` (an int, a tuple of ints, or None for all axes)."},
};

// A random key: None draws one from the global state (advancing it), an int is a seed, an array
// is used as it is.
Array key_of(nb::handle key) {
  if (key.is_none()) return random::new_key();
  if (PyLong_Check(key.ptr())) return Array(Tensor::scalar<int64_t>(nb::cast<int64_t>(key)));
  return operand(key, "key");
}

Shape to_shape(nb::handle shape) {
  const std::vector<int64_t> dims = to_ints(shape, "shape");
  return Shape(dims.begin(), dims.end());
}

nb::object op_result(const std::vector<Array>& outs) {
  return outs.size() == 1 ? nb::cast(outs[0]) : nb::object(to_tuple(outs));
}

// Every elementwise op of the catalogue without attributes that is not bound above (under its
// own name or NumPy's: ml.subtract for sub) becomes ml.<op>, so an op needs no line here.
void bind_catalogue_elementwise(nb::module_& m) {
  using K = ElementwiseForms::Kind;
  std::set<std::string> bound = {"neg"};  // ml.negative
  for (const Binary& b : kBinary) bound.insert(b.op);
  static std::deque<std::string> docs;  // nanobind keeps the pointer
  for (const OpDef* def : all_ops()) {
    if (!def->elementwise || bound.count(def->name) || nb::hasattr(m, def->name.c_str())) continue;
    const K kind = def->elementwise->kind;
    const std::string name = def->name;
    if (kind == K::UnaryFloat || kind == K::UnarySame) {
      docs.push_back(def->doc + ", elementwise.");
      m.def(name.c_str(), [name](nb::handle x) { return op(name, {operand(x, "x")}); }, nb::arg("x"),
            docs.back().c_str());
    } else if (kind == K::Binary || kind == K::Compare) {
      docs.push_back(def->doc + ", elementwise with NumPy broadcasting.");
      m.def(name.c_str(), [name](nb::handle x1, nb::handle x2) {
        return op(name, {operand(x1, "x1"), operand(x2, "x2")});
      }, nb::arg("x1"), nb::arg("x2"), docs.back().c_str());
    }
  }
}

}  // namespace

void bind_array_ops(nb::module_& m) {
  for (const Unary& u : kUnary)
    m.def(u.name, [fn = u.fn](nb::handle x) { return fn(operand(x, "x")); }, nb::arg("x"), u.doc);
  for (const Binary& b : kBinary)
    m.def(b.name, [op_name = b.op](nb::handle x1, nb::handle x2) {
      return op(op_name, {operand(x1, "x1"), operand(x2, "x2")});
    }, nb::arg("x1"), nb::arg("x2"), b.doc);
  for (const Reduce& r : kReduce)
    m.def(r.name, [fn = r.fn](nb::handle x, nb::handle axis, bool keepdims) {
      return reduce_over(fn, operand(x, "x"), axis, keepdims);
    }, nb::arg("x"), nb::arg("axis").none() = nb::none(), nb::arg("keepdims") = false, r.doc);

  m.def("where", [](nb::handle condition, nb::handle x, nb::handle y) {
    return where(operand(condition, "condition"), operand(x, "x"), operand(y, "y"));
  }, nb::arg("condition"), nb::arg("x"), nb::arg("y"), "x where `condition` is true, else y (broadcast).");
  m.def("matmul", [](nb::handle a, nb::handle b) { return matmul(operand(a, "a"), operand(b, "b")); }, nb::arg("a"),
        nb::arg("b"), "Matrix product (batched over leading axes), as `a @ b`.");
  m.def("gelu", [](nb::handle x, bool tanh_approximation) { return gelu(operand(x, "x"), tanh_approximation); },
        nb::arg("x"), nb::arg("tanh_approximation") = false, "GELU: x * Phi(x) (erf form, or the tanh approximation).");
  m.def("astype", [](nb::handle x, nb::handle dtype) { return astype(operand(x, "x"), to_dtype(dtype)); },
        nb::arg("x"), nb::arg("dtype"), "The values converted to `dtype`.");
  m.def("argmax", [](nb::handle x, nb::handle axis, bool keepdims) { return argmax_over(operand(x, "x"), axis, keepdims); },
        nb::arg("x"), nb::arg("axis").none() = nb::none(), nb::arg("keepdims") = false,
        "Index of the largest element along `axis` (None: of the flattened array), int64.");
  m.def("top_k", [](nb::handle x, int64_t k, int64_t axis, bool largest) {
    auto [values, indices] = top_k(operand(x, "x"), k, axis, largest);
    return nb::make_tuple(values, indices);
  }, nb::arg("x"), nb::arg("k"), nb::arg("axis") = -1, nb::arg("largest") = true,
        "(values, int64 indices) of the `k` largest (or smallest) elements along `axis`, in order; NaN "
        "counts as the largest, equal values come in index order (ONNX's TopK).");
  m.def("moments", [](nb::handle x, nb::handle axis, bool keepdims) {
    auto [mean, variance] = moments(operand(x, "x"), to_axes(axis, "axis"), keepdims);
    return nb::make_tuple(mean, variance);
  }, nb::arg("x"), nb::arg("axis").none() = nb::none(), nb::arg("keepdims") = false,
        "(mean, variance) over `axis` in one pass.");
  m.def("softmax", [](nb::handle x, int64_t axis) { return softmax(operand(x, "x"), axis); }, nb::arg("x"),
        nb::arg("axis") = -1, "exp(x) / sum(exp(x)) along `axis` (numerically stable).");
  m.def("log_softmax", [](nb::handle x, int64_t axis) { return log_softmax(operand(x, "x"), axis); }, nb::arg("x"),
        nb::arg("axis") = -1, "log(softmax(x)) along `axis` (numerically stable).");
  m.def("layer_norm", [](nb::handle x, nb::handle weight, nb::handle bias, int64_t axis, double eps) {
    return layer_norm(operand(x, "x"), operand(weight, "weight"), operand(bias, "bias"), axis, eps);
  }, nb::arg("x"), nb::arg("weight"), nb::arg("bias"), nb::arg("axis") = -1, nb::arg("eps") = 1e-5,
        "(x - mean) / sqrt(var + eps) * weight + bias along `axis`.");
  m.def("rms_norm", [](nb::handle x, nb::handle weight, int64_t axis, double eps) {
    std::optional<Array> w;
    if (!weight.is_none()) w = operand(weight, "weight");
    return rms_norm(operand(x, "x"), w, axis, eps);
  }, nb::arg("x"), nb::arg("weight").none() = nb::none(), nb::arg("axis") = -1, nb::arg("eps") = 1e-5,
        "x / sqrt(mean(x**2) + eps) * weight over dims `axis`..end (RMSNorm).");
  // Recurrent layers (include/ingot/recurrent.h): PyTorch's equations and weight layout, one layer.
  auto time_major = [](nb::handle x, bool batch_first) {
    const Array a = operand(x, "x");
    return batch_first && a.ndim() == 3 ? transpose(a, {1, 0, 2}) : a;
  };
  auto batch_major = [](const Array& ys, bool batch_first) { return batch_first ? transpose(ys, {1, 0, 2}) : ys; };
  m.def("lstm", [=](nb::handle x, nb::handle h0, nb::handle c0, nb::handle w_ih, nb::handle w_hh, nb::handle b_ih,
                    nb::handle b_hh, bool reverse, bool batch_first) {
    auto [ys, h, c] = lstm(time_major(x, batch_first), operand(h0, "h0"), operand(c0, "c0"), operand(w_ih, "w_ih"),
                           operand(w_hh, "w_hh"), operand(b_ih, "b_ih"), operand(b_hh, "b_hh"), reverse);
    return nb::make_tuple(batch_major(ys, batch_first), h, c);
  }, nb::arg("x"), nb::arg("h0"), nb::arg("c0"), nb::arg("w_ih"), nb::arg("w_hh"), nb::arg("b_ih"), nb::arg("b_hh"),
        nb::arg("reverse") = false, nb::arg("batch_first") = false,
        "One LSTM layer as torch.nn.LSTM computes it (gates i, f, g, o; w_ih [4H, I], w_hh [4H, H], b_ih, b_hh "
        "[4H]): x [T, B, I] ([B, T, I] with batch_first), h0, c0 [B, H] -> (ys, h_T, c_T). A scan over the steps "
        "after one matmul of x over all of them; `reverse` runs last to first (a bidirectional layer's second half).");
  m.def("gru", [=](nb::handle x, nb::handle h0, nb::handle w_ih, nb::handle w_hh, nb::handle b_ih, nb::handle b_hh,
                   bool reverse, bool batch_first) {
    auto [ys, h] = gru(time_major(x, batch_first), operand(h0, "h0"), operand(w_ih, "w_ih"), operand(w_hh, "w_hh"),
                       operand(b_ih, "b_ih"), operand(b_hh, "b_hh"), reverse);
    return nb::make_tuple(batch_major(ys, batch_first), h);
  }, nb::arg("x"), nb::arg("h0"), nb::arg("w_ih"), nb::arg("w_hh"), nb::arg("b_ih"), nb::arg("b_hh"),
        nb::arg("reverse") = false, nb::arg("batch_first") = false,
        "One GRU layer as torch.nn.GRU computes it (gates r, z, n; w_ih [3H, I], w_hh [3H, H]): -> (ys, h_T).");
  m.def("rnn", [=](nb::handle x, nb::handle h0, nb::handle w_ih, nb::handle w_hh, nb::handle b_ih, nb::handle b_hh,
                   bool reverse, bool batch_first, const std::string& nonlinearity) {
    if (nonlinearity != "tanh" && nonlinearity != "relu")
      throw nb::value_error(("rnn: nonlinearity must be 'tanh' or 'relu', got '" + nonlinearity + "'").c_str());
    auto [ys, h] = rnn(time_major(x, batch_first), operand(h0, "h0"), operand(w_ih, "w_ih"), operand(w_hh, "w_hh"),
                       operand(b_ih, "b_ih"), operand(b_hh, "b_hh"), reverse, nonlinearity == "relu");
    return nb::make_tuple(batch_major(ys, batch_first), h);
  }, nb::arg("x"), nb::arg("h0"), nb::arg("w_ih"), nb::arg("w_hh"), nb::arg("b_ih"), nb::arg("b_hh"),
        nb::arg("reverse") = false, nb::arg("batch_first") = false, nb::arg("nonlinearity") = "tanh",
        "One Elman RNN layer as torch.nn.RNN computes it (w_ih [H, I], w_hh [H, H]): -> (ys, h_T).");
  m.def("scaled_dot_product_attention", [](nb::handle q, nb::handle k, nb::handle v, nb::handle mask, double scale,
                                           bool is_causal, int64_t causal_offset) {
    std::optional<Array> m;
    if (!mask.is_none()) m = operand(mask, "mask");
    return scaled_dot_product_attention(operand(q, "q"), operand(k, "k"), operand(v, "v"), m, scale, is_causal,
                                        causal_offset);
  }, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("mask").none() = nb::none(), nb::arg("scale") = 0.0,
        nb::arg("is_causal") = false, nb::arg("causal_offset") = 0,
        "softmax(q @ k^T * scale + mask) @ v as one op (q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv]); scale 0 "
        "means 1/sqrt(D); a bool mask is True where a query may attend, a float one is added; is_causal hides keys "
        "j > i + causal_offset; k and v may have fewer heads (axis -3) that divide q's (grouped-query attention).");
  m.def("conv2d", [](nb::handle x, nb::handle weight, nb::handle stride, nb::handle padding) {
    return conv2d(operand(x, "x"), operand(weight, "weight"), to_ints(stride, "stride"), to_ints(padding, "padding"));
  }, nb::arg("x"), nb::arg("weight"), nb::arg("stride") = nb::make_tuple(1, 1), nb::arg("padding") = nb::make_tuple(0, 0),
        "2-D convolution, NCHW input and OIHW weight (no bias).");
  m.def("max_pool2d", [](nb::handle x, nb::handle kernel_size, nb::handle stride, nb::handle padding, bool ceil_mode) {
    return max_pool2d(operand(x, "x"), to_ints(kernel_size, "kernel_size"),
                      stride.is_none() ? std::vector<int64_t>{} : to_ints(stride, "stride"), to_ints(padding, "padding"),
                      ceil_mode);
  }, nb::arg("x"), nb::arg("kernel_size"), nb::arg("stride").none() = nb::none(), nb::arg("padding") = 0,
        nb::arg("ceil_mode") = false,
        "Max pooling over (kh, kw) windows of an NCHW array (stride defaults to the window; padding counts as "
        "-inf; ceil_mode as in PyTorch: a last window past the padded end where the floor rule stops short).");

  m.def("reshape", [](nb::handle x, nb::handle shape) { return reshape(operand(x, "x"), to_ints(shape, "shape")); },
        nb::arg("x"), nb::arg("shape"), "The same data in a new shape; one -1 is inferred.");
  m.def("transpose", [](nb::handle x, nb::handle axes) { return transpose_axes(operand(x, "x"), axes); }, nb::arg("x"),
        nb::arg("axes").none() = nb::none(), "Permutes the axes (None reverses them).");
  m.def("broadcast_to", [](nb::handle x, nb::handle shape) { return broadcast_to(operand(x, "x"), to_ints(shape, "shape")); },
        nb::arg("x"), nb::arg("shape"), "x broadcast to `shape` (NumPy rules).");
  m.def("concatenate", [](nb::handle arrays, int64_t axis) {
    std::vector<Array> xs;
    for (nb::handle a : arrays) xs.push_back(operand(a, "each array"));
    return concatenate(xs, axis);
  }, nb::arg("arrays"), nb::arg("axis") = 0, "Joins arrays along an existing axis.");
  m.def("take", [](nb::handle x, nb::handle indices, int64_t axis) {
    return take(operand(x, "x"), operand(indices, "indices"), axis);
  }, nb::arg("x"), nb::arg("indices"), nb::arg("axis") = 0, "Elements at integer `indices` along `axis`.");
  m.def("take_along_axis", [](nb::handle x, nb::handle indices, int64_t axis) {
    return take_along_axis(operand(x, "x"), operand(indices, "indices"), axis);
  }, nb::arg("x"), nb::arg("indices"), nb::arg("axis"), "NumPy's take_along_axis.");
  m.def("one_hot", [](nb::handle labels, int64_t num_classes, nb::handle dtype) {
    return one_hot(operand(labels, "labels"), num_classes, to_dtype(dtype));
  }, nb::arg("labels"), nb::arg("num_classes"), nb::arg("dtype") = "float32",
        "Integer labels [...] as one-hot rows [..., num_classes]; a label outside [0, num_classes) gives a row of zeros.");

  m.def("zeros", [](nb::handle shape, nb::handle dtype) { return zeros(to_shape(shape), to_dtype(dtype)); },
        nb::arg("shape"), nb::arg("dtype") = "float32", "An array of zeros.");
  m.def("ones", [](nb::handle shape, nb::handle dtype) { return ones(to_shape(shape), to_dtype(dtype)); },
        nb::arg("shape"), nb::arg("dtype") = "float32", "An array of ones.");
  m.def("full", [](nb::handle shape, double value, nb::handle dtype) { return full(to_shape(shape), value, to_dtype(dtype)); },
        nb::arg("shape"), nb::arg("fill_value"), nb::arg("dtype") = "float32", "An array filled with `fill_value`.");
  m.def("arange", [](int64_t n, nb::handle dtype) { return arange(n, to_dtype(dtype)); }, nb::arg("n"),
        nb::arg("dtype") = "float32", "0, 1, ..., n - 1 (float32 unless `dtype` says otherwise, as in C++).");

  m.def("op", [](const std::string& name, nb::args inputs, nb::kwargs attrs) {
    std::vector<Array> xs;
    for (nb::handle x : inputs) xs.push_back(operand(x, "'" + name + "' input"));
    Attrs a;
    for (auto [k, v] : attrs) a.set(nb::cast<std::string>(k), to_attr(v, nb::cast<std::string>(k)));
    return op_result(op_n(name, xs, std::move(a)));
  }, nb::arg("name"), nb::arg("inputs"), nb::arg("attrs"),
        "Any op of the catalogue (ml.op_names()) by name: ml.op('gelu', x, approximate='tanh').\n"
        "Returns an array, or a tuple for ops with several outputs.");
  m.def("_eval", [](const std::vector<Array>& arrays) { eval(arrays); }, nb::arg("arrays"),
        "Evaluates the arrays as one graph (ml.eval flattens its arguments into this).");

  m.def("dropout", [](nb::handle x, double p, nb::handle key) { return dropout(operand(x, "x"), p, key_of(key)); },
        nb::arg("x"), nb::arg("p"), nb::arg("key").none() = nb::none(),
        "Inverted dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p).");
  m.def("_random_uniform", [](nb::handle shape, double low, double high, nb::handle dtype, nb::handle key) {
    return random::uniform(to_shape(shape), low, high, to_dtype(dtype), key_of(key));
  }, nb::arg("shape"), nb::arg("low"), nb::arg("high"), nb::arg("dtype"), nb::arg("key").none(),
        "ml.random.uniform's implementation.");
  m.def("_random_normal", [](nb::handle shape, double mean, double std, nb::handle dtype, nb::handle key) {
    return random::normal(to_shape(shape), mean, std, to_dtype(dtype), key_of(key));
  }, nb::arg("shape"), nb::arg("mean"), nb::arg("std"), nb::arg("dtype"), nb::arg("key").none(),
        "ml.random.normal's implementation.");
  m.def("_random_seed", [](uint64_t seed) { random::seed(seed); }, nb::arg("seed"), "ml.random.seed's implementation.");
  bind_catalogue_elementwise(m);
}

}  // namespace ingot::python
