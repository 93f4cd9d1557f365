// Control flow on lazy arrays, with JAX's signatures: each function is traced once (called on
// placeholder arrays) into a subgraph of an `if`, `while` or `scan` node of the IR
// (src/ops/control_flow.cpp), so the choice or the loop happens when the graph runs, on every
// backend, inside compile(fn) and under grad.
//
//   auto r = cond(x.sum() > 0, [](auto a) { return std::vector<Array>{a[0] * 2}; },
//                 [](auto a) { return std::vector<Array>{-a[0]}; }, {x});
//   auto [carry, ys] = scan([&](auto c, auto x) {      // an RNN: h = tanh(h w + x_t), y_t = h
//     Array h = tanh(matmul(c[0], w) + x[0]);
//     return std::pair{std::vector<Array>{h}, std::vector<Array>{h}};
//   }, {h0}, {xs});
//
// Arrays a function reads without receiving them (weights, literals, values of an enclosing
// trace) are passed into the subgraph as extra operands. Gradients: through cond (the taken
// branch's), scan (a reverse scan) and while_loop when it has max_iterations (the loop's
// iterations saved up to that bound, as a scan of max_iterations steps); without max_iterations a
// gradient through while_loop is an error that says to set it.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "ingot/array.h"
#include "ingot/transforms.h"

namespace ingot {

// true_fn(operands) where pred (one element) is nonzero, else false_fn(operands). Both return
// the same number of arrays, each with one shape and dtype in both branches.
std::vector<Array> cond(const Array& pred, const ArrayFunction& true_fn, const ArrayFunction& false_fn,
                        const std::vector<Array>& operands);

// The carried values after `body_fn` ran while `cond_fn` (one bool element) held, at most
// max_iterations times when given. body_fn returns each carried value with its shape and dtype.
// grad through the loop needs max_iterations: the backward pass saves that many iterations.
std::vector<Array> while_loop(const std::function<Array(const std::vector<Array>&)>& cond_fn,
                              const ArrayFunction& body_fn, const std::vector<Array>& init,
                              std::optional<int64_t> max_iterations = std::nullopt);

// fn(carry, x_t) -> (next carry, y_t) over the leading axis of every xs (reverse: last first);
// returns the last carry and each y stacked along a new leading axis.
using ScanFunction = std::function<std::pair<std::vector<Array>, std::vector<Array>>(const std::vector<Array>& carry,
                                                                                    const std::vector<Array>& x)>;
std::pair<std::vector<Array>, std::vector<Array>> scan(const ScanFunction& fn, const std::vector<Array>& init,
                                                       const std::vector<Array>& xs, bool reverse = false);

}  // namespace ingot
