// CpuBackend::lower and the executable: binds symbolic dimensions from the input shapes, calls
// the generated ingot_entry, and serves its callbacks into reference kernels.
#include "ingot/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include "backends/cpu/abi.h"
#include "backends/cpu/cache.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/codegen_control.h"
#include "backends/cpu/codegen_conv.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/dnnl_gemm.h"
#include "backends/cpu/dnnl_conv_backward.h"
#include "backends/cpu/executable.h"
#include "backends/cpu/toolchain.h"
#include "backends/cpu/widen.h"
#include "compiler/compile_profile.h"
#include "compiler/fusion_plan.h"
#include "core/buffer_cache.h"
#include "compiler/memory_plan.h"
#include "compiler/passes/passes.h"
#include "compiler/shape_inference.h"
#include "compiler/target_options.h"
#include "ingot/error.h"
#include "ingot/profile.h"
#include "ir/op_registry.h"
#include "ops/control_flow_vjp.h"
#include "runtime/write_back.h"

namespace ingot {
namespace {

struct Binding;

// A control-flow subgraph (GeneratedCode::subgraphs entry) under one binding of its caller: its
// own binding for the shapes its node gives it, and where its spares lie in the caller's arena.
struct SubgraphBinding {
  std::shared_ptr<const Binding> binding;
  std::vector<int64_t> spare_offsets;  // loop bodies: per carried value
};

// Everything that depends on one set of input shapes: concrete shapes of every value, the value
// of every symbol, the arena plan and the oneDNN primitives.
struct Binding {
  std::vector<Shape> shapes;
  std::vector<int64_t> dims;
  std::vector<BufferRequest> requests;  // per arena slot
  BufferPlacement placement;
  std::vector<std::shared_ptr<const cpu::DnnlConv>> convs;  // per GeneratedCode::dnnl_convs
  std::vector<cpu::ConvSpec> conv_specs;                     // what each was made for
  std::vector<std::unique_ptr<cpu::DnnlConvGrad>> conv_grads;  // per GeneratedCode::dnnl_conv_grads
  // Constant weights reordered for their primitives once, at planning; calls only read them.
  cpu::WeightCache kept_weights;
  std::vector<SubgraphBinding> subgraphs;  // per GeneratedCode::subgraphs
  int64_t frame_bytes = 0;                 // the arena plus the subgraphs' spares
};

// One arena: reused across calls; a call holds one for its duration, so concurrent calls each
// get their own (the pool grows to the number of calls in flight at once).
struct Arena {
  std::shared_ptr<void> storage;  // from allocate_buffer: huge pages, recycled when freed
  char* data = nullptr;
  size_t bytes = 0;
};

class CpuExecutable;

struct HostCall {
  const CpuExecutable* exe;
  const Binding* binding;
  int64_t step_start_ns = 0;  // profiling: when the running step began
  cpu::WeightCache conv_weights;  // weights reordered for oneDNN during this call
  // Per GeneratedCode::dnnl_convs entry: its result in this call holds no NaN or inf (it ran on
  // finite inputs with post-ops that keep them finite), so readers need not scan it.
  std::vector<unsigned char> conv_finite;
};

class CpuExecutable final : public Executable {
 public:
  // `body`: a control-flow subgraph's executable, run once per iteration or branch taken.
  CpuExecutable(const Graph& g, cpu::GeneratedCode code, std::shared_ptr<const cpu::LoadedLibrary> lib,
                std::string strategy, bool winograd, bool body = false)
      : graph_(g), code_(std::move(code)), lib_(std::move(lib)), strategy_(std::move(strategy)), winograd_(winograd),
        body_(body) {
    // Each control-flow subgraph: an executable of its own for its bindings and calls, whose code
    // is in this library (its caller's generated code calls it directly).
    for (cpu::SubgraphCode& sub : code_.subgraphs)
      children_.push_back(std::make_unique<CpuExecutable>(graph_.node(sub.node).subgraphs.at(sub.index),
                                                          std::move(sub.code), lib_, strategy_, winograd_, true));
    for (ValueId c : code_.constants) {
      constants_.push_back(graph_.value(c).constant.contiguous());
      const_ptrs_.push_back(constants_.back().raw_data());
    }
    entry_ = reinterpret_cast<ingot_entry_fn>(lib_->entry);
    // Static shapes: plan the arena and create the oneDNN primitives now, at load.
    std::vector<Shape> in_shapes;
    bool all_static = true;
    for (ValueId v : code_.inputs) {
      all_static = all_static && is_static(graph_.value(v).shape);
      if (all_static) in_shapes.push_back(to_shape(graph_.value(v).shape));
    }
    if (all_static) static_binding_ = bind(in_shapes);
  }

