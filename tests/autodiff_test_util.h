// Gradient checks against central finite differences in float64, on the reference backend.
//
// check_gradients builds a graph from `build` over inputs of the given values (and optionally
// symbolic shape templates), seeds every float output with a random cotangent w, and compares
// append_backward's gradient of f = sum_k <out_k, w_k> with respect to every floating-point input
// against (f(x + h e_i) - f(x - h e_i)) / 2h, element by element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "compiler/autodiff.h"
#include "compiler/shape_inference.h"
#include "ingot/compile.h"
#include "ingot/physical_model.h"
#include "op_test_util.h"

namespace ingot::testing {

struct GradCheckOptions {
  double step = 1e-6;  // h
  double atol = 1e-6;
  double rtol = 1e-5;
  // Shape templates for the inputs (symbols allowed, e.g. {"N", 3}); empty: the static shapes.
  std::vector<ShapeTemplate> shapes;
  // Which inputs to differentiate; empty: every floating-point input.
  std::vector<int> wrt;
  // Runs the gradient graph (its inputs, then one cotangent per float output); empty: the
  // reference backend. The finite differences always run the forward graph on the reference.
  std::function<std::vector<Tensor>(const Graph&, const std::vector<Tensor>&)> run_backward;
};

using GraphBuilder = std::function<std::vector<ValueId>(Graph&, const std::vector<ValueId>&)>;

// Runs `g` on the reference backend with its inputs in leaf order.
inline std::vector<Tensor> run_graph(const Graph& g, const std::vector<Tensor>& args) {
  return ReferenceBackend().lower(g, CompileOptions{})->run(args);
}

inline double weighted_sum(const std::vector<Tensor>& outs, const std::vector<Tensor>& w) {
  double f = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    if (!w[k].defined()) continue;
    const Tensor o = outs[k].astype(DType::Float64), wk = w[k].astype(DType::Float64);
    for (int64_t i = 0; i < o.numel(); ++i) f += o.data<double>()[i] * wk.data<double>()[i];
  }
  return f;
}

inline void check_gradients(const GraphBuilder& build, const std::vector<Tensor>& inputs,
                            const GradCheckOptions& opt = {}) {
  Graph g;
  std::vector<ValueId> ins;
  std::vector<ShapeConstraint> cs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(g.add_input("in" + std::to_string(i)));
    g.value(ins.back()).dtype = inputs[i].dtype();
    cs.push_back({ins.back(), opt.shapes.empty() ? template_of(inputs[i].shape()) : opt.shapes[i], "", "test input"});
  }
  const std::vector<ValueId> outs = build(g, ins);
  for (size_t k = 0; k < outs.size(); ++k) g.set_output("out" + std::to_string(k), outs[k]);
  infer_shapes(g, cs);
  infer_types(g);
  const Graph forward = g;

  // Random cotangents (concrete shapes from a forward run), as extra inputs of the joint graph.
  const std::vector<Tensor> fwd = run_graph(forward, inputs);
  std::vector<Tensor> w(outs.size());
  std::vector<std::pair<ValueId, ValueId>> seeds;
  std::vector<Tensor> args = inputs;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!is_floating(g.value(outs[k]).dtype)) continue;
    w[k] = random_tensor(fwd[k].shape(), 1000 + k, -1, 1, fwd[k].dtype());
    const ValueId cot = g.add_input("w" + std::to_string(k));
    g.value(cot).shape = g.value(outs[k]).shape;
    g.value(cot).dtype = g.value(outs[k]).dtype;
    g.value(cot).shape_known = true;
    seeds.emplace_back(outs[k], cot);
    args.push_back(w[k]);
  }
  std::vector<int> wrt = opt.wrt;
  if (wrt.empty())
    for (size_t i = 0; i < inputs.size(); ++i)
      if (is_floating(inputs[i].dtype())) wrt.push_back(static_cast<int>(i));
  std::vector<ValueId> wrt_ids;
  for (int i : wrt) wrt_ids.push_back(ins[static_cast<size_t>(i)]);
  const std::vector<ValueId> grads = append_backward(g, seeds, wrt_ids);
  g.outputs().clear();
  for (size_t i = 0; i < grads.size(); ++i) g.set_output("grad" + std::to_string(i), grads[i]);
  verify(g);
  const std::vector<Tensor> analytic = opt.run_backward ? opt.run_backward(g, args) : run_graph(g, args);

  for (size_t j = 0; j < wrt.size(); ++j) {
    const Tensor& x = inputs[static_cast<size_t>(wrt[j])];
    ASSERT_EQ(to_string(analytic[j].shape()), to_string(x.shape())) << "gradient " << j << " shape";
    ASSERT_EQ(analytic[j].dtype(), x.dtype()) << "gradient " << j << " dtype";
    const Tensor a = analytic[j].astype(DType::Float64);
    int failures = 0;
    for (int64_t i = 0; i < x.numel() && failures < 5; ++i) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[wrt[j]] = x.astype(DType::Float64);
      minus[wrt[j]] = x.astype(DType::Float64);
      plus[wrt[j]].data<double>()[i] += opt.step;
      minus[wrt[j]].data<double>()[i] -= opt.step;
      plus[wrt[j]] = plus[wrt[j]].astype(x.dtype());
      minus[wrt[j]] = minus[wrt[j]].astype(x.dtype());
      const double fd = (weighted_sum(run_graph(forward, plus), w) - weighted_sum(run_graph(forward, minus), w)) /
                        (2 * opt.step);
      const double got = a.data<double>()[i];
      if (!(std::abs(got - fd) <= opt.atol + opt.rtol * std::abs(fd))) {
        ++failures;
        ADD_FAILURE() << "d/d input " << wrt[j] << " element " << i << ": autodiff " << got
                      << ", finite differences " << fd;
      }
    }
  }
}

