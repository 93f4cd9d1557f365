#include "ingot/tensor.h"

#include <cmath>
#include <limits>
#include <cstdlib>
#include <sstream>

#include "core/buffer_cache.h"

namespace ingot {

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

namespace {
std::shared_ptr<void> allocate(size_t nbytes, bool zero = true) {
  std::shared_ptr<void> p = allocate_buffer(nbytes);
  if (zero && nbytes > 0) std::memset(p.get(), 0, nbytes);
  return p;
}

// Visits every element of `t` in row-major order, passing its byte offset from raw_data().
template <class F>
void for_each_offset(const Tensor& t, F&& f) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const size_t esize = dtype_size(t.dtype());
  if (t.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i) f(i, static_cast<int64_t>(i * esize));
    return;
  }
  const int r = t.rank();
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, off * static_cast<int64_t>(esize));
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < t.shape()[d]) {
        off += t.strides()[d];
        break;
      }
      off -= t.strides()[d] * (t.shape()[d] - 1);
      idx[d] = 0;
    }
  }
}

double load_as_double(DType t, const void* p) {
  return dispatch_dtype(t, [&](auto tag) -> double {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, p, sizeof(T));
    return static_cast<double>(static_cast<std::conditional_t<std::is_class_v<T>, float, T>>(v));
  });
}

template <class T>
T cast_from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_class_v<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    // As the cast op does: NaN is 0, out of range saturates (a float too large for int64 was
    // undefined behaviour: fuzz_onnx, a Slice bound of 1.4e219 read through astype).
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) INGOT_CHECK(d >= 0, "Negative dimension in shape ", to_string(shape_));
  strides_ = contiguous_strides(shape_);
  storage_ = allocate(nbytes());
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  for (int64_t d : t.shape_) INGOT_CHECK(d >= 0, "Negative dimension in shape ", to_string(t.shape_));
  t.strides_ = contiguous_strides(t.shape_);
  t.storage_ = allocate(t.nbytes(), /*zero=*/false);
  return t;
}

Tensor Tensor::wrap(void* data, DType dtype, Shape shape, Strides strides,
                    std::shared_ptr<void> owner) {
  INGOT_CHECK(strides.size() == shape.size(), "Tensor::wrap: strides rank ", strides.size(),
              " != shape rank ", shape.size());
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  // Aliasing constructor: the view points at `data` but shares ownership with `owner`.
  t.storage_ = std::shared_ptr<void>(std::move(owner), data);
  return t;
}

Tensor Tensor::full(DType dtype, Shape shape, double value) {
  Tensor t(dtype, std::move(shape));
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = cast_from_double<T>(value);
    T* p = static_cast<T*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  });
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  INGOT_CHECK(defined(), "to_vector() on an undefined tensor");
  std::vector<T> out(static_cast<size_t>(numel()));
  const char* base = static_cast<const char*>(raw_data());
  if (dtype_ == dtype_v<T> && is_contiguous()) {
    if (!out.empty()) std::memcpy(out.data(), base, nbytes());
    return out;
  }
  for_each_offset(*this, [&](int64_t i, int64_t off) {
    out[i] = cast_from_double<T>(load_as_double(dtype_, base + off));
  });
  return out;
}

template std::vector<int8_t> Tensor::to_vector<int8_t>() const;
template std::vector<int16_t> Tensor::to_vector<int16_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;

// std::vector<bool> is bit-packed, so it cannot take the memcpy path above.
template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  std::vector<bool> out(static_cast<size_t>(numel()));
  const char* base = static_cast<const char*>(raw_data());
  for_each_offset(*this, [&](int64_t i, int64_t off) {
    out[i] = load_as_double(dtype_, base + off) != 0.0;
  });
  return out;
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  INGOT_CHECK(i >= -r && i < r, "Dimension ", i, " out of range for rank ", r);
  return shape_[i < 0 ? i + r : i];
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

double Tensor::item(int64_t flat_index) const {
  INGOT_CHECK(flat_index >= 0 && flat_index < numel(), "item(", flat_index,
              ") out of range for ", numel(), " elements");
  int64_t off = 0, rem = flat_index;
  for (int d = rank() - 1; d >= 0; --d) {
    off += (rem % shape_[d]) * strides_[d];
    rem /= shape_[d];
  }
  return load_as_double(dtype_, static_cast<const char*>(raw_data()) +
                                    off * static_cast<int64_t>(dtype_size(dtype_)));
}

Tensor Tensor::reshape(Shape shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      INGOT_CHECK(infer < 0, "reshape: more than one -1 in ", to_string(shape));
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    INGOT_CHECK(known > 0 && numel() % known == 0, "reshape: cannot infer -1 in ",
                to_string(shape), " for ", numel(), " elements");
    shape[infer] = numel() / known;
  }
  INGOT_CHECK(ingot::numel(shape) == numel(), "reshape: cannot view ", to_string(shape_), " as ",
              to_string(shape));
  Tensor t = contiguous();
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  return t;
}

Tensor Tensor::transpose(const std::vector<int>& perm) const {
  INGOT_CHECK(static_cast<int>(perm.size()) == rank(), "transpose: permutation of size ",
              perm.size(), " for rank ", rank());
  Tensor t = *this;
  std::vector<bool> seen(rank(), false);
  for (int i = 0; i < rank(); ++i) {
    int p = perm[i] < 0 ? perm[i] + rank() : perm[i];
    INGOT_CHECK(p >= 0 && p < rank() && !seen[p], "transpose: invalid permutation");
    seen[p] = true;
    t.shape_[i] = shape_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

void copy_strided(const Tensor& src, Tensor& dst) {
  INGOT_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype() && dst.is_contiguous(),
              "copy_strided: mismatched tensors");
  const size_t esize = dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(dst.raw_data());
  if (src.is_contiguous()) {
    if (src.nbytes() > 0) std::memcpy(d, s, src.nbytes());
    return;
  }
  for_each_offset(src, [&](int64_t i, int64_t off) {
    std::memcpy(d + i * static_cast<int64_t>(esize), s + off, esize);
  });
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out(dtype_, shape_);
  copy_strided(*this, out);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out(dtype_, shape_);
  copy_strided(*this, out);
  return out;
}

Tensor Tensor::astype(DType dtype) const {
  if (dtype == dtype_) return clone();
  Tensor out(dtype, shape_);
  const char* base = static_cast<const char*>(raw_data());
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = static_cast<T*>(out.raw_data());
    for_each_offset(*this, [&](int64_t i, int64_t off) {
      dst[i] = cast_from_double<T>(load_as_double(dtype_, base + off));
    });
  });
  return out;
}

void Tensor::check_type(DType t) const {
  INGOT_CHECK(t == dtype_, "Tensor holds ", dtype_name(dtype_), ", accessed as ", dtype_name(t));
}

std::string Tensor::str(int max_elements) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << dtype_name(dtype_) << to_string(shape_) << " {";
  int64_t n = std::min<int64_t>(numel(), max_elements);
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << item(i);
  if (numel() > n) os << ", ...";
  os << "}";
  return os.str();
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.item(i) != b.item(i) && !(std::isnan(a.item(i)) && std::isnan(b.item(i)))) return false;
  return true;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] != y[i]) return false;
      continue;
    }
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  INGOT_CHECK(a.shape() == b.shape(), "max_abs_diff: shapes ", to_string(a.shape()), " and ",
              to_string(b.shape()), " differ");
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace ingot
