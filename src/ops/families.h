// The built-in op families and the catalogue of ops they define. This list is the contract
// between frontends (which emit these names and attributes) and everything downstream.
//
// Conventions: tensors are row-major; image ops use NCHW with weights [Cout, Cin/groups, kh, kw];
// `axes`/`axis` may be negative; integer flags (`keepdims`, `training`) are 0/1.
//
// Every op has a gradient rule (OpDef::vjp) beside its registration, or is marked no_gradient
// (comparisons, sign, floor, ceil, argmax, random sources, zeros_like, numel; top_k's indices); concat_part has
// neither. The ops marked (grad) below exist for backward graphs: `like` operands are read only
// for their shapes, so symbolic sizes ("N") are resolved at run time.
//
// unary.cpp, binary.cpp: the elementwise family (FusionClass::Elementwise; binary and ternary
// ops broadcast like NumPy). Each op's definition carries its ElementwiseForms (CPU function,
// Python and ONNX forms), so a new elementwise op is written there only; `ingot ops` lists them.
//   unary, float result (ints compute in float32): exp log sqrt rsqrt sin cos tanh sigmoid erf
//       asin acos atan, gelu {approximate: "none" | "tanh"}
//   unary, same dtype: neg abs relu sign floor ceil
//   cast {dtype: "<dtype name>"}
//   binary, promoted dtype: add sub mul pow mod fmod maximum minimum; div (float result)
//   binary, bool result: equal not_equal less less_equal greater greater_equal
//   where(cond, a, b): cond is nonzero-is-true; dtype promote(a, b)
// reduce.cpp
//   sum mean max min {axes: ints (missing or empty = all), keepdims: 0|1}     (Reduction)
//       sum of bool -> int64; mean -> float; max/min keep dtype
//   argmax {axis: int, keepdims: 0|1} -> int64                                 (Reduction)
//   moments(input) {axes, keepdims: 0|1} -> (mean, variance) biased, 2 outputs (Reduction)
//   softmax log_softmax {axis: int = -1}                                       (RowKernel)
//   (grad) sum_to_like(x, like): x summed over the dims NumPy broadcasting expanded from like's
//       shape (float; the inverse of a broadcast)                               (Opaque)
//   (grad) numel(x) {axes: ints (empty = all), dtype}: scalar element count of x over axes (Opaque)
// normalization.cpp (RowKernel; statistics in double)
//   layer_norm(input, [weight], [bias]) {axis: int = -1, eps: 1e-5}: normalizes over
//       dims axis..end; weight/bias have the shape of those dims
//   rms_norm(input, [weight]) {axis: int = -1, eps: 1e-5}: x / sqrt(mean(x^2) + eps) over
//       dims axis..end (no centering, no bias), times weight of those dims' shape
//   batch_norm(input, weight, bias, mean, variance) {eps: 1e-5}: per-channel (dim 1)
//       (x - mean) / sqrt(variance + eps) * weight + bias; all four are [C]
// linalg.cpp
//   matmul(a, b): NumPy matmul (1-D operands promoted and squeezed, batch dims broadcast)
//   conv2d(input, weight, [bias]) {stride: [sh, sw] = [1,1], padding: [ph, pw] = [0,0],
//       dilation: [dh, dw] = [1,1], groups: int = 1}                           (Dense)
//   (grad) conv2d_input_grad(dy, weight, like_input), conv2d_weight_grad(input, dy, like_weight)
//       {conv2d's attrs}: d conv2d / d input and d weight, shaped like the third operand (Opaque)
// pool.cpp (windows shared with conv2d: window_util.h)
//   max_pool2d avg_pool2d {kernel: [kh, kw], stride: [sh, sw] = kernel, padding: [ph, pw] = 0,
//       avg only: count_include_pad: 0|1 = 1; max only: ceil_mode: 0|1 = 0, a last window
//       past the padded end where the floor rule stops short (PyTorch's rule)}     (Opaque)
//   global_avg_pool2d {keepdims: 0|1 = 0}: [N, C, H, W] -> [N, C] (or [N, C, 1, 1]) (Reduction)
//   (grad) max_pool2d_grad(input, dy) {max_pool2d's attrs}: dy routed to each window's first
//       max (the element the forward picked), overlaps summed                    (Opaque)
//   (grad) avg_pool2d_grad(dy, like_input) {avg_pool2d's attrs}: dy spread evenly over each
//       window's averaged elements                                               (Opaque)
// movement.cpp (FusionClass::Injective)
//   identity
//   reshape {shape: ints; -1 = inferred, 0 = copy the input's dim at that position}
//   transpose {perm: ints; missing = reverse}
//   broadcast_to {shape: ints}
//   slice {starts, ends, axes, steps: ints; ends clamp; negative indices count from the end}
//   concat(x0, x1, ...) {axis: int}
//   (grad) broadcast_to_like(x, like): x broadcast to like's shape     (Elementwise: fuses)
//   (grad) reshape_like(x, like): x's elements in like's shape
//   (grad) expand_dims(x) {axes: ints, positions in the result}: inserts size-1 dims
//   (grad) zeros_like(x): zeros of x's shape and dtype
//   (grad) slice_scatter(grad, like) {slice's attrs}: zeros like `like`, grad where slice reads
//   (grad) concat_part(grad, x0, x1, ...) {axis, index}: the part of grad that concat took
//       from x<index>
// indexing.cpp (FusionClass::Injective; gradient-op helpers shared with movement.cpp:
// gradient_util.h)
//   gather(input, indices) {axis: int = 0}: NumPy take; out = in[:axis] + idx + in[axis+1:]
//   take_along_axis(input, indices) {axis: int}: NumPy take_along_axis (torch.gather); indices
//       have the input's rank and match it off `axis`; out has the indices' shape
//   (grad) index_add(like, indices, updates) {axis = 0}: zeros like `like`, plus updates added
//       at the rows gather read (repeats add up)
//   (grad) scatter_add(like, indices, updates) {axis}: zeros like `like`, plus updates added
//       where take_along_axis read (repeats add up)
// attention.cpp
//   scaled_dot_product_attention(q, k, v, [mask]) {scale: float = 0 (1/sqrt(D)), causal: 0|1,
//       causal_offset: int = 0}: q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv];
//       softmax(scale q k^T + mask) v, a bool mask true where a query may attend, a float mask
//       added to the scores, broadcast to [..., Sq, Sk]; causal hides keys j > i + causal_offset;
//       k and v may have fewer heads (axis -3) than q when theirs divide q's (query head h
//       reads head h / (Hq / Hk)); a row with every key hidden is NaN              (Opaque)
//   (grad) scaled_dot_product_attention_grad(q, k, v, dy, [mask]) -> (dq, dk, dv, dmask):
//       dmask like the mask (zeros for a bool one), [0] without one                (Opaque)
// sort.cpp
//   top_k(x) {k: int, axis: int = -1, largest: 0|1 = 1} -> (values, int64 indices): the k largest
//       (smallest) along axis, in order; NaN counts as the largest; equal values in index order
//       (ONNX's TopK)                                                              (Opaque)
// random.cpp (seeded, counter-based: same seed, same numbers, on every backend)
//   random_uniform([key]) {shape: ints, low: 0, high: 1, seed: int, dtype: "float32"}  (Source)
//   random_normal([key]) {shape: ints, mean: 0, std: 1, seed: int, dtype: "float32"}   (Source)
//   dropout(input, [key]) {p: float, seed: int, training: 0|1}: training keeps x/(1-p) where
//       uniform(seed, i) >= p, else 0; not training = identity                  (Elementwise)
//   key: an optional integer scalar input mixed into the seed (run-time random state)
//
// collective.cpp (OpDef::collective: every rank of the process group runs them together; see
// include/ingot/distributed.h; group_size: int, required, the group the graph was built for)  (Opaque)
//   all_reduce {op: "sum" | "mean" | "max" = "sum", group_size}: every rank gets the combination
//       of every rank's x; mean needs a float dtype; bool refused
//   all_gather {group_size}: the ranks' x concatenated along axis 0 in rank order ([N, ...] ->
//       [group_size * N, ...])
//   broadcast {root: int = 0, group_size}: rank root's x on every rank
//   reduce_scatter {group_size}: the sum over ranks split along axis 0 into group_size parts;
//       rank r gets part r (the leading dimension must be divisible by group_size)
//   (grad) reduce {root: int = 0, group_size}: the sum over ranks on rank root, zeros elsewhere
//
// control_flow.cpp (ops that own subgraphs; the file's header states each contract)
//   if(cond, operands...) [then, else]
//   while(carried..., invariants...) [cond, body] {num_invariant: 0, max_iterations}
//   scan(carry..., xs..., invariants...) [body] {num_carry, num_xs, reverse: 0|1}
#pragma once

namespace ingot::ops {

void register_unary_ops();
void register_binary_ops();
void register_reduce_ops();
void register_normalization_ops();
void register_linalg_ops();
void register_pool_ops();
void register_movement_ops();
void register_indexing_ops();
void register_random_ops();
void register_attention_ops();
void register_sort_ops();
void register_collective_ops();
void register_control_flow_ops();

inline void register_all_families() {
  register_unary_ops();
  register_binary_ops();
  register_reduce_ops();
  register_normalization_ops();
  register_linalg_ops();
  register_pool_ops();
  register_movement_ops();
  register_indexing_ops();
  register_random_ops();
  register_attention_ops();
  register_sort_ops();
  register_collective_ops();
  register_control_flow_ops();
}

}  // namespace ingot::ops
