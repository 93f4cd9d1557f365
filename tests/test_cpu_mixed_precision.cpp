// mixed_precision on the CPU backend: bfloat16 / float16 matmul and conv2d run natively (operands
// widened to float32, float32 GEMM / oneDNN convolution, the result rounded to the low type), and
// agree with the reference backend running the same mixed-precision graph.
#include <gtest/gtest.h>

#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using cpu_test::count;
using testing::random_tensor;

// Compiles `model` with both backends under mixed_precision = `low`, checks the CPU source runs
// no matmul / conv2d on a reference kernel, and compares the output. Both sides accumulate the
// same low-precision operands in float32 and round once, so they differ only where float32
// summation order moves a result across a rounding boundary of the low type: about one ulp of
// it (bfloat16 2^-8, float16 2^-11 relative), carried through the layers after.
void check_mixed(const Model& model, const Shape& input, bool inference, const std::string& low) {
  CompileOptions o;
  ShapeTemplate s;
  for (int64_t d : input) s.push_back(d);
  o.shapes["input"] = s;
  o.inference = inference;
  o.mixed_precision = low;
  PhysicalModel ref = compile(model, ReferenceBackend(), o);
  PhysicalModel cpu = compile(model, CpuBackend(cpu_test::cpu_options()), o);
  const std::string src = CpuBackend(cpu_test::cpu_options()).lower(cpu.graph(), o)->source();  // a cache hit
  EXPECT_EQ(count(src, "// matmul: reference kernel"), 0) << low;
  EXPECT_EQ(count(src, "// conv2d: reference kernel"), 0) << low;
  TensorMap params = ref.randomize_params(3);
  TensorMap in = {{"input", random_tensor(input, 4)}};
  const Tensor want = ref.evaluate(params, in).at("output"), got = cpu.evaluate(params, in).at("output");
  const double tol = low == "bfloat16" ? 3e-2 : 4e-3;
  cpu_test::expect_same(got, want, low + " output", tol, tol);
}

TEST(CpuMixedPrecision, MLPMatchesReference) {
  for (const char* low : {"bfloat16", "float16"}) check_mixed(ExampleMLP(), {5, 784}, false, low);
}

TEST(CpuMixedPrecision, CNNMatchesReference) {
  for (const char* low : {"bfloat16", "float16"}) check_mixed(ExampleCNN(4), {2, 3, 8, 8}, true, low);
}

}  // namespace
}  // namespace ingot
