// Element types, their storage types and NumPy-style promotion.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ingot {

enum class DType : uint8_t {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  Float16,
  BFloat16,
  Float32,
  Float64,
};
inline constexpr int kNumDTypes = 10;

// IEEE binary16 storage. Arithmetic goes through float; conversions round to nearest even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT(google-explicit-constructor): numeric conversion, like the builtin types
  operator float() const;
};

// bfloat16 storage: the top 16 bits of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f);  // NOLINT(google-explicit-constructor)
  operator float() const;
};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "float32", "int64", ...
DType parse_dtype(std::string_view name);  // throws ingot::Error naming the bad string
bool is_floating(DType t);
bool is_integral(DType t);  // bool excluded
bool is_signed(DType t);

// NumPy-style promotion for two array operands: the smallest type that holds both.
// int + float -> that float; int8 + uint8 -> int16; float16 + bfloat16 -> float32.
DType promote_types(DType a, DType b);

// The float type a float-only op (exp, sqrt, ...) computes in: floats stay, the rest go to float32.
DType to_floating(DType t);

template <class T>
struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

// Calls f(T{}) with T the storage type of `t`: one switch per call, so kernels dispatch
// once per op and loop over typed pointers (no per-element dispatch).
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return f(float{});
}

}  // namespace ingot
