// The random family: random_uniform, random_normal and dropout (see families.h). Element i of
// every op draws counter i of the seed's stream (core/random.h), so any backend, thread split
// or evaluation order reproduces the same numbers.
#include "core/random.h"

#include "ir/op_registry.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "runtime/parallel.h"

namespace ingot::ops {
namespace {

constexpr int64_t kGrain = 1 << 14;

Shape source_shape(const Node& n) {
  const std::vector<int64_t> shape = n.attrs.get_ints("shape");
  for (int64_t d : shape)
    INGOT_CHECK(d >= 0, n.op, ": negative dimension in shape ", to_string(Shape(shape)));
  return shape;
}


// The seed is required: two random ops must never share a stream by accident.
uint64_t seed_attr(const Node& n) { return static_cast<uint64_t>(n.attrs.get_int("seed")); }

// An optional trailing `key` input (an integer scalar) is mixed into the seed, so one graph
// draws different numbers per call when its key is run-time data (the lazy arrays' random state).
uint64_t stream_seed(const Node& n, std::span<const Tensor> in, size_t key_index) {
  const uint64_t seed = seed_attr(n);
  if (in.size() <= key_index) return seed;
  const Tensor& key = in[key_index];
  INGOT_CHECK(key.numel() == 1 && is_integral(key.dtype()), n.op, ": key must be an integer scalar, got ",
              dtype_name(key.dtype()), to_string(key.shape()));
  return rng::mix64(seed ^ rng::mix64(static_cast<uint64_t>(static_cast<int64_t>(key.item(0)))));
}

void key_shape_rule(ShapeInfer& s, int key_index) {
  if (s.num_inputs() > key_index) s.set_rank(s.in(key_index), 0);
}

void check_key_dtype(const Node& n, std::span<const DType> in, size_t key_index) {
  if (in.size() > key_index)
    INGOT_CHECK(is_integral(in[key_index]), n.op, ": key must be an integer scalar, got ",
                dtype_name(in[key_index]));
}

void source_shape_rule(ShapeInfer& s) {
  key_shape_rule(s, 0);
  const Shape shape = or_fail(s, [&] { return source_shape(s.node()); });
  s.set_rank(s.out(), static_cast<int>(shape.size()));
  for (size_t i = 0; i < shape.size(); ++i) s.bind(s.dim(s.out(), static_cast<int>(i)), shape[i]);
}

DType source_dtype(const Node& n) {
  const DType t = parse_dtype(n.attrs.get_string("dtype", "float32"));
  INGOT_CHECK(is_floating(t), n.op, ": dtype must be a float type, got ", dtype_name(t));
  return t;
}

void dtype_source(const Node& n, std::span<const DType> in, std::span<DType> out) {
  check_key_dtype(n, in, 0);
  (void)seed_attr(n);  // a missing seed is reported at compile time, not first at run time
  out[0] = source_dtype(n);
}

// out[i] = T(a + b * draw(seed, i)), computed in double.
template <class Draw>
void fill_random(const Node& n, std::span<const Tensor> in, Tensor& out, double a, double b, Draw draw) {
  const uint64_t seed = stream_seed(n, in, 0);
  out = Tensor(source_dtype(n), source_shape(n));
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    parallel_for(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        p[i] = T(static_cast<compute_t<T>>(a + b * draw(seed, static_cast<uint64_t>(i))));
    });
  });
}

void random_uniform_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const double low = n.attrs.get_float("low", 0), high = n.attrs.get_float("high", 1);
  fill_random(n, in, out[0], low, high - low,
              [](uint64_t seed, uint64_t i) { return static_cast<double>(rng::uniform01(seed, i)); });
}

void random_normal_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  const double mean = n.attrs.get_float("mean", 0), std = n.attrs.get_float("std", 1);
  fill_random(n, in, out[0], mean, std, [](uint64_t seed, uint64_t i) { return rng::normal(seed, i); });
}

// --- dropout ---------------------------------------------------------------------------------

struct DropoutAttrs {
  double p;
  uint64_t seed;
  bool training;
};

DropoutAttrs dropout_attrs(const Node& n) {
  DropoutAttrs a{n.attrs.get_float("p"), seed_attr(n), n.attrs.get_int("training") != 0};
  INGOT_CHECK(a.p >= 0 && a.p <= 1, "dropout: p must be in [0, 1], got ", a.p);
  return a;
}

void dtype_dropout(const Node& n, std::span<const DType> in, std::span<DType> out) {
  (void)dropout_attrs(n);  // attribute errors at compile time
  check_key_dtype(n, in, 1);
  INGOT_CHECK(is_floating(in[0]), "dropout needs a float input, got ", dtype_name(in[0]));
  out[0] = in[0];
}

// Keeps x[i] * 1/(1 - p) where uniform01(seed, i) >= p (compared in double), else 0.
void dropout_eval(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) {
  DropoutAttrs a = dropout_attrs(n);
  a.seed = stream_seed(n, in, 1);
  INGOT_CHECK(is_floating(in[0].dtype()), "dropout needs a float input, got ",
              dtype_name(in[0].dtype()));
  if (!a.training) {
    out[0] = in[0].clone();
    return;
  }
  out[0] = Tensor(in[0].dtype(), in[0].shape());
  dispatch_dtype(in[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const C scale = a.p < 1 ? static_cast<C>(1 / (1 - a.p)) : C(0);
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    parallel_for(in[0].numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const bool keep = static_cast<double>(rng::uniform01(a.seed, static_cast<uint64_t>(i))) >= a.p;
        y[i] = T(keep ? static_cast<C>(x[i]) * scale : C(0));
      }
    });
  });
}

// The same mask and scale as the forward pass (same seed, same element counter).
// The same mask on the cotangent: the same seed, and the same key input when there is one.
void dropout_vjp(VjpContext& c) {
  std::vector<ValueId> ins{c.grad_out()};
  if (c.num_inputs() > 1) ins.push_back(c.in(1));
  c.set_grad(0, c.op("dropout", std::move(ins), c.attrs()));
}

}  // namespace

void register_random_ops() {
  register_op(OpDef{.name = "random_uniform",
                    .min_inputs = 0,
                    .max_inputs = 1,
                    .fusion = FusionClass::Source,
                    .shape = source_shape_rule,
                    .dtype = dtype_source,
                    .eval = random_uniform_eval,
                    .doc = "uniform numbers in [low, high) of {shape, dtype}, from {seed} and an optional key input",
                    .vjp = no_gradient});
  register_op(OpDef{.name = "random_normal",
                    .min_inputs = 0,
                    .max_inputs = 1,
                    .fusion = FusionClass::Source,
                    .shape = source_shape_rule,
                    .dtype = dtype_source,
                    .eval = random_normal_eval,
                    .doc = "normal numbers (mean, std) of {shape, dtype}, from {seed} and an optional key input",
                    .vjp = no_gradient});
  register_op(OpDef{.name = "dropout",
                    .max_inputs = 2,
                    .fusion = FusionClass::Elementwise,
                    .shape =
                        [](ShapeInfer& s) {
                          key_shape_rule(s, 1);
                          s.same_shape(s.in(0), s.out());
                        },
                    .dtype = dtype_dropout,
                    .eval = dropout_eval,
                    .doc = "training: zeroes elements with probability p, scales the rest by "
                           "1/(1-p); else identity",
                    .vjp = dropout_vjp,
                    // Compiled code runs it only at inference (the CPU backend's is_native).
                    .elementwise = ElementwiseForms{.kind = ElementwiseForms::Kind::Identity}});
}

}  // namespace ingot::ops
