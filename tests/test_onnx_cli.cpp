// `ingot run`, `ingot dump` and `ingot summary` on an ONNX file, run as a user would run them:
// the outputs `run` writes equal the compiled model's, and bad arguments are clear errors.
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "ingot/compile.h"
#include "ingot/models.h"
#include "ingot/onnx.h"
#include "ingot/physical_model.h"
#include "io/npy.h"
#include "runtime/atomic_file.h"
#include "op_test_util.h"

using namespace ingot;

using namespace ingot::cli_test;

namespace {

// An MLP features [N, 4] -> scores [N, 3] with parameters drawn from `seed`, saved as
// <dir>/mlp.onnx; its compiled form and parameters give the outputs `ingot run` must match.
struct SavedMlp {
  std::string path;
  PhysicalModel pm;
  TensorMap params;
};

SavedMlp saved_mlp(const std::filesystem::path& dir, uint64_t seed) {
  Model m;
  m += MLP({6, 3})({{"input", "features"}, {"output", IOKey("scores").expose()}});
  CompileOptions o;
  o.shapes = {{"features", {"N", 4}}};
  PhysicalModel pm = compile(m, ReferenceBackend(), o);
  TensorMap params = pm.randomize_params(seed);
  ingot::onnx::SaveOptions so;
  so.shapes = o.shapes;
  so.params = params;
  const std::string path = (dir / "mlp.onnx").string();
  ingot::onnx::save(m, path, so);
  return {path, std::move(pm), std::move(params)};
}

}  // namespace

TEST(OnnxCli, RunDumpAndSummaryOfAnOnnxFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("ingot-onnx-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto [model, pm, params] = saved_mlp(dir, 2);
  const std::string input = (dir / "x.pb").string();
  const Tensor x = ingot::testing::random_tensor({5, 4}, 3);
  ingot::onnx::save_tensor(input, x);

  for (const char* backend : {"reference", "cpu"}) {
    SCOPED_TRACE(backend);
    const auto out = dir / backend;
    Result r = run_cli("run " + model + " --input features=" + input + " --backend " + backend + " --reps 2 --output " +
                       out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("output scores: float32[5, 3]"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("median of 2 runs"), std::string::npos) << r.output;
    const Tensor got = ingot::onnx::load_tensor((out / "output_0.pb").string());
    EXPECT_LE(max_abs_diff(got, pm.evaluate(params, {{"features", x}}).at("scores")), 1e-5);
  }
  Result r = run_cli("run " + model + " --backend reference --reps 1");  // random input, N = 1
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("input features: random float32[1, 4]"), std::string::npos) << r.output;
  r = run_cli("summary " + model);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("matmul"), std::string::npos) << r.output;
  r = run_cli("dump " + model + " --format json");
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_cli("run " + model + " --input nope=" + input);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("the model has no input 'nope'"), std::string::npos) << r.output;
  r = run_cli("run " + (dir / "missing.onnx").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("cannot open"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// NumPy's files on the command line: --input NAME=x.npy and --output out.npz (an array per output,
// by name), as `ingot run model.onnx --input x=a.npy --output out.npz` promises; a bad .npy is a
// clear error.
TEST(OnnxCli, RunReadsNpyInputsAndWritesAnNpz) {
  const auto dir = std::filesystem::temp_directory_path() / ("ingot-onnx-cli-npy-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto [model, pm, params] = saved_mlp(dir, 5);
  const std::string input = (dir / "x.npy").string();
  const Tensor x = ingot::testing::random_tensor({3, 4}, 6);
  write_file_atomic(input, npy::serialize(x));
  const std::string out = (dir / "out.npz").string();
  Result r = run_cli("run " + model + " --input features=" + input + " --backend cpu --reps 1 --output " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto arrays = npy::load_npz(out);
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0].first, "scores");
  EXPECT_LE(max_abs_diff(arrays[0].second, pm.evaluate(params, {{"features", x}}).at("scores")), 1e-5);
  write_file_atomic(input, "not numpy");
  r = run_cli("run " + model + " --input features=" + input);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("not a .npy file"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

