// Slices read in place (codegen_plan.cpp, fold_slices): a slice with steps of 1 whose every reader is
// an elementwise loop nest is never copied; the nests read its input at the slice's offset
// through the input's strides. Checked against the reference: slices along each axis, negative
// and clamped starts, a slice broadcast against a full operand, several slices of one value in
// one nest, float16, a conv's channels under every layout target; where folding must not happen (a graph output, a non-elementwise reader,
// steps other than 1) the copy stays; and where a nest reads a value through a view and that
// value dies there, no store may overwrite it in place, and no graph output may share an input's
// buffer that a view reads.
#include <gtest/gtest.h>

#include "cpu_test_util.h"
#include "op_test_util.h"

using namespace ingot;
using namespace ingot::cpu_test;
using ingot::testing::random_tensor;

namespace {

ValueId slice(Graph& g, ValueId x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
              std::vector<int64_t> steps = {}) {
  Attrs a{{"starts", starts}, {"ends", ends}, {"axes", axes}};
  if (!steps.empty()) a.set("steps", steps);
  return g.add_op("slice", {x}, a);
}

PlanFn fused() {
  return [](const Graph& g) { return plan_fusion(g); };
}

}  // namespace

TEST(CpuSliceViews, GatesOfOneProductReadInPlace) {
  // An LSTM step's shape: g [B, 4H] from a matmul, its four gates sliced and combined.
  Graph g = make_graph({{"h", {3, 5}}, {"w", {5, 8}}, {"c", {3, 2}}}, [](Graph& g, std::vector<ValueId>& in) {
    const ValueId mm = g.add_op("matmul", {in[0], in[1]});
    auto gate = [&](int64_t k) { return slice(g, mm, {2 * k}, {2 * k + 2}, {1}); };
    const ValueId c = g.add_op("add", {g.add_op("mul", {g.add_op("sigmoid", {gate(1)}), in[2]}),
                                       g.add_op("mul", {g.add_op("sigmoid", {gate(0)}), g.add_op("tanh", {gate(2)})})});
    g.set_output("h_next", g.add_op("mul", {g.add_op("sigmoid", {gate(3)}), g.add_op("tanh", {c})}));
    g.set_output("c_next", c);
  });
  const std::string source =
      check(g, {{random_tensor({3, 5}, 1), random_tensor({5, 8}, 2), random_tensor({3, 2}, 3)}}, fused());
  EXPECT_EQ(count(source, "_slice("), 0) << source;  // no slice kernel: the four are views
}

TEST(CpuSliceViews, EveryAxisNegativeAndClampedStartsAndBroadcasts) {
  Graph g = make_graph({{"x", {4, 6, 5}}, {"y", {2, 3, 5}}}, [](Graph& g, std::vector<ValueId>& in) {
    const ValueId x = g.add_op("exp", {in[0]});  // a computed value, in an arena slot
    // [1:3, -3:, all] (a negative start) + y; [0:1, 3:100 (clamped), 1:2] broadcast over y.
    const ValueId a = slice(g, x, {1, -3}, {3, 6}, {0, 1});
    const ValueId b = slice(g, x, {0, 3, 1}, {1, 100, 2}, {0, 1, 2});
    g.set_output("a", g.add_op("add", {a, in[1]}));
    g.set_output("ab", g.add_op("mul", {g.add_op("sub", {in[1], b}), a}));
  });
  const std::string source = check(g, {{random_tensor({4, 6, 5}, 4), random_tensor({2, 3, 5}, 5)}}, fused());
  EXPECT_EQ(count(source, "_slice("), 0) << source;
}

// Channel slices of a convolution's output under every layout target: a value stored in channel
// blocks or NHWC is not NCHW, so its slice stays a copy there, and the results agree either way.
TEST(CpuSliceViews, ChannelSlicesOfAConvUnderEveryLayoutTarget) {
  Graph g = make_graph({{"x", {2, 3, 6, 6}}, {"w", {32, 3, 3, 3}}}, [](Graph& g, std::vector<ValueId>& in) {
    const ValueId y = g.add_op("conv2d", {in[0], in[1]}, {{"padding", std::vector<int64_t>{1, 1}}});
    const ValueId a = slice(g, y, {0}, {16}, {1}), b = slice(g, y, {16}, {32}, {1});
    g.set_output("gated", g.add_op("mul", {g.add_op("tanh", {a}), g.add_op("sigmoid", {b})}));
  });
  const std::vector<Tensor> in = {random_tensor({2, 3, 6, 6}, 11), random_tensor({32, 3, 3, 3}, 12)};
  for (Layout layout : all_layout_targets()) {
    const std::string source = check(g, {in}, fused(), 1e-5, 1e-5, layout);
    if (layout == Layout::Nchw) {
      EXPECT_EQ(count(source, "_slice("), 0) << source;
    }
  }
}

TEST(CpuSliceViews, HalfPrecisionAndAGraphInputAsTheSource) {
  Graph g = make_graph({{"x", {6, 4}, DType::Float16}}, [](Graph& g, std::vector<ValueId>& in) {
    g.set_output("y", g.add_op("add", {slice(g, in[0], {0}, {3}, {0}), slice(g, in[0], {3}, {6}, {0})}));
  });
  const std::string source = check(g, {{random_tensor({6, 4}, 6).astype(DType::Float16)}}, fused(), 1e-3, 1e-3);
  EXPECT_EQ(count(source, "_slice("), 0) << source;
}

