// What the control-flow ops' definitions (control_flow.cpp) and their gradient rules
// (control_flow_vjp.cpp) share: the attributes that split a node's operands, and the rules.
#pragma once

#include <cstdint>

#include "ir/op_registry.h"

namespace ingot::ops {

// while: the last num_invariant operands pass to every iteration unchanged.
inline int64_t num_invariant(const Node& n) { return n.attrs.get_int("num_invariant", 0); }
// scan: the operands are (carry..., xs..., invariants...).
inline int64_t num_carry(const Node& n) { return n.attrs.get_int("num_carry"); }
inline int64_t num_xs(const Node& n) { return n.attrs.get_int("num_xs"); }

void if_vjp(VjpContext& c);
void scan_vjp(VjpContext& c);
void while_vjp(VjpContext& c);

}  // namespace ingot::ops
