// cond, while_loop and scan on lazy arrays (include/ingot/control_flow.h): each function is called once
// on placeholders and what it recorded becomes a subgraph of an if, while or scan node.
//
// A subgraph reads nothing from around it, so every array a function uses without receiving it
// (a captured weight, a value of the enclosing compile(fn) trace, a literal) is lifted: it
// becomes an extra operand of the node, passed unchanged to each branch or iteration (an
// invariant), and the subgraph gets an input for it. A pending array whose value does not depend
// on the function's parameters (transpose(w) computed outside, or inside the function from
// captured arrays only) is lifted the same way, so it is computed once, not once per iteration.
#include <unordered_map>
#include <unordered_set>

#include "ingot/control_flow.h"
#include "ingot/error.h"
#include "trace/array_impl.h"
#include "trace/trace_state.h"

namespace ingot {

using detail::ArrayImpl;

namespace {

using Impl = std::shared_ptr<ArrayImpl>;

Impl placeholder(DType dtype, Shape shape) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->placeholder = true;
  impl->dtype = dtype;
  impl->shape = std::move(shape);
  return impl;
}

std::vector<Array> arrays_of(const std::vector<Impl>& impls) {
  std::vector<Array> out;
  for (const Impl& i : impls) out.emplace_back(i);
  return out;
}

std::vector<ArrayImpl*> raw(const std::vector<Impl>& impls) {
  std::vector<ArrayImpl*> out;
  for (const Impl& i : impls) out.push_back(i.get());
  return out;
}

void check_defined(const std::vector<Array>& arrays, const std::string& what) {
  for (size_t i = 0; i < arrays.size(); ++i)
    INGOT_CHECK(arrays[i].defined(), what, " ", i, " is undefined (default-constructed)");
}

// One traced function: its parameters (placeholders) and the arrays it returned.
struct Traced {
  std::vector<Impl> params;
  std::vector<Impl> results;
};

bool is_pending(const ArrayImpl* a) { return !a->data.defined() && !a->placeholder; }

// The pending arrays `t` reads whose values do not depend on its parameters (a transposed weight,
// a projection of the whole input): computed once outside and passed in, not once per iteration.
std::vector<Impl> invariant_frontier(const Traced& t) {
  std::unordered_map<const ArrayImpl*, bool> depends;  // on a parameter
  for (const Impl& p : t.params) depends[p.get()] = true;
  std::vector<Impl> frontier;
  std::unordered_set<const ArrayImpl*> in_frontier;
  // Post-order over the pending part, iteratively; a pending array that does not depend on a
  // parameter is a leaf of the subgraph, so its own inputs are not visited.
  std::vector<std::pair<Impl, bool>> stack;
  for (const Impl& r : t.results) stack.emplace_back(r, false);
  std::vector<std::pair<Impl, Impl>> reads;  // (reader, read) edges from dependent arrays
  while (!stack.empty()) {
    auto [a, expanded] = stack.back();
    stack.pop_back();
    if (depends.count(a.get())) continue;
    if (!is_pending(a.get())) {
      depends[a.get()] = false;
      continue;
    }
    if (!expanded) {
      stack.emplace_back(a, true);
      for (const Impl& in : a->record->inputs)
        if (!depends.count(in.get())) stack.emplace_back(in, false);
      continue;
    }
    bool d = false;
    for (const Impl& in : a->record->inputs) d = d || depends.at(in.get());
    depends[a.get()] = d;
  }
  // The frontier: pending, independent arrays read by a dependent one (or returned as results).
  auto consider = [&](const Impl& a) {
    if (is_pending(a.get()) && !depends.at(a.get()) && in_frontier.insert(a.get()).second) frontier.push_back(a);
  };
  for (const Impl& r : t.results) consider(r);
  for (const auto& [a, d] : depends) {
    if (!d || !is_pending(a)) continue;
    for (const Impl& in : a->record->inputs) consider(in);
  }
  return frontier;
}

// The subgraph's leading inputs: `t`'s parameters, then `captures`.
std::vector<ArrayImpl*> leading_inputs(const Traced& t, const std::vector<Impl>& captures) {
  std::vector<ArrayImpl*> leading = raw(t.params);
  for (const Impl& c : captures) leading.push_back(c.get());
  return leading;
}

// The arrays `t` reads without receiving them (independent pending arrays first, then data and
// outer placeholders, in the order they are met), added to `captures`.
void collect_captures(const Traced& t, std::vector<Impl>& captures) {
  std::unordered_set<ArrayImpl*> known;
  for (const Impl& c : captures) known.insert(c.get());
  for (const Impl& f : invariant_frontier(t))
    if (known.insert(f.get()).second) captures.push_back(f);
  const std::vector<ArrayImpl*> leading = leading_inputs(t, captures);
  detail::LazyGraph lg = detail::build_lazy_graph(raw(t.results), detail::DataLeaves::Inputs, false, leading);
  std::unordered_map<ArrayImpl*, Impl> owner;  // shared handles for the leaves the builder met
  for (const Impl& r : t.results) owner[r.get()] = r;
  for (const auto& rec : lg.records)
    for (const Impl& in : rec->inputs) owner[in.get()] = in;
  for (size_t i = leading.size(); i < lg.inputs.size(); ++i)
    if (known.insert(lg.inputs[i]).second) captures.push_back(owner.at(lg.inputs[i]));
}

// `t` as a subgraph whose inputs are its parameters, then `captures` (read or not).
Graph subgraph_of(const Traced& t, const std::vector<Impl>& captures) {
  const std::vector<ArrayImpl*> leading = leading_inputs(t, captures);
  detail::LazyGraph lg = detail::build_lazy_graph(raw(t.results), detail::DataLeaves::Inputs, false, leading);
  INGOT_CHECK(lg.inputs.size() == leading.size(), "internal: a captured array was not lifted");
  return std::move(lg.graph);
}

// Operands as the node reads them: a literal stays the dtype it has (no re-resolution).
std::vector<Impl> impls_of(const std::vector<Array>& arrays) {
  std::vector<Impl> out;
  for (const Array& a : arrays) out.push_back(a.impl());
  return out;
}

std::vector<Impl> to_impls(const std::vector<Array>& arrays, const std::string& what) {
  check_defined(arrays, what);
  return impls_of(arrays);
}

// Calls `fn` on the placeholders `params` (tracing: reading their data is an error).
template <class F>
Traced trace(const std::vector<Impl>& params, F&& fn, const std::string& what) {
  Traced t;
  t.params = params;
  std::vector<Array> results;
  {
    detail::TraceGuard guard;
    results = fn(arrays_of(params));
  }
  t.results = to_impls(results, what + ": result");
  return t;
}

std::vector<Impl> placeholders_like(const std::vector<Array>& like, size_t drop_leading = 0) {
  std::vector<Impl> out;
  for (const Array& a : like) {
    Shape s = a.shape();
    s.erase(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(drop_leading));
    out.push_back(placeholder(a.dtype(), std::move(s)));
  }
  return out;
}

}  // namespace

