// Vision networks of the zoo (include/ingot/models.h): torchvision's ResNet-18/50 and
// MobileNetV2 and the blocks they are made of. Sub-blocks carry torchvision's module names
// ("conv1", "bn1", "layer1.0.conv2", "features.3.conv.1.0"), so a torchvision state dict maps onto
// the parameters name for name (Linear's weight is [in, out], the transpose of torch's).
#include <algorithm>
#include <string>
#include <vector>

#include "ingot/error.h"
#include "ingot/models.h"
#include "models/zoo_util.h"

namespace ingot {

using zoo::add_op;
using zoo::block;
using zoo::then;

namespace {

// A "same"-padded conv without bias (batch norm follows), as torchvision's.
Model conv(int64_t out, int64_t kernel, int64_t stride, int64_t groups = 1) {
  Conv2dOptions o;
  o.out_channels = out;
  o.kernel_size = kernel;
  o.stride = stride;
  o.padding = (kernel - 1) / 2;
  o.groups = groups;
  o.use_bias = false;
  return Conv2d(o);
}

// Conv (no bias), BatchNorm2d and an activation ("relu", "relu6" or "none"), as torchvision's
// Conv2dNormActivation: sub-blocks "0" (conv) and "1" (batch norm).
Model conv_bn(int64_t out, int64_t kernel, int64_t stride, int64_t groups, const std::string& activation) {
  Model m = block("ConvBnAct");
  Connection y = then(m, BatchNorm2d(), then(m, conv(out, kernel, stride, groups), m.input("input"), "0"), "1");
  if (activation == "relu") y = then(m, Relu(), y, "act");
  else if (activation == "relu6") y = then(m, Relu6(), y, "act");
  m.set_cout(y);
  return m;
}

void check_positive(const char* block_name, const char* what, int64_t v) {
  INGOT_CHECK(v > 0, block_name, ": ", what, " must be positive, got ", v);
}

}  // namespace

Model Relu6() {
  Model m = block("Relu6");
  m.set_cout(add_op(m, "minimum", {{"left", apply("relu", m.input("input"))}, {"right", IOKey(6.0)}}));
  return m;
}

Model BasicBlock(int64_t planes, int64_t stride, bool downsample) {
  check_positive("BasicBlock", "planes", planes);
  check_positive("BasicBlock", "stride", stride);
  Model m = block("BasicBlock");
  const Connection x = m.input("input");
  Connection y = then(m, Relu(), then(m, BatchNorm2d(), then(m, conv(planes, 3, stride), x, "conv1"), "bn1"), "relu1");
  y = then(m, BatchNorm2d(), then(m, conv(planes, 3, 1), y, "conv2"), "bn2");
  const Connection shortcut = downsample ? then(m, conv_bn(planes, 1, stride, 1, "none"), x, "downsample") : x;
  m.set_cout(then(m, Relu(), y + shortcut, "relu2"));
  return m;
}

Model Bottleneck(int64_t planes, int64_t stride, bool downsample, int64_t groups, int64_t base_width) {
  check_positive("Bottleneck", "planes", planes);
  check_positive("Bottleneck", "stride", stride);
  check_positive("Bottleneck", "groups", groups);
  const int64_t width = planes * base_width / 64 * groups;
  INGOT_CHECK(width > 0 && width % groups == 0, "Bottleneck: width ", width, " must be a positive multiple of groups ",
              groups);
  Model m = block("Bottleneck");
  const Connection x = m.input("input");
  Connection y = then(m, Relu(), then(m, BatchNorm2d(), then(m, conv(width, 1, 1), x, "conv1"), "bn1"), "relu1");
  y = then(m, Relu(), then(m, BatchNorm2d(), then(m, conv(width, 3, stride, groups), y, "conv2"), "bn2"), "relu2");
  y = then(m, BatchNorm2d(), then(m, conv(planes * 4, 1, 1), y, "conv3"), "bn3");
  const Connection shortcut = downsample ? then(m, conv_bn(planes * 4, 1, stride, 1, "none"), x, "downsample") : x;
  m.set_cout(then(m, Relu(), y + shortcut, "relu3"));
  return m;
}

Model InvertedResidual(int64_t in_channels, int64_t out_channels, int64_t stride, int64_t expand_ratio) {
  check_positive("InvertedResidual", "in_channels", in_channels);
  check_positive("InvertedResidual", "out_channels", out_channels);
  check_positive("InvertedResidual", "expand_ratio", expand_ratio);
  INGOT_CHECK(stride == 1 || stride == 2, "InvertedResidual: stride must be 1 or 2, got ", stride);
  Model m = block("InvertedResidual");
  const Connection x = m.input("input");
  const int64_t hidden = in_channels * expand_ratio;
  // torchvision's module "conv": [expand 1x1] -> depthwise 3x3 -> project 1x1 -> batch norm.
  Model body = block("Sequential");
  Connection y = body.input("input");
  int k = 0;
  if (expand_ratio != 1) y = then(body, conv_bn(hidden, 1, 1, 1, "relu6"), y, std::to_string(k++));
  y = then(body, conv_bn(hidden, 3, stride, hidden, "relu6"), y, std::to_string(k++));
  y = then(body, conv(out_channels, 1, 1), y, std::to_string(k++));
  body.set_cout(then(body, BatchNorm2d(), y, std::to_string(k)));
  y = then(m, body, x, "conv");
  m.set_cout(stride == 1 && in_channels == out_channels ? y + x : y);
  return m;
}

namespace {

// torchvision's ResNet: stem, four stages ("layer1".."layer4") of `blocks[i]` blocks, pooling, fc.
Model resnet(const std::string& type, bool bottleneck, const std::vector<int>& blocks, int64_t num_classes) {
  check_positive(type.c_str(), "num_classes", num_classes);
  Model m = block(type);
  Connection y = then(m, Relu(), then(m, BatchNorm2d(), then(m, conv(64, 7, 2), m.input("input"), "conv1"), "bn1"), "relu");
  y = then(m, MaxPool2d(3, 2, 1), y, "maxpool");
  const int64_t expansion = bottleneck ? 4 : 1;
  int64_t channels = 64;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int64_t planes = int64_t{64} << stage;
    Model layer = block("Sequential");
    Connection z = layer.input("input");
    for (int b = 0; b < blocks[stage]; ++b) {
      const int64_t stride = b == 0 && stage > 0 ? 2 : 1;
      const bool downsample = b == 0 && (stride != 1 || channels != planes * expansion);
      z = then(layer, bottleneck ? Bottleneck(planes, stride, downsample) : BasicBlock(planes, stride, downsample), z,
               std::to_string(b));
      channels = planes * expansion;
    }
    layer.set_cout(z);
    y = then(m, layer, y, "layer" + std::to_string(stage + 1));
  }
  y = then(m, GlobalAvgPool2d(), y, "avgpool");
  m.set_cout(then(m, Linear(num_classes), y, "fc"));
  return m;
}

}  // namespace