  std::shared_ptr<const Binding> binding_for(const std::vector<Shape>& in_shapes) const { return bind(in_shapes); }
  const cpu::GeneratedCode& code() const { return code_; }

  std::vector<Tensor> run(std::span<const Tensor> inputs) const override {
    std::vector<Tensor> outs(graph_.outputs().size());
    run_into(inputs, outs);
    return outs;
  }

  // Outputs go straight into the given buffers, also into an input's buffer where the generated
  // schedule allows (code_.output_may_alias); any other overlap gets a fresh buffer, copied in.
  void run_into(std::span<const Tensor> inputs, std::span<Tensor> given) const override {
    INGOT_CHECK(inputs.size() == code_.inputs.size(), "cpu executable: expected ", code_.inputs.size(),
                " inputs, got ", inputs.size());
    INGOT_CHECK(given.size() == graph_.outputs().size(), "cpu executable: expected ", graph_.outputs().size(),
                " output tensors, got ", given.size());
    std::vector<Tensor> ins;
    ins.reserve(inputs.size());
    bool static_shapes = static_binding_ != nullptr;  // then the plan made at load, unlocked
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value& v = graph_.value(code_.inputs[i]);
      INGOT_CHECK(inputs[i].dtype() == v.dtype, "cpu executable: input '", v.name, "' must be ",
                  dtype_name(v.dtype), ", got ", dtype_name(inputs[i].dtype()));
      ins.push_back(inputs[i].contiguous());
      static_shapes = static_shapes && inputs[i].shape() == static_binding_->shapes[static_cast<size_t>(code_.inputs[i])];
    }
    std::shared_ptr<const Binding> b = static_binding_;
    if (!static_shapes) {
      std::vector<Shape> in_shapes;
      for (const Tensor& t : inputs) in_shapes.push_back(t.shape());
      b = bind(in_shapes);
    }
    std::vector<const void*> in_ptrs;
    in_ptrs.reserve(ins.size());
    for (const Tensor& t : ins) in_ptrs.push_back(t.raw_data());
    std::vector<Tensor> outs(graph_.outputs().size());
    std::vector<void*> out_ptrs(outs.size(), nullptr);
    std::vector<bool> direct(outs.size(), false);
    for (size_t j = 0; j < outs.size(); ++j) {
      if (!code_.output_written[j]) continue;
      const ValueId v = graph_.outputs()[j].second;
      const Shape& shape = b->shapes[static_cast<size_t>(v)];
      if (writable_in_place(given[j], graph_.value(v).dtype, shape) && may_write_into(j, given[j], ins, given, direct)) {
        outs[j] = given[j];
        direct[j] = true;
      } else {
        // The generated code writes every element, so the output needs no zero-filling pass.
        outs[j] = Tensor::uninitialized(graph_.value(v).dtype, shape);
      }
      out_ptrs[j] = outs[j].raw_data();
    }
    const std::unique_ptr<CallFrame> frame = make_frame(*b);
    char error[2048] = {0};
    if (in_ptrs.empty()) in_ptrs.push_back(nullptr);
    if (out_ptrs.empty()) out_ptrs.push_back(nullptr);
    const int rc = entry_(in_ptrs.data(), out_ptrs.data(), dims_of(*b), &frame->host, error, sizeof error);
    INGOT_CHECK(rc == 0, "CpuBackend: ", error[0] ? error : "generated code failed");
    // Outputs the generated code does not write: leaves, and values listed twice.
    for (size_t j = 0; j < outs.size(); ++j) {
      if (code_.output_written[j]) continue;
      const ValueId v = graph_.outputs()[j].second;
      for (size_t k = 0; k < j && !outs[j].defined(); ++k)
        if (graph_.outputs()[k].second == v && code_.output_written[k]) outs[j] = outs[k].clone();
      for (size_t i = 0; i < code_.inputs.size() && !outs[j].defined(); ++i)
        if (code_.inputs[i] == v) outs[j] = ins[i].clone();
      if (!outs[j].defined()) outs[j] = graph_.value(v).constant.clone();
    }
    for (size_t j = 0; j < outs.size(); ++j) {
      if (direct[j]) continue;
      if (given[j].defined()) write_back(given[j], outs[j]);
      else given[j] = std::move(outs[j]);
    }
  }

  std::string source() const override { return code_.source; }
  int64_t arena_bytes() const override { return static_binding_ ? static_binding_->placement.arena_bytes : 0; }
  const Binding* static_plan() const { return static_binding_.get(); }
 private:
  // What one call runs with, for this executable and (recursively) each control-flow subgraph:
  // the host struct the generated code reads, its arena (held for the call), and the subgraphs'
  // structs. Made once per call, before the entry point runs; loops reuse it every iteration.
  struct CallFrame {
    const CpuExecutable* exe = nullptr;
    HostCall call{};
    std::unique_ptr<Arena> arena;
    ingot_host host{};
    std::vector<ingot_subgraph> subgraphs;
    std::vector<std::vector<void*>> spares;
    std::vector<std::unique_ptr<CallFrame>> children;
    CallFrame() = default;
    CallFrame(const CallFrame&) = delete;
    CallFrame& operator=(const CallFrame&) = delete;
    ~CallFrame() {
      if (arena) exe->return_arena(std::move(arena));
    }
  };

