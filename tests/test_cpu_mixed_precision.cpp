// mixed_precision on the CPU backend: bfloat16 / float16 matmul and conv2d run natively (bfloat16
// matmuls in the host's bf16 matmul where it has one, bfloat16 convs in oneDNN's bf16 kernels on
// an AMX host, the rest with the operands widened to float32, float32 GEMM / oneDNN convolution,
// the result rounded to the low type), and agree with the reference backend running the same
// mixed-precision graph.
#include <gtest/gtest.h>

#include "backends/cpu/dnnl_gemm.h"
#include "backends/cpu/dnnl_conv.h"
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

// `exe` against the reference `ref` on `ins`: every output of `g` within rtol = atol = `tol`.
void expect_matches(const Executable& ref, const Executable& exe, const Graph& g, const std::vector<Tensor>& ins,
                    const std::string& what, double tol) {
  const std::vector<Tensor> want = ref.run(ins), got = exe.run(ins);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) cpu_test::expect_same(got[i], want[i], what + " " + g.outputs()[i].first, tol, tol);
}

// A bfloat16 training step's output and every gradient (float32) against the reference's, within
// two units of bfloat16 (the gradients relative to their largest value).
void expect_step_matches(const Evaluation& got, const Evaluation& want) {
  cpu_test::expect_same(got.outputs.at("output"), want.outputs.at("output"), "output", 3e-2, 3e-2);
  ASSERT_EQ(got.gradients.size(), want.gradients.size());
  for (const auto& [name, w] : want.gradients) {
    const Tensor& gr = got.gradients.at(name);
    EXPECT_EQ(gr.dtype(), DType::Float32) << name;
    const double scale = std::max(1.0, max_abs_diff(w, Tensor::full(w.dtype(), w.shape(), 0.0)));
    cpu_test::expect_same(gr, w, "gradient of " + name, 3e-2, 3e-2 * scale);
  }
}

TEST(CpuMixedPrecision, MLPMatchesReference) {
  for (const char* low : {"bfloat16", "float16"}) check_mixed(ExampleMLP(), {5, 784}, false, low);
}

TEST(CpuMixedPrecision, CNNMatchesReference) {
  for (const char* low : {"bfloat16", "float16"}) check_mixed(ExampleCNN(4), {2, 3, 8, 8}, true, low);
}

// A transformer layer's attention runs in the low type too (scaled_dot_product_attention with
// low-type q, k, v; bfloat16 on the host's bf16 matmul where it has one), as do its projections.
// ResNet's blocks under mixed precision: their convs in bfloat16 (oneDNN's AMX kernels where the
// host has them), batch norms and residual adds around them.
TEST(CpuMixedPrecision, ResNetBlocksMatchReference) {
  check_mixed(BasicBlock(8, 2, true), {2, 4, 9, 9}, true, "bfloat16");
  check_mixed(Bottleneck(4, 1, true), {1, 8, 7, 7}, true, "bfloat16");
}

