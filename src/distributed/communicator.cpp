// The process group: joining mpirun's ranks (or a size-1 group without a launcher), the barrier,
// the timeout, and the agreement every collective starts with (see communicator.h).
//
// A plain run (no launcher) never calls MPI_Init, so it needs no MPI runtime even in a build with
// MPI: the launcher is recognized by the variables it sets in each rank's environment.
#include "distributed/communicator.h"
#include "distributed/started.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "ingot/distributed.h"
#include "ingot/error.h"

namespace ingot::distributed {
namespace detail {
namespace {

struct Launch {
  int rank = 0;
  int size = 1;
};

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0) return std::nullopt;
  return static_cast<int>(n);
}

// Open MPI's mpirun sets OMPI_COMM_WORLD_*; MPICH's and Intel MPI's Hydra set PMI_*.
std::optional<Launch> detect_launch() {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& [rank_var, size_var] : pairs) {
    const std::optional<int> r = env_int(rank_var), n = env_int(size_var);
    if (r && n && *n >= 1 && *r < *n) return Launch{*r, *n};
  }
  return std::nullopt;
}

std::mutex& group_mutex() {
  static std::mutex mu;
  return mu;
}

Group& the_group() {
  static Group g;
  return g;
}

std::atomic<double>& timeout_seconds() {
  static std::atomic<double> t = [] {
    const char* v = std::getenv("INGOT_DISTRIBUTED_TIMEOUT");
    if (v == nullptr || *v == '\0') return 600.0;
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    INGOT_CHECK(*end == '\0' && s >= 0, "INGOT_DISTRIBUTED_TIMEOUT must be a number of seconds >= 0 (0: no limit), got '",
                v, "'");
    return s;
  }();
  return t;
}

#ifdef INGOT_HAVE_MPI
// Calls `pending()` until it returns false or timeout() passes (then returns false). Spins
// (yielding) for `spin` seconds, then backs off to sleeps of up to 1 ms, so a rank waiting for a
// slow peer does not take a core from it. The data phase of a collective, once every rank has
// joined it, spins longer: Open MPI moves it on only inside MPI_Test, and a sleeping rank would
// stall its peers at each step of the exchange.
bool poll_until_done(const std::function<bool()>& pending, double spin = 0) {
  const double limit = timeout();
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  for (int round = 0; pending(); ++round) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (limit > 0 && waited > limit) return false;
    if (round < 200 || waited < spin) {
      std::this_thread::yield();
      continue;
    }
    pause = std::min(std::chrono::microseconds(1000), std::max(pause * 2, std::chrono::microseconds(10)));
    std::this_thread::sleep_for(pause);
  }
  return true;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

constexpr int kHeaderTag = 0x1960;

// At exit: MPI_Finalize, unless a collective is stuck in MPI (then only aborting the job ends it).
void finalize_at_exit() {
  Group& g = the_group();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!g.mpi || finalized) return;
  if (g.pending_collective) {
    std::fprintf(stderr, "ingot::distributed (rank %d of %d): aborting the MPI job at exit: %s\n", g.rank, g.size,
                 g.broken.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_free(&g.comm);
  MPI_Finalize();
}
#endif

void init_locked(Group& g) {
  if (g.initialized) return;
  const std::optional<Launch> launch = detect_launch();
#ifdef INGOT_HAVE_MPI
  int already = 0;
  MPI_Initialized(&already);  // the program may have initialized MPI itself
  if (launch || already) {
    if (!already) {
      int provided = 0;
      // SERIALIZED: collectives may come from any thread, one at a time (group_mutex).
      INGOT_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) == MPI_SUCCESS,
                  "ingot::distributed: MPI_Init_thread failed (rank ", launch->rank, " of ", launch->size, ")");
    }
    // Our own communicator: our messages never meet the program's own MPI traffic, and its errors
    // come back as codes (then ingot::Errors) instead of aborting; MPI_COMM_WORLD keeps its handler.
    MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.size);
    g.mpi = true;
    if (!already) std::atexit(finalize_at_exit);
  }
