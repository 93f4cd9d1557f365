// Lists of names in the training API: membership, and the form error messages list them in
// ("inputs: input, target").
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace ingot::train {

inline bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// "a, b, c", or "none" for an empty list.
inline std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? std::string("none") : s;
}

}  // namespace ingot::train
