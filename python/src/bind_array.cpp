// ml.array: the lazy Array from Python. Operators, indexing and methods record ops; reading data
// (np.asarray, __dlpack__, item(), tolist(), repr) evaluates the pending graph first. The GIL is
// held throughout: arrays are shared handles that evaluation fills in, so one thread at a time.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "array_convert.h"
#include "bindings.h"
#include "convert.h"
#include "ingot/error.h"

namespace ingot::python {

namespace {

nb::tuple shape_tuple(const Shape& s) {
  nb::list out;
  for (int64_t d : s) out.append(d);
  return nb::tuple(out);
}

// A NumPy view of the data (no copy). Read-only unless a DLPack consumer asks for it: arrays are
// values, and writing into one would change every lazy result computed from it.
nb::object numpy_view(const Array& a, bool writable) {
  nb::object v = to_numpy(a.tensor());
  if (!writable) nb::setattr(v.attr("flags"), "writeable", nb::bool_(false));
  return v;
}

std::string describe(const Array& a) { return std::string(dtype_name(a.dtype())) + to_string(a.shape()); }

nb::object python_scalar(const Array& a, const char* what) {
  INGOT_CHECK(a.size() == 1, what, " needs an array of one element, got ", describe(a),
              " (use tolist() or np.asarray() for more)");
  return numpy_view(a, false).attr("item")();
}

bool is_index_integer(nb::handle h) { return PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

// NumPy basic indexing: ints, slices (any step), Ellipsis and None, alone or in a tuple; an
// integer array indexes axis 0 (take). Ints drop their axis, None inserts one.
Array index(const Array& a, nb::handle key) {
  const bool basic = PyTuple_Check(key.ptr()) || is_index_integer(key) || PySlice_Check(key.ptr()) || key.is_none() ||
                     key.is(nb::ellipsis());
  if (!basic) {
    Array indices = operand(key, "An index");
    INGOT_CHECK(is_integral(indices.dtype()), "An array index must hold integers, got ", describe(indices));
    return take(a, indices, 0);
  }
  std::vector<nb::handle> items;
  if (PyTuple_Check(key.ptr()))
    for (nb::handle h : key) items.push_back(h);
  else
    items.push_back(key);
  const int64_t rank = a.ndim();
  int64_t used = 0, ellipses = 0;
  for (nb::handle h : items) {
    if (h.is(nb::ellipsis())) ++ellipses;
    else if (!h.is_none()) ++used;
  }
  if (ellipses > 1) throw nb::index_error("an index can hold only one ellipsis ('...')");
  if (used > rank)
    throw nb::index_error(("too many indices for an array of rank " + std::to_string(rank) + ": " +
                           std::to_string(used)).c_str());
  std::vector<int64_t> starts, ends, axes, steps;
  std::vector<int64_t> layout;  // per result axis: the source axis it keeps, or -1 for a new one
  int64_t axis = 0;
  for (nb::handle h : items) {
    if (h.is(nb::ellipsis())) {
      for (int64_t n = rank - used; n > 0; --n) layout.push_back(axis++);
    } else if (h.is_none()) {
      layout.push_back(-1);
    } else if (PySlice_Check(h.ptr())) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      if (!(start == 0 && stop == PY_SSIZE_T_MAX && step == 1)) {
        starts.push_back(start);
        ends.push_back(stop);
        axes.push_back(axis);
        steps.push_back(step);
      }
      layout.push_back(axis++);
    } else if (is_index_integer(h)) {
      int64_t i = PyNumber_AsSsize_t(h.ptr(), PyExc_IndexError);
      if (PyErr_Occurred()) throw nb::python_error();
      const int64_t d = a.shape()[static_cast<size_t>(axis)];
      if (i < -d || i >= d)
        throw nb::index_error(("index " + std::to_string(i) + " is out of bounds for axis " + std::to_string(axis) +
                               " with size " + std::to_string(d)).c_str());
      if (i < 0) i += d;
      starts.push_back(i);
      ends.push_back(i + 1);
      axes.push_back(axis++);
      steps.push_back(1);
    } else {
      const std::string msg = "Indices must be ints, slices, None, '...' or an integer array, got " +
                              py_str(nb::handle(h.type()).attr("__name__"));
      throw nb::type_error(msg.c_str());
    }
  }
  while (axis < rank) layout.push_back(axis++);
  Array r = starts.empty() ? a : slice(a, starts, ends, axes, steps);
  std::vector<int64_t> shape;
  for (int64_t k : layout) shape.push_back(k < 0 ? 1 : r.shape()[static_cast<size_t>(k)]);
  return Shape(shape.begin(), shape.end()) == r.shape() ? r : reshape(r, shape);
}

// "array([[1., 2.]], dtype=float32)"; arrays without data yet inside a trace say so instead.
std::string repr(const Array& a) {
  const std::string tail = ", dtype=" + std::string(dtype_name(a.dtype())) + ")";
  if (a.is_placeholder()) return "array(<placeholder>, shape=" + to_string(a.shape()) + tail;
  try {
    nb::object np = nb::module_::import_("numpy");
    nb::object text = np.attr("array2string")(numpy_view(a, false), nb::arg("separator") = ", ",
                                              nb::arg("prefix") = "array(");
    return "array(" + nb::cast<std::string>(text) + tail;
  } catch (const Error&) {  // depends on a placeholder: no values while tracing
    return "array(<traced>, shape=" + to_string(a.shape()) + tail;
  }
}

// Binary operators: NotImplemented for operands they do not know, so Python tries the other side.
template <class F>
void binary(nb::class_<Array>& cls, const std::string& name, const char* rname, F f) {
  auto sig = [](const std::string& n) { return "def " + n + "(self, other: object, /) -> array"; };
  cls.def(name.c_str(), [f](const Array& a, nb::handle b) -> nb::object {
    std::optional<Array> o = try_operand(b);
    return o ? nb::cast(f(a, *o)) : nb::borrow(Py_NotImplemented);
  }, nb::sig(sig(name).c_str()));
  if (rname)
    cls.def(rname, [f](const Array& a, nb::handle b) -> nb::object {
      std::optional<Array> o = try_operand(b);
      return o ? nb::cast(f(*o, a)) : nb::borrow(Py_NotImplemented);
    }, nb::sig(sig(rname).c_str()));
}

}  // namespace

void bind_array(nb::module_& m) {
  nb::class_<Array> cls(m, "array",
                        "A lazy array (MLX-style). Ops on arrays record a graph; it runs when data is read\n"
                        "(np.asarray(a), a.item(), a.tolist(), print) or on ml.eval(). ml.compile(fn) traces\n"
                        "functions of arrays into one optimized, natively built executable.\n\n"
                        "    x = ml.array(np.ones((2, 3), np.float32))\n"
                        "    y = ml.softmax(x @ x.T * 0.5, axis=-1)   # Python numbers take x's dtype\n"
                        "    np.asarray(y)                            # evaluates; a read-only view, no copy");
  cls.def(
      "__init__", [](Array* self, nb::handle x, nb::handle dtype) { new (self) Array(to_array(x, dtype, true)); },
      nb::arg("x"), nb::arg("dtype").none() = nb::none(),
      "Copies `x` (NumPy array, anything with __dlpack__ or the buffer protocol, a list or a number) into\n"
      "an array, cast to `dtype` when given. An ml.array is shared, not copied. Without a dtype, Python\n"
      "floats become float32, ints int64, bools bool; arrays keep their dtype.");
  m.def("asarray", [](nb::handle x, nb::handle dtype) { return to_array(x, dtype, false); }, nb::arg("x"),
        nb::arg("dtype").none() = nb::none(),
        "Like ml.array, but C-contiguous data of the right dtype is viewed, not copied (NumPy's asarray).\n"
        "Arrays are values: do not write into the source while an array computed from it is pending.");
  cls.def_prop_ro("shape", [](const Array& a) { return shape_tuple(a.shape()); },
                  nb::for_getter(nb::sig("def shape(self) -> tuple[int, ...]")), "The shape, a tuple of ints.");
  cls.def_prop_ro("dtype", [](const Array& a) { return dtype_object(a.dtype()); },
                  nb::for_getter(nb::sig("def dtype(self) -> ingot.DType")),
                  "The dtype: ml.float32, ml.int64, ml.bool, ... (equal to its name, 'float32', and to NumPy's dtype).");
  cls.def_prop_ro("ndim", &Array::ndim, "The number of axes.");
  cls.def_prop_ro("size", &Array::size, "The number of elements.");
  cls.def_prop_ro("T", [](const Array& a) { return transpose(a); }, "The axes reversed (lazy).");
  cls.def("item", [](const Array& a) { return python_scalar(a, "item()"); }, nb::sig("def item(self) -> int | float | bool"),
          "The value of a one-element array as a Python number (evaluates).");
  cls.def("tolist", [](const Array& a) { return numpy_view(a, false).attr("tolist")(); },
          "The values as nested Python lists (evaluates).");
  cls.def("eval", [](nb::handle self) {
            eval(nb::cast<const Array&>(self));
            return nb::borrow(self);
          }, nb::sig("def eval(self) -> array"), "Computes the array now (and every pending array something still holds); returns it.");
  cls.def("astype", [](const Array& a, nb::handle dtype) { return a.astype(to_dtype(dtype)); }, nb::arg("dtype"),
          "The values converted to `dtype` ('float16', np.int32, ...).");
  cls.def("reshape", [](const Array& a, nb::args shape) {
            return reshape(a, to_ints(nb::len(shape) == 1 ? shape[0] : nb::handle(shape), "shape"));
          }, "a.reshape(2, -1) or a.reshape((2, -1)): the same data in a new shape; -1 is inferred.");
  cls.def("transpose", [](const Array& a, nb::args axes) {
            return nb::len(axes) == 0 ? transpose(a)
                                      : transpose_axes(a, nb::len(axes) == 1 ? axes[0] : nb::handle(axes));
          }, "a.transpose(1, 0, 2) or a.transpose((1, 0, 2)); no axes reverses them.");
  const std::pair<const char*, Reduction> reductions[] = {
      {"sum", &ingot::sum}, {"mean", &ingot::mean}, {"max", &ingot::max}, {"min", &ingot::min}};
  for (const auto& [name, fn] : reductions)
    cls.def(name, [fn = fn](const Array& a, nb::handle axis, bool keepdims) { return reduce_over(fn, a, axis, keepdims); },
            nb::arg("axis").none() = nb::none(), nb::arg("keepdims") = false,
            "Reduces over `axis` (an int, a tuple of ints, or None for all axes); see ml.sum.");
  cls.def("argmax", &argmax_over, nb::arg("axis").none() = nb::none(), nb::arg("keepdims") = false,
          "Index of the largest element along `axis` (None: of the flattened array), int64.");

  // NumPy and DLPack interchange (evaluates first).
  cls.def("__array__", [](const Array& a, nb::handle dtype, nb::handle copy) {
            nb::object v = numpy_view(a, false);
            if (!dtype.is_none()) v = v.attr("astype")(dtype);
            else if (!copy.is_none() && PyObject_IsTrue(copy.ptr()) == 1) v = v.attr("copy")();
            return v;
          }, nb::arg("dtype").none() = nb::none(), nb::arg("copy").none() = nb::none());
  cls.def("__dlpack__", [](const Array& a, nb::kwargs kwargs) { return numpy_view(a, true).attr("__dlpack__")(**kwargs); });
  cls.def("__dlpack_device__", [](const Array&) { return nb::make_tuple(1, 0); });  // kDLCPU, device 0
  cls.attr("__array_ufunc__") = nb::none();  // NumPy defers `ndarray + array` to __radd__
  cls.attr("__hash__") = nb::none();         // == is elementwise, so arrays are unhashable (as in NumPy)

  cls.def("__repr__", &repr);
  cls.def("__len__", [](const Array& a) {
    if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
    return a.shape()[0];
  });
  cls.def("__iter__", [](const Array& a) {
    if (a.ndim() == 0) throw nb::type_error("iteration over a 0-d array");
    nb::list rows;
    for (int64_t i = 0; i < a.shape()[0]; ++i) rows.append(index(a, nb::int_(i)));
    return nb::iter(rows);
  });
  cls.def("__bool__", [](const Array& a) {
    const int truth = PyObject_IsTrue(python_scalar(a, "bool()").ptr());
    if (truth < 0) throw nb::python_error();
    return truth == 1;
  });
  cls.def("__float__", [](const Array& a) { return nb::float_(python_scalar(a, "float()")); });
  cls.def("__int__", [](const Array& a) { return nb::int_(python_scalar(a, "int()")); });
  cls.def("__getitem__", &index);

  binary(cls, "__add__", "__radd__", [](const Array& a, const Array& b) { return a + b; });
  binary(cls, "__sub__", "__rsub__", [](const Array& a, const Array& b) { return a - b; });
  binary(cls, "__mul__", "__rmul__", [](const Array& a, const Array& b) { return a * b; });
  binary(cls, "__truediv__", "__rtruediv__", [](const Array& a, const Array& b) { return a / b; });
  binary(cls, "__mod__", "__rmod__", [](const Array& a, const Array& b) { return a % b; });
  binary(cls, "__pow__", "__rpow__", [](const Array& a, const Array& b) { return pow(a, b); });
  binary(cls, "__matmul__", "__rmatmul__", [](const Array& a, const Array& b) { return matmul(a, b); });
  binary(cls, "__lt__", nullptr, [](const Array& a, const Array& b) { return a < b; });
  binary(cls, "__le__", nullptr, [](const Array& a, const Array& b) { return a <= b; });
  binary(cls, "__gt__", nullptr, [](const Array& a, const Array& b) { return a > b; });
  binary(cls, "__ge__", nullptr, [](const Array& a, const Array& b) { return a >= b; });
  binary(cls, "__eq__", nullptr, [](const Array& a, const Array& b) { return equal(a, b); });
  binary(cls, "__ne__", nullptr, [](const Array& a, const Array& b) { return not_equal(a, b); });
  cls.def("__neg__", [](const Array& a) { return -a; });
  cls.def("__pos__", [](const Array& a) { return a; });
  cls.def("__abs__", [](const Array& a) { return abs(a); });
}

}  // namespace ingot::python
