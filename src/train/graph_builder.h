// Grows an inferred graph node by node (TrainModel's cost terms, the optimizer update): each node
// added gets its shapes and dtypes inferred at once, as autodiff's backward nodes do.
#pragma once

#include <string>
#include <vector>

#include "compiler/shape_inference.h"
#include "ingot/graph.h"

namespace ingot::train {

class GraphBuilder {
 public:
  GraphBuilder(Graph& g, std::string scope) : g_(g), scope_(std::move(scope)) {}

  ValueId op(const std::string& op, std::vector<ValueId> inputs, Attrs attrs = {}) {
    const ValueId out = g_.add_node(op, std::move(inputs), std::move(attrs), 1, scope_)[0];
    infer_node(g_, g_.value(out).producer);
    return out;
  }
  ValueId scalar(double value, DType dtype) {
    return g_.add_constant("", Tensor::full(DType::Float64, {}, value).astype(dtype));
  }
  // A run-time input leaf of a known shape and dtype.
  ValueId input(const std::string& name, DType dtype, SymShape shape) {
    const ValueId v = g_.add_input(name);
    g_.value(v).dtype = dtype;
    g_.value(v).shape = std::move(shape);
    g_.value(v).shape_known = true;
    return v;
  }
  ValueId cast(ValueId v, DType dtype) {
    if (g_.value(v).dtype == dtype) return v;
    return op("cast", {v}, {{"dtype", std::string(dtype_name(dtype))}});
  }
  ValueId sum_all(ValueId v) { return op("sum", {v}, {{"keepdims", int64_t{0}}}); }
  ValueId mean_all(ValueId v) { return op("mean", {v}, {{"keepdims", int64_t{0}}}); }
  // v combined over a process group of `ranks` ("sum" | "mean"); a gradient's all-reduce is
  // marked for the gradient_buckets pass.
  ValueId all_reduce(ValueId v, const std::string& reduction, int64_t ranks, bool gradient_bucket = false) {
    Attrs a{{"op", reduction}, {"group_size", ranks}};
    if (gradient_bucket) a.set("gradient_bucket", int64_t{1});
    return op("all_reduce", {v}, std::move(a));
  }
  Graph& graph() { return g_; }

 private:
  Graph& g_;
  std::string scope_;
};

}  // namespace ingot::train
