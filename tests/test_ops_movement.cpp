// identity, reshape, transpose, broadcast_to, slice, concat and gather: shape rules (symbolic
// and concrete), dtype rules, values and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "op_test_util.h"

using namespace ingot;
using namespace ingot::testing;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Tensor iota(Shape shape, DType dtype = DType::Float32) {
  Tensor t(DType::Float64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = static_cast<double>(i);
  return t.astype(dtype);
}

Attrs shape_attr(std::vector<int64_t> shape) { return {{"shape", shape}}; }

Attrs slice_attrs(std::vector<int64_t> starts, std::vector<int64_t> ends,
                  std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {}) {
  Attrs a{{"starts", starts}, {"ends", ends}};
  if (!axes.empty()) a.set("axes", axes);
  if (!steps.empty()) a.set("steps", steps);
  return a;
}

// NumPy's x[start:end:step] of a 1-D range 0..d-1, by walking indices.
std::vector<float> numpy_slice(int64_t d, int64_t start, int64_t end, int64_t step) {
  auto norm = [d](int64_t i, int64_t lo, int64_t hi) {
    if (i < 0) i = i < -d ? lo : i + d;
    return std::min(std::max(i, lo), hi);
  };
  std::vector<float> out;
  if (step > 0) {
    for (int64_t i = norm(start, 0, d); i < norm(end, 0, d); i += step) out.push_back(static_cast<float>(i));
  } else {
    for (int64_t i = norm(start, -1, d - 1); i > norm(end, -1, d - 1); i += step)
      out.push_back(static_cast<float>(i));
  }
  return out;
}

}  // namespace

// ================================ identity ================================

TEST(MovementOps, Identity) {
  EXPECT_EQ(infer_op_shape("identity", {{"N", 3}}), "[N, 3]");
  for (DType t : {DType::Float32, DType::Float16, DType::Bool, DType::Int64}) {
    Tensor x = iota({2, 3}, t);
    Tensor y = run_op("identity", {x});
    EXPECT_TRUE(equal(x, y));
    EXPECT_FALSE(y.shares_storage(x));
  }
}

// ================================ reshape ================================

TEST(MovementOps, ReshapeShapeRule) {
  EXPECT_EQ(infer_op_shape("reshape", {{2, 3, 4}}, shape_attr({4, -1})), "[4, 6]");
  EXPECT_EQ(infer_op_shape("reshape", {{2, 3, 4}}, shape_attr({0, 12})), "[2, 12]");
  // 0 copies the input's dim (a symbol too); -1 is computed once the other dims are known.
  EXPECT_EQ(infer_op_shape("reshape", {{"N", 3, 4}}, shape_attr({0, -1})), "[N, 12]");
  EXPECT_EQ(infer_op_shape("reshape", {{"N", 3, 4}}, shape_attr({0, 2, -1})), "[N, 2, 6]");
  // -1 against an unknown input dim stays unknown.
  std::vector<SymShape> s = infer_op_shapes("reshape", {{"N", 3, 4}}, shape_attr({-1, 12}));
  EXPECT_FALSE(s[0][0].known());
  EXPECT_EQ(s[0][1].value, 12);
  // Fully known output: the single unknown input dim is solved.
  EXPECT_EQ(infer_all("reshape", {{nullptr, 4}}, shape_attr({12, 2}))[0], "[6, 4]");
  // Zero-size tensors.
  EXPECT_EQ(infer_op_shape("reshape", {{0, 3}}, shape_attr({-1, 3})), "[0, 3]");
  EXPECT_EQ(infer_op_shape("reshape", {{2, 0}}, shape_attr({0, -1})), "[2, 0]");
}

