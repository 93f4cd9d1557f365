#include "backends/cpu/codegen_reduce.h"

#include <sstream>

namespace ingot::cpu {

std::optional<std::vector<bool>> reduced_axes(const Node& n, int rank) {
  const std::vector<int64_t> axes = n.attrs.get_ints("axes", {});
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    const auto i = static_cast<size_t>(a < 0 ? a + rank : a);
    if (reduced[i]) return std::nullopt;
    reduced[i] = true;
  }
  return reduced;
}

namespace {

// The input's dims as blocks for the prelude's *_axes kernels: size-1 dims dropped, neighbours of
// one kind (reduced or kept) merged (fewer, longer runs); declares count, outputs, size[] and
// reduced[] in the kernel body.
std::string blocks(const std::vector<std::string>& dims, const std::vector<bool>& reduced, size_t* nb) {
  std::vector<std::string> sizes;
  std::vector<bool> kinds;
  std::string count = "1", outputs = "1";
  for (size_t d = 0; d < dims.size(); ++d) {
    (reduced[d] ? count : outputs) += " * " + dims[d];
    if (dims[d] == "1") continue;
    if (!kinds.empty() && kinds.back() == reduced[d]) {
      sizes.back() += " * " + dims[d];
    } else {
      sizes.push_back(dims[d]);
      kinds.push_back(reduced[d]);
    }
  }
  std::ostringstream k;
  k << "  const int64_t count = " << count << ", outputs = " << outputs << ";\n";
  k << "  const int64_t size[] = {";
  for (size_t b = 0; b < sizes.size(); ++b) k << (b ? ", " : "") << "(" << sizes[b] << ")";
  k << (sizes.empty() ? "0" : "") << "};\n  const bool reduced[] = {";
  for (size_t b = 0; b < kinds.size(); ++b) k << (b ? ", " : "") << (kinds[b] ? "true" : "false");
  k << (kinds.empty() ? "false" : "") << "};\n";
  *nb = sizes.size();
  return k.str();
}

}  // namespace

std::string reduce_axes_body(int kind, const std::string& op, const std::string& tx, const std::string& ty,
                             const std::vector<std::string>& dims, const std::vector<bool>& reduced) {
  size_t nb = 0;
  std::ostringstream k;
  k << blocks(dims, reduced, &nb);
  if (kind >= 2)
    k << "  if (count == 0 && outputs > 0) return ig_fail(ctx, \"" << op
      << ": cannot reduce over a zero-size dimension (no identity)\");\n";
  k << "  if (outputs > 0) ig_reduce_axes<" << kind << ", " << tx << ", " << ty << ">(x0, y, " << nb
    << ", size, reduced, count);\n";
  return k.str();
}

std::string moments_axes_body(const std::vector<std::string>& dims, const std::vector<bool>& reduced) {
  size_t nb = 0;
  std::ostringstream k;
  k << blocks(dims, reduced, &nb);
  k << "  if (outputs > 0) ig_moments_axes(x0, y, y1, " << nb << ", size, reduced, count);\n";
  return k.str();
}

}  // namespace ingot::cpu