  static const int64_t* dims_of(const Binding& b) {
    static const int64_t kNoDims = 0;
    return b.dims.empty() ? &kNoDims : b.dims.data();
  }

  std::unique_ptr<CallFrame> make_frame(const Binding& b) const {
    auto f = std::make_unique<CallFrame>();
    f->exe = this;
    f->call.exe = this;
    f->call.binding = &b;
    f->call.conv_finite.assign(code_.dnnl_convs.size(), 0);
    f->arena = take_arena(static_cast<size_t>(b.frame_bytes));
    f->spares.resize(b.subgraphs.size());
    f->subgraphs.reserve(b.subgraphs.size());
    for (size_t i = 0; i < b.subgraphs.size(); ++i) {
      const SubgraphBinding& sb = b.subgraphs[i];
      f->children.push_back(children_[i]->make_frame(*sb.binding));
      for (int64_t off : sb.spare_offsets) f->spares[i].push_back(f->arena->data + off);
      f->subgraphs.push_back(
          {dims_of(*sb.binding), &f->children.back()->host, f->spares[i].empty() ? nullptr : f->spares[i].data()});
    }
    f->host = ingot_host{&f->call,
                         const_ptrs_.data(),
                         &CpuExecutable::run_node,
                         f->arena->data,
                         b.placement.offsets.data(),
                         &CpuExecutable::run_conv,
                         profile::active() ? &CpuExecutable::profile_step : nullptr,
                         &CpuExecutable::run_conv_args,
                         &CpuExecutable::run_conv_grad,
                         cpu::host_sgemm(),
                         f->subgraphs.empty() ? nullptr : f->subgraphs.data(),
                         cpu::host_gemm_bf16(),
                         cpu::host_gemm_batched()};
    return f;
  }

