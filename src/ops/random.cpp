// Placeholder: the random family is being written.
#include "ops/families.h"

namespace ingot::ops {
void register_random_ops() {}
}  // namespace ingot::ops