// A bfloat16 conv2d of every form against the reference: with a bias, strided (dropping the last
// row), grouped, depthwise, dilated, a 7x7 stem over 3 channels, weights that are a graph
// constant (reordered once at load), no input channels (the bias alone), batch 1 and 0. On an AMX
// host each runs as a oneDNN bf16 convolution (x and y NCHW, channels-last inside); elsewhere
// (and under ONEDNN_MAX_CPU_ISA=AVX2: ctest cpu_tests_onednn_avx2) widened to float32. Both sum
// exact bf16 products in float32 and round once, so they differ from the reference by one ulp of
// bfloat16 (2^-8 relative) at most, where summation order moves a sum across a rounding boundary.
TEST(CpuMixedPrecision, Bfloat16ConvolutionOfEveryFormMatchesReference) {
  const DType bf = DType::BFloat16;
  Graph g = cpu_test::make_graph(
      {{"x", {"B", 16, 9, 9}, bf}, {"w3", {32, 16, 3, 3}, bf}, {"b32", {32}, bf}, {"w1", {8, 16, 1, 1}, bf},
       {"wg", {16, 4, 3, 3}, bf}, {"wd", {16, 1, 3, 3}, bf}, {"stem", {"B", 3, 11, 11}, bf}, {"w7", {5, 3, 7, 7}, bf},
       {"x0", {"B", 0, 5, 5}, bf}, {"w0", {4, 0, 3, 3}, bf}, {"b4", {4}, bf}},
      [&](Graph& g, std::vector<ValueId>& in) {
        using Ints = std::vector<int64_t>;
        auto conv = [&](std::vector<ValueId> ins, Ints stride, Ints pad, Ints dil, int64_t groups) {
          return g.add_op("conv2d", ins, {{"stride", stride}, {"padding", pad}, {"dilation", dil}, {"groups", groups}});
        };
        g.set_output("bias", conv({in[0], in[1], in[2]}, {1, 1}, {1, 1}, {1, 1}, 1));
        g.set_output("strided", conv({in[0], in[3]}, {2, 2}, {0, 0}, {1, 1}, 1));
        g.set_output("grouped", conv({in[0], in[4]}, {1, 1}, {1, 1}, {1, 1}, 4));
        g.set_output("depthwise", conv({in[0], in[5]}, {2, 1}, {1, 1}, {1, 1}, 16));
        g.set_output("dilated", conv({in[0], in[3]}, {1, 1}, {0, 0}, {2, 2}, 1));
        g.set_output("stem_7x7", conv({in[6], in[7]}, {2, 2}, {3, 3}, {1, 1}, 1));
        const ValueId wc = g.add_constant("wc", random_tensor({8, 16, 3, 3}, 77, -1, 1).astype(bf));
        g.set_output("constant_weights", conv({in[0], wc}, {1, 1}, {1, 1}, {2, 2}, 1));
        g.set_output("no_input_channels", conv({in[8], in[9], in[10]}, {1, 1}, {1, 1}, {1, 1}, 1));
      });
  CpuBackend cpu(cpu_test::cpu_options());
  std::unique_ptr<Executable> ref = ReferenceBackend().lower(g, {}), exe = cpu.lower(g, {});
  EXPECT_EQ(count(exe->source(), "nodes on reference kernels (host callback): 0."), 1);
  // Each conv is a oneDNN primitive: in bfloat16 on an AMX host, else widened to float32.
  EXPECT_EQ(count(exe->source(), "// oneDNN primitive, created by the host"), 8);
  EXPECT_EQ(count(exe->source(), "const ig_bf16* x0"), cpu::dnnl_native_bf16_conv() ? 8 : 0);
  for (const int64_t batch : {2, 1, 0})
    expect_matches(*ref, *exe, g, cpu_test::random_inputs(g, batch, 30, -2, 2), "batch " + std::to_string(batch), 1e-2);
}

