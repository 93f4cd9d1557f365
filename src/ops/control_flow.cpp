// The control-flow family: if, while and scan, ops that own subgraphs (see families.h for the
// contract). A subgraph is a whole graph: its data inputs, in leaf order, are its formal
// parameters and its outputs, in order, its results; it reads nothing of the graph around it, so
// whatever a branch or a loop body needs comes in as an operand of the node.
//
//   if(cond, operands...)                 then(operands...) and else(operands...) each return the
//                                         node's results; cond is a one-element tensor (nonzero:
//                                         then). Both branches give each result one shape and dtype.
//   while(carried..., invariants...)      cond(all) returns one bool element; while it is true (and
//     {num_invariant, max_iterations}     fewer than max_iterations iterations ran, when given),
//                                         body(all) returns the next carried values; the results are
//                                         the last carried values. The last num_invariant operands
//                                         are passed to every iteration unchanged.
//   scan(carry..., xs..., invariants...)  for t over the leading axis of every xs (in reverse with
//     {num_carry, num_xs, reverse}        reverse = 1), body(carry, xs[t]..., invariants) returns
//                                         (next carry..., y_t...); the results are the last carry and
//                                         each y stacked along a new leading axis.
//
// A loop-carried value keeps its shape and dtype from iteration to iteration: shape inference
// checks it and names the value when a body would change it. Shapes of subgraph values are
// inferred by running shape inference on the subgraph with its operands' shapes (symbolic
// dimensions of the operands included), and written back into the subgraphs by infer_types.
//
// Gradients (control_flow_vjp.cpp): if and scan always; while when it has max_iterations (as
// the scan of max_iterations steps that computes the same loop), else an error that says to set it.
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "compiler/shape_inference.h"
#include "ingot/error.h"
#include "ir/interpret.h"
#include "ir/op_registry.h"
#include "ops/control_flow_vjp.h"
#include "ops/families.h"
#include "runtime/write_back.h"

