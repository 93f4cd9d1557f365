// safetensors reading and writing: see ingot/serialize.h.
//
// Loading never trusts the file: the header is fully validated against the real data size
// before any tensor is allocated, so a corrupt or hostile file cannot cause a huge allocation or
// a read out of bounds.
#include "ingot/serialize.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <system_error>
#include <vector>

#include "ingot/error.h"

namespace ingot {
namespace {

// safetensors data is little-endian; tensors are copied to and from host memory as raw bytes.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeCode {
  DType dtype;
  std::string_view code;
};
constexpr std::array<DTypeCode, kNumDTypes> kDTypeCodes = {{
    {DType::Bool, "BOOL"},
    {DType::UInt8, "U8"},
    {DType::Int8, "I8"},
    {DType::Int16, "I16"},
    {DType::Int32, "I32"},
    {DType::Int64, "I64"},
    {DType::Float16, "F16"},
    {DType::BFloat16, "BF16"},
    {DType::Float32, "F32"},
    {DType::Float64, "F64"},
}};

std::string dtype_code(DType t) {
  for (const DTypeCode& c : kDTypeCodes)
    if (c.dtype == t) return std::string(c.code);
  INGOT_FAIL("safetensors: no code for dtype ", dtype_name(t));
}

std::optional<DType> dtype_from_code(std::string_view code) {
  for (const DTypeCode& c : kDTypeCodes)
    if (c.code == code) return c.dtype;
  return std::nullopt;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A name as a JSON string literal: quoted and escaped, as it appears in the header.
std::string json_quoted(const std::string& s) {
  return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// Writing.

// Everything a file consists of: the length-prefixed header, then each tensor's bytes in order.
struct Layout {
  std::string prefix;
  std::vector<Tensor> tensors;  // contiguous
};

Layout layout(const std::map<std::string, Tensor>& tensors,
              const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  Layout out;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    INGOT_CHECK(name != kMetadataKey, "save_safetensors: '", kMetadataKey,
                "' is reserved and cannot name a tensor");
    INGOT_CHECK(t.defined(), "save_safetensors: tensor ", json_quoted(name), " is undefined");
    Tensor c = t.contiguous();
    uint64_t end = offset + c.nbytes();
    header[name] = {
        {"dtype", dtype_code(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, end}}};
    offset = end;
    out.tensors.push_back(std::move(c));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception&) {
    INGOT_FAIL("save_safetensors: tensor names and metadata must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  out.prefix = le64(text.size()) + text;
  return out;
}

std::string errno_message() { return std::error_code(errno, std::generic_category()).message(); }

// A uniquely named temporary file next to the target. It is removed on destruction unless
// commit() renamed it into place.
class TempFile {
 public:
  explicit TempFile(const std::string& target) : target_(target) {
    static std::atomic<unsigned> counter{0};
    std::filesystem::path t(target);
    path_ = (t.parent_path() / ("." + t.filename().string() + ".tmp." + std::to_string(::getpid()) +
                                "." + std::to_string(counter++)))
                .string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("cannot create temporary file '" + path_ + "'");
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t written = ::write(fd_, p, n);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) fail("write to '" + path_ + "' failed");
      p += written;
      n -= static_cast<size_t>(written);
    }
  }

  // Flushes to disk before the rename, so a crash cannot leave a renamed but empty file.
  void commit() {
    if (::fsync(fd_) != 0) fail("fsync of '" + path_ + "' failed");
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close of '" + path_ + "' failed");
    if (::rename(path_.c_str(), target_.c_str()) != 0)
      fail("rename of '" + path_ + "' into place failed");
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    INGOT_FAIL("Cannot write safetensors file '", target_, "': ", what, ": ", errno_message());
  }

  std::string target_;
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Reading.

// Where the bytes come from (a file or a string); `where` names it in every error.
class Input {
 public:
  explicit Input(std::string where) : where_(std::move(where)) {}
  virtual ~Input() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at `offset`; callers keep offset + n <= size().
  virtual void read(uint64_t offset, void* dst, size_t n) = 0;

  [[noreturn]] void fail(const std::string& what) const {
    INGOT_FAIL("Invalid safetensors ", where_, ": ", what);
  }

 private:
  std::string where_;
};

class StringInput : public Input {
 public:
  explicit StringInput(const std::string& bytes) : Input("data"), bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, void* dst, size_t n) override {
    std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  const std::string& bytes_;
};

class FileInput : public Input {
 public:
  explicit FileInput(const std::string& path)
      : Input("file '" + path + "'"), f_(path, std::ios::binary) {
    if (!f_) INGOT_FAIL("Cannot open safetensors file '", path, "': ", errno_message());
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) fail("not a regular file");
    f_.seekg(0, std::ios::end);
    std::streamoff end = f_.tellg();
    if (!f_ || end < 0) fail("cannot determine the file size");
    size_ = static_cast<uint64_t>(end);
  }
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) override {
    f_.seekg(static_cast<std::streamoff>(offset));
    f_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!f_ || f_.gcount() != static_cast<std::streamsize>(n))
      fail("read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
           " failed");
  }

