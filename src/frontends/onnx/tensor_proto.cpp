#include "frontends/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "ingot/error.h"

namespace ingot::onnx_import {
namespace {

using TP = ::onnx::TensorProto;

// Product of `dims`, each checked non-negative, overflow refused.
// A zero among the dimensions makes no elements, but the others must still multiply without
// overflow (the tensor's strides are their products).
int64_t element_count(const TP& t, const std::string& name) {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : t.dims()) {
    INGOT_CHECK(d >= 0, "ONNX tensor '", name, "': negative dimension ", d);
    if (d == 0) {
      empty = true;
      continue;
    }
    INGOT_CHECK(n <= std::numeric_limits<int64_t>::max() / 16 / d, "ONNX tensor '", name, "': its dimensions overflow");
    n *= d;
  }
  return empty ? 0 : n;
}

// Copies `count` values of the repeated field `field` into `out`, converted to T.
template <class T, class Field>
void from_field(const Field& field, int64_t count, Tensor& out, const std::string& name, const char* field_name) {
  INGOT_CHECK(field.size() == count, "ONNX tensor '", name, "': ", field.size(), " values in ", field_name,
              " for ", count, " elements");
  T* p = out.data<T>();
  for (int64_t i = 0; i < count; ++i) p[i] = static_cast<T>(field.Get(static_cast<int>(i)));
}

// The bytes of external data: location (relative, inside `dir`), offset, length.
std::string external_bytes(const TP& t, const std::string& dir, const std::string& name) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    auto number = [&](const std::string& v) {
      try {
        size_t used = 0;
        const long long x = std::stoll(v, &used);
        INGOT_CHECK(used == v.size() && x >= 0, "");
        return static_cast<int64_t>(x);
      } catch (const std::exception&) {
        INGOT_FAIL("ONNX tensor '", name, "': external data ", kv.key(), " '", v, "' is not a size");
      }
    };
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = number(kv.value());
    else if (kv.key() == "length") length = number(kv.value());
  }
  INGOT_CHECK(!location.empty(), "ONNX tensor '", name, "': external data without a location");
  const std::filesystem::path rel(location);
  INGOT_CHECK(rel.is_relative(), "ONNX tensor '", name, "': external data location '", location,
              "' must be relative to the model's folder");
  for (const auto& part : rel)
    INGOT_CHECK(part != "..", "ONNX tensor '", name, "': external data location '", location,
                "' leaves the model's folder");
  const std::filesystem::path path = std::filesystem::path(dir.empty() ? "." : dir) / rel;
  std::ifstream in(path, std::ios::binary);
  INGOT_CHECK(in.good(), "ONNX tensor '", name, "': cannot open its external data file ", path.string());
  std::error_code ec;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  INGOT_CHECK(!ec, "ONNX tensor '", name, "': cannot read the size of ", path.string());
  if (length < 0) length = size - offset;
  INGOT_CHECK(offset <= size && length >= 0 && length <= size - offset, "ONNX tensor '", name, "': external data [",
              offset, ", +", length, ") lies outside ", path.string(), " (", size, " bytes)");
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  INGOT_CHECK(in.good() || length == 0, "ONNX tensor '", name, "': short read from ", path.string());
  return bytes;
}

}  // namespace

DType dtype_of(int onnx_type, const std::string& what) {
  switch (onnx_type) {
    case TP::FLOAT: return DType::Float32;
    case TP::DOUBLE: return DType::Float64;
    case TP::FLOAT16: return DType::Float16;
    case TP::BFLOAT16: return DType::BFloat16;
    case TP::INT8: return DType::Int8;
    case TP::INT16: return DType::Int16;
    case TP::INT32: return DType::Int32;
    case TP::INT64: return DType::Int64;
    case TP::UINT8: return DType::UInt8;
    case TP::BOOL: return DType::Bool;
    default: break;
  }
  const std::string type_name = TP::DataType_IsValid(onnx_type) ? TP::DataType_Name(static_cast<TP::DataType>(onnx_type))
                                                                 : "type " + std::to_string(onnx_type);
  INGOT_FAIL(what, ": ONNX element type ", type_name, " has no ingot dtype (ingot has bool, int8 to int64, uint8, "
             "float16, bfloat16, float32 and float64)");
}

Tensor to_tensor(const TP& t, const std::string& external_dir) {
  const std::string name = t.name().empty() ? "(unnamed)" : t.name();
  INGOT_CHECK(!t.has_segment(), "ONNX tensor '", name, "': segmented tensors are not supported");
  const DType dt = dtype_of(t.data_type(), "ONNX tensor '" + name + "'");
  const int64_t count = element_count(t, name);
  Shape shape(t.dims().begin(), t.dims().end());
  const bool external = t.data_location() == TP::EXTERNAL;
  if (external || t.has_raw_data()) {
    const std::string bytes = external ? external_bytes(t, external_dir, name) : t.raw_data();
    const size_t esize = dtype_size(dt);
    INGOT_CHECK(count <= static_cast<int64_t>(bytes.size() / esize) && bytes.size() == static_cast<size_t>(count) * esize,
                "ONNX tensor '", name, "': ", bytes.size(), " bytes of data for ", count, " elements of ",
                dtype_name(dt));
    Tensor out(dt, shape);
    if (!bytes.empty()) std::memcpy(out.raw_data(), bytes.data(), bytes.size());  // little-endian, as ONNX stores
    if (dt == DType::Bool)
      for (int64_t i = 0; i < count; ++i) out.data<bool>()[i] = bytes[static_cast<size_t>(i)] != 0;
    return out;
  }
  // Every typed field holds one value per element: check its length before allocating.
  const int field_size = dt == DType::Float32   ? t.float_data_size()
                         : dt == DType::Float64 ? t.double_data_size()
                         : dt == DType::Int64   ? t.int64_data_size()
                                                : t.int32_data_size();
  INGOT_CHECK(field_size == count, "ONNX tensor '", name, "': ", field_size, " values for ", count, " elements");
  Tensor out(dt, shape);
  switch (dt) {
    case DType::Float32: from_field<float>(t.float_data(), count, out, name, "float_data"); break;
    case DType::Float64: from_field<double>(t.double_data(), count, out, name, "double_data"); break;
    case DType::Int64: from_field<int64_t>(t.int64_data(), count, out, name, "int64_data"); break;
    case DType::Int32: from_field<int32_t>(t.int32_data(), count, out, name, "int32_data"); break;
    case DType::Int16: from_field<int16_t>(t.int32_data(), count, out, name, "int32_data"); break;
    case DType::Int8: from_field<int8_t>(t.int32_data(), count, out, name, "int32_data"); break;
    case DType::UInt8: from_field<uint8_t>(t.int32_data(), count, out, name, "int32_data"); break;
    case DType::Bool: from_field<bool>(t.int32_data(), count, out, name, "int32_data"); break;
    case DType::Float16:
    case DType::BFloat16: {
      // int32_data holds the 16-bit patterns.
      INGOT_CHECK(t.int32_data_size() == count, "ONNX tensor '", name, "': ", t.int32_data_size(),
                  " values in int32_data for ", count, " elements");
      auto* p = static_cast<uint16_t*>(out.raw_data());
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
      break;
    }
  }
  return out;
}

}  // namespace ingot::onnx_import
