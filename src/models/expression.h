// The small expression language of control-flow blocks: an If's condition ("is_training",
// "x_norm > 1"), a While's condition ("step < max_steps") and a loop variable's next value
// ("step + 1"). It is parsed into a tree here and built into IR nodes by emit(); it is never
// evaluated as code.
//
//   expression := or
//   or         := and ("or" and)*
//   and        := not ("and" not)*
//   not        := "not" not | comparison
//   comparison := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//   sum        := product (("+" | "-") product)*
//   product    := unary (("*" | "/" | "%") unary)*
//   unary      := "-" unary | power
//   power      := atom ("**" unary)?
//   atom       := name | number | "True" | "False" | "(" expression ")"
//
// Names are terminal or loop-variable names (letters, digits, '_' and '.'); numbers are weak
// scalars that take the dtype of what they meet, as Python literals do.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ingot/graph.h"

namespace ingot::detail {

class Expression {
 public:
  // Throws ingot::Error naming `where`, the text and the offending position on a syntax error.
  static Expression parse(const std::string& text, const std::string& where);

  const std::string& text() const { return text_; }
  // Every name it reads, in order of first appearance.
  std::vector<std::string> names() const;
  // The name when the whole expression is one name ("is_training"), else empty.
  std::string single_name() const;

  // Appends its nodes to `g`, reading each name through `lookup`; returns its value.
  ValueId emit(Graph& g, const std::function<ValueId(const std::string&)>& lookup, const std::string& scope) const;
  // As emit, as a bool condition: a bare name's truth (nonzero); arithmetic keeps its value.
  ValueId emit_condition(Graph& g, const std::function<ValueId(const std::string&)>& lookup,
                         const std::string& scope) const;

 private:
  struct Term {
    enum class Kind { Name, Number, Bool, Unary, Binary } kind;
    std::string op;  // Unary: "neg" | "not"; Binary: an op of the catalogue, or "and" | "or"
    std::string name;
    double number = 0;
    int a = -1, b = -1;  // operands, indices into terms_ (always lower than this term's)
  };
  friend class ExpressionParser;

  std::string text_;
  std::vector<Term> terms_;
  int root_ = -1;
};

}  // namespace ingot::detail