#else
  if (launch && launch->size > 1)
    INGOT_FAIL("ingot::distributed: this process was launched as rank ", launch->rank, " of ", launch->size,
               ", but this ingot was built without MPI; install Open MPI (apt-get install libopenmpi-dev "
               "openmpi-bin) and rebuild ingot");
#endif
  g.initialized = true;
}

}  // namespace

Group& group(std::unique_lock<std::mutex>& lock, bool to_communicate) {
  lock = std::unique_lock<std::mutex>(group_mutex());
  Group& g = the_group();
  init_locked(g);
  if (to_communicate && !g.broken.empty()) fail(g, "the group is unusable after an earlier failure: " + g.broken);
  return g;
}

void fail(const Group& g, const std::string& message) {
  INGOT_FAIL("ingot::distributed (rank ", g.rank, " of ", g.size, "): ", message);
}

Header make_header(Kind kind, DType dtype, const Shape& shape, int64_t op, int64_t root) {
  Header h;
  h.kind = kind;
  h.dtype = static_cast<int64_t>(dtype);
  h.op = op;
  h.root = root;
  h.rank = static_cast<int64_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < Header::kMaxDims; ++i) h.dims[i] = shape[i];
  if (shape.size() > Header::kMaxDims) {  // the tail's dims hashed into the last slot
    uint64_t hash = 1469598103934665603ull;
    for (size_t i = Header::kMaxDims - 1; i < shape.size(); ++i) hash = (hash ^ static_cast<uint64_t>(shape[i])) * 1099511628211ull;
    h.dims[Header::kMaxDims - 1] = static_cast<int64_t>(hash);
  }
  return h;
}

std::string describe(const Header& h) {
  static const char* kNames[] = {"barrier", "all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce"};
  std::string s = h.kind >= 0 && h.kind <= kReduce ? kNames[h.kind] : "collective " + std::to_string(h.kind);
  if (h.kind == kAllReduce) s += "(" + std::string(reduce_op_name(static_cast<ReduceOp>(h.op))) + ")";
  if (h.kind == kBroadcast || h.kind == kReduce) s += "(root " + std::to_string(h.root) + ")";
  s += " #" + std::to_string(h.seq);
  if (h.kind == kBarrier) return s;
  s += " of " + std::string(dtype_name(static_cast<DType>(h.dtype))) + "[";
  for (int64_t i = 0; i < h.rank; ++i) {
    if (i == Header::kMaxDims - 1 && h.rank > Header::kMaxDims) {
      s += "(dims hashed " + std::to_string(h.dims[i]) + ")";
      break;
    }
    s += (i ? ", " : "") + std::to_string(h.dims[i]);
  }
  return s + "]";
}

