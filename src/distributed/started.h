// All-reduces that run beside the caller: the gradient buckets of a data-parallel training step
// (ops all_reduce_start / all_reduce_wait, src/ops/collective.cpp; pass gradient_buckets).
//
// start_all_reduce packs its tensors into one buffer and queues it for the group's communication
// thread, which runs the all-reduce (with the usual agreement between ranks and the timeout)
// while the caller goes on computing; finish_all_reduce waits for it and unpacks the results.
//
// Why a thread and not MPI's non-blocking calls alone: Open MPI moves a non-blocking collective
// on only while some thread is inside MPI, so a started MPI_Iallreduce would sit still through
// the backward it should overlap. The thread keeps one MPI call in progress at a time (the group
// is initialized MPI_THREAD_SERIALIZED and its lock orders the calls).
//
// Ordering: started all-reduces run in the order started, and every other collective (and
// barrier) first waits for all of them, so each rank runs the same sequence of collectives.
#pragma once

#include <cstdint>
#include <vector>

#include "ingot/distributed.h"
#include "ingot/tensor.h"

namespace ingot::distributed::detail {

// Starts the all-reduce of `xs` (all of one dtype, any shapes) as one buffer; returns the ticket
// that finish_all_reduce takes. In a group of one it completes at once.
int64_t start_all_reduce(const std::vector<Tensor>& xs, ReduceOp op);
// The reduced tensors, shaped as given to start; rethrows the all-reduce's error (a timeout, a
// mismatch between ranks). Each ticket is finished once; an unknown ticket is an error.
std::vector<Tensor> finish_all_reduce(int64_t ticket);
// Waits until every started all-reduce has run (their results stay for finish_all_reduce).
// A no-op on the communication thread itself.
void finish_started();

// Around one evaluation that may start all-reduces (TrainStep::run): when it ends, the
// all-reduces this thread started inside it and never finished are dropped. That happens when
// the evaluation threw between a bucket's start and its wait: each still runs, as the other
// ranks expect, but its buffer goes once it has, instead of staying until exit; its ticket is
// then unknown to finish_all_reduce. Tickets finished inside, started before, or started by
// other threads are untouched.
class StartedScope {
 public:
  StartedScope();
  ~StartedScope();
  StartedScope(const StartedScope&) = delete;
  StartedScope& operator=(const StartedScope&) = delete;

 private:
  int64_t first_ticket_;
};

}  // namespace ingot::distributed::detail
