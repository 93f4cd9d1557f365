// The `ingot` command-line program.
#include <algorithm>
#include <chrono>
#include <optional>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ingot/ingot.h"
#include "ingot/onnx.h"
#include "io/npy.h"
#include "ir/op_registry.h"
#include "train_demo.h"

using namespace ingot;

namespace {

constexpr const char* kUsage = R"(ingot: a compiler for machine-learning models

usage:
  ingot demo [--batch N] [--backend reference|cpu] [--data-parallel]
                                         compile the bundled MLP and CNN with the reference
                                         interpreter and the native CPU backend, check they
                                         agree and time both (batch default 64;
                                         the CNN uses at most 16); then train both
                                         with the compiled training step on generated
                                         data and print the accuracy reached.
                                         --backend reference: the interpreter alone, for
                                         machines without a C++ compiler (default cpu)
                                         --data-parallel: only the training, data parallel
                                         over the ranks of an MPI launch (mpirun -np 2 ingot
                                         demo --data-parallel): per-rank throughput, accuracy
  ingot run <model> [options]            compile a model and run it: inputs from files
                                         (--input) or random ones of the declared shapes;
                                         prints each output's shape, dtype and first values,
                                         the compile time and the median run time
  ingot dump <model> [options]           print a model's compiled graph
  ingot summary <model> [--shape ...]    print a model's blocks, shapes and parameters
  ingot save <model> <file.json>         write a model's structure as JSON
  ingot ops                              list the ops the compiler knows
  ingot --help                           this text

<model> is a bundled model (cnn, mlp), a model JSON file written by `ingot save` or
Model::save, or an ONNX model (.onnx).

run options (and --shape, --inference, --verbose):
  --input NAME=FILE        an input's value: a NumPy .npy file, or a serialized ONNX TensorProto
                           (.pb, as ONNX's test data stores them); repeatable. Inputs not
                           given are random: float inputs
                           uniform in [-1, 1), integer and bool inputs zero; unknown dims 1
  --backend cpu|reference  the backend (default cpu)
  --reps N                 timed runs after the first (default 10)
  --output OUT.npz|DIR     write the outputs as one NumPy .npz (an array per output, by name), or
                           each as DIR/output_<k>.pb (graph order)

dump options:
  --shape NAME=D1,D2,...   shape of a terminal; a dim is a number, a symbol (N), None, or a
                           variadic run (Batch...); repeatable. Defaults: cnn input N,3,32,32;
                           mlp input N,784
  --format text|json|dot   graph format (default text)
  --inference              compile the inference graph (Dropout off, BatchNorm running stats)
  --verbose                print each compile stage and what it decided

Backends: ReferenceBackend() (the interpreter, the oracle) and CpuBackend() (generated C++ built
with the system compiler and cached on disk). If no compiler is available, use the reference:
--backend reference.
)";

ShapeTemplate parse_shape(const std::string& spec) {
  ShapeTemplate t;
  std::stringstream ss(spec);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok == "None" || tok == "?" || tok.empty()) {
      t.emplace_back();
    } else if (tok.find_first_not_of("0123456789") == std::string::npos) {
      t.emplace_back(static_cast<int64_t>(std::stoll(tok)));
    } else {
      t.emplace_back(tok);
    }
  }
  return t;
}

Model load_model(const std::string& name) {
  for (const auto& n : example_model_names())
    if (n == name) return example_model(name);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".json") return Model::load(name);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".onnx") return ingot::onnx::load(name);
  std::string names;
  for (const auto& n : example_model_names()) names += (names.empty() ? "" : ", ") + n;
  INGOT_FAIL("Unknown model '", name, "': expected a bundled model (", names, "), a .json file or an .onnx file");
}

std::map<std::string, ShapeTemplate> default_shapes(const std::string& name) {
  if (name == "cnn") return {{"input", {"N", 3, 32, 32}}};
  if (name == "mlp") return {{"input", {"N", 784}}};
  return {};
}

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, ShapeTemplate> shapes;
  std::string format = "text";
  bool inference = false, verbose = false;
  bool data_parallel = false;  // demo: train data parallel over mpirun's ranks
  int64_t batch = 64;
  std::string backend = "cpu";  // cpu | reference: what `demo` and `run` compile with
  std::map<std::string, std::string> input_files;  // run: --input NAME=FILE.pb
  int reps = 10;
  std::string output_dir;
};