// A network in bfloat16 throughout (compile(fn) on bf16 arrays, or the mixed_precision pass's
// convs with what reads them), under every layout target: on an AMX host the layout plan stores
// each bf16 conv's output NHWC (LayoutTarget::bf16_convs: oneDNN's AMX kernels take it, so no
// reorder around the conv) and carries it through the pools, batch norm, residual add, channel
// concat, global pool, average pool and a last max pool, which read it there; elsewhere the convs are widened and the plan is
// float32's. Against the reference, batch 2 and 1.
TEST(CpuMixedPrecision, Bfloat16NetworkInEveryLayoutTargetMatchesReference) {
  const DType bf = DType::BFloat16;
  using V = std::vector<int64_t>;
  Graph g = cpu_test::make_graph(
      {{"x", {"B", 16, 10, 10}, bf}, {"w1", {16, 16, 3, 3}, bf}, {"b1", {16}, bf}, {"w2", {16, 16, 1, 1}, bf},
       {"w3", {8, 32, 3, 3}, bf}, {"scale", {16}, bf}, {"var", {16}, bf}},
      [&](Graph& g, std::vector<ValueId>& in) {
        const ValueId c1 = g.add_op("conv2d", {in[0], in[1], in[2]}, {{"padding", V{1, 1}}});
        const ValueId p = g.add_op("max_pool2d", {g.add_op("relu", {c1})},
                                   {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}});
        const ValueId bn = g.add_op("batch_norm", {p, in[5], in[2], in[2], in[6]});
        const ValueId c2 = g.add_op("conv2d", {bn, in[3]});
        const ValueId sum = g.add_op("add", {c2, p});
        const ValueId cat = g.add_op("concat", {sum, c2}, {{"axis", int64_t{1}}});
        const ValueId c3 = g.add_op("conv2d", {cat, in[4]}, {{"padding", V{1, 1}}});
        g.set_output("pooled", g.add_op("global_avg_pool2d", {g.add_op("relu", {c3})}));
        g.set_output("pool_2x2", g.add_op("max_pool2d", {c3}, {{"kernel", V{2, 2}}, {"stride", V{2, 2}}}));
        const ValueId avg = g.add_op("avg_pool2d", {c2}, {{"kernel", V{3, 3}}, {"stride", V{1, 1}}, {"padding", V{1, 1}}});
        g.set_output("avg_then_conv", g.add_op("conv2d", {avg, in[3]}));
      });
  auto inputs = [&](int64_t batch) {
    std::vector<Tensor> ins = cpu_test::random_inputs(g, batch, 50);
    const ValueId var = g.leaves_of(ValueKind::Input).back();  // positive: batch_norm's variance
    ins.back() = random_tensor({16}, 50 + static_cast<uint64_t>(var), 0.5, 2).astype(bf);
    return ins;
  };
  std::unique_ptr<Executable> ref = ReferenceBackend().lower(g, {});
  for (const Layout target : cpu_test::all_layout_targets()) {
    SCOPED_TRACE("layout target " + std::string(layout_name(target)));
    CompileOptions o;
    o.layout_target = std::string(layout_name(target));
    std::unique_ptr<Executable> exe = CpuBackend(cpu_test::cpu_options()).lower(g, o);
    const std::string src = exe->source();
    EXPECT_EQ(count(src, "nodes on reference kernels (host callback): 0."), 1);
    // The convs read NHWC but for the first (the input, NCHW) and write NHWC but for the last two
    // (a graph output, and c3, read by a max pool whose output is a graph output, NCHW).
    if (cpu::dnnl_native_bf16_conv()) {
      EXPECT_EQ(count(src, "at load (x nhwc, "), target == Layout::Nchw ? 0 : 3);
      EXPECT_EQ(count(src, ", y nhwc, 0 post-ops)"), target == Layout::Nchw ? 0 : 2);
    }
    for (const int64_t batch : {2, 1}) expect_matches(*ref, *exe, g, inputs(batch), "batch " + std::to_string(batch), 2e-2);
  }
}

// avg_pool2d in the half types runs the generated kernel (ig_avg_pool2d summing and dividing in
// float32, rounded once), as the reference computes it: the same sums in the same order, so the
// same bits. Padded windows with and without count_include_pad, batch 2 and 0.
TEST(CpuMixedPrecision, HalfTypeAveragePoolsAreNativeAndExact) {
  using V = std::vector<int64_t>;
  for (const DType t : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Graph g = cpu_test::make_graph({{"x", {"N", 3, 7, 6}, t}}, [&](Graph& g, std::vector<ValueId>& in) {
      for (const int64_t include_pad : {1, 0})
        g.set_output("avg" + std::to_string(include_pad),
                     g.add_op("avg_pool2d", {in[0]},
                              {{"kernel", V{3, 2}}, {"stride", V{2, 2}}, {"padding", V{1, 1}}, {"count_include_pad", include_pad}}));
    });
    const std::string src = cpu_test::check(g, {{random_tensor({2, 3, 7, 6}, 5, -3, 3).astype(t)},
                                                {random_tensor({0, 3, 7, 6}, 6).astype(t)}}, cpu_test::unfused, 0, 0);
    EXPECT_EQ(count(src, "nodes on reference kernels (host callback): 0."), 1);
  }
}

