// The collectives over lazy arrays (include/ingot/distributed.h): each is an op of the catalogue
// (src/ops/collective.cpp) recording the live group's size, so it runs when the array is
// evaluated, traces into compile(fn) and has a gradient.
#include "ingot/distributed.h"

namespace ingot::distributed {
namespace {

Attrs group_attrs() { return {{"group_size", static_cast<int64_t>(size())}}; }

Array all_reduce_op(const Array& x, const char* op) {
  Attrs a = group_attrs();
  a.set("op", std::string(op));
  return ingot::op("all_reduce", {x}, a);
}

}  // namespace

Array all_sum(const Array& x) { return all_reduce_op(x, "sum"); }
Array all_mean(const Array& x) { return all_reduce_op(x, "mean"); }
Array all_max(const Array& x) { return all_reduce_op(x, "max"); }
Array all_gather(const Array& x) { return ingot::op("all_gather", {x}, group_attrs()); }
Array reduce_scatter(const Array& x) { return ingot::op("reduce_scatter", {x}, group_attrs()); }

Array broadcast(const Array& x, int root) {
  Attrs a = group_attrs();
  a.set("root", static_cast<int64_t>(root));
  return ingot::op("broadcast", {x}, a);
}

}  // namespace ingot::distributed
