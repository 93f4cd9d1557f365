#include "models/expression.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "ingot/error.h"
#include "ir/inline.h"

namespace ingot::detail {

// A recursive-descent parser over the grammar in expression.h; each rule appends its term to the
// expression and returns its index.
class ExpressionParser {
 public:
  ExpressionParser(Expression& e, std::string where) : e_(e), s_(e.text_), where_(std::move(where)) {}

  void run() {
    e_.root_ = parse_or();
    skip_space();
    if (pos_ < s_.size()) fail("unexpected '" + std::string(1, s_[pos_]) + "'");
  }

 private:
  using Term = Expression::Term;
  using Kind = Term::Kind;

  [[noreturn]] void fail(const std::string& what) const {
    INGOT_FAIL(where_, ": cannot parse the expression \"", s_, "\": ", what, " at position ", pos_,
               " (expressions take names, numbers, + - * / % **, comparisons, and, or, not and parentheses)");
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  static bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

  // Consumes `token` (an operator, or a keyword that must end at a word boundary) if it is next.
  bool accept(const std::string& token) {
    skip_space();
    if (s_.compare(pos_, token.size(), token) != 0) return false;
    const size_t end = pos_ + token.size();
    if (name_start(token[0]) && end < s_.size() && name_char(s_[end])) return false;
    // "<" must not take the first half of "<=", nor "*" of "**".
    if ((token == "<" || token == ">") && end < s_.size() && s_[end] == '=') return false;
    if (token == "*" && end < s_.size() && s_[end] == '*') return false;
    pos_ = end;
    return true;
  }

  int add(Term t) {
    e_.terms_.push_back(std::move(t));
    return static_cast<int>(e_.terms_.size()) - 1;
  }
  int binary(const std::string& op, int a, int b) { return add({Kind::Binary, op, "", 0, a, b}); }

  int parse_or() {
    // Nesting is bounded: a condition read from a file must not exhaust the stack.
    struct Depth {
      int& d;
      explicit Depth(int& depth) : d(++depth) {}
      ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxDepth) fail("it nests deeper than " + std::to_string(kMaxDepth) + " levels");
    int a = parse_and();
    while (accept("or")) a = binary("or", a, parse_and());
    return a;
  }
  int parse_and() {
    int a = parse_not();
    while (accept("and")) a = binary("and", a, parse_not());
    return a;
  }
  int parse_not() {
    if (accept("not")) return add({Kind::Unary, "not", "", 0, parse_or_nested(&ExpressionParser::parse_not), -1});
    return parse_comparison();
  }
  int parse_comparison() {
    int a = parse_sum();
    static const std::pair<const char*, const char*> kComparisons[] = {
        {"<=", "less_equal"}, {">=", "greater_equal"}, {"==", "equal"}, {"!=", "not_equal"},
        {"<", "less"},        {">", "greater"}};
    for (const auto& [token, op] : kComparisons)
      if (accept(token)) {
        a = binary(op, a, parse_sum());
        skip_space();
        if (pos_ < s_.size() && std::strchr("<>=!", s_[pos_]) != nullptr)
          fail("chained comparisons are not supported; join them with 'and'");
        return a;
      }
    return a;
  }
  int parse_sum() {
    int a = parse_product();
    for (;;) {
      if (accept("+")) a = binary("add", a, parse_product());
      else if (accept("-")) a = binary("sub", a, parse_product());
      else return a;
    }
  }
  int parse_product() {
    int a = parse_unary();
    for (;;) {
      if (accept("*")) a = binary("mul", a, parse_unary());
      else if (accept("/")) a = binary("div", a, parse_unary());
      else if (accept("%")) a = binary("mod", a, parse_unary());
      else return a;
    }
  }
  int parse_unary() {
    if (accept("-")) return add({Kind::Unary, "neg", "", 0, parse_or_nested(&ExpressionParser::parse_unary), -1});
    int a = parse_atom();
    if (accept("**")) a = binary("pow", a, parse_or_nested(&ExpressionParser::parse_unary));
    return a;
  }
  // A rule that recurses into itself ("not not x", "--x", "a ** b ** c"), counted as nesting.
  int parse_or_nested(int (ExpressionParser::*rule)()) {
    if (++depth_ > kMaxDepth) fail("it nests deeper than " + std::to_string(kMaxDepth) + " levels");
    const int t = (this->*rule)();
    --depth_;
    return t;
  }
  int parse_atom() {
    skip_space();
    if (pos_ >= s_.size()) fail("the expression ends early");
    if (accept("(")) {
      const int inner = parse_or();
      if (!accept(")")) fail("expected ')'");
      return inner;
    }
    if (accept("True")) return add({Kind::Bool, "", "", 1});
    if (accept("False")) return add({Kind::Bool, "", "", 0});
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = s_.data() + pos_;
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      if (end == begin) fail("bad number");
      pos_ += static_cast<size_t>(end - begin);
      if (pos_ < s_.size() && name_start(s_[pos_])) fail("a name cannot start with a digit");
      return add({Kind::Number, "", "", v});
    }
    if (name_start(c)) {
      const size_t start = pos_;
      while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
      std::string name = s_.substr(start, pos_ - start);
      if (name == "and" || name == "or" || name == "not") {
        pos_ = start;
        fail("'" + name + "' needs an operand before it");
      }
      return add({Kind::Name, "", std::move(name)});
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  static constexpr int kMaxDepth = 200;
  Expression& e_;
  const std::string& s_;
  std::string where_;
  size_t pos_ = 0;
  int depth_ = 0;
};

Expression Expression::parse(const std::string& text, const std::string& where) {
  Expression e;
  e.text_ = text;
  ExpressionParser(e, where).run();
  return e;
}

std::vector<std::string> Expression::names() const {
  std::vector<std::string> out;
  for (const Term& t : terms_)
    if (t.kind == Term::Kind::Name && std::find(out.begin(), out.end(), t.name) == out.end()) out.push_back(t.name);
  return out;
}

std::string Expression::single_name() const {
  return terms_[static_cast<size_t>(root_)].kind == Term::Kind::Name ? terms_[static_cast<size_t>(root_)].name : "";
}

namespace {
// Nonzero, as `where` and `if` read a condition: for and / or / not, and a bare-name condition.
ValueId truth_of(Graph& g, ValueId v, const std::string& scope) {
  return g.add_op("not_equal", {v, add_weak_scalar(g, 0)}, {}, scope);
}
}  // namespace

ValueId Expression::emit_condition(Graph& g, const std::function<ValueId(const std::string&)>& lookup,
                                   const std::string& scope) const {
  const ValueId v = emit(g, lookup, scope);
  return single_name().empty() ? v : truth_of(g, v, scope);  // an operator's result is a bool already
}

ValueId Expression::emit(Graph& g, const std::function<ValueId(const std::string&)>& lookup,
                         const std::string& scope) const {
  auto weak = [&](double v) { return add_weak_scalar(g, v); };  // a Python literal
  auto truth = [&](ValueId v) { return truth_of(g, v, scope); };
  // Terms are stored children first, so one pass in order builds them (no recursion: a long
  // "a + a + ... + a" from a file is a deep tree).
  std::vector<ValueId> value(terms_.size(), -1);
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    const ValueId a = t.a >= 0 ? value[static_cast<size_t>(t.a)] : -1, b = t.b >= 0 ? value[static_cast<size_t>(t.b)] : -1;
    switch (t.kind) {
      case Term::Kind::Name: value[i] = lookup(t.name); break;
      case Term::Kind::Number: value[i] = weak(t.number); break;
      case Term::Kind::Bool: value[i] = g.add_constant("", Tensor::full(DType::Bool, {}, t.number)); break;
      case Term::Kind::Unary:
        value[i] = t.op == "not" ? g.add_op("equal", {truth(a), weak(0)}, {}, scope) : g.add_op(t.op, {a}, {}, scope);
        break;
      case Term::Kind::Binary:
        if (t.op == "and" || t.op == "or") {
          const ValueId ta = truth(a), tb = truth(b);
          value[i] = t.op == "and" ? g.add_op("where", {ta, tb, ta}, {}, scope) : g.add_op("where", {ta, ta, tb}, {}, scope);
        } else {
          value[i] = g.add_op(t.op, {a, b}, {}, scope);
        }
        break;
    }
  }
  return value[static_cast<size_t>(root_)];
}

}  // namespace ingot::detail