// Mixed precision's conv gradients (the pass gives a training step's conv2d_input_grad and
// conv2d_weight_grad two bfloat16 operands and leaves `like`, so the result, float32) of every
// form against the reference. On an AMX host those whose output (dy) is 6x6 or more run oneDNN's
// bf16 backward kernels (bf16_conv_grad_fits); the smaller ones, a weight gradient over fewer
// than 8 channels per group (the 3-channel stem's, a grouped conv's) and, elsewhere (ctest
// cpu_tests_onednn_avx2), every one are widened to float32 and run the float32 primitives. Both
// sum the same exact products in float32 and write float32 (bf16 for a bf16 `like`): they differ
// by float32 summation order only.
TEST(CpuMixedPrecision, Bfloat16ConvGradientsOfEveryFormMatchReference) {
  const DType bf = DType::BFloat16, f32 = DType::Float32;
  Graph g = cpu_test::make_graph(
      {{"x", {"B", 16, 9, 9}, bf},      {"x_like", {"B", 16, 9, 9}, f32}, {"w3", {32, 16, 3, 3}, bf},
       {"w3_like", {32, 16, 3, 3}, f32}, {"dy9", {"B", 32, 9, 9}, bf},    {"w1", {8, 16, 1, 1}, bf},
       {"w1_like", {8, 16, 1, 1}, f32},  {"dy5", {"B", 8, 5, 5}, bf},     {"x14", {"B", 16, 14, 14}, bf},
       {"x14_like", {"B", 16, 14, 14}, f32}, {"dy7", {"B", 32, 7, 7}, bf}, {"wg", {16, 4, 3, 3}, bf},
       {"wg_like", {16, 4, 3, 3}, f32},  {"dyg", {"B", 16, 9, 9}, bf},    {"stem", {"B", 3, 16, 16}, bf},
       {"stem_like", {"B", 3, 16, 16}, f32}, {"w7", {8, 3, 7, 7}, bf},    {"w7_like", {8, 3, 7, 7}, f32},
       {"dy8", {"B", 8, 8, 8}, bf}},
      [&](Graph& g, std::vector<ValueId>& in) {
        using Ints = std::vector<int64_t>;
        auto both = [&](const std::string& name, ValueId x, ValueId x_like, ValueId w, ValueId w_like, ValueId dy,
                        Ints stride, Ints pad, Ints dil, int64_t groups) {
          const Attrs a = {{"stride", stride}, {"padding", pad}, {"dilation", dil}, {"groups", groups}};
          g.set_output(name + "_dx", g.add_op("conv2d_input_grad", {dy, w, x_like}, a));
          g.set_output(name + "_dw", g.add_op("conv2d_weight_grad", {x, dy, w_like}, a));
        };
        both("same_3x3", in[0], in[1], in[2], in[3], in[4], {1, 1}, {1, 1}, {1, 1}, 1);
        both("strided_1x1", in[0], in[1], in[5], in[6], in[7], {2, 2}, {0, 0}, {1, 1}, 1);  // 5x5: widened
        both("strided_3x3", in[8], in[9], in[2], in[3], in[10], {2, 2}, {1, 1}, {1, 1}, 1);
        both("grouped", in[0], in[1], in[11], in[12], in[13], {1, 1}, {1, 1}, {1, 1}, 4);   // dw widened
        both("dilated", in[0], in[1], in[2], in[3], in[4], {1, 1}, {2, 2}, {2, 2}, 1);
        both("stem_7x7", in[14], in[15], in[16], in[17], in[18], {2, 2}, {3, 3}, {1, 1}, 1);  // dw widened
        g.set_output("bf16_result_dx", g.add_op("conv2d_input_grad", {in[4], in[2], in[0]}, {{"padding", Ints{1, 1}}}));
      });
  CpuBackend cpu(cpu_test::cpu_options());
  std::unique_ptr<Executable> ref = ReferenceBackend().lower(g, {}), exe = cpu.lower(g, {});
  const std::string src = exe->source();
  EXPECT_EQ(count(src, "nodes on reference kernels (host callback): 0."), 1);
  if (cpu::dnnl_available()) {
    EXPECT_EQ(count(src, "// oneDNN backward primitive, created by the host at load"), 13);
    const int native = count(src, "_conv2d_input_grad(const ig_ctx* ctx, const ig_bf16*") +
                       count(src, "_conv2d_weight_grad(const ig_ctx* ctx, const ig_bf16*");
    EXPECT_EQ(native, cpu::dnnl_native_bf16_conv() ? 9 : 0) << src;
  }
  for (const int64_t batch : {2, 1, 0})
    expect_matches(*ref, *exe, g, cpu_test::random_inputs(g, batch, 40), "batch " + std::to_string(batch), 1e-3);
}

