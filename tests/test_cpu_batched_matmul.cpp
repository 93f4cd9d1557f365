// Batched float32 matmuls as one call: the generated code hands a product over batch dims to the
// host's batched oneDNN matmul (ingot_host::gemm_batched, ig_matmul_batched in the prelude)
// instead of looping over the batch with one GEMM call each. Every batch pattern (full batch,
// broadcast on either side and on both, a transposed operand read through its stored layout,
// vector operands, a symbolic batch) against the reference, which products take the batched call,
// and the loop that stays for zero sizes, float64 and products without the library.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/dnnl_gemm.h"
#include "compiler/passes/passes.h"
#include "cpu_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;

namespace {

ValueId swap_last_two(Graph& g, ValueId x, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  std::swap(axes[static_cast<size_t>(rank - 2)], axes[static_cast<size_t>(rank - 1)]);
  return g.add_op("transpose", {x}, {{"perm", axes}});
}

}  // namespace

TEST(CpuBatchedMatmul, EveryBatchPatternMatchesReference) {
  Graph g = make_graph({{"a3", {3, 5, 7}},
                        {"b3", {3, 7, 4}},
                        {"a4", {2, 1, 5, 7}},
                        {"at", {3, 7, 5}},
                        {"bt", {3, 4, 7}},
                        {"a2", {5, 7}},
                        {"v", {7}},
                        {"aN", {"N", 5, 7}},
                        {"bN", {"N", 7, 4}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         const ValueId a3 = in[0], b3 = in[1], a4 = in[2], at = in[3], bt = in[4], a2 = in[5],
                                       v = in[6], aN = in[7], bN = in[8];
                         g.set_output("full", g.add_op("matmul", {a3, b3}));
                         g.set_output("both_broadcast", g.add_op("matmul", {a4, b3}));  // [2, 3, 5, 4]
                         g.set_output("a_broadcast", g.add_op("matmul", {a2, b3}));
                         g.set_output("a_transposed", g.add_op("matmul", {swap_last_two(g, at, 3), b3}));
                         g.set_output("b_transposed", g.add_op("matmul", {a3, swap_last_two(g, bt, 3)}));
                         g.set_output("vector_left", g.add_op("matmul", {v, b3}));  // [3, 4]
                         g.set_output("vector_right", g.add_op("matmul", {a3, v}));  // [3, 5]: one gemm of 15 rows
                         g.set_output("symbolic", g.add_op("matmul", {aN, bN}));
                       });
  const int64_t before = cpu::gemm_batched_calls();
  check(g, {random_inputs(g, 2, 1), random_inputs(g, 1, 2)}, plan_fusion, 1e-5, 1e-6);
  // Two runs of seven batched products (all but vector_right, which folds its batch into rows).
  if (cpu::host_gemm_batched() != nullptr) {
    EXPECT_EQ(cpu::gemm_batched_calls() - before, 14);
  }
  CpuBackend::CpuOptions loops = cpu_options();
  loops.blas = false;  // every product in the generated loops, as without a BLAS library
  const int64_t before_loops = cpu::gemm_batched_calls();
  check(g, {random_inputs(g, 2, 3)}, plan_fusion, 1e-5, 1e-6, host_layout(), loops);
  EXPECT_EQ(cpu::gemm_batched_calls(), before_loops);
}

// Zero-size batch, rows, columns or depth, and float64, take the loop over the batch (the host's
// batched call refuses them, or is float32 only); each matches the reference.
TEST(CpuBatchedMatmul, ZeroSizesAndFloat64TakeTheLoop) {
  Graph g = make_graph({{"a0", {0, 5, 7}},
                        {"b0", {0, 7, 4}},
                        {"ak", {3, 5, 0}},
                        {"bk", {3, 0, 4}},
                        {"am", {3, 0, 7}},
                        {"b3", {3, 7, 4}},
                        {"ad", {3, 5, 7}, DType::Float64},
                        {"bd", {3, 7, 4}, DType::Float64}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("empty_batch", g.add_op("matmul", {in[0], in[1]}));
                         g.set_output("zero_depth", g.add_op("matmul", {in[2], in[3]}));  // zeros
                         g.set_output("no_rows", g.add_op("matmul", {in[4], in[5]}));
                         g.set_output("float64", g.add_op("matmul", {in[6], in[7]}));
                       });
  const int64_t before = cpu::gemm_batched_calls();
  check(g, {random_inputs(g, 1, 4)}, plan_fusion, 1e-6, 1e-9);
  EXPECT_EQ(cpu::gemm_batched_calls(), before);
}

// bfloat16 products over batch dims: one call of the host's batched bf16 matmul (float32
// accumulation, each result rounded once, as the reference computes it) where the host runs bf16
// natively (AVX512_BF16, AMX); elsewhere they are widened to float32 first.
TEST(CpuBatchedMatmul, Bfloat16AsOneCallWhereTheHostRunsItNatively) {
  Graph g = make_graph({{"a", {3, 5, 7}, DType::BFloat16}, {"b", {3, 7, 4}, DType::BFloat16},
                        {"a4", {2, 1, 5, 7}, DType::BFloat16}, {"bt", {3, 4, 7}, DType::BFloat16}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("full", g.add_op("matmul", {in[0], in[1]}));
                         g.set_output("both_broadcast", g.add_op("matmul", {in[2], in[1]}));
                         g.set_output("b_transposed", g.add_op("matmul", {in[0], swap_last_two(g, in[3], 3)}));
                       });
  const int64_t before = cpu::gemm_batched_calls();
  // One bfloat16 ulp (2^-8 relative) where the two sums' orders round differently.
  check(g, {random_inputs(g, 1, 5)}, plan_fusion, 1e-2, 1e-2);
  if (cpu::host_gemm_batched() != nullptr && cpu::host_gemm_bf16() != nullptr) {
    EXPECT_EQ(cpu::gemm_batched_calls() - before, 3);
  }
}
