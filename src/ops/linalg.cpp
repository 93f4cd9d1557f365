// Placeholder: the linalg family is being written.
#include "ops/families.h"

namespace ingot::ops {
void register_linalg_ops() {}
}  // namespace ingot::ops
