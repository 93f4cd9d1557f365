// The compile options hints, target_hardware, cpu_options and optimize_for
// (src/compiler/target_options.h): their string forms and errors, and each decision observed:
// the CPU executable's threads per call (read by the generated code while it runs), SIMD and -Os
// in the generated source and build command, batch chunking's chunks, gradient checkpointing, the
// batch fixed at compile time, the memory plan at the top of the batch range, and run-time checks.
// Results match the reference backend throughout.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "compiler/memory_plan.h"
#include "compiler/target_options.h"
#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "ingot/models.h"
#include "runtime/parallel.h"

namespace ingot {
namespace {

using testing::expect_error;
using testing::random_tensor;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Lines that are a `#pragma omp simd` (a comment may name one).
int simd_pragmas(const std::string& source) {
  std::istringstream in(source);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find_first_not_of(' ');
    n += at != std::string::npos && line.compare(at, 16, "#pragma omp simd") == 0;
  }
  return n;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

CompileOptions mlp_options(std::vector<Dim> input) {
  CompileOptions o;
  o.shapes["input"] = std::move(input);
  return o;
}

TEST(HintsTargets, OptionNamesAndStringForms) {
  const std::vector<std::string> names = CompileOptions::option_names();
  for (const std::string n : {"hints", "target_hardware", "cpu_options", "optimize_for"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  expect_error([] { CompileOptions().set("hint", "x=1"); }, "valid options: shapes");

  CompileOptions o;
  o.set("hints", "input_batch_size_range=2:16,inference_priority=throughput");
  ASSERT_TRUE(o.hints.input_batch_size_range.has_value());
  EXPECT_EQ(o.hints.input_batch_size_range->first, 2);
  EXPECT_EQ(o.hints.input_batch_size_range->second, 16);
  EXPECT_EQ(o.hints.inference_priority, "throughput");
  o.set("cpu_options", "num_threads=3,vectorize=off");
  EXPECT_EQ(o.cpu_options.num_threads, 3);
  EXPECT_FALSE(o.cpu_options.vectorize);
  o.set("target_hardware", "cpu");
  o.set("optimize_for", "memory");
  EXPECT_EQ(o.optimize_for, "memory");
  o.validate();
}

TEST(HintsTargets, BadKeysAndValuesNameTheOptionAndWhatIsValid) {
  CompileOptions o;
  expect_error([&] { o.set("hints", "batch=1:4"); }, "unknown key 'batch' (valid keys: input_batch_size_range, inference_priority)");
  expect_error([&] { o.set("hints", "input_batch_size_range=4"); }, "must be a (lo, hi) pair");
  expect_error([&] { o.set("hints", "input_batch_size_range=a:4"); }, "input_batch_size_range's lo: expected a whole number");
  expect_error([&] { o.set("hints", "input_batch_size_range=8:2"); }, "1 <= lo <= hi");
  expect_error([&] { o.set("hints", "input_batch_size_range=0:2"); }, "1 <= lo <= hi");
  expect_error([&] { o.set("hints", "inference_priority=fast"); }, "unknown inference_priority 'fast' (valid: latency, throughput)");
  expect_error([&] { o.set("hints", "inference_priority"); }, "expected key=value items");
  expect_error([&] { o.set("cpu_options", "threads=2"); }, "unknown key 'threads' (valid keys: num_threads, vectorize)");
  expect_error([&] { o.set("cpu_options", "num_threads=0"); }, "num_threads must be a whole number from 1 to 4096, got 0");
  expect_error([&] { o.set("cpu_options", "num_threads=two"); }, "num_threads: expected a whole number, got 'two'");
  expect_error([&] { o.set("cpu_options", "vectorize=maybe"); }, "cpu_options['vectorize']': expected true or false");
  for (const std::string t : {"gpu", "cuda", "tpu", "mobile", "x86"})
    expect_error([&] { o.set("target_hardware", t); }, "ingot cannot compile for '" + t + "' here (supported: cpu");
  expect_error([&] { o.set("optimize_for", "speed"); }, "unknown goal 'speed' (valid: default, latency, throughput, memory, size)");
  EXPECT_EQ(o.target_hardware, "cpu") << "a rejected value leaves the option as it was";
  EXPECT_FALSE(o.hints.input_batch_size_range.has_value());

  // Fields set directly are checked by compile too; so are contradictions.
  CompileOptions gpu = mlp_options({4, 784});
  gpu.target_hardware = "gpu";
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), gpu); }, "supported: cpu");
  CompileOptions both = mlp_options({4, 784});
  both.optimize_for = "latency";
  both.hints.inference_priority = "throughput";
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), both); }, "give one priority");
  CompileOptions memory = mlp_options({4, 784});
  memory.optimize_for = "memory";
  memory.memory_planning = "none";
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), memory); }, "use memory_planning 'greedy'");
  // What only the CPU backend can honour is an error elsewhere, not silently nothing.
  CompileOptions threads = mlp_options({4, 784});
  threads.cpu_options.num_threads = 2;
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), threads); },
               "Option 'cpu_options' tunes the CPU backend's generated code (CpuBackend), not the reference backend's");
  CompileOptions size = mlp_options({4, 784});
  size.optimize_for = "size";
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), size); }, "'size' builds the CPU backend's generated library");
}

