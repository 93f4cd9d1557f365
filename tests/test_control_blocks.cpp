// Control flow in logical models (include/ingot/control_blocks.h): If, While and Scan blocks
// against their unrolled equivalents (the same blocks chained, sharing parameters) on the
// reference and CPU backends; gradients against finite differences in float64; the seeds'
// examples; the dynamic_control_flow rule; condition expressions; and the errors a user meets.
#include <gtest/gtest.h>

#include "autodiff_test_util.h"
#include "cpu_test_util.h"
#include "ingot/control_blocks.h"
#include "ingot/models.h"
#include "ingot/physical_model.h"
#include "ingot/recurrent.h"

namespace ingot::testing {
namespace {

using cpu_test::cpu_options;
using cpu_test::expect_same;

PhysicalModel compile_on(const Model& m, bool cpu, CompileOptions o) {
  return cpu ? compile(m, CpuBackend(cpu_options()), o) : compile(m, ReferenceBackend(), o);
}

Tensor rnd32(Shape s, uint64_t seed) { return random_tensor(std::move(s), seed, -1, 1, DType::Float32); }
Tensor flag(bool b) { return Tensor::full(DType::Bool, {}, b ? 1.0 : 0.0); }

// The tanh RNN cell both the loops and their unrolled references run: new = tanh(state W + b).
Model cell(const std::string& in, const std::string& out) {
  Model m;
  m |= Linear(4)({{"input", in}, {"output", out + ".pre"}, {"weight", "W"}, {"bias", "b"}});
  m |= Tanh()({{"input", out + ".pre"}, {"output", out}});
  return m;
}

// ------------------------------------------------------------------------------------ If

Model if_model() {
  Model m;
  m |= If("p", Linear(3)({{"input", "x"}, {"output", "y"}}), Identity()({{"input", "x"}, {"output", "y"}}));
  return m;
}

TEST(ControlBlocks, IfRunsTheTakenBranchOnBothBackends) {
  Model m = if_model();
  const std::vector<std::string> keys = m.input_keys();
  EXPECT_EQ(keys, (std::vector<std::string>{"x", "p", "if_0.then_branch.weight", "if_0.then_branch.bias"}));
  Model linear;  // the then branch alone, with the same parameter names
  linear |= Linear(3)({{"input", "x"}, {"output", "y"}, {"weight", "if_0.then_branch.weight"},
                       {"bias", "if_0.then_branch.bias"}});
  CompileOptions o;
  o.shapes = {{"x", {2, 3}}};
  o.types = {{"p", DType::Bool}};
  o.dynamic_control_flow = true;
  const Tensor x = rnd32({2, 3}, 1);
  for (const bool cpu : {false, true}) {
    SCOPED_TRACE(cpu ? "cpu" : "reference");
    const PhysicalModel pm = compile_on(m, cpu, o);
    EXPECT_EQ(to_string(pm.get_shapes().at("if_0.then_branch.weight")), "[3, 3]");
    const TensorMap params = pm.randomize_params(3);
    CompileOptions plain;
    plain.shapes = o.shapes;
    const TensorMap want = compile_on(linear, cpu, plain).evaluate(params, {{"x", x}});
    expect_same(pm.evaluate(params, {{"x", x}, {"p", flag(true)}}).at("y"), want.at("y"), "then", 1e-6, 1e-6);
    expect_same(pm.evaluate(params, {{"x", x}, {"p", flag(false)}}).at("y"), x, "else", 0, 0);
  }
}

TEST(ControlBlocks, ADataConditionNeedsDynamicControlFlowAConstantOneFolds) {
  Model m = if_model();
  CompileOptions o;
  o.shapes = {{"x", {2, 3}}};
  try {
    compile(m, ReferenceBackend(), o);
    FAIL() << "compiled a data-dependent If without dynamic_control_flow";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic_control_flow"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'p'"), std::string::npos) << e.what();
  }
  o.constant_keys = {{"p", flag(false)}};
  const PhysicalModel pm = compile(m, ReferenceBackend(), o);
  for (const Node& n : pm.graph().nodes()) EXPECT_NE(n.op, "if") << "a constant condition folds the if away";
  const Tensor x = rnd32({2, 3}, 2);
  expect_same(pm.evaluate(pm.randomize_params(), {{"x", x}}).at("y"), x, "else", 0, 0);
}

