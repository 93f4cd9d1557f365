// The differential checks of fuzz/programs.h: a batch under one variation, forward or with
// gradients, against the reference interpreter and, for gradients, finite differences.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "compiler/autodiff.h"
#include "compiler/checkpointing.h"
#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "ingot/ingot.h"
#include "judges.h"
#include "programs.h"

namespace ingot::fuzz {

std::string Finding::str() const {
  std::ostringstream os;
  os << "seed " << seed << ", " << variation << ": output '" << output << "' is off by " << error
     << " from the float64 run (the float32 reference by " << reference_error << ")\n"
     << graph_text;
  return os.str();
}

std::vector<Tensor> leaf_inputs(const Graph& g, const std::map<std::string, Tensor>& by_name) {
  std::vector<Tensor> ins;
  for (ValueId id : g.leaves())
    if (g.value(id).kind != ValueKind::Constant) ins.push_back(by_name.at(g.value(id).name).astype(g.value(id).dtype));
  return ins;
}

std::vector<Tensor> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  return ReferenceBackend().lower(g, {})->run(leaf_inputs(g, inputs));
}

std::vector<Tensor> run_on_cpu(const Graph& g, const Variation& v, const std::map<std::string, Tensor>& inputs,
                               const CpuBackend::CpuOptions& cpu) {
  Graph opt = g;
  optimize(opt, v.options);
  std::vector<Tensor> ins = leaf_inputs(opt, inputs);
  if (v.non_contiguous)
    for (Tensor& t : ins) t = strided_view(t);
  return CpuBackend(cpu).lower(opt, v.options)->run(ins);
}

Tensor strided_view(const Tensor& t) {
  if (t.rank() < 2) return t;
  std::vector<int> reversed(static_cast<size_t>(t.rank()));
  for (int i = 0; i < t.rank(); ++i) reversed[static_cast<size_t>(i)] = t.rank() - 1 - i;
  return t.transpose(reversed).contiguous().transpose(reversed);
}

double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double scale = 1, worst = 0;
  for (double x : b)
    if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
  // A NaN or infinity on one side only is 1e30, flagged apart: a finite difference of 1e30 or
  // more is no such mismatch (one float32 unit near 1.7e38 is 2e31: exp(88) one unit apart was
  // read as a mismatch, seed 110081).
  bool mismatch = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      mismatch = mismatch || std::isnan(a[i]) != std::isnan(b[i]);
      continue;
    }
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      mismatch = mismatch || a[i] != b[i];
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return mismatch ? 1e30 : worst / scale;
}

