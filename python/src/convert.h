// Python <-> C++ conversions shared by the binding files: arrays <-> Tensors without copies where
// the layout allows, dtypes, shape templates, attributes.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <map>
#include <string>

#include "ingot/graph.h"
#include "ingot/physical_model.h"
#include "ingot/shape.h"
#include "ingot/tensor.h"

namespace ingot::python {

namespace nb = nanobind;

// A Tensor viewing `obj` (NumPy array, anything with __dlpack__ or the buffer protocol, or what
// numpy.asarray accepts). C-contiguous CPU arrays of a supported dtype are wrapped without a copy
// (the Tensor keeps the Python object alive); other layouts are made contiguous first. A NumPy
// array of ml_dtypes.bfloat16 is read as bfloat16. `what` names the argument in errors.
Tensor to_tensor(nb::handle obj, const std::string& what);
// A NumPy array viewing the Tensor's memory (no copy; the array keeps the buffer alive).
// bfloat16 becomes an ml_dtypes.bfloat16 array when ml_dtypes is installed, else a uint16 view of
// the same bits.
nb::object to_numpy(const Tensor& t);

TensorMap to_tensor_map(const nb::dict& d, const std::string& what);
nb::dict to_dict(const TensorMap& m);

// Python's str(obj) as a C++ string (nb::str(obj) only re-types an object that is a str already).
std::string py_str(nb::handle obj);

// "float32", numpy.float32, numpy.dtype("float32"), ml_dtypes.bfloat16, ...
DType to_dtype(nb::handle obj);
// The ml.<dtype> object of `t` (ingot._dtypes.DType: a str subclass equal to its name and to NumPy's dtype).
nb::object dtype_object(DType t);
// [None, 3, "N", "Batch..."]
ShapeTemplate to_shape_template(nb::handle obj);
nb::list from_sym_shape(const SymShape& s);
// int, float, str, and lists of ints or floats.
Attr to_attr(nb::handle obj, const std::string& key);

}  // namespace ingot::python