  // Whether output j can be written straight into `dest`: its bytes overlap no other given
  // output already written directly, and no input unless it is that input's whole buffer and
  // the schedule allows it.
  bool may_write_into(size_t j, const Tensor& dest, const std::vector<Tensor>& ins, std::span<Tensor> given,
                      const std::vector<bool>& direct) const {
    const char* d = static_cast<const char*>(dest.raw_data());
    const size_t n = dest.nbytes();
    auto overlaps = [&](const Tensor& t) {
      const char* p = static_cast<const char*>(t.raw_data());
      return n > 0 && t.nbytes() > 0 && p < d + n && d < p + t.nbytes();
    };
    for (size_t k = 0; k < j; ++k)
      if (direct[k] && overlaps(given[k])) return false;
    const std::vector<int>& allowed = code_.output_may_alias[j];
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!overlaps(ins[i])) continue;
      const bool same = ins[i].raw_data() == dest.raw_data() && ins[i].nbytes() == n;
      if (!same || std::find(allowed.begin(), allowed.end(), static_cast<int>(i)) == allowed.end()) return false;
    }
    return true;
  }

  static int run_node(void* ctx, int32_t node, const void* const* inputs, void* const* outputs,
                      char* error, size_t error_size) {
    const HostCall& call = *static_cast<const HostCall*>(ctx);
    const Graph& g = call.exe->graph_;
    const Node& n = g.node(node);
    try {
      auto shape = [&](ValueId v) { return call.binding->shapes[static_cast<size_t>(v)]; };
      std::vector<Tensor> args;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        Shape s = shape(v);
        void* p = const_cast<void*>(inputs[i]);
        args.push_back(Tensor::wrap(p, g.value(v).dtype, s, contiguous_strides(s),
                                    std::shared_ptr<void>(p, [](void*) {})));
      }
      std::vector<Tensor> results(n.outputs.size());
      get_op(n.op).eval(n, args, results);
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const ValueId v = n.outputs[k];
        const Tensor r = results[k].contiguous();
        INGOT_CHECK(r.dtype() == g.value(v).dtype && r.shape() == shape(v), n.op, " output ", k,
                    " is ", dtype_name(r.dtype()), to_string(r.shape()), ", expected ",
                    dtype_name(g.value(v).dtype), to_string(shape(v)));
        if (r.nbytes() > 0) std::memcpy(outputs[k], r.raw_data(), r.nbytes());
      }
      return 0;
    } catch (const std::exception& e) {
      std::snprintf(error, error_size, "Evaluating %s%s%s%s: %s", n.op.c_str(),
                    n.scope.empty() ? "" : " in '", n.scope.c_str(), n.scope.empty() ? "" : "'", e.what());
      return 1;
    }
  }

  static void profile_step(void* ctx, int32_t step, int32_t phase) {
    HostCall& call = *static_cast<HostCall*>(ctx);
    if (phase == 0) {
      call.step_start_ns = profile::now_ns();
      return;
    }
    const cpu::GeneratedCode& code = call.exe->code_;
    profile::record(code.profile_names[static_cast<size_t>(step)], "cpu", code.profile_details[static_cast<size_t>(step)],
                    call.step_start_ns, profile::now_ns());
  }

  static int run_conv(void* ctx, int32_t conv, const void* x, const void* w, const void* b, void* y, char* error,
                      size_t error_size) {
    const void* args[] = {x, w, b};
    return run_conv_args(ctx, conv, args, y, error, error_size);
  }
  // args: x, w, b (or null), then one operand per binary post-op.
  static int run_conv_args(void* ctx, int32_t conv, const void* const* args, void* y, char* error, size_t error_size) {
    HostCall& call = *static_cast<HostCall*>(ctx);
    try {
      const cpu::DnnlConvCall& c = call.exe->code_.dnnl_convs.at(static_cast<size_t>(conv));
      // The inputs that the convs which made them prove finite (conv_post_ops.h), in
      // finite_when's order: x, w, b when present, the operands (oneDNN takes at most 32 post-ops).
      bool known_finite[40] = {};
      INGOT_CHECK(c.finite_when.size() <= std::size(known_finite), "CpuBackend: conv2d with ", c.finite_when.size(),
                  " inputs and post-op operands, more than ", std::size(known_finite));
      for (size_t i = 0; i < c.finite_when.size(); ++i) {
        const std::optional<std::vector<int32_t>>& producers = c.finite_when[i];
        known_finite[i] = producers.has_value();
        for (size_t k = 0; known_finite[i] && k < producers->size(); ++k)
          known_finite[i] = call.conv_finite[static_cast<size_t>((*producers)[k])] != 0;
      }
      const bool finite = call.binding->convs.at(static_cast<size_t>(conv))
                              ->run(args[0], args[1], args[2], args + 3, y,
                                    call.exe->body_ ? nullptr : &call.conv_weights, call.exe->graph_.node(c.node).inputs[1],
                                    &call.binding->kept_weights, known_finite);
      call.conv_finite[static_cast<size_t>(conv)] = finite ? 1 : 0;
      return 0;
    } catch (const std::exception& e) {
      std::snprintf(error, error_size, "%s", e.what());
      return 1;
    }
  }

  static int run_conv_grad(void* ctx, int32_t grad, const void* a, const void* b, void* out, char* error,
                           size_t error_size) {
    const HostCall& call = *static_cast<const HostCall*>(ctx);
    try {
      call.binding->conv_grads.at(static_cast<size_t>(grad))->run(a, b, out);
      return 0;
    } catch (const std::exception& e) {
      std::snprintf(error, error_size, "%s", e.what());
      return 1;
    }
  }

  std::unique_ptr<Arena> take_arena(size_t bytes) const {
    std::unique_ptr<Arena> a;
    {
      std::lock_guard<std::mutex> lock(arena_mu_);
      if (!idle_arenas_.empty()) {
        a = std::move(idle_arenas_.back());
        idle_arenas_.pop_back();
      }
    }
    if (!a) a = std::make_unique<Arena>();
    if (a->bytes < bytes) {
      a->storage.reset();
      a->storage = allocate_buffer(bytes);
      a->data = static_cast<char*>(a->storage.get());
      a->bytes = bytes;
    }
    return a;
  }
  void return_arena(std::unique_ptr<Arena> a) const {
    std::lock_guard<std::mutex> lock(arena_mu_);
    idle_arenas_.push_back(std::move(a));
  }

  // Arena offsets from the slots' sizes under these shapes, and the oneDNN primitives.
  void plan(Binding& b) const {
    b.requests = cpu::arena_requests(graph_, code_, b.shapes);
    b.placement = place_buffers(b.requests, strategy_);
    for (const cpu::DnnlConvCall& c : code_.dnnl_convs) {
      const Node& n = graph_.node(c.node);
      const Shape &x = b.shapes[static_cast<size_t>(n.inputs[0])], &w = b.shapes[static_cast<size_t>(n.inputs[1])],
                  &y = b.shapes[static_cast<size_t>(n.outputs[0])];
      cpu::ConvSpec spec = cpu::dense_spec(n, x, w, y, c.src_layout, c.dst_layout);
      spec.post_ops = c.post_ops;
      spec.residual_in_dst = c.residual_in_place;
      spec.bf16 = graph_.value(n.outputs[0]).dtype == DType::BFloat16;  // Generator::use_dnnl
      const ValueId wv = n.inputs[1];
      const auto k = std::find(code_.constants.begin(), code_.constants.end(), wv);
      // Winograd only for constant weights, transformed once at load: oneDNN's transform of the
      // weights into its Winograd layout is slow (ResNet-18 at batch 1 took 263 ms a call with
      // its weights passed every call, 34 ms with direct kernels), so weights that can change
      // every call (training, parameters passed to evaluate) keep direct kernels.
      spec.winograd = winograd_ && k != code_.constants.end() && n.op == "conv2d";
      // Convs of one spec share a primitive (batch chunks repeat the same convs).
      std::shared_ptr<const cpu::DnnlConv> conv;
      for (size_t i = 0; i < b.convs.size() && !conv; ++i)
        if (b.conv_specs[i] == spec) conv = b.convs[i];
      b.convs.push_back(conv ? conv : std::make_shared<const cpu::DnnlConv>(spec));
      b.conv_specs.push_back(std::move(spec));
      if (k != code_.constants.end())
        b.convs.back()->keep_weights(const_ptrs_[static_cast<size_t>(k - code_.constants.begin())], &b.kept_weights, wv);
    }
    for (const cpu::DnnlConvGradCall& c : code_.dnnl_conv_grads) {
      const Node& n = graph_.node(c.node);
      const bool input_grad = n.op == "conv2d_input_grad";  // (dy, w, like x), else (x, dy, like w)
      auto shape = [&](size_t i) { return b.shapes[static_cast<size_t>(n.inputs[i])]; };
      // bfloat16 operands (and maybe result) where the generated code hands them over so
      // (Generator::use_dnnl_grad), else float32.
      const bool bf16_operands = graph_.value(n.inputs[0]).dtype == DType::BFloat16;
      const bool bf16_result = graph_.value(n.outputs[0]).dtype == DType::BFloat16;
      b.conv_grads.push_back(std::make_unique<cpu::DnnlConvGrad>(n, shape(input_grad ? 2 : 0), shape(input_grad ? 1 : 2),
                                                                 shape(input_grad ? 0 : 1), bf16_operands, bf16_result));
    }
    plan_subgraphs(b);
  }

  // Each control-flow subgraph's binding for the shapes its node passes it, checked against the
  // shapes the node's results have (a body may not change a carried shape), and its spares: a
  // second buffer per carried value, after this executable's arena.
  void plan_subgraphs(Binding& b) const {
    b.frame_bytes = b.placement.arena_bytes;
    auto shape = [&](ValueId v) -> const Shape& { return b.shapes[static_cast<size_t>(v)]; };
    auto without_leading = [](Shape s) {
      if (!s.empty()) s.erase(s.begin());
      return s;
    };
    for (size_t i = 0; i < code_.subgraphs.size(); ++i) {
      const cpu::SubgraphCode& sc = code_.subgraphs[i];
      const Node& n = graph_.node(sc.node);
      const CpuExecutable& child = *children_[i];
      const Graph& sub = child.graph_;
      const std::string where =
          n.op + " (node " + std::to_string(n.id) + ") " + get_op(n.op).subgraph_names.at(sc.index);
      std::vector<Shape> params, results;  // the subgraph's, as the node sees them
      size_t carried = 0;
      if (n.op == "if") {
        INGOT_CHECK(numel(shape(n.inputs[0])) == 1, "the condition of an if must hold one element, it has shape ",
                    to_string(shape(n.inputs[0])));
        for (size_t k = 1; k < n.inputs.size(); ++k) params.push_back(shape(n.inputs[k]));
        for (ValueId v : n.outputs) results.push_back(shape(v));
      } else if (n.op == "while") {
        for (ValueId v : n.inputs) params.push_back(shape(v));
        if (sc.index == 0) results.push_back({});  // the condition: one element
        else for (ValueId v : n.outputs) results.push_back(shape(v));
        carried = sc.index == 1 ? n.outputs.size() : 0;
      } else {  // scan
        const size_t c = static_cast<size_t>(ops::num_carry(n)), x = static_cast<size_t>(ops::num_xs(n));
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          const bool scanned = k >= c && k < c + x;  // the body sees one step
          params.push_back(scanned ? without_leading(shape(n.inputs[k])) : shape(n.inputs[k]));
        }
        for (size_t k = c; k < c + x; ++k)
          INGOT_CHECK(!shape(n.inputs[k]).empty() && shape(n.inputs[k])[0] == shape(n.inputs[c])[0], "scanned operand ",
                      k - c, " has shape ", to_string(shape(n.inputs[k])),
                      "; every scanned operand needs the leading length ", shape(n.inputs[c])[0]);
        for (size_t k = 0; k < n.outputs.size(); ++k)
          results.push_back(k < c ? shape(n.outputs[k]) : without_leading(shape(n.outputs[k])));
        carried = c;
      }
      std::vector<Shape> in_shapes;
      for (size_t p : cpu::subgraph_params_of_inputs(sub, child.code_)) in_shapes.push_back(params.at(p));
      SubgraphBinding sb;
      sb.binding = child.bind(in_shapes);
      for (size_t j = 0; j < sub.outputs().size(); ++j) {
        const Shape& got = sb.binding->shapes[static_cast<size_t>(sub.outputs()[j].second)];
        const bool fits = n.op == "while" && sc.index == 0 ? numel(got) == 1 : got == results.at(j);
        INGOT_CHECK(fits, where, " graph returns ", to_string(got), " for result ", j, " where ",
                    n.op == "while" && sc.index == 0 ? std::string("one element") : to_string(results.at(j)),
                    " is needed", j < carried ? " (a loop-carried value keeps its shape)" : "");
      }
      for (size_t j = 0; j < carried; ++j) {
        b.frame_bytes = (b.frame_bytes + 63) / 64 * 64;
        sb.spare_offsets.push_back(b.frame_bytes);
        b.frame_bytes += numel(shape(n.outputs[j])) * static_cast<int64_t>(dtype_size(graph_.value(n.outputs[j]).dtype));
      }
      b.subgraphs.push_back(std::move(sb));
    }
  }

  std::shared_ptr<const Binding> bind(const std::vector<Shape>& in_shapes) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bindings_.find(in_shapes);
    if (it != bindings_.end()) return it->second;
    for (size_t i = 0; i < in_shapes.size(); ++i) {
      const Value& v = graph_.value(code_.inputs[i]);
      bool ok = v.shape.size() == in_shapes[i].size();
      for (size_t d = 0; ok && d < v.shape.size(); ++d)
        ok = !v.shape[d].known() || v.shape[d].value == in_shapes[i][d];
      INGOT_CHECK(ok, "cpu executable: input '", v.name, "' has shape ", to_string(in_shapes[i]),
                  ", expected ", to_string(v.shape));
    }
    auto b = std::make_shared<Binding>();
    bool all_static = true;
    for (const Value& v : graph_.values()) all_static = all_static && is_static(v.shape);
    if (all_static) {
      for (const Value& v : graph_.values()) b->shapes.push_back(to_shape(v.shape));
    } else {
      Graph g = graph_;
      for (Value& v : g.values()) {
        if (v.producer >= 0) {
          v.shape.clear();
          v.shape_known = false;
        }
      }
      for (size_t i = 0; i < in_shapes.size(); ++i) {
        Value& v = g.value(code_.inputs[i]);
        v.shape.assign(in_shapes[i].begin(), in_shapes[i].end());
        v.shape_known = true;
      }
      try {
        infer_shapes(g, {});
      } catch (const Error& e) {
        INGOT_FAIL("cpu executable: input shapes do not fit the model: ", e.what());
      }
      for (const Value& v : g.values()) {
        INGOT_CHECK(is_static(v.shape), "cpu executable: cannot determine the shape of value ", v.id,
                    " from the input shapes (", to_string(v.shape), ")");
        b->shapes.push_back(to_shape(v.shape));
      }
      b->dims.assign(code_.symbols.size(), -1);
      std::map<std::string, size_t> index;
      for (size_t i = 0; i < code_.symbols.size(); ++i) index[code_.symbols[i]] = i;
      for (const Value& v : graph_.values())
        for (size_t d = 0; d < v.shape.size(); ++d) {
          if (v.shape[d].known()) continue;
          const size_t i = index.at(v.shape[d].symbol);
          const int64_t got = b->shapes[static_cast<size_t>(v.id)][d];
          INGOT_CHECK(b->dims[i] < 0 || b->dims[i] == got, "cpu executable: dimension '", v.shape[d].symbol,
                      "' is ", b->dims[i], " in one place and ", got, " in another");
          b->dims[i] = got;
        }
    }
    plan(*b);
    if (bindings_.size() > 64) bindings_.clear();
    bindings_.emplace(in_shapes, b);
    return b;
  }

  Graph graph_;
  cpu::GeneratedCode code_;
  std::shared_ptr<const cpu::LoadedLibrary> lib_;
  ingot_entry_fn entry_ = nullptr;
  std::vector<Tensor> constants_;
  std::vector<const void*> const_ptrs_;
  std::string strategy_;  // memory_planning: greedy | none
  bool winograd_ = false;  // CpuOptions::winograd
  // A control-flow body runs many times in one call, and a value of it (a loop's slice of its
  // input, a weight computed in the body) holds other data at every iteration, at the same
  // address: its convs do not keep reordered weights for the rest of the call (WeightCache),
  // which would hand the second iteration the first one's weights (program fuzzer, seed 97040:
  // a scan whose body convolves each slice with itself).
  bool body_ = false;
  mutable std::mutex mu_;
  mutable std::map<std::vector<Shape>, std::shared_ptr<const Binding>> bindings_;
  std::shared_ptr<const Binding> static_binding_;  // kept: its primitives were made at load
  std::vector<std::unique_ptr<CpuExecutable>> children_;  // per GeneratedCode::subgraphs
  mutable std::mutex arena_mu_;
  mutable std::vector<std::unique_ptr<Arena>> idle_arenas_;
};

}  // namespace

