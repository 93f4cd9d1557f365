// The shape-inference engine on its own, with small test ops, so it is checked independently of
// the real op families: unification both ways, symbols and their scopes, variadic templates,
// deferred broadcasts, and the error messages.
#include <gtest/gtest.h>

#include "compiler/shape_inference.h"
#include "ir/op_registry.h"
#include "ops/kernel_util.h"

using namespace ingot;

namespace {

void no_kernel(const Node&, std::span<const Tensor>, std::span<Tensor>) {}

void register_test_ops() {
  static bool done = [] {
    // out has in's shape (flows both ways).
    register_op(OpDef{"test_same", 1, 1, 1, FusionClass::Elementwise,
                      [](ShapeInfer& s) { s.same_shape(s.in(0), s.out()); },
                      ops::dtype_same_as_input, no_kernel, "test"});
    // NumPy broadcasting of two inputs.
    register_op(OpDef{"test_bcast", 2, 2, 1, FusionClass::Elementwise,
                      [](ShapeInfer& s) {
                        if (!s.ready({s.in(0), s.in(1)})) return;
                        int ra = s.rank(s.in(0)), rb = s.rank(s.in(1)), r = std::max(ra, rb);
                        s.set_rank(s.out(), r);
                        for (int i = 1; i <= r; ++i) {
                          if (i > ra) s.unify(s.dim(s.out(), -i), s.dim(s.in(1), -i));
                          else if (i > rb) s.unify(s.dim(s.out(), -i), s.dim(s.in(0), -i));
                          else s.broadcast(s.dim(s.in(0), -i), s.dim(s.in(1), -i), s.dim(s.out(), -i));
                        }
                      },
                      ops::dtype_same_as_input, no_kernel, "test"});
    // [M, K] x [K, N] -> [M, N]
    register_op(OpDef{"test_mm", 2, 2, 1, FusionClass::Dense,
                      [](ShapeInfer& s) {
                        s.set_rank(s.in(0), 2);
                        s.set_rank(s.in(1), 2);
                        s.unify(s.dim(s.in(0), 1), s.dim(s.in(1), 0));
                        s.set_dims(s.out(), {s.dim(s.in(0), 0), s.dim(s.in(1), 1)});
                      },
                      ops::dtype_same_as_input, no_kernel, "test"});
    return true;
  }();
  (void)done;
}

struct Fixture {
  Graph g;
  std::vector<ShapeConstraint> cs;
  ValueId input(const std::string& name, std::optional<ShapeTemplate> t = std::nullopt,
                std::string scope = "") {
    ValueId v = g.add_input(name);
    if (t) cs.push_back({v, *t, std::move(scope), "shape of '" + name + "'"});
    return v;
  }
  void constrain(ValueId v, ShapeTemplate t, std::string scope = "") {
    cs.push_back({v, std::move(t), std::move(scope), "template on '" + g.value(v).name + "'"});
  }
  std::string shape(ValueId v) const { return to_string(g.value(v).shape); }
  ShapeInferenceReport run() { return infer_shapes(g, cs); }
};

std::string error_of(Fixture& f) {
  try {
    f.run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ShapeInference, ForwardAndSymbols) {
  register_test_ops();
  Fixture f;
  ValueId x = f.input("x", ShapeTemplate{"N", 784});
  ValueId w = f.input("w", ShapeTemplate{784, 256});
  ValueId h = f.g.add_op("test_mm", {x, w});
  ValueId y = f.g.add_op("test_same", {h});
  f.g.value(y).name = "y";
  f.run();
  EXPECT_EQ(f.shape(h), "[N, 256]");
  EXPECT_EQ(f.shape(y), "[N, 256]");
}

TEST(ShapeInference, BackwardFromOutput) {
  register_test_ops();
  Fixture f;
  ValueId x = f.input("x");  // rank and sizes unknown: everything comes from elsewhere
  ValueId w = f.input("w", ShapeTemplate{nullptr, 10});
  ValueId y = f.g.add_op("test_mm", {x, w});
  f.g.value(y).name = "y";
  ValueId z = f.g.add_op("test_same", {y});
  f.g.value(z).name = "z";
  f.constrain(z, {32, nullptr});       // batch known only at the output
  f.constrain(x, {nullptr, "K"});      // contracted dim named
  f.run();
  EXPECT_EQ(f.shape(x), "[32, K]");
  EXPECT_EQ(f.shape(w), "[K, 10]");
  EXPECT_EQ(f.shape(z), "[32, 10]");
}

// trace_shapes: each step that sized dimensions names the rule or template that did it and
// the dims it sized, in order: here the batch comes back from the output's template.
TEST(ShapeInference, TraceNamesTheRuleThatSizedEachDimension) {
  register_test_ops();
  Fixture f;
  ValueId x = f.input("x");
  ValueId w = f.input("w", ShapeTemplate{nullptr, 10});
  ValueId y = f.g.add_op("test_mm", {x, w});
  f.g.value(y).name = "y";
  f.constrain(y, {32, nullptr});
  f.constrain(x, {nullptr, 7});
  const ShapeInferenceReport r = infer_shapes(f.g, f.cs, true);
  const std::vector<std::string> want = {
      "sweep 1, shape of 'w': 'w'[1] = 10",
      "sweep 1, template on 'y': 'y'[0] = 32",
      "sweep 1, template on 'x': 'x'[1] = 7",
      "sweep 1, test_mm: 'w'[0] = 7",  // unified with x's, which the template sized
      "sweep 1, test_mm: 'x'[0] = 32",
      "sweep 1, test_mm: 'y'[1] = 10",
  };
  EXPECT_EQ(r.trace, want);
  EXPECT_TRUE(infer_shapes(f.g, f.cs).trace.empty());  // off by default
}

TEST(ShapeInference, SymbolsAreScoped) {
  register_test_ops();
  Fixture f;
  ValueId a = f.input("a", ShapeTemplate{"N"}, "block_a");
  ValueId b = f.input("b", ShapeTemplate{"N"}, "block_b");
  ValueId c = f.input("c", ShapeTemplate{"N"}, "block_a");
  f.g.set_output("a", f.g.add_op("test_same", {a}));
  f.g.set_output("b", f.g.add_op("test_same", {b}));
  f.g.set_output("c", f.g.add_op("test_same", {c}));
  f.run();
  // Same scope: one symbol. Different scopes: distinct symbols, distinctly named.
  EXPECT_EQ(f.shape(a), f.shape(c));
  EXPECT_NE(f.shape(a), f.shape(b));
  EXPECT_EQ(f.shape(a), "[N]");
  EXPECT_EQ(f.shape(b), "[N_2]");
}

TEST(ShapeInference, VariadicTemplates) {
  register_test_ops();
  Fixture f;
  ValueId x = f.input("x", ShapeTemplate{"Batch...", 16});
  ValueId y = f.g.add_op("test_same", {x});
  f.g.value(y).name = "y";
  ValueId z = f.input("z");
  f.constrain(x, {2, 3, nullptr});        // fixes the rank: Batch = [2, 3]
  f.constrain(z, {"Batch...", 4});        // z shares the run, so z is [2, 3, 4]
  f.g.set_output("y", y);
  f.g.set_output("z", f.g.add_op("test_same", {z}));
  f.run();
  EXPECT_EQ(f.shape(y), "[2, 3, 16]");
  EXPECT_EQ(f.shape(z), "[2, 3, 4]");
}

TEST(ShapeInference, DeferredBroadcastAssumesEqual) {
  register_test_ops();
  Fixture f;
  ValueId a = f.input("a", ShapeTemplate{"N", 3});
  ValueId b = f.input("b", ShapeTemplate{"M", 1});
  ValueId c = f.g.add_op("test_bcast", {a, b});
  f.g.value(c).name = "c";
  ShapeInferenceReport r = f.run();
  EXPECT_EQ(f.shape(c), "[N, 3]");
  EXPECT_EQ(f.shape(b), "[N, 1]");
  ASSERT_EQ(r.assumptions.size(), 1u);
  EXPECT_NE(r.assumptions[0].find("'M'"), std::string::npos);
}

TEST(ShapeInference, BroadcastWithOnes) {
  register_test_ops();
  Fixture f;
  ValueId a = f.input("a", ShapeTemplate{"N", 1, 5});
  ValueId b = f.input("b", ShapeTemplate{4, 1});
  ValueId c = f.g.add_op("test_bcast", {a, b});
  f.g.value(c).name = "c";
  f.run();
  EXPECT_EQ(f.shape(c), "[N, 4, 5]");
}

TEST(ShapeInference, ConflictNamesValueAndOrigins) {
  register_test_ops();
  Fixture f;
  ValueId x = f.input("x", ShapeTemplate{8, 64});
  ValueId w = f.input("w", ShapeTemplate{128, 10});
  ValueId h = f.g.add_op("test_mm", {x, w});
  f.g.value(h).name = "hidden_1";
  std::string msg = error_of(f);
  EXPECT_NE(msg.find("Cannot infer shape for 'hidden_1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("128"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape of 'x'"), std::string::npos) << msg;
}

TEST(ShapeInference, RankConflictAndUnknownRank) {
  register_test_ops();
  {
    Fixture f;
    ValueId x = f.input("x", ShapeTemplate{2, 3});
    f.constrain(x, {2, 3, 4});
    f.g.set_output("y", f.g.add_op("test_same", {x}));
    std::string msg = error_of(f);
    EXPECT_NE(msg.find("Cannot infer shape for 'x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
  }
  {
    Fixture f;
    ValueId x = f.input("x");
    f.g.set_output("y", f.g.add_op("test_same", {x}));
    std::string msg = error_of(f);
    EXPECT_NE(msg.find("Cannot infer shape for 'x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank"), std::string::npos) << msg;
  }
  {
    Fixture f;
    ValueId x = f.input("x", ShapeTemplate{"a...", "b...", 3});
    f.g.set_output("y", f.g.add_op("test_same", {x}));
    EXPECT_NE(error_of(f).find("more than one variadic"), std::string::npos);
  }
  {
    Fixture f;
    ValueId x = f.input("x", ShapeTemplate{"B...", 3});
    ValueId y = f.input("y", ShapeTemplate{"B...", 3});
    f.constrain(x, {5, 3});
    f.constrain(y, {5, 6, 3});
    f.g.set_output("x2", f.g.add_op("test_same", {x}));
    f.g.set_output("y2", f.g.add_op("test_same", {y}));
    EXPECT_NE(error_of(f).find("variadic part 'B...'"), std::string::npos);
  }
}

TEST(ShapeInference, TypesFollowRules) {
  register_test_ops();
  Graph g;
  ValueId x = g.add_input("x");
  g.value(x).dtype = DType::Float64;
  ValueId y = g.add_op("test_same", {x});
  infer_types(g);
  EXPECT_EQ(g.value(y).dtype, DType::Float64);
}
