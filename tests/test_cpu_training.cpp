// The CPU backend's training paths against the ReferenceBackend: matmuls reading transposes
// through the GEMM flags, outputs written into the caller's (input) buffers, and the compiled
// training step updating parameters in place.
#include <gtest/gtest.h>

#include <limits>

#include "backends/cpu/codegen.h"
#include "backends/cpu/dnnl_conv.h"
#include "compiler/passes/passes.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::Contains;
using ingot::testing::error_of;
using ingot::testing::random_tensor;

namespace {

ValueId transpose(Graph& g, ValueId v, std::vector<int64_t> perm) {
  return g.add_op("transpose", {v}, {{"perm", std::move(perm)}});
}

TEST(CpuTraining, MatmulReadsTransposesThroughGemmFlags) {
  for (DType t : {DType::Float32, DType::Float64}) {
    Graph g = make_graph({{"a", {7, 5}, t}, {"b", {7, 9}, t}, {"c", {3, 9, 7}, t}, {"d", {3, 5, 7}, t}},
                         [&](Graph& g, std::vector<ValueId>& in) {
                           const ValueId at = transpose(g, in[0], {1, 0});
                           g.set_output("at_b", g.add_op("matmul", {at, in[1]}));          // [5, 9]
                           g.set_output("b_ct", g.add_op("matmul", {transpose(g, in[1], {1, 0}), in[0]}));
                           // batched: [3, 7, 9]^T-last-two x [7, 5]... both operands transposed
                           const ValueId ct = transpose(g, in[2], {0, 2, 1});            // [3, 7, 9]
                           const ValueId dt = transpose(g, in[3], {0, 2, 1});            // [3, 7, 5]
                           g.set_output("ct_dt", g.add_op("matmul", {transpose(g, ct, {0, 2, 1}), dt}));
                           g.set_output("c_a", g.add_op("matmul", {in[2], in[0]}));       // [3, 9, 5]
                           g.set_output("a_tt", g.add_op("matmul", {in[3], transpose(g, in[3], {0, 2, 1})}));
                           g.set_output("at", at);  // read by a matmul and an output: materialized
                         });
    const std::vector<Tensor> inputs = {random_tensor({7, 5}, 1, -1, 1, t), random_tensor({7, 9}, 2, -1, 1, t),
                                        random_tensor({3, 9, 7}, 3, -1, 1, t), random_tensor({3, 5, 7}, 4, -1, 1, t)};
    check(g, {inputs}, unfused, 1e-5, 1e-5);
    const cpu::GeneratedCode code = cpu::generate_cpp(g, unfused_plan(g), nchw_plan(g), {.blas = true});
    // Only `at` (an output) and `ct` (read by a transpose, not a matmul) stay transposes, each a
    // native kernel; the others are read through the GEMM's flags.
    EXPECT_EQ(count(code.source, "ig_transpose(x0, y, "), 2) << dtype_name(t);
    EXPECT_TRUE(code.fallback_nodes.empty()) << dtype_name(t);
    EXPECT_EQ(count(code.source, "ig_matmul(ctx, 0, true, true"), 1) << "ct_dt reads both operands transposed";
  }
}

// float32 matmuls run in the host's oneDNN sgemm where it has one (ig_matmul), in ig_gemm's
// OpenBLAS blocks or loops otherwise: every way gives the reference's result, transposed operands
// and batches included, and CpuOptions::num_threads reaches the library's threads.
TEST(CpuTraining, MatmulsAgreeThroughEveryGemm) {
  Graph g = make_graph({{"a", {65, 130}}, {"b", {130, 33}}, {"c", {3, 9, 7}}, {"d", {3, 5, 7}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("ab", g.add_op("matmul", {in[0], in[1]}));
                         g.set_output("bt_at", g.add_op("matmul", {transpose(g, in[1], {1, 0}), transpose(g, in[0], {1, 0})}));
                         g.set_output("c_dt", g.add_op("matmul", {in[2], transpose(g, in[3], {0, 2, 1})}));
                       });
  const std::vector<Tensor> inputs = {random_tensor({65, 130}, 1), random_tensor({130, 33}, 2),
                                      random_tensor({3, 9, 7}, 3), random_tensor({3, 5, 7}, 4)};
  const std::vector<Tensor> want = ReferenceBackend().lower(g, {})->run(inputs);
  CpuBackend::CpuOptions library = cpu_options(), loops = cpu_options(), one_thread = cpu_options();
  loops.blas = false;
  one_thread.num_threads = 1;
  for (const auto& [name, o] : std::vector<std::pair<std::string, CpuBackend::CpuOptions>>{
           {"library", library}, {"loops", loops}, {"one thread", one_thread}}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<Executable> exe = CpuBackend(o).lower(g, {});
    const std::vector<Tensor> got = exe->run(inputs);
    for (size_t i = 0; i < want.size(); ++i) expect_same(got[i], want[i], g.outputs()[i].first, 1e-5, 1e-5);
    EXPECT_NE(exe->source().find(o.num_threads == 1 ? "ig_matmul(ctx, 1, " : "ig_matmul(ctx, 0, "), std::string::npos);
    EXPECT_EQ(exe->source().find("ig_library_gemm = true") != std::string::npos, o.blas);
  }
}

// conv2d_input_grad and conv2d_weight_grad through oneDNN's backward primitives, with stride,
// padding, dilation and groups, against the reference kernels (dy = sin(conv2d(x, w))).
TEST(CpuTraining, ConvGradientsThroughOneDnn) {
  using V = std::vector<int64_t>;
  const std::vector<Attrs> configs = {
      {{"stride", V{2, 1}}, {"padding", V{1, 2}}, {"dilation", V{1, 2}}, {"groups", int64_t{2}}},
      {{"stride", V{1, 1}}, {"padding", V{1, 1}}},
      // stride 2 without padding drops the last row: oneDNN runs it with right padding 0 (its
      // floor division gives the same size), and the dropped row's input gradient is 0
      {{"stride", V{2, 2}}},
  };
  Graph g = make_graph({{"x", {"N", 4, 9, 8}}, {"w", {6, 2, 3, 3}}, {"w_full", {6, 4, 3, 3}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         for (size_t c = 0; c < configs.size(); ++c) {
                           const ValueId w = c == 0 ? in[1] : in[2];
                           const ValueId dy = g.add_op("sin", {g.add_op("conv2d", {in[0], w}, configs[c])});
                           g.set_output("dx" + std::to_string(c), g.add_op("conv2d_input_grad", {dy, w, in[0]}, configs[c]));
                           g.set_output("dw" + std::to_string(c), g.add_op("conv2d_weight_grad", {in[0], dy, w}, configs[c]));
                         }
                       });
  auto inputs = [&](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 4, 9, 8}, seed), random_tensor({6, 2, 3, 3}, seed + 1),
                               random_tensor({6, 4, 3, 3}, seed + 2)};
  };
  const std::string src = check(g, {inputs(2, 10), inputs(3, 20), inputs(0, 30)}, unfused, 1e-4, 1e-4);
  if (cpu::dnnl_available()) {
    EXPECT_EQ(count(src, "ctx->host->conv2d_grad("), 6) << src;
  }
}

