#include "ingot/shape.h"

#include "ingot/error.h"

namespace ingot {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::optional<int64_t> checked_numel(const Shape& shape) {
  int64_t product = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d == 0)
      empty = true;
    else if (__builtin_mul_overflow(product, d, &product))
      return std::nullopt;
  }
  return empty ? 0 : product;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Dim::Dim(int v) : Dim(static_cast<int64_t>(v)) {}
Dim::Dim(int64_t v) : kind_(Kind::Fixed), value_(v) {
  INGOT_CHECK(v >= 0, "Shape dimension must be >= 0, got ", v);
}
Dim::Dim(std::string s) : kind_(Kind::Symbol) {
  INGOT_CHECK(!s.empty(), "Shape symbol must not be empty (use nullptr for unknown)");
  if (s.size() >= 3 && s.compare(s.size() - 3, 3, "...") == 0) {
    kind_ = Kind::Variadic;
    s.resize(s.size() - 3);
  }
  name_ = std::move(s);
}
Dim Dim::variadic(std::string name) {
  Dim d;
  d.kind_ = Kind::Variadic;
  d.name_ = std::move(name);
  return d;
}

std::string Dim::str() const {
  switch (kind_) {
    case Kind::Fixed: return std::to_string(value_);
    case Kind::Symbol: return "\"" + name_ + "\"";
    case Kind::Unknown: return "None";
    case Kind::Variadic: return "\"" + name_ + "...\"";
  }
  return "?";
}

std::string to_string(const ShapeTemplate& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.size(); ++i) out += (i ? ", " : "") + t[i].str();
  return out + "]";
}

std::string SymDim::str() const { return known() ? std::to_string(value) : symbol; }

std::string to_string(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

bool is_static(const SymShape& s) {
  for (const auto& d : s)
    if (!d.known()) return false;
  return true;
}

Shape to_shape(const SymShape& s) {
  Shape out;
  out.reserve(s.size());
  for (const auto& d : s) {
    INGOT_CHECK(d.known(), "Shape ", to_string(s), " is not static");
    out.push_back(d.value);
  }
  return out;
}

}  // namespace ingot
