// eval(): the pending graph of the requested arrays runs through the hot path (eager on the
// reference backend, or compiled), and every array someone holds gets its data and lets go of
// its op record. Compile regions defer explicit eval() calls to the region's end.
#include <exception>
#include <memory>
#include <unordered_set>

#include "ingot/error.h"
#include "trace/array_impl.h"
#include "trace/hot_path.h"
#include "trace/trace_state.h"

namespace ingot {

struct detail::RegionState {
  std::string name;
  std::vector<Array> deferred;
  RegionState* outer = nullptr;
};

namespace detail {

namespace {
thread_local RegionState* region_top = nullptr;
thread_local int trace_depth = 0;

[[noreturn]] void placeholder_read(const LazyGraph& lg) {
  const ArrayImpl* p = nullptr;
  for (const ArrayImpl* a : lg.inputs)
    if (a->placeholder) p = a;
  if (tracing_depth() == 0) fail_escaped_placeholder("read");  // no trace is running: a stale one
  INGOT_FAIL("Cannot read the values of an array while a function is being traced (ingot::compile, grad, vjp): it depends "
             "on the function's inputs, which are placeholders during tracing (shape ",
             to_string(p->shape), ", ", dtype_name(p->dtype),
             ", no data). Return the array from the function and read it after the call (no item(), tensor() or "
             "eval() inside a compiled function), or debug with disable_compile() or INGOT_DISABLE_COMPILE=1.");
}
}  // namespace

int& tracing_depth() { return trace_depth; }

void fail_escaped_placeholder(const std::string& use) {
  INGOT_FAIL("An array computed inside a traced function (ingot::compile, grad, vjp) was ", use,
             " after that trace ended: it depends on the trace's placeholders, which never hold data. It was saved "
             "from inside the function (in a variable the function captures). Return it from the function instead, "
             "or list the variable in compile's `outputs` so it receives the computed value after each call.");
}

Array placeholder_like(const Array& like) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->placeholder = true;
  impl->dtype = like.dtype();
  impl->shape = like.shape();
  return Array(std::move(impl));
}
RegionState* current_region() { return region_top; }

void eval_now(const std::vector<Array>& arrays, const std::string& region) {
  std::vector<ArrayImpl*> targets;
  std::unordered_set<ArrayImpl*> seen;
  for (const Array& a : arrays) {
    INGOT_CHECK(a.defined(), "ingot::eval: an array is undefined (default-constructed)");
    ArrayImpl* impl = a.impl().get();
    if (impl->placeholder) {
      LazyGraph lg;
      lg.inputs.push_back(impl);
      placeholder_read(lg);
    }
    if (!impl->data.defined() && seen.insert(impl).second) targets.push_back(impl);
  }
  if (targets.empty()) return;
  LazyGraph lg = build_lazy_graph(targets, DataLeaves::Inputs, /*keep_external=*/true);
  if (lg.has_placeholder) placeholder_read(lg);
  std::vector<Tensor> inputs;
  for (const ArrayImpl* a : lg.inputs) inputs.push_back(a->data);
  std::vector<Tensor> outputs = hot_path_run(lg.graph, inputs, region);
  for (size_t i = 0; i < lg.outputs.size(); ++i) {
    ArrayImpl* a = lg.outputs[i];
    a->data = outputs.at(i);
    a->record.reset();
  }
}

}  // namespace detail

void eval(const std::vector<Array>& arrays) {
  detail::RegionState* r = detail::current_region();
  if (r && detail::tracing_depth() == 0) {
    r->deferred.insert(r->deferred.end(), arrays.begin(), arrays.end());
    return;
  }
  detail::eval_now(arrays);
}

CompileRegion::CompileRegion(std::string name) : name_(std::move(name)) {
  state_ = new detail::RegionState{name_, {}, detail::region_top};
  detail::region_top = state_;
}

CompileRegion::~CompileRegion() noexcept(false) {
  if (!state_) return;
  if (std::uncaught_exceptions() > 0) {  // unwinding: drop the deferred work, never throw
    if (detail::region_top == state_) end(false);
    return;
  }
  end(true);
}

void CompileRegion::end(bool run_deferred) {
  INGOT_CHECK(state_ != nullptr, "CompileRegion '", name_, "' has ended already");
  INGOT_CHECK(detail::region_top == state_, "CompileRegion '", name_, "' cannot end before the region '",
              detail::region_top->name, "' opened inside it");
  std::unique_ptr<detail::RegionState> r(state_);
  state_ = nullptr;
  detail::region_top = r->outer;
  if (!run_deferred) return;
  if (r->outer) {  // a nested region is part of the outer unit
    r->outer->deferred.insert(r->outer->deferred.end(), r->deferred.begin(), r->deferred.end());
    return;
  }
  detail::eval_now(r->deferred, name_);
}

}  // namespace ingot
