#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ingot/dtype.h"
#include "ingot/shape.h"
#include "ingot/tensor.h"

using namespace ingot;

TEST(DType, Promotion) {
  EXPECT_EQ(promote_types(DType::Int32, DType::Float32), DType::Float32);
  EXPECT_EQ(promote_types(DType::Int8, DType::UInt8), DType::Int16);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Bool, DType::Int64), DType::Int64);
  EXPECT_EQ(promote_types(DType::Float32, DType::Float64), DType::Float64);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
  EXPECT_EQ(promote_types(DType::Bool, DType::Bool), DType::Bool);
  EXPECT_EQ(to_floating(DType::Int32), DType::Float32);
  EXPECT_EQ(to_floating(DType::Float64), DType::Float64);
}

TEST(DType, NamesRoundTripAndErrors) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::Int64), 8u);
  try {
    parse_dtype("float128");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float128"), std::string::npos);
  }
}

TEST(DType, HalfConversions) {
  EXPECT_EQ(static_cast<float>(Half(1.0f)), 1.0f);
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);            // largest finite
  EXPECT_EQ(Half(65536.0f).bits, 0x7c00);            // overflow -> inf
  EXPECT_EQ(Half(5.960464477539063e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::nanf("")))));
  EXPECT_EQ(static_cast<float>(Half(0.1f)), 0.0999755859375f);  // round to nearest
  // Every half value round-trips through float exactly.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h;
    h.bits = static_cast<uint16_t>(b);
    float f = h;
    if (std::isnan(f)) continue;
    EXPECT_EQ(Half(f).bits, h.bits) << b;
  }
}

TEST(DType, BFloat16Conversions) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.0f)), 3.0f);
  // 1 + 2^-8 is exactly halfway between two bfloat16 values: ties to even (down to 1).
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.01171875f)), 1.015625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
}

TEST(Shape, DimKinds) {
  EXPECT_EQ(Dim(3).kind(), Dim::Kind::Fixed);
  EXPECT_EQ(Dim("N").kind(), Dim::Kind::Symbol);
  EXPECT_EQ(Dim(nullptr).kind(), Dim::Kind::Unknown);
  Dim v("Batch...");
  EXPECT_EQ(v.kind(), Dim::Kind::Variadic);
  EXPECT_EQ(v.name(), "Batch");
  EXPECT_EQ(Dim("...").name(), "");
  ShapeTemplate t = {"Batch...", nullptr, 3, "H"};
  EXPECT_EQ(to_string(t), "[\"Batch...\", None, 3, \"H\"]");
  EXPECT_THROW(Dim(-1), Error);
  EXPECT_THROW(Dim(""), Error);
  SymShape s = {SymDim(2), SymDim("N")};
  EXPECT_EQ(to_string(s), "[2, N]");
  EXPECT_FALSE(is_static(s));
  EXPECT_THROW(to_shape(s), Error);
}

TEST(Tensor, CreateReadConvert) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(-1), 3);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);  // aligned buffers
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  Tensor h = t.astype(DType::Float16);
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Tensor b = Tensor::from_vector<double>({0, 2.5, -1}, {3}).astype(DType::Bool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_THROW(Tensor(DType::Float32, {2, -1}), Error);
}

// Floats out of an integer type's range saturate and NaN becomes 0, as the cast op's kernel
// does (C leaves the conversion undefined: UBSan caught 1.4e219 -> int64 in the ONNX importer).
TEST(Tensor, AsTypeToIntegersSaturates) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::from_vector<double>({1.4e219, -1.4e219, inf, -inf, nan, -7.9, 300}, {7});
  EXPECT_EQ(x.astype(DType::Int64).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0, -7, 300}));
  EXPECT_EQ(x.astype(DType::Int8).to_vector<int64_t>(), (std::vector<int64_t>{127, -128, 127, -128, 0, -7, 127}));
  EXPECT_EQ(x.astype(DType::UInt8).to_vector<int64_t>(), (std::vector<int64_t>{255, 0, 255, 0, 0, 0, 255}));
}

TEST(Tensor, ViewsAndCopies) {
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor tt = t.transpose({1, 0});
  EXPECT_TRUE(tt.shares_storage(t));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(tt.item(1), 4.0);
  Tensor c = tt.contiguous();
  EXPECT_FALSE(c.shares_storage(t));
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  Tensor r = t.reshape({3, -1});
  EXPECT_TRUE(r.shares_storage(t));
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_THROW(t.reshape({4, -1}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
  EXPECT_THROW(t.transpose({0, 0}), Error);
  Tensor z(DType::Float32, {0, 3});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_TRUE(z.to_vector<float>().empty());
  Tensor s = Tensor::scalar<double>(2.5);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item(), 2.5);
}

TEST(Tensor, WrapBorrowsMemory) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  Tensor t = Tensor::wrap(owner->data(), DType::Float32, {2, 2}, {1, 2}, owner);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));  // column-major view
  (*owner)[0] = 10;
  EXPECT_EQ(t.item(0), 10.0);
  EXPECT_THROW(Tensor::wrap(owner->data(), DType::Float32, {2, 2}, {1}, owner), Error);
}

TEST(Tensor, Comparisons) {
  Tensor a = Tensor::from_vector<float>({1, 2, std::numeric_limits<float>::quiet_NaN()}, {3});
  Tensor b = Tensor::from_vector<float>({1, 2.00001f, std::numeric_limits<float>::quiet_NaN()}, {3});
  EXPECT_TRUE(allclose(a, b));
  EXPECT_FALSE(equal(a, b));
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_FALSE(allclose(a, Tensor::from_vector<float>({1, 3, 0}, {3})));
  EXPECT_NEAR(max_abs_diff(Tensor::from_vector<float>({1, 2}, {2}), Tensor::from_vector<float>({1.5f, 2}, {2})), 0.5, 1e-9);
  EXPECT_NE(a.str().find("float32[3]"), std::string::npos);
}

TEST(Tensor, UninitializedHasShapeAndAlignment) {
  Tensor t = Tensor::uninitialized(DType::Float64, {3, 5});
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_THROW(Tensor::uninitialized(DType::Float32, {-1}), Error);
  EXPECT_EQ(Tensor::uninitialized(DType::Int8, {0}).numel(), 0);
}

TEST(BufferCache, LargeBuffersAreRecycledAndZeroedOnRequest) {
  set_buffer_cache_limit(size_t{64} << 20);
  const void* first = nullptr;
  {
    Tensor a = Tensor::uninitialized(DType::Float32, {1 << 19});  // 2 MiB: cached when freed
    a.data<float>()[5] = 42.0f;
    first = a.raw_data();
  }
  EXPECT_GE(buffer_cache_bytes(), size_t{2} << 20);
  Tensor b(DType::Float32, {1 << 19});  // takes the cached block and zero-fills it
  EXPECT_EQ(b.raw_data(), first);
  EXPECT_EQ(b.data<float>()[5], 0.0f);
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  Tensor small = Tensor::uninitialized(DType::Float32, {100});  // below 1 MiB: plain allocation
  b = Tensor();
  set_buffer_cache_limit(0);  // frees what the cache holds; later frees go to the OS
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  { Tensor c = Tensor::uninitialized(DType::Float32, {1 << 19}); }
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  set_buffer_cache_limit(size_t{4} << 30);
}
