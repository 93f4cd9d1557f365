// The zoo's vision networks (ResNet-18, ResNet-50, MobileNetV2) end to end at a small
// resolution: parameters named as torchvision names them, and the CPU backend's logits against
// the reference interpreter's (inference at levels none and low, at the default level under every
// layout target, and at level high on this machine's target).
#include <gtest/gtest.h>

#include "backends/cpu/conv_post_ops.h"
#include "backends/cpu/dnnl_conv.h"
#include "network_test_util.h"

using namespace ingot;
using namespace ingot::network_test;

namespace {

std::vector<std::string> param_names(const Model& m, const Shape& shape) {
  CompileOptions o;
  o.shapes["input"] = ingot::testing::template_of(shape);
  o.inference = true;
  std::vector<std::string> names;
  for (const auto& [name, t] : compile(m, ReferenceBackend(), o).randomize_params(0)) names.push_back(name);
  return names;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

void every_target(const Model& m, const Shape& shape) {
  const Expected want = reference_run(m, shape, false);
  for (const char* level : {"none", "low"}) expect_matches(m, shape, {level, host_layout()}, want);
  for (Layout l : cpu_test::all_layout_targets()) expect_matches(m, shape, {"medium", l}, want);
  expect_matches(m, shape, {"high", host_layout()}, want);
}

}  // namespace

TEST(VisionModels, ParametersCarryTorchvisionNames) {
  const std::vector<std::string> r18 = param_names(ResNet18(10), {1, 3, 32, 32});
  for (const char* n : {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer1.1.bn2.bias",
                        "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_mean", "layer4.1.conv2.weight",
                        "fc.weight", "fc.bias"})
    EXPECT_TRUE(has(r18, n)) << n;
  EXPECT_FALSE(has(r18, "layer1.0.downsample.0.weight")) << "64 -> 64 channels at stride 1 needs no downsample";
  EXPECT_EQ(r18.size(), 1u + 4u + 8u * 10u + 3u * 5u + 2u) << "torchvision's state dict, less num_batches_tracked";
  const std::vector<std::string> r50 = param_names(ResNet50(10), {1, 3, 32, 32});
  for (const char* n : {"layer1.0.downsample.0.weight", "layer1.2.conv3.weight", "layer3.5.bn3.weight", "layer4.2.conv1.weight"})
    EXPECT_TRUE(has(r50, n)) << n;
  const std::vector<std::string> mb = param_names(MobileNetV2(10), {1, 3, 32, 32});
  for (const char* n : {"features.0.0.weight", "features.0.1.running_mean", "features.1.conv.0.0.weight",
                        "features.1.conv.1.weight", "features.2.conv.0.0.weight", "features.2.conv.1.0.weight",
                        "features.2.conv.2.weight", "features.2.conv.3.running_var", "features.17.conv.3.bias",
                        "features.18.0.weight", "classifier.1.weight"})
    EXPECT_TRUE(has(mb, n)) << n;
}

TEST(VisionModels, BadArgumentsAreClearErrors) {
  EXPECT_THROW(ResNet18(0), Error);
  EXPECT_THROW(BasicBlock(0), Error);
  EXPECT_THROW(Bottleneck(16, 1, false, 0), Error);
  EXPECT_THROW(InvertedResidual(16, 16, 3, 6), Error);
  EXPECT_THROW(MobileNetV2(10, 0.0), Error);
}

TEST(VisionModels, ResNet18MatchesReference) { every_target(ResNet18(10), {2, 3, 32, 32}); }
TEST(VisionModels, ResNet50MatchesReference) { every_target(ResNet50(10), {1, 3, 32, 32}); }
TEST(VisionModels, MobileNetV2MatchesReference) { every_target(MobileNetV2(10), {1, 3, 32, 32}); }

// With the weights as constants (as ONNX Runtime holds initializers), every convolution's input
// but the image is proven finite by the convolutions that made it (conv_post_ops.h), so a call
// scans the image alone for NaN and inf; the logits still match the reference's.
TEST(VisionModels, WithConstantWeightsACallScansOnlyTheImage) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "built without oneDNN";
  const Shape shape{1, 3, 32, 32};
  for (const auto& [name, model] : {std::pair{"ResNet-18", ResNet18(10)}, std::pair{"ResNet-50", ResNet50(10)},
                                    std::pair{"MobileNetV2", MobileNetV2(10)}}) {
    SCOPED_TRACE(name);
    const Expected want = reference_run(model, shape, false);
    CompileOptions o = options_for(shape, Case{});
    o.constant_keys = want.params;
    const PhysicalModel cpu = compile(model, CpuBackend(cpu_test::cpu_options()), o);
    for (int call = 0; call < 2; ++call) {
      const int64_t before = cpu::non_finite_scans();
      const TensorMap got = cpu.evaluate({}, want.inputs);
      EXPECT_EQ(cpu::non_finite_scans() - before, 1) << "call " << call;
      EXPECT_LT(relative_error(got.at("output"), want.outputs.at("output")), 1e-4);
    }
  }
}
