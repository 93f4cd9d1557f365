#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "ingot/serialize.h"

using namespace ingot;
namespace fs = std::filesystem;

namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ingot_safetensors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string read_file(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static void write_file(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }

  fs::path dir_;
};

// One tensor per dtype, plus an empty and a scalar tensor.
std::map<std::string, Tensor> all_dtypes() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"bool", Tensor::from_vector<bool>({true, false, true}, {3})},
      {"i8", Tensor::from_vector<int8_t>({-128, 0, 127}, {3, 1})},
      {"i16", Tensor::from_vector<int16_t>({-32768, 1, 32767, 4}, {2, 2})},
      {"i32", Tensor::from_vector<int32_t>({INT32_MIN, 7}, {2})},
      {"i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX, -1}, {1, 3})},
      {"u8", Tensor::from_vector<uint8_t>({0, 200, 255}, {3})},
      {"f16", Tensor::from_vector<Half>({Half(0.1f), Half(-65504.f)}, {2})},
      {"bf16", Tensor::from_vector<BFloat16>({BFloat16(3.25f), BFloat16(-1e30f)}, {2, 1})},
      {"f32", Tensor::from_vector<float>({0.1f, -0.0f, float(inf), NAN, 1e-40f, 5}, {2, 3})},
      {"f64", Tensor::from_vector<double>({1.0 / 3, -inf, 1e-310}, {3})},
      {"empty", Tensor(DType::Float32, {0, 4})},
      {"scalar", Tensor::scalar<double>(42.5)},
  };
}

void expect_same(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const Tensor& u = b.at(name);
    EXPECT_EQ(t.dtype(), u.dtype()) << name;
    EXPECT_EQ(t.shape(), u.shape()) << name;
    ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
    Tensor tc = t.contiguous();
    EXPECT_EQ(std::memcmp(tc.raw_data(), u.raw_data(), t.nbytes()), 0) << name << " bits differ";
  }
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "missing '" << fragment << "' in: " << e.what();
  }
}

TEST_F(Safetensors, FileRoundTripAllDtypes) {
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "a\"b\n"}};
  save_safetensors(path("m.safetensors"), all_dtypes(), meta);
  std::map<std::string, std::string> meta_back = {{"stale", "x"}};
  expect_same(all_dtypes(), load_safetensors(path("m.safetensors"), &meta_back));
  EXPECT_EQ(meta_back, meta);
}

TEST_F(Safetensors, BytesMatchFileAndRoundTrip) {
  std::string bytes = to_safetensors_bytes(all_dtypes());
  save_safetensors(path("m.safetensors"), all_dtypes());
  EXPECT_EQ(read_file(path("m.safetensors")), bytes);
  std::map<std::string, std::string> meta = {{"stale", "x"}};
  expect_same(all_dtypes(), from_safetensors_bytes(bytes, &meta));
  EXPECT_TRUE(meta.empty());
  expect_same({}, from_safetensors_bytes(to_safetensors_bytes({})));
}