std::vector<Array> cond(const Array& pred, const ArrayFunction& true_fn, const ArrayFunction& false_fn,
                        const std::vector<Array>& operands) {
  INGOT_CHECK(pred.defined(), "ingot::cond: the predicate is undefined (default-constructed)");
  INGOT_CHECK(pred.size() == 1, "ingot::cond: the predicate must hold one element, it has shape ",
              to_string(pred.shape()));
  check_defined(operands, "ingot::cond: operand");
  const std::vector<Impl> params = placeholders_like(operands);
  const Traced t = trace(params, true_fn, "ingot::cond: true_fn");
  const Traced f = trace(placeholders_like(operands), false_fn, "ingot::cond: false_fn");
  INGOT_CHECK(t.results.size() == f.results.size(), "ingot::cond: true_fn returns ", t.results.size(),
              " arrays but false_fn returns ", f.results.size());
  INGOT_CHECK(!t.results.empty(), "ingot::cond: the branches return no arrays");
  std::vector<Impl> captures;
  collect_captures(t, captures);
  collect_captures(f, captures);
  std::vector<Impl> inputs = {pred.impl()};
  for (const Impl& o : impls_of(operands)) inputs.push_back(o);
  inputs.insert(inputs.end(), captures.begin(), captures.end());
  return detail::record_op("if", std::move(inputs), {}, {subgraph_of(t, captures), subgraph_of(f, captures)},
                           static_cast<int>(t.results.size()));
}

