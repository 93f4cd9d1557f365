// The op registry: one OpDef per op, holding everything the compiler knows about it side by side
// (arity, shape rule, dtype rule, reference kernel, fusion class). Op families register their
// ops from src/ops/<family>.cpp; nothing else in the compiler special-cases an op by name unless
// it is a pass that rewrites that op.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ingot/tensor.h"

namespace ingot {

// How an op may be fused by backends (consumed by the fusion pass).
enum class FusionClass {
  Elementwise,  // out[i] = f(in[i], ...) with broadcasting: fuses into loops
  Reduction,    // reduces axes: elementwise producers fuse into it
  RowKernel,    // softmax, layer norm, batch norm: fused per-row kernels
  Injective,    // data movement: reshape, transpose, slice, concat, gather, broadcast
  Dense,        // matmul, conv: library kernel with fusible epilogue
  Source,       // random: no data inputs
  Opaque,       // everything else
};
std::string_view fusion_class_name(FusionClass c);

using DimVar = int32_t;

// What an op's shape rule sees: symbolic dimensions (union-find variables) of its inputs and
// outputs. Rules run repeatedly until nothing changes, so they must be idempotent and may run
// before all input ranks are known (then they do what they can and return). Information flows
// both ways: unifying an output dim with an input dim constrains whichever is still unknown.
class ShapeInfer {
 public:
  virtual ~ShapeInfer() = default;
  virtual const Node& node() const = 0;
  ValueId in(int i) const { return node().inputs.at(static_cast<size_t>(i)); }
  ValueId out(int i = 0) const { return node().outputs.at(static_cast<size_t>(i)); }
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  const Attrs& attrs() const { return node().attrs; }

  virtual bool has_rank(ValueId v) const = 0;
  virtual int rank(ValueId v) const = 0;  // requires has_rank
  virtual DimVar dim(ValueId v, int axis) const = 0;  // axis < 0 counts from the end
  // Gives `v` rank r (fresh unknown dims) or checks it already has rank r.
  virtual void set_rank(ValueId v, int r) = 0;
  virtual void unify(DimVar a, DimVar b) = 0;
  virtual void bind(DimVar d, int64_t size) = 0;
  virtual std::optional<int64_t> value(DimVar d) const = 0;
  // The representative of d's class: two dims unified so far have the same root.
  virtual DimVar root(DimVar d) const = 0;
  // out = broadcast(a, b) by NumPy's rule; unresolved pairs (two different unknown symbols)
  // are decided after the fixpoint by assuming they are equal.
  virtual void broadcast(DimVar a, DimVar b, DimVar out) = 0;
  // Throws ingot::Error naming the node, its scope and the values involved.
  [[noreturn]] virtual void fail(const std::string& message) const = 0;
  // Records an assumption a control-flow op's subgraph inference made (two unknown sizes
  // broadcast taken as equal), so the enclosing inference reports it as its own.
  virtual void assume(const std::string& what) = 0;

  // Helpers built from the primitives above.
  bool ready(std::initializer_list<ValueId> vs) const {
    for (ValueId v : vs)
      if (!has_rank(v)) return false;
    return true;
  }
  void set_dims(ValueId v, const std::vector<DimVar>& dims) {
    set_rank(v, static_cast<int>(dims.size()));
    for (size_t i = 0; i < dims.size(); ++i) unify(dim(v, static_cast<int>(i)), dims[i]);
  }
  std::vector<DimVar> dims(ValueId v) const {
    std::vector<DimVar> out;
    for (int i = 0; i < rank(v); ++i) out.push_back(dim(v, i));
    return out;
  }
  // a and b have identical shapes; whichever has a known rank gives it to the other.
  void same_shape(ValueId a, ValueId b) {
    if (has_rank(a)) set_dims(b, dims(a));
    else if (has_rank(b)) set_dims(a, dims(b));
  }
  // Normalizes a possibly negative axis against rank r, failing with a clear message.
  int normalize_axis(int64_t axis, int r) const {
    if (axis < -r || axis >= r)
      fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
    return static_cast<int>(axis < 0 ? axis + r : axis);
  }
};

using ShapeRule = void (*)(ShapeInfer& s);

// What an op's gradient rule (its vector-Jacobian product) sees while reverse-mode autodiff
// (src/compiler/autodiff.h) walks the graph backwards: the forward node with the inferred shapes
// and dtypes of its values, the cotangent of each output, and which inputs need a gradient. The
// rule adds backward ops with op() and hands each input's gradient to set_grad(), which
// accumulates (adds) when called twice for one input. Shapes may be symbolic ("N"): rules use
// the *_like helpers rather than sizes, so one backward graph serves every batch size.
class VjpContext {
 public:
  virtual ~VjpContext() = default;
  virtual const Node& node() const = 0;
  ValueId in(int i) const { return node().inputs.at(static_cast<size_t>(i)); }
  ValueId out(int i = 0) const { return node().outputs.at(static_cast<size_t>(i)); }
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  const Attrs& attrs() const { return node().attrs; }