 private:
  std::ifstream f_;
  uint64_t size_ = 0;
};

// One tensor as the header describes it; offsets are into the data section.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

std::optional<uint64_t> as_u64(const Json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  return std::nullopt;
}

// Bytes a tensor of this dtype and shape occupies, or nullopt when that overflows.
std::optional<uint64_t> byte_size(DType dtype, const Shape& shape) {
  std::optional<int64_t> n = checked_numel(shape);
  uint64_t bytes;
  if (!n || __builtin_mul_overflow(static_cast<uint64_t>(*n), dtype_size(dtype), &bytes))
    return std::nullopt;
  return bytes;
}

Entry parse_entry(const std::string& name, const Json& j, const Input& in) {
  std::string where = "tensor " + json_quoted(name) + ": ";
  if (!j.is_object()) in.fail(where + "expected an object with dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) in.fail(where + "missing field '" + key + "'");

  Entry e{name, DType::Float32, {}, 0, 0};
  const Json& dtype = j["dtype"];
  std::optional<DType> dt =
      dtype.is_string() ? dtype_from_code(dtype.get_ref<const std::string&>()) : std::nullopt;
  if (!dt)
    in.fail(where + "unsupported dtype " + dtype.dump() +
            " (ingot reads BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64)");
  e.dtype = *dt;

  if (!j["shape"].is_array()) in.fail(where + "shape must be an array");
  for (const Json& d : j["shape"]) {
    std::optional<uint64_t> v = as_u64(d);
    if (!v || *v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      in.fail(where + "shape entries must be non-negative integers, got " + d.dump());
    e.shape.push_back(static_cast<int64_t>(*v));
  }

  const Json& offsets = j["data_offsets"];
  bool pair = offsets.is_array() && offsets.size() == 2;
  std::optional<uint64_t> begin = pair ? as_u64(offsets[0]) : std::nullopt;
  std::optional<uint64_t> end = pair ? as_u64(offsets[1]) : std::nullopt;
  if (!begin || !end || *end < *begin)
    in.fail(where + "data_offsets must be [begin, end] with 0 <= begin <= end, got " +
            offsets.dump());
  e.begin = *begin;
  e.end = *end;

  std::optional<uint64_t> bytes = byte_size(e.dtype, e.shape);
  if (!bytes) in.fail(where + "shape " + to_string(e.shape) + " is too large");
  if (*bytes != e.end - e.begin)
    in.fail(where + "data_offsets " + offsets.dump() + " span " + std::to_string(e.end - e.begin) +
            " bytes, but " + std::string(dtype_code(e.dtype)) + to_string(e.shape) + " needs " +
            std::to_string(*bytes));
  return e;
}

// The tensors must tile the data section exactly: no overlap, no gap, nothing past the end.
void check_coverage(std::vector<Entry> entries, uint64_t data_size, const Input& in) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      in.fail("tensor " + json_quoted(e.name) + " at bytes [" + std::to_string(e.begin) + ", " +
              std::to_string(e.end) + ") overlaps the tensor before it");
    if (e.begin > covered)
      in.fail("bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
              ") of the data belong to no tensor");
    covered = e.end;
  }
  if (covered > data_size)
    in.fail("truncated: the header describes " + std::to_string(covered) +
            " bytes of data, the file has " + std::to_string(data_size));
  if (covered < data_size)
    in.fail(std::to_string(data_size - covered) + " trailing bytes belong to no tensor");
}

