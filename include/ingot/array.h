// Lazy arrays (MLX-style): an `Array` is a shared handle to a value that is either data (a
// Tensor) or an op of the IR applied to other arrays. Ops record; nothing runs until `eval()`
// or until the data is read (`item()`, `tensor()`, `to_vector()`), and then the pending graph
// runs op by op through the reference backend (eager semantics), or through a compiled
// executable when the hot-path auto-compiler has one (include/ingot/function_compile.h).
//
//   Array x = random::normal({4, 8});
//   Array y = softmax(matmul(x, transpose(x)) * 0.5f, -1);
//   float s = sum(y).item<float>();   // evaluates here
//
// Shapes and dtypes are checked when an op is recorded, by the op registry's own shape and
// dtype rules, so `matmul(a, b)` with mismatched dims throws ingot::Error at that line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingot/dtype.h"
#include "ingot/graph.h"
#include "ingot/shape.h"
#include "ingot/tensor.h"

namespace ingot {

namespace detail {
struct ArrayImpl;
}

class Array {
 public:
  Array() = default;  // undefined; most ops reject it
  Array(Tensor value);  // NOLINT(google-explicit-constructor): data becomes an array
  Array(float value);   // NOLINT: a scalar literal (takes the dtype of the array it meets)
  Array(double value);  // NOLINT
  Array(int value);     // NOLINT
  template <class T>
  Array(const std::vector<T>& values, Shape shape) : Array(Tensor::from_vector<T>(values, std::move(shape))) {}

  bool defined() const { return static_cast<bool>(impl_); }
  DType dtype() const;
  const Shape& shape() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t dim(int axis) const;  // negative counts from the end
  int64_t size() const { return numel(shape()); }
  // True once the value is computed (or was data from the start).
  bool is_evaluated() const;
  // True for the stand-in arrays compile(fn) traces a function with.
  bool is_placeholder() const;

  // Reading data evaluates the array first. Inside a function traced by compile(fn) an array
  // that depends on the function's inputs has no data yet: reading it throws ingot::Error.
  const Tensor& tensor() const;
  template <class T>
  T item() const {
    return static_cast<T>(tensor().item(0));
  }
  template <class T>
  std::vector<T> to_vector() const {
    return tensor().to_vector<T>();
  }
  Array astype(DType t) const;

