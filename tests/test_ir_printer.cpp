#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "ingot/graph.h"
#include "ir/graph_json.h"

using namespace ingot;

namespace {

void set_type(Graph& g, ValueId v, DType dtype, SymShape shape) {
  g.value(v).dtype = dtype;
  g.value(v).shape = std::move(shape);
  g.value(v).shape_known = true;
}

// The graph from the text-format example: conv -> relu -> mul by a scalar constant.
Graph conv_graph() {
  Graph g;
  ValueId x = g.add_input("input");
  ValueId w = g.add_input("conv.weight", ValueKind::Parameter);
  ValueId two = g.add_constant("", Tensor::scalar<float>(2));
  set_type(g, x, DType::Float32, {SymDim("N"), 3, 32, 32});
  set_type(g, w, DType::Float32, {16, 3, 3, 3});
  ValueId c = g.add_op("conv2d", {x, w},
                       {{"groups", int64_t{1}}, {"padding", std::vector<int64_t>{1, 1}}}, "conv");
  set_type(g, c, DType::Float32, {SymDim("N"), 16, 32, 32});
  ValueId r = g.add_op("relu", {c});
  set_type(g, r, DType::Float32, {SymDim("N"), 16, 32, 32});
  ValueId m = g.add_op("mul", {r, two});
  g.set_output("output", m);
  return g;
}

TEST(Printer, TextGolden) {
  EXPECT_EQ(print_graph(conv_graph()),
            "graph(%0 input: f32[N, 3, 32, 32] \"input\", %1 param: f32[16, 3, 3, 3] "
            "\"conv.weight\", %2 const: f32[] = 2) {\n"
            "  %3 = conv2d(%0, %1) {groups=1, padding=[1, 1]} : f32[N, 16, 32, 32]  # conv\n"
            "  %4 = relu(%3) : f32[N, 16, 32, 32]\n"
            "  %5 = mul(%4, %2)\n"
            "  return output=%5\n"
            "}\n");
}

TEST(Printer, TextMultiOutputNamesAndUnknownDims) {
  Graph g;
  ValueId x = g.add_input("x");
  std::vector<ValueId> s = g.add_node("split", {x}, {{"axis", int64_t{-1}}}, 2, "blk/0");
  set_type(g, s[0], DType::BFloat16, {SymDim(), SymDim("u3")});
  g.value(s[1]).name = "second";
  g.set_output("a b", s[0]);
  g.set_output("b", s[1]);
  EXPECT_EQ(print_graph(g, DumpFormat::Text),
            "graph(%0 input \"x\") {\n"
            "  %1, %2 = split(%0) {axis=-1} : bf16[?, u3], ? \"second\"  # \"blk/0\"\n"
            "  return \"a b\"=%1, b=%2\n"
            "}\n");
}

TEST(Printer, TextAttributesAndConstants) {
  Graph g;
  g.add_constant("i", Tensor::from_vector<int64_t>({-9007199254740993, 2, 3, 4}, {2, 2}));
  g.add_constant("b", Tensor::from_vector<bool>({true, false}, {2}));
  g.add_constant("h", Tensor::from_vector<Half>({Half(0.5f)}, {1}));
  g.add_constant("d", Tensor::from_vector<double>({0.1}, {}));
  g.add_constant("big", Tensor::full(DType::Float32, {9}, 1));
  g.add_constant("empty", Tensor(DType::UInt8, {0, 3}));
  Attrs attrs = {{"alpha", 1.0},
                 {"eps", 1e-5},
                 {"mode", std::string("a\"b")},
                 {"scales", std::vector<double>{2, 0.5}},
                 {"weird key", int64_t{0}},
                 {"nan", std::numeric_limits<double>::quiet_NaN()}};
  g.add_op("op", {0}, attrs);
  EXPECT_EQ(print_graph(g),
            "graph(%0 const: i64[2, 2] \"i\" = [[-9007199254740993, 2], [3, 4]], "
            "%1 const: bool[2] \"b\" = [true, false], %2 const: f16[1] \"h\" = [0.5], "
            "%3 const: f64[] \"d\" = 0.1, %4 const: f32[9] \"big\", "
            "%5 const: u8[0, 3] \"empty\" = []) {\n"
            "  %6 = op(%0) {alpha=1.0, eps=1e-05, mode=\"a\\\"b\", nan=nan, scales=[2.0, 0.5], "
            "\"weird key\"=0}\n"
            "  return\n"
            "}\n");
}

TEST(Printer, TextEscapesHostileNames) {
  Graph g;
  ValueId x = g.add_input("a\"b\n<c>\\");
  ValueId y = g.add_op("we ird", {x}, {}, "s\tcope");
  g.set_output("o\x01", y);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%0 input \"a\\\"b\\n<c>\\\\\""), std::string::npos) << text;
  EXPECT_NE(text.find("= \"we ird\"(%0)  # \"s\\tcope\""), std::string::npos) << text;
  EXPECT_NE(text.find("return \"o\\x01\"=%1"), std::string::npos) << text;
  // Every line break is one the printer put there: 1 header + 1 node + return + closing.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

