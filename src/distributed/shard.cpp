// shard_batch (include/ingot/distributed.h): a rank's equal part of each tensor of a batch.
#include <cstring>

#include "ingot/distributed.h"
#include "ingot/error.h"

namespace ingot::distributed {

std::map<std::string, Tensor> shard_batch(const std::map<std::string, Tensor>& batch, int axis) {
  return shard_batch(batch, rank(), size(), axis);
}

std::map<std::string, Tensor> shard_batch(const std::map<std::string, Tensor>& batch, int rank, int size, int axis) {
  INGOT_CHECK(size >= 1 && rank >= 0 && rank < size, "shard_batch: rank ", rank, " is not a rank of a group of ", size);
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : batch) {
    INGOT_CHECK(t.defined(), "shard_batch: '", key, "' has no value");
    const int r = t.rank();
    INGOT_CHECK(r >= 1, "shard_batch: '", key, "' is a scalar; only arrays with a batch axis can be sharded");
    const int a = axis < 0 ? axis + r : axis;
    INGOT_CHECK(a >= 0 && a < r, "shard_batch: axis ", axis, " is out of range for '", key, "' of shape ",
                to_string(t.shape()));
    const int64_t n = t.dim(a);
    INGOT_CHECK(n % size == 0, "shard_batch: '", key, "' has ", n, " entries along axis ", a,
                ", which do not split into ", size, " equal shards; make the global batch a multiple of ", size);
    // [outer, n, inner] -> [outer, n / size, inner], rows [rank * part, (rank + 1) * part).
    const int64_t part = n / size;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; ++d) outer *= t.dim(d);
    for (int d = a + 1; d < r; ++d) inner *= t.dim(d);
    Shape shape = t.shape();
    shape[static_cast<size_t>(a)] = part;
    Tensor shard = Tensor::uninitialized(t.dtype(), shape);
    const Tensor src = t.contiguous();
    const size_t row = static_cast<size_t>(inner) * dtype_size(t.dtype());
    const char* from = static_cast<const char*>(src.raw_data());
    char* to = static_cast<char*>(shard.raw_data());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(to + static_cast<size_t>(o * part) * row, from + static_cast<size_t>(o * n + rank * part) * row,
                  static_cast<size_t>(part) * row);
    out.emplace(key, std::move(shard));
  }
  return out;
}

}  // namespace ingot::distributed