// A training step of ResNet's basic block under bfloat16 mixed precision: its forward convs,
// both gradients of each (on AMX: oneDNN's bf16 backward kernels, the block's 8x8 outputs fit)
// and the batch norms' backward in float32 around them. Gradients of every parameter and of the
// output against the reference running the same graph; bf16's roundings of the forward convs'
// outputs can land one ulp apart (2^-8), which the batch norms' backward carries on.
TEST(CpuMixedPrecision, ResNetBlockTrainingStepMatchesReference) {
  CompileOptions o;
  o.shapes["input"] = {2, 8, 8, 8};
  o.mixed_precision = "bfloat16";
  const Model block = BasicBlock(8, 1, false);
  PhysicalModel ref = compile(block, ReferenceBackend(), o);
  PhysicalModel cpu = compile(block, CpuBackend(cpu_test::cpu_options()), o);
  const TensorMap params = ref.randomize_params(5);
  const TensorMap in = {{"input", random_tensor({2, 8, 8, 8}, 6)}};
  const TensorMap cot = {{"output", random_tensor({2, 8, 8, 8}, 7)}};
  const Evaluation want = ref.evaluate(params, in, cot), got = cpu.evaluate(params, in, cot);
  expect_step_matches(got, want);
}

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

// A training step of a transformer layer under bfloat16 mixed precision: its projections and FFN
// products, the attention and the attention's gradient in bfloat16 (on a host with a bf16 matmul,
// ig_attention_grad_bf16: P and dS rounded to bfloat16 for the gradients' products, one rounding
// more than the reference's), layer norms and GELU float32. Each value mixed_precision converts
// is cast once for all its readers (x for the three projections, each weight for its forward and
// backward products), and a transposed operand is the transpose of the converted value, so the
// CPU backend reads it in place. Every parameter's gradient and the output against the
// reference running the same graph.
TEST(CpuMixedPrecision, TransformerTrainingStepMatchesReference) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal, pre-norm" : "post-norm");
    TransformerEncoderLayerOptions lo;
    lo.d_model = 32;
    lo.num_heads = 2;
    lo.ffn_dim = 64;
    lo.causal = causal;
    lo.norm_first = causal;
    CompileOptions o;
    o.shapes["input"] = {2, 24, 32};
    o.mixed_precision = "bfloat16";
    const Model layer = TransformerEncoderLayer(lo);
    PhysicalModel ref = compile(layer, ReferenceBackend(), o);
    PhysicalModel cpu = compile(layer, CpuBackend(cpu_test::cpu_options()), o);
    const TensorMap params = ref.randomize_params(8);
    const TensorMap in = {{"input", random_tensor({2, 24, 32}, 9)}};
    const TensorMap cot = {{"output", random_tensor({2, 24, 32}, 10)}};
    const int64_t before = cpu::gemm_bf16_calls();
    const Evaluation want = ref.evaluate(params, in, cot), got = cpu.evaluate(params, in, cot);
    EXPECT_EQ(cpu::gemm_bf16_calls() > before, cpu::host_gemm_bf16() != nullptr);
    expect_step_matches(got, want);
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
  auto inputs = [&](int64_t b, uint64_t seed) { return cpu_test::random_inputs(g, b, seed, -2, 2); };
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
