// The model zoo: ready blocks built from primitives. Every block has the canonical terminals
// "input" and "output" (losses: "input", "target", "output"), so `+=` chains them. Parameters are
// terminals too ("weight", "bias", "running_mean", ...), named hierarchically once added
// ("linear_0.weight"); their shapes come from inference, so input widths are never required.
//
//   Model m;
//   m += Conv2d(64, 3);  m += BatchNorm2d();  m += Relu();
//   m += GlobalAvgPool2d();  m += Linear(10);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ingot/model.h"

namespace ingot {

// y = x @ weight + bias; weight [in, out] (in inferred from the input's last dim), bias [out].
// Init: weight U(±1/sqrt(in)) (Init::fan_in(0)), bias zeros.
Model Linear(int64_t out_features, bool use_bias = true);
struct LinearOptions {
  int64_t out_features = 0;
  std::optional<int64_t> in_features;  // given: the input's last dim must be this (checked at compile)
  bool use_bias = true;
};
Model Linear(const LinearOptions& options);

struct Conv2dOptions {
  int64_t out_channels = 0;
  int64_t kernel_size = 3;  // square; use kernel_h/kernel_w for rectangles
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool use_bias = true;
  std::optional<int64_t> in_channels;  // inferred from the input when not given
  std::optional<int64_t> kernel_h, kernel_w;
};
// NCHW convolution; weight [out, in/groups, kh, kw], bias [out].
// Init: weight U(±1/sqrt(in/groups * kh * kw)) (Init::fan_in_all_but_first()), bias zeros.
Model Conv2d(const Conv2dOptions& options);
Model Conv2d(int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0);

// Per-channel (dim 1) normalization of [N, C, H, W]. Training: batch statistics (biased
// variance); inference (compile option `inference`): running_mean / running_var.
// Parameters: weight (ones), bias (zeros), running_mean (zeros), running_var (ones). The running
// statistics are plain parameters until the training issue makes them non-trainable state (and
// applies `momentum`); a training graph does not read them, so they are absent from it. To pass
// them as data, name them in the compile option `data_keys`.
Model BatchNorm2d(double eps = 1e-5, double momentum = 0.1);
struct BatchNorm2dOptions {
  std::optional<int64_t> num_features;  // given: the input's channel count must be this
  double eps = 1e-5, momentum = 0.1;
};
Model BatchNorm2d(const BatchNorm2dOptions& options);
// Normalizes over the last `normalized_dims` dims; weight (ones) / bias (zeros) of that shape
// when affine.
Model LayerNorm(int normalized_dims = 1, double eps = 1e-5, bool affine = true);
// x / sqrt(mean(x^2) + eps) over the last `normalized_dims` dims (the rms_norm op: one row
// kernel), times weight (ones) of that shape when affine. No centering and no bias (LLaMA, T5).
Model RMSNorm(int normalized_dims = 1, double eps = 1e-5, bool affine = true);
// PyTorch's form of both: the normalized trailing dims given by their sizes
// (LayerNorm(512): the last dim, of size 512, checked at compile), or by their count alone.
struct NormOptions {
  std::vector<int64_t> normalized_shape;  // non-empty: the trailing dims' sizes (their count follows)
  int normalized_dims = 1;                // used when normalized_shape is empty
  double eps = 1e-5;
  bool affine = true;
};
Model LayerNorm(const NormOptions& options);
Model RMSNorm(const NormOptions& options);

Model Relu();
Model Gelu(bool tanh_approximation = false);
Model Sigmoid();
Model Tanh();
Model Softmax(int64_t axis = -1);
Model LogSoftmax(int64_t axis = -1);
// Training: zeroes each element with probability p (seeded), scales the rest by 1/(1-p).
// Inference: identity.
Model Dropout(double p = 0.5, uint64_t seed = 0);

// ceil_mode: a last window past the padded end where the floor rule stops short (PyTorch's)
Model MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                bool ceil_mode = false);
Model AvgPool2d(int64_t kernel_size, std::optional<int64_t> stride = std::nullopt, int64_t padding = 0);
// [N, C, H, W] -> [N, C]
Model GlobalAvgPool2d();
// [N, d1, d2, ...] -> [N, d1*d2*...]
Model Flatten();
// weight [num_embeddings, dim], init N(0, 1); input: integer indices of any shape -> [..., dim].
// The input is int64 unless the compile option `types` says otherwise (e.g. int32).
Model Embedding(int64_t num_embeddings, int64_t dim);

