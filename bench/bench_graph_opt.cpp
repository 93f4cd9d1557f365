// Graph optimization and memory planning figures for the bundled MLP (batch 128), the seeds' CNN
// (ExampleCNN, batch 32, 3x224x224; --quick: batch 4, 3x32x32) and a transformer block (batch 8,
// seq 128, dim 256), in inference mode and in training mode (the joint forward + backward graph
// that gradients run): node counts before / after optimization (level none vs medium), planned
// peak memory (greedy) vs no planning vs the lower bound and their ratios, fusion groups; plus
// mixed-precision accuracy vs float32. Writes the JSON make_table.py renders into the README.
//
//   ./scripts/bench.sh   (runs this among the others)
//   build/release/bench_graph_opt [--quick] [bench/results/graph_opt.json]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "compiler/fusion_plan.h"
#include "bench_util.h"
#include "compiler/memory_plan.h"
#include "ingot/ingot.h"
#include "ingot/models.h"

using namespace ingot;
using namespace ingot::bench;

namespace {

Model transformer_block(int64_t dim, int64_t hidden) {
  Model m;
  Connection x = m.input("input");
  Connection ln1 = m.add(LayerNorm(), {{"input", x}}).at("output");
  Connection q = m.add(Linear(dim), {{"input", ln1}}).at("output");
  Connection k = m.add(Linear(dim), {{"input", ln1}}).at("output");
  Connection v = m.add(Linear(dim), {{"input", ln1}}).at("output");
  Connection scores = matmul(q, k.transpose({0, 2, 1})) * (1.0 / std::sqrt(static_cast<double>(dim)));
  Connection attn = apply("softmax", scores, {{"axis", int64_t{-1}}});
  Connection ctx = matmul(attn, v);
  Connection o = m.add(Linear(dim), {{"input", ctx}}).at("output");
  Connection h = x + o;
  Connection ln2 = m.add(LayerNorm(), {{"input", h}}).at("output");
  Connection f1 = m.add(Linear(hidden), {{"input", ln2}}).at("output");
  Connection ge = m.add(Gelu(), {{"input", f1}}).at("output");
  Connection f2 = m.add(Linear(dim), {{"input", ge}}).at("output");
  m.expose(h + f2, "y");
  return m;
}

std::string mib(int64_t b) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  os << static_cast<double>(b) / (1024.0 * 1024.0);
  return os.str();
}

struct Row {
  std::string name, mode;  // mode: inference | training
  size_t nodes_before = 0, nodes_after = 0, groups = 0;
  int64_t planned = 0, unplanned = 0, lower = 0;
  int inplace = 0;
  double compile_ms = 0;
  double ratio(int64_t a, int64_t b) const { return static_cast<double>(a) / static_cast<double>(b); }
};

// The graph that runs: the optimized inference graph, or in training the joint forward + backward
// graph of every output (what evaluate with output_gradients plans and runs).
const Graph& graph_of(const PhysicalModel& pm, bool training) {
  return training ? pm.gradient_graph(pm.output_names()) : pm.graph();
}

Row measure(const std::string& name, const Model& model, ShapeTemplate input_shape, bool training) {
  Row r;
  r.name = name;
  r.mode = training ? "training" : "inference";
  CompileOptions o;
  o.inference = !training;
  o.shapes["input"] = std::move(input_shape);
  CompileOptions none = o;
  none.optimization_level = "none";
  r.nodes_before = graph_of(compile(model, ReferenceBackend(), none), training).nodes().size();
  auto t0 = std::chrono::steady_clock::now();
  PhysicalModel pm = compile(model, ReferenceBackend(), o);
  const Graph& g = graph_of(pm, training);
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.nodes_after = g.nodes().size();
  r.groups = plan_fusion(g).groups.size();
  const MemoryPlan p = training ? plan_memory(g, o.memory_planning) : pm.memory_plan();
  INGOT_CHECK(p.planned, "bench_graph_opt: ", name, " (", r.mode, ") was not planned: ", p.reason);
  r.planned = p.planned_peak_bytes;
  r.unplanned = p.unplanned_bytes;
  r.lower = p.lower_bound_bytes;
  r.inplace = p.inplace_count;
  return r;
}

struct Accuracy {
  std::string model, type;
  double max_abs = 0, max_rel = 0;
};