int CpuBackend::compile_count() { return cpu::compiler_invocations().load(); }

std::unique_ptr<Executable> CpuBackend::lower(const Graph& graph, const CompileOptions& options) const {
  const cpu::LoweringInput in = cpu::lowering_input(graph, options_, options);
  const Graph& g = in.widened ? *in.widened : graph;
  return cpu::lower_with_plan(g, fusion_plan_for(g, options), cpu::tuned_options(options_, options), options.verbose,
                              options.memory_planning, in.layout, options.file_path, options.code_transformers);
}

cpu::LoweringInput cpu::lowering_input(const Graph& graph, const CpuBackend::CpuOptions& cpu,
                                       const CompileOptions& options) {
  LoweringInput in;
  in.widened = widen_half_dense(graph, native_bf16_matmul(cpu), dnnl_native_bf16_conv());
  in.layout = requested_layout(in.widened ? *in.widened : graph, options,
                               cpu_layout_target(dnnl_available(), host_layout(), dnnl_native_bf16_conv()));
  return in;
}

bool cpu::native_bf16_matmul(const CpuBackend::CpuOptions& options) {
  return options.blas && cpu::host_gemm_bf16() != nullptr;
}

CpuBackend::CpuOptions cpu::tuned_options(const CpuBackend::CpuOptions& options, const CompileOptions& compile) {
  CpuBackend::CpuOptions o = options;
  o.num_threads = threads_per_call(compile, options.num_threads);
  o.vectorize = options.vectorize && compile.cpu_options.vectorize;
  o.optimize_size = options.optimize_size || compile.optimize_for == "size";
  return o;
}