  // Inferred shape and dtype of any value, forward or backward.
  virtual const SymShape& shape(ValueId v) const = 0;
  virtual DType dtype(ValueId v) const = 0;
  int rank(ValueId v) const { return static_cast<int>(shape(v).size()); }
  // The cotangent of output i, or -1 when no gradient reaches that output.
  virtual ValueId grad_out(int i = 0) const = 0;
  // Whether input i lies on a path from a differentiated value (set_grad is ignored otherwise).
  virtual bool needs_grad(int i) const = 0;
  // Appends a backward node (shape and dtype inferred at once); returns its outputs.
  virtual std::vector<ValueId> op_n(const std::string& op, std::vector<ValueId> inputs,
                                    Attrs attrs, int num_outputs) = 0;
  // The same for a control-flow op, whose node owns `subgraphs` (their values inferred too).
  virtual std::vector<ValueId> op_with_subgraphs(const std::string& op, std::vector<ValueId> inputs, Attrs attrs,
                                                 std::vector<Graph> subgraphs, int num_outputs) = 0;
  // A scalar constant of `dtype`.
  virtual ValueId scalar(double value, DType dtype) = 0;
  // Adds `grad` (shaped and typed like input i) to input i's gradient.
  virtual void set_grad(int i, ValueId grad) = 0;

