// Control flow in logical models: If, While and Scan blocks whose branches and bodies are
// ordinary blocks. Each compiles into one `if`, `while` or `scan` node of the IR (see
// src/ops/control_flow.cpp) whose subgraphs are built from the bodies, so every backend runs the
// choice or the loop when the model runs, and gradients flow through it.
//
//   Model model;
//   model |= Linear(64)({{"input", "input"}, {"output", "hidden"}});
//   model += If("is_training",
//               Dropout(0.5)({{"input", "hidden"}, {"output", "hidden_processed"}}),
//               Identity()({{"input", "hidden"}, {"output", "hidden_processed"}}));
//
//   model |= While("step < max_steps", recurrent_block({{"input", "state"}, {"output", "new_state"}}),
//                  {{"state", "initial_state"}, {"step", 0.0}},        // loop variables: first values
//                  {{"state", "new_state"}, {"step", "step + 1"}},      // ... and next values
//                  {{"final_state", "state"}});                          // outputs: last values
//
// Names. A block's terminals are linked by name to the wires of the model it is added to, unless
// linked otherwise when adding it: a branch's or body's free inputs ("hidden") and outputs
// ("hidden_processed"), the names a condition reads ("is_training", "max_steps"), the outputs a
// loop returns ("final_state"). A loop variable's first value comes from initial_state (a wire
// name or a constant), its terminal is the variable's name. Parameters inside a branch or body
// become parameters of the enclosing model named "<block>.then_branch.<name>",
// "<block>.else_branch.<name>" or "<block>.body.<name>".
//
// Expressions (src/models/expression.h): names, numbers, + - * / % **, comparisons, and, or,
// not, parentheses; parsed, never evaluated as code. A loop variable's next value names a body
// output ("new_state"), or is an expression over body outputs, loop variables and terminals
// ("step + 1").
//
// A condition that reads data (an input or a parameter) decides at run time and needs the
// compile option dynamic_control_flow = true; without it compile fails naming the option. One
// fixed at compile time (a constant, a constant_keys entry) folds the branch away.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ingot/model.h"

namespace ingot {

// Name pairs in the caller's order: {loop variable, next-value expression}, {output, loop
// variable}, {body input, sequence terminal}, ...
using NameMap = std::vector<std::pair<std::string, std::string>>;
// {loop variable, first value}: a wire name or a constant.
using InitialState = std::vector<std::pair<std::string, IOKey>>;

// then_branch where `condition` holds (a nonzero one-element value), else else_branch. Both
// branches produce the same outputs, by name, each with one shape and dtype.
Model If(const std::string& condition, const BlockCall& then_branch, const BlockCall& else_branch);

// Runs `body` while `condition` (over loop variables and terminals) holds, at most
// max_iterations times when given (gradients through a loop whose trip count is data need it).
Model While(const std::string& condition, const BlockCall& body, const InitialState& initial_state,
            const NameMap& loop_vars, const NameMap& output_vars,
            std::optional<int64_t> max_iterations = std::nullopt);

struct ScanOptions {
  NameMap xs;                  // {body input, sequence terminal}: step t reads sequence[t]
  InitialState initial_state;  // carried loop variables, as for While
  NameMap loop_vars;           // {loop variable, next value}
  NameMap ys;                  // {output terminal, body output}: stacked along a new leading axis
  NameMap output_vars;         // {output terminal, loop variable}: its value after the last step
  bool reverse = false;        // last step first
};

// Runs `body` once per step of the leading axis of every `xs` sequence.
Model Scan(const BlockCall& body, const ScanOptions& options);

}  // namespace ingot