namespace {

double output_scale(const Tensor& t);

// The error of `got` against the float64 run `truth` over the elements where the float32
// reference `want` holds (is within `tol` of truth, relative to truth's largest finite magnitude),
// relative to the largest magnitude among those elements. An ill-conditioned program puts the
// reference far from the float64 run on some elements (an exp that overflows in float32 only)
// and so sets its whole-output error, and often the output's scale: without this, a wrong result
// on every other element hid behind them.
double error_where_reference_holds(const Tensor& got, const Tensor& want, const Tensor& truth, double tol) {
  const std::vector<double> a = got.to_vector<double>(), w = want.to_vector<double>(), t = truth.to_vector<double>();
  const double whole = output_scale(truth);
  std::vector<size_t> held;
  double scale = 1;
  for (size_t e = 0; e < t.size(); ++e)
    if (std::isfinite(t[e]) && std::isfinite(w[e]) && std::abs(w[e] - t[e]) <= tol * whole) {
      held.push_back(e);
      scale = std::max(scale, std::abs(t[e]));
    }
  double worst = 0;
  for (size_t e : held) worst = std::max(worst, std::isfinite(a[e]) ? std::abs(a[e] - t[e]) / scale : 1e30);
  return worst;
}

// `g` rebuilt node by node with every float32 result cast to float64: where float32 comes from
// integers (gelu of an argmax, a cast to float32), promoting the leaves leaves it float32, and
// an op that needs one float type for all its operands (scaled_dot_product_attention) refused
// the program (found by the program fuzzer, seed 95027). Control flow's subgraphs are rebuilt
// the same way: a gradient's cast back to float32 inside a loop's backward `if` left one branch
// float32 and the other float64 (seed 55610).
Graph rebuilt_in_float64(const Graph& g) {
  Graph h;
  std::vector<ValueId> to(g.values().size(), -1);
  std::vector<ShapeConstraint> cs;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    to[static_cast<size_t>(id)] = v.kind == ValueKind::Constant ? h.add_constant(v.name, v.constant) : h.add_input(v.name, v.kind);
    Value& w = h.value(to[static_cast<size_t>(id)]);
    w.dtype = v.dtype == DType::Float32 ? DType::Float64 : v.dtype;
    w.weak_type = v.weak_type;
    if (v.kind != ValueKind::Constant && v.shape_known) {
      ShapeTemplate t;
      for (const SymDim& d : v.shape) t.emplace_back(d.value);
      cs.push_back({w.id, t, "", "float64 run"});
    }
  }
  for (const Node& n : g.nodes()) {
    std::vector<ValueId> ins;
    for (ValueId i : n.inputs) ins.push_back(to[static_cast<size_t>(i)]);
    const std::vector<ValueId> outs = h.add_node(n.op, ins, n.attrs, static_cast<int>(n.outputs.size()), n.scope);
    if (!outs.empty()) {  // control flow's
      std::vector<Graph>& subgraphs = h.node(h.value(outs[0]).producer).subgraphs;
      for (const Graph& sub : n.subgraphs) subgraphs.push_back(rebuilt_in_float64(sub));
    }
    infer_types(h);
    for (size_t k = 0; k < outs.size(); ++k)
      to[static_cast<size_t>(n.outputs[k])] = h.value(outs[k]).dtype == DType::Float32
                                                  ? h.add_op("cast", {outs[k]}, {{"dtype", std::string("float64")}})
                                                  : outs[k];
  }
  for (const auto& [name, v] : g.outputs()) h.set_output(name, to[static_cast<size_t>(v)]);
  infer_shapes(h, cs);
  infer_types(h);
  return h;
}

// `g` with float64 leaves (its float32 constants promote with them): the tie-breaker's program.
Graph in_float64(const Graph& g) {
  Graph g64 = g;
  for (ValueId id : g64.leaves())
    if (g64.value(id).dtype == DType::Float32) g64.value(id).dtype = DType::Float64;
  try {
    infer_types(g64);
  } catch (const Error&) {
    return rebuilt_in_float64(g);
  }
  return g64;
}

// What the reference runs for `v`: the program itself, or with mixed precision the program with
// its matmuls and convs cast to the low type (the pass's meaning, which the CPU backend must keep;
// the pass itself trades accuracy by design).
Graph reference_graph(const Graph& g, const Variation& v) {
  if (v.options.mixed_precision == "none") return g;
  Graph low = g;
  CompileOptions o;
  o.optimization_level = "none";
  o.mixed_precision = v.options.mixed_precision;
  optimize(low, o);
  return low;
}

// `g` with every input dimension but 0 and 1 a symbol (one per distinct size, so equal sizes
// stay equal, as broadcasting needs), shapes inferred again: what a shapeless compile lowers.
// nullopt when a rule needs a static size, or when inference had to assume something (two
// unknown sizes broadcast are taken as equal: a run where one is 1 then stops with a clear error,
// the documented limit of shapeless compiles, not a miscompilation).
std::optional<Graph> with_symbolic_shapes(const Graph& g) {
  Graph s = g;
  std::vector<ShapeConstraint> cs;
  for (ValueId id : s.leaves()) {
    ShapeTemplate t;
    for (const SymDim& d : s.value(id).shape)
      if (s.value(id).kind == ValueKind::Constant || d.value <= 1) t.emplace_back(d.value);
      else t.emplace_back("n" + std::to_string(d.value));
    cs.push_back({id, t, "", "fuzz shapeless"});
  }
  for (Value& v : s.values()) {
    v.shape.clear();
    v.shape_known = false;
  }
  try {
    if (!infer_shapes(s, cs).assumptions.empty()) return std::nullopt;
    infer_types(s);
    verify(s);
  } catch (const Error&) {
    return std::nullopt;
  }
  return s;
}

