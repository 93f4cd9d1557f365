// The collectives on tensors (include/ingot/distributed.h): each agrees with the other ranks on
// what runs (communicator.h), then starts MPI's non-blocking collective and waits for it with the
// group's timeout. In a size-1 group each returns a copy of its operand (after the same checks).
//
// MPI types: bool and uint8 travel as MPI_UINT8_T, the signed integers as MPI_INT*_T, float32 and
// float64 as MPI_FLOAT / MPI_DOUBLE. MPI has no 16-bit float: float16 and bfloat16 are reduced in
// float32 (converted before, rounded back after) and moved as their 16 bits (MPI_UINT16_T).
#include <climits>

#include "distributed/communicator.h"
#include "distributed/started.h"
#include "ingot/distributed.h"
#include "ingot/error.h"

namespace ingot::distributed {
namespace {

using detail::Group;
using detail::Header;

void check_numbers(const Group& g, const Header& h, DType t) {
  if (t == DType::Bool) detail::fail(g, detail::describe(h) + ": needs numbers, got bool");
}

void check_root(const Group& g, const Header& h, int root) {
  if (root < 0 || root >= g.size)
    detail::fail(g, detail::describe(h) + ": root " + std::to_string(root) + " is not a rank of this group of " +
                        std::to_string(g.size));
}

void check_leading_axis(const Group& g, const Header& h, const Tensor& x) {
  if (x.rank() == 0) detail::fail(g, detail::describe(h) + ": needs an array of rank >= 1 (it works along axis 0)");
}

#ifdef INGOT_HAVE_MPI
// The dtype a reduction runs in.
DType reduce_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

Tensor back_to(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.astype(dtype); }

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float16:
    case DType::BFloat16: return MPI_UINT16_T;  // moved only: reductions convert to float32 first
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

// MPI counts are int.
int mpi_count(const Group& g, const Header& h, int64_t n) {
  if (n > INT_MAX)
    detail::fail(g, detail::describe(h) + ": " + std::to_string(n) +
                        " elements are more than one MPI call carries (2^31 - 1); split the array");
  return static_cast<int>(n);
}

// Runs a reduction whose buffers are in reduce_dtype: `start` begins the MPI call on (send, recv).
template <class Start>
Tensor reduced(Group& g, const Header& h, const Tensor& x, const Shape& out_shape, Start start) {
  const DType rt = reduce_dtype(x.dtype());
  const Tensor send = x.dtype() == rt ? x : x.astype(rt);
  Tensor recv = Tensor::uninitialized(rt, out_shape);
  MPI_Request req = MPI_REQUEST_NULL;
  start(send.raw_data(), recv.raw_data(), mpi_type(rt), req);
  detail::wait_collective(g, req, h);
  return recv;
}
#endif

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  detail::finish_started();  // started all-reduces come first, on every rank
  std::unique_lock<std::mutex> lock;
  Group& g = detail::group(lock);
  const Tensor in = x.contiguous();
  const Header h = detail::agree(g, detail::make_header(detail::kAllReduce, in.dtype(), in.shape(),
                                                         static_cast<int64_t>(op)));
  check_numbers(g, h, in.dtype());
  if (op == ReduceOp::Mean && !is_floating(in.dtype()))
    detail::fail(g, detail::describe(h) + ": a mean needs a float dtype, got " + std::string(dtype_name(in.dtype())) +
                        " (cast first, or use sum)");
  if (g.size == 1) return in.clone();
#ifdef INGOT_HAVE_MPI
  const int count = mpi_count(g, h, in.numel());
  Tensor out = reduced(g, h, in, in.shape(), [&](const void* send, void* recv, MPI_Datatype type, MPI_Request& req) {
    detail::check_mpi(g, MPI_Iallreduce(send, recv, count, type, op == ReduceOp::Max ? MPI_MAX : MPI_SUM, g.comm, &req),
                      "MPI_Iallreduce");
  });
  if (op == ReduceOp::Mean) {
    if (out.dtype() == DType::Float64)
      for (double* p = out.data<double>(), *e = p + out.numel(); p != e; ++p) *p /= g.size;
    else
      for (float* p = out.data<float>(), *e = p + out.numel(); p != e; ++p) *p /= static_cast<float>(g.size);
  }
  return back_to(out, in.dtype());
#else
  return in.clone();  // unreachable: without MPI the group has one rank
#endif
}

Tensor all_gather(const Tensor& x) {
  detail::finish_started();  // started all-reduces come first, on every rank
  std::unique_lock<std::mutex> lock;
  Group& g = detail::group(lock);
  const Tensor in = x.contiguous();
  const Header h = detail::agree(g, detail::make_header(detail::kAllGather, in.dtype(), in.shape()));
  check_leading_axis(g, h, in);
  if (g.size == 1) return in.clone();
#ifdef INGOT_HAVE_MPI
  Shape shape = in.shape();
  shape[0] *= g.size;
  Tensor out = Tensor::uninitialized(in.dtype(), shape);
  const int count = mpi_count(g, h, in.numel());
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(g, MPI_Iallgather(in.raw_data(), count, mpi_type(in.dtype()), out.raw_data(), count,
                                      mpi_type(in.dtype()), g.comm, &req), "MPI_Iallgather");
  detail::wait_collective(g, req, h);
  return out;
#else
  return in.clone();
#endif
}

Tensor broadcast(const Tensor& x, int root) {
  detail::finish_started();  // started all-reduces come first, on every rank
  std::unique_lock<std::mutex> lock;
  Group& g = detail::group(lock);
  const Header h = detail::agree(g, detail::make_header(detail::kBroadcast, x.dtype(), x.shape(), 0, root));
  check_root(g, h, root);
  Tensor out = x.contiguous().clone();
  if (g.size == 1) return out;
#ifdef INGOT_HAVE_MPI
  MPI_Request req = MPI_REQUEST_NULL;
  detail::check_mpi(g, MPI_Ibcast(out.raw_data(), mpi_count(g, h, out.numel()), mpi_type(out.dtype()), root, g.comm, &req),
                    "MPI_Ibcast");
  detail::wait_collective(g, req, h);
#endif
  return out;
}

Tensor reduce_scatter(const Tensor& x) {
  detail::finish_started();  // started all-reduces come first, on every rank
  std::unique_lock<std::mutex> lock;
  Group& g = detail::group(lock);
  const Tensor in = x.contiguous();
  const Header h = detail::agree(g, detail::make_header(detail::kReduceScatter, in.dtype(), in.shape()));
  check_numbers(g, h, in.dtype());
  check_leading_axis(g, h, in);
  if (in.dim(0) % g.size != 0)
    detail::fail(g, detail::describe(h) + ": the leading dimension (" + std::to_string(in.dim(0)) +
                        ") must be divisible by the group's size (" + std::to_string(g.size) + ")");
  if (g.size == 1) return in.clone();
#ifdef INGOT_HAVE_MPI
  Shape shape = in.shape();
  shape[0] /= g.size;
  const int count = mpi_count(g, h, in.numel() / g.size);
  const Tensor out = reduced(g, h, in, shape, [&](const void* send, void* recv, MPI_Datatype type, MPI_Request& req) {
    detail::check_mpi(g, MPI_Ireduce_scatter_block(send, recv, count, type, MPI_SUM, g.comm, &req),
                      "MPI_Ireduce_scatter_block");
  });
  return back_to(out, in.dtype());
#else
  return in.clone();
#endif
}

Tensor reduce(const Tensor& x, int root) {
  detail::finish_started();  // started all-reduces come first, on every rank
  std::unique_lock<std::mutex> lock;
  Group& g = detail::group(lock);
  const Tensor in = x.contiguous();
  const Header h = detail::agree(g, detail::make_header(detail::kReduce, in.dtype(), in.shape(), 0, root));
  check_numbers(g, h, in.dtype());
  check_root(g, h, root);
  if (g.size == 1) return in.clone();
#ifdef INGOT_HAVE_MPI
  const int count = mpi_count(g, h, in.numel());
  const Tensor out = reduced(g, h, in, in.shape(), [&](const void* send, void* recv, MPI_Datatype type, MPI_Request& req) {
    detail::check_mpi(g, MPI_Ireduce(send, recv, count, type, MPI_SUM, root, g.comm, &req), "MPI_Ireduce");
  });
  return g.rank == root ? back_to(out, in.dtype()) : Tensor(in.dtype(), in.shape());  // zeros off the root
#else
  return in.clone();
#endif
}

}  // namespace ingot::distributed
