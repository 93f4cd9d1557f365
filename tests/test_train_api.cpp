// The training API's contracts beyond the numerics of test_train.cpp: add_loss's reduction,
// run-time hyperparameters of a compiled step, which parameters get optimizer slots, and the
// errors a user can cause with batches, metrics and evaluate_loss.
#include <gtest/gtest.h>

#include <cmath>

#include "autodiff_test_util.h"
#include "ingot/cpu_backend.h"
#include "ingot/ingot.h"

namespace ingot::testing {
namespace {

// ---------------------------------------------------------------- add_loss's reduction

// y = Linear(2)(input) [3, 2] against a target t [3, 2], in float64 on the reference backend.
struct LinearFit {
  Model model;
  CompileOptions options;
  TensorMap inputs;
  LinearFit() {
    model += Linear(2)({{"input", IOKey("input").shape({3, 2})}, {"output", IOKey("y").expose()}});
    options.shapes = {{"t", {3, 2}}};
    options.types = {{"input", DType::Float64}, {"linear_0.weight", DType::Float64},
                     {"linear_0.bias", DType::Float64}, {"t", DType::Float64}};
    inputs = {{"input", rnd({3, 2}, 1)}, {"t", rnd({3, 2}, 2)}};
  }
  // Evaluates final_cost of the model with one loss; also returns sum((y - t)^2) by hand.
  std::pair<double, double> cost_and_sum_of_squares(const Model& loss, const std::string& reduction) const {
    TrainModel tm(model);
    tm.add_loss(loss, {{"input", "y"}, {"target", "t"}}, reduction, 1.0, "mse");
    const PhysicalModel pm = compile(tm, ReferenceBackend(), options);
    const TensorMap out = pm.evaluate(pm.randomize_params(0), inputs);
    const Tensor &y = out.at("y"), &t = inputs.at("t");
    double squares = 0;
    for (int64_t i = 0; i < y.numel(); ++i) squares += (y.item(i) - t.item(i)) * (y.item(i) - t.item(i));
    EXPECT_DOUBLE_EQ(out.at("mse").item(), out.at(kFinalCost).item());
    return {out.at(kFinalCost).item(), squares};
  }
};

TEST(TrainAddLoss, ReducesPerElementLossesAsAsked) {
  const LinearFit fit;
  auto [mean_cost, squares] = fit.cost_and_sum_of_squares(MSELoss("none"), "mean");
  EXPECT_NEAR(mean_cost, squares / 6, 1e-12);
  auto [sum_cost, squares2] = fit.cost_and_sum_of_squares(MSELoss("none"), "sum");
  EXPECT_NEAR(sum_cost, squares2, 1e-12);
}

TEST(TrainAddLoss, ABlockThatReducesItselfMustAgreeWithTheReductionAsked) {
  const LinearFit fit;
  auto [mean_cost, squares] = fit.cost_and_sum_of_squares(MSELoss("mean"), "mean");
  EXPECT_NEAR(mean_cost, squares / 6, 1e-12);
  auto [sum_cost, squares2] = fit.cost_and_sum_of_squares(MSELoss("sum"), "sum");
  EXPECT_NEAR(sum_cost, squares2, 1e-12);
  // Before, add_loss ignored its reduction here and returned the block's mean as the sum.
  EXPECT_TRUE(Contains(error_of([&] { fit.cost_and_sum_of_squares(MSELoss("mean"), "sum"); }),
                       "add_loss 'mse': MSELoss already reduces its output by 'mean' but the reduction asked is "
                       "'sum'; build the loss with reduction \"none\""));
  EXPECT_TRUE(Contains(error_of([&] { fit.cost_and_sum_of_squares(MSELoss("sum"), "mean"); }),
                       "already reduces its output by 'sum' but the reduction asked is 'mean'"));
  // The total cost is a scalar: add_loss has no "none".
  EXPECT_TRUE(Contains(error_of([&] { fit.cost_and_sum_of_squares(MSELoss("none"), "none"); }),
                       "unknown reduction 'none' (expected mean or sum"));
}

}  // namespace
}  // namespace ingot::testing
