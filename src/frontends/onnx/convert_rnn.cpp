// ONNX's recurrent layers, RNN, GRU and LSTM, unrolled over the sequence (its length is known
// while importing) into ingot's matmuls and elementwise ops, one step per time step: gates in
// ONNX's orders (GRU z, r, h; LSTM i, o, f, c; peepholes i, o, f), any activation list of the
// common functions with its alpha and beta, clip, linear_before_reset, layout 0 and 1, initial
// states, peepholes, and sequence_lens (a step past a batch entry's length leaves its state as it
// was and writes zeros to Y). Refused with a clear error: the reverse and bidirectional
// directions and LSTM's input_forget.
#include <cmath>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "ingot/error.h"

namespace ingot::onnx_import {
namespace {

using Outs = std::vector<Connection>;

enum class Cell { Rnn, Gru, Lstm };

// Activation `name` (ONNX's spelling) with its alpha and beta (NaN: the function's default).
Connection activation(NodeContext& c, const std::string& name, double alpha, double beta, const Connection& x) {
  auto or_default = [](double v, double d) { return std::isnan(v) ? d : v; };
  if (name == "Tanh") return apply("tanh", x);
  if (name == "Sigmoid") return apply("sigmoid", x);
  if (name == "Relu") return apply("relu", x);
  if (name == "Affine") return x * or_default(alpha, 1.0) + or_default(beta, 0.0);
  if (name == "ScaledTanh") return apply("tanh", x * or_default(beta, 1.0)) * or_default(alpha, 1.0);
  if (name == "Softsign") return x / (apply("abs", x) + 1.0);
  if (name == "LeakyRelu") return c.op("where", {c.op("less", {x, 0.0}), x * or_default(alpha, 0.01), x});
  if (name == "ThresholdedRelu") return c.op("where", {c.op("greater", {x, or_default(alpha, 1.0)}), x, x * 0.0});
  if (name == "Elu") return c.op("where", {c.op("less", {x, 0.0}), (apply("exp", x) - 1.0) * or_default(alpha, 1.0), x});
  if (name == "HardSigmoid")
    return c.op("maximum", {c.op("minimum", {x * or_default(alpha, 0.2) + or_default(beta, 0.5), 1.0}), 0.0});
  c.fail("activation '" + name + "' is not supported (Tanh, Sigmoid, Relu, Affine, ScaledTanh, Softsign, LeakyRelu, "
         "ThresholdedRelu, Elu, HardSigmoid are)");
}

Outs recurrent(NodeContext& c, Cell cell) {
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward") c.fail("direction '" + direction + "' is not supported (only forward)");
  if (cell == Cell::Lstm && c.attr_int("input_forget", 0) != 0) c.fail("input_forget is not supported");
  const std::optional<Shape> xs = c.static_shape(0);
  if (!xs || xs->size() != 3) c.fail("it needs X's size (rank 3) while importing");
  const bool batch_first = c.attr_int("layout", 0) != 0;
  const int64_t steps = batch_first ? (*xs)[1] : (*xs)[0], batch = batch_first ? (*xs)[0] : (*xs)[1];
  const int64_t hidden = c.attr_int("hidden_size", 0);
  if (hidden <= 0) c.fail("hidden_size must be given and positive");
  if (steps <= 0) c.fail("the sequence is empty");
  const std::optional<DType> t = c.dtype(0);
  if (!t) c.fail("the element type of X is unknown");
  const int gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const int64_t width = gates * hidden;

  // Activations: f (and g, h) in ONNX's order, with alpha and beta consumed one per function.
  std::vector<std::string> names;
  std::vector<double> alphas, betas;
  for (const auto& a : c.node.attribute()) {
    if (a.name() == "activations") names.assign(a.strings().begin(), a.strings().end());
    if (a.name() == "activation_alpha") alphas.assign(a.floats().begin(), a.floats().end());
    if (a.name() == "activation_beta") betas.assign(a.floats().begin(), a.floats().end());
  }
  const std::vector<std::string> defaults = cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                            : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (names.empty()) names = defaults;
  if (names.size() != defaults.size())
    c.fail("expects " + std::to_string(defaults.size()) + " activations for one direction, got " + std::to_string(names.size()));
  auto act = [&](size_t k, const Connection& x) {
    return activation(c, names[k], k < alphas.size() ? alphas[k] : NAN, k < betas.size() ? betas[k] : NAN, x);
  };
  const float clip = c.attr_float("clip", 0.0f);
  auto clipped = [&](const Connection& x) {  // the input of every activation, within [-clip, clip]
    return clip > 0.0f ? c.op("maximum", {c.op("minimum", {x, static_cast<double>(clip)}), -static_cast<double>(clip)}) : x;
  };

  const Connection x = batch_first ? c.in(0).transpose({1, 0, 2}) : c.in(0);  // [steps, batch, input]
  const Connection w = c.in(1)[0].T(), r = c.in(2)[0].T();                    // [input, width], [hidden, width]
  std::optional<Connection> wb, rb;
  if (c.has_input(3)) {
    const Connection b = c.in(3)[0];
    wb = b.slice(0, 0, width);
    rb = b.slice(0, width, 2 * width);
  }
  auto initial = [&](int input, const char* what) {
    if (c.has_input(input)) {
      const Connection s = c.in(input);  // [1, batch, hidden] (layout 1: [batch, 1, hidden])
      return batch_first ? s.transpose({1, 0, 2})[0] : s[0];
    }
    const std::string name = std::string("onnx_") + what + "_" + (c.node.name().empty() ? c.node.output(1) : c.node.name());
    return c.model.constant(name, Tensor::full(*t, {batch, hidden}, 0.0));
  };
  Connection h = initial(5, "initial_h");
  Connection cs = cell == Cell::Lstm ? initial(6, "initial_c") : Connection();
  std::optional<Connection> pi, po, pf;
  if (cell == Cell::Lstm && c.has_input(7)) {
    const Connection p = c.in(7)[0];
    pi = p.slice(0, 0, hidden);
    po = p.slice(0, hidden, 2 * hidden);
    pf = p.slice(0, 2 * hidden, 3 * hidden);
  }
  // sequence_lens: 1 where step `i` is within a batch entry's length, else 0 ([batch, 1], X's type).
  auto within = [&](int64_t i) {
    const Connection lens = c.in(4).cast(DType::Int64);
    return c.op("expand_dims", {c.op("greater", {lens, static_cast<double>(i)}).cast(*t)}, {{"axes", std::vector<int64_t>{1}}});
  };
  auto gate = [](const Connection& g, int64_t k, int64_t size) { return g.slice(1, k * size, (k + 1) * size); };
  std::vector<Connection> ys;
  for (int64_t i = 0; i < steps; ++i) {
    Connection gx = matmul(x[i], w);
    if (wb) gx = gx + *wb;
    Connection h_next, c_next;
    if (cell == Cell::Gru) {
      const Connection rzr = r.slice(1, 0, 2 * hidden), rh = r.slice(1, 2 * hidden, 3 * hidden);
      Connection gh = matmul(h, rzr);
      if (rb) gh = gh + rb->slice(0, 0, 2 * hidden);
      const Connection z = act(0, clipped(gate(gx, 0, hidden) + gate(gh, 0, hidden)));
      const Connection reset = act(0, clipped(gate(gx, 1, hidden) + gate(gh, 1, hidden)));
      Connection recurrent_h;
      if (c.attr_int("linear_before_reset", 0) != 0) {
        Connection hr = matmul(h, rh);
        if (rb) hr = hr + rb->slice(0, 2 * hidden, 3 * hidden);
        recurrent_h = reset * hr;
      } else {
        recurrent_h = matmul(reset * h, rh);
        if (rb) recurrent_h = recurrent_h + rb->slice(0, 2 * hidden, 3 * hidden);
      }
      const Connection candidate = act(1, clipped(gate(gx, 2, hidden) + recurrent_h));
      h_next = (1.0 - z) * candidate + z * h;
    } else {
      Connection g = gx + matmul(h, r);
      if (rb) g = g + *rb;
      if (cell == Cell::Rnn) {
        h_next = act(0, clipped(g));
      } else {
        Connection in_gate = gate(g, 0, hidden), out_gate = gate(g, 1, hidden), forget = gate(g, 2, hidden);
        if (pi) in_gate = in_gate + *pi * cs;
        if (pf) forget = forget + *pf * cs;
        const Connection ig = act(0, clipped(in_gate)), fg = act(0, clipped(forget));
        c_next = fg * cs + ig * act(1, clipped(gate(g, 3, hidden)));
        if (po) out_gate = out_gate + *po * c_next;
        h_next = act(0, clipped(out_gate)) * act(2, c_next);
      }
    }
    if (c.has_input(4)) {  // past a batch entry's length: the state stays, Y is 0
      const Connection m = within(i);
      ys.push_back(h_next * m);
      h_next = h_next * m + h * (1.0 - m);
      if (cell == Cell::Lstm) c_next = c_next * m + cs * (1.0 - m);
    } else {
      ys.push_back(h_next);
    }
    h = h_next;
    if (cell == Cell::Lstm) cs = c_next;
  }
  // Y [steps, 1, batch, hidden] (layout 1: [batch, steps, 1, hidden]); Y_h, Y_c [1, batch, hidden]
  // (layout 1: [batch, 1, hidden]).
  std::vector<IOKey> stacked;
  for (const Connection& y : ys) stacked.push_back(c.op("expand_dims", {y}, {{"axes", std::vector<int64_t>{0, 1}}}));
  Connection y = steps == 1 ? Connection(c.op("identity", {stacked[0]})) : c.op("concat", stacked, {{"axis", int64_t{0}}});
  if (batch_first) y = y.transpose({2, 0, 1, 3});
  auto last = [&](const Connection& s) {
    const Connection e = c.op("expand_dims", {s}, {{"axes", std::vector<int64_t>{0}}});
    return batch_first ? e.transpose({1, 0, 2}) : e;
  };
  Outs outs = {y, last(h)};
  if (cell == Cell::Lstm) outs.push_back(last(cs));
  return outs;
}

}  // namespace

void register_rnn_conversions() {
  register_conversion("RNN", [](NodeContext& c) { return recurrent(c, Cell::Rnn); });
  register_conversion("GRU", [](NodeContext& c) { return recurrent(c, Cell::Gru); });
  register_conversion("LSTM", [](NodeContext& c) { return recurrent(c, Cell::Lstm); });
}

}  // namespace ingot::onnx_import
