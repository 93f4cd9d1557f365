// Small training fixtures shared by test_train.cpp and test_train_api.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "ingot/ingot.h"
#include "op_test_util.h"

namespace ingot::testing {

// A two-layer classifier of 4 features into 3 classes with cross entropy, L2 on the weights and
// accuracy.
inline TrainModel classifier_train_model(double l2 = 0.01) {
  Model body;
  body += Linear(8);
  body += Tanh();
  body += Linear(3);
  TrainModel tm(body);
  tm.add_loss(CrossEntropyLoss("none"), {{"input", "output"}, {"target", "target"}}, "mean", 1.0, "ce");
  if (l2 > 0) tm.add_regularization("l2", l2, "*weight");
  tm.add_metric(ClassAccuracy(), {{"input", "output"}, {"target", "target"}}, "accuracy");
  return tm;
}

inline CompileOptions classifier_options(DType t, int64_t batch = 6) {
  CompileOptions o;
  o.shapes = {{"input", {batch, 4}}};
  o.types = {{"input", t}, {"linear_0.weight", t}, {"linear_0.bias", t}, {"linear_1.weight", t}, {"linear_1.bias", t}};
  return o;
}

inline TensorMap batch_of(int64_t n, uint64_t seed, DType t) {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back((i * 7 + static_cast<int64_t>(seed)) % 3);
  return {{"input", random_tensor({n, 4}, seed, -1, 1, t)}, {"target", Tensor::from_vector<int64_t>(labels, {n})}};
}

// BatchNorm2d (running statistics moved by `momentum`) then a global average pool: [2, 2, 2, 2]
// -> [2, 2], fitted to a target by MSE.
inline Model batch_norm_body(double momentum) {
  Model body;
  body += BatchNorm2d(1e-5, momentum);
  body += GlobalAvgPool2d();
  return body;
}

inline TrainModel batch_norm_train_model(const Model& body) {
  TrainModel tm(body);
  tm.add_loss(MSELoss(), {{"input", "output"}, {"target", "target"}});
  return tm;
}

inline CompileOptions batch_norm_options() {
  CompileOptions o;
  o.shapes = {{"input", {2, 2, 2, 2}}, {"target", {2, 2}}};  // "target": the loss's new input
  return o;
}

}  // namespace ingot::testing