// The nodes of graph `g` and of every subgraph below it.
size_t nodes_within(const Graph& g) {
  size_t n = g.nodes().size();
  for (const Node& node : g.nodes())
    for (const Graph& sub : node.subgraphs) n += nodes_within(sub);
  return n;
}

// How many nodes output `output` of `g` depends on, a control-flow node's subgraphs' nodes
// counted with it (mixed precision's casts inside a branch change the count: seed 54461).
size_t cone_size(const Graph& g, size_t output) {
  std::set<NodeId> seen;
  std::vector<ValueId> stack = {g.outputs().at(output).second};
  size_t within = 0;
  while (!stack.empty()) {
    const Value& v = g.value(stack.back());
    stack.pop_back();
    if (v.producer < 0 || !seen.insert(v.producer).second) continue;
    for (const Graph& sub : g.node(v.producer).subgraphs) within += nodes_within(sub);
    for (ValueId in : g.node(v.producer).inputs) stack.push_back(in);
  }
  return seen.size() + within;
}

// max(1, the largest finite magnitude of `t`): what relative_error measures against.
double output_scale(const Tensor& t) {
  double scale = 1;
  for (double x : t.astype(DType::Float64).to_vector<double>())
    if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
  return scale;
}

// The largest finite magnitude among the float values `g`'s output `output` is computed from
// (its ancestors, in a float64 run), at least 1. A float32 result carries rounding relative to
// the values it passed through, not only to its own size: cos of a 2,520-term convolution near
// 960 is off by the convolution's float32 accumulation error, 3e-4 of an output of size 1,
// where the reference accumulates in double (found by the fuzzer, seed 50188). So an output's
// error is also measured against this scale (a wrong kernel is off by far more).
double path_scale(const Graph& g, size_t output, const std::map<std::string, Tensor>& inputs) {
  Graph probe = in_float64(g);
  std::set<ValueId> seen;
  std::vector<ValueId> stack = {g.outputs()[output].second};
  while (!stack.empty()) {
    const ValueId x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    if (is_floating(probe.value(x).dtype)) probe.set_output("scale_" + std::to_string(x), x);
    if (const NodeId p = g.value(x).producer; p >= 0)
      for (ValueId in : g.node(p).inputs) stack.push_back(in);
  }
  double scale = 1;
  for (const Tensor& t : run_reference(probe, inputs)) scale = std::max(scale, output_scale(t));
  return scale;
}