TEST_F(Safetensors, WritesNonContiguousTensorsInRowMajorOrder) {
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose({1, 0});
  auto back = from_safetensors_bytes(to_safetensors_bytes({{"t", t}}));
  EXPECT_EQ(back.at("t").shape(), (Shape{3, 2}));
  EXPECT_EQ(back.at("t").to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
}

TEST_F(Safetensors, HeaderBytesFollowTheSpec) {
  std::string bytes = to_safetensors_bytes({{"b", Tensor::from_vector<float>({1.0f, -2.0f}, {2})},
                                            {"a", Tensor::from_vector<uint8_t>({7}, {1, 1})}},
                                           {{"k", "v"}});
  std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"U8","shape":[1,1],"data_offsets":[0,1]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // padded so data starts 8-byte aligned
  ASSERT_EQ(header.size() % 8, 0u);
  std::string expected(8, '\0');
  for (int i = 0; i < 8; ++i) expected[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  expected += header;
  expected += std::string("\x07", 1);              // a = 7
  expected += std::string("\x00\x00\x80\x3f", 4);  // 1.0f, little-endian
  expected += std::string("\x00\x00\x00\xc0", 4);  // -2.0f
  EXPECT_EQ(bytes, expected);
}

TEST_F(Safetensors, ReadsFilesWrittenByOtherTools) {
  // Key order, whitespace and padding as another writer might produce them.
  std::string header = R"( { "x" : { "data_offsets" : [ 2, 6 ], "shape" : [ ], "dtype" : "I32" },
    "__metadata__" : { "format" : "np" }, "y" : { "shape":[2], "dtype":"BOOL",
    "data_offsets":[0,2] } }   )";
  header.erase(0, 1);  // the header must start with '{'
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  bytes += header + std::string("\x01\x00", 2) + std::string("\xfe\xff\xff\xff", 4);
  std::map<std::string, std::string> meta;
  auto t = from_safetensors_bytes(bytes, &meta);
  EXPECT_EQ(t.at("x").to_vector<int32_t>(), std::vector<int32_t>{-2});
  EXPECT_EQ(t.at("x").shape(), Shape{});
  EXPECT_EQ(t.at("y").to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(meta.at("format"), "np");
}

TEST_F(Safetensors, SaveIsAtomicAndLeavesNoTemporaries) {
  std::string p = path("m.safetensors");
  save_safetensors(p, {{"a", Tensor::scalar<float>(1)}});
  save_safetensors(p, {{"b", Tensor::scalar<float>(2)}});  // replaces the old file
  auto back = load_safetensors(p);
  EXPECT_EQ(back.size(), 1u);
  EXPECT_EQ(back.at("b").item(), 2.0);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);

  // A failed save (bad tensor) leaves the previous file intact and nothing else behind.
  expect_error([&] { save_safetensors(p, {{"u", Tensor()}}); }, "tensor \"u\" is undefined");
  expect_error(
      [&] {
        save_safetensors(p, {{"__metadata__", Tensor::scalar<float>(1)}});
      },
      "'__metadata__' is reserved");
  EXPECT_EQ(load_safetensors(p).count("b"), 1u);
  files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);

  expect_error([&] { save_safetensors(path("no/such/dir/m.safetensors"), {}); },
               "Cannot write safetensors file");
  expect_error([&] { load_safetensors(dir_.string()); }, "not a regular file");
  expect_error([&] { load_safetensors(path("missing.safetensors")); },
               "Cannot open safetensors file '" + path("missing.safetensors") + "'");
}

TEST_F(Safetensors, RejectsNamesThatAreNotUtf8) {
  expect_error(
      [] {
        to_safetensors_bytes({{"\xff", Tensor::scalar<float>(1)}});
      },
      "must be valid UTF-8");
}

// A small valid file: a = F32[2], b = I64[] (16 bytes of data).
std::string small_file() {
  return to_safetensors_bytes(
      {{"a", Tensor::from_vector<float>({1, 2}, {2})}, {"b", Tensor::scalar<int64_t>(3)}});
}

// The small file with its header replaced by `header` (length prefix fixed up).
std::string with_header(const std::string& header, const std::string& data = std::string(16, 'x')) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

TEST_F(Safetensors, CorruptFilesNameTheFileAndTheProblem) {
  std::string good = small_file();
  std::string p = path("bad.safetensors");
  write_file(p, good.substr(0, 5));
  expect_error([&] { load_safetensors(p); },
               "Invalid safetensors file '" + p + "': truncated: 5 bytes");
}

TEST_F(Safetensors, RejectsTruncation) {
  std::string good = small_file();
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  for (size_t cut : {size_t{0}, size_t{7}, size_t{8}, size_t{20}, size_t{8 + header_len},
                     size_t{8 + header_len + 3}, good.size() - 1}) {
    SCOPED_TRACE(cut);
    expect_error([&] { from_safetensors_bytes(good.substr(0, cut)); }, "truncated");
  }
}

TEST_F(Safetensors, RejectsBadHeaderLength) {
  std::string good = small_file();
  std::string flipped = good;
  flipped[7] = '\x80';  // header length ~ 2^63
  expect_error([&] { from_safetensors_bytes(flipped); }, "truncated: the header length is");
  std::string huge = std::string(8, '\0') + std::string(100'000'001, ' ');
  huge[0] = '\x01';
  huge[1] = '\xe1';
  huge[2] = '\xf5';
  huge[3] = '\x05';  // 100'000'001
  expect_error([&] { from_safetensors_bytes(huge); }, "exceeds the limit of 100000000 bytes");
}

