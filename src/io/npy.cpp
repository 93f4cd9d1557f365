#include "io/npy.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "ingot/error.h"
#include "runtime/atomic_file.h"

#ifdef INGOT_HAVE_LIBZIP
#include <zip.h>
#endif

namespace ingot::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// NumPy's type strings for ingot's dtypes ('<' little-endian, '|' byte order irrelevant).
struct TypeCode {
  DType dtype;
  const char* descr;
};
constexpr TypeCode kTypes[] = {
    {DType::Bool, "|b1"},    {DType::Int8, "|i1"},    {DType::UInt8, "|u1"},   {DType::Int16, "<i2"},
    {DType::Int32, "<i4"},   {DType::Int64, "<i8"},   {DType::Float16, "<f2"}, {DType::Float32, "<f4"},
    {DType::Float64, "<f8"},
};

DType dtype_of(const std::string& descr, const std::string& what) {
  for (const TypeCode& t : kTypes)
    if (descr == t.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(t.descr).substr(1)))
      return t.dtype;
  if (descr == "<V2" || descr == "bfloat16")
    INGOT_FAIL(what, ": bfloat16 arrays have no NumPy type string; save them as float32");
  if (!descr.empty() && descr[0] == '>') INGOT_FAIL(what, ": big-endian data ('", descr, "') is not supported");
  INGOT_FAIL(what, ": element type '", descr, "' is not one ingot has (bool, int8/16/32/64, uint8, float16/32/64)");
}

const char* descr_of(DType t) {
  for (const TypeCode& c : kTypes)
    if (c.dtype == t) return c.descr;
  INGOT_FAIL("npy: ", dtype_name(t), " has no NumPy type string (bfloat16: convert to float32 first)");
}

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Only its three keys are read, each by a small scanner that rejects anything else.
struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

size_t after_key(const std::string& h, const std::string& key, const std::string& what) {
  const size_t at = h.find("'" + key + "'");
  INGOT_CHECK(at != std::string::npos, what, ": the header has no '", key, "'");
  size_t i = at + key.size() + 2;
  while (i < h.size() && h[i] == ' ') ++i;
  INGOT_CHECK(i < h.size() && h[i] == ':', what, ": malformed header near '", key, "'");
  ++i;
  while (i < h.size() && h[i] == ' ') ++i;
  return i;
}

Header parse_header(const std::string& h, const std::string& what) {
  Header out;
  size_t i = after_key(h, "descr", what);
  INGOT_CHECK(i < h.size() && (h[i] == '\'' || h[i] == '"'), what, ": 'descr' is not a string (structured dtypes are not supported)");
  const size_t end = h.find(h[i], i + 1);
  INGOT_CHECK(end != std::string::npos, what, ": unterminated 'descr'");
  out.descr = h.substr(i + 1, end - i - 1);
  i = after_key(h, "fortran_order", what);
  if (h.compare(i, 4, "True") == 0) out.fortran = true;
  else INGOT_CHECK(h.compare(i, 5, "False") == 0, what, ": 'fortran_order' is neither True nor False");
  i = after_key(h, "shape", what);
  INGOT_CHECK(i < h.size() && h[i] == '(', what, ": 'shape' is not a tuple");
  ++i;
  for (;;) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    INGOT_CHECK(i < h.size(), what, ": unterminated 'shape'");
    if (h[i] == ')') break;
    INGOT_CHECK(h[i] >= '0' && h[i] <= '9', what, ": 'shape' holds something other than sizes");
    int64_t d = 0;
    while (i < h.size() && h[i] >= '0' && h[i] <= '9') {
      INGOT_CHECK(d <= (std::numeric_limits<int64_t>::max() - 9) / 10, what, ": a size in 'shape' is too large");
      d = d * 10 + (h[i++] - '0');
    }
    while (i < h.size() && h[i] == 'L') ++i;  // Python 2's long suffix
    out.shape.push_back(d);
    INGOT_CHECK(out.shape.size() <= 64, what, ": 'shape' has more than 64 dimensions");
    while (i < h.size() && h[i] == ' ') ++i;
    INGOT_CHECK(i < h.size() && (h[i] == ',' || h[i] == ')'), what, ": 'shape' is not a tuple of sizes");
  }
  return out;
}

}  // namespace