TEST(Printer, PrintsInvalidGraphsWithoutThrowing) {
  Graph g = conv_graph();
  g.nodes()[0].inputs.push_back(77);
  g.nodes()[1].outputs.push_back(-3);
  g.set_output("dangling", 1234);
  for (DumpFormat f : {DumpFormat::Text, DumpFormat::Json, DumpFormat::Dot})
    EXPECT_NO_THROW(print_graph(g, f));
  EXPECT_NE(print_graph(g).find("%4, %-3 = relu(%3) : f32[N, 16, 32, 32], <invalid>"),
            std::string::npos)
      << print_graph(g);
}

TEST(Printer, ParseDumpFormat) {
  EXPECT_EQ(parse_dump_format("text"), DumpFormat::Text);
  EXPECT_EQ(parse_dump_format("json"), DumpFormat::Json);
  EXPECT_EQ(parse_dump_format("dot"), DumpFormat::Dot);
  try {
    parse_dump_format("yaml");
    ADD_FAILURE() << "accepted yaml";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'yaml': expected one of text, json, dot"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_dump_format("Text"), Error);
}

TEST(Printer, DotStructure) {
  std::string dot = print_graph(conv_graph(), DumpFormat::Dot);
  EXPECT_EQ(dot.rfind("digraph ingot {\n", 0), 0u);
  EXPECT_NE(dot.find("\"v0\" [shape=ellipse, style=filled, fillcolor=\"#cfe8ff\", "
                     "label=\"%0 input\\n\\\"input\\\"\\nf32[N, 3, 32, 32]\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("\"v1\" [shape=ellipse, style=filled, fillcolor=\"#ffe8b0\""),
            std::string::npos);
  EXPECT_NE(dot.find("\"v2\" [shape=ellipse, style=\"filled,dashed\""), std::string::npos);
  EXPECT_NE(dot.find("\"n0\" [shape=box, label=\"conv2d\\nf32[N, 16, 32, 32]\\n# conv\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("\"v0\" -> \"n0\" [label=\"%0\"];"), std::string::npos);
  EXPECT_NE(dot.find("\"n0\" -> \"n1\" [label=\"%3\"];"), std::string::npos);
  EXPECT_NE(dot.find("\"v2\" -> \"n2\" [label=\"%2\"];"), std::string::npos);
  EXPECT_NE(dot.find("\"out0\" [shape=invhouse, style=bold, label=\"output\"];"),
            std::string::npos);
  EXPECT_NE(dot.find("\"n2\" -> \"out0\" [label=\"%5\"];"), std::string::npos);
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

// Inside every DOT string: no raw line break, each " \ < > { } | is escaped, and the only
// escapes are those (plus \n), so no Graphviz substitution such as \N can appear.
void expect_dot_strings_safe(const std::string& dot) {
  bool in_string = false;
  for (size_t i = 0; i < dot.size(); ++i) {
    char c = dot[i];
    if (!in_string) {
      in_string = c == '"';
      continue;
    }
    ASSERT_NE(c, '\n') << "raw newline in a DOT string at " << i;
    if (c == '\\') {
      ASSERT_LT(i + 1, dot.size());
      ++i;
      ASSERT_NE(std::string("\"\\<>{}|n").find(dot[i]), std::string::npos)
          << "unexpected escape \\" << dot[i] << " at " << i;
    } else if (c == '"') {
      in_string = false;
    } else {
      ASSERT_EQ(std::string("<>{}|").find(c), std::string::npos)
          << "unescaped '" << c << "' at " << i << " in " << dot;
    }
  }
  EXPECT_FALSE(in_string);
}

TEST(Printer, DotEscapesHostileNames) {
  Graph g;
  ValueId x = g.add_input("a\"b\n<c>");
  set_type(g, x, DType::Float32, {SymDim("{N|M}")});
  ValueId y = g.add_op("op\\\"{}", {x}, {}, "sc\"ope\\N");
  g.value(y).name = "R&D <y>";
  g.set_output("out\"}\n", y);
  std::string dot = print_graph(g, DumpFormat::Dot);
  expect_dot_strings_safe(dot);
  // The name renders as its text-format escape: "a\"b\n<c>" (quotes, backslashes, all visible).
  EXPECT_NE(dot.find("\\\"a\\\\\\\"b\\\\n\\<c\\>\\\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("R&amp;D \\<y\\>"), std::string::npos) << dot;
  EXPECT_NE(dot.find("f32[\\\"\\{N\\|M\\}\\\"]"), std::string::npos) << dot;
}

// A graph using every Value, Node and Attr feature the JSON must carry.
Graph rich_graph() {
  Graph g;
  ValueId x = g.add_input("x\n\"quoted\"");
  set_type(g, x, DType::Float16, {SymDim("N"), SymDim(), 7});
  ValueId w = g.add_input("w", ValueKind::Parameter);
  g.value(w).init = "normal(0, 0.02)";
  set_type(g, w, DType::BFloat16, {7, 3});
  ValueId frozen = g.add_input("frozen", ValueKind::Parameter);
  g.value(frozen).differentiable = false;
  double inf = std::numeric_limits<double>::infinity();
  std::vector<ValueId> consts = {
      g.add_constant("bool", Tensor::from_vector<bool>({true, false, true}, {3})),
      g.add_constant("i8", Tensor::from_vector<int8_t>({-128, 127}, {2})),
      g.add_constant("i16", Tensor::from_vector<int16_t>({-32768, 32767}, {1, 2})),
      g.add_constant("i32", Tensor::from_vector<int32_t>({-5}, {})),
      g.add_constant("i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}, {2})),
      g.add_constant("u8", Tensor::from_vector<uint8_t>({0, 255}, {2, 1})),
      g.add_constant("f16", Tensor::from_vector<Half>({Half(0.1f), Half(65504.f)}, {2})),
      g.add_constant("bf16", Tensor::from_vector<BFloat16>({BFloat16(-3.5f)}, {1})),
      g.add_constant("f32", Tensor::from_vector<float>({0.1f, -0.0f, float(inf), NAN}, {2, 2})),
      g.add_constant("f64", Tensor::from_vector<double>({1e-300, -inf, 1.0 / 3}, {3})),
      g.add_constant("empty", Tensor(DType::Int32, {2, 0})),
  };
  g.value(consts[3]).weak_type = true;
  Attrs attrs = {{"i", int64_t{-3}},
                 {"f", 0.1},
                 {"whole", 2.0},
                 {"nan", std::numeric_limits<double>::quiet_NaN()},
                 {"s", std::string("tab\there")},
                 {"ints", std::vector<int64_t>{}},
                 {"floats", std::vector<double>{inf, -inf, 1e300}}};
  std::vector<ValueId> outs = g.add_node("pair", {x, w, consts[0]}, attrs, 2, "a.b\"c");
  g.value(outs[1]).name = "second";
  set_type(g, outs[0], DType::Float32, {SymDim("N")});
  ValueId y = g.add_op("tail", {outs[1], frozen});
  g.set_output("main", y);
  g.set_output("aux", outs[0]);
  return g;
}

TEST(GraphJson, RoundTripIsExact) {
  Graph g = rich_graph();
  std::string json = print_graph(g, DumpFormat::Json);
  Graph back = graph_from_json(json);
  EXPECT_EQ(print_graph(back, DumpFormat::Json), json);
  EXPECT_EQ(print_graph(back), print_graph(g));

  ASSERT_EQ(back.values().size(), g.values().size());
  EXPECT_EQ(back.leaves(), g.leaves());
  for (size_t i = 0; i < g.values().size(); ++i) {
    const Value &a = g.values()[i], &b = back.values()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.differentiable, b.differentiable);
    EXPECT_EQ(a.weak_type, b.weak_type);
    EXPECT_EQ(a.init, b.init);
    EXPECT_EQ(a.constant.defined(), b.constant.defined());
    if (a.constant.defined()) {
      EXPECT_TRUE(equal(a.constant, b.constant)) << a.name;
    }
  }
  ASSERT_EQ(back.nodes().size(), 2u);
  EXPECT_EQ(back.node(0).scope, "a.b\"c");
  EXPECT_EQ(back.node(0).outputs, g.node(0).outputs);
  EXPECT_TRUE(std::isnan(back.node(0).attrs.get_float("nan")));
  EXPECT_EQ(back.node(0).attrs.get_floats("floats"), g.node(0).attrs.get_floats("floats"));
  EXPECT_EQ(back.node(0).attrs.get_ints("ints"), std::vector<int64_t>{});
  EXPECT_EQ(back.outputs(), g.outputs());
}

TEST(GraphJson, LayoutIsSelfDescribing) {
  auto j = nlohmann::json::parse(print_graph(conv_graph(), DumpFormat::Json));
  EXPECT_EQ(j["format"], "ingot.graph");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["values"][0]["kind"], "input");
  EXPECT_EQ(j["values"][0]["dtype"], "float32");
  EXPECT_EQ(j["values"][0]["shape"], nlohmann::json::parse(R"(["N", 3, 32, 32])"));
  EXPECT_EQ(j["values"][2]["constant"],
            nlohmann::json::parse(R"({"dtype": "float32", "shape": [], "data": [2.0]})"));
  EXPECT_EQ(j["nodes"][0]["attrs"]["padding"],
            nlohmann::json::parse(R"({"type": "ints", "value": [1, 1]})"));
  EXPECT_EQ(j["nodes"][0]["scope"], "conv");
  EXPECT_EQ(j["nodes"][0]["inputs"], nlohmann::json::parse("[0, 1]"));
  EXPECT_EQ(j["outputs"], nlohmann::json::parse(R"([{"name": "output", "value": 5}])"));
}

TEST(GraphJson, ReloadsGraphsThatDoNotVerify) {
  Graph g = conv_graph();
  g.nodes()[1].inputs = {4};  // self-reference: still loads, verify() is the judge
  std::string json = print_graph(g, DumpFormat::Json);
  EXPECT_EQ(print_graph(graph_from_json(json), DumpFormat::Json), json);
}

void expect_json_error(const std::string& json, const std::string& fragment) {
  try {
    graph_from_json(json);
    ADD_FAILURE() << "accepted: " << json;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "missing '" << fragment << "' in: " << e.what();
  }
}

// The conv graph's JSON with one edit applied.
std::string edited(const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(print_graph(conv_graph(), DumpFormat::Json));
  edit(j);
  return j.dump();
}

TEST(GraphJson, RejectsWrongFormatOrVersion) {
  expect_json_error(edited([](auto& j) { j["format"] = "onnx"; }),
                    "$.format: unknown format 'onnx', expected 'ingot.graph'");
  expect_json_error(edited([](auto& j) { j["version"] = 2; }),
                    "$.version: unsupported version 2 (this build reads version 1)");
  expect_json_error(edited([](auto& j) { j.erase("version"); }), "$: missing field 'version'");
}

TEST(GraphJson, RejectsMalformedInput) {
  expect_json_error("", "Invalid graph JSON");
  expect_json_error("{\"format\": ", "Invalid graph JSON");
  expect_json_error("[1, 2]", "$: expected an object, got array");
  expect_json_error(edited([](auto& j) { j["values"] = 3; }), "$.values: expected an array");
  expect_json_error(edited([](auto& j) { j["values"][1].erase("kind"); }),
                    "$.values[1]: missing field 'kind'");
  expect_json_error(edited([](auto& j) { j["values"][1]["id"] = 0; }),
                    "$.values[1].id: expected an integer in [1, 1], got 0");
  expect_json_error(edited([](auto& j) { j["values"][1]["kind"] = "ghost"; }),
                    "$.values[1].kind: unknown value kind 'ghost'");
  expect_json_error(edited([](auto& j) { j["values"][0]["dtype"] = "float128"; }),
                    "$.values[0].dtype: unknown dtype 'float128'");
  expect_json_error(edited([](auto& j) { j["values"][0]["shape"][1] = -3; }),
                    "$.values[0].shape[1]: expected an integer in [0, ");
  expect_json_error(edited([](auto& j) { j["values"][0]["shape"][1] = ""; }),
                    "$.values[0].shape[1]: empty dimension symbol");
  expect_json_error(edited([](auto& j) { j["values"][0]["shape_known"] = 1; }),
                    "$.values[0].shape_known: expected true or false, got 1");
  expect_json_error(edited([](auto& j) { j["values"][3]["producer"] = 3; }),
                    "$.values[3].producer: expected an integer in [-1, 2], got 3");
  expect_json_error(edited([](auto& j) { j["values"][0]["name"] = nullptr; }),
                    "$.values[0].name: expected a string, got null");
  expect_json_error(edited([](auto& j) { j["nodes"][0]["inputs"][0] = 6; }),
                    "$.nodes[0].inputs[0]: expected an integer in [0, 5], got 6");
  expect_json_error(edited([](auto& j) { j["nodes"][0]["inputs"][0] = 1e20; }),
                    "$.nodes[0].inputs[0]: expected an integer");
  expect_json_error(edited([](auto& j) { j["nodes"][0]["attrs"]["groups"]["type"] = "int8"; }),
                    "$.nodes[0].attrs.groups.type: unknown attribute type 'int8'");
  expect_json_error(edited([](auto& j) { j["nodes"][0]["attrs"]["groups"]["value"] = 1.5; }),
                    "$.nodes[0].attrs.groups.value: expected an integer");
  expect_json_error(edited([](auto& j) { j["nodes"][0]["attrs"] = nlohmann::json::array(); }),
                    "$.nodes[0].attrs: expected an object, got array");
  expect_json_error(edited([](auto& j) { j["outputs"][0]["value"] = "5"; }),
                    "$.outputs[0].value: expected an integer");
  expect_json_error(edited([](auto& j) {
                      j["values"][2]["constant"]["data"] = {1, 2};
                    }),
                    "$.values[2].constant.data: has 2 elements, shape [] needs");
  expect_json_error(edited([](auto& j) { j["values"][2]["constant"]["data"][0] = "two"; }),
                    "$.values[2].constant.data[0]: expected a number");
  expect_json_error(edited([](auto& j) {
                      j["values"][2]["constant"] = nlohmann::json::parse(
                          R"({"dtype": "int8", "shape": [1], "data": [300]})");
                    }),
                    "$.values[2].constant.data[0]: expected an integer in [-128, 127], got 300");
  expect_json_error(
      edited([](auto& j) {
        j["values"][2]["constant"] = nlohmann::json::parse(
            R"({"dtype": "float32", "shape": [0, 4611686018427387904, 4], "data": []})");
      }),
      "$.values[2].constant.shape: shape [0, 4611686018427387904, 4] is too large");
}

}  // namespace