namespace ingot::ops {
namespace {

// --- Interfaces -----------------------------------------------------------------------------

size_t num_params(const Graph& g) { return g.leaves_of(ValueKind::Input).size(); }

// The name a subgraph gives its input i, for messages: "'state'" or "input 2".
std::string param_name(const Graph& g, size_t i) {
  const std::vector<ValueId> params = g.leaves_of(ValueKind::Input);
  if (i < params.size() && !g.value(params[i]).name.empty()) return "'" + g.value(params[i]).name + "'";
  return "input " + std::to_string(i);
}

void expect_interface(const Graph& g, const std::string& which, size_t inputs, size_t outputs) {
  INGOT_CHECK(num_params(g) == inputs, "the ", which, " graph takes ", num_params(g), " inputs, the node passes it ",
              inputs);
  INGOT_CHECK(g.outputs().size() == outputs, "the ", which, " graph returns ", g.outputs().size(),
              " values, the node needs ", outputs);
}

void check_if(const Node& n) {
  expect_interface(n.subgraphs[0], "then", n.inputs.size() - 1, n.outputs.size());
  expect_interface(n.subgraphs[1], "else", n.inputs.size() - 1, n.outputs.size());
}

void check_while(const Node& n) {
  const int64_t k = num_invariant(n);
  INGOT_CHECK(k >= 0 && k < static_cast<int64_t>(n.inputs.size()), "num_invariant = ", k,
              " must leave at least one carried value among the ", n.inputs.size(), " operands");
  const size_t carried = n.inputs.size() - static_cast<size_t>(k);
  INGOT_CHECK(n.outputs.size() == carried, "has ", n.outputs.size(), " results for ", carried, " carried values");
  INGOT_CHECK(n.attrs.get_int("max_iterations", 0) >= 0, "max_iterations must be at least 0, got ",
              n.attrs.get_int("max_iterations", 0));
  expect_interface(n.subgraphs[0], "cond", n.inputs.size(), 1);
  expect_interface(n.subgraphs[1], "body", n.inputs.size(), carried);
}

void check_scan(const Node& n) {
  const int64_t c = num_carry(n), x = num_xs(n);
  INGOT_CHECK(c >= 0 && x >= 1 && c + x <= static_cast<int64_t>(n.inputs.size()), "num_carry = ", c,
              " and num_xs = ", x, " (at least 1) do not fit its ", n.inputs.size(), " operands");
  INGOT_CHECK(static_cast<int64_t>(n.outputs.size()) >= c, "has ", n.outputs.size(), " results, fewer than the ", c,
              " carried values");
  expect_interface(n.subgraphs[0], "body", n.inputs.size(), n.outputs.size());
}

// --- Shapes -----------------------------------------------------------------------------------

// An operand's dimension still without a size travels into the subgraph as this symbol and back.
const std::string kOuterDim = "outer.";

// The shapes of `sub`'s outputs with its inputs shaped `in` (dims of the enclosing inference),
// or nullopt while some input's rank is unknown. Failures name `which` subgraph.
std::optional<std::vector<SymShape>> subgraph_output_shapes(ShapeInfer& s, const Graph& sub,
                                                            const std::vector<std::optional<std::vector<DimVar>>>& in,
                                                            const std::string& which) {
  for (const auto& dims : in)
    if (!dims) return std::nullopt;
  Graph g = sub;
  std::vector<ShapeConstraint> constraints;
  const std::vector<ValueId> params = g.leaves_of(ValueKind::Input);
  for (size_t i = 0; i < params.size(); ++i) {
    Value& p = g.value(params[i]);
    p.shape.clear();
    p.shape_known = false;
    ShapeTemplate t;
    for (DimVar d : *in[i]) {
      if (const std::optional<int64_t> size = s.value(d)) t.emplace_back(*size);
      else t.emplace_back(kOuterDim + std::to_string(s.root(d)));  // dims already equal: one symbol
    }
    constraints.push_back({params[i], t, "", "operand " + std::to_string(i) + " of the " + which + " graph"});
  }
  try {
    for (const std::string& a : infer_shapes(g, constraints).assumptions) s.assume("in its " + which + " graph: " + a);
  } catch (const Error& e) {
    s.fail("in its " + which + " graph: " + e.what());
  }
  // Sizes flow back out too: what the subgraph fixes of an operand (a lifted parameter's input
  // dim, read by a matmul in a loop body) sizes the operand, and two operand dims the subgraph
  // equates become one.
  for (size_t i = 0; i < params.size(); ++i) {
    const SymShape& inferred = g.value(params[i]).shape;
    for (size_t d = 0; d < inferred.size() && d < in[i]->size(); ++d) {
      const DimVar outer = (*in[i])[d];
      if (inferred[d].known()) s.bind(outer, inferred[d].value);
      else if (inferred[d].symbol.rfind(kOuterDim, 0) == 0) s.unify(outer, std::stoi(inferred[d].symbol.substr(kOuterDim.size())));
    }
  }
  std::vector<SymShape> out;
  for (const auto& [name, v] : g.outputs()) out.push_back(g.value(v).shape);
  return out;
}

// Gives `v` the shape `shape` (from a subgraph): sizes bind, outer symbols unify back.
void set_from_subgraph(ShapeInfer& s, ValueId v, const SymShape& shape, size_t skip_leading = 0) {
  for (size_t i = 0; i < shape.size(); ++i) {
    const DimVar d = s.dim(v, static_cast<int>(i + skip_leading));
    if (shape[i].known()) s.bind(d, shape[i].value);
    else if (shape[i].symbol.rfind(kOuterDim, 0) == 0) s.unify(d, std::stoi(shape[i].symbol.substr(kOuterDim.size())));
  }
}

std::string sym_str(ShapeInfer& s, const std::vector<DimVar>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::optional<int64_t> v = s.value(dims[i]);
    out += (i ? ", " : "") + (v ? std::to_string(*v) : "?");
  }
  return out + "]";
}

std::optional<std::vector<DimVar>> dims_of(ShapeInfer& s, ValueId v) {
  if (!s.has_rank(v)) return std::nullopt;
  return s.dims(v);
}

// A loop body returned `got` for carried value i, which entered as `dims`: same rank, and each
// size equal (an outer symbol unifies).
void check_carried(ShapeInfer& s, const Graph& body, size_t i, const std::vector<DimVar>& dims, const SymShape& got) {
  auto fail = [&] {
    s.fail("loop-carried value " + std::to_string(i) + " (" + param_name(body, i) + ") enters the loop as " +
           sym_str(s, dims) + " but the body returns " + to_string(got) +
           "; a carried value keeps its shape from iteration to iteration");
  };
  if (got.size() != dims.size()) fail();
  for (size_t d = 0; d < got.size(); ++d) {
    const std::optional<int64_t> entered = s.value(dims[d]);
    if (got[d].known() && entered && *entered != got[d].value) fail();
  }
}

void if_shape(ShapeInfer& s) {
  const Node& n = s.node();
  if (!s.has_rank(s.in(0))) s.set_rank(s.in(0), 0);  // a condition nothing else shapes is a scalar
  if (s.has_rank(s.in(0)) && s.rank(s.in(0)) != 0) {
    for (DimVar d : s.dims(s.in(0)))
      if (const std::optional<int64_t> v = s.value(d); v && *v != 1)
        s.fail("the condition of an if must hold one element, it has shape " + sym_str(s, s.dims(s.in(0))));
  }
  std::vector<std::optional<std::vector<DimVar>>> in;
  for (int i = 1; i < s.num_inputs(); ++i) in.push_back(dims_of(s, s.in(i)));
  const auto then_shapes = subgraph_output_shapes(s, n.subgraphs[0], in, "then");
  const auto else_shapes = subgraph_output_shapes(s, n.subgraphs[1], in, "else");
  if (!then_shapes || !else_shapes) return;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const SymShape& a = (*then_shapes)[k];
    const SymShape& b = (*else_shapes)[k];
    bool same = a.size() == b.size();
    for (size_t d = 0; same && d < a.size(); ++d) same = !(a[d].known() && b[d].known() && a[d].value != b[d].value);
    if (!same)
      s.fail("result " + std::to_string(k) + " is " + to_string(a) + " in the then graph but " + to_string(b) +
             " in the else graph; both branches must give it one shape");
    s.set_rank(s.out(static_cast<int>(k)), static_cast<int>(a.size()));
    set_from_subgraph(s, s.out(static_cast<int>(k)), a);
    set_from_subgraph(s, s.out(static_cast<int>(k)), b);
  }
}