Tensor parse(std::string_view bytes, const std::string& what) {
  INGOT_CHECK(bytes.size() >= 10 && bytes.substr(0, 6) == std::string_view(kMagic, 6), what,
              ": not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  INGOT_CHECK(major >= 1 && major <= 3, what, ": .npy format version ", major, " is not supported (1 to 3 are)");
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else {
    INGOT_CHECK(bytes.size() >= 12, what, ": truncated header");
    for (int k = 0; k < 4; ++k) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + k])) << (8 * k);
    start = 12;
  }
  INGOT_CHECK(header_len <= bytes.size() - start, what, ": the header runs past the end of the file");
  const Header h = parse_header(std::string(bytes.substr(start, header_len)), what);
  INGOT_CHECK(!h.fortran, what, ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  const DType dtype = dtype_of(h.descr, what);
  // Checked beside a zero too: an empty [0, 2^40, 2^40] would overflow the strides (fuzz_npy).
  const std::optional<int64_t> elements = checked_numel(h.shape);
  INGOT_CHECK(elements.has_value(), what, ": the shape's sizes multiply past int64");
  const int64_t count = *elements;
  const size_t data_at = start + header_len;
  const size_t item = dtype_size(dtype);
  INGOT_CHECK(static_cast<uint64_t>(count) <= (bytes.size() - data_at) / item, what, ": ",
              bytes.size() - data_at, " bytes of data for ", count, " elements of ", dtype_name(dtype));
  Tensor t(dtype, h.shape);
  if (count > 0) std::memcpy(t.raw_data(), bytes.data() + data_at, static_cast<size_t>(count) * item);
  return t;
}

std::string serialize(const Tensor& tensor) {
  const Tensor t = tensor.contiguous();
  // Python's tuple: (), (3,), (2, 3).
  std::string shape = "(";
  for (size_t k = 0; k < t.shape().size(); ++k) shape += (k ? ", " : "") + std::to_string(t.shape()[k]);
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + std::string(descr_of(t.dtype())) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with spaces and a newline so the data starts 64-byte aligned, as NumPy writes it.
  const bool v2 = header.size() + 11 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const size_t n = header.size();
  for (size_t k = 0; k < (v2 ? 4u : 2u); ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  return out;
}

Tensor load(const std::string& path) { return parse(read_file(path), path); }

#ifdef INGOT_HAVE_LIBZIP
namespace {
std::string zip_message(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string m = zip_error_strerror(&e);
  zip_error_fini(&e);
  return m;
}
}  // namespace

void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  // Written beside `path` under a temporary name, then renamed over it.
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  int err = 0;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  INGOT_CHECK(z != nullptr, "npz: cannot create ", path, ": ", zip_message(err));
  std::vector<std::string> buffers;
  buffers.reserve(arrays.size());  // the sources point into these until zip_close
  try {
    for (const auto& [name, t] : arrays) {
      buffers.push_back(serialize(t));
      zip_source_t* src = zip_source_buffer(z, buffers.back().data(), buffers.back().size(), 0);
      INGOT_CHECK(src != nullptr, "npz: ", zip_strerror(z));
      const zip_int64_t at = zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE);
      if (at < 0) {
        zip_source_free(src);
        INGOT_FAIL("npz: cannot add '", name, "': ", zip_strerror(z));
      }
      zip_set_file_compression(z, static_cast<zip_uint64_t>(at), ZIP_CM_STORE, 0);
    }
  } catch (...) {
    zip_discard(z);
    std::filesystem::remove(tmp);
    throw;
  }
  if (zip_close(z) != 0) {
    const std::string why = zip_strerror(z);
    zip_discard(z);
    std::filesystem::remove(tmp);
    INGOT_FAIL("npz: cannot write ", path, ": ", why);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  INGOT_CHECK(!ec, "npz: cannot move ", tmp, " to ", path, ": ", ec.message());
}

std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  INGOT_CHECK(z != nullptr, "npz: cannot open ", path, ": ", zip_message(err));
  std::vector<std::pair<std::string, Tensor>> out;
  try {
    const zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      INGOT_CHECK(zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) == 0, "npz: ", path, ": ", zip_strerror(z));
      std::string name = st.name;
      INGOT_CHECK(name.size() > 4 && name.substr(name.size() - 4) == ".npy", "npz: ", path, ": entry '", name,
                  "' is not an .npy file");
      INGOT_CHECK(st.size <= (uint64_t{1} << 40), "npz: ", path, ": entry '", name, "' is too large");
      zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(i), 0);
      INGOT_CHECK(f != nullptr, "npz: ", path, ": cannot read '", name, "': ", zip_strerror(z));
      std::string bytes(static_cast<size_t>(st.size), '\0');
      const zip_int64_t got = zip_fread(f, bytes.data(), st.size);
      zip_fclose(f);
      INGOT_CHECK(got == static_cast<zip_int64_t>(st.size), "npz: ", path, ": '", name, "' is truncated");
      out.emplace_back(name.substr(0, name.size() - 4), parse(bytes, path + ":" + name));
    }
  } catch (...) {
    zip_discard(z);
    throw;
  }
  zip_discard(z);
  return out;
}
#else
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>&) {
  INGOT_FAIL("npz: cannot write ", path, ": ingot was built without libzip (apt-get install libzip-dev)");
}
std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path) {
  INGOT_FAIL("npz: cannot read ", path, ": ingot was built without libzip (apt-get install libzip-dev)");
}
#endif

}  // namespace ingot::npy
