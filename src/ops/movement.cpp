// Placeholder: the movement family is being written.
#include "ops/families.h"

namespace ingot::ops {
void register_movement_ops() {}
}  // namespace ingot::ops
