// Placeholder: the elementwise family is being written.
#include "ops/families.h"

namespace ingot::ops {
void register_elementwise_ops() {}
}  // namespace ingot::ops
