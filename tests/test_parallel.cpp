#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ingot/error.h"
#include "runtime/parallel.h"

using ingot::parallel_for;

namespace {

// Counts how often each index of [0, n) is visited.
std::vector<int> visit_counts(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> counts(static_cast<size_t>(n));
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    EXPECT_LE(0, begin);
    EXPECT_LT(begin, end);
    EXPECT_LE(end, n);
    for (int64_t i = begin; i < end; ++i) counts[i].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& c : counts) out.push_back(c.load());
  return out;
}

}  // namespace

TEST(Parallel, ThreadCountIsPositive) { EXPECT_GE(ingot::parallel_num_threads(), 1); }

TEST(Parallel, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 2, 7, 97, 1000, 4099})
    for (int64_t grain : {0, 1, 3, 64, 5000}) {
      std::vector<int> counts = visit_counts(n, grain);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(counts[i], 1) << "n=" << n << " grain=" << grain << " index " << i;
    }
}

TEST(Parallel, ChunksRespectGrain) {
  std::atomic<int64_t> smallest{1 << 30};
  std::atomic<int> chunks{0};
  parallel_for(1000, 100, [&](int64_t begin, int64_t end) {
    ++chunks;
    if (end != 1000) {  // only the last chunk may be short
      int64_t len = end - begin, cur = smallest.load();
      while (len < cur && !smallest.compare_exchange_weak(cur, len)) {
      }
    }
  });
  EXPECT_LE(chunks.load(), 10);
  if (chunks.load() > 1) {
    EXPECT_GE(smallest.load(), 100);
  }
}

TEST(Parallel, SmallWorkRunsInlineOnTheCaller) {
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  parallel_for(10, 16, [&](int64_t begin, int64_t end) {
    ++calls;  // inline, so no race
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(calls, 1);
}

TEST(Parallel, RethrowsWorkerExceptionsOnTheCaller) {
  for (int rep = 0; rep < 20; ++rep) {
    EXPECT_THROW(parallel_for(10000, 1,
                              [&](int64_t begin, int64_t end) {
                                if (begin <= 7777 && 7777 < end) INGOT_FAIL("boom at 7777");
                              }),
                 ingot::Error);
  }
  try {
    parallel_for(100, 1, [](int64_t, int64_t) { throw std::runtime_error("plain"); });
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "plain");
  }
  // The pool still works afterwards.
  for (int c : visit_counts(5000, 7)) ASSERT_EQ(c, 1);
}

TEST(Parallel, NestedCallsWork) {
  std::atomic<int64_t> total{0};
  parallel_for(16, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t i = b0; i < e0; ++i)
      parallel_for(1000, 1, [&](int64_t b1, int64_t e1) {
        int64_t local = 0;
        for (int64_t j = b1; j < e1; ++j) local += j;
        total += local;
      });
  });
  EXPECT_EQ(total.load(), 16 * (999 * 1000 / 2));
}

TEST(Parallel, SafeFromSeveralThreads) {
  std::vector<int64_t> sums(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        std::atomic<int64_t> s{0};
        parallel_for(3001, 10, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) s += i;
        });
        sums[t] += s.load();
      }
    });
  for (auto& th : threads) th.join();
  for (int64_t s : sums) EXPECT_EQ(s, 50 * (3000 * 3001 / 2));
}
