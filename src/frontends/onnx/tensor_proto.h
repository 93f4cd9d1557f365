// ONNX TensorProto <-> ingot Tensor: every element type ingot has (bool, 8- to 64-bit integers,
// uint8, float16, bfloat16, float32, float64), from raw little-endian bytes, from the typed
// repeated fields, or from external data (a side file, offset and length), with every size and
// path checked: a corrupt or hostile file is an ingot::Error, never a read out of bounds.
#pragma once

#include <string>

#include "ingot/tensor.h"
#include "onnx/onnx_pb.h"

namespace ingot::onnx_import {

// The ingot dtype of an ONNX TensorProto.DataType; throws for types ingot lacks (strings,
// uint16/32/64, complex, float8, 4-bit), naming `what`.
DType dtype_of(int onnx_type, const std::string& what);

// `t`'s value. External data is read from `external_dir`.
Tensor to_tensor(const ::onnx::TensorProto& t, const std::string& external_dir);

}  // namespace ingot::onnx_import
