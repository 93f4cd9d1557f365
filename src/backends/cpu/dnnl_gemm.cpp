// The host's products (dnnl_gemm.h): float32 through dnnl_sgemm; bfloat16 through oneDNN's matmul
// primitive (ingot_host::gemm_bf16): on AVX512_BF16 and AMX hosts a bfloat16 matmul runs the library's native bf16
// kernels (float32 accumulation, as the reference computes) instead of being widened to float32
// first; 2.0-3.3x the float32 sgemm's speed on BERT's shapes on an AMX host (2 threads).
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/dnnl_gemm.h"

#ifdef INGOT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "backends/cpu/dnnl_util.h"

namespace ingot::cpu {

namespace {

std::atomic<int64_t> bf16_calls{0}, batched_calls{0};

// A matmul primitive, made once per shape and kept (see kept_matmul).
struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

// The primitive for A (a) x B (b) -> C (c), or null where oneDNN would run its reference
// implementation or refuses the descriptors.
std::shared_ptr<const Matmul> make_matmul(const dnnl::memory::desc& a, const dnnl::memory::desc& b,
                                          const dnnl::memory::desc& c) {
  try {
    // The scratchpad is the caller's (thread_scratch): threads share a shape's primitive (the
    // attention kernel calls from each of its threads), and a library-managed one belongs to the
    // primitive, so concurrent calls would write over each other's.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0)
      return std::make_shared<const Matmul>(Matmul{pd, dnnl::matmul(pd)});
  } catch (const dnnl::error&) {
  }
  return nullptr;
}

// The primitive kept under `key` in a function's own map, made by `make` on first use (a null one
// is kept too, so it is not asked again). At most kKept shapes are kept: symbolic shapes (a
// sequence length per call) would otherwise grow the map without bound; past it the map starts
// over (callers hold their primitive by shared_ptr).
constexpr size_t kKept = 512;
template <class Key, class Make>
std::shared_ptr<const Matmul> kept_matmul(std::mutex& mu, std::map<Key, std::shared_ptr<const Matmul>>& made,
                                          const Key& key, const Make& make) {
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = made.find(key); it != made.end()) return it->second;
  if (made.size() >= kKept) made.clear();
  return made.emplace(key, make()).first->second;
}

// One bf16 x bf16 -> f32 matmul primitive per (ta, tb, m, n, k, lda, ldb, ldc): A [m, k] and
// B [k, n] read through their strides (a transposed operand is its stored matrix's strides
// swapped), C [m, n] with row stride ldc.
std::shared_ptr<const Matmul> bf16_matmul(char ta, char tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                                          int64_t ldc) {
  using Key = std::tuple<char, char, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Matmul>> made;
  return kept_matmul(mu, made, Key{ta, tb, m, n, k, lda, ldb, ldc}, [&] {
    using dt = dnnl::memory::data_type;
    return make_matmul(
        dnnl::memory::desc({m, k}, dt::bf16, ta == 'T' ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1}),
        dnnl::memory::desc({k, n}, dt::bf16, tb == 'T' ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1}),
        dnnl::memory::desc({m, n}, dt::f32, dnnl::memory::dims{ldc, 1}));
  });
}

// One batched matmul primitive per (type, ta, tb, batch dims and strides, m, n, k, lda, ldb):
// a batch dim an operand broadcasts is 1 in its memory descriptor; C is contiguous float32.
std::shared_ptr<const Matmul> batched_matmul(bool bf16, char ta, char tb, const std::vector<int64_t>& batch,
                                             const std::vector<int64_t>& stride_a, const std::vector<int64_t>& stride_b,
                                             int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb) {
  using Key = std::tuple<bool, char, char, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, int64_t,
                         int64_t, int64_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Matmul>> made;
  return kept_matmul(mu, made, Key{bf16, ta, tb, batch, stride_a, stride_b, m, n, k, lda, ldb}, [&] {
    using dt = dnnl::memory::data_type;
    // [batch..., rows, cols] with the given batch strides (a broadcast dim as size 1) and row stride ld.
    auto operand = [&](const std::vector<int64_t>& strides, int64_t rows, int64_t cols, bool transposed, int64_t ld) {
      dnnl::memory::dims dims, st;
      for (size_t i = 0; i < batch.size(); ++i) {
        dims.push_back(strides[i] == 0 ? 1 : batch[i]);
        st.push_back(strides[i] == 0 ? 1 : strides[i]);
      }
      dims.insert(dims.end(), {rows, cols});
      st.insert(st.end(), transposed ? std::initializer_list<int64_t>{1, ld} : std::initializer_list<int64_t>{ld, 1});
      return dnnl::memory::desc(dims, bf16 ? dt::bf16 : dt::f32, st);
    };
    dnnl::memory::dims cdims(batch.begin(), batch.end());
    cdims.insert(cdims.end(), {m, n});
    dnnl::memory::dims cst(cdims.size());
    for (size_t i = cdims.size(), s = 1; i-- > 0;) {
      cst[i] = static_cast<int64_t>(s);
      s *= static_cast<size_t>(cdims[i]);
    }
    return make_matmul(operand(stride_a, m, k, ta == 'T', lda), operand(stride_b, k, n, tb == 'T', ldb),
                       dnnl::memory::desc(cdims, dt::f32, cst));
  });
}

