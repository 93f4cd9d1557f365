// 64-byte aligned storage for tensors and backend arenas; large blocks are recycled through a
// process-wide cache (buffer_cache.cpp; limits in ingot/tensor.h).
#pragma once

#include <cstddef>
#include <memory>

namespace ingot {

// Unspecified contents. Throws ingot::Error when memory runs out.
std::shared_ptr<void> allocate_buffer(size_t nbytes);

}  // namespace ingot
