// Functional composition: arithmetic on terminals adds blocks; shapes flow both ways.
#include <iostream>

#include <ingot/ingot.h>

using namespace ingot;

int main() {
  Model m;
  Connection x = m.input("x");
  Connection w = m.parameter("w", Init::normal(0.02), ShapeTemplate{"d", "d"});
  Connection y = apply("tanh", matmul(x, w)) * 0.5 + x;  // a residual block
  m.expose(y.sum({-1}), "score");

  CompileOptions o;
  o.shapes = {{"x", {"B", "T", 16}}};  // symbolic batch and sequence
  o.verbose = true;
  std::cout << m.summary({{"x", {2, 5, 16}}});
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  std::cout << "score: " << to_string(pm.get_shapes().at("score")) << "\n";
  return 0;
}