Accuracy accuracy(const std::string& name, const Model& model, ShapeTemplate shape, Shape concrete,
                  const std::string& low) {
  CompileOptions o;
  o.inference = true;
  o.shapes["input"] = std::move(shape);
  PhysicalModel ref = compile(model, ReferenceBackend(), o);
  o.mixed_precision = low;
  PhysicalModel mp = compile(model, ReferenceBackend(), o);
  TensorMap params = ref.randomize_params(1);
  Tensor x(DType::Float64, concrete);
  double* p = x.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = std::sin(0.37 * static_cast<double>(i)) ;
  Tensor xin = x.astype(DType::Float32);
  std::vector<float> a = ref.evaluate(params, {{"input", xin}}).at("output").to_vector<float>();
  std::vector<float> b = mp.evaluate(params, {{"input", xin}}).at("output").to_vector<float>();
  Accuracy acc{name, low};
  double max_ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    acc.max_abs = std::max(acc.max_abs, static_cast<double>(std::fabs(a[i] - b[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(a[i])));
  }
  acc.max_rel = max_ref > 0 ? acc.max_abs / max_ref : 0;  // relative to the largest |output|
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json_path = "bench/results/graph_opt.json";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = true;
    else json_path = argv[i];
  }
  const int64_t cnn_batch = quick ? 4 : 32, cnn_side = quick ? 32 : 224;
  const std::string cnn_name = "cnn (batch " + std::to_string(cnn_batch) + ", 3x" + std::to_string(cnn_side) + "x" +
                               std::to_string(cnn_side) + ")";
  std::vector<Row> rows;
  for (bool training : {false, true}) {
    rows.push_back(measure("mlp (batch 128)", ExampleMLP(), {128, 784}, training));
    rows.push_back(measure(cnn_name, ExampleCNN(), {cnn_batch, 3, cnn_side, cnn_side}, training));
    rows.push_back(measure("transformer block (8x128x256)", transformer_block(256, 1024), {8, 128, 256}, training));
  }

  std::printf("%-30s %-9s %6s %6s %7s %12s %12s %12s %8s %9s %8s\n", "model", "mode", "nodes", "opt", "groups",
              "planned MiB", "unplanned", "lower bound", "peak/lb", "peak/unpl", "inplace");
  for (const Row& r : rows)
    std::printf("%-30s %-9s %6zu %6zu %7zu %12s %12s %12s %8.3f %9.3f %8d\n", r.name.c_str(), r.mode.c_str(),
                r.nodes_before, r.nodes_after, r.groups, mib(r.planned).c_str(), mib(r.unplanned).c_str(),
                mib(r.lower).c_str(), r.ratio(r.planned, r.lower), r.ratio(r.planned, r.unplanned), r.inplace);

  std::vector<Accuracy> accs;
  for (const char* low : {"bfloat16", "float16"}) {
    accs.push_back(accuracy("mlp (batch 128)", ExampleMLP(), {128, 784}, {128, 784}, low));
    accs.push_back(accuracy("cnn (batch 4, 3x32x32)", ExampleCNN(), {4, 3, 32, 32}, {4, 3, 32, 32}, low));
  }
  std::printf("\nmixed precision vs float32 (outputs)\n%-24s %-9s %12s %12s\n", "model", "type", "max abs", "max rel");
  for (const Accuracy& a : accs)
    std::printf("%-24s %-9s %12.3e %12.3e\n", a.model.c_str(), a.type.c_str(), a.max_abs, a.max_rel);

  std::ostringstream js;
  js << "{\n  \"tool\": \"bench_graph_opt\",\n  \"quick\": " << (quick ? "true" : "false") << ",\n";
  js << "  \"measured_utc\": " << measured_utc_json() << ",\n  \"machine\": " << machine_json(1) << ",\n";
  js << "  \"versions\": " << versions_json() << ",\n";
  js << "  \"models\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    js << "    {\"model\": " << json_str(r.name) << ", \"mode\": " << json_str(r.mode)
       << ", \"nodes_before\": " << r.nodes_before << ", \"nodes_after\": " << r.nodes_after
       << ", \"fusion_groups\": " << r.groups << ", \"planned_peak_bytes\": " << r.planned
       << ", \"unplanned_bytes\": " << r.unplanned << ", \"lower_bound_bytes\": " << r.lower
       << ", \"inplace\": " << r.inplace << ", \"compile_ms\": " << json_num(r.compile_ms)
       << ", \"planned_over_lower_bound\": " << json_num(r.ratio(r.planned, r.lower))
       << ", \"planned_over_unplanned\": " << json_num(r.ratio(r.planned, r.unplanned))
       << ", \"nodes_after_over_before\": "
       << json_num(static_cast<double>(r.nodes_after) / static_cast<double>(r.nodes_before)) << "}"
       << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  js << "  ],\n  \"mixed_precision\": [\n";
  for (size_t i = 0; i < accs.size(); ++i)
    js << "    {\"model\": " << json_str(accs[i].model) << ", \"type\": " << json_str(accs[i].type)
       << ", \"max_abs_error\": " << json_num(accs[i].max_abs) << ", \"max_rel_error\": " << json_num(accs[i].max_rel)
       << "}" << (i + 1 < accs.size() ? "," : "") << "\n";
  js << "  ]\n}\n";
  std::ofstream f(json_path);
  f << js.str();
  if (!f) {
    std::cerr << "bench_graph_opt: cannot write " << json_path << "\n";
    return 1;
  }
  std::cout << "\nwrote " << json_path << "\n";
  return 0;
}
