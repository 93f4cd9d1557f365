#!/usr/bin/env python3
"""The exporter's side of bench/onnx_models.py: real architectures exported to ONNX by PyTorch
(torch.onnx.export, opset 17, random weights: nothing is downloaded) and run by ONNX Runtime.

For each model it writes <out>/<name>.onnx, <name>.npz (the input and ONNX Runtime's outputs)
and ONNX Runtime's time (its own loop after a warm-up, 2 threads) into <out>/ort.json.
Models: torchvision's ResNet-18, MobileNetV2 and ResNet-50 (batch 1, 3x224x224, non-trivial
batch-norm statistics) and a transformer encoder block (pre-norm, attention and GELU MLP
written out: d_model 256, 4 heads, feed-forward 1024, batch 1, sequence 128), and BERT-base's
encoder and GPT-2 small's causal block stack (12 layers each, d_model 768, sequence 128; see
transformer_stack).

  python bench/onnx_export.py --out DIR [--models resnet18,...,gpt2_small] [--reps 5]
"""
import argparse
import json
import os
import sys

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, measured_utc, timed  # noqa: E402
from vision_torch import build  # noqa: E402


def transformer_block(torch):
    """A pre-norm transformer encoder block written out as exporters see Hugging Face models:
    one QKV projection, reshapes and permutes taken from x.shape (Shape/Gather arithmetic in
    the ONNX graph), softmax attention, GELU feed-forward, residual adds."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, d=256, heads=4, ff=1024):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            b, t, c = x.shape
            qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = torch.softmax(q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    return Block().eval()


def transformer_stack(torch, causal):
    """BERT-base's encoder (post-norm layers, d_model 768, 12 heads, feed-forward 3072, GELU,
    12 layers) or GPT-2 small's block stack (pre-norm, causal attention through a lower
    triangular mask, the same sizes, a final layer norm), on embeddings [1, 128, 768] (the token
    embedding table is a gather in front of these, left out so the input is float)."""
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self, d=768, heads=12, ff=3072, t=128):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.register_buffer("mask", torch.tril(torch.ones(t, t, dtype=torch.bool)))

        def attention(self, x):
            b, t, c = x.shape
            qkv = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5
            if causal:
                s = s.masked_fill(~self.mask[:t, :t], float("-inf"))
            return self.proj((torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, c))

        def mlp(self, x):
            return self.fc2(torch.nn.functional.gelu(self.fc1(x), approximate="tanh" if causal else "none"))

        def forward(self, x):
            if causal:  # GPT-2: pre-norm
                x = x + self.attention(self.ln1(x))
                return x + self.mlp(self.ln2(x))
            x = self.ln1(x + self.attention(x))  # BERT: post-norm
            return self.ln2(x + self.mlp(x))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer() for _ in range(12)])
            self.ln_f = nn.LayerNorm(768) if causal else nn.Identity()

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.ln_f(x)

    return Stack().eval()


def make(name, torch, torchvision):
    if name in ("bert_base", "gpt2_small"):
        torch.manual_seed(0)
        x = np.random.default_rng(0).standard_normal((1, 128, 768)).astype(np.float32)
        return transformer_stack(torch, causal=name == "gpt2_small"), x
    if name == "transformer":
        torch.manual_seed(0)
        x = np.random.default_rng(0).standard_normal((1, 128, 256)).astype(np.float32)
        return transformer_block(torch), x
    model = build(name, torch, torchvision)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    return model, x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,resnet50,transformer,bert_base,gpt2_small")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import onnxruntime as ort
    import torch
    import torchvision
    torch.set_num_threads(THREADS)
    result = {"machine": cpu_model(), "measured_utc": measured_utc(), "threads": THREADS,
              "versions": {"torch": torch.__version__, "onnxruntime": ort.__version__}, "models": {}}
    for name in args.models.split(","):
        model, x = make(name, torch, torchvision)
        path = os.path.join(args.out, f"{name}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["input"], output_names=["output"],
                              opset_version=17, dynamo=False)
            want_torch = model(torch.from_numpy(x)).numpy()
        so = ort.SessionOptions()
        so.intra_op_num_threads = THREADS
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input": x})[0]
        np.savez(os.path.join(args.out, f"{name}.npz"), input=x, ort=got, torch=want_torch)
        result["models"][name] = {"shape": list(x.shape), "onnxruntime": timed(lambda: sess.run(None, {"input": x}), args.reps)}
        print(name, json.dumps(result["models"][name]), flush=True)
    with open(os.path.join(args.out, "ort.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