  // Identity of the underlying value (two handles to one value are the same array).
  bool same(const Array& o) const { return impl_ == o.impl_; }
  const std::shared_ptr<detail::ArrayImpl>& impl() const { return impl_; }
  explicit Array(std::shared_ptr<detail::ArrayImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<detail::ArrayImpl> impl_;
};

// Evaluates all of them in one graph (shared work is computed once).
void eval(const std::vector<Array>& arrays);
inline void eval(const Array& a) { eval(std::vector<Array>{a}); }

// Any op of the registry by name (src/ops/families.h), e.g. op("gelu", {x}, {{"approximate",
// std::string("tanh")}}). Multi-output ops return one array per output.
std::vector<Array> op_n(const std::string& name, const std::vector<Array>& inputs, Attrs attrs = {});
Array op(const std::string& name, const std::vector<Array>& inputs, Attrs attrs = {});

// ---- creation
Array array(Tensor value);
Array full(Shape shape, double value, DType dtype = DType::Float32);
Array zeros(Shape shape, DType dtype = DType::Float32);
Array ones(Shape shape, DType dtype = DType::Float32);
Array arange(int64_t n, DType dtype = DType::Float32);  // 0, 1, ..., n-1
// A scalar literal: it takes the dtype of the array operand it meets (like `x * 2.0`).
Array scalar(double value);

// ---- elementwise (NumPy broadcasting; scalars convert to literals)
Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator%(const Array& a, const Array& b);  // mod: the divisor's sign, like Python's %
Array operator-(const Array& a);
Array operator<(const Array& a, const Array& b);
Array operator<=(const Array& a, const Array& b);
Array operator>(const Array& a, const Array& b);
Array operator>=(const Array& a, const Array& b);
Array equal(const Array& a, const Array& b);
Array not_equal(const Array& a, const Array& b);
Array pow(const Array& a, const Array& b);
Array mod(const Array& a, const Array& b);   // NumPy mod: the divisor's sign; integer divisor 0 gives 0
Array fmod(const Array& a, const Array& b);  // C fmod: the dividend's sign; integer divisor 0 gives 0
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array where(const Array& cond, const Array& a, const Array& b);
Array exp(const Array& x);
Array log(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array sin(const Array& x);
Array cos(const Array& x);
Array tanh(const Array& x);
Array sigmoid(const Array& x);
Array erf(const Array& x);
Array gelu(const Array& x, bool tanh_approximation = false);
Array abs(const Array& x);
Array relu(const Array& x);
Array sign(const Array& x);
Array floor(const Array& x);
Array ceil(const Array& x);
Array square(const Array& x);  // x * x
Array astype(const Array& x, DType t);

// ---- reductions (empty axes = all)
Array sum(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Array mean(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Array max(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Array min(const Array& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Array argmax(const Array& x, int64_t axis, bool keepdims = false);
std::pair<Array, Array> moments(const Array& x, std::vector<int64_t> axes, bool keepdims = false);
// (values, int64 indices) of the k largest (largest = false: smallest) elements along `axis`, in
// order; a NaN counts as the largest, equal values come in index order (ONNX's TopK).
std::pair<Array, Array> top_k(const Array& x, int64_t k, int64_t axis = -1, bool largest = true);
Array softmax(const Array& x, int64_t axis = -1);
Array log_softmax(const Array& x, int64_t axis = -1);
Array layer_norm(const Array& x, const Array& weight, const Array& bias, int64_t axis = -1, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) over dims axis..end, times weight (the shape of those dims) when
// given: RMSNorm (LLaMA, T5), one row kernel on the CPU backend.
Array rms_norm(const Array& x, const std::optional<Array>& weight = std::nullopt, int64_t axis = -1,
               double eps = 1e-5);
// softmax(q k^T * scale + mask) v over q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] as one op
// (no [Sq, Sk] matrix in memory on the CPU backend). scale 0: 1/sqrt(D). mask: bool (true =
// attend) or float (added), broadcast to [..., Sq, Sk]; causal hides keys j > i + causal_offset.
// k and v may have fewer heads (axis -3) than q, dividing them (grouped-query attention).
Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v,
                                   const std::optional<Array>& mask = std::nullopt, double scale = 0.0,
                                   bool causal = false, int64_t causal_offset = 0);

// ---- linear algebra and convolution
Array matmul(const Array& a, const Array& b);
Array conv2d(const Array& x, const Array& w, std::vector<int64_t> stride = {1, 1},
             std::vector<int64_t> padding = {0, 0});
// stride {} = the kernel; ceil_mode: a last window past the padded end where the floor rule
// stops short (PyTorch's ceil_mode=True)
Array max_pool2d(const Array& x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {},
                 std::vector<int64_t> padding = {0, 0}, bool ceil_mode = false);

// ---- movement
Array reshape(const Array& x, std::vector<int64_t> shape);  // -1 inferred
Array transpose(const Array& x, std::vector<int64_t> perm = {});  // empty = reverse
Array broadcast_to(const Array& x, std::vector<int64_t> shape);
Array slice(const Array& x, std::vector<int64_t> starts, std::vector<int64_t> ends,
            std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
Array concatenate(const std::vector<Array>& xs, int64_t axis = 0);
Array take(const Array& x, const Array& indices, int64_t axis = 0);
Array take_along_axis(const Array& x, const Array& indices, int64_t axis);
// labels [...] -> [..., classes]: 1 where the last index equals the label. A label outside
// [0, classes) (negative included) gives a row of zeros, as in jax.nn.one_hot; no error, since the
// labels are data and may only be known when the graph runs.
Array one_hot(const Array& labels, int64_t classes, DType dtype = DType::Float32);

// ---- random (counter-based; see random::state)
namespace random {
// The global random state: an int64 scalar array that each draw without an explicit key reads
// and advances. Pass `&random::state()` in compile's `inputs` and `outputs` so a compiled
// function draws fresh numbers on every call (MLX's `mx.random.state`).
Array& state();
void seed(uint64_t s);
// A fresh key from the global state (advances it).
Array new_key();
Array uniform(Shape shape, double low = 0, double high = 1, DType dtype = DType::Float32,
              const Array& key = Array());
Array normal(Shape shape, double mean = 0, double std = 1, DType dtype = DType::Float32,
             const Array& key = Array());
}  // namespace random
// Inverted dropout with probability p, drawing from `key` (default: random::new_key()).
Array dropout(const Array& x, double p, const Array& key = Array());

}  // namespace ingot