cpu::PreparedCode cpu::prepare_code(const Graph& graph, const FusionPlan& plan, const CpuBackend::CpuOptions& options,
                                    const std::string& memory_planning, Layout layout,
                                    const std::string& cache_dir) {
  cpu::Toolchain tc = cpu::find_toolchain(options.compiler, cache_dir);
  if (!options.blas) tc.openblas.clear();  // neither called nor linked
  cpu::CodegenOptions co;
  co.blas = !tc.openblas.empty();
  co.dnnl = cpu::dnnl_available();
  co.bf16_conv = cpu::dnnl_native_bf16_conv();
  co.dnnl_matmul = co.dnnl && options.blas && options.dnnl_matmul;
  co.inplace = memory_planning != "none";
  co.num_threads = options.num_threads;
  co.vectorize = options.vectorize;
  co.layout = layout;
  return {tc, cpu::generate_cpp(graph, plan, cpu::cpu_layouts(graph, co.dnnl, layout, co.bf16_conv), co)};
}

std::unique_ptr<Executable> cpu::lower_with_plan(const Graph& graph, const FusionPlan& plan,
                                                 const CpuBackend::CpuOptions& options_, bool verbose,
                                                 const std::string& memory_planning, Layout layout,
                                                 const std::string& file_path,
                                                 const std::vector<CodeTransformer>& transformers) {
  const std::string cache_dir = cpu::cache_dir_of(options_);
  std::optional<ProfileScope> step(std::in_place, "cpu: generate C++");
  cpu::PreparedCode prepared =
      cpu::prepare_code(graph, plan, options_, memory_planning, layout, options_.cache ? cache_dir : "");
  const cpu::Toolchain& tc = prepared.toolchain;
  cpu::GeneratedCode& code = prepared.code;
  for (size_t i = 0; i < transformers.size(); ++i) {
    INGOT_CHECK(static_cast<bool>(transformers[i]), "Option 'code_transformers': entry ", i, " is empty");
    std::string out;
    try {
      out = transformers[i](code.source);
    } catch (const std::exception& e) {
      INGOT_FAIL("Option 'code_transformers': transformer ", i, " failed: ", e.what());
    }
    INGOT_CHECK(!out.empty(), "Option 'code_transformers': transformer ", i, " returned empty source");
    code.source = std::move(out);
  }
  cpu::BuildRequest req;
  req.source = code.source;
  req.flags = cpu::compile_flags(options_.extra_flags, options_.vectorize, options_.optimize_size);
  req.toolchain = tc;
  req.cache = options_.cache;
  req.cache_dir = cache_dir;
  if (verbose) {
    const std::string key = cpu::cache_key(req);
    std::cerr << "[cpu] compiler: " << tc.compiler << " (" << tc.version << ")"
              << (tc.openblas.empty() ? ", no BLAS (gemm in loops)" : ", BLAS: " + tc.openblas)
              << (cpu::dnnl_available() ? ", oneDNN kernels: " + cpu::dnnl_cpu_isa() : ", no oneDNN")
              << (cpu::native_bf16_matmul(options_) ? ", bfloat16 matmuls and attention: oneDNN bf16"
                                                    : ", bfloat16 matmuls and attention: widened to float32")
              << (cpu::dnnl_native_bf16_conv() ? ", bfloat16 convolutions: oneDNN bf16 (AMX)"
                                          : ", bfloat16 convolutions: widened to float32")
              << "\n"
              << "[cpu] threads per call: "
              << (options_.num_threads > 0 ? std::to_string(options_.num_threads) : std::string("OpenMP's default"))
              << ", vectorize " << (options_.vectorize ? "on" : "off") << ", " << (options_.optimize_size ? "-Os" : "-O3")
              << "\n"
              << "[cpu] fusion plan:\n" << plan.str(graph) << "[cpu] " << code.native_nodes.size()
              << " nodes native in " << code.kernels << " kernels, " << code.fallback_nodes.size()
              << " on reference kernels:";
    for (NodeId n : code.fallback_nodes) std::cerr << " " << graph.node(n).op;
    // The file a user reads is the file_path copy (written by compile once lowering returns), so
    // the command builds that one, next to it; without file_path, the cache's copy.
    std::string source_path = req.cache_dir + "/" + key + ".cpp", library_path = req.cache_dir + "/" + key + ".so";
    if (!file_path.empty()) {
      source_path = std::filesystem::absolute(file_path).string();
      library_path = std::filesystem::path(source_path).replace_extension(".so").string();
      if (library_path == source_path) library_path += ".so";
    }
    std::cerr << "\n[cpu] build " << (file_path.empty() ? "the cached source" : "the file_path file " + source_path)
              << " by hand: " << cpu::join_command(cpu::build_command(tc, req.flags, source_path, library_path)) << "\n";
  }
  step.emplace("cpu: build or load the library (cache " + std::string(options_.cache ? "on" : "off") + ")");
  std::shared_ptr<const cpu::LoadedLibrary> lib = cpu::load_or_build(req);
  step.emplace("cpu: executable (static plan, oneDNN primitives)");
  auto exe = std::make_unique<CpuExecutable>(graph, std::move(code), std::move(lib), memory_planning, options_.winograd);
  step.reset();
  if (verbose && exe->static_plan() != nullptr) {
    const Binding& b = *exe->static_plan();
    int inplace = 0;
    for (const BufferRequest& r : b.requests) inplace += r.reuses >= 0;
    std::cerr << "[cpu] arena: " << b.requests.size() << " buffers in " << b.placement.arena_bytes << " bytes (lower bound "
              << b.placement.lower_bound_bytes << ", " << inplace << " in place, memory_planning " << memory_planning
              << "), " << exe->code().channels_last_values.size() << " stored channels-last\n";
    for (size_t i = 0; i < b.convs.size(); ++i)
      std::cerr << "[cpu] " << graph.node(exe->code().dnnl_convs[i].node).op << " node " << exe->code().dnnl_convs[i].node
                << ": oneDNN " << b.convs[i]->implementation()
                << ", " << b.convs[i]->layouts() << "\n";
    for (size_t i = 0; i < b.conv_grads.size(); ++i)
      std::cerr << "[cpu] " << graph.node(exe->code().dnnl_conv_grads[i].node).op << " node "
                << exe->code().dnnl_conv_grads[i].node << ": oneDNN " << b.conv_grads[i]->implementation() << "\n";
  }
  return exe;
}

cpu::ExecutionPlan cpu::execution_plan(const Executable& exe, const std::vector<Shape>& input_shapes) {
  const auto* cpu = dynamic_cast<const CpuExecutable*>(&exe);
  INGOT_CHECK(cpu != nullptr, "execution_plan: not a CpuBackend executable");
  std::shared_ptr<const Binding> b = cpu->binding_for(input_shapes);
  ExecutionPlan p;
  p.requests = b->requests;
  p.placement = b->placement;
  for (const auto& c : b->convs) p.conv_implementations.push_back(c->implementation());
  p.channels_last_values = cpu->code().channels_last_values;
  return p;
}

}  // namespace ingot
