// Python values -> lazy arrays (ingot::Array), shared by the array class, the op functions and
// compile(fn): ml.array's construction rules, the operands operators accept (Python numbers are
// weak literals, as in C++), and axis/shape arguments.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "ingot/array.h"

namespace ingot::python {

namespace nb = nanobind;

// ml.array(x, dtype): an ml.array is shared as it is (cast when `dtype` differs); other data
// (NumPy, DLPack, the buffer protocol, lists, scalars) is read by to_tensor and copied unless
// `copy` is false and no cast is needed. Without a dtype, Python floats (and lists of them)
// become float32, Python ints int64 and bools bool; arrays keep their own dtype.
Array to_array(nb::handle x, nb::handle dtype, bool copy);

// An operand of an operator or op function: an ml.array as it is, a Python number as a weak
// literal (it takes the dtype of the array it meets, like `x * 2.0` in C++), other array data
// copied into a strongly typed array. nullopt for anything else (operators then return
// NotImplemented).
std::optional<Array> try_operand(nb::handle x);
// The same, raising TypeError naming `what` for anything else.
Array operand(nb::handle x, const std::string& what);

// An axis list: None -> {} (all axes), an int -> {axis}, a sequence of ints as it is.
std::vector<int64_t> to_axes(nb::handle axis, const std::string& what);
// A shape or list of ints: an int or a sequence of ints.
std::vector<int64_t> to_ints(nb::handle obj, const std::string& what);

// Arrays as a Python tuple (multi-output ops, transforms).
nb::tuple to_tuple(const std::vector<Array>& arrays);

// The NumPy argument forms shared by the op functions (ml.sum(x, axis)) and the methods
// (x.sum(axis)).
using Reduction = Array (*)(const Array&, std::vector<int64_t>, bool);
Array reduce_over(Reduction reduction, const Array& x, nb::handle axis, bool keepdims);
// axis=None: the index into the flattened array.
Array argmax_over(const Array& x, nb::handle axis, bool keepdims);
// axes=None reverses them.
Array transpose_axes(const Array& x, nb::handle axes);

}  // namespace ingot::python
