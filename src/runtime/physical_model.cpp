#include "ingot/physical_model.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <set>
#include <sstream>

#include "compiler/gradient_pipeline.h"
#include "compiler/memory_plan.h"
#include "compiler/target_options.h"
#include "core/random.h"
#include "ingot/compile.h"
#include "ingot/error.h"
#include "ingot/serialize.h"

namespace ingot {

// The graph autodiff differentiates and one joint graph per set of seeded outputs, shared by
// copies of the model and built under a lock.
struct PhysicalModel::GradientCache {
  Graph unoptimized;
  bool has_graph = false;
  std::mutex mutex;
  std::map<std::vector<std::string>, std::unique_ptr<JointGraph>> joints;
};

PhysicalModel::PhysicalModel(Graph graph, std::shared_ptr<const Backend> backend,
                             std::shared_ptr<const CompileOptions> options,
                             std::shared_ptr<const Executable> executable)
    : graph_(std::move(graph)),
      backend_(std::move(backend)),
      options_(std::move(options)),
      executable_(std::move(executable)),
      gradients_(std::make_shared<GradientCache>()) {}

const Executable& PhysicalModel::executable() const {
  if (!executable_) executable_ = backend_->lower(graph_, *options_);
  return *executable_;
}

const MemoryPlan& PhysicalModel::memory_plan() const {
  static const MemoryPlan none = [] {
    MemoryPlan p;
    p.reason = "no plan made";
    return p;
  }();
  return memory_plan_ ? *memory_plan_ : none;
}

void PhysicalModel::set_memory_plan(MemoryPlan plan) {
  memory_plan_ = std::make_shared<const MemoryPlan>(std::move(plan));
}

std::vector<ValueId> PhysicalModel::run_leaves() const {
  std::vector<ValueId> out;
  for (ValueId id : graph_.leaves())
    if (graph_.value(id).kind != ValueKind::Constant) out.push_back(id);
  return out;
}

namespace {

std::vector<std::string> names_of_kind(const Graph& g, ValueKind kind) {
  std::vector<std::string> out;
  for (ValueId id : g.leaves_of(kind)) out.push_back(g.value(id).name);
  return out;
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

Tensor init_tensor(const Value& v, uint64_t seed) {
  INGOT_CHECK(is_static(v.shape), "Cannot randomize parameter '", v.name, "': its shape ",
              to_string(v.shape), " is symbolic; give its size with the `shapes` option");
  Shape shape = to_shape(v.shape);
  Init init = Init::parse(v.init);
  Tensor t(DType::Float64, shape);
  double* p = t.data<double>();
  const int64_t n = t.numel();
  const uint64_t s = rng::mix64(seed) ^ hash_name(v.name);
  auto fill_uniform = [&](double lo, double hi) {
    for (int64_t i = 0; i < n; ++i) p[i] = lo + (hi - lo) * rng::uniform01(s, static_cast<uint64_t>(i));
  };
  auto fan_in_bound = [&](int64_t fan_in) { return fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0; };
  switch (init.kind) {
    case Init::Kind::Zeros: break;
    case Init::Kind::Ones: std::fill(p, p + n, 1.0); break;
    case Init::Kind::Constant: std::fill(p, p + n, init.a); break;
    case Init::Kind::Uniform: fill_uniform(init.a, init.b); break;
    case Init::Kind::Normal:
      for (int64_t i = 0; i < n; ++i) p[i] = init.a + init.b * rng::normal(s, static_cast<uint64_t>(i));
      break;
    case Init::Kind::FanInUniform: {
      int64_t fan_in = shape.empty() ? 1 : shape[static_cast<size_t>(std::clamp<int>(init.fan_in_axis, 0, static_cast<int>(shape.size()) - 1))];
      double b = fan_in_bound(fan_in);
      fill_uniform(-b, b);
      break;
    }
    case Init::Kind::FanInAllButFirst: {
      int64_t fan_in = 1;
      for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
      double b = fan_in_bound(fan_in);
      fill_uniform(-b, b);
      break;
    }
  }
  return t.astype(v.dtype);
}

// Checks a user tensor against a terminal's inferred dtype and symbolic shape, binding symbols.
void check_tensor(const Value& v, const Tensor& t, std::map<std::string, std::pair<int64_t, std::string>>& bound) {
  INGOT_CHECK(t.defined(), "'", v.name, "' is an undefined tensor");
  INGOT_CHECK(t.dtype() == v.dtype, "Type mismatch at '", v.name, "': expected ",
              dtype_name(v.dtype), ", got ", dtype_name(t.dtype()));
  bool ok = t.rank() == static_cast<int>(v.shape.size());
  for (size_t i = 0; ok && i < v.shape.size(); ++i)
    if (v.shape[i].known()) ok = v.shape[i].value == t.shape()[i];
  INGOT_CHECK(ok, "Shape mismatch at '", v.name, "': expected ", to_string(v.shape), ", got ",
              to_string(t.shape()));
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i].known()) continue;
    auto [it, fresh] = bound.emplace(v.shape[i].symbol, std::make_pair(t.shape()[i], v.name));
    INGOT_CHECK(fresh || it->second.first == t.shape()[i], "Shape mismatch at '", v.name,
                "': dimension '", v.shape[i].symbol, "' is ", t.shape()[i], " here but ",
                it->second.first, " at '", it->second.second, "'");
  }
}

}  // namespace

