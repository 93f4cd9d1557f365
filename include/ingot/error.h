// The one exception type ingot throws for anything a user can cause.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ingot {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws ingot::Error with the streamed message when `cond` is false.
#define INGOT_CHECK(cond, ...)                                   \
  do {                                                           \
    if (!(cond)) throw ::ingot::Error(::ingot::detail::concat(__VA_ARGS__)); \
  } while (0)

#define INGOT_FAIL(...) throw ::ingot::Error(::ingot::detail::concat(__VA_ARGS__))

}  // namespace ingot
