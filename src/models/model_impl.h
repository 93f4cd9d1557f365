// The data behind ingot::Model, shared by model.cpp, model_json.cpp and the flatten stage.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/model.h"

namespace ingot::detail {

// The reserved primitive that picks its first input when training and its second when compiled
// with `inference = true` (BatchNorm2d statistics, Dropout). Resolved by flatten; never reaches
// the IR.
inline constexpr const char* kSelectByMode = "select_by_mode";

// The reserved primitive (state, value, [count]) {momentum} -> state: a running statistic
// (BatchNorm2d's). Resolved by flatten: in training mode the graph output "state:<parameter>" is
// (1 - momentum) state + momentum value, with value * count / (count - 1) when `count` is given
// (an unbiased variance); TrainStep writes it back. In inference mode it is dropped. Either way the
// parameter becomes non-trainable state (no gradient). The blend is built there so its scalars
// are graph constants, not terminals of the block.
inline constexpr const char* kStateUpdate = "state_update";
inline constexpr const char* kStatePrefix = "state:";

enum class WireRole { Unspecified, Input, Parameter };

struct Wire {
  std::string name;       // given by the user; empty when unnamed
  std::string auto_name;  // for unnamed wires: "<instance>.<terminal>" of the block that made it
  bool exposed = false;
  std::vector<ShapeTemplate> shapes;  // every template given for it (all must hold)
  std::optional<DType> dtype;
  std::optional<Tensor> value;
  bool weak = false;  // value is a scalar literal
  WireRole role = WireRole::Unspecified;
  std::optional<Init> init;

  const std::string& key() const { return name.empty() ? auto_name : name; }
};

struct Block {
  std::unique_ptr<Model> model;
  std::string instance;
  std::vector<std::string> terminals;  // terminal names of `model`, in terminals() order
  std::vector<int> wires;              // the wire each terminal is linked to
  std::vector<bool> is_output;
};

struct ModelImpl {
  // Primitive blocks: an op with named terminals.
  std::string op;
  std::vector<std::string> input_names, output_names;
  Attrs attrs;

  std::string type_name = "Model";
  std::string instance_name;  // requested name inside a parent (set_name)

  // Composite models.
  std::vector<Wire> wires;
  std::vector<Block> blocks;
  int cin = -1, cout = -1;

  Model* self = nullptr;  // the Model that owns this impl (kept current across moves)

  bool primitive() const { return !op.empty(); }
  std::vector<int> producer_of_wire() const;  // block index per wire, -1 if none
  std::vector<bool> consumed_wires() const;
  std::string terminal_name(int wire) const;  // cin -> "input", cout -> "output" when unnamed
  std::vector<int> input_wires() const;
  std::vector<int> output_wires() const;
  int find_wire(const std::string& terminal) const;  // -1 if none
  int new_wire(std::string name = "", std::string auto_name = "");
  // The wire a link names (created when needed), with the key's settings applied to it.
  int resolve_link(const IOKey& key, const std::string& auto_name);
  int canonical_input_index() const;   // index into terminals() of a block
  int canonical_output_index() const;
};

std::string to_snake_case(const std::string& type_name);

}  // namespace ingot::detail
