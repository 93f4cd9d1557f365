// compile(model, backend, options) -> PhysicalModel.
//
// Stages (each printed with `verbose`): flatten -> resolve terminals -> shape inference ->
// type inference -> optimize -> lower (backend) -> function generation.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ingot/graph.h"
#include "ingot/model.h"
#include "ingot/physical_model.h"

namespace ingot {

// A user-supplied graph rewrite run by the "optimize" stage right after the built-in pass named
// `after` ("start": before every pass, "end": after every pass). It runs even when that pass is
// disabled. The graph must stay valid; values it adds without shapes get shape inference re-run.
struct CustomPass {
  std::string name;
  std::string after = "end";
  std::function<void(Graph&)> fn;
};

// A function from source text to source text (CompileOptions::code_transformers).
using CodeTransformer = std::function<std::string(const std::string& source)>;

struct CompileOptions {
  // Shape templates per terminal (numbers, symbols, nullptr for unknown, "Batch..." variadic).
  std::map<std::string, ShapeTemplate> shapes;
  // Dtype per terminal.
  std::map<std::string, DType> types;
  // Key sets (Mithril): constants are fixed at compile time and folded; data keys are run-time
  // inputs never differentiated; trainable keys are forced differentiable; discarded keys are
  // dropped with everything that only they need (inputs) or that only feeds them (outputs).
  std::map<std::string, Tensor> constant_keys;
  std::vector<std::string> data_keys;
  std::vector<std::string> trainable_keys;
  std::vector<std::string> discard_keys;
  // The compiled model's outputs are the wires the model exposes (IOKey(...).expose(),
  // Model::expose), or its canonical output when it exposes none; other wires nothing reads are
  // eliminated with what only they need (`verbose` lists them). These wires (top-level names, or
  // "<instance path>.<name>" inside blocks: "mlp.linear_0.output") are outputs too.
  std::vector<std::string> outputs;

  bool static_shapes = false;  // every dimension must be known at compile time
  bool inference = false;      // inference graph: Dropout off, BatchNorm uses running stats
  // Logical models' If and While blocks may decide at run time, from data (a condition reading an
  // input or a parameter, a loop whose trip count depends on one). Off, such a block is an error
  // naming this option; a condition fixed at compile time folds away either way.
  bool dynamic_control_flow = false;
  bool jit = true;             // lower now (true) or on the first evaluate (false)
  std::string file_path;       // write the backend's generated code (reference: its plan) here
  std::string dump_graph;      // write the final graph here ("-" = stdout)
  std::string dump_format = "text";  // text | json | dot
  bool verbose = false;        // print each stage and what it decided (to stderr)
  // Time each compile stage, the passes inside optimize and the backend's steps inside lower
  // (src/compiler/compile_profile.h): written to profile_output as JSON that is also a Chrome
  // trace, or, without a path, printed to stderr as a table.
  bool profile = false;
  std::string profile_output;
  // Print each shape-inference step that sized dimensions, with the op rule or shape template
  // that did it ("[ingot] shape: sweep 1, matmul in 'fc1': 'fc1.output'[1] = 10"), to stderr.
  bool trace_shapes = false;

  // Graph optimizations (src/compiler/passes/, README "Graph optimizations and memory planning").
  std::string optimization_level = "medium";  // none | low | medium | high
  // Per-pass on/off overriding the level; keys are pass names (constant_folding, simplify, cse,
  // attention, conv_bn_folding, mixed_precision, batch_chunking, layout, dce, fusion: their order
  // in the pipeline); unknown names are errors.
  std::map<std::string, bool> optimizations;
  std::vector<CustomPass> custom_passes;
  // Applied in order to the code a backend generates (the CPU backend's C++, the Python
  // emitters' module) before it is built or run; what file_path writes and the cache keys is the
  // result. The reference backend generates no code: giving it transformers is an error.
  std::vector<CodeTransformer> code_transformers;
  // With dump_graph set: also write <dump_graph>.<index>.<pass>.<ext> after every pass that ran.
  bool dump_after_each_pass = false;
  // How the CPU backend stores convolution activations (src/compiler/layout_plan.h): auto (the
  // host's: nchw16c with AVX-512, else nchw8c; $INGOT_LAYOUT_TARGET overrides it) | nchw8c |
  // nchw16c | nhwc | nchw. Forcing one lets any machine test what another would pick.
  std::string layout_target = "auto";
  std::string memory_planning = "greedy";  // greedy | none
  double max_memory_gb = 0;                // planned peak limit in GiB; 0 = no limit
  std::string mixed_precision = "none";    // none | bfloat16 | float16 (matmul / conv2d inputs)
  // Gradient graphs (evaluate with output_gradients, compile_train_step): split the forward
  // schedule into `checkpoint_segments` segments, keep only the values that cross a segment
  // boundary, and recompute the rest of every segment but the last one in the backward graph.
  bool gradient_checkpointing = false;
  int checkpoint_segments = 2;  // >= 1; 1 recomputes nothing (the last segment is never recomputed)

