// The differential fuzzer's logical-model front door: random compositions of zoo blocks
// (Model += block), compiled with compile(model, backend, options) as users do, the CPU backend
// against the reference backend with the same parameters (randomize_params), forward and, for
// training graphs, every parameter's gradient.
//
// Two families: convolutional stacks on [N, C, H, W] (Conv2d with every kernel, stride and
// padding, BatchNorm2d, activations, Relu6, MobileNetV3's hardswish, SiLU, pools (max in
// ceil_mode too), ResNet basic and bottleneck blocks with and without downsampling, MobileNetV2
// inverted residuals, DenseNet layers, a global pool and a Linear head) and
// dense stacks on [N, D] (Linear, MLP, LayerNorm, activations, softmax, dropout, identity).
// Shapes are tracked while drawing so every model is valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ingot/ingot.h"
#include "programs.h"

namespace ingot::fuzz {

struct ModelCase {
  uint64_t seed = 0;
  Model model;
  std::string description;  // the blocks, in order: "Conv2d(8, k3, s2, p1) BatchNorm2d Relu ..."
  ShapeTemplate input_shape;
  Tensor input;
};
ModelCase random_model(uint64_t seed);

// Compiles `c` for both backends under `v` (its options, threads; `v.gradients`: a training
// compile whose parameter gradients are compared too; otherwise an inference compile) and
// compares outputs (and gradients) relative to each one's largest magnitude, at 1e-3: a network
// rounds differently in another summation order, a layout or fusion bug is off by far more.
std::optional<Finding> check_model(const ModelCase& c, const Variation& v, const CpuBackend::CpuOptions& cpu = {});

}  // namespace ingot::fuzz
