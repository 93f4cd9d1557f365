// Function transforms over lazy arrays: vjp, grad and value_and_grad (MLX-style).
//
//   auto df = grad([](const Array& x) { return sum(tanh(x) * x); });
//   Array g = df(x);                                        // d sum(tanh(x) x) / dx
//   auto loss_and_grads = value_and_grad(loss_fn, {1, 2});  // w.r.t. arguments 1 and 2
//   auto [loss, grads] = loss_and_grads({x, w, b});
//
// A transform traces the function with placeholder arrays (so compiled functions called
// inside inline, and reading values inside is an error), appends the backward graph with the
// compiler's autodiff (src/compiler/autodiff.h, one gradient rule beside each op), and replays
// forward and backward as lazy array ops on the real arguments. The result is lazy like any
// array: it composes with compile both ways (grad of a compiled function, compile of a grad)
// and with the hot path.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "ingot/array.h"

namespace ingot {

using ArrayFunction = std::function<std::vector<Array>(const std::vector<Array>&)>;
using UnaryArrayFunction = std::function<Array(const Array&)>;

// The outputs of fn(primals) and the vector-Jacobian products: one array per primal, the
// cotangents (one per output, shaped like it) pulled back through fn.
std::pair<std::vector<Array>, std::vector<Array>> vjp(const ArrayFunction& fn, const std::vector<Array>& primals,
                                                       const std::vector<Array>& cotangents);

// fn's first output must hold one element (a loss); the gradients are w.r.t. the arguments
// listed in argnums (default: the first). Integer arguments get no gradient (an error).
std::function<std::pair<std::vector<Array>, std::vector<Array>>(const std::vector<Array>&)> value_and_grad(
    ArrayFunction fn, std::vector<int> argnums = {0});
std::function<std::vector<Array>(const std::vector<Array>&)> grad(ArrayFunction fn, std::vector<int> argnums = {0});

// The one-argument forms.
std::function<std::pair<Array, Array>(const Array&)> value_and_grad(UnaryArrayFunction fn);
UnaryArrayFunction grad(UnaryArrayFunction fn);

}  // namespace ingot