TEST(CpuSliceViews, CopiesStayWhereAViewWouldBeWrong) {
  Graph g = make_graph({{"x", {4, 6}}}, [](Graph& g, std::vector<ValueId>& in) {
    const ValueId s0 = slice(g, in[0], {1}, {3}, {0});
    g.set_output("s0", s0);                                              // a graph output
    g.set_output("sum", g.add_op("sum", {slice(g, in[0], {0}, {2}, {1})}, {{"axes", std::vector<int64_t>{1}}}));
    g.set_output("stepped", g.add_op("neg", {slice(g, in[0], {0}, {6}, {1}, {2})}));  // steps of 2
  });
  const std::string source = check(g, {{random_tensor({4, 6}, 7)}}, fused());
  EXPECT_GE(count(source, "_slice("), 2) << source;
}

// The nest reads t through a view at an offset and t dies there: writing the result over t in
// place would overwrite elements the view reads later. Likewise a graph output may not be written
// into the buffer of an input a view of the same nest reads.
TEST(CpuSliceViews, NoStoreOverwritesAValueAViewReads) {
  // d[i, j] = t[i, j] + t[2, j]: written over t in place, row 3 would read the new row 2.
  // (d is an intermediate, read by a matmul, so it has an arena slot that could be t's.)
  Graph g = make_graph({{"x", {4, 8}}, {"w", {8, 3}}}, [](Graph& g, std::vector<ValueId>& in) {
    const ValueId t = g.add_op("exp", {in[0]});
    const ValueId d = g.add_op("add", {slice(g, t, {0}, {4}, {0}), slice(g, t, {2}, {3}, {0})});
    g.set_output("y", g.add_op("matmul", {d, in[1]}));
  });
  const std::string source = check(g, {{random_tensor({4, 8}, 8), random_tensor({8, 3}, 10)}}, fused());
  EXPECT_EQ(count(source, "_slice("), 0) << source;
  // A graph input read through two views: the caller may offer it as the output's buffer.
  Graph io = make_graph({{"p", {4, 8}}}, [](Graph& g, std::vector<ValueId>& in) {
    g.set_output("q", g.add_op("add", {in[0], slice(g, in[0], {2}, {3}, {0})}));
  });
  std::unique_ptr<Executable> cpu = cpu::lower_with_plan(io, plan_fusion(io), cpu_options(), false);
  Tensor p = random_tensor({4, 8}, 9);
  const std::vector<Tensor> args = {p};
  const Tensor want = ReferenceBackend().lower(io, {})->run(args)[0];
  std::vector<Tensor> outs = {p};  // the output into the input's own buffer
  cpu->run_into({&p, 1}, outs);
  expect_same(outs[0], want, "q", 1e-6, 1e-6);
}

// Reshapes are views too (codegen_plan.cpp, fold_reshapes): a reshape (identity, expand_dims) of an
// NCHW buffer names its source's memory, and the source lives until the view's last reader.
// Here an elementwise op that could take over x's buffer in place runs before x is read through
// views (a transpose, a matmul, an elementwise op, a chain of two reshapes, a slice of a view),
// so writing it in place would change what the views read; views of a graph input and of a graph
// output; a reshape that is itself a graph output stays a copy into the caller's buffer.
TEST(CpuSliceViews, ReshapesAreViewsOfTheirSource) {
  using V = std::vector<int64_t>;
  Graph g = make_graph({{"a", {4, 6}}, {"b", {4, 6}}, {"w", {6, 5}}}, [&](Graph& g, std::vector<ValueId>& in) {
    const ValueId x = g.add_op("add", {in[0], in[1]});
    const ValueId y = g.add_op("reshape", {x}, {{"shape", V{2, 12}}});
    const ValueId flat = g.add_op("reshape", {y}, {{"shape", V{24}}});
    const ValueId e = g.add_op("expand_dims", {x}, {{"axes", V{0}}});
    g.set_output("part", g.add_op("exp", {slice(g, y, {1, 2}, {2, 9}, {0, 1})}));
    const ValueId z = g.add_op("mul", {x, scalar(g, 3.0)});  // x's last direct reader, same shape
    g.set_output("t", g.add_op("transpose", {y}, {{"perm", V{1, 0}}}));
    g.set_output("flat2", g.add_op("mul", {flat, scalar(g, 2.0)}));
    g.set_output("mm", g.add_op("matmul", {e, in[2]}));
    g.set_output("ident", g.add_op("add", {g.add_op("identity", {in[0]}), scalar(g, 1.0)}));
    const ValueId out = g.add_op("sub", {in[0], in[1]});
    g.set_output("out", out);
    g.set_output("out_flat", g.add_op("neg", {g.add_op("reshape", {out}, {{"shape", V{3, 8}}})}));
    g.set_output("reshaped", g.add_op("reshape", {g.add_op("exp", {in[1]})}, {{"shape", V{24}}}));
    g.set_output("z", g.add_op("add", {z, scalar(g, 1.0)}));
  });
  for (const PlanFn& plan : {PlanFn(unfused), fused()}) {
    const std::string src =
        check(g, {{random_tensor({4, 6}, 51), random_tensor({4, 6}, 52), random_tensor({6, 5}, 53)}}, plan);
    EXPECT_EQ(count(src, "reshape view"), 5) << src;  // y, flat, e, identity, out's reshape
    // Only the reshape that is a graph output is a kernel (a copy into the caller's buffer).
    EXPECT_EQ(count(src, "_reshape(const ig_ctx* ctx"), 1) << src;
  }
}
