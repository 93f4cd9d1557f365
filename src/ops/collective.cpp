// The collective family (see families.h): ops whose result combines the operand of every rank of
// the process group (include/ingot/distributed.h). Their reference kernels call the communicator;
// the CPU backend runs them through its host callback, as every op it does not generate code for.
//
// Each node records the group's size it was built for (`group_size`), so a graph says what it
// computes on its own, shape rules need no live group, and running it in a group of another size
// is a clear error instead of a wrong shape. They are OpDef::collective: never folded at compile
// time nor moved out of loops (src/ir/op_registry.h says why).
//
// Gradients, with L the sum over ranks of each rank's loss: all_reduce(sum)'s is all_reduce(sum),
// mean's is mean, max's routes the summed cotangent to the elements equal to the max (every tied
// one gets it); all_gather's is reduce_scatter and back; broadcast's is reduce (the sum on the
// root, zeros elsewhere) and back.
#include <array>

#include "distributed/started.h"
#include "ingot/distributed.h"
#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/kernel_util.h"

namespace ingot::ops {
namespace {

int64_t group_size_attr(const Node& n) {
  const int64_t size = n.attrs.get_int("group_size");
  INGOT_CHECK(size >= 1, n.op, ": group_size must be at least 1, got ", size);
  return size;
}

// The live group must be the one the graph was built for.
void check_group(const Node& n) {
  const int64_t built = group_size_attr(n);
  const int live = distributed::size();
  INGOT_CHECK(built == live, n.op, " was built for a group of ", built, " ranks (attribute group_size) but runs in a group of ",
              live, " (rank ", distributed::rank(), "); build the graph again under this launch");
}

int root_attr(const Node& n) {
  const int64_t root = n.attrs.get_int("root", 0);
  const int64_t size = group_size_attr(n);
  INGOT_CHECK(root >= 0 && root < size, n.op, ": root ", root, " is not a rank of a group of ", size);
  return static_cast<int>(root);
}

distributed::ReduceOp reduce_op_attr(const Node& n) { return distributed::parse_reduce_op(n.attrs.get_string("op", "sum")); }

// ---------------------------------------------------------------- shape and dtype rules

void same_shape_rule(ShapeInfer& s) {
  or_fail(s, [&] { (void)group_size_attr(s.node()); });
  s.same_shape(s.in(0), s.out());
}

// all_gather multiplies axis 0 by the group's size (from_in = true); reduce_scatter divides it.
void scale_leading_axis(ShapeInfer& s, bool gather) {
  const int64_t size = or_fail(s, [&] { return group_size_attr(s.node()); });
  const ValueId x = s.in(0), y = s.out();
  if (!s.has_rank(x) && !s.has_rank(y)) return;
  const int r = s.has_rank(x) ? s.rank(x) : s.rank(y);
  if (r == 0) s.fail(s.node().op + " needs an array of rank >= 1 (it works along axis 0)");
  s.set_rank(x, r);
  s.set_rank(y, r);
  for (int d = 1; d < r; ++d) s.unify(s.dim(x, d), s.dim(y, d));
  const ValueId small = gather ? x : y, large = gather ? y : x;
  if (const std::optional<int64_t> n = s.value(s.dim(small, 0))) s.bind(s.dim(large, 0), *n * size);
  if (const std::optional<int64_t> n = s.value(s.dim(large, 0))) {
    if (*n % size != 0)
      s.fail(s.node().op + ": the leading dimension (" + std::to_string(*n) + ") must be divisible by the group's size (" +
             std::to_string(size) + ")");
    s.bind(s.dim(small, 0), *n / size);
  }
}

void all_gather_shape(ShapeInfer& s) { scale_leading_axis(s, true); }
void reduce_scatter_shape(ShapeInfer& s) { scale_leading_axis(s, false); }

void numbers_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(in[0] != DType::Bool, n.op, ": needs numbers, got bool");
  out[0] = in[0];
}

void all_reduce_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  numbers_dtype(n, in, out);
  if (reduce_op_attr(n) == distributed::ReduceOp::Mean)
    INGOT_CHECK(is_floating(in[0]), n.op, ": a mean needs a float dtype, got ", dtype_name(in[0]),
                " (cast first, or use op = sum)");
}

