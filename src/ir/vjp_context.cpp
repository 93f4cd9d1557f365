// VjpContext helpers shared by every op's gradient rule. Each picks a plain static op (sum,
// reshape, a constant) when the inferred shapes decide the answer, and a *_like op that reads
// the sizes at run time otherwise, so symbolic shapes ("N") never need a size at compile time.
#include <algorithm>
#include <numeric>

#include "ingot/error.h"
#include "ir/op_registry.h"

namespace ingot {

void no_gradient(VjpContext&) {}

ValueId VjpContext::sum_to_like(ValueId grad, ValueId like) {
  const SymShape& gs = shape(grad);
  const SymShape& ls = shape(like);
  if (gs == ls) return grad;
  const int lead = static_cast<int>(gs.size()) - static_cast<int>(ls.size());
  if (lead < 0) return op("sum_to_like", {grad, like});
  std::vector<int64_t> leading, ones;
  for (int i = 0; i < lead; ++i) leading.push_back(i);
  for (size_t i = 0; i < ls.size(); ++i) {
    const SymDim& g = gs[static_cast<size_t>(lead) + i];
    if (g == ls[i]) continue;
    if (ls[i].known() && ls[i].value == 1) {
      ones.push_back(static_cast<int64_t>(i));
      continue;
    }
    return op("sum_to_like", {grad, like});  // the shapes alone do not say which axes broadcast
  }
  ValueId x = grad;
  if (!leading.empty()) x = op("sum", {x}, {{"axes", leading}, {"keepdims", int64_t{0}}});
  if (!ones.empty()) x = op("sum", {x}, {{"axes", ones}, {"keepdims", int64_t{1}}});
  return x;
}

ValueId VjpContext::broadcast_to_like(ValueId x, ValueId like) {
  if (shape(x) == shape(like)) return x;
  return op("broadcast_to_like", {x, like});
}

ValueId VjpContext::reshape_like(ValueId x, ValueId like) {
  if (shape(x) == shape(like)) return x;
  if (is_static(shape(like))) return op("reshape", {x}, {{"shape", to_shape(shape(like))}});
  return op("reshape_like", {x, like});
}

ValueId VjpContext::expand_dims(ValueId x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return x;
  if (is_static(shape(x))) {
    Shape s = to_shape(shape(x));
    std::vector<int64_t> sorted = axes;
    const int64_t r = static_cast<int64_t>(s.size() + axes.size());
    for (int64_t& a : sorted) a = a < 0 ? a + r : a;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t a : sorted) s.insert(s.begin() + a, 1);
    return op("reshape", {x}, {{"shape", s}});
  }
  return op("expand_dims", {x}, {{"axes", axes}});
}

ValueId VjpContext::count(ValueId x, const std::vector<int64_t>& axes, DType dtype) {
  const SymShape& s = shape(x);
  const int r = static_cast<int>(s.size());
  std::vector<int64_t> all = axes;
  if (all.empty()) {
    all.resize(static_cast<size_t>(r));
    std::iota(all.begin(), all.end(), 0);
  }
  double n = 1;
  for (int64_t a : all) {
    const SymDim& d = s.at(static_cast<size_t>(a < 0 ? a + r : a));
    if (!d.known())
      return op("numel", {x}, {{"axes", all}, {"dtype", std::string(dtype_name(dtype))}});
    n *= static_cast<double>(d.value);
  }
  return scalar(n, dtype);
}

ValueId VjpContext::cast_like(ValueId x, ValueId like) {
  if (dtype(x) == dtype(like)) return x;
  return op("cast", {x}, {{"dtype", std::string(dtype_name(dtype(like)))}});
}

}  // namespace ingot
