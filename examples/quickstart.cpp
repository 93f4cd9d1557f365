// The README's C++ quick start: build a model, compile it, run it.
#include <iostream>

#include <ingot/ingot.h>

using namespace ingot;

int main() {
  // A logical model: blocks chained with +=, terminals named where we care.
  Model model;
  model += Linear(256);
  model += Relu();
  model += Linear(10)({{"output", IOKey("logits").expose()}});

  CompileOptions options;
  options.shapes = {{"input", {"N", 784}}};  // symbolic batch
  PhysicalModel pm = compile(model, ReferenceBackend(), options);

  for (const auto& [name, shape] : pm.get_shapes()) std::cout << name << ": " << to_string(shape) << "\n";

  TensorMap params = pm.randomize_params(/*seed=*/0);
  Tensor x = Tensor::full(DType::Float32, {4, 784}, 0.5);
  TensorMap out = pm.evaluate(params, {{"input", x}});
  std::cout << "logits: " << out.at("logits").str() << "\n";
  return 0;
}
