// Tensor: a typed, strided view of a reference-counted, 64-byte-aligned host buffer.
//
//   Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
//   std::vector<float> v = x.transpose({1, 0}).to_vector<float>();  // {1, 3, 2, 4}
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/dtype.h"
#include "ingot/error.h"
#include "ingot/shape.h"

namespace ingot {

using Strides = std::vector<int64_t>;  // in elements
Strides contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  // A new contiguous tensor, zero-filled.
  Tensor(DType dtype, Shape shape);
  // A new contiguous tensor whose contents are unspecified: for outputs a kernel overwrites
  // completely, where zero-filling would be a wasted pass over memory.
  static Tensor uninitialized(DType dtype, Shape shape);
  // Borrow external memory (no copy); `owner` keeps it alive while any view exists.
  static Tensor wrap(void* data, DType dtype, Shape shape, Strides strides,
                     std::shared_ptr<void> owner);

  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    Tensor t(dtype_v<T>, std::move(shape));
    INGOT_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "Tensor::from_vector: ",
                values.size(), " values do not fill shape ", to_string(t.shape()));
    T* dst = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
    return t;
  }
  template <class T>
  static Tensor scalar(T value) {
    return from_vector<T>({value}, {});
  }
  static Tensor full(DType dtype, Shape shape, double value);

  // Values in row-major order, converted to T from whatever dtype the tensor holds.
  template <class T>
  std::vector<T> to_vector() const;

  bool defined() const { return static_cast<bool>(storage_); }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative counts from the end
  int64_t numel() const { return ingot::numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  void* raw_data() { return static_cast<char*>(storage_.get()) + offset_bytes_; }
  const void* raw_data() const { return static_cast<const char*>(storage_.get()) + offset_bytes_; }
  template <class T>
  T* data() {
    check_type(dtype_v<T>);
    return static_cast<T*>(raw_data());
  }
  template <class T>
  const T* data() const {
    check_type(dtype_v<T>);
    return static_cast<const T*>(raw_data());
  }
  // Element i of the row-major order as double (any dtype, any strides). Slow; for tests.
  double item(int64_t flat_index = 0) const;

  // Views share the buffer; copies do not.
  Tensor reshape(Shape shape) const;  // a view when contiguous, else a copy
  Tensor transpose(const std::vector<int>& perm) const;  // always a view
  Tensor contiguous() const;  // this when already contiguous
  Tensor clone() const;
  Tensor astype(DType dtype) const;
  bool shares_storage(const Tensor& o) const { return storage_ == o.storage_; }

  std::string str(int max_elements = 8) const;  // "float32[2, 2] {1, 2, 3, 4}"

 private:
  void check_type(DType t) const;

  std::shared_ptr<void> storage_;
  size_t offset_bytes_ = 0;
  DType dtype_ = DType::Float32;
  Shape shape_;
  Strides strides_;
};

// std::vector<bool> is bit-packed, so bool gets its own definition.
template <>
std::vector<bool> Tensor::to_vector<bool>() const;

// Exact equality of dtype, shape and values.
bool equal(const Tensor& a, const Tensor& b);
// |a - b| <= atol + rtol * |b| elementwise, NaNs equal; shapes must match.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
double max_abs_diff(const Tensor& a, const Tensor& b);

// Copies `src` (any strides) into contiguous `dst` of the same shape and dtype.
void copy_strided(const Tensor& src, Tensor& dst);  // dst contiguous, same shape and dtype

// Tensor buffers of 1 MiB and more are recycled when freed instead of going back to the OS, so a
// model returning a new large output each call reuses warm pages. The cache holds at most
// `bytes` (default 4 GiB, or $INGOT_BUFFER_CACHE_MB); 0 disables it and frees what it holds.
//   ingot::set_buffer_cache_limit(size_t{1} << 30);  // keep at most 1 GiB of freed buffers
void set_buffer_cache_limit(size_t bytes);
size_t buffer_cache_bytes();  // bytes held in the cache now (freed, ready for reuse)

}  // namespace ingot
