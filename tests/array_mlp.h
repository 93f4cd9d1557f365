// A 2-layer MLP training step (softmax cross-entropy, SGD) written with Array ops and a
// hand-written backward pass, shared by the function-compile tests and bench_fncompile.
#pragma once

#include <vector>

#include "ingot/array.h"

namespace ingot::testing {

struct MlpParams {
  Array w1, b1, w2, b2;
  std::vector<Array*> all() { return {&w1, &b1, &w2, &b2}; }
};

inline MlpParams init_mlp(int64_t in, int64_t hidden, int64_t out, uint64_t seed) {
  Array k1(Tensor::scalar<int64_t>(static_cast<int64_t>(seed))), k2(Tensor::scalar<int64_t>(static_cast<int64_t>(seed + 1)));
  MlpParams p;
  p.w1 = random::normal({in, hidden}, 0, 0.05, DType::Float32, k1);
  p.b1 = zeros({hidden});
  p.w2 = random::normal({hidden, out}, 0, 0.05, DType::Float32, k2);
  p.b2 = zeros({out});
  eval({p.w1, p.b1, p.w2, p.b2});
  return p;
}

// One SGD step on (x, one-hot targets y); rebinds the parameters and returns the mean loss.
inline Array mlp_sgd_step(MlpParams& p, const Array& x, const Array& y, float lr) {
  const float batch = static_cast<float>(x.dim(0));
  Array h = relu(matmul(x, p.w1) + p.b1);
  Array logits = matmul(h, p.w2) + p.b2;
  Array loss = -mean(sum(y * log_softmax(logits, -1), {1}));
  Array dlogits = (softmax(logits, -1) - y) / batch;
  Array dw2 = matmul(transpose(h), dlogits);
  Array db2 = sum(dlogits, {0});
  Array dz = where(h > 0.0f, matmul(dlogits, transpose(p.w2)), 0.0f);
  Array dw1 = matmul(transpose(x), dz);
  Array db1 = sum(dz, {0});
  p.w1 = p.w1 - lr * dw1;
  p.b1 = p.b1 - lr * db1;
  p.w2 = p.w2 - lr * dw2;
  p.b2 = p.b2 - lr * db2;
  return loss;
}

}  // namespace ingot::testing
