// Gradients from a compiled model: evaluate with output_gradients returns the outputs and the
// gradient of the loss with respect to every parameter (README "Gradients").
#include <iostream>

#include <ingot/ingot.h>

using namespace ingot;

int main() {
  Model m;
  m += Linear(16);
  m += Relu();
  m += Linear(3)({{"output", IOKey("logits").expose()}});
  m |= CrossEntropyLoss()({{"input", "logits"}, {"target", "target"}, {"output", IOKey("loss").expose()}});

  CompileOptions options;
  options.shapes = {{"input", {"N", 8}}, {"target", {"N"}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), options);
  TensorMap params = pm.randomize_params(0);

  TensorMap inputs{{"input", Tensor::full(DType::Float32, {4, 8}, 0.5)},
                   {"target", Tensor::from_vector<int64_t>({0, 1, 2, 1}, {4})}};
  Evaluation r = pm.evaluate(params, inputs, {{"loss", Tensor::scalar(1.0f)}});
  std::cout << "loss: " << r.outputs.at("loss").item() << "\n";
  for (const std::string& name : pm.gradient_names())
    std::cout << "d loss / d " << name << ": " << r.gradients.at(name).str(4) << "\n";
  return 0;
}