TEST(HintsTargets, WhoChoosesTheThreadsChunksAndCheckpointing) {
  CompileOptions o;
  EXPECT_EQ(threads_per_call(o, 0), 0) << "OpenMP's default";
  o.hints.inference_priority = "latency";
  EXPECT_EQ(threads_per_call(o, 0), parallel_num_threads());
  o.hints.inference_priority = "throughput";
  EXPECT_EQ(threads_per_call(o, 0), 1);
  EXPECT_EQ(threads_per_call(o, 5), 5) << "CpuOptions::num_threads over the priority";
  o.cpu_options.num_threads = 3;
  EXPECT_EQ(threads_per_call(o, 5), 3) << "the compile option over CpuOptions";
  CompileOptions by_goal;
  by_goal.optimize_for = "throughput";
  EXPECT_EQ(inference_priority(by_goal), "throughput");
  EXPECT_EQ(threads_per_call(by_goal, 0), 1);

  const int64_t mib = int64_t{1} << 20;
  EXPECT_EQ(batch_chunk_bytes(CompileOptions{}, 256 * mib), 256 * mib);
  EXPECT_EQ(batch_chunk_bytes(by_goal, 256 * mib), 64 * mib);
  CompileOptions memory;
  memory.optimize_for = "memory";
  EXPECT_EQ(batch_chunk_bytes(memory, 256 * mib), 16 * mib);
  EXPECT_TRUE(checkpointing_enabled(memory));
  EXPECT_FALSE(checkpointing_enabled(CompileOptions{}));
}

