// Gradient checkpointing: trade compute for memory in a joint forward + backward graph.
//
// The forward part (the first `forward_nodes` nodes, as append_backward left them) is split into
// `segments` runs of consecutive nodes producing like amounts of bytes. A forward value is kept when it crosses a segment
// boundary (read by a later segment), is a graph output, or lies in the last segment; every other
// forward value the backward reads is recomputed: its segment's nodes are duplicated and placed
// right before the first backward node that needs them, so those activations live only while
// the backward works on their segment. The duplicates carry the attribute `recompute` (their
// segment), which keeps CSE from merging them back into the forward nodes.
#pragma once

#include <string>

#include "ingot/graph.h"

namespace ingot {

inline constexpr const char* kRecomputeAttr = "recompute";

struct CheckpointReport {
  int segments = 0;          // forward segments (at most the number of forward nodes)
  int recomputed_nodes = 0;  // duplicated forward nodes
  int kept_values = 0;       // forward values the backward reads that stay stored (boundaries, last segment)
  std::string str() const;
};

// g: shape- and type-inferred, forward nodes first (node ids [0, forward_nodes)), then nodes that
// read them. segments >= 1.
CheckpointReport apply_gradient_checkpointing(Graph& g, NodeId forward_nodes, int segments);

}  // namespace ingot