void any_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  if (n.attrs.has("root")) (void)root_attr(n);  // a bad root is reported at compile time
  out[0] = in[0];
}

void reduce_to_root_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  (void)root_attr(n);
  numbers_dtype(n, in, out);
}

// A bucket (all_reduce_start / all_reduce_wait, made by pass gradient_buckets): the start takes
// the bucket's tensors and gives a ticket (an int64 scalar); the wait gives the reduced tensors,
// whose shapes it records in `ranks` (one per result) and `dims` (all their dims, back to back).
std::vector<Shape> bucket_shapes(const Node& n) {
  const std::vector<int64_t> ranks = n.attrs.get_ints("ranks"), dims = n.attrs.get_ints("dims");
  INGOT_CHECK(ranks.size() == n.outputs.size(), n.op, ": attribute ranks has ", ranks.size(), " entries for ",
              n.outputs.size(), " results");
  std::vector<Shape> shapes;
  size_t at = 0;
  for (int64_t r : ranks) {
    INGOT_CHECK(r >= 0 && at + static_cast<size_t>(r) <= dims.size(), n.op, ": attributes ranks and dims disagree");
    shapes.emplace_back(dims.begin() + static_cast<std::ptrdiff_t>(at), dims.begin() + static_cast<std::ptrdiff_t>(at + r));
    at += static_cast<size_t>(r);
  }
  INGOT_CHECK(at == dims.size(), n.op, ": attributes ranks and dims disagree");
  return shapes;
}

void start_shape(ShapeInfer& s) {
  or_fail(s, [&] { (void)group_size_attr(s.node()); });
  s.set_rank(s.out(), 0);
}

void wait_shape(ShapeInfer& s) {
  const std::vector<Shape> shapes = or_fail(s, [&] { return bucket_shapes(s.node()); });
  s.set_rank(s.in(0), 0);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ValueId y = s.out(static_cast<int>(i));
    s.set_rank(y, static_cast<int>(shapes[i].size()));
    for (size_t d = 0; d < shapes[i].size(); ++d) s.bind(s.dim(y, static_cast<int>(d)), shapes[i][d]);
  }
}

void start_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  for (DType t : in) {
    INGOT_CHECK(t == in[0], n.op, ": the tensors of one bucket must share a dtype, got ", dtype_name(in[0]), " and ",
                dtype_name(t));
    std::array<DType, 1> one{};
    all_reduce_dtype(n, std::span<const DType>(&t, 1), one);
  }
  out[0] = DType::Int64;
}

void wait_dtype(const Node& n, std::span<const DType> in, std::span<DType> out) {
  INGOT_CHECK(in[0] == DType::Int64, n.op, ": the ticket must be int64, got ", dtype_name(in[0]));
  for (DType& t : out) t = n.attrs.get_dtype("dtype");
}

// ---------------------------------------------------------------- kernels

void all_reduce_start_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  const int64_t ticket = distributed::detail::start_all_reduce(std::vector<Tensor>(in.begin(), in.end()), reduce_op_attr(n));
  out[0] = Tensor::full(DType::Int64, {}, static_cast<double>(ticket));
}

void all_reduce_wait_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  std::vector<Tensor> reduced = distributed::detail::finish_all_reduce(in[0].data<int64_t>()[0]);
  const std::vector<Shape> shapes = bucket_shapes(n);
  INGOT_CHECK(reduced.size() == out.size(), n.op, ": the started all-reduce has ", reduced.size(), " tensors, the wait ",
              out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    INGOT_CHECK(reduced[i].shape() == shapes[i], n.op, ": result ", i, " is ", to_string(reduced[i].shape()),
                ", the wait expects ", to_string(shapes[i]));
    out[i] = std::move(reduced[i]);
  }
}


void all_reduce_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  out[0] = distributed::all_reduce(in[0], reduce_op_attr(n));
}

void all_gather_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  out[0] = distributed::all_gather(in[0]);
}

void broadcast_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  out[0] = distributed::broadcast(in[0], root_attr(n));
}

void reduce_scatter_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  out[0] = distributed::reduce_scatter(in[0]);
}

void reduce_kernel(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  check_group(n);
  out[0] = distributed::reduce(in[0], root_attr(n));
}

// ---------------------------------------------------------------- gradients

