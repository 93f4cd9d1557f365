// Lists of names in the training API's error messages ("inputs: input, target").
#pragma once

#include <string>
#include <vector>

namespace ingot::train {

// "a, b, c", or "none" for an empty list.
inline std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? std::string("none") : s;
}

}  // namespace ingot::train
