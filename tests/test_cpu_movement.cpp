// The CPU backend's native index and slice movement kernels (prelude_movement.cpp) against the
// reference: slice with any axes and negative steps, slice_scatter, concat along any axis,
// concat_part, take_along_axis, scatter_add and index_add, over every element type they take,
// odd, size-1, zero-size and symbolic shapes and sizes past the parallel threshold; index errors
// with the reference's message; and a transformer's training step whose backward graph runs with
// no reference callback.
#include <gtest/gtest.h>

#include <limits>

#include "cpu_test_util.h"
#include "ingot/ingot.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::Contains;
using ingot::testing::error_of;
using ingot::testing::random_tensor;

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
constexpr int64_t kBegin = std::numeric_limits<int64_t>::min();

Tensor random_of(DType t, const Shape& s, uint64_t seed) {
  const Tensor x = random_tensor(s, seed, -60, 60);
  return t == DType::Bool ? x.astype(DType::Int32).astype(DType::Bool) : x.astype(t);
}

int callbacks(const std::string& src) { return count(src, "run_node(ctx->host->ctx"); }

TEST(CpuMovement, SliceSliceScatterConcatAndConcatPartAreNative) {
  struct SliceCase {
    ShapeTemplate x;
    Shape run;
    Attrs attrs;
  };
  const std::vector<SliceCase> slices = {
      {{5, 7}, {5, 7}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{6}}, {"axes", std::vector<int64_t>{1}}}},
      {{4, 6, 9}, {4, 6, 9},
       {{"starts", std::vector<int64_t>{-1, 1}}, {"ends", std::vector<int64_t>{kBegin, 8}},
        {"axes", std::vector<int64_t>{0, 2}}, {"steps", std::vector<int64_t>{-2, 3}}}},
      {{3, 1, 17}, {3, 1, 17},
       {{"starts", std::vector<int64_t>{16}}, {"ends", std::vector<int64_t>{kBegin}}, {"axes", std::vector<int64_t>{-1}},
        {"steps", std::vector<int64_t>{-1}}}},
      {{"N", 8}, {6, 8}, {{"starts", std::vector<int64_t>{-5}}, {"ends", std::vector<int64_t>{kEnd}}}},
      {{4, 0, 3}, {4, 0, 3}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{2}}, {"axes", std::vector<int64_t>{2}}}},
      {{6, 5}, {6, 5}, {{"starts", std::vector<int64_t>{7}}, {"ends", std::vector<int64_t>{9}}}},  // empty: past the end
      {{64, 300, 40}, {64, 300, 40},
       {{"starts", std::vector<int64_t>{2, 0}}, {"ends", std::vector<int64_t>{299, 40}}, {"axes", std::vector<int64_t>{1, 2}},
        {"steps", std::vector<int64_t>{1, 2}}}},
  };
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::Int64, DType::Int8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<Input> inputs;
    std::vector<Tensor> feed;
    for (size_t c = 0; c < slices.size(); ++c) {
      inputs.push_back({"x" + std::to_string(c), slices[c].x, t});
      feed.push_back(random_of(t, slices[c].run, 30 + c));
    }
    inputs.push_back({"a", {3, "M", 5}, t});
    inputs.push_back({"b", {3, 2, 5}, t});
    feed.push_back(random_of(t, {3, 4, 5}, 50));
    feed.push_back(random_of(t, {3, 2, 5}, 51));
    Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
      for (size_t c = 0; c < slices.size(); ++c) {
        const ValueId s = g.add_op("slice", {in[c]}, slices[c].attrs);
        g.set_output("slice" + std::to_string(c), s);
        // The gradient of the slice: the slice written back into zeros of x's shape.
        g.set_output("scatter" + std::to_string(c), g.add_op("slice_scatter", {s, in[c]}, slices[c].attrs));
      }
      const ValueId a = in[slices.size()], b = in[slices.size() + 1];
      const ValueId cat = g.add_op("concat", {a, b, a}, {{"axis", int64_t{1}}});
      g.set_output("concat", cat);
      g.set_output("last_axis", g.add_op("concat", {b, b}, {{"axis", int64_t{-1}}}));
      for (int64_t i = 0; i < 3; ++i)
        g.set_output("part" + std::to_string(i),
                     g.add_op("concat_part", {cat, a, b, a}, {{"axis", int64_t{1}}, {"index", i}}));
    });
    const std::string src = check(g, {feed}, unfused, 0, 0);
    EXPECT_EQ(callbacks(src), 0) << "no reference callback";
    EXPECT_GE(count(src, "ig_slice_copy<"), static_cast<int>(2 * slices.size()));
  }
}

