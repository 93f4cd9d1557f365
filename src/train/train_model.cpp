// TrainModel: the model with its loss and metric blocks added as a logical model, then the total
// cost ("final_cost": weighted losses plus regularization) appended to the inferred graph, where
// parameter names are final and can be matched by pattern.
#include <cmath>
#include <set>

#include "compiler/gradient_pipeline.h"
#include "ingot/distributed.h"
#include "ingot/error.h"
#include "ingot/models.h"
#include "ingot/train.h"
#include "train/graph_builder.h"
#include "train/names.h"

namespace ingot {

namespace {

using train::contains;
using train::joined;

// Checks a loss or metric's connections: terminals of the block, and an "input" that reads an
// output of the model.
void check_connections(const char* what, const Model& block, const Connections& connections,
                       const std::vector<std::string>& model_outputs) {
  const std::vector<std::string> terminals = block.input_keys();
  bool has_input = false;
  for (const auto& [terminal, wire] : connections) {
    INGOT_CHECK(contains(terminals, terminal), what, " ", block.type_name(), " has no terminal '", terminal,
                "' (terminals: ", joined(terminals), ")");
    if (terminal != "input") continue;
    has_input = true;
    INGOT_CHECK(contains(model_outputs, wire), what, " ", block.type_name(), ": its input is connected to '", wire,
                "', which is not an output of the model (outputs: ", joined(model_outputs), ")");
  }
  INGOT_CHECK(has_input, what, " ", block.type_name(), ": connect its 'input' to an output of the model (outputs: ",
              joined(model_outputs), ")");
}

// Whole-name match of a glob: '*' any run of characters, '?' any one character.
bool glob_match(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// "mean" or "sum" when the scalar `loss` is a whole reduction of a larger value (a loss block
// built with reduction "mean" or "sum"), else "" (a loss that is a scalar by other means, where
// a mean and a sum over its one element agree).
std::string own_reduction(const Graph& g, ValueId loss) {
  const NodeId producer = g.value(loss).producer;
  if (producer < 0) return "";
  const Node& n = g.node(producer);
  if ((n.op != "mean" && n.op != "sum") || g.value(n.inputs[0]).shape.empty()) return "";
  return n.op;
}

}  // namespace

TrainModel::TrainModel(Model model) : model_(std::move(model)) {}

TrainModel& TrainModel::add_loss(const Model& loss, const Connections& connections, const std::string& reduction,
                                 double coefficient, const std::string& name) {
  INGOT_CHECK(reduction == "mean" || reduction == "sum", "add_loss: unknown reduction '", reduction,
              "' (expected mean or sum: the total cost is a scalar)");
  INGOT_CHECK(std::isfinite(coefficient), "add_loss: the coefficient must be finite, got ", coefficient);
  check_connections("Loss", loss, connections, model_.output_keys());
  const std::string n = name.empty() ? "loss_" + std::to_string(losses_.size()) : name;
  INGOT_CHECK(n != kFinalCost, "add_loss: '", kFinalCost, "' is the total cost; name the loss otherwise");
  for (const Loss& l : losses_) INGOT_CHECK(l.name != n, "add_loss: a loss named '", n, "' exists already");
  losses_.push_back({loss, connections, reduction, coefficient, n});
  return *this;
}

TrainModel& TrainModel::add_regularization(const std::string& kind, double coefficient, const std::string& pattern) {
  INGOT_CHECK(kind == "l1" || kind == "l2", "add_regularization: unknown kind '", kind, "' (expected l1 or l2)");
  INGOT_CHECK(std::isfinite(coefficient) && coefficient >= 0,
              "add_regularization: the coefficient must be a non-negative number, got ", coefficient);
  INGOT_CHECK(!pattern.empty(), "add_regularization: the parameter pattern is empty");
  regularizations_.push_back({kind, coefficient, pattern});
  return *this;
}

TrainModel& TrainModel::add_metric(const Model& metric, const Connections& connections, const std::string& name) {
  INGOT_CHECK(!name.empty(), "add_metric: give the metric a name");
  check_connections("Metric", metric, connections, model_.output_keys());
  for (const Metric& m : metrics_) INGOT_CHECK(m.name != name, "add_metric: a metric named '", name, "' exists already");
  for (const Loss& l : losses_) INGOT_CHECK(l.name != name, "add_metric: '", name, "' names a loss");
  metrics_.push_back({metric, connections, name});
  return *this;
}

Model TrainModel::logical_model() const {
  INGOT_CHECK(!losses_.empty(), "TrainModel has no loss; add one with add_loss");
  Model m = model_;
  const Connection output = m.cout();  // adding a block moves the canonical output to it
  auto attach = [&](const Model& block, const Connections& connections, const std::string& name) {
    Links links;
    for (const auto& [terminal, wire] : connections)
      links.emplace_back(terminal, wire == "output" ? IOKey(output) : IOKey(wire));
    links.emplace_back("output", IOKey(name).expose());
    m |= block(links);
  };
  for (const Loss& l : losses_) attach(l.block, l.connections, l.name);
  for (const Metric& mt : metrics_) attach(mt.block, mt.connections, mt.name);
  m.set_cout(output);
  m.expose(output, "");  // the model's own output stays an output beside the exposed losses
  return m;
}

Graph TrainModel::inferred_graph(const CompileOptions& options) const {
  Graph g = build_inferred_graph(logical_model(), options);
  train::GraphBuilder b(g, "train_model");
  // Data parallel: each rank holds a shard of the global batch, so every loss and metric is made
  // the global batch's by an all-reduce (a mean of the shards' means, a sum of their sums: exact
  // for equal shards). The gradient of the global cost then reaches each rank's parameters through
  // the all-reduces' own gradients; compile_train_step averages the parameters' gradients.
  const int64_t ranks = options.data_parallel ? distributed::size() : 1;
  auto set_output = [&](const std::string& name, ValueId v) {
    for (auto& [n, out] : g.outputs())
      if (n == name) out = v;
  };
  for (const Metric& mt : metrics_) {
    ValueId v = *g.find_output(mt.name);
    if (options.data_parallel && is_floating(g.value(v).dtype)) {
      v = b.all_reduce(v, "mean", ranks);
      set_output(mt.name, v);
    }
    g.value(v).differentiable = false;
  }
  ValueId total = -1;
  DType cost_type = DType::Float32;
  auto add = [&](ValueId term) { total = total < 0 ? term : b.op("add", {total, b.cast(term, g.value(total).dtype)}); };
  for (const Loss& l : losses_) {
    const ValueId out = *g.find_output(l.name);
    INGOT_CHECK(is_floating(g.value(out).dtype), "Loss '", l.name, "' is ", dtype_name(g.value(out).dtype),
                "; a loss must be floating point");
    ValueId term = out;
    if (!g.value(out).shape.empty()) {
      term = l.reduction == "mean" ? b.mean_all(out) : b.sum_all(out);
      set_output(l.name, term);  // the loss as reported: reduced
    } else if (const std::string own = own_reduction(g, out); !own.empty() && own != l.reduction) {
      // Re-reducing a scalar cannot turn a mean into a sum: refuse rather than ignore the request.
      INGOT_FAIL("add_loss '", l.name, "': ", l.block.type_name(), " already reduces its output by '", own,
                 "' but the reduction asked is '", l.reduction, "'; build the loss with reduction \"none\" so that ",
                 "add_loss reduces it, or ask for '", own, "'");
    }
    if (options.data_parallel) {
      term = b.all_reduce(term, l.reduction, ranks);
      set_output(l.name, term);
    }
    if (l.coefficient != 1.0) term = b.op("mul", {term, b.scalar(l.coefficient, g.value(term).dtype)});
    if (total < 0) cost_type = g.value(term).dtype;
    add(term);
  }
  for (const Regularization& r : regularizations_) {
    std::vector<ValueId> matched;
    std::vector<std::string> params;
    for (ValueId id : g.leaves_of(ValueKind::Parameter)) {
      params.push_back(g.value(id).name);
      if (glob_match(r.pattern, g.value(id).name) && is_floating(g.value(id).dtype)) matched.push_back(id);
    }
    INGOT_CHECK(!matched.empty(), "add_regularization: '", r.pattern, "' matches no parameter (parameters: ",
                joined(params), ")");
    for (ValueId p : matched) {
      const DType t = g.value(p).dtype;
      ValueId term = r.kind == "l1" ? b.sum_all(b.op("abs", {p}))
                                    : b.op("mul", {b.sum_all(b.op("mul", {p, p})), b.scalar(0.5, t)});
      term = b.op("mul", {term, b.scalar(r.coefficient, t)});
      add(b.cast(term, cost_type));
    }
  }
  INGOT_CHECK(!g.find_output(kFinalCost), "The model already has an output named '", kFinalCost, "'");
  g.set_output(kFinalCost, total);
  verify(g);
  return g;
}

PhysicalModel compile(const TrainModel& model, const Backend& backend, const CompileOptions& options) {
  return compile_inferred(model.inferred_graph(options), backend, options);
}

Evaluation evaluate_loss(const PhysicalModel& model, const TensorMap& params, const TensorMap& inputs) {
  const auto out = model.graph().find_output(kFinalCost);
  INGOT_CHECK(out, "evaluate_loss: the model has no '", kFinalCost, "' output; compile a TrainModel");
  const DType t = model.graph().value(*out).dtype;
  return model.evaluate(params, inputs, {{kFinalCost, Tensor::full(DType::Float64, {}, 1.0).astype(t)}});
}

}  // namespace ingot
