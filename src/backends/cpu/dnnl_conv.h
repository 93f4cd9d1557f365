// conv2d through oneDNN (Debian libdnnl-dev), run by the host on behalf of the generated code.
//
// A DnnlConv is built once per concrete shape: at load for static shapes, on the first call with
// new input shapes otherwise. It holds the convolution primitive (channels-last src/dst,
// weights in the library's preferred blocked layout, bias and an optional relu post-op) and the
// reorders between the caller's layouts and the primitive's. `run` is safe to call from several
// threads at once: temporaries (weight reorder, scratchpad, layout conversions) are per call.
//
// Without oneDNN at build time, dnnl_available() is false and the code generator keeps its own
// im2col + GEMM convolution.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ingot::cpu {

bool dnnl_available();

struct ConvSpec {
  int64_t n = 0, cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool has_bias = false;
  bool src_nhwc = false;  // the caller's x is stored channels-last (else NCHW)
  bool dst_nhwc = false;  // the caller wants y channels-last (else NCHW)
  bool relu = false;      // relu post-op on the result
};

class DnnlConv {
 public:
  explicit DnnlConv(const ConvSpec& spec);  // throws ingot::Error when oneDNN cannot run it
  ~DnnlConv();
  // x, w ([cout, cin/groups, kh, kw]), b ([cout] or null), y: float32. Throws ingot::Error.
  void run(const float* x, const float* w, const float* b, float* y) const;
  const std::string& implementation() const;  // oneDNN's name for the kernel it chose

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::cpu
