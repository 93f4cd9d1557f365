#include "convert.h"

#include <nanobind/stl/string.h>

#include "ingot/error.h"

namespace ingot::python {

namespace {

using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

DType dtype_of(const nb::dlpack::dtype& d, const std::string& what) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(d.code);
  if (d.lanes == 1) {
    if (code == Code::Bool && d.bits == 8) return DType::Bool;
    if (code == Code::Int && d.bits == 8) return DType::Int8;
    if (code == Code::Int && d.bits == 16) return DType::Int16;
    if (code == Code::Int && d.bits == 32) return DType::Int32;
    if (code == Code::Int && d.bits == 64) return DType::Int64;
    if (code == Code::UInt && d.bits == 8) return DType::UInt8;
    if (code == Code::Float && d.bits == 16) return DType::Float16;
    if (code == Code::Bfloat && d.bits == 16) return DType::BFloat16;
    if (code == Code::Float && d.bits == 32) return DType::Float32;
    if (code == Code::Float && d.bits == 64) return DType::Float64;
  }
  static const char* const kCodes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string name = d.code < 7 ? std::string(kCodes[d.code]) + std::to_string(d.bits) : "code " + std::to_string(d.code);
  INGOT_FAIL("Unsupported dtype ", name, " for ", what,
             " (supported: bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32, float64)");
}

nb::dlpack::dtype dlpack_of(DType t) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code c, int bits) { return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1}; };
  switch (t) {
    case DType::Bool: return make(Code::Bool, 8);
    case DType::Int8: return make(Code::Int, 8);
    case DType::Int16: return make(Code::Int, 16);
    case DType::Int32: return make(Code::Int, 32);
    case DType::Int64: return make(Code::Int, 64);
    case DType::UInt8: return make(Code::UInt, 8);
    case DType::Float16: return make(Code::Float, 16);
    case DType::BFloat16: return make(Code::UInt, 16);  // NumPy has no bfloat16: raw bits
    case DType::Float32: return make(Code::Float, 32);
    case DType::Float64: return make(Code::Float, 64);
  }
  return make(Code::Float, 32);
}

// ml_dtypes.bfloat16, or None when ml_dtypes is not installed.
// Looked up once and never released (module state outlives the interpreter's teardown order).
nb::object bfloat16_type() {
  static const nb::object* type = [] {
    try {
      return new nb::object(nb::module_::import_("ml_dtypes").attr("bfloat16"));
    } catch (const nb::python_error&) {
      return new nb::object(nb::none());
    }
  }();
  return *type;
}

bool is_numpy_bfloat16(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view") || !nb::hasattr(obj, "__array_interface__")) return false;
  return py_str(obj.attr("dtype")) == "bfloat16";
}

Tensor wrap(const Array& a, DType dtype) {
  Shape shape;
  for (size_t i = 0; i < a.ndim(); ++i) shape.push_back(static_cast<int64_t>(a.shape(i)));
  // The Tensor owns a copy of the ndarray handle, which holds the Python object (or the DLPack
  // capsule's producer). It may be released on a thread without the GIL, so take it.
  // After the interpreter has finalized (a static or thread_local array released at exit) the
  // handle is leaked: there is no Python left to release it to.
  std::shared_ptr<void> owner(new Array(a), [](void* p) {
    if (!Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    delete static_cast<Array*>(p);
  });
  return Tensor::wrap(const_cast<void*>(a.data()), dtype, shape, contiguous_strides(shape), std::move(owner));
}

}  // namespace