// The CPU run of `g` (unoptimized) under `v`, against the reference run of `ref` on the same
// inputs. nullopt when they agree.
std::optional<Finding> differential(uint64_t seed, const Variation& v, const Graph& g, const Graph& ref,
                                    const std::map<std::string, Tensor>& inputs, const CpuBackend::CpuOptions& cpu_options) {
  CpuBackend::CpuOptions cpu = cpu_options;
  if (v.threads > 0) cpu.num_threads = v.threads;
  auto run_cpu = [&] { return run_on_cpu(g, v, inputs, cpu); };
  std::vector<Tensor> want;
  try {
    want = run_reference(ref, inputs);
  } catch (const Error& e) {
    // A program its data makes invalid (an index out of range, say): the CPU backend must refuse
    // it too, with an error rather than a result.
    try {
      run_cpu();
    } catch (const Error&) {
      return std::nullopt;
    }
    return Finding{seed, v.name, std::string("(the reference refused: ") + e.what() + ")", print_graph(g), 1e30, 0};
  }
  const std::vector<Tensor> got = run_cpu();
  // Whether the reference computed output i with the program's own nodes: under mixed precision
  // it runs another graph (its matmuls and convs cast), but an output that depends on none of
  // them is computed alike (seed 95042: less(x, tanh(x)) under bfloat16 mixed precision, a
  // comparison tanh's rounding flipped, was not judged; seed 100018: less_equal(x, tanh(x))
  // under float16 was not either, in a batch whose other programs had a matmul).
  auto same_program = [&](size_t i) {
    return v.options.mixed_precision == "none" || cone_size(ref, i) == cone_size(g, i);
  };
  INGOT_CHECK(got.size() == want.size(), "fuzz: the optimized graph has ", got.size(), " outputs, the original ",
              want.size());
  // The judges see an `if` as one node; what happens inside the branch taken is judged on the
  // program with that branch inlined (computed once per graph judged).
  std::map<const Graph*, std::optional<Graph>> inlined;
  auto or_in_branch = [&](const Graph& graph, const std::function<bool(const Graph&)>& judge) {
    if (judge(graph)) return true;
    if (!inlined.count(&graph)) inlined[&graph] = with_control_flow_inlined(graph, inputs);
    return inlined.at(&graph) && judge(*inlined.at(&graph));
  };
  auto conditioned = [&](const Graph& graph, size_t i, double tol, double operand_tol) {
    return or_in_branch(graph, [&](const Graph& h) {
      return explained_by_conditioning(h, i, v, inputs, cpu, got[i], tol, operand_tol);
    });
  };
  auto rounded = [&](const Graph& graph, size_t i, double operand_tol) {
    return or_in_branch(graph, [&](const Graph& h) { return explained_by_float_rounding(h, i, v, inputs, cpu, operand_tol); });
  };
  std::optional<std::vector<Tensor>> truth;  // the float64 run, computed at the first disagreement
  // Under mixed precision, results rounded to the low type may differ by one of its units in the
  // last place (the reference accumulates in double, the CPU in float32, then both round): found
  // by the fuzzer as 1.3e-4 on erf(x) @ x in float16.
  const double floor = v.options.mixed_precision == "float16"    ? 0x1p-10
                       : v.options.mixed_precision == "bfloat16" ? 0x1p-7
                                                                 : 1e-4;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string& name = ref.outputs()[i].first;
    if (got[i].dtype() != want[i].dtype() || got[i].shape() != want[i].shape())
      return Finding{seed, v.name, name, print_graph(g), 1e30, 0};
    if (!is_floating(want[i].dtype())) {
      if (equal(got[i], want[i])) continue;
      if (same_program(i) && (rounded(g, i, 1e-4) || conditioned(g, i, 1e-4, 1e-4))) continue;
      // An output computed from the low-type ops is judged on the cast graph the reference ran,
      // its float operands within the low type's rounding (seed 54461: x > attention(...) under
      // bfloat16, where the CPU's bf16 attention lands a unit of bfloat16 from the reference's).
      if (!same_program(i) && rounded(ref, i, floor)) continue;
      return Finding{seed, v.name, name, print_graph(g), 1e30, 0};
    }
    // An output rounded to a half type can land one of its units apart after float32 math that
    // differs in its last bits (erf(x) cast to float16 did, 1.2e-4 off).
    const double tol = std::max(floor, want[i].dtype() == DType::Float16    ? 0x1p-10
                                       : want[i].dtype() == DType::BFloat16 ? 0x1p-7
                                                                            : 0.0);
    if (relative_error(got[i], want[i]) <= tol) continue;
    if (!truth) truth = run_reference(in_float64(ref), inputs);
    const Tensor& t = (*truth)[i];
    const Tensor got64 = got[i].astype(DType::Float64), want64 = want[i].astype(DType::Float64);
    const double err = relative_error(got64, t), r = relative_error(want64, t);
    // Far off the float64 run where the reference is too, or only where the reference is not
    // (its own float32 result there is not to be trusted either): judged element by element.
    const double held = error_where_reference_holds(got64, want64, t, tol);
    if (err <= 4 * r + tol && held <= 5 * tol) continue;
    const double allowance = tol * path_scale(ref, i, inputs) / output_scale(t);
    // The conditioning is judged on the graph the reference ran: under mixed precision the cast
    // one, whose low-type ops (an attention, a matmul) may land one unit of the low type from the
    // reference's and an op after them (a pow) amplify it (seed 53109: pow(x, attention) under
    // bfloat16, 0.019 off with the attention itself within tolerance), their results agreeing
    // within the low type's rounding (seed 55007: ceil of a bf16 attention backward's dv, a unit
    // of bfloat16 from the reference's, past an integer).
    if ((err > 4 * r + tol && err > 4 * r + allowance) || (held > 5 * tol && held > 5 * allowance))
      if (!conditioned(ref, i, std::max(tol, 1e-4), floor))
        return Finding{seed, v.name, name, print_graph(g), std::max(err, held), r};
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- gradients

// The batch's graph grown by its backward graph: a cotangent input "cot_<output>" per float
// output, a gradient output "grad_<input>" per input. nullopt when a program crosses an op with
// no gradient rule.
struct Differentiated {
  Graph graph;
  NodeId forward_nodes = 0;
  std::map<std::string, Tensor> inputs;  // the batch's, and the cotangents
  std::vector<std::string> seeded;       // forward outputs that took a cotangent
};

std::optional<Differentiated> differentiate(const Batch& b) {
  Differentiated d;
  d.graph = b.graph;
  d.inputs = b.inputs;
  Graph& g = d.graph;
  d.forward_nodes = static_cast<NodeId>(g.nodes().size());
  std::mt19937_64 rng(b.seed * 0xD1B54A32D192ED03ull + 7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::pair<ValueId, ValueId>> seeds;
  const auto outputs = g.outputs();
  for (const auto& [name, v] : outputs) {
    if (!is_floating(g.value(v).dtype)) continue;
    const ValueId cot = g.add_input("cot_" + name);
    g.value(cot).shape = g.value(v).shape;
    g.value(cot).shape_known = true;
    g.value(cot).dtype = g.value(v).dtype;
    Shape s;
    for (const SymDim& dim : g.value(v).shape) s.push_back(dim.value);
    Tensor t(DType::Float64, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(rng);
    d.inputs["cot_" + name] = t.astype(g.value(v).dtype);
    seeds.emplace_back(v, cot);
    d.seeded.push_back(name);
  }
  std::vector<ValueId> wrt;
  std::vector<std::string> wrt_names;
  for (ValueId id : b.graph.leaves_of(ValueKind::Input)) {
    if (!is_floating(b.graph.value(id).dtype)) continue;  // indices an OperandSampler fed
    wrt.push_back(id);
    wrt_names.push_back(b.graph.value(id).name);
  }
  if (seeds.empty() || wrt.empty()) return std::nullopt;
  std::vector<ValueId> grads;
  try {
    grads = append_backward(g, seeds, wrt);
  } catch (const Error&) {
    return std::nullopt;  // an op with no gradient rule
  }
  for (size_t i = 0; i < grads.size(); ++i) g.set_output("grad_" + wrt_names[i], grads[i]);
  verify(g);
  return d;
}

// sum(cotangent * output) over the seeded outputs, in float64, one term per output, from
// outputs `outs` of the forward graph (in its output order). NaN where an output element is not
// finite at either point: its change is then not a number a difference can measure (x / fmod(x,
// x) is inf on both sides while the rules give the carry's 0.5; program fuzzer seed 7096), and
// the caller skips the element.
double loss_change(const Graph& forward, const Differentiated& d, const std::vector<Tensor>& plus,
                   const std::vector<Tensor>& minus) {
  double total = 0;
  for (size_t i = 0; i < forward.outputs().size(); ++i) {
    const std::string& name = forward.outputs()[i].first;
    auto cot = d.inputs.find("cot_" + name);
    if (cot == d.inputs.end()) continue;
    const std::vector<double> a = plus[i].to_vector<double>(), m = minus[i].to_vector<double>(),
                              c = cot->second.to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k) {
      if (!std::isfinite(a[k]) || !std::isfinite(m[k])) return std::numeric_limits<double>::quiet_NaN();
      if (a[k] != m[k]) total += c[k] * (a[k] - m[k]);  // unaffected elements add exactly nothing
    }
  }
  return total;
}

// The reference's gradients in float64 against central differences at a few elements of every
// input. A mismatch counts only when differences at two step sizes agree with each other (not
// a kink of relu, max or floor within a step of the point).
std::optional<Finding> finite_differences(const Batch& b, const Differentiated& d) {
  // A cast to a half type rounds: its gradient passes through by design (straight through),
  // where differences see steps. Such batches are checked against the reference only.
  for (const Node& n : b.graph.nodes())
    if (n.op == "cast" && (n.attrs.get_string("dtype", "") == "float16" || n.attrs.get_string("dtype", "") == "bfloat16"))
      return std::nullopt;
  const Graph f64 = in_float64(b.graph), j64 = in_float64(d.graph);
  std::map<std::string, Tensor> at;
  for (const auto& [name, t] : d.inputs) at[name] = t.astype(DType::Float64);
  const std::vector<Tensor> grads = run_reference(j64, at);
  std::mt19937_64 rng(b.seed * 0x9FB21C651E98DF25ull + 11);
  for (size_t o = 0; o < j64.outputs().size(); ++o) {
    const std::string& gname = j64.outputs()[o].first;
    if (gname.rfind("grad_", 0) != 0) continue;
    const std::string leaf = gname.substr(5);
    Tensor& x = at.at(leaf);
    const std::vector<double> analytic = grads[o].to_vector<double>();
    if (analytic.empty()) continue;
    for (int k = 0; k < 3; ++k) {
      const size_t e = rng() % analytic.size();
      const double x0 = x.data<double>()[e], an = analytic[e];
      auto difference = [&](double h) {
        x.data<double>()[e] = x0 + h;
        const std::vector<Tensor> plus = run_reference(f64, at);
        x.data<double>()[e] = x0 - h;
        const std::vector<Tensor> minus = run_reference(f64, at);
        x.data<double>()[e] = x0;
        return loss_change(b.graph, d, plus, minus) / (2 * h);
      };
      const double h = 1e-5 * std::max(1.0, std::abs(x0));
      const double fd = difference(h);
      const double tol = 1e-4 * std::max(1.0, std::abs(an));
      if (!std::isfinite(fd) || !std::isfinite(an) || std::abs(fd - an) <= tol) continue;
      const double fd8 = difference(h / 8);
      if (std::abs(fd8 - an) <= tol || std::abs(fd8 - fd) > tol) continue;  // a kink, or curvature
      std::ostringstream what;
      what << gname << "[" << e << "] (finite differences " << fd << " and " << fd8 << ", the gradient rules " << an << ")";
      return Finding{b.seed, "gradients: finite differences", what.str(), print_graph(d.graph),
                     std::abs(fd - an) / std::max(1.0, std::abs(fd)), 0};
    }
  }
  return std::nullopt;
}

std::mutex stats_mu;
CheckStats stats;

std::optional<Finding> check_gradients(const Batch& b, const Variation& v, const CpuBackend::CpuOptions& cpu) {
  const std::optional<Differentiated> d = differentiate(b);
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    ++(d ? stats.differentiated : stats.not_differentiable);
  }
  if (!d) return std::nullopt;
  Graph compiled = d->graph;
  if (v.options.gradient_checkpointing)
    apply_gradient_checkpointing(compiled, d->forward_nodes, v.options.checkpoint_segments);
  // Under mixed precision the reference runs the joint graph as the pass casts it (its conv
  // gradients on low-type operands among the rest); finite differences judge the float32
  // program's gradients, which the plain "gradients" variation already does.
  if (std::optional<Finding> f = differential(b.seed, v, compiled, reference_graph(d->graph, v), d->inputs, cpu))
    return f;
  if (v.options.mixed_precision != "none") return std::nullopt;
  return finite_differences(b, *d);
}

}  // namespace