  // Data parallelism over the process group (include/ingot/distributed.h), for training graphs
  // (compile_train_step, compile of a TrainModel): each rank runs the step on its shard of the
  // global batch; the losses and metrics it reports are the global batch's (all-reduced), the
  // gradients are averaged across ranks inside the step, and BatchNorm running statistics too,
  // so every rank ends each step with the same parameters. The graph is built for the group's
  // size at compile time. In a group of one it changes nothing but the graph's collectives.
  bool data_parallel = false;
  // The gradient all-reduce runs in buckets of at least this many bytes (the last one may be
  // smaller), in the order the backward computes the gradients (pass gradient_buckets).
  int64_t gradient_bucket_bytes = int64_t{256} << 10;
  // Each bucket is started on the group's communication thread as soon as its gradients exist
  // and waited for only where the optimizer first reads one, so it overlaps the rest of the
  // backward; false waits for each bucket right after starting it.
  bool gradient_overlap = true;
  // Hints and targets (src/compiler/target_options.h says what each decides; README "Compile
  // options"). Strings for CompileOptions::set: hints "input_batch_size_range=1:32,
  // inference_priority=latency"; cpu_options "num_threads=4,vectorize=false".
  struct Hints {
    // Dim 0 of every run-time input (its batch) lies in [first, second], 1 <= first <= second:
    // checked at compile (static sizes) and on every evaluate; first == second fixes the batch at
    // compile time (static shapes); first < second plans memory for a batch of `second`.
    std::optional<std::pair<int64_t, int64_t>> input_batch_size_range;
    std::string inference_priority;  // "" (not given) | latency | throughput
  };
  Hints hints = Hints();  // (= Hints(): GCC 12 warns maybe-uninitialized after `{}` otherwise)
  std::string target_hardware = "cpu";  // what ingot can compile for here: cpu only
  struct CpuTuning {
    int num_threads = 0;    // OpenMP threads per call of the CPU backend's executable; 0: not set
    bool vectorize = true;  // false: the generated loops are built without SIMD
  };
  CpuTuning cpu_options;
  std::string optimize_for = "default";  // default | latency | throughput | memory | size

  // Sets an option from its name and a string value (CLI, Python). Unknown names and
  // unparsable values are errors that name the option and list what is valid.
  void set(const std::string& name, const std::string& value);
  static std::vector<std::string> option_names();
  void validate() const;  // bad values (e.g. dump_format = "xml") are errors
};

// An executable lowered by a backend. Inputs follow PhysicalModel::run_inputs() order; outputs
// follow the graph's output order.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs) const = 0;
  // Like run, but output j is written into outputs[j] when that is defined: into its buffer when
  // it is contiguous with the output's dtype and shape, else the handle is replaced. The buffer
  // may be an input's (a training step updating its parameters in place): a backend
  // whose schedule allows it writes there directly, otherwise the result is copied in after
  // the run. Undefined entries receive new tensors. The default runs, then copies.
  virtual void run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) const;
  // Human-readable form of what will run (for file_path): generated source or a plan.
  virtual std::string source() const = 0;
  // Bytes of the arena a call holds for intermediates, as Backend::arena_bytes works it out for
  // the graph this executable was lowered from (0: allocated per kernel, or symbolic shapes).
  virtual int64_t arena_bytes() const { return 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<Executable> lower(const Graph& graph, const CompileOptions& options) const = 0;
  virtual std::unique_ptr<Backend> clone() const = 0;
  // Bytes of the arena that lower(graph, options)'s executable holds for intermediates during a
  // call, worked out without building it (static shapes); 0 where the backend allocates per
  // kernel (the reference backend) or a shape is symbolic. Gradient checkpointing reports it.
  virtual int64_t arena_bytes(const Graph&, const CompileOptions&) const { return 0; }
};

// The oracle: executes the graph op by op with each op's reference kernel.
class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }
  std::unique_ptr<Executable> lower(const Graph& graph, const CompileOptions& options) const override;
  std::unique_ptr<Backend> clone() const override { return std::make_unique<ReferenceBackend>(); }
};

PhysicalModel compile(const Model& model, const Backend& backend, const CompileOptions& options = {});

// The compiler's front half alone: the optimized, shape- and type-inferred graph.
Graph build_graph(const Model& model, const CompileOptions& options = {});

}  // namespace ingot