TEST(MovementOps, ReshapeErrors) {
  expect_error([] { infer_op_shape("reshape", {{2, 3}}, shape_attr({4})); },
               "cannot reshape 6 elements into 4");
  expect_error([] { infer_op_shape("reshape", {{2, 3}}, shape_attr({-1, -1})); }, "more than one -1");
  expect_error([] { infer_op_shape("reshape", {{2, 3}}, shape_attr({4, -1})); }, "not a multiple of 4");
  expect_error([] { infer_op_shape("reshape", {{2, 3}}, shape_attr({-2, 3})); }, "invalid dimension -2");
  expect_error([] { infer_op_shape("reshape", {{6}}, shape_attr({1, 0})); }, "copies input dim 1");
  expect_error([] { eval_only("reshape", {iota({2, 3})}, shape_attr({5})); }, "cannot reshape [2, 3]");
  expect_error([] { eval_only("reshape", {iota({2, 3})}, shape_attr({4, -1})); }, "cannot reshape");
}

TEST(MovementOps, ReshapeValues) {
  Tensor x = iota({2, 3, 4});
  Tensor y = run_op("reshape", {x}, shape_attr({0, -1}));
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(run_op("reshape", {x}, shape_attr({-1})).shape(), (Shape{24}));
  EXPECT_EQ(run_op("reshape", {iota({1}, DType::Int8)}, shape_attr({})).shape(), (Shape{}));
  EXPECT_EQ(run_op("reshape", {iota({0, 3})}, shape_attr({3, 0, -1})).shape(), (Shape{3, 3, 0}));
}

// ================================ transpose ================================

TEST(MovementOps, TransposeShapeRule) {
  EXPECT_EQ(infer_op_shape("transpose", {{"N", 3, 4}}), "[4, 3, N]");
  EXPECT_EQ(infer_op_shape("transpose", {{"N", 3, 4}}, {{"perm", std::vector<int64_t>{0, 2, 1}}}),
            "[N, 4, 3]");
  EXPECT_EQ(infer_op_shape("transpose", {{"N", 3, 4}}, {{"perm", std::vector<int64_t>{-1, 0, 1}}}),
            "[4, N, 3]");
  // The perm gives an input of unknown rank its rank.
  EXPECT_EQ(infer_all("transpose", {{"B..."}}, {{"perm", std::vector<int64_t>{1, 0}}})[0].size(),
            std::string("[u1, u2]").size());
  expect_error([] { infer_op_shape("transpose", {{2, 3}}, {{"perm", std::vector<int64_t>{0, 0}}}); },
               "not a permutation");
  expect_error([] { infer_op_shape("transpose", {{2, 3}}, {{"perm", std::vector<int64_t>{0, 1, 2}}}); },
               "rank 3");
  expect_error([] { eval_only("transpose", {iota({2, 3})}, {{"perm", std::vector<int64_t>{1, 2}}}); },
               "not a permutation");
}