// Sums, means, maxima and minima over axes that are no contiguous block (bias gradients sum
// [N, C, H, W] over 0, 2, 3): native (ig_reduce_axes), against the reference kernels.
TEST(CpuTraining, ReductionsOverAnyAxesAreNative) {
  using V = std::vector<int64_t>;
  Graph g = make_graph({{"x", {"N", 4, 5, 6}}, {"i", {"N", 3, 7}, DType::Int32}, {"f", {"N", 9}}},
                       [&](Graph& g, std::vector<ValueId>& in) {
                         g.set_output("sum_023", g.add_op("sum", {in[0]}, {{"axes", V{0, 2, 3}}}));
                         g.set_output("sum_13_keep", g.add_op("sum", {in[0]}, {{"axes", V{1, -1}}, {"keepdims", int64_t{1}}}));
                         g.set_output("mean_02", g.add_op("mean", {in[0]}, {{"axes", V{2, 0}}}));
                         g.set_output("sum_int_02", g.add_op("sum", {in[1]}, {{"axes", V{0, 2}}}));
                         g.set_output("sum_rows", g.add_op("sum", {in[2]}, {{"axes", V{0}}}));  // contiguous: ig_reduce
                         g.set_output("sum_bias", g.add_op("sum", {g.add_op("exp", {in[0]})}, {{"axes", V{0, 2, 3}}}));
                       });
  const cpu::GeneratedCode code = cpu::generate_cpp(g, unfused_plan(g), nchw_plan(g), {});
  EXPECT_TRUE(code.fallback_nodes.empty());
  EXPECT_EQ(count(code.source, "ig_reduce_axes<"), 5) << code.source;
  auto inputs = [](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n, 4, 5, 6}, seed, -2, 2), random_tensor({n, 3, 7}, seed + 1, -1e9, 1e9, DType::Int32),
                               random_tensor({n, 9}, seed + 2)};
  };
  check(g, {inputs(3, 1), inputs(1, 2), inputs(0, 3), inputs(40, 4)}, unfused, 1e-5, 1e-5);
  check(g, {inputs(2, 5)}, [](const Graph& graph) { return fusion_plan_for(graph, {}); }, 1e-5, 1e-5);

  Graph extrema = make_graph({{"x", {"N", 4, 5}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("max_02", g.add_op("max", {in[0]}, {{"axes", V{0, 2}}}));
    g.set_output("min_0", g.add_op("min", {in[0]}, {{"axes", V{0}}, {"keepdims", int64_t{1}}}));
  });
  Tensor x = random_tensor({3, 4, 5}, 7);
  x.data<float>()[6] = std::numeric_limits<float>::quiet_NaN();  // propagates as in the reference
  check(extrema, {{x}, {random_tensor({1, 4, 5}, 8)}});
  std::unique_ptr<Executable> cpu = cpu::lower_with_plan(extrema, unfused_plan(extrema), cpu_options(), false);
  EXPECT_TRUE(Contains(error_of([&] { cpu->run(std::vector<Tensor>{Tensor(DType::Float32, {0, 4, 5})}); }),
                       "max: cannot reduce over a zero-size dimension"));
}