std::vector<Array> while_loop(const std::function<Array(const std::vector<Array>&)>& cond_fn,
                              const ArrayFunction& body_fn, const std::vector<Array>& init,
                              std::optional<int64_t> max_iterations) {
  check_defined(init, "ingot::while_loop: initial value");
  INGOT_CHECK(!init.empty(), "ingot::while_loop: the loop carries no arrays");
  INGOT_CHECK(!max_iterations || *max_iterations >= 0, "ingot::while_loop: max_iterations must be at least 0, got ",
              max_iterations.value_or(0));
  const Traced c = trace(placeholders_like(init), [&](const std::vector<Array>& xs) {
    return std::vector<Array>{cond_fn(xs)};
  }, "ingot::while_loop: cond_fn");
  const Traced b = trace(placeholders_like(init), body_fn, "ingot::while_loop: body_fn");
  INGOT_CHECK(b.results.size() == init.size(), "ingot::while_loop: body_fn returns ", b.results.size(),
              " arrays for ", init.size(), " carried values");
  std::vector<Impl> captures;
  collect_captures(c, captures);
  collect_captures(b, captures);
  std::vector<Impl> inputs = impls_of(init);
  inputs.insert(inputs.end(), captures.begin(), captures.end());
  Attrs attrs = {{"num_invariant", static_cast<int64_t>(captures.size())}};
  if (max_iterations) attrs.set("max_iterations", *max_iterations);
  return detail::record_op("while", std::move(inputs), std::move(attrs),
                           {subgraph_of(c, captures), subgraph_of(b, captures)}, static_cast<int>(init.size()));
}

std::pair<std::vector<Array>, std::vector<Array>> scan(const ScanFunction& fn, const std::vector<Array>& init,
                                                       const std::vector<Array>& xs, bool reverse) {
  check_defined(init, "ingot::scan: initial carry");
  check_defined(xs, "ingot::scan: scanned array");
  INGOT_CHECK(!xs.empty(), "ingot::scan: nothing to scan over (give at least one array in xs)");
  for (size_t j = 0; j < xs.size(); ++j)
    INGOT_CHECK(xs[j].ndim() > 0 && xs[j].dim(0) == xs[0].dim(0), "ingot::scan: scanned array ", j, " has shape ",
                to_string(xs[j].shape()), "; every scanned array needs the leading length ",
                xs[0].ndim() > 0 ? std::to_string(xs[0].dim(0)) : std::string("(a scalar has none)"));
  std::vector<Impl> params = placeholders_like(init);
  for (const Impl& p : placeholders_like(xs, 1)) params.push_back(p);
  size_t num_ys = 0;
  const Traced t = trace(params, [&](const std::vector<Array>& all) {
    const std::vector<Array> carry(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(init.size()));
    const std::vector<Array> step(all.begin() + static_cast<std::ptrdiff_t>(init.size()), all.end());
    auto [next, ys] = fn(carry, step);
    INGOT_CHECK(next.size() == init.size(), "ingot::scan: fn returns ", next.size(), " carried arrays for ",
                init.size());
    num_ys = ys.size();
    next.insert(next.end(), ys.begin(), ys.end());
    return next;
  }, "ingot::scan: fn");
  std::vector<Impl> captures;
  collect_captures(t, captures);
  std::vector<Impl> inputs = impls_of(init);
  for (const Impl& x : impls_of(xs)) inputs.push_back(x);
  inputs.insert(inputs.end(), captures.begin(), captures.end());
  const std::vector<Array> out = detail::record_op(
      "scan", std::move(inputs),
      {{"num_carry", static_cast<int64_t>(init.size())}, {"num_xs", static_cast<int64_t>(xs.size())},
       {"reverse", int64_t{reverse}}},
      {subgraph_of(t, captures)}, static_cast<int>(init.size() + num_ys));
  return {std::vector<Array>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(init.size())),
          std::vector<Array>(out.begin() + static_cast<std::ptrdiff_t>(init.size()), out.end())};
}

}  // namespace ingot