TEST(MovementOps, TransposeValues) {
  Tensor x = iota({2, 3, 4});
  Tensor y = run_op("transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  ASSERT_EQ(y.shape(), (Shape{4, 2, 3}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k)
        EXPECT_EQ(y.item((i * 2 + j) * 3 + k), x.item((j * 3 + k) * 4 + i));
  for (DType t : {DType::Float16, DType::Bool, DType::Int64, DType::Float64}) {
    Tensor xt = iota({3, 5}, t);
    EXPECT_TRUE(equal(run_op("transpose", {xt}), xt.transpose({1, 0}).contiguous()));
  }
  EXPECT_EQ(run_op("transpose", {iota({0, 3})}).shape(), (Shape{3, 0}));
  EXPECT_EQ(run_op("transpose", {Tensor::scalar<float>(5)}).item(), 5);
}

// ================================ broadcast_to ================================

TEST(MovementOps, BroadcastTo) {
  EXPECT_EQ(infer_op_shape("broadcast_to", {{3, 1}}, shape_attr({2, 3, 4})), "[2, 3, 4]");
  EXPECT_EQ(infer_op_shape("broadcast_to", {{"N", 1}}, shape_attr({5, 4})), "[5, 4]");
  expect_error([] { infer_op_shape("broadcast_to", {{3, 2}}, shape_attr({3, 4})); },
               "cannot broadcast input dim 1 of size 2");
  expect_error([] { infer_op_shape("broadcast_to", {{1, 3, 2}}, shape_attr({3, 2})); }, "rank 3");
  expect_error([] { eval_only("broadcast_to", {iota({3, 2})}, shape_attr({3, 4})); },
               "cannot broadcast [3, 2]");
  Tensor y = run_op("broadcast_to", {iota({3, 1})}, shape_attr({2, 3, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(run_op("broadcast_to", {iota({1}, DType::Int8)}, shape_attr({0, 3})).shape(),
            (Shape{0, 3}));
  EXPECT_EQ(run_op("broadcast_to", {Tensor::scalar<bool>(true)}, shape_attr({2})).to_vector<bool>(),
            (std::vector<bool>{true, true}));
}

// ================================ slice ================================

TEST(MovementOps, SliceShapeRule) {
  EXPECT_EQ(infer_op_shape("slice", {{10, "N"}}, slice_attrs({2}, {8})), "[6, N]");
  EXPECT_EQ(infer_op_shape("slice", {{10, "N"}}, slice_attrs({1}, {8}, {}, {2})), "[4, N]");
  EXPECT_EQ(infer_op_shape("slice", {{10, "N"}}, slice_attrs({-3}, {kMax})), "[3, N]");
  EXPECT_EQ(infer_op_shape("slice", {{10, "N"}}, slice_attrs({2}, {100})), "[8, N]");
  EXPECT_EQ(infer_op_shape("slice", {{10, "N"}}, slice_attrs({-1}, {kMin}, {}, {-1})), "[10, N]");
  EXPECT_EQ(infer_op_shape("slice", {{10, "N"}}, slice_attrs({8}, {1}, {}, {-3})), "[3, N]");
  EXPECT_EQ(infer_op_shape("slice", {{10, 7}}, slice_attrs({1, 5}, {3, 2}, {-1, 0})), "[0, 2]");
  // A symbolic dim keeps its name only when the slice provably keeps it whole.
  EXPECT_EQ(infer_op_shape("slice", {{"N", 4}}, slice_attrs({0}, {kMax})), "[N, 4]");
  EXPECT_EQ(infer_op_shape("slice", {{"N", 4}}, slice_attrs({-1}, {kMin}, {}, {-1})), "[N, 4]");
  EXPECT_FALSE(infer_op_shapes("slice", {{"N", 4}}, slice_attrs({1}, {kMax}))[0][0].known());
}

TEST(MovementOps, SliceErrors) {
  expect_error([] { infer_op_shape("slice", {{10}}, slice_attrs({0}, {5}, {}, {0})); }, "invalid step 0");
  expect_error([] { infer_op_shape("slice", {{10, 4}}, slice_attrs({0, 1}, {5, 2}, {1, -1})); },
               "given twice");
  expect_error([] { infer_op_shape("slice", {{10}}, slice_attrs({0, 1}, {5})); }, "2 starts but 1 ends");
  expect_error([] { infer_op_shape("slice", {{10}}, slice_attrs({0}, {5}, {1})); }, "out of range");
  expect_error([] { eval_only("slice", {iota({4})}, slice_attrs({0}, {5}, {2})); }, "out of range");
}

TEST(MovementOps, SliceValuesMatchNumPy) {
  const int64_t d = 7;
  for (int64_t step : {1, 2, 3, -1, -2, -5})
    for (int64_t start : std::vector<int64_t>{-10, -7, -3, -1, 0, 2, 6, 7, 9, kMax, kMin})
      for (int64_t end : std::vector<int64_t>{-10, -3, 0, 1, 5, 7, 12, kMax, kMin}) {
        SCOPED_TRACE("[" + std::to_string(start) + ":" + std::to_string(end) + ":" +
                     std::to_string(step) + "]");
        Tensor y = run_op("slice", {iota({d})}, slice_attrs({start}, {end}, {}, {step}));
        const std::vector<float> want = numpy_slice(d, start, end, step);
        ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
        if (!want.empty()) {
          ASSERT_EQ(y.to_vector<float>(), want);
        }
      }
}

TEST(MovementOps, SliceMultiAxis) {
  Tensor x = iota({3, 4, 5}, DType::Int32);
  // x[:, 3:0:-2, 1:5:3]
  Tensor y = run_op("slice", {x}, slice_attrs({3, 1}, {0, 5}, {1, 2}, {-2, 3}));
  ASSERT_EQ(y.shape(), (Shape{3, 2, 2}));
  std::vector<int32_t> want;
  for (int i = 0; i < 3; ++i)
    for (int j : {3, 1})
      for (int k : {1, 4}) want.push_back(i * 20 + j * 5 + k);
  EXPECT_EQ(y.to_vector<int32_t>(), want);
  EXPECT_EQ(run_op("slice", {iota({0, 4}, DType::Float16)}, slice_attrs({1}, {3}, {1})).shape(),
            (Shape{0, 2}));
}

// ================================ concat ================================

TEST(MovementOps, ConcatShapeRule) {
  Attrs ax1{{"axis", int64_t{1}}}, ax0{{"axis", int64_t{0}}};
  EXPECT_EQ(infer_op_shape("concat", {{"N", 3}, {"N", 5}}, ax1), "[N, 8]");
  EXPECT_EQ(infer_op_shape("concat", {{2, "A"}, {3, "A"}, {1, "A"}}, ax0), "[6, A]");
  EXPECT_EQ(infer_op_shape("concat", {{2, 3}, {4, 3}}, {{"axis", int64_t{-2}}}), "[6, 3]");
  EXPECT_EQ(infer_op_shape("concat", {{"N", 3}}, ax0), "[N, 3]");
  EXPECT_FALSE(infer_op_shapes("concat", {{"N", 3}, {2, 3}}, ax0)[0][0].known());
  // Non-axis dims are one dim across inputs: a known size reaches the unknown ones.
  EXPECT_EQ(infer_all("concat", {{2, nullptr}, {3, 7}}, ax0)[0], "[2, 7]");
  expect_error([] { infer_op_shape("concat", {{2, 3}, {2, 4}}, {{"axis", int64_t{0}}}); },
               "only the concat axis 0 may differ");
  expect_error([] { infer_op_shape("concat", {{2, 3}, {2, 3, 1}}, {{"axis", int64_t{0}}}); }, "rank");
  expect_error([] { infer_op_shape("concat", {{2, 3}, {2, 3}}, {{"axis", int64_t{2}}}); }, "out of range");
  expect_error([] { infer_op_shape("concat", {{2, 3}, {2, 3}}); }, "'axis'");
}

TEST(MovementOps, ConcatValues) {
  Tensor a = iota({2, 1, 2}), b = iota({2, 3, 2}), c = iota({2, 0, 2});
  Tensor y = run_op("concat", {a, b, c}, {{"axis", int64_t{1}}});
  ASSERT_EQ(y.shape(), (Shape{2, 4, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 0, 1, 2, 3, 4, 5,  //
                                                      2, 3, 6, 7, 8, 9, 10, 11}));
  // Mixed dtypes promote.
  Tensor m = run_op("concat", {iota({2}, DType::Int32), tensor<float>({0.5f}, {1})}, {{"axis", int64_t{0}}});
  EXPECT_EQ(m.dtype(), DType::Float32);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{0, 1, 0.5f}));
  Tensor h = run_op("concat", {iota({1, 2}, DType::BFloat16), iota({1, 2}, DType::BFloat16)},
                    {{"axis", int64_t{0}}});
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{0, 1, 0, 1}));
  expect_error([] { eval_only("concat", {iota({2, 3}), iota({2, 4})}, {{"axis", int64_t{0}}}); },
               "only axis 0 may differ");
  expect_error([] { eval_only("concat", {Tensor::scalar<float>(1)}, {{"axis", int64_t{0}}}); },
               "rank >= 1");
}

