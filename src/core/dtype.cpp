#include "ingot/dtype.h"

#include <array>

#include "ingot/error.h"

namespace ingot {

namespace {
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

Half::Half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x47800000u) {  // >= 65536: inf (65520..65536 rounds up to inf below)
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // subnormal half (or zero): add a magic number to round
    float magic = bits_float(abs) + 0.5f;
    bits = static_cast<uint16_t>(sign | (float_bits(magic) - 0x3f000000u));
    return;
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  bits = static_cast<uint16_t>(sign | (abs >> 13));
}

Half::operator float() const {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

BFloat16::BFloat16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // keep nan a nan
    bits = static_cast<uint16_t>((u >> 16) | 0x40u);
    return;
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  bits = static_cast<uint16_t>(u >> 16);
}

BFloat16::operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

namespace {
struct Info {
  std::string_view name;
  size_t size;
};
constexpr std::array<Info, kNumDTypes> kInfo = {{
    {"bool", 1},
    {"int8", 1},
    {"int16", 2},
    {"int32", 4},
    {"int64", 8},
    {"uint8", 1},
    {"float16", 2},
    {"bfloat16", 2},
    {"float32", 4},
    {"float64", 8},
}};
}  // namespace

size_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }

DType parse_dtype(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  if (name == "float" || name == "f32") return DType::Float32;
  if (name == "double" || name == "f64") return DType::Float64;
  if (name == "half" || name == "f16") return DType::Float16;
  if (name == "bf16") return DType::BFloat16;
  if (name == "int" || name == "i64") return DType::Int64;
  if (name == "i32") return DType::Int32;
  INGOT_FAIL("Unknown dtype '", name,
             "': expected one of bool, int8, int16, int32, int64, uint8, float16, bfloat16, "
             "float32, float64");
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 ||
         t == DType::Float64;
}
bool is_integral(DType t) { return !is_floating(t) && t != DType::Bool; }
bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

DType to_floating(DType t) { return is_floating(t) ? t : DType::Float32; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Both integral. Mixed signedness: uint8 needs a signed type twice as wide.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType s = a == DType::UInt8 ? b : a;
    return dtype_size(s) > 1 ? s : DType::Int16;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

}  // namespace ingot
