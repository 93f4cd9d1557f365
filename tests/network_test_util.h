// Real network blocks (ResNet, MobileNetV2, ResNeXt, squeeze-and-excitation, DenseNet, U-Net) on
// the CPU backend against the reference interpreter, through the whole compile pipeline, at a
// given optimization level and layout target (CompileOptions::layout_target).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cpu_test_util.h"
#include "ingot/ingot.h"

namespace ingot::network_test {

// Random parameters with non-trivial batch-norm statistics and affine maps (randomize_params
// gives mean 0, variance 1, weight 1, bias 0: a batch norm that hides layout mistakes).
inline TensorMap random_params(const PhysicalModel& pm, uint64_t seed) {
  TensorMap p = pm.randomize_params(seed);
  uint64_t k = seed * 1000;
  for (auto& entry : p) {
    const std::string& name = entry.first;  // a plain reference: clang 14 lambdas cannot capture bindings
    Tensor& t = entry.second;
    auto ends = [&](const std::string& suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool vector = t.shape().size() == 1;
    if (ends("running_var")) t = testing::random_tensor(t.shape(), ++k, 0.5, 2.0);
    else if (ends("running_mean")) t = testing::random_tensor(t.shape(), ++k, -0.5, 0.5);
    else if (vector && ends("weight")) t = testing::random_tensor(t.shape(), ++k, 0.5, 1.5);
    else if (vector && ends("bias")) t = testing::random_tensor(t.shape(), ++k, -0.5, 0.5);
  }
  return p;
}

// max |got - want| over max(1, max |want|): float32 rounding of sums taken in another order
// stays near 1e-6; a value read in the wrong layout is off by O(1).
inline double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.astype(DType::Float64), w = want.astype(DType::Float64);
  double scale = 1, worst = 0;
  for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::abs(w.data<double>()[i]));
  for (int64_t i = 0; i < w.numel(); ++i)
    worst = std::max(worst, std::abs(g.data<double>()[i] - w.data<double>()[i]));
  return std::isnan(worst) ? INFINITY : worst / scale;
}

struct Case {
  std::string level = "medium";
  Layout layout = host_layout();
  bool gradients = false;  // training graph: also compare every parameter's gradient
};

inline std::string describe(const Case& c) {
  return "optimization_level " + c.level + ", layout_target " + std::string(layout_name(c.layout)) +
         (c.gradients ? ", gradients" : ", inference");
}

inline CompileOptions options_for(const Shape& shape, const Case& c) {
  CompileOptions o;
  o.shapes["input"] = testing::template_of(shape);
  o.inference = !c.gradients;
  o.optimization_level = c.level;
  o.layout_target = std::string(layout_name(c.layout));
  return o;
}

// What the reference interpreter computes for `m` on one input (unoptimized: the oracle), its
// parameters and, for gradient cases, the output cotangent and every gradient.
struct Expected {
  TensorMap params, inputs, outputs, seed, gradients;
};

inline Expected reference_run(const Model& m, const Shape& shape, bool gradients) {
  Case c;
  c.level = "none";
  c.gradients = gradients;
  const PhysicalModel ref = compile(m, ReferenceBackend(), options_for(shape, c));
  Expected e;
  e.params = random_params(ref, 7);
  e.inputs = {{"input", testing::random_tensor(shape, 11, -1, 1)}};
  e.outputs = ref.evaluate(e.params, e.inputs);
  if (gradients) {
    // A scalar loss through a fixed random projection of the output, so every element counts.
    e.seed = {{"output", testing::random_tensor(e.outputs.at("output").shape(), 13, -1, 1)}};
    e.gradients = ref.evaluate(e.params, e.inputs, e.seed).gradients;
  }
  return e;
}

// Compiles `m` (input "input" of `shape`, output "output") for the CPU backend under `c` and
// compares every output (and gradient) with `want` within `tol` (relative_error).
inline void expect_matches(const Model& m, const Shape& shape, const Case& c, const Expected& want, double tol = 1e-4) {
  SCOPED_TRACE(describe(c));
  const PhysicalModel cpu = compile(m, CpuBackend(cpu_test::cpu_options()), options_for(shape, c));
  if (!c.gradients) {
    const TensorMap got = cpu.evaluate(want.params, want.inputs);
    for (const auto& [name, w] : want.outputs) EXPECT_LT(relative_error(got.at(name), w), tol) << "output " << name;
    return;
  }
  const Evaluation got = cpu.evaluate(want.params, want.inputs, want.seed);
  EXPECT_LT(relative_error(got.outputs.at("output"), want.outputs.at("output")), tol) << "output";
  for (const auto& [name, w] : want.gradients) EXPECT_LT(relative_error(got.gradients.at(name), w), tol) << "gradient of " << name;
}

inline void expect_matches_reference(const Model& m, const Shape& shape, const Case& c, double tol = 1e-4) {
  expect_matches(m, shape, c, reference_run(m, shape, c.gradients), tol);
}

// Every level, and at the levels that plan layouts (medium, high) every layout target: what an
// AVX2 and an AVX-512 machine would pick, on any machine.
inline std::vector<Case> every_level_and_layout() {
  std::vector<Case> cases = {{"none", host_layout()}, {"low", host_layout()}};
  for (const char* level : {"medium", "high"})
    for (Layout l : cpu_test::all_layout_targets()) cases.push_back({level, l});
  return cases;
}

}  // namespace ingot::network_test
