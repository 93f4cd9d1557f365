// mixed_precision on the CPU backend: bfloat16 / float16 matmul and conv2d run natively (bfloat16
// matmuls in the host's bf16 matmul where it has one, the rest with the operands widened to
// float32, float32 GEMM / oneDNN convolution, the result rounded to the low type), and agree with
// the reference backend running the same mixed-precision graph.
#include <gtest/gtest.h>

#include "backends/cpu/dnnl_gemm.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "op_test_util.h"

namespace ingot {
namespace {

using cpu_test::count;
using testing::random_tensor;

// Compiles `model` with both backends under mixed_precision = `low`, checks the CPU source runs
// no op on a reference kernel, and compares the output. Both sides accumulate the
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
  EXPECT_EQ(count(src, ": reference kernel"), 0) << low;
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

// A transformer layer's attention runs in the low type too (scaled_dot_product_attention with
// low-type q, k, v; bfloat16 on the host's bf16 matmul where it has one), as do its projections.
TEST(CpuMixedPrecision, TransformerLayerMatchesReference) {
  for (bool causal : {false, true}) {
    TransformerEncoderLayerOptions o;
    o.d_model = 32;
    o.num_heads = 4;
    o.ffn_dim = 64;
    o.causal = causal;
    o.norm_first = causal;
    for (const char* low : {"bfloat16", "float16"}) check_mixed(TransformerEncoderLayer(o), {2, 20, 32}, true, low);
  }
}

// A bfloat16 matmul runs natively: the host's bf16 matmul (oneDNN) where it has one (AVX512_BF16,
// AMX), else (and with BLAS off, on every host) the operands widened to float32 in the kernel.
// Both paths against the reference on the product's forms: one GEMM over a batch, a loop over
// broadcast batches, transposed operands read in place, vectors, and empty sizes. Both round
// the float32 sum once to bfloat16 as the reference does, so they differ by at most one ulp of
// bfloat16 (2^-8 relative) where summation order moves a sum across a rounding boundary.
TEST(CpuMixedPrecision, Bfloat16MatmulOfEveryFormMatchesReference) {
  const DType bf = DType::BFloat16;
  Graph g = cpu_test::make_graph(
      {{"a", {"B", 17, 33}, bf}, {"w", {33, 9}, bf}, {"bb", {2, 1, 33, 9}, bf}, {"wt", {9, 33}, bf}, {"v", {33}, bf},
       {"e", {"B", 0, 33}, bf}, {"k0", {4, 0}, bf}, {"k1", {0, 5}, bf}},
      [](Graph& g, std::vector<ValueId>& in) {
        g.set_output("folded", g.add_op("matmul", {in[0], in[1]}));
        g.set_output("broadcast", g.add_op("matmul", {in[0], in[2]}));
        g.set_output("transposed_b", g.add_op("matmul", {in[0], g.add_op("transpose", {in[3]}, {{"perm", std::vector<int64_t>{1, 0}}})}));
        g.set_output("transposed_a", g.add_op("matmul", {g.add_op("transpose", {in[0]}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), in[0]}));
        g.set_output("vector", g.add_op("matmul", {in[0], in[4]}));
        g.set_output("no_rows", g.add_op("matmul", {in[5], in[1]}));
        g.set_output("no_depth", g.add_op("matmul", {in[6], in[7]}));
      });
  auto inputs = [&](int64_t b, uint64_t seed) {
    std::vector<Tensor> ins;
    for (ValueId id : g.leaves_of(ValueKind::Input)) {
      Shape s;
      for (const SymDim& d : g.value(id).shape) s.push_back(d.known() ? d.value : b);
      ins.push_back(random_tensor(s, seed + static_cast<uint64_t>(id), -2, 2).astype(bf));
    }
    return ins;
  };
  CpuBackend::CpuOptions widened = cpu_test::cpu_options();
  widened.blas = false;
  const int64_t before = cpu::gemm_bf16_calls();
  for (const bool host : {true, false}) {
    SCOPED_TRACE(host ? "host bf16 matmul where there is one" : "widened (BLAS off)");
    const std::string src = cpu_test::check(g, {inputs(3, 10), inputs(1, 20)}, cpu_test::unfused, 1e-2, 1e-2,
                                            host_layout(), host ? cpu_test::cpu_options() : widened);
    EXPECT_EQ(count(src, "nodes on reference kernels (host callback): 0."), 1);
  }
  EXPECT_EQ(cpu::gemm_bf16_calls() > before, cpu::host_gemm_bf16() != nullptr);
}

}  // namespace
}  // namespace ingot