// ================================ gather ================================

TEST(MovementOps, GatherShapeAndDTypeRules) {
  EXPECT_EQ(infer_op_shape("gather", {{5, "D"}, {"I", "J"}}), "[I, J, D]");
  EXPECT_EQ(infer_op_shape("gather", {{"N", 5, 7}, {3}}, {{"axis", int64_t{1}}}), "[N, 3, 7]");
  EXPECT_EQ(infer_op_shape("gather", {{"N", 5, 7}, {}}, {{"axis", int64_t{-1}}}), "[N, 5]");
  expect_error([] { infer_op_shape("gather", {{5}, {2}}, {{"axis", int64_t{1}}}); }, "out of range");
  expect_error([] { infer_op_shape("gather", {{}, {2}}); }, "rank >= 1");
  expect_error([] { run_op("gather", {iota({4}), tensor<float>({1}, {1})}); },
               "indices must have an integer dtype, got float32");
  expect_error([] { run_op("gather", {iota({4}), tensor<bool>({true}, {1})}); },
               "indices must have an integer dtype, got bool");
}

TEST(MovementOps, GatherValues) {
  Tensor x = iota({3, 4});
  Tensor rows = run_op("gather", {x, tensor<int64_t>({2, -3, 2}, {3})});
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor cols = run_op("gather", {x, tensor<int32_t>({3, 0, -1, 1}, {2, 2})}, {{"axis", int64_t{1}}});
  ASSERT_EQ(cols.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(cols.to_vector<float>(),
            (std::vector<float>{3, 0, 3, 1, 7, 4, 7, 5, 11, 8, 11, 9}));
  Tensor scalar = run_op("gather", {iota({3, 2}, DType::Float16), Tensor::scalar<int8_t>(1)});
  EXPECT_EQ(scalar.to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(run_op("gather", {x, tensor<int64_t>({}, {0})}).shape(), (Shape{0, 4}));
  expect_error([&] { run_op("gather", {x, tensor<int64_t>({1, 3}, {2})}); },
               "index 3 is out of range for axis 0 of size 3");
  expect_error([&] { run_op("gather", {x, tensor<int32_t>({-5}, {1})}, {{"axis", int64_t{1}}}); },
               "index -5 is out of range for axis 1 of size 4");
}

TEST(MovementOps, TakeAlongAxisPicksOnePerRow) {
  // Picking the target class of each row of [N, C] logits.
  Tensor x = ingot::testing::tensor<float>({0, 1, 2, 10, 11, 12}, {2, 3});
  Tensor idx = ingot::testing::tensor<int64_t>({2, -3}, {2, 1});
  Tensor y = ingot::testing::run_op("take_along_axis", {x, idx}, {{"axis", int64_t{1}}});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 10}));
  // Along axis 0 with several picks per column.
  Tensor i0 = ingot::testing::tensor<int32_t>({1, 0, 1, 0, 0, 1}, {2, 3});
  Tensor z = ingot::testing::run_op("take_along_axis", {x, i0}, {{"axis", int64_t{0}}});
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{10, 1, 12, 0, 1, 12}));
  EXPECT_EQ(ingot::testing::infer_op_shape("take_along_axis", {{"N", "C"}, {nullptr, 1}}, {{"axis", int64_t{1}}}),
            "[N, 1]");
}