// One build with every CPU knob turned: the generated code reads the OpenMP thread count while
// the call runs (a code transformer writes it into the output), has no SIMD pragmas, and builds
// with -Os -fno-tree-vectorize; the next compile, without the transformer, matches the reference.
TEST(HintsTargets, CpuOptionsReachTheGeneratedCodeAndItsBuild) {
  testing::TempDir dir("ingot-hints");
  CompileOptions o = mlp_options({4, 784});
  o.inference = true;
  o.cpu_options.num_threads = 3;
  o.cpu_options.vectorize = false;
  o.optimize_for = "size";
  o.verbose = true;
  o.file_path = dir.path + "/mlp.cpp";
  o.code_transformers.push_back([](const std::string& src) {
    const size_t run_end = src.rfind("  return 0;\n}", src.find("// ---- entry ----"));
    std::string out = src;
    out.insert(run_end, "  static_cast<float*>(outputs[0])[0] = float(omp_get_max_threads());\n");
    return "extern \"C\" int omp_get_max_threads();\n" + out;
  });
  const TensorMap params = compile(ExampleMLP(), ReferenceBackend(), mlp_options({4, 784})).randomize_params(1);
  const TensorMap inputs = {{"input", random_tensor({4, 784}, 2)}};
  ::testing::internal::CaptureStderr();
  const PhysicalModel pm = compile(ExampleMLP(), CpuBackend(cpu_test::cpu_options()), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(pm.evaluate(params, inputs).at("output").to_vector<float>()[0], 3.0f)
      << "the call ran with another OpenMP thread count";
  EXPECT_NE(err.find("[cpu] threads per call: 3, vectorize off, -Os"), std::string::npos) << err;
  EXPECT_NE(err.find(" -Os "), std::string::npos) << err;
  EXPECT_NE(err.find("-fno-tree-vectorize"), std::string::npos) << err;
  EXPECT_EQ(err.find(" -O3 "), std::string::npos) << err;
  const std::string src = read_file(o.file_path);
  EXPECT_NE(src.find("const ig_threads_per_call threads(3);"), std::string::npos);
  EXPECT_EQ(simd_pragmas(src), 0);
  EXPECT_NE(src.find("// vectorize off: pragma omp simd"), std::string::npos);

  o.code_transformers.clear();
  o.verbose = false;
  const TensorMap want = compile(ExampleMLP(), ReferenceBackend(), mlp_options({4, 784})).evaluate(params, inputs);
  cpu_test::expect_same(compile(ExampleMLP(), CpuBackend(cpu_test::cpu_options()), o).evaluate(params, inputs).at("output"),
                        want.at("output"), "tuned CPU build", 1e-5, 1e-5);
}

// vectorize = false is real: the compiler's report names vectorized loops in the MLP's generated
// code built as usual, and none built with the option.
TEST(HintsTargets, VectorizeOffLeavesTheLoopsScalar) {
  testing::TempDir dir("ingot-hints-vec");
  CompileOptions o = mlp_options({4, 784});
  o.inference = true;
  const Graph g = build_graph(ExampleMLP(), o);
  auto report = [&](bool vectorize) {
    CompileOptions c = o;
    c.cpu_options.vectorize = vectorize;
    const std::string src = CpuBackend(cpu_test::cpu_options()).lower(g, c)->source();
    return cpu_test::vectorization_report(src, dir.path + (vectorize ? "/on.cpp" : "/off.cpp"), vectorize);
  };
  EXPECT_NE(report(true).find("vectorized"), std::string::npos);
  const std::string off = report(false);
  EXPECT_EQ(off.find("vectorized"), std::string::npos) << off;
}

TEST(HintsTargets, ThroughputRunsEachCallOnOneThread) {
  testing::TempDir dir("ingot-hints");
  CompileOptions o = mlp_options({"N", 784});
  o.hints.inference_priority = "throughput";
  o.file_path = dir.path + "/mlp.cpp";
  const PhysicalModel pm = compile(ExampleMLP(), CpuBackend(cpu_test::cpu_options()), o);
  EXPECT_NE(read_file(o.file_path).find("const ig_threads_per_call threads(1);"), std::string::npos);
  const PhysicalModel ref = compile(ExampleMLP(), ReferenceBackend(), mlp_options({"N", 784}));
  const TensorMap params = ref.randomize_params(3);
  const TensorMap inputs = {{"input", random_tensor({5, 784}, 4)}};
  cpu_test::expect_same(pm.evaluate(params, inputs).at("output"), ref.evaluate(params, inputs).at("output"),
                        "throughput", 1e-5, 1e-5);
  CompileOptions plain = mlp_options({"N", 784});
  plain.file_path = dir.path + "/plain.cpp";
  compile(ExampleMLP(), CpuBackend(cpu_test::cpu_options()), plain);
  EXPECT_EQ(read_file(plain.file_path).find("ig_threads_per_call"), std::string::npos) << "no priority: OpenMP's default";
}

// ExampleCNN at 32x32 keeps about 0.6 MiB per sample live at its second conv: batch chunking
// splits a batch whose live set is over twice the chunk size.
TEST(HintsTargets, PriorityAndGoalChooseTheBatchChunks) {
  auto chunks = [](int64_t batch, const std::string& goal) {
    CompileOptions o;
    o.shapes["input"] = {batch, 3, 32, 32};
    o.inference = true;
    o.optimize_for = goal;
    return count_op(build_graph(ExampleCNN(), o), "slice");
  };
  EXPECT_EQ(chunks(64, "default"), 0);
  EXPECT_EQ(chunks(64, "throughput"), 0);
  EXPECT_GT(chunks(64, "memory"), 1);  // 16 MiB chunks
  EXPECT_EQ(chunks(256, "default"), 0);
  EXPECT_EQ(chunks(256, "latency"), 0);
  EXPECT_GT(chunks(256, "throughput"), 1);  // 64 MiB chunks
}

TEST(HintsTargets, MemoryGoalCheckpointsGradientGraphs) {
  const Model deep = MLP({32, 32, 32, 32, 5});
  CompileOptions o = mlp_options({8, 16});
  const PhysicalModel plain = compile(deep, ReferenceBackend(), o);
  o.optimize_for = "memory";
  const PhysicalModel lean = compile(deep, ReferenceBackend(), o);
  EXPECT_EQ(plain.gradient_memory({"output"}).recomputed_nodes, 0);
  EXPECT_GT(lean.gradient_memory({"output"}).recomputed_nodes, 0);
  const TensorMap params = plain.randomize_params(5);
  const TensorMap inputs = {{"input", random_tensor({8, 16}, 6)}};
  const TensorMap cot = {{"output", random_tensor({8, 5}, 7)}};
  const Evaluation a = plain.evaluate(params, inputs, cot), b = lean.evaluate(params, inputs, cot);
  for (const auto& [name, g] : a.gradients) cpu_test::expect_same(b.gradients.at(name), g, name, 1e-6, 1e-6);
}

TEST(HintsTargets, OneBatchSizeIsFixedAtCompileTime) {
  CompileOptions o = mlp_options({"N", 784});
  o.hints.input_batch_size_range = std::pair<int64_t, int64_t>{4, 4};
  o.static_shapes = true;  // satisfied: the hint fixed the batch
  const PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend(), o);
  EXPECT_EQ(to_string(pm.get_shapes().at("input")), "[4, 784]");
  EXPECT_EQ(to_string(pm.get_shapes().at("output")), "[4, 10]");
  EXPECT_TRUE(pm.memory_plan().planned);
  const TensorMap params = pm.randomize_params(0);
  expect_error([&] { pm.evaluate(params, {{"input", random_tensor({5, 784}, 1)}}); },
               "Input 'input' has batch 5 (its dim 0), outside the compile option hints['input_batch_size_range'] = (4, 4)");
  // The CPU backend gets the static graph: one plan made at load.
  CompileOptions cpu = o;
  cpu.inference = true;
  const PhysicalModel fixed = compile(ExampleMLP(), CpuBackend(cpu_test::cpu_options()), cpu);
  const TensorMap inputs = {{"input", random_tensor({4, 784}, 1)}};
  cpu_test::expect_same(fixed.evaluate(params, inputs).at("output"), pm.evaluate(params, inputs).at("output"),
                        "fixed batch", 1e-5, 1e-5);
}

