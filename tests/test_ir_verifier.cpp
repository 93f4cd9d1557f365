#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ingot/graph.h"
#include "ir/op_registry.h"

using namespace ingot;

namespace {

// Ops of our own, so these tests do not depend on which op families exist yet.
void shape_noop(ShapeInfer&) {}
void dtype_noop(const Node&, std::span<const DType>, std::span<DType>) {}
void eval_noop(const Node&, std::span<const Tensor>, std::span<Tensor>) {}

void register_test_ops() {
  static bool done = false;
  if (done) return;
  done = true;
  auto def = [](std::string name, int min_in, int max_in, int outs) {
    OpDef d;
    d.name = std::move(name);
    d.min_inputs = min_in;
    d.max_inputs = max_in;
    d.num_outputs = outs;
    d.shape = shape_noop;
    d.dtype = dtype_noop;
    d.eval = eval_noop;
    return d;
  };
  register_op(def("test_verifier_unary", 1, 1, 1));
  register_op(def("test_verifier_binary", 2, 2, 1));
  register_op(def("test_verifier_range", 1, 3, 1));
  register_op(def("test_verifier_variadic", 1, -1, 1));
  register_op(def("test_verifier_split", 1, 1, 2));
}

class Verifier : public ::testing::Test {
 protected:
  void SetUp() override { register_test_ops(); }

  // x (input), w (parameter), c (constant); u = unary(x); b = binary(u, w); (s0, s1) = split(b)
  Graph valid_graph() {
    Graph g;
    ValueId x = g.add_input("x");
    ValueId w = g.add_input("w", ValueKind::Parameter);
    ValueId c = g.add_constant("c", Tensor::from_vector<float>({1, 2}, {2}));
    ValueId u = g.add_op("test_verifier_unary", {x}, {}, "block.act");
    ValueId b = g.add_op("test_verifier_binary", {u, w});
    std::vector<ValueId> s = g.add_node("test_verifier_split", {b}, {}, 2);
    ValueId v = g.add_op("test_verifier_variadic", {s[0], s[1], c, x});
    g.set_output("out", v);
    return g;
  }