TEST(MovementOps, TakeAlongAxisErrors) {
  Tensor x = ingot::testing::tensor<float>({0, 1, 2, 3}, {2, 2});
  auto message = [&](const Tensor& idx, int64_t axis) -> std::string {
    try {
      ingot::testing::run_op("take_along_axis", {x, idx}, {{"axis", axis}});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(ingot::testing::tensor<int64_t>({5, 0}, {2, 1}), 1).find("out of range"), std::string::npos);
  EXPECT_NE(message(ingot::testing::tensor<float>({0, 0}, {2, 1}), 1).find("integer dtype"), std::string::npos);
  EXPECT_NE(message(ingot::testing::tensor<int64_t>({0, 0}, {2}), 1).find("rank"), std::string::npos);
  EXPECT_NE(message(ingot::testing::tensor<int64_t>({0, 0, 0}, {3, 1}), 1), "");
}

TEST(MovementOps, ReshapeKeepsASymbolThroughMinusOne) {
  EXPECT_EQ(infer_op_shape("reshape", {{"N"}}, {{"shape", std::vector<int64_t>{-1, 1}}}), "[N, 1]");
  EXPECT_EQ(infer_op_shape("reshape", {{"N", 4}}, {{"shape", std::vector<int64_t>{2, -1, 2}}}), "[2, N, 2]");
  // Different known factors: the unknowns differ, so nothing is unified.
  EXPECT_NE(infer_op_shape("reshape", {{"N", 4}}, {{"shape", std::vector<int64_t>{-1, 2}}}), "[N, 2]");
}
