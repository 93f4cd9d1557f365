// lstm, gru and rnn (include/ingot/recurrent.h) as a scan over precomputed input projections.
#include "ingot/recurrent.h"

#include "ingot/control_flow.h"
#include "ingot/error.h"

namespace ingot {
namespace {

// Checks the operands against PyTorch's layout for `gates` gates; returns H.
int64_t check_layout(const char* what, int64_t gates, const Array& x, const Array& h0, const Array& w_ih,
                     const Array& w_hh, const Array& b_ih, const Array& b_hh) {
  for (const Array* a : {&x, &h0, &w_ih, &w_hh, &b_ih, &b_hh})
    INGOT_CHECK(a->defined(), what, ": an operand is undefined (default-constructed)");
  INGOT_CHECK(x.ndim() == 3, what, ": x must be [T, B, I], got shape ", to_string(x.shape()));
  INGOT_CHECK(h0.ndim() == 2 && h0.dim(0) == x.dim(1), what, ": the initial state must be [B, H] with B = ",
              x.dim(1), ", got shape ", to_string(h0.shape()));
  const int64_t h = h0.dim(1), i = x.dim(2);
  auto expect = [&](const Array& a, Shape want, const char* name) {
    INGOT_CHECK(a.shape() == want, what, ": ", name, " must have shape ", to_string(want), " (PyTorch's layout, ",
                gates, " gates of ", h, "), got ", to_string(a.shape()));
  };
  expect(w_ih, {gates * h, i}, "w_ih");
  expect(w_hh, {gates * h, h}, "w_hh");
  expect(b_ih, {gates * h}, "b_ih");
  expect(b_hh, {gates * h}, "b_hh");
  return h;
}

// Gate k of `g` [B, G*H].
Array gate(const Array& g, int64_t k, int64_t h) { return slice(g, {k * h}, {(k + 1) * h}, {-1}); }

// x W^T + b over all time steps at once: [T, B, G*H]. LSTM and RNN pass b_ih + b_hh, so a step
// adds only its input's row to h W_hh^T (GRU keeps b_hh inside: r scales W_hn h + b_hn).
Array projected(const Array& x, const Array& w, const Array& b) { return matmul(x, transpose(w)) + b; }

}  // namespace

std::tuple<Array, Array, Array> lstm(const Array& x, const Array& h0, const Array& c0, const Array& w_ih,
                                     const Array& w_hh, const Array& b_ih, const Array& b_hh, bool reverse) {
  const int64_t h = check_layout("ingot::lstm", 4, x, h0, w_ih, w_hh, b_ih, b_hh);
  INGOT_CHECK(c0.defined() && c0.shape() == h0.shape(), "ingot::lstm: c0 must have h0's shape ",
              to_string(h0.shape()));
  const Array w_hh_t = transpose(w_hh);
  auto [carry, ys] = scan(
      [&](const std::vector<Array>& s, const std::vector<Array>& xt) {
        // Each gate's pre-activation as the sum of its slices (not a slice of the sum): the CPU
        // backend reads slices in place, so the adds fuse into the gates' loop.
        const Array mm = matmul(s[0], w_hh_t);
        auto pre = [&](int64_t k) { return gate(xt[0], k, h) + gate(mm, k, h); };
        const Array c = sigmoid(pre(1)) * s[1] + sigmoid(pre(0)) * tanh(pre(2));
        const Array hn = sigmoid(pre(3)) * tanh(c);
        return std::pair{std::vector<Array>{hn, c}, std::vector<Array>{hn}};
      },
      {h0, c0}, {projected(x, w_ih, b_ih + b_hh)}, reverse);
  return {ys[0], carry[0], carry[1]};
}

std::pair<Array, Array> gru(const Array& x, const Array& h0, const Array& w_ih, const Array& w_hh, const Array& b_ih,
                            const Array& b_hh, bool reverse) {
  const int64_t h = check_layout("ingot::gru", 3, x, h0, w_ih, w_hh, b_ih, b_hh);
  const Array w_hh_t = transpose(w_hh);
  auto [carry, ys] = scan(
      [&](const std::vector<Array>& s, const std::vector<Array>& xt) {
        const Array hg = matmul(s[0], w_hh_t) + b_hh;
        const Array r = sigmoid(gate(xt[0], 0, h) + gate(hg, 0, h));
        const Array z = sigmoid(gate(xt[0], 1, h) + gate(hg, 1, h));
        const Array n = tanh(gate(xt[0], 2, h) + r * gate(hg, 2, h));
        const Array hn = (1.0f - z) * n + z * s[0];
        return std::pair{std::vector<Array>{hn}, std::vector<Array>{hn}};
      },
      {h0}, {projected(x, w_ih, b_ih)}, reverse);
  return {ys[0], carry[0]};
}

std::pair<Array, Array> rnn(const Array& x, const Array& h0, const Array& w_ih, const Array& w_hh, const Array& b_ih,
                            const Array& b_hh, bool reverse, bool use_relu) {
  check_layout("ingot::rnn", 1, x, h0, w_ih, w_hh, b_ih, b_hh);
  const Array w_hh_t = transpose(w_hh);
  auto [carry, ys] = scan(
      [&](const std::vector<Array>& s, const std::vector<Array>& xt) {
        const Array pre = xt[0] + matmul(s[0], w_hh_t);
        const Array hn = use_relu ? relu(pre) : tanh(pre);
        return std::pair{std::vector<Array>{hn}, std::vector<Array>{hn}};
      },
      {h0}, {projected(x, w_ih, b_ih + b_hh)}, reverse);
  return {ys[0], carry[0]};
}

}  // namespace ingot