CheckStats check_stats() {
  std::lock_guard<std::mutex> lock(stats_mu);
  return stats;
}

std::optional<Finding> check(const Batch& batch, const Variation& v, const CpuBackend::CpuOptions& cpu) {
  if (v.gradients) return check_gradients(batch, v, cpu);
  if (v.shapeless) {
    const std::optional<Graph> s = with_symbolic_shapes(batch.graph);
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      ++(s ? stats.shapeless : stats.not_shapeless);
    }
    if (!s) return std::nullopt;
    try {
      return differential(batch.seed, v, *s, batch.graph, batch.inputs, cpu);
    } catch (const Error& e) {
      // A dim inference cannot size (a slice of a symbolic dim) that is 1 at run time and
      // broadcasts: the kernels refuse it (the documented limit of symbolic compiles: an error,
      // never a wrong value; seed 180071), like a program that rests on an assumption.
      if (std::string(e.what()).find("compiled as unknown is 1 at run time") == std::string::npos) throw;
      std::lock_guard<std::mutex> lock(stats_mu);
      --stats.shapeless;
      ++stats.not_shapeless;
      return std::nullopt;
    }
  }
  return differential(batch.seed, v, batch.graph, reference_graph(batch.graph, v),
                      v.special_values ? batch.special_inputs : batch.inputs, cpu);
}

}  // namespace ingot::fuzz
