// Placeholder: the reduce family is being written.
#include "ops/families.h"

namespace ingot::ops {
void register_reduce_ops() {}
}  // namespace ingot::ops