Model ResNet18(int64_t num_classes) { return resnet("ResNet18", false, {2, 2, 2, 2}, num_classes); }
Model ResNet50(int64_t num_classes) { return resnet("ResNet50", true, {3, 4, 6, 3}, num_classes); }

Model MobileNetV2(int64_t num_classes, double width_mult) {
  check_positive("MobileNetV2", "num_classes", num_classes);
  INGOT_CHECK(width_mult > 0, "MobileNetV2: width_mult must be positive, got ", width_mult);
  // torchvision's _make_divisible: round to a multiple of 8, never down by more than 10%.
  auto divisible = [](double v) {
    int64_t r = std::max<int64_t>(8, static_cast<int64_t>(v + 4) / 8 * 8);
    if (static_cast<double>(r) < 0.9 * v) r += 8;
    return r;
  };
  // expand ratio t, channels c, repeats n, first stride s
  const int64_t settings[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  Model m = block("MobileNetV2");
  Model features = block("Sequential");
  int64_t channels = divisible(32 * width_mult);
  const int64_t last = divisible(1280 * std::max(1.0, width_mult));
  Connection y = then(features, conv_bn(channels, 3, 2, 1, "relu6"), features.input("input"), "0");
  int index = 1;
  for (const auto& s : settings) {
    const int64_t out = divisible(static_cast<double>(s[1]) * width_mult);
    for (int64_t i = 0; i < s[2]; ++i) {
      y = then(features, InvertedResidual(channels, out, i == 0 ? s[3] : 1, s[0]), y, std::to_string(index++));
      channels = out;
    }
  }
  features.set_cout(then(features, conv_bn(last, 1, 1, 1, "relu6"), y, std::to_string(index)));
  y = then(m, GlobalAvgPool2d(), then(m, features, m.input("input"), "features"), "avgpool");
  Model classifier = block("Sequential");
  classifier.set_cout(then(classifier, Linear(num_classes), then(classifier, Dropout(0.2), classifier.input("input"), "0"), "1"));
  m.set_cout(then(m, classifier, y, "classifier"));
  return m;
}

}  // namespace ingot