void while_shape(ShapeInfer& s) {
  const Node& n = s.node();
  const size_t carried = n.outputs.size();
  std::vector<std::optional<std::vector<DimVar>>> in;
  for (int i = 0; i < s.num_inputs(); ++i) in.push_back(dims_of(s, s.in(i)));
  const auto cond = subgraph_output_shapes(s, n.subgraphs[0], in, "cond");
  const auto body = subgraph_output_shapes(s, n.subgraphs[1], in, "body");
  if (!cond || !body) return;
  for (const SymDim& d : (*cond)[0])
    if (d.known() && d.value != 1)
      s.fail("the cond graph must return one element, it returns " + to_string((*cond)[0]));
  for (size_t i = 0; i < carried; ++i) {
    check_carried(s, n.subgraphs[1], i, *in[i], (*body)[i]);
    s.set_dims(s.out(static_cast<int>(i)), *in[i]);
  }
}

void scan_shape(ShapeInfer& s) {
  const Node& n = s.node();
  const size_t c = static_cast<size_t>(num_carry(n)), x = static_cast<size_t>(num_xs(n));
  std::vector<std::optional<std::vector<DimVar>>> in;
  std::optional<DimVar> length;
  for (int i = 0; i < s.num_inputs(); ++i) {
    std::optional<std::vector<DimVar>> dims = dims_of(s, s.in(i));
    const size_t slot = static_cast<size_t>(i);
    if (dims && slot >= c && slot < c + x) {  // xs: the body sees one step, without the leading axis
      if (dims->empty()) s.fail("scanned operand " + std::to_string(slot - c) + " is a scalar; it needs an axis to scan");
      if (length) s.unify(*length, dims->front());
      else length = dims->front();
      dims->erase(dims->begin());
    }
    in.push_back(std::move(dims));
  }
  const auto body = subgraph_output_shapes(s, n.subgraphs[0], in, "body");
  if (!body) return;
  for (size_t i = 0; i < c; ++i) {
    check_carried(s, n.subgraphs[0], i, *in[i], (*body)[i]);
    s.set_dims(s.out(static_cast<int>(i)), *in[i]);
  }
  for (size_t k = c; k < n.outputs.size(); ++k) {
    const ValueId y = s.out(static_cast<int>(k));
    s.set_rank(y, static_cast<int>((*body)[k].size()) + 1);
    s.unify(s.dim(y, 0), *length);
    set_from_subgraph(s, y, (*body)[k], 1);
  }
}

// --- Dtypes -----------------------------------------------------------------------------------