Attrs group_attrs(const VjpContext& c) { return {{"group_size", c.attrs().get_int("group_size")}}; }

void all_reduce_vjp(VjpContext& c) {
  if (c.grad_out(0) < 0) return;
  const distributed::ReduceOp op = reduce_op_attr(c.node());
  Attrs a = group_attrs(c);
  a.set("op", std::string(op == distributed::ReduceOp::Mean ? "mean" : "sum"));
  const ValueId g = c.op("all_reduce", {c.grad_out(0)}, a);
  if (op != distributed::ReduceOp::Max) {
    c.set_grad(0, g);
    return;
  }
  const ValueId hit = c.op("cast", {c.op("equal", {c.in(0), c.out(0)})}, {{"dtype", std::string(dtype_name(c.dtype(g)))}});
  c.set_grad(0, c.op("mul", {g, hit}));
}

void all_gather_vjp(VjpContext& c) {
  if (c.grad_out(0) >= 0) c.set_grad(0, c.op("reduce_scatter", {c.grad_out(0)}, group_attrs(c)));
}

void reduce_scatter_vjp(VjpContext& c) {
  if (c.grad_out(0) >= 0) c.set_grad(0, c.op("all_gather", {c.grad_out(0)}, group_attrs(c)));
}

// broadcast and reduce (to a root) are each other's transpose.
void broadcast_vjp(VjpContext& c) {
  if (c.grad_out(0) < 0) return;
  Attrs a = group_attrs(c);
  a.set("root", c.attrs().get_int("root", 0));
  c.set_grad(0, c.op("reduce", {c.grad_out(0)}, a));
}

void reduce_vjp(VjpContext& c) {
  if (c.grad_out(0) < 0) return;
  Attrs a = group_attrs(c);
  a.set("root", c.attrs().get_int("root", 0));
  c.set_grad(0, c.op("broadcast", {c.grad_out(0)}, a));
}

OpDef collective(std::string name, ShapeRule shape, DTypeRule dtype, Kernel eval, VjpRule vjp, std::string doc) {
  return OpDef{.name = std::move(name),
               .fusion = FusionClass::Opaque,
               .shape = shape,
               .dtype = dtype,
               .eval = eval,
               .doc = std::move(doc),
               .vjp = vjp,
               .collective = true};
}

}  // namespace

void register_collective_ops() {
  register_op(collective("all_reduce", same_shape_rule, all_reduce_dtype, all_reduce_kernel, all_reduce_vjp,
                         "every rank's x combined by {op = sum | mean | max} across the {group_size} ranks"));
  register_op(collective("all_gather", all_gather_shape, any_dtype, all_gather_kernel, all_gather_vjp,
                         "the {group_size} ranks' x concatenated along axis 0, in rank order"));
  register_op(collective("broadcast", same_shape_rule, any_dtype, broadcast_kernel, broadcast_vjp,
                         "rank {root = 0}'s x, on each of the {group_size} ranks"));
  register_op(collective("reduce_scatter", reduce_scatter_shape, numbers_dtype, reduce_scatter_kernel,
                         reduce_scatter_vjp,
                         "the sum over the {group_size} ranks split along axis 0; rank r keeps part r"));
  register_op(collective("reduce", same_shape_rule, reduce_to_root_dtype, reduce_kernel, reduce_vjp,
                         "(grad of broadcast) the sum over the {group_size} ranks on rank {root = 0}, zeros elsewhere"));
  // A bucket's two halves have no gradient: the gradient_buckets pass makes them after autodiff.
  OpDef start = collective("all_reduce_start", start_shape, start_dtype, all_reduce_start_kernel, nullptr,
                           "starts the all-reduce {op = sum | mean | max} of its operands (one dtype) on the "
                           "{group_size} ranks' communication threads; gives the ticket all_reduce_wait takes");
  start.max_inputs = -1;
  register_op(std::move(start));
  OpDef wait = collective("all_reduce_wait", wait_shape, wait_dtype, all_reduce_wait_kernel, nullptr,
                          "the results of the started all-reduce (ticket) as {dtype} arrays of the shapes {ranks} "
                          "and {dims} record");
  wait.num_outputs = -1;
  register_op(std::move(wait));
}

}  // namespace ingot::ops
