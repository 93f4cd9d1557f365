// Recurrent layers on lazy arrays, with PyTorch's equations and weight layout (torch.nn.LSTM /
// GRU / RNN, one layer, one direction), built on scan (include/ingot/control_flow.h): the
// input's matmul over all time steps runs once, before the loop; each step does the recurrent
// matmul and the gates. Stack layers by feeding ys to the next call; a bidirectional layer is a
// second call with reverse = true, its ys concatenated on the last axis.
//
//   x [T, B, I]; h0, c0 [B, H]; w_ih [G*H, I]; w_hh [G*H, H]; b_ih, b_hh [G*H]
//   (G = 4 for LSTM, gates i, f, g, o; 3 for GRU, gates r, z, n; 1 for the tanh RNN)
//   auto [ys, h, c] = lstm(x, h0, c0, w_ih, w_hh, b_ih, b_hh);   // ys [T, B, H]
#pragma once

#include <tuple>

#include "ingot/array.h"

namespace ingot {

std::tuple<Array, Array, Array> lstm(const Array& x, const Array& h0, const Array& c0, const Array& w_ih,
                                     const Array& w_hh, const Array& b_ih, const Array& b_hh, bool reverse = false);
std::pair<Array, Array> gru(const Array& x, const Array& h0, const Array& w_ih, const Array& w_hh, const Array& b_ih,
                            const Array& b_hh, bool reverse = false);
// h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (nonlinearity "relu": relu instead of tanh).
std::pair<Array, Array> rnn(const Array& x, const Array& h0, const Array& w_ih, const Array& w_hh, const Array& b_ih,
                            const Array& b_hh, bool reverse = false, bool relu = false);

}  // namespace ingot
