// Lazy arrays, compile(fn), grad and hot-path auto-compile in one page.
//   build/release/example_function_compile
#include <cmath>
#include <cstdio>

#include <ingot/ingot.h>

using namespace ingot;

int main() {
  // compile(fn): traced on the first call, built with the CPU backend, cached per signature.
  auto gelu = compile([](const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; });
  Array x = random::normal({256, 1024});
  Array y = gelu(x);
  std::printf("gelu: %s, mean %.4f, compiles so far: %d\n", to_string(y.shape()).c_str(), mean(y).item<float>(),
              compile_count());

  // grad composes with compile.
  auto loss = [](const Array& w) { return sum(tanh(w) * w); };
  auto dloss = compile(grad(UnaryArrayFunction(loss)));
  Array w = random::uniform({4});
  std::printf("d loss / dw[0] = %.5f\n", dloss(w).to_vector<float>()[0]);

  // Auto-compile: the same graph evaluated 10 times is built in the background, then reused.
  CompileConfig config = compile_config();
  config.auto_compile = true;
  set_compile_config(config);
  Array a = random::normal({64, 128}), b = random::normal({128, 32});
  for (int i = 0; i < 12; ++i) eval(sum(relu(matmul(a, b))));
  wait_for_background_compiles();
  eval(sum(relu(matmul(a, b))));
  const AutoCompileStats s = auto_compile_stats();
  std::printf("auto-compile: %lld eager runs, %lld compiled runs\n", static_cast<long long>(s.eager_runs),
              static_cast<long long>(s.compiled_runs));
}
