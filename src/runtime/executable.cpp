// The default Executable::run_into: run, then write each result into the tensor given for it.
#include "ingot/compile.h"
#include "ingot/error.h"
#include "runtime/write_back.h"

namespace ingot {

void Executable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) const {
  std::vector<Tensor> results = run(inputs);
  INGOT_CHECK(outputs.size() == results.size(), "run_into: expected ", results.size(), " output tensors, got ",
              outputs.size());
  for (size_t j = 0; j < results.size(); ++j) {
    if (outputs[j].defined()) write_back(outputs[j], results[j]);
    else outputs[j] = std::move(results[j]);
  }
}

}  // namespace ingot
