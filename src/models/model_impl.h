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

// What a control-flow block (If, While, Scan: src/models/control_blocks.cpp) compiles into: an
// `if`, `while` or `scan` node whose subgraphs are built from logical models. The block itself is
// a primitive whose input terminals name what the node reads (the names its condition reads,
// the bodies' free inputs, the first values of loop variables, lifted parameters) and whose
// output terminals are its results. The frontend (src/compiler/control_frontend.cpp) builds the
// node: each body is flattened and resolved into a graph whose formal parameters it binds by name.
// Immutable once built, so copies of the block share it.
struct ControlFlow {
  std::string kind;       // "if" | "while" | "scan"
  std::string condition;  // if: over the block's terminals; while: over loop variables and terminals
  std::vector<Model> bodies;            // if: then, else; while and scan: the body
  std::vector<std::string> body_names;  // "then_branch", "else_branch" | "body": lifted names' prefixes
  // Loop variables (while, scan): their names, in order, and each one's next value: an expression
  // over the body's outputs, the loop variables and the block's terminals.
  std::vector<std::pair<std::string, std::string>> loop_variables;
  // The node's operands after an if's condition, in order: the block's input terminal each one
  // reads and the formal parameter (a free input's name inside the body) it binds in body
  // `body`, or in every body with -1. Loop variables come first, then scanned sequences, then
  // the rest (invariants, lifted parameters).
  struct Operand {
    std::string terminal, formal;
    int body = -1;
    bool lifted = false;  // a parameter of the body, lifted to a parameter terminal of the block
  };
  std::vector<Operand> operands;
  size_t num_xs = 0;  // scan: sequences among the operands
  // The body outputs an if returns, or a scan stacks, in the node's result order (after a scan's
  // carried values).
  std::vector<std::string> body_results;
  // Each output terminal and the node result it is: an index into the node's results.
  std::vector<std::pair<std::string, size_t>> results;
  std::optional<int64_t> max_iterations;  // while
  bool reverse = false;                   // scan
  // Decides at run time by construction, whatever the compile option dynamic_control_flow says:
  // an imported ONNX If or Loop (ONNX defines them as run-time choices).
  bool run_time = false;

  bool is_lifted(const std::string& terminal) const {
    for (const Operand& o : operands)
      if (o.lifted && o.terminal == terminal) return true;
    return false;
  }
};

struct ModelImpl {
  // Primitive blocks: an op with named terminals.
  std::string op;
  std::vector<std::string> input_names, output_names;
  Attrs attrs;
  // Control-flow blocks: what their node is built from (primitive() holds for them too).
  std::shared_ptr<const ControlFlow> control;
  // Links add() uses for terminals the caller leaves unlinked (instead of a fresh unnamed wire):
  // control-flow blocks link their terminals to the enclosing model's wires of the same name.
  Links default_links;

  std::string type_name = "Model";
  std::string instance_name;  // requested name inside a parent (set_name)
  // set_attribute("backend", key): ml.compile's backend_map compiles this block's nodes with the
  // backend mapped to `key` (src/compiler/frontend.cpp tags them; empty: not marked).
  std::string backend;

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
  // A block's output terminals: wires a block produces that are exposed, the canonical output,
  // or named and read by no block. How a nested model's terminals are found.
  std::vector<int> output_wires() const;
  // What compiling this model (at the top level) makes outputs: the exposed wires a block
  // produces, or the canonical output when none is exposed. Other dangling wires are eliminated.
  std::vector<int> compiled_output_wires() const;
  int find_wire(const std::string& terminal) const;  // -1 if none
  int new_wire(std::string name = "", std::string auto_name = "");
  // The wire a link names (created when needed), with the key's settings applied to it.
  int resolve_link(const IOKey& key, const std::string& auto_name);
  int canonical_input_index() const;   // index into terminals() of a block
  int canonical_output_index() const;
  // The terminal of this block (`terms`: its terminals()) that a link named `link` names: the
  // terminal of that name, else for "input" / "output" the canonical one; empty if none.
  std::string terminal_linked_by(const std::string& link, const std::vector<TerminalInfo>& terms) const;

  // An IOKey's parts, for model_json (ModelImpl is IOKey's friend).
  static const std::string& key_name(const IOKey& k) { return k.name_; }
  static const std::optional<Tensor>& key_value(const IOKey& k) { return k.value_; }
  static bool key_weak(const IOKey& k) { return k.weak_; }
  static bool key_is_connection(const IOKey& k) { return k.wire_ >= 0; }
};

std::string to_snake_case(const std::string& type_name);

// `block` (an If, While or Scan) marked as deciding at run time (ControlFlow::run_time).
Model decided_at_run_time(Model block);

}  // namespace ingot::detail
