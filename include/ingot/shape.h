// Shapes: concrete (`Shape`), user-written templates (`ShapeTemplate`) and inferred
// symbolic shapes (`SymShape`).
//
//   ShapeTemplate t = {"Batch...", 3, "H", "W"};  // any leading dims, then 3, then two symbols
//   ShapeTemplate u = {nullptr, 784};             // unknown (None) batch, 784 features
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ingot {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
// The element count, or nullopt when it overflows int64 (checked even next to a zero dim, since
// numel multiplies plainly). For shapes read from untrusted files.
std::optional<int64_t> checked_numel(const Shape& s);
std::string to_string(const Shape& s);

// One entry of a shape template: a number, a named symbol, unknown (None), or a variadic
// run of dimensions (`"Batch..."`, or `"..."` for an anonymous run).
class Dim {
 public:
  enum class Kind { Fixed, Symbol, Unknown, Variadic };

  Dim() : kind_(Kind::Unknown) {}
  Dim(std::nullptr_t) : kind_(Kind::Unknown) {}                        // NOLINT
  Dim(int v);                                                           // NOLINT
  Dim(int64_t v);                                                       // NOLINT
  Dim(const char* s) : Dim(std::string(s)) {}                           // NOLINT
  Dim(std::string s);                                                   // NOLINT
  static Dim unknown() { return Dim(); }
  static Dim variadic(std::string name = "");

  Kind kind() const { return kind_; }
  int64_t value() const { return value_; }
  const std::string& name() const { return name_; }  // symbol or variadic name
  bool operator==(const Dim& o) const {
    return kind_ == o.kind_ && value_ == o.value_ && name_ == o.name_;
  }
  std::string str() const;  // 3, "N", None, "Batch..."

 private:
  Kind kind_;
  int64_t value_ = -1;
  std::string name_;
};

using ShapeTemplate = std::vector<Dim>;
std::string to_string(const ShapeTemplate& t);

// An inferred dimension: a known size, or a symbol (user-named like "N", or generated
// like "u3" for a size only known at run time).
struct SymDim {
  int64_t value = -1;
  std::string symbol;

  SymDim() = default;
  SymDim(int64_t v) : value(v) {}  // NOLINT
  SymDim(std::string s) : symbol(std::move(s)) {}  // NOLINT
  bool known() const { return value >= 0; }
  bool operator==(const SymDim& o) const { return value == o.value && symbol == o.symbol; }
  std::string str() const;
};
using SymShape = std::vector<SymDim>;
std::string to_string(const SymShape& s);
bool is_static(const SymShape& s);
Shape to_shape(const SymShape& s);  // requires is_static

}  // namespace ingot