// The dtypes of `sub`'s outputs with inputs of dtypes `in`.
std::vector<DType> subgraph_output_dtypes(const Graph& sub, std::span<const DType> in, const std::string& which) {
  Graph g = sub;
  const std::vector<ValueId> params = g.leaves_of(ValueKind::Input);
  for (size_t i = 0; i < params.size(); ++i) g.value(params[i]).dtype = in[i];
  try {
    infer_types(g);
  } catch (const Error& e) {
    INGOT_FAIL("in its ", which, " graph: ", e.what());
  }
  std::vector<DType> out;
  for (const auto& [name, v] : g.outputs()) out.push_back(g.value(v).dtype);
  return out;
}

void if_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  const std::vector<DType> then_types = subgraph_output_dtypes(n.subgraphs[0], in.subspan(1), "then");
  const std::vector<DType> else_types = subgraph_output_dtypes(n.subgraphs[1], in.subspan(1), "else");
  for (size_t k = 0; k < out.size(); ++k) {
    INGOT_CHECK(then_types[k] == else_types[k], "result ", k, " is ", dtype_name(then_types[k]),
                " in the then graph but ", dtype_name(else_types[k]), " in the else graph");
    out[k] = then_types[k];
  }
}

void check_carried_dtypes(const Graph& body, std::span<const DType> in, const std::vector<DType>& got, size_t carried) {
  for (size_t i = 0; i < carried; ++i)
    INGOT_CHECK(got[i] == in[i], "loop-carried value ", i, " (", param_name(body, i), ") enters the loop as ",
                dtype_name(in[i]), " but the body returns ", dtype_name(got[i]));
}

void while_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  const std::vector<DType> cond = subgraph_output_dtypes(n.subgraphs[0], in, "cond");
  INGOT_CHECK(cond[0] == DType::Bool, "the cond graph must return a bool, it returns ", dtype_name(cond[0]));
  const std::vector<DType> body = subgraph_output_dtypes(n.subgraphs[1], in, "body");
  check_carried_dtypes(n.subgraphs[1], in, body, out.size());
  std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
}

void scan_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  const std::vector<DType> body = subgraph_output_dtypes(n.subgraphs[0], in, "body");
  check_carried_dtypes(n.subgraphs[0], in, body, static_cast<size_t>(num_carry(n)));
  std::copy(body.begin(), body.end(), out.begin());
}

// --- Subgraph shapes and dtypes, written back ------------------------------------------------

// Infers `sub` with its inputs shaped and typed `params` (outer symbols keep their names).
void infer_subgraph(Graph& sub, const std::vector<std::pair<SymShape, DType>>& params) {
  const std::vector<ValueId> ids = sub.leaves_of(ValueKind::Input);
  std::vector<ShapeConstraint> constraints;
  for (size_t i = 0; i < ids.size(); ++i) {
    Value& p = sub.value(ids[i]);
    p.shape.clear();
    p.shape_known = false;
    p.dtype = params[i].second;
    ShapeTemplate t;
    for (const SymDim& d : params[i].first) {
      if (d.known()) t.emplace_back(d.value);
      else t.emplace_back(d.symbol);
    }
    constraints.push_back({ids[i], t, "", "operand " + std::to_string(i)});
  }
  infer_shapes(sub, constraints);
  infer_types(sub);
}

// The operands' shapes and dtypes, or nullopt while a shape is not inferred yet: dtype inference
// of an enclosing subgraph (subgraph_output_dtypes) runs on a copy without shapes, and a nested
// node's subgraphs are written back later, when their operands have shapes.
std::optional<std::vector<std::pair<SymShape, DType>>> operands_of(const Graph& g, const Node& n, size_t from = 0) {
  std::vector<std::pair<SymShape, DType>> out;
  for (size_t i = from; i < n.inputs.size(); ++i) {
    const Value& v = g.value(n.inputs[i]);
    if (!v.shape_known) return std::nullopt;
    out.emplace_back(v.shape, v.dtype);
  }
  return out;
}

void if_subgraphs(const Graph& g, Node& n) {
  if (const auto params = operands_of(g, n, 1))
    for (Graph& branch : n.subgraphs) infer_subgraph(branch, *params);
}

void while_subgraphs(const Graph& g, Node& n) {
  if (const auto params = operands_of(g, n))
    for (Graph& sub : n.subgraphs) infer_subgraph(sub, *params);
}