TensorMap PhysicalModel::randomize_params(uint64_t seed) const {
  TensorMap out;
  for (ValueId id : graph_.leaves_of(ValueKind::Parameter)) {
    const Value& v = graph_.value(id);
    out.emplace(v.name, init_tensor(v, seed));
  }
  return out;
}

void PhysicalModel::check_arguments(const TensorMap& params, const TensorMap& inputs,
                                    std::map<std::string, std::pair<int64_t, std::string>>& bound) const {
  auto list = [&](ValueKind kind) {
    std::string s;
    for (const auto& n : names_of_kind(graph_, kind)) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? std::string("none") : s;
  };
  // A terminal of the model that optimization made unnecessary (a loop that runs no iteration
  // no longer reads its invariants) is still accepted, and ignored: the model's signature does
  // not depend on what the optimizer could prove.
  auto optimized_away = [&](const std::string& name, ValueKind kind) {
    if (!optimized_away_) return false;
    const auto it = optimized_away_->find(name);
    return it != optimized_away_->end() && it->second == kind;
  };
  for (const auto& [name, t] : params) {
    if (optimized_away(name, ValueKind::Parameter)) continue;
    auto id = graph_.find_leaf(name);
    INGOT_CHECK(id && graph_.value(*id).kind == ValueKind::Parameter, "Unknown parameter '", name,
                "' (parameters: ", list(ValueKind::Parameter), ")");
  }
  for (const auto& [name, t] : inputs) {
    if (optimized_away(name, ValueKind::Input)) continue;
    auto id = graph_.find_leaf(name);
    INGOT_CHECK(id && graph_.value(*id).kind == ValueKind::Input, "Unknown input '", name,
                "' (inputs: ", list(ValueKind::Input),
                id && graph_.value(*id).kind == ValueKind::Parameter ? "; it is a parameter: pass it in params" : "", ")");
  }
  for (ValueId id : run_leaves()) {
    const Value& v = graph_.value(id);
    const TensorMap& from = v.kind == ValueKind::Parameter ? params : inputs;
    auto it = from.find(v.name);
    INGOT_CHECK(it != from.end(), "Missing ", v.kind == ValueKind::Parameter ? "parameter" : "input",
                " '", v.name, "' (", dtype_name(v.dtype), to_string(v.shape), ")");
    if (options_ && v.kind == ValueKind::Input && it->second.defined()) check_batch_range(*options_, v.name, it->second.shape());
    check_tensor(v, it->second, bound);
  }
}

TensorMap PhysicalModel::evaluate(const TensorMap& params, const TensorMap& inputs) const {
  std::map<std::string, std::pair<int64_t, std::string>> bound;
  check_arguments(params, inputs, bound);
  std::vector<Tensor> args;
  for (ValueId id : run_leaves()) {
    const Value& v = graph_.value(id);
    args.push_back((v.kind == ValueKind::Parameter ? params : inputs).at(v.name));
  }
  std::vector<Tensor> results = executable().run(args);
  TensorMap out;
  for (size_t i = 0; i < results.size(); ++i) out.emplace(graph_.outputs()[i].first, std::move(results[i]));
  return out;
}

// ---------------------------------------------------------------- gradients

void PhysicalModel::set_optimized_away(std::map<std::string, ValueKind> terminals) {
  if (terminals.empty()) optimized_away_.reset();
  else optimized_away_ = std::make_shared<const std::map<std::string, ValueKind>>(std::move(terminals));
}