TEST(ControlBlocks, ConditionExpressionsOverTerminals) {
  Model m;
  m |= If("(s > 1 and not q) or s < -5", Identity()({{"input", "x"}, {"output", "y"}}),
          Model::primitive("neg", {"input"}, {"output"})({{"input", "x"}, {"output", "y"}}));
  CompileOptions o;
  o.shapes = {{"x", {2}}, {"s", {}}, {"q", {}}};
  o.dynamic_control_flow = true;
  const Tensor x = rnd32({2}, 3);
  for (const bool cpu : {false, true}) {
    const PhysicalModel pm = compile_on(m, cpu, o);
    for (const auto& [s, q] : std::vector<std::pair<float, float>>{{2, 0}, {2, 1}, {0, 0}, {-6, 1}}) {
      const bool taken = (s > 1 && q == 0) || s < -5;
      const Tensor y = pm.evaluate({}, {{"x", x}, {"s", Tensor::scalar(s)}, {"q", Tensor::scalar(q)}}).at("y");
      EXPECT_EQ(y.data<float>()[0], taken ? x.data<float>()[0] : -x.data<float>()[0]) << s << " " << q;
    }
  }
}

TEST(ControlBlocks, IfGradientsAreTheTakenBranchs) {
  Model m;
  m |= If("p", Linear(2)({{"input", "x"}, {"output", "h"}}), Linear(2)({{"input", "x"}, {"output", "h"}}));
  m |= Model::primitive("sum", {"input"}, {"output"})({{"input", "h"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"x", {3, 2}}};
  o.types = {{"p", DType::Bool}};
  o.dynamic_control_flow = true;
  const PhysicalModel pm = compile(m, ReferenceBackend(), float64_options(m, o));
  const TensorMap params = pm.randomize_params(5);
  for (const bool p : {true, false}) {
    SCOPED_TRACE(p ? "then" : "else");
    check_model_gradients(pm, params, {{"x", rnd({3, 2}, 6)}, {"p", flag(p)}}, {{"loss", Tensor::scalar(1.0)}});
    const Evaluation r = pm.evaluate(params, {{"x", rnd({3, 2}, 6)}, {"p", flag(p)}}, {{"loss", Tensor::scalar(1.0)}});
    const Tensor untaken = r.gradients.at(p ? "if_0.else_branch.weight" : "if_0.then_branch.weight");
    for (int64_t i = 0; i < untaken.numel(); ++i) EXPECT_EQ(untaken.data<double>()[i], 0.0);
  }
}

// --------------------------------------------------------------------------------- While

// The seed's loop: state <- cell(state) while step < max_steps.
Model while_model(std::optional<int64_t> max_iterations = std::nullopt) {
  Model m;
  m |= While("step < max_steps", BlockCall{cell("state", "new_state"), {}},
             {{"state", "initial_state"}, {"step", 0.0}}, {{"state", "new_state"}, {"step", "step + 1"}},
             {{"final_state", "state"}, {"steps", "step"}}, max_iterations);
  m.expose(m.connection("final_state"), "");  // both results are outputs
  m.expose(m.connection("steps"), "");
  return m;
}

// `steps` cells chained, sharing W and b.
Model unrolled(int steps) {
  Model m;
  std::string state = "initial_state";
  for (int i = 0; i < steps; ++i) {
    const std::string next = i + 1 == steps ? "final_state" : "s" + std::to_string(i + 1);
    m |= cell(state, next)({{state, state}, {next, next}, {"W", "while_0.body.W"}, {"b", "while_0.body.b"}});
    state = next;
  }
  return m;
}

TEST(ControlBlocks, WhileMatchesTheUnrolledLoop) {
  Model m = while_model();
  CompileOptions o;
  o.shapes = {{"initial_state", {2, 4}}, {"max_steps", {}}};
  o.dynamic_control_flow = true;
  const Tensor s0 = rnd32({2, 4}, 7);
  for (const bool cpu : {false, true}) {
    SCOPED_TRACE(cpu ? "cpu" : "reference");
    const PhysicalModel pm = compile_on(m, cpu, o);
    const TensorMap params = pm.randomize_params(8);
    for (const int steps : {0, 1, 3}) {
      const TensorMap got = pm.evaluate(params, {{"initial_state", s0}, {"max_steps", Tensor::scalar(float(steps))}});
      EXPECT_EQ(got.at("steps").data<float>()[0], float(steps));
      if (steps == 0) {
        expect_same(got.at("final_state"), s0, "no iteration", 0, 0);
        continue;
      }
      CompileOptions u;
      u.shapes = {{"initial_state", {2, 4}}};
      const TensorMap want = compile_on(unrolled(steps), cpu, u).evaluate(params, {{"initial_state", s0}});
      expect_same(got.at("final_state"), want.at("final_state"), "steps " + std::to_string(steps), 1e-6, 1e-6);
    }
  }
}

TEST(ControlBlocks, AWhileWithAFixedTripCountNeedsNoOption) {
  Model m;
  m |= While("i < 3", BlockCall{cell("state", "new_state"), {}}, {{"state", "s0"}, {"i", 0.0}},
             {{"state", "new_state"}, {"i", "i + 1"}}, {{"final_state", "state"}});
  CompileOptions o;
  o.shapes = {{"s0", {2, 4}}};
  const PhysicalModel pm = compile(m, ReferenceBackend(), o);  // the trip count reads only constants
  const TensorMap params = pm.randomize_params(9);
  const Tensor s0 = rnd32({2, 4}, 10);
  CompileOptions u;
  u.shapes = {{"initial_state", {2, 4}}};
  TensorMap renamed = {{"while_0.body.W", params.at("while_0.body.W")}, {"while_0.body.b", params.at("while_0.body.b")}};
  expect_same(pm.evaluate(params, {{"s0", s0}}).at("final_state"),
              compile(unrolled(3), ReferenceBackend(), u).evaluate(renamed, {{"initial_state", s0}}).at("final_state"),
              "3 steps", 1e-6, 1e-6);

  try {
    CompileOptions d;
    d.shapes = {{"initial_state", {2, 4}}};
    compile(while_model(), ReferenceBackend(), d);
    FAIL() << "a trip count read from max_steps compiled without dynamic_control_flow";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic_control_flow"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_steps"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------- Scan

// h_t = tanh(x_t Wx + h_{t-1} W + b); ys stacks every h_t, "last" is the final h.
Model rnn_scan(bool reverse) {
  Model body;
  body |= Linear(4, false)({{"input", "x_t"}, {"output", "xw"}, {"weight", "Wx"}});
  body |= Linear(4)({{"input", "h"}, {"output", "hw"}, {"weight", "W"}, {"bias", "b"}});
  body |= Model::primitive("add", {"left", "right"}, {"output"})({{"left", "xw"}, {"right", "hw"}, {"output", "pre"}});
  body |= Tanh()({{"input", "pre"}, {"output", "h_next"}});
  ScanOptions s;
  s.xs = {{"x_t", "xs"}};
  s.initial_state = {{"h", "h0"}};
  s.loop_vars = {{"h", "h_next"}};
  s.ys = {{"hs", "h_next"}};
  s.output_vars = {{"last", "h"}};
  s.reverse = reverse;
  Model m;
  m |= Scan(BlockCall{body, {}}, s);
  m.expose(m.connection("hs"), "");  // both results are outputs
  m.expose(m.connection("last"), "");
  return m;
}

TEST(ControlBlocks, ScanMatchesTheUnrolledRecurrenceBothWays) {
  CompileOptions o;
  o.shapes = {{"xs", {5, 2, 3}}, {"h0", {2, 4}}};
  const Tensor xs = rnd32({5, 2, 3}, 11), h0 = rnd32({2, 4}, 12);
  for (const bool reverse : {false, true})
    for (const bool cpu : {false, true}) {
      SCOPED_TRACE(std::string(cpu ? "cpu" : "reference") + (reverse ? " reverse" : ""));
      const PhysicalModel pm = compile_on(rnn_scan(reverse), cpu, o);
      EXPECT_EQ(to_string(pm.get_shapes().at("scan_0.body.Wx")), "[3, 4]");
      const TensorMap params = pm.randomize_params(13);
      const TensorMap got = pm.evaluate(params, {{"xs", xs}, {"h0", h0}});
      // The recurrence by hand.
      const float* w = params.at("scan_0.body.W").data<float>();
      const float* wx = params.at("scan_0.body.Wx").data<float>();
      const float* b = params.at("scan_0.body.b").data<float>();
      std::vector<float> h(h0.data<float>(), h0.data<float>() + 8);
      for (int step = 0; step < 5; ++step) {
        const int t = reverse ? 4 - step : step;
        std::vector<float> next(8);
        for (int r = 0; r < 2; ++r)
          for (int j = 0; j < 4; ++j) {
            double acc = b[j];
            for (int k = 0; k < 3; ++k) acc += double(xs.data<float>()[(t * 2 + r) * 3 + k]) * wx[k * 4 + j];
            for (int k = 0; k < 4; ++k) acc += double(h[r * 4 + k]) * w[k * 4 + j];
            next[r * 4 + j] = static_cast<float>(std::tanh(acc));
          }
        h = next;
        for (int i = 0; i < 8; ++i) EXPECT_NEAR(got.at("hs").data<float>()[t * 8 + i], h[i], 1e-5) << "step " << t;
      }
      for (int i = 0; i < 8; ++i) EXPECT_NEAR(got.at("last").data<float>()[i], h[i], 1e-5);
    }
}

TEST(ControlBlocks, ScanGradientsMatchFiniteDifferences) {
  Model m = rnn_scan(false);
  m |= Model::primitive("sum", {"input"}, {"output"})({{"input", "hs"}, {"output", IOKey("loss").expose()}});
  CompileOptions o;
  o.shapes = {{"xs", {4, 2, 3}}, {"h0", {2, 4}}};
  o.trainable_keys = {"h0"};
  for (const bool cpu : {false, true}) {
    SCOPED_TRACE(cpu ? "cpu" : "reference");
    const PhysicalModel pm = compile_on(m, cpu, float64_options(m, o));
    TensorMap params = pm.randomize_params(14);
    params["h0"] = rnd({2, 4}, 16);  // a trainable key is passed as a parameter
    check_model_gradients(pm, params, {{"xs", rnd({4, 2, 3}, 15)}}, {{"loss", Tensor::scalar(1.0)}});
  }
}

TEST(ControlBlocks, SavedAndLoadedBlocksComputeTheSame) {
  Model m = while_model(12);
  m |= rnn_scan(true)({{"xs", "xs"}, {"h0", "final_state"}, {"hs", "hs"}, {"last", "last"}});
  m |= If("last_flag", Identity()({{"input", "hs"}, {"output", "out"}}),
          Model::primitive("neg", {"input"}, {"output"})({{"input", "hs"}, {"output", "out"}}));
  m.expose(m.connection("out"), "");
  const Model loaded = Model::from_json(m.to_json());
  EXPECT_EQ(loaded.to_json(), m.to_json());
  EXPECT_EQ(loaded.input_keys(), m.input_keys());
  CompileOptions o;
  o.shapes = {{"initial_state", {2, 4}}, {"xs", {3, 2, 3}}, {"max_steps", {}}, {"last_flag", {}}};
  o.dynamic_control_flow = true;
  const PhysicalModel a = compile(m, ReferenceBackend(), o), b = compile(loaded, ReferenceBackend(), o);
  const TensorMap params = a.randomize_params(17);
  const TensorMap in = {{"initial_state", rnd32({2, 4}, 18)}, {"xs", rnd32({3, 2, 3}, 19)},
                        {"max_steps", Tensor::scalar(2.0f)}, {"last_flag", Tensor::scalar(0.0f)}};
  expect_same(a.evaluate(params, in).at("out"), b.evaluate(params, in).at("out"), "round trip", 0, 0);
}

// ------------------------------------------------------------------------ Recurrent zoo

// The zoo's LSTM / GRU / RNN blocks (2 layers, bidirectional, batch_first) against ingot::lstm /
// gru / rnn on lazy arrays (include/ingot/recurrent.h, checked against torch.nn in Python) with the
// same weights, layer by layer.
TEST(ControlBlocks, RecurrentZooBlocksMatchTheArrayFunctions) {
  const int64_t T = 5, N = 2, I = 3, H = 4;
  for (const std::string kind : {"lstm", "gru", "rnn"}) {
    SCOPED_TRACE(kind);
    RecurrentOptions ro;
    ro.input_size = I;
    ro.hidden_size = H;
    ro.num_layers = 2;
    ro.bidirectional = true;
    ro.batch_first = true;
    Model m;
    m |= (kind == "lstm" ? LSTM(ro) : kind == "gru" ? GRU(ro) : RNN(ro))({{"input", "x"}, {"output", IOKey("y").expose()},
                                                                          {"h_n", IOKey("h_n").expose()}});
    CompileOptions o;
    o.shapes = {{"x", {N, T, I}}};
    const Tensor x = rnd32({N, T, I}, 20);
    for (const bool cpu : {false, true}) {
      const PhysicalModel pm = compile_on(m, cpu, o);
      const TensorMap params = pm.randomize_params(21);
      const TensorMap got = pm.evaluate(params, {{"x", x}});
      EXPECT_EQ(to_string(got.at("y").shape()), "[2, 5, 8]");
      EXPECT_EQ(to_string(got.at("h_n").shape()), "[4, 2, 4]");
      Array in = transpose(array(x), {1, 0, 2});
      const Array zeros = array(Tensor::full(DType::Float32, {N, H}, 0));
      for (int l = 0; l < 2; ++l) {
        std::vector<Array> ys;
        for (const bool reverse : {false, true}) {
          const std::string sfx = "_l" + std::to_string(l) + (reverse ? "_reverse" : "");
          auto p = [&](const std::string& name) { return array(params.at("lstm_0." + name + sfx)); };
          auto q = [&](const std::string& name) {
            return array(params.at((kind == "lstm" ? "lstm_0." : kind == "gru" ? "gru_0." : "rnn_0.") + name + sfx));
          };
          Array y, h;
          if (kind == "lstm") std::tie(y, h, std::ignore) = lstm(in, zeros, zeros, p("weight_ih"), p("weight_hh"), p("bias_ih"), p("bias_hh"), reverse);
          else if (kind == "gru") std::tie(y, h) = gru(in, zeros, q("weight_ih"), q("weight_hh"), q("bias_ih"), q("bias_hh"), reverse);
          else std::tie(y, h) = rnn(in, zeros, q("weight_ih"), q("weight_hh"), q("bias_ih"), q("bias_hh"), reverse);
          ys.push_back(y);
          const Tensor& hn = got.at("h_n");
          const Tensor want_h = h.tensor();
          for (int64_t i = 0; i < N * H; ++i)
            EXPECT_NEAR(hn.data<float>()[(l * 2 + (reverse ? 1 : 0)) * N * H + i], want_h.data<float>()[i], 1e-5);
        }
        in = concatenate(ys, 2);
      }
      expect_same(got.at("y"), transpose(in, {1, 0, 2}).tensor(), "output", 1e-5, 1e-5);
    }
  }
}

// Control flow nested in a body: a scan summing each row inside a scan over rows, and an If on
// data inside a Scan body (dynamic_control_flow reaches the bodies).
TEST(ControlBlocks, NestedBlocks) {
  Model inner;
  inner |= Model::primitive("add", {"left", "right"}, {"output"})({{"left", "acc"}, {"right", "x_i"}, {"output", "acc_next"}});
  ScanOptions in;
  in.xs = {{"x_i", "row"}};
  in.initial_state = {{"acc", "h"}};
  in.loop_vars = {{"acc", "acc_next"}};
  in.output_vars = {{"s", "acc"}};
  Model body;
  body |= Scan(BlockCall{inner, {}}, in);
  body |= If("flip", Tanh()({{"input", "s"}, {"output", "h_next"}}),
             Model::primitive("neg", {"input"}, {"output"})({{"input", "s"}, {"output", "h_next"}}));
  ScanOptions out;
  out.xs = {{"row", "xs"}};
  out.initial_state = {{"h", "h0"}};
  out.loop_vars = {{"h", "h_next"}};
  out.ys = {{"hs", "h_next"}};
  Model m;
  m |= Scan(BlockCall{body, {}}, out);
  CompileOptions o;
  o.shapes = {{"xs", {4, 3, 2, 5}}, {"h0", {2, 5}}, {"flip", {}}};
  o.dynamic_control_flow = true;
  const Tensor xs = rnd32({4, 3, 2, 5}, 40), h0 = rnd32({2, 5}, 41);
  for (const bool cpu : {false, true}) {
    const PhysicalModel pm = compile_on(m, cpu, o);
    for (const float flip : {1.0f, 0.0f}) {
      const Tensor hs = pm.evaluate({}, {{"xs", xs}, {"h0", h0}, {"flip", Tensor::scalar(flip)}}).at("hs");
      std::vector<double> h(h0.data<float>(), h0.data<float>() + 10);
      for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 10; ++i) {
          double acc = h[i];
          for (int r = 0; r < 3; ++r) acc += xs.data<float>()[(t * 3 + r) * 10 + i];
          h[i] = flip != 0 ? std::tanh(acc) : -acc;
          EXPECT_NEAR(hs.data<float>()[t * 10 + i], h[i], 1e-4) << t << " " << i;
        }
    }
  }
}

// --------------------------------------------------------------------------------- Errors

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ControlBlocks, MistakesAreClearErrors) {
  const BlockCall body{cell("state", "new_state"), {}};
  EXPECT_NE(error_of([&] { While("step <", body, {{"state", "s"}}, {{"state", "new_state"}}, {{"out", "state"}}); })
                .find("cannot parse the expression \"step <\""),
            std::string::npos);
  EXPECT_NE(error_of([&] { While("a < b < c", body, {{"state", "s"}}, {{"state", "new_state"}}, {{"out", "state"}}); })
                .find("chained comparisons"),
            std::string::npos);
  EXPECT_NE(error_of([&] { While("1 < 2", body, {{"state", "s"}, {"step", 0.0}}, {{"state", "new_state"}}, {{"o", "state"}}); })
                .find("loop variable 'step' has no next value"),
            std::string::npos);
  EXPECT_NE(error_of([&] { While("1 < 2", body, {{"state", "s"}}, {{"state", "new_state"}}, {{"o", "stat"}}); })
                .find("output_vars['o'] returns 'stat', which is not a loop variable"),
            std::string::npos);
  EXPECT_NE(error_of([&] { If("p", Identity()({{"input", "x"}, {"output", "y"}}), Identity()({{"input", "x"}, {"output", "z"}})); })
                .find("both branches must produce the same outputs"),
            std::string::npos);
  RecurrentOptions relu_lstm;
  relu_lstm.input_size = relu_lstm.hidden_size = 4;
  relu_lstm.nonlinearity = "relu";
  EXPECT_NE(error_of([&] { LSTM(relu_lstm); }).find("nonlinearity is RNN's option"), std::string::npos);
  relu_lstm.nonlinearity = "sigmoid";
  EXPECT_NE(error_of([&] { RNN(relu_lstm); }).find("must be 'tanh' or 'relu'"), std::string::npos);
  const BlockCall id = Identity()({{"input", "x"}, {"output", "y"}});
  EXPECT_NE(error_of([&] { If(std::string(5000, '(') + "p" + std::string(5000, ')'), id, id); }).find("nests deeper"),
            std::string::npos);
  EXPECT_NE(error_of([&] { If(std::string(5000, '-') + "p", id, id); }).find("nests deeper"), std::string::npos);
  ScanOptions s;
  s.xs = {{"x_t", "xs"}};
  s.initial_state = {{"state", "s0"}};
  s.loop_vars = {{"state", "new_state"}};
  s.output_vars = {{"last", "state"}};
  EXPECT_NE(error_of([&] { Scan(body, s); }).find("xs feeds 'x_t', which the body does not read"), std::string::npos);

  // A body that changes a carried value's shape: the error names the loop variable and both shapes.
  Model grow;
  grow |= Model::primitive("concat", {"a", "b"}, {"output"}, {{"axis", int64_t{0}}})({{"a", "v"}, {"b", "v"}, {"output", "v2"}});
  Model m;
  m |= While("i < 2", BlockCall{grow, {}}, {{"v", "v0"}, {"i", 0.0}}, {{"v", "v2"}, {"i", "i + 1"}}, {{"out", "v"}});
  CompileOptions o;
  o.shapes = {{"v0", {3}}};
  const std::string e = error_of([&] { compile(m, ReferenceBackend(), o); });
  EXPECT_NE(e.find("'v'"), std::string::npos) << e;
  EXPECT_NE(e.find("[3]"), std::string::npos) << e;
  EXPECT_NE(e.find("[6]"), std::string::npos) << e;
}

}  // namespace
}  // namespace ingot::testing
