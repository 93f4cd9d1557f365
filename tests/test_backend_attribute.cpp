// Model::set_attribute("backend", key): the mark ml.compile's backend_map partitions by. Checks
// the attribute itself (errors, copies, JSON), that flatten tags every node of a marked block with
// its key (the innermost mark wins), and that the graph JSON carries the tag both ways.
#include <gtest/gtest.h>

#include "compiler/gradient_pipeline.h"
#include "ingot/ingot.h"
#include "ir/graph_json.h"
#include "op_test_util.h"

using namespace ingot;
using ingot::testing::Contains;
using ingot::testing::error_of;

namespace {

// The backend tag of every node of `model`'s inferred graph, by scope.
std::map<std::string, std::string> backend_by_scope(const Model& model) {
  CompileOptions o;
  o.shapes = {{"input", {2, 3}}};
  const Graph g = build_inferred_graph(model, o);
  std::map<std::string, std::string> out;
  for (const Node& n : g.nodes()) out[n.scope] = n.backend;
  return out;
}

TEST(BackendAttribute, SetGetAndErrors) {
  Model sub;
  sub += Linear(4);
  EXPECT_FALSE(sub.attribute("backend").has_value());
  sub.set_attribute("backend", "torch");
  EXPECT_EQ(sub.attribute("backend").value(), "torch");
  EXPECT_TRUE(Contains(error_of([&] { sub.set_attribute("device", "cpu"); }), "Unknown model attribute 'device' (valid attributes: backend)"));
  EXPECT_TRUE(Contains(error_of([&] { (void)sub.attribute("device"); }), "Unknown model attribute 'device'"));
  EXPECT_TRUE(Contains(error_of([&] { sub.set_attribute("backend", ""); }), "non-empty key"));
  EXPECT_EQ(Model::attribute_names(), std::vector<std::string>{"backend"});
}

TEST(BackendAttribute, CopiesAndJsonKeepIt) {
  Model sub;
  sub += Linear(4);
  sub.set_attribute("backend", "numpy");
  Model relu = Relu();
  relu.set_attribute("backend", "jax");
  Model m;
  m += sub;
  m += relu;
  const Model copy = m;  // blocks are values: the copy keeps its blocks' marks
  const Model loaded = Model::from_json(copy.to_json());
  EXPECT_EQ(loaded.to_json(), m.to_json());
  EXPECT_TRUE(Contains(m.to_json(), "\"backend\": \"numpy\""));
  EXPECT_TRUE(Contains(m.to_json(), "\"backend\": \"jax\""));
  EXPECT_EQ(backend_by_scope(loaded), backend_by_scope(m));
}

TEST(BackendAttribute, FlattenTagsNodesInnermostMarkWins) {
  Model inner;
  inner += Linear(3);
  inner.set_attribute("backend", "jax").set_name("inner");
  Model outer;
  outer += Linear(3);
  outer += inner;
  outer.set_attribute("backend", "torch").set_name("outer");
  Model m;
  m += Linear(3);
  m += outer;
  m += Relu();
  const auto tags = backend_by_scope(m);
  int torch = 0, jax = 0, none = 0;
  for (const auto& [scope, backend] : tags) {
    if (scope.rfind("outer.inner.", 0) == 0) EXPECT_EQ(backend, "jax") << scope;
    else if (scope.rfind("outer.", 0) == 0) EXPECT_EQ(backend, "torch") << scope;
    else EXPECT_EQ(backend, "") << scope;
    torch += backend == "torch";
    jax += backend == "jax";
    none += backend.empty();
  }
  EXPECT_GT(torch, 0);
  EXPECT_GT(jax, 0);
  EXPECT_GT(none, 0);
}

TEST(BackendAttribute, GraphJsonRoundTripsTheTag) {
  Model sub;
  sub += Relu();
  sub.set_attribute("backend", "torch");
  Model m;
  m += Linear(3);
  m += sub;
  CompileOptions o;
  o.shapes = {{"input", {2, 3}}};
  const Graph g = build_inferred_graph(m, o);
  const std::string json = print_graph(g, DumpFormat::Json);
  EXPECT_TRUE(Contains(json, "\"backend\": \"torch\""));
  const Graph back = graph_from_json(json);
  ASSERT_EQ(back.nodes().size(), g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) EXPECT_EQ(back.nodes()[i].backend, g.nodes()[i].backend);
  // Unmarked nodes write no "backend" key: dumps of unmarked models are unchanged.
  Model plain;
  plain += Linear(3);
  EXPECT_EQ(print_graph(build_inferred_graph(plain, o), DumpFormat::Json).find("\"backend\""), std::string::npos);
}

}  // namespace
