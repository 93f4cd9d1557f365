// `ingot demo`'s training part (tools/train_demo.h) holds to what the README says: with its fixed
// seeds, the bundled MLP and CNN reach at least 99% held-out accuracy, measured in inference mode.
#include <gtest/gtest.h>

#include <sstream>

#include "../tools/train_demo.h"

namespace ingot::testing {
namespace {

TEST(TrainDemo, BundledModelsReachTheStatedAccuracy) {
  std::ostringstream log;
  const demo::DemoAccuracy a = demo::train_bundled_models(CpuBackend(), log);
  EXPECT_GE(a.mlp, 0.99) << log.str();
  EXPECT_GE(a.cnn, 0.99) << log.str();
  EXPECT_NE(log.str().find("held-out samples (inference mode)"), std::string::npos);
}

}  // namespace
}  // namespace ingot::testing
