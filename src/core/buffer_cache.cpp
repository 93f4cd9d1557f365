// Tensor storage and the cache of large blocks (see set_buffer_cache_limit in ingot/tensor.h).
//
// A model that returns a fresh 500 MB output on every call would otherwise pay for mapping and
// zeroing those pages again each time (the kernel's page faults cost more than the kernel's own
// work for bandwidth-bound ops). Blocks of at least 1 MiB are rounded up to whole 2 MiB pages,
// advised as transparent huge pages (512x fewer faults on first touch), and go back to a
// process-wide cache when freed, as PyTorch's caching allocator does. A request takes the
// smallest cached block that fits with at most 25% slack.
#include "core/buffer_cache.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "ingot/error.h"
#include "ingot/tensor.h"

namespace ingot {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kLarge = size_t{1} << 20;  // blocks from here on are cached
constexpr size_t kPage = size_t{2} << 20;   // huge page size

size_t default_limit() {
  if (const char* v = std::getenv("INGOT_BUFFER_CACHE_MB"); v != nullptr && *v != '\0')
    return static_cast<size_t>(std::strtoull(v, nullptr, 10)) << 20;
  return size_t{4} << 30;
}

class BlockCache {
 public:
  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= bytes + bytes / 4) {
        void* p = it->second;
        cached_ -= it->first;
        sizes_[p] = it->first;
        free_.erase(it);
        return p;
      }
    }
    void* p = std::aligned_alloc(kPage, bytes);
    if (p == nullptr) return nullptr;
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = bytes;
    return p;
  }
  void give(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto s = sizes_.find(p);
    const size_t bytes = s->second;
    sizes_.erase(s);
    if (bytes > limit_) {
      std::free(p);
      return;
    }
    while (cached_ + bytes > limit_ && !free_.empty()) evict(free_.begin());
    free_.emplace(bytes, p);
    cached_ += bytes;
  }
  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = bytes;
    while (cached_ > limit_) evict(free_.begin());
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

 private:
  void evict(std::multimap<size_t, void*>::iterator it) {
    cached_ -= it->first;
    std::free(it->second);
    free_.erase(it);
  }
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // size -> block
  std::map<void*, size_t> sizes_;      // blocks in use -> size
  size_t cached_ = 0;
  size_t limit_ = default_limit();
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: tensors may outlive static teardown
  return *c;
}

}  // namespace

std::shared_ptr<void> allocate_buffer(size_t nbytes) {
  if (nbytes >= kLarge) {
    const size_t rounded = (nbytes + kPage - 1) / kPage * kPage;
    void* p = cache().take(rounded);
    INGOT_CHECK(p != nullptr, "Out of memory allocating ", nbytes, " bytes");
    return std::shared_ptr<void>(p, [](void* q) { cache().give(q); });
  }
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  INGOT_CHECK(p != nullptr, "Out of memory allocating ", nbytes, " bytes");
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

void set_buffer_cache_limit(size_t bytes) { cache().set_limit(bytes); }
size_t buffer_cache_bytes() { return cache().cached(); }

}  // namespace ingot
