// NumPy's .npy and .npz files (src/io/npy.h): every dtype round trips through the bytes NumPy
// writes (the seed corpus holds files NumPy made), and every malformed file is an ingot::Error
// naming what is wrong.
#include <gtest/gtest.h>

#include <filesystem>

#include "ingot/error.h"
#include "io/npy.h"
#include "op_test_util.h"
#include "runtime/atomic_file.h"

using namespace ingot;
using ingot::testing::Contains;
using ingot::testing::error_of;
using ingot::testing::TempDir;

namespace {

const std::string kSource = INGOT_SOURCE_DIR_FOR_TESTS;

TEST(Npy, EveryDtypeRoundTrips) {
  for (DType t : {DType::Bool, DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64, DType::Float16,
                  DType::Float32, DType::Float64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{0, 4}, Shape{2, 1, 3}}) {
      const Tensor x = ingot::testing::random_tensor(s, 1, -3, 3).astype(t);
      const std::string bytes = npy::serialize(x);
      EXPECT_EQ((bytes.find('\n') + 1) % 64, 0u);  // the data starts 64-byte aligned, as NumPy's
      const Tensor back = npy::parse(bytes);
      EXPECT_EQ(back.dtype(), t);
      EXPECT_EQ(back.shape(), s);
      EXPECT_TRUE(equal(back, x));
    }
  }
  // A transposed view is written in C order.
  const Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(equal(npy::parse(npy::serialize(m.transpose({1, 0}))), m.transpose({1, 0}).contiguous()));
}

TEST(Npy, ReadsWhatNumPyWrote) {
  const Tensor m = npy::load(kSource + "/fuzz/corpus/npy/f32_matrix");  // np.arange(6, float32).reshape(2, 3)
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(npy::load(kSource + "/fuzz/corpus/npy/scalar_f64").to_vector<double>(), std::vector<double>{2.5});
  EXPECT_EQ(npy::load(kSource + "/fuzz/corpus/npy/version2_int32").to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(npy::load(kSource + "/fuzz/corpus/npy/int64_zero_size").shape(), (Shape{0, 4}));
  EXPECT_TRUE(Contains(error_of([&] { npy::load(kSource + "/fuzz/corpus/npy/fortran_order"); }), "Fortran-order"));
  EXPECT_TRUE(Contains(error_of([&] { npy::load(kSource + "/fuzz/corpus/npy/big_endian"); }), "big-endian"));
  EXPECT_TRUE(Contains(error_of([&] { npy::load(kSource + "/fuzz/corpus/npy/truncated"); }), "bytes of data for 8 elements"));
}

TEST(Npy, MalformedFilesAreClearErrors) {
  const std::string good = npy::serialize(Tensor::from_vector<float>({1, 2, 3}, {3}));
  auto err = [](const std::string& bytes) { return error_of([&] { npy::parse(bytes, "x.npy"); }); };
  EXPECT_TRUE(Contains(err("PK\x03\x04 a zip"), "not a .npy file"));
  EXPECT_TRUE(Contains(err(""), "not a .npy file"));
  std::string v = good;
  v[6] = 9;
  EXPECT_TRUE(Contains(err(v), "format version 9"));
  std::string long_header = good;
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  EXPECT_TRUE(Contains(err(long_header), "header runs past the end"));
  auto with_header = [&](const std::string& dict) {
    std::string h = dict + "\n";
    std::string out = std::string("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
    return out + h + std::string(64, '\0');
  };
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }")), "element type '<c8'"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }")),
                       "structured dtypes"));
  EXPECT_TRUE(Contains(err(with_header("{'fortran_order': False, 'shape': (2,), }")), "no 'descr'"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }")), "fortran_order"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }")),
                       "other than sizes"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }")),
                       "too large"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }")),
                       "multiply past int64"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }")),
                       "bytes of data for 1000 elements"));
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }")),
                       "not a tuple of sizes"));
  EXPECT_TRUE(Contains(error_of([] { npy::serialize(Tensor(DType::BFloat16, {2})); }), "bfloat16"));
  // Sizes whose product overflows int64 are refused even beside a zero (fuzz_npy: the strides of
  // such an empty tensor overflowed); a zero beside ordinary sizes is an empty tensor.
  EXPECT_TRUE(Contains(err(with_header("{'descr': '<f2', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296, 4294967296), }")),
                       "multiply past int64"));
  EXPECT_EQ(npy::parse(with_header("{'descr': '<f2', 'fortran_order': False, 'shape': (3, 0, 5), }")).shape(), (Shape{3, 0, 5}));
}

TEST(Npy, NpzArchivesRoundTripAndBadOnesAreErrors) {
  TempDir dir("ingot-npz");
  const std::string path = dir.path + "/a.npz";
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor b = Tensor::from_vector<int64_t>({7}, {});
  npy::save_npz(path, {{"scores", a}, {"step", b}});
  const auto back = npy::load_npz(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, "scores");
  EXPECT_TRUE(equal(back[0].second, a));
  EXPECT_EQ(back[1].first, "step");
  EXPECT_TRUE(equal(back[1].second, b));
  for (const auto& e : std::filesystem::directory_iterator(dir.path))  // no temporary left behind
    EXPECT_EQ(e.path().filename(), "a.npz");
  write_file_atomic(dir.path + "/bad.npz", "not a zip at all");
  EXPECT_TRUE(Contains(error_of([&] { npy::load_npz(dir.path + "/bad.npz"); }), "cannot open"));
  EXPECT_TRUE(Contains(error_of([&] { npy::save_npz(dir.path + "/no/such/dir/x.npz", {{"a", a}}); }), "npz: cannot"));
}

}  // namespace
