// What the zoo's files share (zoo.cpp: layers and losses; zoo_vision.cpp: vision networks;
// zoo_transformer.cpp: transformer blocks).
#pragma once

#include <string>

#include "ingot/model.h"
#include "ingot/models.h"
#include "models/model_impl.h"

namespace ingot::zoo {

// An empty composite block whose instances are named after `type` ("Conv2d" -> "conv2d_0").
inline Model block(const std::string& type) {
  Model m;
  m.impl().type_name = type;
  return m;
}

// Adds primitive `op` to `m`, one input terminal per link (in order), one output "output".
inline Connection add_op(Model& m, const std::string& op, const Links& inputs, Attrs attrs = {}) {
  std::vector<std::string> names;
  for (const auto& [name, key] : inputs) names.push_back(name);
  return m.add(Model::primitive(op, names, {"output"}, std::move(attrs)), inputs).at("output");
}

// Adds block `b` to `m` under `name`, its input linked to `x`; returns its output.
inline Connection then(Model& m, const Model& b, const Connection& x, const std::string& name = "") {
  return m.add(b, {{"input", x}}, name).at("output");
}

// LayerNorm and RMSNorm (zoo.cpp): `op` ("layer_norm", "rms_norm") over the trailing dims `o`
// names, with weight (and, with `bias`, bias) parameters of their shape when o.affine.
Model trailing_norm(const char* name, const char* op, const NormOptions& o, bool bias);

}  // namespace ingot::zoo