std::string py_str(nb::handle obj) {
  nb::object s = nb::steal(PyObject_Str(obj.ptr()));
  if (!s.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(s);
}

Tensor to_tensor(nb::handle obj, const std::string& what) {
  nb::object src = nb::borrow(obj);
  bool bf16 = false;
  if (is_numpy_bfloat16(src)) {
    src = src.attr("view")(nb::module_::import_("numpy").attr("uint16"));
    bf16 = true;
  }
  Array a;
  if (!nb::try_cast(src, a, /*convert=*/true)) {
    // Lists, scalars and anything else NumPy understands.
    nb::object converted;
    try {
      converted = nb::module_::import_("numpy").attr("asarray")(src);
    } catch (const nb::python_error& e) {
      INGOT_FAIL("Cannot use a ", py_str(nb::handle(obj.type()).attr("__name__")), " as the array for ",
                 what, ": ", e.what());
    }
    if (is_numpy_bfloat16(converted)) {
      converted = converted.attr("view")(nb::module_::import_("numpy").attr("uint16"));
      bf16 = true;
    }
    if (!nb::try_cast(converted, a, true)) {
      const std::string dt = nb::hasattr(converted, "dtype") ? py_str(converted.attr("dtype")) : "?";
      INGOT_FAIL("Unsupported dtype ", dt, " for ", what,
                 " (supported: bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32, float64)");
    }
  }
  const DType dtype = bf16 ? DType::BFloat16 : dtype_of(a.dtype(), what);
  return wrap(a, dtype);
}

nb::object to_numpy(const Tensor& t) {
  Tensor* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape;
  for (int64_t d : t.shape()) shape.push_back(static_cast<size_t>(d));
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  nb::ndarray<nb::numpy> arr(keep->raw_data(), shape.size(), shape.data(), owner, strides.data(),
                             dlpack_of(t.dtype()));
  nb::object out = nb::cast(arr);
  if (t.dtype() == DType::BFloat16) {
    nb::object bf = bfloat16_type();
    if (!bf.is_none()) out = out.attr("view")(bf);
  }
  return out;
}

TensorMap to_tensor_map(const nb::dict& d, const std::string& what) {
  TensorMap out;
  for (auto [k, v] : d) {
    const std::string name = py_str(k);
    out.emplace(name, to_tensor(v, what + " '" + name + "'"));
  }
  return out;
}

nb::dict to_dict(const TensorMap& m) {
  nb::dict d;
  for (const auto& [name, t] : m) d[nb::str(name.c_str(), name.size())] = to_numpy(t);
  return d;
}

DType to_dtype(nb::handle obj) {
  if (nb::isinstance<nb::str>(obj)) return parse_dtype(nb::cast<std::string>(obj));
  std::string name;
  try {
    name = py_str(nb::module_::import_("numpy").attr("dtype")(obj));
  } catch (const nb::python_error&) {
    INGOT_FAIL("Cannot use ", py_str(nb::repr(obj)), " as a dtype (use a name such as 'float32')");
  }
  return parse_dtype(name);
}

nb::object dtype_object(DType t) {
  return nb::module_::import_("ingot._dtypes").attr("dtype_of")(nb::str(std::string(dtype_name(t)).c_str()));
}

ShapeTemplate to_shape_template(nb::handle obj) {
  ShapeTemplate t;
  INGOT_CHECK(!nb::isinstance<nb::str>(obj) && nb::hasattr(obj, "__iter__"), "A shape must be a list of ints, strings and None, got ",
              nb::cast<std::string>(nb::repr(obj)));
  for (nb::handle d : obj) {
    // Mithril's (and the seeds') variadic forms: ("Batch", ...) for a named run of any number of
    // dimensions, a bare ... for an anonymous one; the same as the strings "Batch..." and "...".
    bool named_run = nb::isinstance<nb::tuple>(d) && nb::len(d) == 2 && nb::isinstance<nb::str>(d[0]) &&
                     d[1].is(nb::ellipsis());
    if (d.is_none()) t.emplace_back(nullptr);
    else if (d.is(nb::ellipsis())) t.emplace_back(Dim::variadic(""));
    else if (named_run) {
      std::string name = nb::cast<std::string>(d[0]);
      INGOT_CHECK(!name.empty(), "A variadic run's name must not be empty (a bare ... is an anonymous run)");
      t.emplace_back(Dim::variadic(std::move(name)));
    } else if (nb::isinstance<nb::str>(d)) t.emplace_back(nb::cast<std::string>(d));
    else if (nb::isinstance<nb::bool_>(d)) INGOT_FAIL("A shape dimension cannot be a bool");
    else if (nb::isinstance<nb::int_>(d) || nb::hasattr(d, "__index__")) t.emplace_back(nb::cast<int64_t>(d.attr("__index__")()));
    else INGOT_FAIL("A shape dimension must be an int, a string, None, ... or (\"Name\", ...), got ",
                    nb::cast<std::string>(nb::repr(d)));
  }
  return t;
}

nb::list from_sym_shape(const SymShape& s) {
  nb::list out;
  for (const SymDim& d : s) {
    if (d.known()) out.append(d.value);
    else out.append(nb::str(d.symbol.c_str(), d.symbol.size()));
  }
  return out;
}

Attr to_attr(nb::handle obj, const std::string& key) {
  if (nb::isinstance<nb::bool_>(obj)) return static_cast<int64_t>(nb::cast<bool>(obj));
  if (nb::isinstance<nb::int_>(obj)) return nb::cast<int64_t>(obj);
  if (nb::isinstance<nb::float_>(obj)) return nb::cast<double>(obj);
  if (nb::isinstance<nb::str>(obj)) return nb::cast<std::string>(obj);
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) {
    bool all_int = true;
    for (nb::handle x : obj) all_int = all_int && nb::isinstance<nb::int_>(x);
    if (all_int) {
      std::vector<int64_t> v;
      for (nb::handle x : obj) v.push_back(nb::cast<int64_t>(x));
      return v;
    }
    std::vector<double> v;
    for (nb::handle x : obj) {
      INGOT_CHECK(nb::isinstance<nb::int_>(x) || nb::isinstance<nb::float_>(x), "Attribute '", key,
                  "': list elements must be numbers");
      v.push_back(nb::cast<double>(x));
    }
    return v;
  }
  INGOT_FAIL("Attribute '", key, "' must be an int, float, str or a list of numbers, got ",
             nb::cast<std::string>(nb::repr(obj)));
}

}  // namespace ingot::python