// This thread's scratch of at least `bytes` bytes, 64-byte aligned, kept for the thread's next call.
void* thread_scratch(size_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  void* p = buffer.data();
  size_t space = buffer.size();
  return std::align(64, bytes, p, space);
}

// Runs `p` on a, b and c with this thread's scratchpad; 0, or 1 where oneDNN failed (the caller
// falls back). Counts a product that ran in `calls`.
int run_matmul(const std::shared_ptr<const Matmul>& p, const void* a, const void* b, float* c,
               std::atomic<int64_t>& calls) {
  if (p == nullptr) return 1;
  try {
    const dnnl::matmul::primitive_desc& pd = p->pd;
    dnnl::stream s(cpu_engine());
    dnnl::memory am(pd.src_desc(), cpu_engine(), const_cast<void*>(a));
    dnnl::memory bm(pd.weights_desc(), cpu_engine(), const_cast<void*>(b));
    dnnl::memory cm(pd.dst_desc(), cpu_engine(), c);
    dnnl::memory scratch(pd.scratchpad_desc(), cpu_engine(), thread_scratch(pd.scratchpad_desc().get_size()));
    p->primitive.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, scratch}});
    s.wait();
    ++calls;
    return 0;
  } catch (const dnnl::error&) {
    return 1;
  }
}

}  // namespace

HostSgemm host_sgemm() {
  return [](char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) {
    return dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == dnnl_success ? 0 : 1;
  };
}

int64_t gemm_bf16_calls() { return bf16_calls.load(); }

HostGemmBf16 host_gemm_bf16() {
  // Asked for every call's host table: the ISA (fixed for the process) is looked at once.
  static const bool native = [] {
    const std::string isa = dnnl_cpu_isa();
    return isa == "avx512_core_bf16" || isa == "avx512_core_amx";
  }();
  if (!native) return nullptr;
  return [](char ta, char tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda, const uint16_t* b,
            int64_t ldb, float* c, int64_t ldc) {
    return run_matmul(bf16_matmul(ta, tb, m, n, k, lda, ldb, ldc), a, b, c, bf16_calls);
  };
}

int64_t gemm_batched_calls() { return batched_calls.load(); }

HostGemmBatched host_gemm_batched() {
  return [](char ta, char tb, int32_t bf16, int32_t batch_dims, const int64_t* batch, const int64_t* stride_a,
            const int64_t* stride_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
            int64_t ldb, float* c) {
    if (batch_dims < 1 || batch_dims > 10 || m < 1 || n < 1 || k < 1) return 1;  // the caller's loop does these
    if (bf16 != 0 && host_gemm_bf16() == nullptr) return 1;  // not native here: widened in the loop
    for (int32_t i = 0; i < batch_dims; ++i)
      if (batch[i] < 1) return 1;
    const std::vector<int64_t> bd(batch, batch + batch_dims), sa(stride_a, stride_a + batch_dims),
        sb(stride_b, stride_b + batch_dims);
    return run_matmul(batched_matmul(bf16 != 0, ta, tb, bd, sa, sb, m, n, k, lda, ldb), a, b, c, batched_calls);
  };
}

}  // namespace ingot::cpu

#else

namespace ingot::cpu {
HostSgemm host_sgemm() { return nullptr; }
HostGemmBf16 host_gemm_bf16() { return nullptr; }
int64_t gemm_bf16_calls() { return 0; }
HostGemmBatched host_gemm_batched() { return nullptr; }
int64_t gemm_batched_calls() { return 0; }
}  // namespace ingot::cpu

#endif
