// Central finite differences of a function of lazy arrays (include/ingot/transforms.h), the
// oracle for grad over array functions: f returns a one-element array, args are float64.
#pragma once

#include <vector>

#include "ingot/transforms.h"

namespace ingot::testing {

// d f / d args[which], element by element: (f(x + eps e_i) - f(x - eps e_i)) / 2 eps.
inline Tensor finite_difference(const ArrayFunction& f, const std::vector<Tensor>& args, size_t which,
                                double eps = 1e-6) {
  const Tensor x = args[which].clone();
  Tensor g(DType::Float64, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto at = [&](double delta) {
      Tensor xi = x.clone();
      xi.data<double>()[i] += delta;
      std::vector<Array> as;
      for (size_t k = 0; k < args.size(); ++k) as.emplace_back(k == which ? xi : args[k]);
      return f(as)[0].item<double>();
    };
    g.data<double>()[i] = (at(eps) - at(-eps)) / (2 * eps);
  }
  return g;
}

}  // namespace ingot::testing