void scan_subgraphs(const Graph& g, Node& n) {
  std::optional<std::vector<std::pair<SymShape, DType>>> params = operands_of(g, n);
  if (!params) return;
  const size_t c = static_cast<size_t>(num_carry(n)), x = static_cast<size_t>(num_xs(n));
  for (size_t j = c; j < c + x; ++j) {
    SymShape& s = (*params)[j].first;
    INGOT_CHECK(!s.empty(), "scan: scanned operand ", j - c, " is a scalar; it needs an axis to scan");
    s.erase(s.begin());
  }
  infer_subgraph(n.subgraphs[0], *params);
}

// --- Reference kernels ------------------------------------------------------------------------
// (The CPU backend generates its own branches and loops: src/backends/cpu/codegen_control.cpp.)

// Runs subgraph k on `inputs` (its data inputs, in order) into `outputs` (one per subgraph
// output): an entry that is defined is where that output should go (written into its buffer
// when the runner can, as Executable::run_into does; else the handle is replaced).
using SubgraphRunner = std::function<void(size_t k, std::span<const Tensor> inputs, std::span<Tensor> outputs)>;

bool truth(const Tensor& t, const char* what) {
  INGOT_CHECK(t.numel() == 1, what, " must hold one element, it has shape ", to_string(t.shape()));
  return t.item(0) != 0.0;
}

// Subgraph k's results, in fresh tensors.
std::vector<Tensor> run_fresh(const Node& n, size_t k, std::span<const Tensor> in, const SubgraphRunner& run) {
  std::vector<Tensor> results(n.subgraphs[k].outputs().size());
  run(k, in, results);
  return results;
}

void if_run(const Node& n, std::span<const Tensor> in, std::span<Tensor> out, const SubgraphRunner& run) {
  std::vector<Tensor> results = run_fresh(n, truth(in[0], "the condition of an if") ? 0 : 1, in.subspan(1), run);
  std::move(results.begin(), results.end(), out.begin());
}

// The value a body returned for carried slot i must keep the carried shape and dtype.
void check_step(const Tensor& entered, const Tensor& got, size_t i, const Graph& body) {
  INGOT_CHECK(got.shape() == entered.shape() && got.dtype() == entered.dtype(), "loop-carried value ", i, " (",
              param_name(body, i), ") entered as ", dtype_name(entered.dtype()), to_string(entered.shape()),
              " but the body returned ", dtype_name(got.dtype()), to_string(got.shape()));
}

// Loop-carried values in two sets of buffers used in turn: each iteration writes the next values
// into the buffers of the values two iterations back, so a loop allocates no memory after its
// first two iterations. A buffer is reused only when nothing else can see it: not the caller's
// operands (a body may return one unchanged), not another carried value (a body may return one
// value twice).
// The bytes a tensor spans, [begin, end); empty for an undefined or empty one.
struct Span {
  const char* begin = nullptr;
  const char* end = nullptr;
  explicit Span(const Tensor& t) {
    if (!t.defined()) return;
    begin = static_cast<const char*>(t.raw_data());
    end = begin + t.nbytes();
  }
  bool overlaps(const Span& o) const { return begin < end && o.begin < o.end && begin < o.end && o.begin < end; }
};

// Loop-carried values in two sets of buffers used in turn: each iteration writes the next values
// into the buffers of the values two iterations back, so a loop allocates no memory after its
// first two iterations. A buffer is reused only when nothing else can see it: not the caller's
// operands (a body may return one unchanged), not another carried value (a body may return one
// value twice).
class CarriedBuffers {
 public:
  CarriedBuffers(size_t n, std::span<const Tensor> operands) : spare_(n) {
    for (const Tensor& t : operands) operands_.emplace_back(t);
  }
  // Where the next values go: buffers free to write, undefined where there are none yet.
  std::vector<Tensor>& targets() { return spare_; }
  // The next values (in targets()) become the state; the values they replace become targets.
  void advance(std::vector<Tensor>& state, size_t count) {
    std::vector<Tensor> old(count);
    std::vector<Span> old_spans, new_spans;
    for (size_t i = 0; i < count; ++i) {
      old[i] = std::move(state[i]);
      state[i] = std::move(spare_[i]);
      old_spans.emplace_back(old[i]);
      new_spans.emplace_back(state[i]);
    }
    for (size_t i = 0; i < count; ++i) {
      bool shared = !old[i].defined();
      for (const Span& o : operands_) shared = shared || old_spans[i].overlaps(o);
      for (size_t j = 0; j < count; ++j)
        shared = shared || old_spans[i].overlaps(new_spans[j]) || (j != i && old_spans[i].overlaps(old_spans[j]));
      spare_[i] = shared ? Tensor() : std::move(old[i]);
    }
  }