  // Helpers (src/ir/vjp_context.cpp), built from the primitives above.
  ValueId op(const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {}) {
    return op_n(op, std::move(inputs), std::move(attrs), 1)[0];
  }
  ValueId scalar_like(double value, ValueId like) { return scalar(value, dtype(like)); }
  // `grad` (broadcast-shaped) summed down to the shape of `like`: the gradient of an operand
  // that NumPy broadcasting expanded. A plain `sum` when the shapes decide the axes.
  ValueId sum_to_like(ValueId grad, ValueId like);
  // `x` broadcast up to the shape of `like`.
  ValueId broadcast_to_like(ValueId x, ValueId like);
  // `x` reshaped to the shape of `like` (same element count); a static reshape when it can be.
  ValueId reshape_like(ValueId x, ValueId like);
  // `x` with size-1 axes inserted at `axes` (of the result), undoing a keepdims=0 reduction.
  ValueId expand_dims(ValueId x, const std::vector<int64_t>& axes);
  // The number of elements of `x` over `axes` (all when empty) as a scalar of `dtype`:
  // a constant when those sizes are static.
  ValueId count(ValueId x, const std::vector<int64_t>& axes, DType dtype);
  ValueId zeros_like(ValueId x) { return op("zeros_like", {x}); }
  // An input's dtype for a gradient of another dtype (a cast only when they differ).
  ValueId cast_like(ValueId x, ValueId like);
};

// The op's gradient rule: calls ctx.set_grad for the inputs that need one. An op whose
// gradient is zero or undefined (comparisons, sign, argmax, random sources) registers
// `no_gradient` so gradients stop there; an op without a rule that a gradient must cross is an
// error naming the op and its scope.
using VjpRule = void (*)(VjpContext& ctx);
void no_gradient(VjpContext& ctx);
// Fills `out` (one dtype per output) from the input dtypes; throws on invalid input dtypes.
using DTypeRule = void (*)(const Node& n, std::span<const DType> in, std::span<DType> out);
// Reference kernel: inputs are contiguous; the kernel allocates each outputs[i] itself
// (contiguous) with the concrete shape it computes from its inputs.
using Kernel = void (*)(const Node& n, std::span<const Tensor> inputs, std::span<Tensor> outputs);

// Attributes for a random program of the differential fuzzer (fuzz/programs.h): drawn from `seed`
// for operands of these static shapes. Ops whose attributes all have defaults need none; an op
// with a required attribute and no sampler is never generated (the fuzzer reports it).
using AttrSampler = Attrs (*)(std::span<const Shape> inputs, uint64_t seed);

// For ops whose operands must hold particular values or shapes that values drawn at random from
// a program rarely have: indices in range (gather, take_along_axis, index_add, scatter_add),
// per-channel statistics with a positive variance (batch_norm), an update shaped like the slice
// it fills (slice_scatter). Given the shapes of the operands the fuzzer drew, the sampler returns
// the attributes and, for each operand slot it sets, a tensor the fuzzer feeds instead (a new
// input of the program). Slots it leaves empty keep the drawn value, so the op still reads the
// program's own values where it can. An op has an AttrSampler or an OperandSampler, not both.
struct SampledOperands {
  Attrs attrs;
  std::vector<std::optional<Tensor>> operands;  // by slot; empty or nullopt: the drawn value
};
using OperandSampler = SampledOperands (*)(std::span<const Shape> inputs, uint64_t seed);

// How an elementwise op is written outside its reference kernel: by the CPU code generator, the
// Python emitters and ONNX import/export. It sits in the op's definition (src/ops/<family>.cpp),
// and those consumers read it instead of keeping op tables of their own, so that adding an
// elementwise op is one definition plus its test.
struct ElementwiseForms {
  // How generated C++ computes one element (with the reference kernel's semantics):
  enum class Kind {
    UnaryFloat,  // fn<C>(x), C the floating compute type of the result (integers compute in float32)
    UnarySame,   // fn<C>(x), C the compute type of the result
    Binary,      // fn<C>(a, b), both operands converted to the result's compute type
    Compare,     // a <fn> b (a C++ operator) in the operands' promoted compute type; bool result
    Cast,        // the operand converted to the result's dtype
    Where,       // cond ? a : b
    Identity,    // the first operand unchanged (dropout at inference; broadcast_to_like)
  };
  Kind kind = Kind::Identity;
  // The generated code's function (ig_exp) or, for Compare, the operator ("<").
  std::string cpu_function = {};
  // Its definition, a template over the compute type C, pasted into every generated program in
  // the order ops register; it may use the prelude's helpers (ig_wrap, ig_cast, the ig_v* vector
  // math). Written apart from the reference kernel on purpose: the oracle shares no code with the
  // backends it checks.
  std::string cpu_source = {};
  // float32 compute calls the prelude's vector math ig_v<name> (ig_vexp for ig_exp) instead.
  bool cpu_vector_math = false;
  // The function for these attributes when it is not cpu_function (gelu's tanh form), or nullptr.
  std::string (*cpu_variant)(const Node& n) = nullptr;
  // The op as a Python expression over its operands (x; or a, b) and functions of the Python
  // array API standard (exp, where, zeros_like...), which the NumPy, JAX, PyTorch and MLX emitters
  // evaluate in their own namespaces; "" when each emitter writes the op itself.
  std::string python = {};
  // The ONNX operator of the same meaning (opset 17): export writes it, import reads it back
  // unless a converter for it is registered; "" when converters write the op.
  std::string onnx = {};
};
std::string_view elementwise_kind_name(ElementwiseForms::Kind kind);

struct OpDef {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: any number
  int num_outputs = 1;  // -1: as many as the node has (control flow: what its subgraphs return)
  FusionClass fusion = FusionClass::Opaque;
  ShapeRule shape = nullptr;
  DTypeRule dtype = nullptr;
  Kernel eval = nullptr;
  std::string doc;  // one line, shown by `ingot ops`
  VjpRule vjp = nullptr;  // gradient rule; nullptr: not differentiable (an error if needed)
  AttrSampler sample_attrs = nullptr;  // the fuzzer's attributes; nullptr: none (the defaults)
  OperandSampler sample_operands = nullptr;  // the fuzzer's attributes and operands (see above)
  std::optional<ElementwiseForms> elementwise = std::nullopt;  // elementwise ops: how the other layers write them
  // The op exchanges data with the other ranks of the process group (src/ops/collective.cpp): its
  // result depends on other processes, and every rank must run it the same number of times in the
  // same order. Passes never fold it at compile time (that would communicate while compiling, and
  // a rank with a warm cache would not) nor move it out of a loop; they may merge two identical
  // ones (CSE) or drop an unused one (DCE), since every rank rewrites its identical graph the same way
  // (and hot-path auto-compile builds such a graph at once, so every rank switches at one evaluation).
  bool collective = false;
  // Control flow: the subgraphs the op owns, by name ({"then", "else"}; none for every other op),
  // and the check of their interface against the node's operands and results, which verify()
  // calls; it throws an ingot::Error saying what does not match.
  std::vector<std::string> subgraph_names = {};
  void (*check_subgraphs)(const Node& n) = nullptr;
  // Writes the shapes and dtypes of every subgraph's values from the node's inferred operands
  // (infer_types calls it once the node's own dtypes are known), so backends and dumps see them.
  void (*infer_subgraphs)(const Graph& g, Node& n) = nullptr;
};

void register_op(OpDef def);  // throws if the name is taken
// Gives registered op `name` its fuzz sampler (called beside the op's definition).
void set_attr_sampler(std::string_view name, AttrSampler sampler);
void set_operand_sampler(std::string_view name, OperandSampler sampler);
const OpDef& get_op(std::string_view name);  // throws "Unknown op 'x'"
const OpDef* find_op(std::string_view name);
std::vector<const OpDef*> all_ops();  // sorted by name
std::vector<const OpDef*> ops_in_registration_order();  // the order their definitions run

}  // namespace ingot