#ifdef INGOT_HAVE_MPI
void check_mpi(const Group& g, int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(g, std::string(call) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

void wait_collective(Group& g, MPI_Request& request, const Header& h) {
  const bool done = poll_until_done(
      [&] {
        int flag = 0;
        check_mpi(g, MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        return flag == 0;
      },
      /*spin=*/0.05);
  if (done) return;
  // MPI cannot cancel a collective: the group stays unusable, and exit aborts the job.
  g.broken = describe(h) + " did not complete within " + seconds(timeout()) +
             " after every rank had joined it (a rank died or stalls inside it)";
  g.pending_collective = true;
  fail(g, g.broken);
}
#endif

Header agree(Group& g, Header h) {
  h.seq = g.seq++;
  if (g.size == 1) return h;
#ifdef INGOT_HAVE_MPI
  // Each rank sends its header to every other and waits for theirs: O(size) small messages, and a
  // rank that is missing is known by name (a collective's completion would not say who is late).
  // The sent headers must outlive their sends even when we give up on a peer, so they are kept.
  // Never freed: MPI_Finalize (at exit, after static destructors of later statics) may still read them.
  static auto* abandoned = new std::vector<std::unique_ptr<Header>>();
  auto mine = std::make_unique<Header>(h);
  std::vector<Header> theirs(static_cast<size_t>(g.size));
  std::vector<MPI_Request> recvs(static_cast<size_t>(g.size), MPI_REQUEST_NULL), sends = recvs;
  for (int p = 0; p < g.size; ++p) {
    if (p == g.rank) continue;
    check_mpi(g, MPI_Irecv(&theirs[static_cast<size_t>(p)], Header::kWords, MPI_INT64_T, p, kHeaderTag, g.comm,
                           &recvs[static_cast<size_t>(p)]), "MPI_Irecv");
    check_mpi(g, MPI_Isend(mine.get(), Header::kWords, MPI_INT64_T, p, kHeaderTag, g.comm,
                           &sends[static_cast<size_t>(p)]), "MPI_Isend");
  }
  auto pending = [&] {
    bool any = false;
    for (std::vector<MPI_Request>* reqs : {&recvs, &sends})
      for (MPI_Request& r : *reqs) {
        if (r == MPI_REQUEST_NULL) continue;
        int flag = 0;
        check_mpi(g, MPI_Test(&r, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        any = any || flag == 0;
      }
    return any;
  };
  if (!poll_until_done(pending)) {
    std::string missing;
    for (int p = 0; p < g.size; ++p)
      if (recvs[static_cast<size_t>(p)] != MPI_REQUEST_NULL) {
        missing += (missing.empty() ? "rank " : ", rank ") + std::to_string(p);
        MPI_Cancel(&recvs[static_cast<size_t>(p)]);
        MPI_Wait(&recvs[static_cast<size_t>(p)], MPI_STATUS_IGNORE);  // returns at once once cancelled
      }
    for (MPI_Request& r : sends)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    abandoned->push_back(std::move(mine));
    // The ranks no longer agree on how many collectives ran, so none may follow.
    g.broken = (missing.empty() ? std::string("a peer") : missing) + " did not reach " + describe(h) + " within " +
               seconds(timeout());
    fail(g, g.broken);
  }
  theirs[static_cast<size_t>(g.rank)] = h;
  // Every rank holds every header, so all of them report the same mismatch.
  auto differs = [](const Header& a, const Header& b) {
    return std::memcmp(&a, &b, sizeof(Header)) != 0;
  };
  std::string diff;
  for (int p = 1; p < g.size; ++p)
    if (differs(theirs[static_cast<size_t>(p)], theirs[0]))
      diff += "; rank " + std::to_string(p) + " runs " + describe(theirs[static_cast<size_t>(p)]);
  if (!diff.empty()) fail(g, "the ranks run different collectives: rank 0 runs " + describe(theirs[0]) + diff);
#endif
  return h;
}

}  // namespace detail

void init() {
  std::unique_lock<std::mutex> lock;
  (void)detail::group(lock, false);
}

int rank() {
  std::unique_lock<std::mutex> lock;
  return detail::group(lock, false).rank;
}

int size() {
  std::unique_lock<std::mutex> lock;
  return detail::group(lock, false).size;
}

void barrier() {
  detail::finish_started();
  std::unique_lock<std::mutex> lock;
  detail::Group& g = detail::group(lock);
  detail::agree(g, detail::make_header(detail::kBarrier, DType::Bool, {}));
}

bool mpi_available() {
#ifdef INGOT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

double timeout() { return detail::timeout_seconds().load(); }

void set_timeout(double seconds) {
  INGOT_CHECK(seconds >= 0, "ingot::distributed::set_timeout: seconds must be >= 0 (0: no limit), got ", seconds);
  detail::timeout_seconds().store(seconds);
}

ReduceOp parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "mean") return ReduceOp::Mean;
  if (name == "max") return ReduceOp::Max;
  INGOT_FAIL("unknown reduction '", name, "' for a collective (expected sum, mean or max)");
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

}  // namespace ingot::distributed