// Two-input blocks: terminals "left", "right", "output".
Model Add();
Model Multiply();
// "input" -> "output" unchanged.
Model Identity();

// Collectives over the process group (include/ingot/distributed.h), "input" -> "output", built
// for the group's size when the block is made: every rank's input combined by `op` (sum | mean |
// max); concatenated along axis 0 in rank order; rank `root`'s on every rank; summed and split
// along axis 0 (rank r keeps part r). In a group of one each is the identity.
Model AllReduce(const std::string& op = "sum");
Model AllGather();
Model Broadcast(int64_t root = 0);
Model ReduceScatter();

// Linear layers of the given widths with `activation` ("relu", "gelu", "tanh", "sigmoid" or
// "none") between them (not after the last).
Model MLP(const std::vector<int64_t>& widths, const std::string& activation = "relu");

// Losses: terminals "input" (prediction), "target", "output" (a scalar).
// reduction: "mean" | "sum" | "none".
Model MSELoss(const std::string& reduction = "mean");
// `input` are logits [N, C]; `target` integer class indices [N] (int64, or int32 through the
// compile option `types`) or, with `one_hot_target`, probabilities [N, C] of the input's dtype.
// Integer targets pick their class with take_along_axis (no one-hot is built).
Model CrossEntropyLoss(const std::string& reduction = "mean", bool one_hot_target = false);
// Binary cross entropy. BCELoss: `input` are probabilities in [0, 1] (each log clamped at
// -100, as in PyTorch); BCEWithLogitsLoss: `input` are logits, computed stably as
// max(x, 0) - x t + log(1 + exp(-|x|)). `target` has the input's shape and dtype.
Model BCELoss(const std::string& reduction = "mean");
Model BCEWithLogitsLoss(const std::string& reduction = "mean");

// Metric: "input" logits [N, C], "target" integer classes [N] -> "output" float32 scalar, the
// fraction of rows whose argmax is the target (for TrainModel::add_metric).
Model ClassAccuracy();

// Transformer blocks. Attention is the scaled_dot_product_attention op (the CPU backend's fused
// kernel, forward and backward: no [S, S] scores in memory).
struct MultiHeadAttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  std::optional<int64_t> num_kv_heads;  // fewer key/value heads, dividing num_heads (grouped-query)
  bool causal = false;                  // query i sees keys 0..i
  bool masked = false;                  // adds a "mask" terminal: bool (true = attend) or float (added),
                                        // broadcast to [B, heads, S, S]
  bool use_bias = true;
};
// Self-attention over "input" [B, S, embed_dim] -> "output" [B, S, embed_dim]: Linear
// projections q_proj, k_proj, v_proj, heads of embed_dim / num_heads, softmax(q k^T /
// sqrt(head_dim) [+ mask]) v, then out_proj.
Model MultiHeadAttention(const MultiHeadAttentionOptions& options);
Model MultiHeadAttention(int64_t embed_dim, int64_t num_heads, bool causal = false);

