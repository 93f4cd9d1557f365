#include "array_convert.h"

#include <nanobind/stl/string.h>

#include <cstdint>
#include <limits>

#include "convert.h"
#include "ingot/error.h"

namespace ingot::python {

namespace {

// Python's own numbers (not NumPy's float64, a float subclass with a dtype of its own).
bool is_python_number(nb::handle x) {
  return PyBool_Check(x.ptr()) || PyLong_CheckExact(x.ptr()) || PyFloat_CheckExact(x.ptr());
}

// Python numbers and (nested) lists/tuples: data with no dtype of its own.
bool is_python_data(nb::handle x) {
  return is_python_number(x) || PyList_Check(x.ptr()) || PyTuple_Check(x.ptr());
}

// NumPy arrays and scalars, DLPack producers, buffer-protocol objects, lists and tuples.
bool is_array_data(nb::handle x) {
  if (PyUnicode_Check(x.ptr()) || PyBytes_Check(x.ptr()) || PyByteArray_Check(x.ptr())) return false;
  return PyList_Check(x.ptr()) || PyTuple_Check(x.ptr()) || nb::hasattr(x, "__array__") ||
         nb::hasattr(x, "__array_interface__") || nb::hasattr(x, "__dlpack__") || PyObject_CheckBuffer(x.ptr());
}

// A weak literal for a Python number (bool counts as the int 0 or 1).
Array literal(nb::handle x) {
  if (PyFloat_CheckExact(x.ptr())) return Array(nb::cast<double>(x));
  const long long v = nb::cast<long long>(x);
  INGOT_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
              "The integer ", v, " is too large for a literal (literals are int32; use ml.array(", v,
              ", dtype='int64') for a 64-bit value)");
  return Array(static_cast<int>(v));
}

}  // namespace

Array to_array(nb::handle x, nb::handle dtype, bool copy) {
  const std::optional<DType> want = dtype.is_none() ? std::nullopt : std::optional<DType>(to_dtype(dtype));
  if (nb::isinstance<Array>(x)) {
    const Array& a = nb::cast<const Array&>(x);
    return want && *want != a.dtype() ? a.astype(*want) : a;
  }
  Tensor t = to_tensor(x, "ml.array");
  DType target = want.value_or(t.dtype());
  if (!want && is_python_data(x) && t.dtype() == DType::Float64) target = DType::Float32;
  if (target != t.dtype()) return Array(t.astype(target));
  return Array(copy ? t.clone() : t);
}

std::optional<Array> try_operand(nb::handle x) {
  if (nb::isinstance<Array>(x)) return nb::cast<Array>(x);
  if (is_python_number(x)) return literal(x);
  if (is_array_data(x)) return to_array(x, nb::none(), /*copy=*/true);
  return std::nullopt;
}

Array operand(nb::handle x, const std::string& what) {
  std::optional<Array> a = try_operand(x);
  if (!a) {
    const std::string msg = what + " must be an ml.array, a number or array data (NumPy, DLPack, a list), got " +
                            py_str(nb::handle(x.type()).attr("__name__"));
    throw nb::type_error(msg.c_str());
  }
  return *a;
}

std::vector<int64_t> to_ints(nb::handle obj, const std::string& what) {
  if (PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) return {nb::cast<int64_t>(obj)};
  std::vector<int64_t> out;
  const bool sequence = PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr());
  if (sequence)
    for (nb::handle d : obj) {
      if (!PyLong_Check(d.ptr()) || PyBool_Check(d.ptr())) {
        out.clear();
        break;
      }
      out.push_back(nb::cast<int64_t>(d));
    }
  if (!sequence || out.size() != nb::len(obj)) {
    const std::string msg = what + " must be an int or a list/tuple of ints, got " + py_str(nb::repr(obj));
    throw nb::type_error(msg.c_str());
  }
  return out;
}

std::vector<int64_t> to_axes(nb::handle axis, const std::string& what) {
  if (axis.is_none()) return {};
  std::vector<int64_t> axes = to_ints(axis, what);
  INGOT_CHECK(!axes.empty(), what, "=() names no axis (use None to reduce over all axes)");
  return axes;
}

nb::tuple to_tuple(const std::vector<Array>& arrays) {
  nb::list out;
  for (const Array& a : arrays) out.append(nb::cast(a));
  return nb::tuple(out);
}

Array reduce_over(Reduction reduction, const Array& x, nb::handle axis, bool keepdims) {
  return reduction(x, to_axes(axis, "axis"), keepdims);
}

Array argmax_over(const Array& x, nb::handle axis, bool keepdims) {
  if (!axis.is_none()) {
    const std::vector<int64_t> axes = to_ints(axis, "axis");
    INGOT_CHECK(axes.size() == 1, "argmax takes one axis (or None), got ", axes.size());
    return argmax(x, axes[0], keepdims);
  }
  Array flat = argmax(reshape(x, {-1}), 0, false);
  return keepdims ? reshape(flat, std::vector<int64_t>(static_cast<size_t>(x.ndim()), 1)) : flat;
}

Array transpose_axes(const Array& x, nb::handle axes) {
  return transpose(x, axes.is_none() ? std::vector<int64_t>{} : to_ints(axes, "axes"));
}

}  // namespace ingot::python
