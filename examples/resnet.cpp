// ResNet-18 from the zoo (torchvision's architecture and parameter names) on the reference
// interpreter and the native CPU backend: the same logits, and the CPU backend's time.
//
//   build/release/example_resnet [batch] [size]     (default: batch 2, 64x64)
#include <chrono>
#include <cstdlib>
#include <iostream>

#include <ingot/ingot.h>

using namespace ingot;

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 2, size = argc > 2 ? std::atoll(argv[2]) : 64;
  const Model net = ResNet18(/*num_classes=*/10);
  CompileOptions options;
  options.shapes = {{"input", {batch, 3, size, size}}};
  options.inference = true;  // batch norm uses its running statistics
  const PhysicalModel ref = compile(net, ReferenceBackend(), options);
  const PhysicalModel cpu = compile(net, CpuBackend(), options);

  const TensorMap params = ref.randomize_params(/*seed=*/0);
  std::cout << params.size() << " parameter tensors, e.g. layer2.0.downsample.0.weight "
            << to_string(params.at("layer2.0.downsample.0.weight").shape()) << "\n";
  const Tensor x = Tensor::full(DType::Float32, {batch, 3, size, size}, 0.5);
  const Tensor want = ref.evaluate(params, {{"input", x}}).at("output");
  const auto start = std::chrono::steady_clock::now();
  const Tensor got = cpu.evaluate(params, {{"input", x}}).at("output");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const double diff = max_abs_diff(got, want);
  std::cout << "logits " << to_string(got.shape()) << ", CPU backend vs reference: max |diff| " << diff << " ("
            << ms << " ms on the CPU backend)\n";
  return diff < 1e-3 ? 0 : 1;
}
