// ONNX export: each catalogue op's ONNX form (opset 17). ingot's elementwise ops promote mixed
// operand dtypes where ONNX wants one type, so operands are cast to the op's computing type
// first; ops ONNX lacks are written with the ops it has (rsqrt, gelu, moments, layer_norm
// without a scale). The gradient ops and random sources have no ONNX form: exporting is for the
// forward model.
#include <cmath>
#include <limits>

#include "frontends/onnx/exporter.h"
#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot::onnx_export {
namespace {

using NP = ::onnx::NodeProto;

std::vector<int64_t> pair(const Node& n, const char* key, std::vector<int64_t> def) {
  std::vector<int64_t> v = n.attrs.get_ints(key, def);
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

// The shape of input i: a constant where its size is fixed, else a Shape node.
std::string shape_of(EmitContext& c, int i) {
  const Value& v = c.g.value(c.node.inputs.at(static_cast<size_t>(i)));
  if (v.shape_known && is_static(v.shape)) return c.ints(to_shape(v.shape));
  return c.add("Shape", {c.in(i)});
}

// Zeros of input i's shape in the result's type (into `outputs`, or a fresh name).
std::string zeros_of(EmitContext& c, int i, std::vector<std::string> outputs = {}) {
  return c.add("ConstantOfShape", {shape_of(c, i)}, std::move(outputs),
               [&](NP& n) { set_attr(n, "value", tensor_proto("", Tensor::full(c.out_dtype(), {1}, 0))); });
}

// Unary ops on the result's type.
void unary(std::map<std::string, Emitter>& t, const char* op, const char* onnx_op) {
  t[op] = [onnx_op](EmitContext& c) { c.add(onnx_op, {c.in_as(0, c.out_dtype())}, {c.out()}); };
}

// Binary arithmetic on the result's type.
void binary(std::map<std::string, Emitter>& t, const char* op, const char* onnx_op) {
  t[op] = [onnx_op](EmitContext& c) {
    c.add(onnx_op, {c.in_as(0, c.out_dtype()), c.in_as(1, c.out_dtype())}, {c.out()});
  };
}

// Comparisons on the operands' promoted type; `negate` for not_equal (Not of Equal).
void compare(std::map<std::string, Emitter>& t, const char* op, const char* onnx_op, bool negate = false) {
  t[op] = [onnx_op, negate](EmitContext& c) {
    const DType p = promote_types(c.in_dtype(0), c.in_dtype(1));
    if (!negate) {
      c.add(onnx_op, {c.in_as(0, p), c.in_as(1, p)}, {c.out()});
      return;
    }
    c.add("Not", {c.add(onnx_op, {c.in_as(0, p), c.in_as(1, p)})}, {c.out()});
  };
}

// ReduceMean of v over the node's trailing dims {axis = -1}..end, keeping them (layer_norm's and
// rms_norm's statistics written out).
std::string trailing_mean(EmitContext& c, const std::string& v) {
  const int64_t r = static_cast<int64_t>(c.g.value(c.node.inputs[0]).shape.size());
  const int64_t axis = c.node.attrs.get_int("axis", -1);
  std::vector<int64_t> axes;
  for (int64_t a = axis < 0 ? axis + r : axis; a < r; ++a) axes.push_back(a);
  return c.add("ReduceMean", {v}, {}, [&](NP& n) {
    set_attr(n, "axes", axes);
    set_attr(n, "keepdims", int64_t{1});
  });
}

// Reductions: ReduceSum takes its axes as an input (opset 13), the others as an attribute
// (until opset 18); no axes reduces everything in both.
void reduction(std::map<std::string, Emitter>& t, const char* op, const char* onnx_op) {
  t[op] = [onnx_op](EmitContext& c) {
    const std::vector<int64_t> axes = c.node.attrs.get_ints("axes", {});
    const int64_t keepdims = c.node.attrs.get_int("keepdims", 0);
    const std::string x = c.in_as(0, std::string(onnx_op) == "ReduceSum" || std::string(onnx_op) == "ReduceMean"
                                         ? c.out_dtype() : c.in_dtype(0));
    if (std::string(onnx_op) == "ReduceSum") {
      std::vector<std::string> ins = {x};
      if (!axes.empty()) ins.push_back(c.ints(axes));
      c.add(onnx_op, ins, {c.out()}, [&](NP& n) { set_attr(n, "keepdims", keepdims); });
      return;
    }
    c.add(onnx_op, {x}, {c.out()}, [&](NP& n) {
      if (!axes.empty()) set_attr(n, "axes", axes);
      set_attr(n, "keepdims", keepdims);
    });
  };
}

std::map<std::string, Emitter> make_table() {
  std::map<std::string, Emitter> t;
  // The elementwise ops whose definition names their ONNX operator (ElementwiseForms::onnx).
  for (const OpDef* op : all_ops()) {
    if (!op->elementwise || op->elementwise->onnx.empty()) continue;
    const char* onnx_op = op->elementwise->onnx.c_str();  // the registry outlives the table
    switch (op->elementwise->kind) {
      case ElementwiseForms::Kind::UnaryFloat:
      case ElementwiseForms::Kind::UnarySame: unary(t, op->name.c_str(), onnx_op); break;
      case ElementwiseForms::Kind::Binary: binary(t, op->name.c_str(), onnx_op); break;
      case ElementwiseForms::Kind::Compare: compare(t, op->name.c_str(), onnx_op); break;
      default: INGOT_CHECK(false, "ONNX export: op '", op->name, "' names ONNX ", onnx_op, " but is not unary, binary or a comparison");
    }
  }
  unary(t, "identity", "Identity");
  compare(t, "not_equal", "Equal", true);
  reduction(t, "sum", "ReduceSum");
  reduction(t, "mean", "ReduceMean");
  reduction(t, "max", "ReduceMax");
  reduction(t, "min", "ReduceMin");

  // fmod is ONNX's Mod with fmod=1; mod (the divisor's sign) is Mod with fmod=0 for integers, and
  // for floats (where ONNX requires fmod=1) the C remainder moved into the divisor's sign.
  t["fmod"] = [](EmitContext& c) {
    const DType t = c.out_dtype();
    c.add("Mod", {c.in_as(0, t), c.in_as(1, t)}, {c.out()}, [](NP& n) { set_attr(n, "fmod", int64_t{1}); });
  };
  t["mod"] = [](EmitContext& c) {
    const DType t = c.out_dtype();
    const std::string a = c.in_as(0, t), b = c.in_as(1, t);
    if (!is_floating(t)) {
      c.add("Mod", {a, b}, {c.out()}, [](NP& n) { set_attr(n, "fmod", int64_t{0}); });
      return;
    }
    const std::string r = c.add("Mod", {a, b}, {}, [](NP& n) { set_attr(n, "fmod", int64_t{1}); });
    const std::string zero = c.scalar(0.0, t);
    const std::string other_side = c.add("Xor", {c.add("Less", {r, zero}), c.add("Less", {b, zero})});
    const std::string moved = c.add("And", {c.add("Not", {c.add("Equal", {r, zero})}), other_side});
    c.add("Where", {moved, c.add("Add", {r, b}), r}, {c.out()});
  };
  t["rsqrt"] = [](EmitContext& c) { c.add("Reciprocal", {c.add("Sqrt", {c.in_as(0, c.out_dtype())})}, {c.out()}); };
  t["cast"] = [](EmitContext& c) {
    c.add("Cast", {c.in(0)}, {c.out()}, [&](NP& n) { set_attr(n, "to", int64_t{onnx_type(c.out_dtype())}); });
  };
  // where(cond, a, b): a where cond is nonzero (ONNX's Cast to bool is x != 0).
  t["where"] = [](EmitContext& c) {
    c.add("Where", {c.in_as(0, DType::Bool), c.in_as(1, c.out_dtype()), c.in_as(2, c.out_dtype())}, {c.out()});
  };
  t["gelu"] = [](EmitContext& c) {
    const DType d = c.out_dtype();
    const std::string x = c.in_as(0, d);
    std::string inner;
    if (c.node.attrs.get_string("approximate", "none") == "tanh") {
      // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const std::string cube = c.add("Mul", {c.add("Mul", {x, x}), x});
      const std::string s = c.add("Add", {x, c.add("Mul", {cube, c.scalar(0.044715, d)})});
      inner = c.add("Tanh", {c.add("Mul", {s, c.scalar(std::sqrt(2.0 / M_PI), d)})});
    } else {
      inner = c.add("Erf", {c.add("Mul", {x, c.scalar(M_SQRT1_2, d)})});  // 0.5 x (1 + erf(x / sqrt 2))
    }
    const std::string half_x = c.add("Mul", {x, c.scalar(0.5, d)});
    c.add("Mul", {half_x, c.add("Add", {inner, c.scalar(1.0, d)})}, {c.out()});
  };
  t["dropout"] = [](EmitContext& c) {
    if (c.node.attrs.get_int("training", 0) != 0 && c.node.attrs.get_float("p", 0) > 0)
      c.fail("dropout in training mode has no ONNX form (export for inference)");
    c.add("Identity", {c.in(0)}, {c.out()});
  };

  t["matmul"] = [](EmitContext& c) { c.add("MatMul", {c.in_as(0, c.out_dtype()), c.in_as(1, c.out_dtype())}, {c.out()}); };
  t["conv2d"] = [](EmitContext& c) {
    const std::vector<int64_t> stride = pair(c.node, "stride", {1, 1}), pad = pair(c.node, "padding", {0, 0}),
                               dilation = pair(c.node, "dilation", {1, 1});
    std::vector<std::string> ins = {c.in(0), c.in(1)};
    if (c.num_inputs() > 2) ins.push_back(c.in(2));
    c.add("Conv", ins, {c.out()}, [&](NP& n) {
      set_attr(n, "strides", stride);
      set_attr(n, "pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]});
      set_attr(n, "dilations", dilation);
      set_attr(n, "group", c.node.attrs.get_int("groups", 1));
    });
  };
  // conv2d_input_grad: a transposed convolution (what an imported ConvTranspose is); the
  // output_padding makes up what the convolution's floor division dropped.
  t["conv2d_input_grad"] = [](EmitContext& c) {
    const std::vector<int64_t> stride = pair(c.node, "stride", {1, 1}), pad = pair(c.node, "padding", {0, 0}),
                               dilation = pair(c.node, "dilation", {1, 1});
    const Value &dy = c.g.value(c.node.inputs[0]), &w = c.g.value(c.node.inputs[1]), &like = c.g.value(c.node.inputs[2]);
    if (!is_static(dy.shape) || !is_static(w.shape) || !is_static(like.shape))
      c.fail("a transposed convolution of sizes known only at run time");
    const Shape ds = to_shape(dy.shape), ws = to_shape(w.shape), ls = to_shape(like.shape);
    std::vector<int64_t> out_pad(2);
    for (size_t i = 0; i < 2; ++i)
      out_pad[i] = ls[2 + i] - (stride[i] * (ds[2 + i] - 1) + (ws[2 + i] - 1) * dilation[i] + 1 - 2 * pad[i]);
    c.add("ConvTranspose", {c.in(0), c.in(1)}, {c.out()}, [&](NP& n) {
      set_attr(n, "strides", stride);
      set_attr(n, "pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]});
      set_attr(n, "dilations", dilation);
      set_attr(n, "group", c.node.attrs.get_int("groups", 1));
      set_attr(n, "output_padding", out_pad);
    });
  };
  // Pools: ingot's stride defaults to the kernel; its average counts padding unless told not to.
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    t[op] = [op](EmitContext& c) {
      const std::vector<int64_t> kernel = pair(c.node, "kernel", {1, 1});
      const std::vector<int64_t> stride = pair(c.node, "stride", kernel), pad = pair(c.node, "padding", {0, 0});
      const bool max = std::string(op) == "max_pool2d";
      c.add(max ? "MaxPool" : "AveragePool", {c.in(0)}, {c.out()}, [&](NP& n) {
        set_attr(n, "kernel_shape", kernel);
        set_attr(n, "strides", stride);
        set_attr(n, "pads", std::vector<int64_t>{pad[0], pad[1], pad[0], pad[1]});
        if (!max) set_attr(n, "count_include_pad", c.node.attrs.get_int("count_include_pad", 1));
        if (max && c.node.attrs.get_int("ceil_mode", 0) != 0) set_attr(n, "ceil_mode", int64_t{1});
      });
    };
  }
  t["global_avg_pool2d"] = [](EmitContext& c) {
    if (c.node.attrs.get_int("keepdims", 0) != 0) {
      c.add("GlobalAveragePool", {c.in(0)}, {c.out()});
      return;
    }
    c.add("Flatten", {c.add("GlobalAveragePool", {c.in(0)})}, {c.out()}, [](NP& n) { set_attr(n, "axis", int64_t{1}); });
  };
  t["batch_norm"] = [](EmitContext& c) {
    c.add("BatchNormalization", {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4)}, {c.out()},
          [&](NP& n) { set_attr(n, "epsilon", static_cast<float>(c.node.attrs.get_float("eps", 1e-5))); });
  };
  t["layer_norm"] = [](EmitContext& c) {
    const int64_t axis = c.node.attrs.get_int("axis", -1);
    const float eps = static_cast<float>(c.node.attrs.get_float("eps", 1e-5));
    if (c.num_inputs() > 1) {
      std::vector<std::string> ins = {c.in(0), c.in(1)};
      if (c.num_inputs() > 2) ins.push_back(c.in(2));
      c.add("LayerNormalization", ins, {c.out()}, [&](NP& n) {
        set_attr(n, "axis", axis);
        set_attr(n, "epsilon", eps);
      });
      return;
    }
    // No scale (ONNX requires one): (x - mean) / sqrt(var + eps) over axis..end, written out.
    const std::string d = c.add("Sub", {c.in(0), trailing_mean(c, c.in(0))});
    const std::string var = trailing_mean(c, c.add("Mul", {d, d}));
    c.add("Div", {d, c.add("Sqrt", {c.add("Add", {var, c.scalar(eps, c.out_dtype())})})}, {c.out()});
  };
  // RMSNormalization arrives in opset 23: x / sqrt(mean(x^2) + eps) [* weight], written out.
  t["rms_norm"] = [](EmitContext& c) {
    const float eps = static_cast<float>(c.node.attrs.get_float("eps", 1e-5));
    const std::string ms = trailing_mean(c, c.add("Mul", {c.in(0), c.in(0)}));
    const std::string rms = c.add("Sqrt", {c.add("Add", {ms, c.scalar(eps, c.out_dtype())})});
    if (c.num_inputs() > 1) c.add("Mul", {c.add("Div", {c.in(0), rms}), c.in(1)}, {c.out()});
    else c.add("Div", {c.in(0), rms}, {c.out()});
  };
  for (const auto& entry : std::vector<std::pair<const char*, const char*>>{{"softmax", "Softmax"},
                                                                          {"log_softmax", "LogSoftmax"}}) {
    const char* onnx_op = entry.second;  // (clang 14 cannot capture a structured binding)
    t[entry.first] = [onnx_op](EmitContext& c) {
      c.add(onnx_op, {c.in(0)}, {c.out()}, [&](NP& n) { set_attr(n, "axis", c.node.attrs.get_int("axis", -1)); });
    };
  }
  t["argmax"] = [](EmitContext& c) {
    c.add("ArgMax", {c.in(0)}, {c.out()}, [&](NP& n) {
      set_attr(n, "axis", c.node.attrs.get_int("axis"));
      set_attr(n, "keepdims", c.node.attrs.get_int("keepdims", 0));
    });
  };
  t["top_k"] = [](EmitContext& c) {
    c.add("TopK", {c.in(0), c.ints({c.node.attrs.get_int("k")})}, {c.out(0), c.out(1)}, [&](NP& n) {
      set_attr(n, "axis", c.node.attrs.get_int("axis", -1));
      set_attr(n, "largest", c.node.attrs.get_int("largest", 1));
      set_attr(n, "sorted", int64_t{1});
    });
  };
  // moments: (mean, biased variance) over axes; half types computed in float32 and rounded
  // once, as ingot's kernels do.
  t["moments"] = [](EmitContext& c) {
    const std::vector<int64_t> axes = c.node.attrs.get_ints("axes", {});
    const int64_t keepdims = c.node.attrs.get_int("keepdims", 0);
    const DType out = c.out_dtype(0);
    const bool widen = out == DType::Float16 || out == DType::BFloat16;
    const std::string x = c.in_as(0, widen ? DType::Float32 : out);
    auto mean = [&](const std::string& v, int64_t keep) {
      return c.add("ReduceMean", {v}, {}, [&](NP& n) {
        if (!axes.empty()) set_attr(n, "axes", axes);
        set_attr(n, "keepdims", keep);
      });
    };
    auto result = [&](const std::string& v, int i) {
      c.add(widen ? "Cast" : "Identity", {v}, {c.out(i)}, [&](NP& n) {
        if (widen) set_attr(n, "to", int64_t{onnx_type(out)});
      });
    };
    const std::string m = mean(x, 1);
    result(keepdims ? m : mean(x, 0), 0);
    const std::string d = c.add("Sub", {x, m});
    result(mean(c.add("Mul", {d, d}), keepdims), 1);
  };
  // numel: the element count over axes, of the dtype asked for (a constant where the size is
  // fixed).
  t["numel"] = [](EmitContext& c) {
    const std::vector<int64_t> axes = c.node.attrs.get_ints("axes", {});
    const Value& x = c.g.value(c.node.inputs[0]);
    if (x.shape_known && is_static(x.shape)) {
      const Shape s = to_shape(x.shape);
      int64_t n = 1;
      if (axes.empty())
        for (int64_t d : s) n *= d;
      for (int64_t a : axes) n *= s[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(s.size()) : a)];
      c.add("Identity", {c.scalar(static_cast<double>(n), c.out_dtype())}, {c.out()});
      return;
    }
    const std::string size = shape_of(c, 0);
    const std::string picked = axes.empty() ? size : c.add("Gather", {size, c.ints(axes)});
    const std::string count = c.add("ReduceProd", {picked}, {}, [](NP& n) { set_attr(n, "keepdims", int64_t{0}); });
    c.add("Cast", {count}, {c.out()}, [&](NP& n) { set_attr(n, "to", int64_t{onnx_type(c.out_dtype())}); });
  };

  t["reshape"] = [](EmitContext& c) { c.add("Reshape", {c.in(0), c.ints(c.node.attrs.get_ints("shape"))}, {c.out()}); };
  t["reshape_like"] = [](EmitContext& c) { c.add("Reshape", {c.in(0), shape_of(c, 1)}, {c.out()}); };
  t["transpose"] = [](EmitContext& c) {
    const std::vector<int64_t> perm = c.node.attrs.get_ints("perm", {});
    c.add("Transpose", {c.in(0)}, {c.out()}, [&](NP& n) {
      if (!perm.empty()) set_attr(n, "perm", perm);
    });
  };
  t["expand_dims"] = [](EmitContext& c) { c.add("Unsqueeze", {c.in(0), c.ints(c.node.attrs.get_ints("axes"))}, {c.out()}); };
  t["broadcast_to"] = [](EmitContext& c) { c.add("Expand", {c.in(0), c.ints(c.node.attrs.get_ints("shape"))}, {c.out()}); };
  t["broadcast_to_like"] = [](EmitContext& c) { c.add("Expand", {c.in(0), shape_of(c, 1)}, {c.out()}); };
  t["zeros_like"] = [](EmitContext& c) { zeros_of(c, 0, {c.out()}); };
  t["slice"] = [](EmitContext& c) {
    const std::vector<int64_t> starts = c.node.attrs.get_ints("starts"), ends = c.node.attrs.get_ints("ends");
    std::vector<int64_t> axes = c.node.attrs.get_ints("axes", {});
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    const std::vector<int64_t> steps = c.node.attrs.get_ints("steps", std::vector<int64_t>(starts.size(), 1));
    c.add("Slice", {c.in(0), c.ints(starts), c.ints(ends), c.ints(axes), c.ints(steps)}, {c.out()});
  };
  t["concat"] = [](EmitContext& c) {
    std::vector<std::string> ins;
    for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.in_as(i, c.out_dtype()));
    c.add("Concat", ins, {c.out()}, [&](NP& n) { set_attr(n, "axis", c.node.attrs.get_int("axis", 0)); });
  };
  t["gather"] = [](EmitContext& c) {
    c.add("Gather", {c.in(0), c.in(1)}, {c.out()}, [&](NP& n) { set_attr(n, "axis", c.node.attrs.get_int("axis", 0)); });
  };
  t["take_along_axis"] = [](EmitContext& c) {
    c.add("GatherElements", {c.in(0), c.in(1)}, {c.out()}, [&](NP& n) { set_attr(n, "axis", c.node.attrs.get_int("axis")); });
  };
  // The gradient-side scatters (what a differentiated gather or take_along_axis writes):
  // ScatterElements adding into zeros. index_add's indices pick whole rows, so they are
  // broadcast to the updates' shape first.
  t["scatter_add"] = [](EmitContext& c) {
    const std::string zeros = zeros_of(c, 0);
    c.add("ScatterElements", {zeros, c.in(1), c.in_as(2, c.out_dtype())}, {c.out()}, [&](NP& n) {
      set_attr(n, "axis", c.node.attrs.get_int("axis", 0));
      set_attr(n, "reduction", std::string("add"));
    });
  };
  t["index_add"] = [](EmitContext& c) {
    if (c.g.value(c.node.inputs[1]).shape.size() != 1) c.fail("index_add with indices of rank other than 1");
    const Value& updates = c.g.value(c.node.inputs[2]);
    const int64_t r = static_cast<int64_t>(updates.shape.size());
    int64_t axis = c.node.attrs.get_int("axis", 0);
    if (axis < 0) axis += r;
    std::vector<int64_t> shape(static_cast<size_t>(r), 1);
    shape[static_cast<size_t>(axis)] = -1;
    const std::string idx = c.add("Expand", {c.add("Reshape", {c.in(1), c.ints(shape)}), shape_of(c, 2)});
    const std::string zeros = zeros_of(c, 0);
    c.add("ScatterElements", {zeros, idx, c.in_as(2, c.out_dtype())}, {c.out()}, [&](NP& n) {
      set_attr(n, "axis", axis);
      set_attr(n, "reduction", std::string("add"));
    });
  };
  // sum_to_like: the broadcast dims summed away (fixed sizes needed to name them).
  t["sum_to_like"] = [](EmitContext& c) {
    const Value &x = c.g.value(c.node.inputs[0]), &like = c.g.value(c.node.inputs[1]);
    if (!is_static(x.shape) || !is_static(like.shape)) c.fail("sum_to_like of sizes known only at run time");
    const Shape xs = to_shape(x.shape), ls = to_shape(like.shape);
    const size_t lead = xs.size() - ls.size();
    std::vector<int64_t> axes;
    for (size_t i = 0; i < xs.size(); ++i)
      if (i < lead || (ls[i - lead] == 1 && xs[i] != 1)) axes.push_back(static_cast<int64_t>(i));
    const std::string summed = axes.empty() ? c.in(0) : c.add("ReduceSum", {c.in(0), c.ints(axes)}, {}, [](NP& n) {
      set_attr(n, "keepdims", int64_t{1});
    });
    c.add("Reshape", {summed, c.ints(ls)}, {c.out()});
  };
  // concat_part: the slice of grad that concat took from input `index`.
  t["concat_part"] = [](EmitContext& c) {
    const int64_t index = c.node.attrs.get_int("index");
    const Value& grad = c.g.value(c.node.inputs[0]);
    const int64_t r = static_cast<int64_t>(grad.shape.size());
    int64_t axis = c.node.attrs.get_int("axis", 0);
    if (axis < 0) axis += r;
    int64_t start = 0;
    for (int64_t i = 0; i < index; ++i) {
      const SymDim& d = c.g.value(c.node.inputs[static_cast<size_t>(1 + i)]).shape[static_cast<size_t>(axis)];
      if (!d.known()) c.fail("concat_part of sizes known only at run time");
      start += d.value;
    }
    const SymDim& own = c.g.value(c.node.inputs[static_cast<size_t>(1 + index)]).shape[static_cast<size_t>(axis)];
    if (!own.known()) c.fail("concat_part of sizes known only at run time");
    c.add("Slice", {c.in(0), c.ints({start}), c.ints({start + own.value}), c.ints({axis})}, {c.out()});
  };
  // scaled_dot_product_attention written out (opset 17 has no Attention): softmax(scale q k^T,
  // masked) v, grouped-query heads repeated as ONNX's Attention repeats them (each key/value head
  // G times in a row), the causal mask a constant (so its sequence lengths must be static).
  t["scaled_dot_product_attention"] = [](EmitContext& c) {
    const SymShape &qs = c.g.value(c.node.inputs[0]).shape, &ks = c.g.value(c.node.inputs[1]).shape;
    const size_t r = qs.size();
    const DType dt = c.out_dtype();
    auto repeat_heads = [&](int i) {
      const SymShape& s = c.g.value(c.node.inputs[static_cast<size_t>(i)]).shape;
      if (r < 3 || (qs[r - 3].known() && s[r - 3].known() && qs[r - 3].value == s[r - 3].value)) return c.in(i);
      if (!qs[r - 3].known() || !s[r - 3].known() || !s[r - 2].known() || !s[r - 1].known())
        c.fail("grouped-query attention with head counts or key lengths known only at run time");
      // [..., Hk, Sk, D] -> [..., Hk, G, Sk, D] (G copies side by side) -> [..., Hq, Sk, D]; the
      // leading dims copied through Reshape's 0, so a batch size known only at run time works.
      std::vector<int64_t> target(r - 3, 0);
      target.insert(target.end(), {-1, s[r - 2].value, s[r - 1].value});
      const std::string u = c.add("Unsqueeze", {c.in(i), c.ints({static_cast<int64_t>(r) - 2})});
      const std::vector<std::string> copies(static_cast<size_t>(qs[r - 3].value / s[r - 3].value), u);
      const std::string side_by_side =
          c.add("Concat", copies, {}, [&](NP& n) { set_attr(n, "axis", static_cast<int64_t>(r) - 2); });
      return c.add("Reshape", {side_by_side, c.ints(target)});
    };
    std::vector<int64_t> perm(r);
    for (size_t a = 0; a < r; ++a) perm[a] = static_cast<int64_t>(a);
    std::swap(perm[r - 1], perm[r - 2]);
    const std::string kt = c.add("Transpose", {repeat_heads(1)}, {}, [&](NP& n) { set_attr(n, "perm", perm); });
    double scale = c.node.attrs.get_float("scale", 0.0);
    if (scale == 0.0) {
      if (!qs[r - 1].known()) c.fail("attention with a default scale and a head size known only at run time");
      scale = 1.0 / std::sqrt(static_cast<double>(qs[r - 1].value));
    }
    std::string scores = c.add("Mul", {c.add("MatMul", {c.in(0), kt}), c.scalar(scale, dt)});
    const std::string hidden = c.scalar(-std::numeric_limits<double>::infinity(), dt);
    if (c.num_inputs() > 3)
      scores = c.in_dtype(3) == DType::Bool ? c.add("Where", {c.in(3), scores, hidden}) : c.add("Add", {scores, c.in(3)});
    if (c.node.attrs.get_int("causal", 0) != 0) {
      if (!qs[r - 2].known() || !ks[r - 2].known()) c.fail("causal attention with sequence lengths known only at run time");
      const int64_t sq = qs[r - 2].value, sk = ks[r - 2].value, offset = c.node.attrs.get_int("causal_offset", 0);
      Tensor visible(DType::Bool, {sq, sk});
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < sk; ++j) visible.data<bool>()[i * sk + j] = j <= i + offset;
      scores = c.add("Where", {c.constant(visible), scores, hidden});
    }
    const std::string p = c.add("Softmax", {scores}, {}, [](NP& n) { set_attr(n, "axis", int64_t{-1}); });
    c.add("MatMul", {p, repeat_heads(2)}, {c.out()});
  };
  add_control_flow_emitters(t);
  return t;
}

}  // namespace

const std::map<std::string, Emitter>& emitters() {
  static const std::map<std::string, Emitter> table = make_table();
  return table;
}

}  // namespace ingot::onnx_export
