// A vision network from the zoo (torchvision's architecture and parameter names: ResNet-18,
// ResNet-50 or MobileNetV2) on the reference interpreter and the native CPU backend: the same
// logits, and the CPU backend's time.
//
//   build/release/example_resnet [batch] [size] [resnet18 | resnet50 | mobilenet_v2]
//   (default: batch 2, 64x64, resnet18)
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <ingot/ingot.h>

using namespace ingot;

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 2, size = argc > 2 ? std::atoll(argv[2]) : 64;
  const std::string name = argc > 3 ? argv[3] : "resnet18";
  if (name != "resnet18" && name != "resnet50" && name != "mobilenet_v2") {
    std::cerr << "example_resnet: unknown model '" << name << "' (resnet18, resnet50, mobilenet_v2)\n";
    return 2;
  }
  const Model net = name == "resnet18" ? ResNet18(/*num_classes=*/10)
                    : name == "resnet50" ? ResNet50(/*num_classes=*/10)
                                         : MobileNetV2(/*num_classes=*/10);
  try {
    CompileOptions options;
    options.shapes = {{"input", {batch, 3, size, size}}};
    options.inference = true;  // batch norm uses its running statistics
    const PhysicalModel ref = compile(net, ReferenceBackend(), options);
    const PhysicalModel cpu = compile(net, CpuBackend(), options);

    const TensorMap params = ref.randomize_params(/*seed=*/0);
    std::cout << name << ": " << params.size() << " parameter tensors, the first " << params.begin()->first << " "
              << to_string(params.begin()->second.shape()) << "\n";
    const Tensor x = Tensor::full(DType::Float32, {batch, 3, size, size}, 0.5);
    const Tensor want = ref.evaluate(params, {{"input", x}}).at("output");
    const auto start = std::chrono::steady_clock::now();
    const Tensor got = cpu.evaluate(params, {{"input", x}}).at("output");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const double diff = max_abs_diff(got, want);
    std::cout << "logits " << to_string(got.shape()) << ", CPU backend vs reference: max |diff| " << diff << " ("
              << ms << " ms on the CPU backend)\n";
    return diff < 1e-3 ? 0 : 1;
  } catch (const std::exception& e) {  // a bad batch or size: ingot's message, not a crash
    std::cerr << "example_resnet: " << e.what() << "\n";
    return 2;
  }
}
