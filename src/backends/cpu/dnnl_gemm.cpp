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

std::atomic<int64_t> bf16_calls{0};

// One bf16 x bf16 -> f32 matmul primitive per (ta, tb, m, n, k, lda, ldb, ldc), made on first use:
// A [m, k] and B [k, n] read through their strides (a transposed operand is its stored matrix's
// strides swapped), C [m, n] with row stride ldc. Null where oneDNN would run its reference
// implementation (kept, so it is not asked again). At most kKept shapes are kept: symbolic
// shapes (a sequence length per call) would otherwise grow the map without bound; past it the
// map starts over (callers hold their primitive by shared_ptr).
constexpr size_t kKept = 512;
struct Bf16Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};
std::shared_ptr<const Bf16Matmul> bf16_matmul(char ta, char tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                                              int64_t ldb, int64_t ldc) {
  using Key = std::tuple<char, char, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Bf16Matmul>> made;
  const Key key{ta, tb, m, n, k, lda, ldb, ldc};
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = made.find(key); it != made.end()) return it->second;
  if (made.size() >= kKept) made.clear();
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a({m, k}, dt::bf16, ta == 'T' ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
  const dnnl::memory::desc b({k, n}, dt::bf16, tb == 'T' ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
  const dnnl::memory::desc c({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
  std::shared_ptr<const Bf16Matmul> p;
  try {
    // The scratchpad is the caller's (thread_scratch): threads share a shape's primitive (the
    // attention kernel calls from each of its threads), and a library-managed one belongs to the
    // primitive, so concurrent calls would write over each other's.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) p = std::make_shared<const Bf16Matmul>(Bf16Matmul{pd, dnnl::matmul(pd)});
  } catch (const dnnl::error&) {
  }
  made.emplace(key, p);
  return p;
}

// This thread's scratch of at least `bytes` bytes, 64-byte aligned, kept for the thread's next call.
void* thread_scratch(size_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  void* p = buffer.data();
  size_t space = buffer.size();
  return std::align(64, bytes, p, space);
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
    const std::shared_ptr<const Bf16Matmul> p = bf16_matmul(ta, tb, m, n, k, lda, ldb, ldc);
    if (p == nullptr) return 1;
    try {
      const dnnl::matmul::primitive_desc& pd = p->pd;
      dnnl::stream s(cpu_engine());
      dnnl::memory am(pd.src_desc(), cpu_engine(), const_cast<uint16_t*>(a));
      dnnl::memory bm(pd.weights_desc(), cpu_engine(), const_cast<uint16_t*>(b));
      dnnl::memory cm(pd.dst_desc(), cpu_engine(), c);
      dnnl::memory scratch(pd.scratchpad_desc(), cpu_engine(), thread_scratch(pd.scratchpad_desc().get_size()));
      p->primitive.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, scratch}});
      s.wait();
      ++bf16_calls;
      return 0;
    } catch (const dnnl::error&) {
      return 1;
    }
  };
}

}  // namespace ingot::cpu

#else

namespace ingot::cpu {
HostSgemm host_sgemm() { return nullptr; }
HostGemmBf16 host_gemm_bf16() { return nullptr; }
int64_t gemm_bf16_calls() { return 0; }
}  // namespace ingot::cpu

#endif