Args parse_args(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      INGOT_CHECK(i + 1 < argc, "Option ", s, " needs a value");
      return argv[++i];
    };
    if (s == "--shape") {
      std::string spec = value();
      auto eq = spec.find('=');
      INGOT_CHECK(eq != std::string::npos, "--shape expects NAME=D1,D2,..., got '", spec, "'");
      a.shapes[spec.substr(0, eq)] = parse_shape(spec.substr(eq + 1));
    } else if (s == "--format") {
      a.format = value();
      parse_dump_format(a.format);
    } else if (s == "--data-parallel") {
      a.data_parallel = true;
    } else if (s == "--batch") {
      a.batch = std::stoll(value());
      INGOT_CHECK(a.batch > 0, "--batch must be positive");
    } else if (s == "--input") {
      const std::string spec = value();
      const auto eq = spec.find('=');
      INGOT_CHECK(eq != std::string::npos && eq > 0, "--input expects NAME=FILE (.npy or .pb), got '", spec, "'");
      a.input_files[spec.substr(0, eq)] = spec.substr(eq + 1);
    } else if (s == "--reps") {
      a.reps = std::stoi(value());
      INGOT_CHECK(a.reps > 0, "--reps must be positive");
    } else if (s == "--output") {
      a.output_dir = value();
    } else if (s == "--inference") {
      a.inference = true;
    } else if (s == "--verbose") {
      a.verbose = true;
    } else if (s == "--backend") {
      a.backend = value();
      INGOT_CHECK(a.backend == "cpu" || a.backend == "reference", "--backend expects reference or cpu, got '",
                  a.backend, "'");
    } else if (s.rfind("--", 0) == 0) {
      INGOT_FAIL("Unknown option '", s, "' (see ingot --help)");
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

CompileOptions options_for(const Args& a, const std::string& model_name) {
  CompileOptions o;
  o.shapes = a.shapes.empty() ? default_shapes(model_name) : a.shapes;
  o.inference = a.inference;
  o.verbose = a.verbose;
  return o;
}

Tensor random_input(const Shape& shape, uint64_t seed) {
  Tensor t(DType::Float32, shape);
  float* p = t.data<float>();
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = static_cast<float>(s >> 40) / 16777216.0f * 2.0f - 1.0f;
  }
  return t;
}

