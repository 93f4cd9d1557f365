// LSTM, GRU and RNN blocks (include/ingot/models.h): each layer and direction is a Scan block
// whose body is one time step. What does not depend on the previous step, the input's matmul
// and its biases, is computed for all steps at once before the loop, as PyTorch and cuDNN do;
// the body does the recurrent matmul and the gates. The recurrent weights are parameters of this
// block, passed into the body as loop invariants, so their names are PyTorch's.
#include <cmath>

#include "ingot/control_blocks.h"
#include "ingot/error.h"
#include "ingot/models.h"
#include "models/zoo_util.h"

namespace ingot {

namespace {

enum class Cell { Lstm, Gru, Rnn };

int64_t gates_of(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }

Connection sigmoid(const Connection& x) { return apply("sigmoid", x); }
Connection tanh(const Connection& x) { return apply("tanh", x); }

// One time step: reads g_t (this step's input projection, [N, G*H]), the carried h (and c) and
// the recurrent weight, transposed before the loop ([H, G*H]; and, for GRU, the bias); returns
// h_next (and c_next).
Model step_body(Cell cell, int64_t hidden, bool bias, bool relu) {
  Model body;
  const Connection g = body.input("g_t"), h = body.input("h"), w_t = body.input("w_hh_t");
  Connection hw = matmul(h, w_t);  // [N, G*H]
  auto gate = [&](const Connection& x, int64_t k) { return x.slice(1, k * hidden, (k + 1) * hidden); };
  if (cell == Cell::Lstm) {
    // Each gate's pre-activation as the sum of its slices, not a slice of the sum: the CPU backend
    // reads slices in place, so the adds fuse into the gates' one loop.
    const Connection c = body.input("c");
    auto pre = [&](int64_t k) { return gate(g, k) + gate(hw, k); };
    const Connection i = sigmoid(pre(0)), f = sigmoid(pre(1)), cand = tanh(pre(2)), o = sigmoid(pre(3));
    const Connection c_next = f * c + i * cand;
    body.expose(o * tanh(c_next), "h_next");
    body.expose(c_next, "c_next");
  } else if (cell == Cell::Gru) {
    if (bias) hw = hw + body.input("b_hh");  // inside: r scales W_hn h + b_hn
    const Connection r = sigmoid(gate(g, 0) + gate(hw, 0)), z = sigmoid(gate(g, 1) + gate(hw, 1));
    const Connection n = tanh(gate(g, 2) + r * gate(hw, 2));
    body.expose(n + z * (h - n), "h_next");  // (1 - z) n + z h
  } else {
    body.expose(relu ? apply("relu", g + hw) : tanh(g + hw), "h_next");
  }
  return body;
}

struct LayerResult {
  Connection ys, h, c;
};

// One layer in one direction over x [T, N, in].
LayerResult layer(Model& m, Cell cell, const RecurrentOptions& o, const Connection& x, int64_t in, int64_t l,
                  bool reverse) {
  const int64_t hidden = o.hidden_size, rows = gates_of(cell) * hidden;
  const std::string sfx = "_l" + std::to_string(l) + (reverse ? "_reverse" : "");
  const double k = 1.0 / std::sqrt(static_cast<double>(hidden));  // PyTorch's U(-1/sqrt(H), 1/sqrt(H))
  const Connection w_ih = m.parameter("weight_ih" + sfx, Init::uniform(-k, k), ShapeTemplate{rows, in});
  const Connection w_hh = m.parameter("weight_hh" + sfx, Init::uniform(-k, k), ShapeTemplate{rows, hidden});
  Connection projected = matmul(x, w_ih.T());  // every step's input matmul at once: [T, N, G*H]
  Connection b_hh;
  if (o.bias) {
    projected = projected + m.parameter("bias_ih" + sfx, Init::uniform(-k, k), ShapeTemplate{rows});
    b_hh = m.parameter("bias_hh" + sfx, Init::uniform(-k, k), ShapeTemplate{rows});
    if (cell != Cell::Gru) projected = projected + b_hh;  // GRU keeps it inside the step
  }
  const Connection zeros = apply("zeros_like", projected[0].slice(1, 0, hidden));  // [N, H]
  ScanOptions s;
  s.xs = {{"g_t", "projected"}};
  s.initial_state = {{"h", "h0"}};
  s.loop_vars = {{"h", "h_next"}};
  s.ys = {{"ys", "h_next"}};
  s.output_vars = {{"h_last", "h"}};
  s.reverse = reverse;
  // The transpose of W_hh runs once, not every step.
  Links links = {{"projected", projected}, {"h", zeros},       {"w_hh_t", w_hh.T()},
                 {"ys", IOKey()},          {"h_last", IOKey()}};
  if (cell == Cell::Lstm) {
    s.initial_state.emplace_back("c", IOKey("c0"));
    s.loop_vars.emplace_back("c", "c_next");
    s.output_vars.emplace_back("c_last", "c");
    links.emplace_back("c", zeros);
    links.emplace_back("c_last", IOKey());
  }
  if (cell == Cell::Gru && o.bias) links.emplace_back("b_hh", b_hh);
  const std::map<std::string, Connection> t =
      m.add(Scan(BlockCall{step_body(cell, hidden, o.bias, o.nonlinearity == "relu"), {}}, s), links,
            "scan" + sfx);
  return {t.at("ys"), t.at("h_last"), cell == Cell::Lstm ? t.at("c_last") : Connection()};
}

Connection concat(Model& m, const std::vector<Connection>& parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  Links links;
  for (size_t i = 0; i < parts.size(); ++i) links.emplace_back("input" + std::to_string(i), parts[i]);
  return zoo::add_op(m, "concat", links, {{"axis", axis}});
}

Model recurrent(const char* type, Cell cell, const RecurrentOptions& o) {
  INGOT_CHECK(o.input_size > 0 && o.hidden_size > 0, type, ": input_size and hidden_size must be positive, got ",
              o.input_size, " and ", o.hidden_size);
  INGOT_CHECK(o.num_layers >= 1, type, ": num_layers must be at least 1, got ", o.num_layers);
  INGOT_CHECK(o.nonlinearity == "tanh" || o.nonlinearity == "relu", type, ": nonlinearity must be 'tanh' or 'relu', got '",
              o.nonlinearity, "'");
  INGOT_CHECK(cell == Cell::Rnn || o.nonlinearity == "tanh", type,
              ": nonlinearity is RNN's option (LSTM and GRU use sigmoid and tanh gates), got '", o.nonlinearity, "'");
  Model m = zoo::block(type);
  Connection x = m.input("input", o.batch_first ? ShapeTemplate{"N", "T", o.input_size}
                                                : ShapeTemplate{"T", "N", o.input_size});
  if (o.batch_first) x = x.transpose({1, 0, 2});
  std::vector<Connection> h_n, c_n;
  int64_t in = o.input_size;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    std::vector<Connection> ys;
    for (const bool reverse : o.bidirectional ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      const LayerResult r = layer(m, cell, o, x, in, l, reverse);
      ys.push_back(r.ys);
      h_n.push_back(r.h.reshape({1, -1, o.hidden_size}));
      if (cell == Cell::Lstm) c_n.push_back(r.c.reshape({1, -1, o.hidden_size}));
    }
    x = concat(m, ys, 2);
    in = o.hidden_size * static_cast<int64_t>(ys.size());
  }
  const Connection out = o.batch_first ? x.transpose({1, 0, 2}) : x;
  m.expose(concat(m, h_n, 0), "h_n");
  if (cell == Cell::Lstm) m.expose(concat(m, c_n, 0), "c_n");
  m.set_cout(out);  // last: adding a block makes its output the current one
  return m;
}

}  // namespace

Model LSTM(const RecurrentOptions& o) { return recurrent("LSTM", Cell::Lstm, o); }
Model GRU(const RecurrentOptions& o) { return recurrent("GRU", Cell::Gru, o); }
Model RNN(const RecurrentOptions& o) { return recurrent("RNN", Cell::Rnn, o); }

}  // namespace ingot