 private:
  std::vector<Tensor> spare_;
  std::vector<Span> operands_;
};

void while_run(const Node& n, std::span<const Tensor> in, std::span<Tensor> out, const SubgraphRunner& run) {
  const int64_t max_iterations = n.attrs.get_int("max_iterations", -1);
  const size_t carried = out.size();
  std::vector<Tensor> state(in.begin(), in.end());
  std::vector<Tensor> holds(1);  // the cond's result, written in place from the second iteration on
  CarriedBuffers buffers(n.subgraphs[1].outputs().size(), in);
  for (int64_t it = 0; max_iterations < 0 || it < max_iterations; ++it) {
    run(0, state, holds);
    if (!truth(holds[0], "the cond graph's result")) break;
    for (const Tensor& t : state)  // a cond that returns a carried value: not a buffer to write
      if (Span(holds[0]).overlaps(Span(t))) holds[0] = Tensor();
    std::vector<Tensor>& next = buffers.targets();
    run(1, state, next);
    for (size_t i = 0; i < carried; ++i) check_step(state[i], next[i], i, n.subgraphs[1]);
    buffers.advance(state, carried);
  }
  for (size_t i = 0; i < carried; ++i) out[i] = state[i];
}

// Step t of a contiguous tensor along its leading axis: a view (it keeps `xs` alive), no copy.
Tensor step_of(const Tensor& xs, int64_t t) {
  Shape shape(xs.shape().begin() + 1, xs.shape().end());
  const size_t bytes = static_cast<size_t>(numel(shape)) * dtype_size(xs.dtype());
  char* p = static_cast<char*>(const_cast<void*>(xs.raw_data())) + static_cast<size_t>(t) * bytes;
  return Tensor::wrap(p, xs.dtype(), shape, contiguous_strides(shape), std::shared_ptr<void>(p, [keep = xs](void*) {}));
}

void scan_run(const Node& n, std::span<const Tensor> in, std::span<Tensor> out, const SubgraphRunner& run) {
  const size_t c = static_cast<size_t>(num_carry(n)), x = static_cast<size_t>(num_xs(n));
  const bool reverse = n.attrs.get_int("reverse", 0) != 0;
  const Graph& body_graph = n.subgraphs[0];
  const int64_t length = in[c].rank() > 0 ? in[c].dim(0) : 0;
  for (size_t j = c; j < c + x; ++j)
    INGOT_CHECK(in[j].rank() > 0 && in[j].dim(0) == length, "scanned operand ", j - c, " has shape ",
                to_string(in[j].shape()), "; every scanned operand needs the leading length ", length);
  std::vector<Tensor> args(in.begin(), in.end());
  for (size_t j = c; j < c + x; ++j) args[j] = in[j].contiguous();  // steps are views into these
  const std::vector<Tensor> xs(args.begin() + static_cast<std::ptrdiff_t>(c), args.begin() + static_cast<std::ptrdiff_t>(c + x));
  for (size_t i = 0; i < c; ++i) out[i] = in[i];
  if (length == 0) {
    // No step runs: the stacked results are empty, shaped by the body's shape rule.
    Graph g = body_graph;
    std::vector<std::pair<SymShape, DType>> params;
    for (size_t i = 0; i < in.size(); ++i) {
      SymShape s(in[i].shape().begin(), in[i].shape().end());
      if (i >= c && i < c + x) s.erase(s.begin());
      params.emplace_back(std::move(s), in[i].dtype());
    }
    infer_subgraph(g, params);
    for (size_t k = c; k < out.size(); ++k) {
      const Value& y = g.value(g.outputs()[k].second);
      Shape s = to_shape(y.shape);
      s.insert(s.begin(), 0);
      out[k] = Tensor(y.dtype, s);
    }
    return;
  }
  // Each step's ys go straight into their row of the stacked results (allocated after the first
  // step, which gives their shapes), where the runner can write in place.
  // The carries go to two sets of buffers in turn (CarriedBuffers).
  std::vector<Tensor> results(body_graph.outputs().size());
  CarriedBuffers carries(c, in);
  for (int64_t step = 0; step < length; ++step) {
    const int64_t t = reverse ? length - 1 - step : step;
    for (size_t j = c; j < c + x; ++j) args[j] = step_of(xs[j - c], t);
    for (size_t k = 0; k < results.size(); ++k)
      results[k] = k < c ? std::move(carries.targets()[k]) : out[k].defined() ? step_of(out[k], t) : Tensor();
    std::vector<const void*> targets;
    for (const Tensor& r : results) targets.push_back(r.defined() ? r.raw_data() : nullptr);
    run(0, args, results);
    for (size_t i = 0; i < c; ++i) {
      check_step(args[i], results[i], i, body_graph);
      carries.targets()[i] = results[i];
    }
    carries.advance(args, c);
    for (size_t k = c; k < out.size(); ++k) {
      if (targets[k] != nullptr && results[k].raw_data() == targets[k]) continue;  // written in place
      const Tensor y = results[k].contiguous();
      if (!out[k].defined()) {
        Shape s = y.shape();
        s.insert(s.begin(), length);
        out[k] = Tensor::uninitialized(y.dtype(), s);
      }
      INGOT_CHECK(y.nbytes() * static_cast<size_t>(length) == out[k].nbytes() && y.dtype() == out[k].dtype(),
                  "scan result ", k - c, " changed its shape or dtype at step ", t, ": ", dtype_name(y.dtype()),
                  to_string(y.shape()));
      std::memcpy(static_cast<char*>(out[k].raw_data()) + static_cast<size_t>(t) * y.nbytes(), y.raw_data(),
                  y.nbytes());
    }
  }
  for (size_t i = 0; i < c; ++i) out[i] = args[i];
}