// Median wall time of `reps` evaluations, in milliseconds.
double time_evaluate(const PhysicalModel& pm, const TensorMap& params, const TensorMap& inputs, int reps) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    pm.evaluate(params, inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class F>
double time_ms(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `f`, work of the CPU backend: when it fails (no C++ compiler, a failed build) the error
// says how to run the demo without it.
template <class F>
auto with_fallback_hint(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    INGOT_FAIL(e.what(), "\nTo run without the CPU backend (no C++ compiler needed): ingot demo --backend reference");
  }
}

// Compiles a bundled model with the reference interpreter and (with_cpu) the native CPU backend,
// checks they agree, and shows what compilation bought.
void demo_model(const std::string& name, const Shape& input_shape, bool show_graph, bool with_cpu) {
  Model model = example_model(name);
  CompileOptions opts;
  opts.shapes = {{"input", default_shapes(name).at("input")}};
  opts.inference = true;
  std::cout << "== " << name << " ==\n" << model.summary(opts.shapes) << "\n";

  std::optional<PhysicalModel> ref, cpu;
  double ref_ms = time_ms([&] { ref.emplace(compile(model, ReferenceBackend(), opts)); });
  std::cout << "compile: reference " << ref_ms << " ms";
  if (with_cpu) {
    CpuBackend::CpuOptions cold_options;
    cold_options.cache = false;  // force a build to show the cold compile time
    double cold_ms = time_ms([&] { with_fallback_hint([&] { cpu.emplace(compile(model, CpuBackend(cold_options), opts)); }); });
    compile(model, CpuBackend(), opts);  // make sure the disk cache holds it
    double warm_ms = time_ms([&] { cpu.emplace(compile(model, CpuBackend(), opts)); });
    std::cout << "; cpu cold " << cold_ms << " ms, warm (disk cache) " << warm_ms << " ms";
  }
  const PhysicalModel& shown = with_cpu ? *cpu : *ref;
  std::cout << "\nshapes:";
  for (const auto& [k, s] : shown.get_shapes()) std::cout << "\n  " << k << ": " << to_string(s);
  std::cout << "\ntypes:";
  for (const auto& [k, t] : shown.get_types()) std::cout << "\n  " << k << ": " << dtype_name(t);
  std::cout << "\n";
  if (show_graph) std::cout << "\noptimized graph:\n" << print_graph(shown.graph()) << "\n";

  TensorMap params = shown.randomize_params(0);
  TensorMap inputs = {{"input", random_input(input_shape, 1)}};
  const Tensor want = ref->evaluate(params, inputs).at("output");
  const Tensor got = shown.evaluate(params, inputs).at("output");
  double t_ref = time_evaluate(*ref, params, inputs, 3);
  std::cout << "evaluate(input " << to_string(input_shape) << ") -> output " << to_string(got.shape()) << "\n"
            << "  reference: " << t_ref << " ms";
  if (with_cpu) {
    double t_cpu = time_evaluate(*cpu, params, inputs, 20);
    std::cout << "   cpu: " << t_cpu << " ms   speedup: " << t_ref / t_cpu << "x"
              << "   max |cpu - reference|: " << max_abs_diff(got, want);
  }
  std::cout << "\n  first row: " << got.str(10) << "\n\n";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `ingot run`: compile, feed (files or random values of the declared shapes), run, report.
int run_model(const Args& a) {
  INGOT_CHECK(a.positional.size() == 1, "ingot run needs exactly one model (see ingot --help)");
  const std::string& name = a.positional[0];
  const Model model = load_model(name);
  const CompileOptions o = options_for(a, name);
  std::optional<PhysicalModel> pm;
  const double compile_ms = time_ms([&] {
    if (a.backend == "cpu") with_fallback_hint([&] { pm.emplace(compile(model, CpuBackend(), o)); });
    else pm.emplace(compile(model, ReferenceBackend(), o));
  });
  const std::vector<std::string> names = pm->input_names();
  for (const auto& [n, file] : a.input_files)
    INGOT_CHECK(std::find(names.begin(), names.end(), n) != names.end(), "--input ", n, ": the model has no input '", n,
                "'");
  const auto shapes = pm->get_shapes();
  const auto types = pm->get_types();
  TensorMap inputs;
  uint64_t seed = 1;
  for (const std::string& n : names) {
    if (auto f = a.input_files.find(n); f != a.input_files.end()) {
      inputs[n] = ends_with(f->second, ".npy") ? npy::load(f->second) : ingot::onnx::load_tensor(f->second);
      continue;
    }
    Shape s;
    for (const SymDim& d : shapes.at(n)) s.push_back(d.known() ? d.value : 1);
    const DType t = types.at(n);
    inputs[n] = is_floating(t) ? random_input(s, seed++).astype(t) : Tensor::full(t, s, 0);
    std::cout << "input " << n << ": random " << dtype_name(t) << to_string(s) << "\n";
  }
  const TensorMap params = pm->randomize_params(0);
  TensorMap out;
  const double first_ms = time_ms([&] { out = pm->evaluate(params, inputs); });
  const double median_ms = time_evaluate(*pm, params, inputs, a.reps);
  // --output out.npz: one archive, an array per output under its name; --output DIR:
  // DIR/output_<k>.pb, ONNX TensorProtos in graph order.
  const bool npz = ends_with(a.output_dir, ".npz");
  std::vector<std::pair<std::string, Tensor>> arrays;
  int k = 0;
  for (const std::string& n : pm->output_names()) {
    const Tensor& t = out.at(n);
    std::cout << "output " << n << ": " << t.str(6) << "\n";
    if (npz) {
      arrays.emplace_back(n, t);
    } else if (!a.output_dir.empty()) {
      std::filesystem::create_directories(a.output_dir);
      ingot::onnx::save_tensor((std::filesystem::path(a.output_dir) / ("output_" + std::to_string(k) + ".pb")).string(), t);
    }
    ++k;
  }
  if (npz) npy::save_npz(a.output_dir, arrays);
  std::cout << a.backend << " backend: compile " << compile_ms << " ms, first run " << first_ms << " ms, median of "
            << a.reps << " runs " << median_ms << " ms\n";
  if (!a.output_dir.empty()) std::cout << "wrote " << k << " outputs to " << a.output_dir << "\n";
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  Args a = parse_args(argc, argv, 2);
  if (cmd == "demo") {
    const bool with_cpu = a.backend == "cpu";
    if (a.data_parallel) {  // only the training part, on every rank of the launch
      if (with_cpu) with_fallback_hint([] { demo::train_bundled_models(CpuBackend(), std::cout, true); });
      else demo::train_bundled_models(ReferenceBackend(), std::cout, true);
      return 0;
    }
    demo_model("mlp", {a.batch, 784}, true, with_cpu);
    demo_model("cnn", {std::min<int64_t>(a.batch, 16), 3, 32, 32}, false, with_cpu);  // ~120 MFLOP a sample
    if (with_cpu) with_fallback_hint([] { demo::train_bundled_models(CpuBackend()); });
    else demo::train_bundled_models(ReferenceBackend());
    return 0;
  }
  if (cmd == "run") return run_model(a);
  if (cmd == "dump" || cmd == "summary") {
    INGOT_CHECK(a.positional.size() == 1, "ingot ", cmd, " needs exactly one model (see ingot --help)");
    const std::string& name = a.positional[0];
    Model model = load_model(name);
    CompileOptions o = options_for(a, name);
    if (cmd == "summary") {
      std::cout << model.summary(o.shapes);
      return 0;
    }
    Graph g = build_graph(model, o);
    std::cout << print_graph(g, parse_dump_format(a.format));
    return 0;
  }
  if (cmd == "save") {
    INGOT_CHECK(a.positional.size() == 2, "ingot save needs a model and a file name");
    load_model(a.positional[0]).save(a.positional[1]);
    std::cout << "wrote " << a.positional[1] << "\n";
    return 0;
  }
  if (cmd == "ops") {
    for (const OpDef* op : all_ops())
      std::cout << std::left << op->name << "  [" << fusion_class_name(op->fusion) << "]  " << op->doc << "\n";
    return 0;
  }
  std::cerr << "ingot: unknown command '" << cmd << "' (see ingot --help)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::cerr << "ingot: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ingot: error: " << e.what() << "\n";
    return 1;
  }
}
