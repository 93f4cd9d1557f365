// ml.distributed: the process group and the collectives over ml.arrays
// (include/ingot/distributed.h). The collectives are ops of the catalogue, so they trace into
// ml.compile(fn) and carry gradients (ml.grad) like every other op function.
#include "array_convert.h"
#include "bindings.h"
#include "ingot/distributed.h"

namespace ingot::python {

void bind_distributed(nb::module_& m) {
  nb::module_ d = m.def_submodule(
      "distributed",
      "Several processes as one group, on MPI: run `mpirun -np 4 python train.py` (or across machines with "
      "`--hostfile`). Without a launcher the group is this process alone (size 1) and each collective returns "
      "its operand. Every rank must run the same collectives in the same order, on the same shapes and dtypes; "
      "a mismatch or a rank that does not arrive within timeout() seconds is an IngotError naming the rank.");
  namespace dist = ingot::distributed;
  d.def("init", &dist::init,
        "Joins the group mpirun started (or makes a size-1 group without a launcher). Safe to call again; the other "
        "functions call it themselves.");
  d.def("rank", &dist::rank, "This process's rank in the group, 0 to size() - 1.");
  d.def("size", &dist::size, "The number of ranks in the group (1 without a launcher).");
  d.def("barrier", &dist::barrier, "Returns once every rank has called barrier().");
  d.def("mpi_available", &dist::mpi_available,
        "False when ingot was built without MPI (then only the size-1 group exists).");
  d.def("timeout", &dist::timeout,
        "Seconds a rank waits in a collective for the others before failing (0: forever; default 600, or the "
        "INGOT_DISTRIBUTED_TIMEOUT environment variable).");
  d.def("set_timeout", &dist::set_timeout, nb::arg("seconds"),
        "Sets timeout(); every rank should use the same value.");
  d.def("all_sum", [](nb::handle x) { return dist::all_sum(operand(x, "x")); }, nb::arg("x"),
        "The sum of every rank's `x` (same shape and dtype on every rank), on every rank.");
  d.def("all_mean", [](nb::handle x) { return dist::all_mean(operand(x, "x")); }, nb::arg("x"),
        "The mean of every rank's float `x`, on every rank.");
  d.def("all_max", [](nb::handle x) { return dist::all_max(operand(x, "x")); }, nb::arg("x"),
        "The elementwise maximum of every rank's `x`, on every rank.");
  d.def("all_gather", [](nb::handle x) { return dist::all_gather(operand(x, "x")); }, nb::arg("x"),
        "Every rank's `x` concatenated along axis 0 in rank order ([n, ...] -> [size() * n, ...]), on every rank.");
  d.def("broadcast", [](nb::handle x, int root) { return dist::broadcast(operand(x, "x"), root); }, nb::arg("x"),
        nb::arg("root") = 0, "Rank `root`'s `x` on every rank (the others' `x` gives the shape and dtype).");
  d.def("reduce_scatter", [](nb::handle x) { return dist::reduce_scatter(operand(x, "x")); }, nb::arg("x"),
        "The sum of every rank's `x` split along axis 0 into size() equal parts; rank r gets part r.");
}

}  // namespace ingot::python
