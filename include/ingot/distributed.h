// Several processes working as one group, on MPI (Open MPI: `mpirun -np 4 program`, or across
// machines with `--hostfile`). Each process is a rank; the collectives below combine a tensor
// from every rank, and are ops of the catalogue (all_reduce, all_gather, broadcast,
// reduce_scatter; src/ops/collective.cpp), so lazy arrays, compile(fn) and gradients carry them.
//
// Without a launcher (a plain `program` run), or in a build without MPI, the group is this one
// process: size() is 1 and every collective returns its operand. Starting several ranks of a build
// without MPI is a clear error naming the package to install.
//
// Every rank must run the same collectives in the same order with the same shapes and dtypes.
// Before each collective the ranks exchange a description of it (op, dtype, shape, sequence
// number): a rank running another one is reported by name, and a rank that does not arrive within
// timeout() makes the others fail with an ingot::Error naming it, rather than hang.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ingot/array.h"
#include "ingot/tensor.h"

namespace ingot::distributed {

// Joins the group mpirun started (MPI_Init on first call; MPI_Finalize at exit), or makes a size-1
// group when the process was not launched by an MPI launcher. Safe to call again; the other
// functions call it themselves.
void init();
int rank();
int size();
// Returns once every rank has called barrier() (or fails after timeout(), naming the missing ranks).
void barrier();
// Whether this build carries MPI (CMake found it), so that multi-rank launches work.
bool mpi_available();

// Seconds a rank waits in a collective for the others before failing (0: forever). Default 600,
// or the environment variable INGOT_DISTRIBUTED_TIMEOUT. Every rank should use the same value.
double timeout();
void set_timeout(double seconds);

enum class ReduceOp { Sum, Mean, Max };
ReduceOp parse_reduce_op(std::string_view name);  // "sum" | "mean" | "max"
std::string_view reduce_op_name(ReduceOp op);

// The collectives on tensors, run now (the ops' reference kernels call these). float16 and
// bfloat16 travel as float32 where they are reduced (all_reduce, reduce_scatter, reduce) and as
// their bits where they are only moved (all_gather, broadcast).
Tensor all_reduce(const Tensor& x, ReduceOp op);  // every rank gets the sum / mean / max
Tensor all_gather(const Tensor& x);               // the ranks' x concatenated along axis 0, by rank
Tensor broadcast(const Tensor& x, int root);      // every rank gets root's x
// The sum over ranks, split along axis 0 into size() equal parts: rank r gets part r.
Tensor reduce_scatter(const Tensor& x);
// The sum over ranks on `root`, zeros on the other ranks (broadcast's gradient).
Tensor reduce(const Tensor& x, int root);

// Data parallelism: this rank's shard of a global batch. Every tensor is split along `axis` into
// `size` equal parts and part `rank` is returned (a copy); the axis's length must be divisible
// by `size` (an error naming the key otherwise), so every rank's shard has the same shape. The
// first form is the live group's (rank(), size()). See CompileOptions::data_parallel.
std::map<std::string, Tensor> shard_batch(const std::map<std::string, Tensor>& batch, int axis = 0);
std::map<std::string, Tensor> shard_batch(const std::map<std::string, Tensor>& batch, int rank, int size, int axis = 0);

// The same as ops over lazy arrays (usable in compile(fn) and under grad): the op records the
// group's size, so a graph compiled for 4 ranks is refused by a group of another size.
Array all_sum(const Array& x);
Array all_mean(const Array& x);
Array all_max(const Array& x);
Array all_gather(const Array& x);
Array broadcast(const Array& x, int root = 0);
Array reduce_scatter(const Array& x);

}  // namespace ingot::distributed