  static void expect_error(const Graph& g, const std::vector<std::string>& fragments) {
    try {
      verify(g);
      ADD_FAILURE() << "verify() accepted the graph";
    } catch (const Error& e) {
      std::string msg = e.what();
      for (const std::string& f : fragments)
        EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
    }
  }
};

TEST_F(Verifier, AcceptsValidGraph) {
  Graph g = valid_graph();
  EXPECT_NO_THROW(verify(g));
  EXPECT_NO_THROW(verify(Graph{}));
}

TEST_F(Verifier, UnknownOpNamesNodeAndScope) {
  Graph g = valid_graph();
  g.nodes()[0].op = "no_such_op";
  expect_error(g, {"Unknown op 'no_such_op' at node #0 (scope 'block.act')"});
}

TEST_F(Verifier, InputCountOutsideRange) {
  Graph g = valid_graph();
  g.nodes()[1].inputs.pop_back();
  expect_error(g, {"node #1 'test_verifier_binary'", "takes 2 inputs, got 1"});

  Graph r;
  ValueId x = r.add_input("x");
  r.add_op("test_verifier_range", {x, x, x, x});
  expect_error(r, {"takes 1 to 3 inputs, got 4"});

  Graph v;
  v.add_op("test_verifier_variadic", {});
  expect_error(v, {"takes at least 1 inputs, got 0"});
}

TEST_F(Verifier, VariadicAcceptsMany) {
  Graph g;
  ValueId x = g.add_input("x");
  g.set_output("y", g.add_op("test_verifier_variadic", std::vector<ValueId>(10, x)));
  EXPECT_NO_THROW(verify(g));
}

TEST_F(Verifier, WrongOutputCount) {
  Graph g;
  ValueId x = g.add_input("x");
  g.add_node("test_verifier_split", {x}, {}, 1);
  expect_error(g, {"node #0 'test_verifier_split'", "has 1 outputs, the op produces 2"});
}

TEST_F(Verifier, UseBeforeDefinition) {
  Graph g = valid_graph();
  ValueId b = g.node(1).outputs[0];
  g.nodes()[0].inputs = {b};  // node #0 reads the output of node #1
  expect_error(g, {"node #0 'test_verifier_unary' (scope 'block.act'): input 0",
                   "%" + std::to_string(b), "used before its definition at node #1"});
}

TEST_F(Verifier, SelfReference) {
  Graph g = valid_graph();
  ValueId u = g.node(0).outputs[0];
  g.nodes()[0].inputs = {u};
  expect_error(g, {"node #0", "%" + std::to_string(u), "self-reference"});
}

TEST_F(Verifier, InputOutOfRange) {
  Graph g = valid_graph();
  g.nodes()[1].inputs[1] = 99;
  expect_error(g, {"node #1", "input 1 refers to %99, which does not exist"});
  g.nodes()[1].inputs[1] = -1;
  expect_error(g, {"input 1 refers to %-1"});
}

TEST_F(Verifier, ValueProducedTwice) {
  Graph g = valid_graph();
  ValueId u = g.node(0).outputs[0];
  g.nodes()[1].outputs = {u};
  expect_error(g, {"node #1 'test_verifier_binary': output 0", "%" + std::to_string(u),
                   "already produced by node #0"});
}

TEST_F(Verifier, ProducerFieldsMustMatch) {
  Graph g = valid_graph();
  ValueId s1 = g.node(2).outputs[1];
  g.value(s1).producer_output = 0;
  expect_error(
      g, {"node #2 'test_verifier_split': output 1", "records its producer as node #2 output 0"});

  Graph h = valid_graph();
  ValueId u = h.node(0).outputs[0];
  h.value(u).producer = 1;
  expect_error(h, {"output 0 %" + std::to_string(u), "records its producer as node #1"});
}

TEST_F(Verifier, IntermediateWithoutProducer) {
  Graph g = valid_graph();
  Value orphan;
  orphan.id = static_cast<ValueId>(g.values().size());
  orphan.name = "orphan";
  g.values().push_back(orphan);
  expect_error(g,
               {"value %" + std::to_string(orphan.id) + " \"orphan\"", "not produced by any node"});
  g.nodes().back().inputs.push_back(orphan.id);
  expect_error(g, {"input 4", "\"orphan\" is not produced by any earlier node"});
}

TEST_F(Verifier, LeafMustHaveNoProducer) {
  Graph g = valid_graph();
  g.value(0).producer = 0;
  expect_error(g, {"value %0 \"x\"", "graph input must have producer -1, found node #0"});
}

TEST_F(Verifier, NodeMayNotProduceALeaf) {
  Graph g = valid_graph();
  g.nodes()[0].outputs = {1};
  expect_error(g, {"node #0", "output 0 %1 \"w\" is a graph parameter, which no node may produce"});
}

TEST_F(Verifier, LeafListMustMatchKinds) {
  Graph g = valid_graph();
  Value stray;
  stray.id = static_cast<ValueId>(g.values().size());
  stray.kind = ValueKind::Input;
  g.values().push_back(stray);  // an input that bypassed add_input
  expect_error(g, {"graph input missing from the graph's leaf list"});

  Graph h = valid_graph();
  h.value(0).kind = ValueKind::Intermediate;
  expect_error(h, {"leaf list names %0 \"x\", which is not an input, parameter or constant"});
}

TEST_F(Verifier, IdsMustMatchPositions) {
  Graph g = valid_graph();
  g.value(2).id = 7;
  expect_error(g, {"value at index 2 has id %7"});
  Graph h = valid_graph();
  h.nodes()[1].id = 0;
  expect_error(h, {"node at index 1 has id #0"});
}

TEST_F(Verifier, GraphOutputMustExist) {
  Graph g = valid_graph();
  g.set_output("bad\nname", 1000);
  expect_error(g, {"graph output \"bad\\nname\" refers to %1000, which does not exist"});
}

TEST_F(Verifier, ConstantTensorMustMatchValue) {
  Graph undefined = valid_graph();
  undefined.value(2).constant = Tensor();
  expect_error(undefined, {"value %2 \"c\"", "constant has no tensor"});

  Graph dtype = valid_graph();
  dtype.value(2).dtype = DType::Int32;
  expect_error(dtype, {"constant tensor is float32 but the value says int32"});

  Graph shape = valid_graph();
  shape.value(2).shape = {SymDim(3)};
  expect_error(shape, {"constant tensor has shape [2] but the value says [3]"});

  Graph unknown = valid_graph();
  unknown.value(2).shape_known = false;
  expect_error(unknown, {"but the value says unknown"});
}

TEST_F(Verifier, HostileNamesAreEscapedInErrors) {
  Graph g;
  ValueId x = g.add_input("x");
  ValueId y = g.add_op("test_verifier_unary", {x});
  g.value(y).name = "a\"b\nc";
  g.nodes()[0].inputs = {y};
  expect_error(g, {"%1 \"a\\\"b\\nc\""});
}

}  // namespace