struct TransformerEncoderLayerOptions {
  int64_t d_model = 0;
  int64_t num_heads = 1;
  int64_t ffn_dim = 0;
  std::optional<int64_t> num_kv_heads;
  bool causal = false;
  bool masked = false;               // a "mask" terminal, passed to the attention
  bool norm_first = false;           // pre-norm (GPT-2, LLaMA) instead of post-norm (BERT)
  bool rms_norm = false;             // RMSNorm instead of LayerNorm
  std::string activation = "gelu";  // "gelu" (erf), "gelu_tanh" or "relu"
  double eps = 1e-5;
};
// One encoder layer on [B, S, d_model]: self-attention ("self_attn") and a feed-forward
// linear1 -> activation -> linear2, each with a residual add and a norm ("norm1", "norm2");
// post-norm: norm(x + f(x)); pre-norm: x + f(norm(x)). No dropout.
Model TransformerEncoderLayer(const TransformerEncoderLayerOptions& options);

// Vision networks: torchvision's architectures (NCHW float32 images, batch norm without conv
// biases). Sub-blocks carry torchvision's module names ("conv1", "layer1.0.bn2",
// "features.3.conv.1.0"), so a torchvision state dict maps onto the parameters name for name
// (only Linear's weight is stored [in, out], the transpose of torch's [out, in]).
//
// min(max(x, 0), 6): MobileNet's clamped ReLU.
Model Relu6();
// ResNet's basic block: conv3x3(stride) bn relu conv3x3 bn, plus the input (through a strided
// 1x1 conv + bn, "downsample", when `downsample`), then relu. Input channels are inferred.
Model BasicBlock(int64_t planes, int64_t stride = 1, bool downsample = false);
// ResNet's bottleneck: conv1x1 bn relu, conv3x3(stride, groups) bn relu, conv1x1 (4 * planes)
// bn, plus the shortcut, relu. Width planes * base_width / 64 * groups (ResNeXt: groups > 1).
Model Bottleneck(int64_t planes, int64_t stride = 1, bool downsample = false, int64_t groups = 1,
                 int64_t base_width = 64);
// MobileNetV2's inverted residual: [1x1 expansion bn relu6] depthwise 3x3(stride) bn relu6,
// 1x1 projection bn; plus the input when stride is 1 and in_channels == out_channels.
Model InvertedResidual(int64_t in_channels, int64_t out_channels, int64_t stride, int64_t expand_ratio);
// [N, 3, H, W] -> [N, num_classes] logits (any H, W of at least 32).
Model ResNet18(int64_t num_classes = 1000);
Model ResNet50(int64_t num_classes = 1000);
Model MobileNetV2(int64_t num_classes = 1000, double width_mult = 1.0);

// Recurrent layers (src/models/zoo_recurrent.cpp), torch.nn.LSTM / GRU / RNN's equations,
// options and parameter names and layout (weight_ih_l0 [G*H, input_size], weight_hh_l0
// [G*H, H], bias_ih_l0, bias_hh_l0, "_reverse" for the second direction; G = 4 for LSTM with
// gates i, f, g, o, 3 for GRU with r, z, n, 1 for RNN), so a PyTorch state dict loads as is. Each
// layer and direction is a Scan block (include/ingot/control_blocks.h) whose body holds one
// step's recurrent matmul and gates; the input's matmul over all time steps runs before it.
// Terminals: input [T, N, input_size] ([N, T, input_size] with batch_first), output
// [T, N, D * H] (D = 2 when bidirectional), h_n [num_layers * D, N, H] (and c_n for LSTM).
// The initial states are zeros.
struct RecurrentOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  bool bidirectional = false;
  std::string nonlinearity = "tanh";  // RNN: tanh | relu
};
Model LSTM(const RecurrentOptions& o);
Model GRU(const RecurrentOptions& o);
Model RNN(const RecurrentOptions& o);

// The bundled example networks used by the demo and tests.
// CNN: Conv2d(64, k3) -> BatchNorm2d -> Relu -> Conv2d(128, k3) -> GlobalAvgPool2d -> Linear(10)
Model ExampleCNN(int64_t num_classes = 10);
// MLP 784 -> 256 -> 10 with relu.
Model ExampleMLP();

// A bundled model by name: "cnn" or "mlp" (throws listing the names otherwise).
Model example_model(const std::string& name);
std::vector<std::string> example_model_names();

}  // namespace ingot