TEST_F(Safetensors, RejectsMalformedHeaders) {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string b = R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]})";
  auto header = [&](const std::string& entries) { return with_header("{" + entries + "}"); };
  auto rejects = [&](const std::string& bytes, const std::string& fragment) {
    SCOPED_TRACE(fragment);
    expect_error([&] { from_safetensors_bytes(bytes); }, fragment);
  };
  EXPECT_EQ(from_safetensors_bytes(header(a + "," + b)).size(), 2u);  // the baseline is valid

  rejects(with_header(" {}", ""), "does not start with '{'");
  rejects(with_header("{\"a\": [1,", ""), "the header is not valid JSON");
  rejects(with_header("{} trailing", ""), "the header is not valid JSON");
  rejects(with_header(std::string("{\"\xff\":1}"), ""), "the header is not valid JSON");
  rejects(header(a + "," + b + "," + a), "duplicate key \"a\"");
  rejects(header(R"("a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]},)" + b),
          "duplicate key \"dtype\"");
  rejects(header(R"("a":[1,2],)" + b), "tensor \"a\": expected an object");
  rejects(header(R"("a":{"shape":[2],"data_offsets":[0,8]},)" + b), "missing field 'dtype'");
  rejects(header(R"("a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]},)" + b),
          "unsupported dtype \"F8_E4M3\"");
  rejects(header(R"("a":{"dtype":5,"shape":[2],"data_offsets":[0,8]},)" + b),
          "unsupported dtype 5");
  rejects(header(R"("a":{"dtype":"F32","shape":2,"data_offsets":[0,8]},)" + b),
          "shape must be an array");
  rejects(header(R"("a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]},)" + b),
          "shape entries must be non-negative integers, got -2");
  rejects(header(R"("a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]},)" + b),
          "shape entries must be non-negative integers");
  rejects(header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]},)" + b),
          "data_offsets must be [begin, end] with 0 <= begin <= end, got [8,0]");
  rejects(header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0]},)" + b),
          "data_offsets must be [begin, end]");
  rejects(header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]},)" + b),
          "data_offsets must be [begin, end]");
  rejects(header(R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]},)" + b),
          "data_offsets [0,8] span 8 bytes, but F32[3] needs 12");
  rejects(
      header(R"("a":{"dtype":"F32","shape":[4611686018427387904,4,0],"data_offsets":[0,0]},)" + b),
      "is too large");
  rejects(header(R"("a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]},)" + b),
          "is too large");
  rejects(header(a + R"(,"b":{"dtype":"I64","shape":[],"data_offsets":[4,12]})"),
          "tensor \"b\" at bytes [4, 12) overlaps the tensor before it");
  rejects(header(R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)" + b),
          "bytes [4, 8) of the data belong to no tensor");
  rejects(header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                 R"("b":{"dtype":"I64","shape":[],"data_offsets":[0,8]})"),
          "bytes [8, 16) of the data belong to no tensor");
  rejects(header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                 R"("b":{"dtype":"I64","shape":[],"data_offsets":[16,24]})"),
          "bytes [0, 8) of the data belong to no tensor");
  rejects(header(R"("a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)" + b),
          "bytes [0, 4) of the data belong to no tensor");
  rejects(header(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"I64","shape":[2],"data_offsets":[8,24]})"),
          "truncated: the header describes 24 bytes of data, the file has 16");
  rejects(header(a), "8 trailing bytes belong to no tensor");
  rejects(header(R"("__metadata__":{"k":1},)" + a + "," + b),
          "__metadata__ value for \"k\" must be a string, got number");
  rejects(header(R"("__metadata__":[],)" + a + "," + b), "__metadata__ must be an object");
  rejects(with_header(R"({"t":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                      std::string("\x01\x02", 2)),
          "tensor \"t\": BOOL element 1 has byte value 2");
}

// Every single-byte corruption and every truncation of a valid file either loads or throws
// ingot::Error: never a crash, never another exception type.
TEST_F(Safetensors, SurvivesEveryByteFlipAndTruncation) {
  std::string good = to_safetensors_bytes({{"a", Tensor::from_vector<float>({1, 2}, {2})},
                                           {"m", Tensor::from_vector<bool>({true, false}, {2})},
                                           {"z", Tensor(DType::Int16, {0})}},
                                          {{"k", "v"}});
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      try {
        from_safetensors_bytes(bad);
      } catch (const Error&) {
      }
    }
    EXPECT_THROW(from_safetensors_bytes(good.substr(0, i)), Error) << "cut at " << i;
  }
}

}  // namespace