// One op over `inputs` (all its outputs seeded).
inline void check_op_gradients(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs = {},
                               const GradCheckOptions& opt = {}, int num_outputs = 1) {
  check_gradients(
      [&](Graph& g, const std::vector<ValueId>& ins) { return g.add_node(op, ins, attrs, num_outputs); }, inputs,
      opt);
}

// Graph inputs x0, x1, ... typed and shaped as `feed`, their shape constraints appended to `cs`.
inline std::vector<ValueId> add_inputs_like(Graph& g, const std::vector<Tensor>& feed, std::vector<ShapeConstraint>& cs) {
  std::vector<ValueId> in;
  for (size_t i = 0; i < feed.size(); ++i) {
    in.push_back(g.add_input("x" + std::to_string(i)));
    g.value(in.back()).dtype = feed[i].dtype();
    cs.push_back({in.back(), template_of(feed[i].shape()), "", "test"});
  }
  return in;
}

// Random float64 values in [lo, hi).
inline Tensor rnd(Shape shape, uint64_t seed, double lo = -1, double hi = 1) {
  return random_tensor(std::move(shape), seed, lo, hi, DType::Float64);
}

// Options with every floating-point leaf of `model` (inputs and parameters) made float64.
inline CompileOptions float64_options(const Model& model, CompileOptions o) {
  const Graph g = build_graph(model, o);
  for (ValueId id : g.leaves())
    if (g.value(id).kind != ValueKind::Constant && is_floating(g.value(id).dtype))
      o.types[g.value(id).name] = DType::Float64;
  return o;
}

// Gradients of a compiled model against finite differences through evaluate: f = sum of the
// seeded outputs weighted by their cotangents; at most `per_tensor` elements of each
// parameter / trainable input are checked (spread over the tensor).
inline void check_model_gradients(const PhysicalModel& pm, const TensorMap& params, const TensorMap& inputs,
                                  const TensorMap& seeds, double atol = 1e-6, double rtol = 1e-5,
                                  int per_tensor = 12, double step = 1e-6) {
  const Evaluation r = pm.evaluate(params, inputs, seeds);
  auto f = [&](const TensorMap& p, const TensorMap& in) {
    const TensorMap out = pm.evaluate(p, in);
    double s = 0;
    for (const auto& [name, w] : seeds) s += weighted_sum({out.at(name)}, {w});
    return s;
  };
  for (const std::string& name : pm.gradient_names()) {
    const bool is_param = params.count(name) != 0;
    const Tensor& x = is_param ? params.at(name) : inputs.at(name);
    ASSERT_TRUE(r.gradients.count(name)) << "no gradient for " << name;
    const Tensor a = r.gradients.at(name).astype(DType::Float64);
    ASSERT_EQ(to_string(a.shape()), to_string(x.shape())) << name;
    const int64_t n = x.numel();
    const int64_t stride = std::max<int64_t>(1, n / per_tensor);
    for (int64_t i = 0; i < n; i += stride) {
      TensorMap p = params, in = inputs;
      TensorMap& target = is_param ? p : in;
      Tensor plus = x.astype(DType::Float64), minus = x.astype(DType::Float64);
      plus.data<double>()[i] += step;
      minus.data<double>()[i] -= step;
      target[name] = plus.astype(x.dtype());
      const double fp = f(p, in);
      target[name] = minus.astype(x.dtype());
      const double fm = f(p, in);
      const double fd = (fp - fm) / (2 * step);
      EXPECT_NEAR(a.data<double>()[i], fd, atol + rtol * std::abs(fd)) << name << " element " << i;
    }
  }
}

}  // namespace ingot::testing