// p - 0.5 g written into p's own buffer: the update reads p at the index it writes.
TEST(CpuTraining, OutputWrittenIntoAnInputsBuffer) {
  Graph g = make_graph({{"p", {"N", 37}}, {"g", {"N", 37}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("loss", g.add_op("sum", {g.add_op("mul", {in[0], in[1]})}));
    g.set_output("new_p", g.add_op("sub", {in[0], g.add_op("mul", {in[1], scalar(g, 0.5)})}));
  });
  const cpu::GeneratedCode code = cpu::generate_cpp(g, fusion_plan_for(g, {}), nchw_plan(g), {});
  // Both p and g are last read by the update's loop, at the index it writes.
  EXPECT_EQ(code.output_may_alias.at(1), std::vector<int>({0, 1}));
  std::unique_ptr<Executable> cpu = cpu::lower_with_plan(g, fusion_plan_for(g, {}), cpu_options(), false);
  const Tensor p = random_tensor({5, 37}, 1, -1, 1), grad = random_tensor({5, 37}, 2, -1, 1);
  const std::vector<Tensor> want = ReferenceBackend().lower(g, {})->run(std::vector<Tensor>{p.clone(), grad});
  const Tensor p_buffer = p;
  std::vector<Tensor> outs(2);
  outs[1] = p;
  cpu->run_into(std::vector<Tensor>{p, grad}, outs);
  EXPECT_TRUE(outs[1].shares_storage(p_buffer));
  EXPECT_LE(max_abs_diff(p_buffer, want[1]), 1e-6);
  EXPECT_NEAR(outs[0].item(), want[0].item(), 1e-4);
}

// p is read again after new_p is computed: writing new_p into p's buffer would corrupt that
// read, so run_into computes into a fresh buffer and copies.
TEST(CpuTraining, OutputIntoAnInputStillReadLaterIsCopied) {
  Graph g = make_graph({{"p", {4, 9}}, {"g", {4, 9}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const ValueId new_p = g.add_op("sub", {in[0], in[1]});
    g.set_output("new_p", new_p);
    g.set_output("later", g.add_op("matmul", {g.add_op("transpose", {in[0]}, {{"perm", std::vector<int64_t>{1, 0}}}), new_p}));
  });
  const FusionPlan plan = unfused_plan(g);
  EXPECT_EQ(cpu::generate_cpp(g, plan, nchw_plan(g), {}).output_may_alias.at(0), std::vector<int>({1})) << "g, not p";
  std::unique_ptr<Executable> cpu = cpu::lower_with_plan(g, plan, cpu_options(), false);
  const Tensor p = random_tensor({4, 9}, 3, -1, 1), grad = random_tensor({4, 9}, 4, -1, 1);
  const std::vector<Tensor> want = ReferenceBackend().lower(g, {})->run(std::vector<Tensor>{p.clone(), grad});
  std::vector<Tensor> outs = {p, Tensor()};
  cpu->run_into(std::vector<Tensor>{p, grad}, outs);
  EXPECT_TRUE(outs[0].shares_storage(p)) << "the result is copied into the given buffer";
  EXPECT_LE(max_abs_diff(p, want[0]), 1e-6);
  EXPECT_LE(max_abs_diff(outs[1], want[1]), 1e-5);
  // A given tensor of another dtype cannot hold the result: its handle is replaced.
  std::vector<Tensor> other = {Tensor(DType::Float64, {4, 9}), Tensor()};
  cpu->run_into(std::vector<Tensor>{random_tensor({4, 9}, 3, -1, 1), grad}, other);
  EXPECT_EQ(other[0].dtype(), DType::Float32);
}

// The compiled step's optimizer update writes each parameter and slot into its own buffer.
TEST(CpuTraining, TrainStepUpdatesParametersWithoutCopies) {
  TrainModel tm(ExampleMLP());
  tm.add_loss(CrossEntropyLoss(), {{"input", "output"}, {"target", "target"}});
  CompileOptions o;
  o.shapes = {{"input", {8, 784}}};
  const TrainStep step = compile_train_step(tm, CpuBackend(cpu_options()), SGD({.lr = 0.1, .momentum = 0.9}), o);
  const Graph& g = step.graph();
  const cpu::GeneratedCode code = cpu::generate_cpp(g, fusion_plan_for(g, o), nchw_plan(g), {});
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const std::string& name = g.outputs()[j].first;
    const size_t colon = name.find(':');
    if (name.rfind("updated", 0) != 0) continue;
    const std::string input = name.rfind("updated:", 0) == 0 ? name.substr(colon + 1) : "optimizer." + name.substr(8);
    bool aliased = false;
    for (int i : code.output_may_alias[j]) aliased = aliased || g.value(code.inputs[static_cast<size_t>(i)]).name == input;
    EXPECT_TRUE(aliased) << name << " is not written into " << input;
  }
}

}  // namespace
