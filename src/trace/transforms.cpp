// vjp / grad / value_and_grad: trace, append_backward, replay as lazy array ops.
#include "ingot/transforms.h"

#include <unordered_map>

#include "compiler/autodiff.h"
#include "ingot/error.h"
#include "trace/array_impl.h"
#include "trace/trace_state.h"

namespace ingot {

namespace {

using detail::ArrayImpl;
using detail::placeholder_like;
using detail::TraceGuard;

// Re-records `g` as array ops: input leaf k is `inputs[k]` (leaves() order), constants are data.
std::vector<Array> replay(const Graph& g, const std::vector<Array>& inputs, const std::vector<ValueId>& wanted) {
  std::vector<Array> values(g.values().size());
  size_t next_input = 0;
  for (ValueId id : g.leaves()) {
    const Value& v = g.value(id);
    values[static_cast<size_t>(id)] = v.kind == ValueKind::Constant ? Array(v.constant) : inputs.at(next_input++);
  }
  for (const Node& n : g.nodes()) {
    std::vector<Array> ins;
    for (ValueId v : n.inputs) ins.push_back(values[static_cast<size_t>(v)]);
    std::vector<Array> outs;
    if (n.subgraphs.empty()) {
      outs = op_n(n.op, ins, n.attrs);
    } else {  // control flow (the forward's, or its gradient's): the subgraphs go with it
      std::vector<std::shared_ptr<ArrayImpl>> impls;
      for (const Array& a : ins) impls.push_back(a.impl());
      outs = detail::record_op(n.op, std::move(impls), n.attrs, n.subgraphs, static_cast<int>(n.outputs.size()));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) values[static_cast<size_t>(n.outputs[k])] = outs[k];
  }
  std::vector<Array> out;
  for (ValueId v : wanted) out.push_back(values[static_cast<size_t>(v)]);
  return out;
}

// The cotangent for output i (shape and dtype of that output), or an undefined array for none.
using CotangentFor = std::function<Array(size_t i, const Array& output)>;

std::pair<std::vector<Array>, std::vector<Array>> vjp_with(const ArrayFunction& fn, const std::vector<Array>& primals,
                                                           const CotangentFor& cotangent_for) {
  for (size_t i = 0; i < primals.size(); ++i)
    INGOT_CHECK(primals[i].defined(), "vjp: primal ", i, " is undefined");
  std::vector<Array> holders;
  std::vector<ArrayImpl*> leading;
  for (const Array& p : primals) {
    holders.push_back(placeholder_like(p));
    leading.push_back(holders.back().impl().get());
  }
  std::vector<Array> outs;
  {
    TraceGuard tracing;
    outs = fn(holders);
  }
  std::vector<ArrayImpl*> targets;
  std::vector<Array> cotangents;
  for (size_t i = 0; i < outs.size(); ++i) {
    INGOT_CHECK(outs[i].defined(), "vjp: output ", i, " of the function is undefined");
    targets.push_back(outs[i].impl().get());
    cotangents.push_back(cotangent_for(i, outs[i]));
  }
  detail::LazyGraph lg = detail::build_lazy_graph(targets, detail::DataLeaves::Constants, false, leading);
  Graph& g = lg.graph;
  detail::annotate(g);
  std::vector<std::pair<ValueId, ValueId>> seeds;
  std::vector<Array> replay_inputs = primals;
  // Inputs past the primals are placeholders of an enclosing trace (compile of a function that
  // takes a gradient w.r.t. some of its arguments): they replay as themselves.
  if (lg.inputs.size() > primals.size()) {
    std::unordered_map<const ArrayImpl*, std::shared_ptr<ArrayImpl>> handles;
    for (const Array& o : outs) handles.emplace(o.impl().get(), o.impl());
    for (const auto& record : lg.records)
      for (const auto& in : record->inputs) handles.emplace(in.get(), in);
    for (size_t k = primals.size(); k < lg.inputs.size(); ++k) replay_inputs.emplace_back(handles.at(lg.inputs[k]));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const ValueId out = g.outputs()[i].second;
    // Integer outputs carry no gradient; an output without a cotangent is not differentiated.
    if (!is_floating(g.value(out).dtype) || !cotangents[i].defined()) continue;
    const ValueId ct = g.add_input("ct" + std::to_string(i));
    g.value(ct).shape = g.value(out).shape;
    g.value(ct).shape_known = true;
    g.value(ct).dtype = g.value(out).dtype;
    seeds.emplace_back(out, ct);
    replay_inputs.push_back(cotangents[i].dtype() == g.value(out).dtype ? cotangents[i]
                                                                        : astype(cotangents[i], g.value(out).dtype));
  }
  for (size_t i = 0; i < primals.size(); ++i)
    INGOT_CHECK(is_floating(primals[i].dtype()), "vjp: argument ", i, " is ", dtype_name(primals[i].dtype()),
                "; gradients are taken w.r.t. floating-point arguments only");
  const std::vector<ValueId> wrt(lg.input_values.begin(), lg.input_values.begin() + static_cast<long>(primals.size()));
  const std::vector<ValueId> grads = append_backward(g, seeds, wrt);
  std::vector<ValueId> wanted;
  for (const auto& [name, v] : g.outputs()) wanted.push_back(v);
  wanted.insert(wanted.end(), grads.begin(), grads.end());
  std::vector<Array> all = replay(g, replay_inputs, wanted);
  std::vector<Array> values(all.begin(), all.begin() + static_cast<long>(outs.size()));
  std::vector<Array> grad_arrays(all.begin() + static_cast<long>(outs.size()), all.end());
  return {values, grad_arrays};
}

}  // namespace

std::pair<std::vector<Array>, std::vector<Array>> vjp(const ArrayFunction& fn, const std::vector<Array>& primals,
                                                       const std::vector<Array>& cotangents) {
  return vjp_with(fn, primals, [&](size_t i, const Array& out) {
    INGOT_CHECK(i < cotangents.size(), "vjp: the function returns more arrays than the ", cotangents.size(),
                " cotangents given");
    INGOT_CHECK(cotangents[i].defined() && cotangents[i].shape() == out.shape(), "vjp: cotangent ", i,
                " must have the output's shape ", to_string(out.shape()),
                cotangents[i].defined() ? ", got " + to_string(cotangents[i].shape()) : std::string(", got none"));
    return cotangents[i];
  });
}

std::function<std::pair<std::vector<Array>, std::vector<Array>>(const std::vector<Array>&)> value_and_grad(
    ArrayFunction fn, std::vector<int> argnums) {
  INGOT_CHECK(!argnums.empty(), "value_and_grad: argnums is empty");
  return [fn = std::move(fn), argnums = std::move(argnums)](const std::vector<Array>& args) {
    for (int a : argnums)
      INGOT_CHECK(a >= 0 && static_cast<size_t>(a) < args.size(), "value_and_grad: argnum ", a,
                  " is out of range for ", args.size(), " arguments");
    std::vector<Array> wrt;
    for (int a : argnums) wrt.push_back(args[static_cast<size_t>(a)]);
    // The function of the differentiated arguments alone; the others are fixed.
    ArrayFunction partial = [&](const std::vector<Array>& xs) {
      std::vector<Array> full = args;
      for (size_t i = 0; i < argnums.size(); ++i) full[static_cast<size_t>(argnums[i])] = xs[i];
      std::vector<Array> out = fn(full);
      INGOT_CHECK(!out.empty() && out[0].size() == 1, "value_and_grad: the function's first output must hold one "
                  "element (a loss), got shape ", out.empty() ? std::string("(nothing)") : to_string(out[0].shape()));
      return out;
    };
    // Only the first output (the loss) is differentiated; later ones are auxiliary values.
    return vjp_with(partial, wrt, [](size_t i, const Array& out) {
      return i == 0 ? full(out.shape(), 1.0, out.dtype()) : Array();
    });
  };
}

std::function<std::vector<Array>(const std::vector<Array>&)> grad(ArrayFunction fn, std::vector<int> argnums) {
  auto vg = value_and_grad(std::move(fn), std::move(argnums));
  return [vg](const std::vector<Array>& args) { return vg(args).second; };
}

std::function<std::pair<Array, Array>(const Array&)> value_and_grad(UnaryArrayFunction fn) {
  auto vg = value_and_grad(ArrayFunction([fn = std::move(fn)](const std::vector<Array>& xs) {
                             return std::vector<Array>{fn(xs[0])};
                           }),
                           {0});
  return [vg](const Array& x) {
    auto [values, grads] = vg({x});
    return std::pair<Array, Array>{values[0], grads[0]};
  };
}

UnaryArrayFunction grad(UnaryArrayFunction fn) {
  auto vg = value_and_grad(std::move(fn));
  return [vg](const Array& x) { return vg(x).second; };
}

}  // namespace ingot