TEST(CpuMovement, TakeAlongAxisAndTheScattersAreNative) {
  struct Case {
    Shape x, idx;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{6, 10}, {6, 1}, 1},          // one class per row: a loss's pick
      {{4, 5, 3}, {4, 7, 3}, 1},     // more picks than rows, repeats adding up
      {{5, 3}, {2, 3}, 0},
      {{3, 0, 2}, {3, 0, 2}, -1},    // empty
      {{512, 300}, {512, 300}, 1},   // past the parallel threshold
  };
  for (DType t : {DType::Float32, DType::Float64}) {
    for (DType it : {DType::Int64, DType::Int32}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " with " + std::string(dtype_name(it)) + " indices");
      std::vector<Input> inputs;
      std::vector<Tensor> feed;
      for (size_t c = 0; c < cases.size(); ++c) {
        const Case& k = cases[c];
        const int64_t ax = k.axis < 0 ? k.axis + static_cast<int64_t>(k.x.size()) : k.axis;
        const int64_t size = k.x[static_cast<size_t>(ax)];
        Tensor idx(DType::Int64, k.idx);
        const Tensor u = random_tensor(k.idx, 60 + c, 0, 1);
        for (int64_t i = 0; i < idx.numel(); ++i)  // negative ones too (from the end)
          idx.data<int64_t>()[i] = static_cast<int64_t>(u.item(i) * 2 * static_cast<double>(size)) - size;
        inputs.push_back({"x" + std::to_string(c), ingot::testing::template_of(k.x), t});
        inputs.push_back({"i" + std::to_string(c), ingot::testing::template_of(k.idx), it});
        inputs.push_back({"u" + std::to_string(c), ingot::testing::template_of(k.idx), t});
        feed.push_back(random_tensor(k.x, 70 + c).astype(t));
        feed.push_back(idx.astype(it));
        feed.push_back(random_tensor(k.idx, 80 + c).astype(t));
      }
      // index_add: the gradient of gather, rows of a [7, 4] table picked by [2, 3] indices.
      inputs.push_back({"table", {7, 4}, t});
      inputs.push_back({"rows", {2, 3}, it});
      inputs.push_back({"grads", {2, 3, 4}, t});
      feed.push_back(random_tensor({7, 4}, 90).astype(t));
      feed.push_back(Tensor::from_vector<int64_t>({0, 6, -1, 3, 0, 0}, {2, 3}).astype(it));
      feed.push_back(random_tensor({2, 3, 4}, 91).astype(t));
      Graph g = make_graph(inputs, [&](Graph& g, std::vector<ValueId>& in) {
        for (size_t c = 0; c < cases.size(); ++c) {
          const Attrs axis{{"axis", cases[c].axis}};
          g.set_output("take" + std::to_string(c), g.add_op("take_along_axis", {in[3 * c], in[3 * c + 1]}, axis));
          g.set_output("scatter" + std::to_string(c),
                       g.add_op("scatter_add", {in[3 * c], in[3 * c + 1], in[3 * c + 2]}, axis));
        }
        const size_t e = 3 * cases.size();
        g.set_output("index_add", g.add_op("index_add", {in[e], in[e + 1], in[e + 2]}, {{"axis", int64_t{0}}}));
      });
      // The scatters sum in double in the reference's order: the same numbers exactly.
      const std::string src = check(g, {feed}, unfused, 0, 0);
      EXPECT_EQ(callbacks(src), 0) << "no reference callback";
      EXPECT_EQ(count(src, "ig_take_along_axis(ctx, "), static_cast<int>(cases.size()));
      EXPECT_EQ(count(src, "ig_scatter_add<"), static_cast<int>(cases.size()) + 1);
    }
  }
}

TEST(CpuMovement, IndicesOutOfRangeAreTheReferencesError) {
  Graph g = make_graph({{"x", {4, 3}}, {"i", {4, 1}, DType::Int64}, {"u", {4, 1}}}, [&](Graph& g, std::vector<ValueId>& in) {
    g.set_output("take", g.add_op("take_along_axis", {in[0], in[1]}, {{"axis", int64_t{1}}}));
    g.set_output("scatter", g.add_op("scatter_add", {in[0], in[1], in[2]}, {{"axis", int64_t{1}}}));
  });
  const std::unique_ptr<Executable> exe = CpuBackend(cpu_options()).lower(g, {});
  for (int64_t bad : {3, -4}) {
    const std::vector<Tensor> feed = {random_tensor({4, 3}, 1), Tensor::from_vector<int64_t>({0, 1, bad, 2}, {4, 1}),
                                      random_tensor({4, 1}, 2)};
    const std::string want = "gather: index " + std::to_string(bad) + " is out of range for axis 1 of size 3";
    EXPECT_TRUE(Contains(error_of([&] { exe->run(feed); }), want));
    EXPECT_TRUE(Contains(error_of([&] { ReferenceBackend().lower(g, {})->run(feed); }), want));
  }
}

}  // namespace
