// The collectives as blocks of the zoo (include/ingot/models.h): "input" -> "output" through one
// collective op of src/ops/collective.cpp, built for the process group's size at the time the
// block is made (a graph for 2 ranks is refused by a group of another size, naming both).
#include <string>

#include "ingot/distributed.h"
#include "ingot/error.h"
#include "ingot/models.h"
#include "models/zoo_util.h"

namespace ingot {

namespace {

Model collective_block(const std::string& type, const std::string& op, Attrs attrs) {
  attrs.set("group_size", int64_t{distributed::size()});
  Model m = zoo::block(type);
  m.set_cout(apply(op, m.input("input"), std::move(attrs)));
  return m;
}

}  // namespace

Model AllReduce(const std::string& op) {
  (void)distributed::parse_reduce_op(op);  // "sum" | "mean" | "max", else a clear error now
  return collective_block("AllReduce", "all_reduce", {{"op", op}});
}

Model AllGather() { return collective_block("AllGather", "all_gather", {}); }

Model Broadcast(int64_t root) {
  INGOT_CHECK(root >= 0 && root < distributed::size(), "Broadcast: root ", root, " is not a rank of this group of ",
              distributed::size());
  return collective_block("Broadcast", "broadcast", {{"root", root}});
}

Model ReduceScatter() { return collective_block("ReduceScatter", "reduce_scatter", {}); }

}  // namespace ingot