TEST(HintsTargets, BatchRangePlansTheTopAndChecksEveryCall) {
  CompileOptions o = mlp_options({"N", 784});
  EXPECT_FALSE(compile(ExampleMLP(), ReferenceBackend(), o).memory_plan().planned);
  o.hints.input_batch_size_range = std::pair<int64_t, int64_t>{1, 8};
  const PhysicalModel pm = compile(ExampleMLP(), ReferenceBackend(), o);
  EXPECT_EQ(to_string(pm.get_shapes().at("input")), "[N, 784]") << "still any batch in the range";
  const MemoryPlan& plan = pm.memory_plan();
  ASSERT_TRUE(plan.planned) << plan.str();
  EXPECT_NE(plan.str().find("at batch 8, the top of hints input_batch_size_range"), std::string::npos) << plan.str();
  CompileOptions at8 = mlp_options({8, 784});
  EXPECT_EQ(plan.planned_peak_bytes, compile(ExampleMLP(), ReferenceBackend(), at8).memory_plan().planned_peak_bytes);

  const TensorMap params = pm.randomize_params(0);
  EXPECT_EQ(pm.evaluate(params, {{"input", random_tensor({3, 784}, 1)}}).at("output").shape(), (Shape{3, 10}));
  expect_error([&] { pm.evaluate(params, {{"input", random_tensor({9, 784}, 1)}}); }, "has batch 9");
  expect_error([&] { pm.evaluate(params, {{"input", random_tensor({9, 784}, 1)}}, {{"output", random_tensor({9, 10}, 2)}}); },
               "has batch 9");

  // max_memory_gb, uncheckable for a symbolic batch, is checked at the top of the range.
  CompileOptions limited = mlp_options({"N", 784});
  limited.max_memory_gb = 1e-9;
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), limited); }, "cannot be checked");
  limited.hints.input_batch_size_range = std::pair<int64_t, int64_t>{1, 8};
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), limited); }, "Memory plan exceeds max_memory_gb");

  // A batch fixed by the shapes must lie in the range.
  CompileOptions fixed = mlp_options({16, 784});
  fixed.hints.input_batch_size_range = std::pair<int64_t, int64_t>{1, 8};
  expect_error([&] { compile(ExampleMLP(), ReferenceBackend(), fixed); },
               "input 'input' has batch 16 (its dim 0) at compile time, outside input_batch_size_range (1, 8)");
}

}  // namespace
}  // namespace ingot