// The reference kernels: each subgraph through the interpreter (built on first use, kept for
// the node's evaluation, so a loop builds it once).
template <void (*Run)(const Node&, std::span<const Tensor>, std::span<Tensor>, const SubgraphRunner&)>
void interpreted(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  std::vector<std::optional<Interpreter>> interpreters(n.subgraphs.size());
  Run(n, in, out, [&](size_t k, std::span<const Tensor> args, std::span<Tensor> results) {
    if (!interpreters[k]) interpreters[k].emplace(n.subgraphs[k]);
    std::vector<Tensor> got = interpreters[k]->run(args);
    for (size_t j = 0; j < got.size(); ++j) {
      if (results[j].defined()) write_back(results[j], got[j]);  // as Executable::run_into does
      else results[j] = std::move(got[j]);
    }
  });
}

}  // namespace

void register_control_flow_ops() {
  register_op(OpDef{.name = "if",
                    .min_inputs = 1,
                    .max_inputs = -1,
                    .num_outputs = -1,
                    .fusion = FusionClass::Opaque,
                    .shape = if_shape,
                    .dtype = if_dtype,
                    .eval = interpreted<if_run>,
                    .doc = "(cond, operands...): the then graph's results on the operands where cond is nonzero, "
                           "else the else graph's",
                    .vjp = if_vjp,
                    .subgraph_names = {"then", "else"},
                    .check_subgraphs = check_if,
                    .infer_subgraphs = if_subgraphs});
  register_op(OpDef{.name = "while",
                    .min_inputs = 1,
                    .max_inputs = -1,
                    .num_outputs = -1,
                    .fusion = FusionClass::Opaque,
                    .shape = while_shape,
                    .dtype = while_dtype,
                    .eval = interpreted<while_run>,
                    .doc = "(carried..., invariants...): body's next carried values while cond holds (at most "
                           "{max_iterations} times); the last {num_invariant = 0} operands pass through unchanged",
                    .vjp = while_vjp,
                    .subgraph_names = {"cond", "body"},
                    .check_subgraphs = check_while,
                    .infer_subgraphs = while_subgraphs});
  register_op(OpDef{.name = "scan",
                    .min_inputs = 1,
                    .max_inputs = -1,
                    .num_outputs = -1,
                    .fusion = FusionClass::Opaque,
                    .shape = scan_shape,
                    .dtype = scan_dtype,
                    .eval = interpreted<scan_run>,
                    .doc = "(carry..., xs..., invariants...): body over the leading axis of the {num_xs} xs "
                           "({reverse} = 1: last first), carrying {num_carry} values; the last carry and each "
                           "step's other results stacked",
                    .vjp = scan_vjp,
                    .subgraph_names = {"body"},
                    .check_subgraphs = check_scan,
                    .infer_subgraphs = scan_subgraphs});
}

}  // namespace ingot::ops
