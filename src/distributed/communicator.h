// The process group behind include/ingot/distributed.h, shared by the communicator
// (communicator.cpp) and the collectives on tensors (collectives.cpp).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ingot/dtype.h"
#include "ingot/shape.h"

#ifdef INGOT_HAVE_MPI
#include <mpi.h>
#endif

namespace ingot::distributed::detail {

// What one rank is about to run, compared across ranks before it runs: a rank that runs another
// collective, or the same one on another shape, is reported instead of deadlocking or mixing data.
struct Header {
  static constexpr int kMaxDims = 8;  // dims past the 8th are folded into the last slot's hash
  int64_t seq = 0;                    // the how-many-th collective of this process
  int64_t kind = 0;                   // Kind
  int64_t dtype = 0;
  int64_t op = 0;    // ReduceOp for reductions, else 0
  int64_t root = 0;  // broadcast / reduce, else 0
  int64_t rank = 0;  // tensor rank
  int64_t dims[kMaxDims] = {};
  static constexpr int kWords = 6 + kMaxDims;
};

enum Kind : int64_t { kBarrier, kAllReduce, kAllGather, kBroadcast, kReduceScatter, kReduce };

Header make_header(Kind kind, DType dtype, const Shape& shape, int64_t op = 0, int64_t root = 0);
std::string describe(const Header& h);  // "all_reduce(sum) #3 of float32[2, 3]"

struct Group {
  bool initialized = false;
  bool mpi = false;  // this process called MPI_Init (a launcher started it)
  int rank = 0;
  int size = 1;
  int64_t seq = 0;
  // Set when a collective timed out: the ranks no longer agree on which collective comes next, so
  // later collectives fail at once with this message.
  std::string broken;
  // The timeout struck inside a started MPI collective, which MPI cannot cancel: exit then aborts
  // the MPI job instead of finalizing (MPI_Finalize could wait for it forever).
  bool pending_collective = false;
#ifdef INGOT_HAVE_MPI
  MPI_Comm comm = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD, errors returned, not fatal
#endif
};

// The process's group, initialized; the caller holds the lock for the whole collective, so
// collectives from several threads run one after the other (MPI is initialized SERIALIZED).
// `to_communicate`: fails if the group is broken (rank() and size() still answer then).
Group& group(std::unique_lock<std::mutex>& lock, bool to_communicate = true);

// Throws ingot::Error "ingot::distributed (rank r of n): <message>".
[[noreturn]] void fail(const Group& g, const std::string& message);

// Exchanges `h` with every other rank and checks they all describe the same collective; waits at
// most timeout() for them, then fails naming the ranks that did not arrive. Also a barrier.
// Returns `h` with its sequence number.
Header agree(Group& g, Header h);

#ifdef INGOT_HAVE_MPI
// Throws ingot::Error with MPI's message when `rc` is not MPI_SUCCESS.
void check_mpi(const Group& g, int rc, const char* call);
// Waits for a non-blocking collective of `h`, at most timeout(); on timeout the group is broken.
void wait_collective(Group& g, MPI_Request& request, const Header& h);
#endif

}  // namespace ingot::distributed::detail