void PhysicalModel::set_differentiation_graph(Graph graph) {
  std::lock_guard<std::mutex> lock(gradients_->mutex);
  gradients_->unoptimized = std::move(graph);
  gradients_->has_graph = true;
}

std::vector<std::string> PhysicalModel::gradient_names() const {
  std::vector<std::string> out;
  for (ValueId id : graph_.leaves()) {
    const Value& v = graph_.value(id);
    if (v.differentiable && v.kind != ValueKind::Constant && is_floating(v.dtype)) out.push_back(v.name);
  }
  return out;
}

const JointGraph& PhysicalModel::joint_graph(const std::vector<std::string>& seeded) const {
  INGOT_CHECK(!options_->inference, "Cannot compute gradients: this model was compiled with inference = true "
              "(Dropout off, BatchNorm on running statistics); compile it without `inference` to differentiate it");
  GradientCache& cache = *gradients_;
  std::lock_guard<std::mutex> lock(cache.mutex);
  INGOT_CHECK(cache.has_graph, "Cannot compute gradients: this PhysicalModel was not built by compile, so it "
              "has no graph to differentiate");
  std::unique_ptr<JointGraph>& joint = cache.joints[seeded];
  if (!joint)
    joint = std::make_unique<JointGraph>(
        build_joint_graph(cache.unoptimized, seeded, gradient_names(), *backend_, *options_));
  return *joint;
}

const JointGraph& PhysicalModel::checked_joint_graph(const std::vector<std::string>& seeded_outputs) const {
  std::vector<std::string> seeded = seeded_outputs;
  std::sort(seeded.begin(), seeded.end());
  seeded.erase(std::unique(seeded.begin(), seeded.end()), seeded.end());
  for (const std::string& name : seeded)
    INGOT_CHECK(graph_.find_output(name), "Unknown output '", name, "' (outputs: ",
                [&] {
                  std::string s;
                  for (const auto& n : output_names()) s += (s.empty() ? "" : ", ") + n;
                  return s;
                }(),
                ")");
  return joint_graph(seeded);
}

const Graph& PhysicalModel::gradient_graph(const std::vector<std::string>& seeded_outputs) const {
  return checked_joint_graph(seeded_outputs).graph;
}

GradientMemory PhysicalModel::gradient_memory(const std::vector<std::string>& seeded_outputs) const {
  return joint_memory(checked_joint_graph(seeded_outputs));
}

Evaluation PhysicalModel::evaluate(const TensorMap& params, const TensorMap& inputs,
                                   const TensorMap& output_gradients) const {
  std::map<std::string, std::pair<int64_t, std::string>> bound;
  check_arguments(params, inputs, bound);
  std::vector<std::string> seeded;
  for (const auto& [name, t] : output_gradients) {
    auto out = graph_.find_output(name);
    if (!out) {
      std::string names;
      for (const auto& n : output_names()) names += (names.empty() ? "" : ", ") + n;
      INGOT_FAIL("output_gradients: '", name, "' is not an output of the model (outputs: ", names, ")");
    }
    const Value& v = graph_.value(*out);
    INGOT_CHECK(is_floating(v.dtype), "output_gradients: output '", name, "' is ", dtype_name(v.dtype),
                " and cannot be differentiated");
    Value named = v;
    named.name = name;
    try {
      check_tensor(named, t, bound);
    } catch (const Error& e) {
      INGOT_FAIL("output_gradients: ", e.what());
    }
    seeded.push_back(name);
  }
  const JointGraph& joint = joint_graph(seeded);
  const Graph& jg = joint.graph;
  std::vector<Tensor> args;
  for (ValueId id : jg.leaves()) {
    const Value& v = jg.value(id);
    if (v.kind == ValueKind::Constant) continue;
    auto cot = joint.cotangent_inputs.find(v.name);
    const TensorMap& from = cot != joint.cotangent_inputs.end() ? output_gradients
                            : v.kind == ValueKind::Parameter   ? params
                                                               : inputs;
    auto it = from.find(cot != joint.cotangent_inputs.end() ? cot->second : v.name);
    INGOT_CHECK(it != from.end(), "Missing ", v.kind == ValueKind::Parameter ? "parameter" : "input", " '",
                v.name, "'");
    args.push_back(it->second);
  }
  std::vector<Tensor> results = joint.executable->run(args);
  Evaluation r;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& name = jg.outputs()[i].first;
    auto grad = joint.gradient_outputs.find(name);
    if (grad != joint.gradient_outputs.end()) r.gradients.emplace(grad->second, std::move(results[i]));
    else r.outputs.emplace(name, std::move(results[i]));
  }
  return r;
}