std::map<std::string, std::string> parse_metadata(const Json& j, const Input& in) {
  if (!j.is_object()) in.fail(std::string(kMetadataKey) + " must be an object of strings");
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string())
      in.fail(std::string(kMetadataKey) + " value for " + json_quoted(it.key()) +
              " must be a string, got " + it.value().type_name());
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// Parses the header, rejecting duplicate keys at any depth (the format forbids them, and
// nlohmann would silently keep one).
Json parse_header_json(const std::string& header, const Input& in) {
  if (header.empty() || header[0] != '{') in.fail("the header does not start with '{'");
  std::vector<std::set<std::string>> open_objects;
  auto check_keys = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        in.fail("duplicate key " + json_quoted(key) + " in the header");
    }
    return true;
  };
  try {
    return Json::parse(header, check_keys);
  } catch (const Json::exception& e) {
    in.fail(std::string("the header is not valid JSON: ") + e.what());
  }
}

std::vector<Entry> parse_header(const std::string& header, uint64_t data_size, const Input& in,
                                std::map<std::string, std::string>* metadata) {
  Json j = parse_header_json(header, in);
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      std::map<std::string, std::string> m = parse_metadata(it.value(), in);
      if (metadata) *metadata = std::move(m);
    } else {
      entries.push_back(parse_entry(it.key(), it.value(), in));
    }
  }
  check_coverage(entries, data_size, in);
  return entries;
}

// A bool byte other than 0 or 1 would be undefined behaviour once read as a C++ bool.
void check_bools(const Tensor& t, const std::string& name, const Input& in) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i)
    if (bytes[i] > 1)
      in.fail("tensor " + json_quoted(name) + ": BOOL element " + std::to_string(i) +
              " has byte value " + std::to_string(bytes[i]) + " (must be 0 or 1)");
}

std::map<std::string, Tensor> load(Input& in, std::map<std::string, std::string>* metadata) {
  uint64_t size = in.size();
  if (size < 8)
    in.fail("truncated: " + std::to_string(size) + " bytes, the header length alone needs 8");
  unsigned char len[8];
  in.read(0, len, 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > size - 8)
    in.fail("truncated: the header length is " + std::to_string(n) + " bytes, but only " +
            std::to_string(size - 8) + " bytes follow it");
  if (n > kMaxHeaderBytes)
    in.fail("the header length " + std::to_string(n) + " exceeds the limit of " +
            std::to_string(kMaxHeaderBytes) + " bytes");
  std::string header(n, '\0');
  in.read(8, header.data(), n);

  if (metadata) metadata->clear();
  std::map<std::string, Tensor> out;
  for (const Entry& e : parse_header(header, size - 8 - n, in, metadata)) {
    Tensor t(e.dtype, e.shape);
    in.read(8 + n + e.begin, t.raw_data(), e.end - e.begin);
    if (e.dtype == DType::Bool) check_bools(t, e.name, in);
    out.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace

std::string to_safetensors_bytes(const std::map<std::string, Tensor>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  Layout l = layout(tensors, metadata);
  std::string out = std::move(l.prefix);
  for (const Tensor& t : l.tensors) out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Layout l = layout(tensors, metadata);
  TempFile file(path);
  file.write(l.prefix.data(), l.prefix.size());
  for (const Tensor& t : l.tensors) file.write(t.raw_data(), t.nbytes());
  file.commit();
}

std::map<std::string, Tensor> from_safetensors_bytes(const std::string& bytes,
                                                     std::map<std::string, std::string>* metadata) {
  StringInput in(bytes);
  return load(in, metadata);
}

std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata) {
  FileInput in(path);
  return load(in, metadata);
}

}  // namespace ingot