std::map<std::string, SymShape> PhysicalModel::get_shapes() const {
  std::map<std::string, SymShape> out;
  for (const Value& v : graph_.values())
    if (v.producer < 0 || v.name.find('.') == std::string::npos) out.emplace(v.name, v.shape);
  for (const auto& [name, v] : graph_.outputs()) out[name] = graph_.value(v).shape;
  out.erase("");
  return out;
}

std::map<std::string, DType> PhysicalModel::get_types() const {
  std::map<std::string, DType> out;
  for (const Value& v : graph_.values())
    if (v.producer < 0 || v.name.find('.') == std::string::npos) out.emplace(v.name, v.dtype);
  for (const auto& [name, v] : graph_.outputs()) out[name] = graph_.value(v).dtype;
  out.erase("");
  return out;
}

std::vector<std::string> PhysicalModel::input_names() const { return names_of_kind(graph_, ValueKind::Input); }
std::vector<std::string> PhysicalModel::parameter_names() const { return names_of_kind(graph_, ValueKind::Parameter); }
std::vector<std::string> PhysicalModel::constant_names() const { return names_of_kind(graph_, ValueKind::Constant); }
std::vector<std::string> PhysicalModel::output_names() const {
  std::vector<std::string> out;
  for (const auto& [name, v] : graph_.outputs()) out.push_back(name);
  return out;
}

int64_t PhysicalModel::parameter_count() const {
  int64_t n = 0;
  for (ValueId id : graph_.leaves_of(ValueKind::Parameter))
    if (is_static(graph_.value(id).shape)) n += numel(to_shape(graph_.value(id).shape));
  return n;
}

std::string PhysicalModel::summary() const {
  std::ostringstream os;
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d) {
    os << std::left << std::setw(28) << a << std::setw(18) << b << std::setw(26) << c << d << "\n";
  };
  row("terminal", "kind", "shape", "dtype");
  os << std::string(80, '-') << "\n";
  for (ValueId id : graph_.leaves()) {
    const Value& v = graph_.value(id);
    row(v.name, std::string(value_kind_name(v.kind)), to_string(v.shape), std::string(dtype_name(v.dtype)));
  }
  for (const auto& [name, id] : graph_.outputs()) {
    const Value& v = graph_.value(id);
    row(name, "output", to_string(v.shape), std::string(dtype_name(v.dtype)));
  }
  os << std::string(80, '-') << "\n";
  os << graph_.nodes().size() << " nodes, " << parameter_count() << " parameters\n";
  return os.str();
}

void PhysicalModel::save_params(const std::string& path, const TensorMap& params) const {
  for (ValueId id : graph_.leaves_of(ValueKind::Parameter)) {
    const Value& v = graph_.value(id);
    auto it = params.find(v.name);
    INGOT_CHECK(it != params.end(), "save_params: missing parameter '", v.name, "'");
    std::map<std::string, std::pair<int64_t, std::string>> bound;
    check_tensor(v, it->second, bound);
  }
  save_safetensors(path, params, {{"format", "ingot.params"}});
}

TensorMap PhysicalModel::load_params(const std::string& path) const {
  TensorMap loaded = load_safetensors(path);
  TensorMap out;
  for (ValueId id : graph_.leaves_of(ValueKind::Parameter)) {
    const Value& v = graph_.value(id);
    auto it = loaded.find(v.name);
    INGOT_CHECK(it != loaded.end(), "load_params: '", path, "' has no parameter '", v.name, "'");
    std::map<std::string, std::pair<int64_t, std::string>> bound;
    try {
      check_tensor(v, it->second, bound);
    } catch (const Error& e) {
      INGOT_FAIL("load_params: '", path, "': ", e.what());
    }
    out.emplace(v.name, it->second);
  }
  for (const auto& [name, t] : loaded)
    INGOT_CHECK(out.count(name), "load_params: '", path, "' has '", name,
                "', which is not a parameter of this model");
  return out;
}

}  // namespace ingot
