#!/usr/bin/env python3
"""The exporter's side of bench/onnx_models.py: real architectures exported to ONNX by PyTorch
(torch.onnx.export, opset 17, random weights: nothing is downloaded) and run by ONNX Runtime.

For each model and batch size (`--configs NAME@BATCH,...`) it writes <out>/<key>.onnx and
<key>.npz (the input, ONNX Runtime's and PyTorch's outputs; <key> is the name, with _b<batch>
past batch 1) and into <out>/ort.json the times of ONNX Runtime, PyTorch eager and
torch.compile (each in its own loop after a warm-up, 2 threads; torch.compile's first call,
which compiles, timed apart). Models: torchvision's ResNet-18, MobileNetV2 and ResNet-50
(3x224x224, non-trivial batch-norm statistics), a transformer encoder block (pre-norm, attention
and GELU MLP written out: d_model 256, 4 heads, feed-forward 1024, sequence 128), and BERT-base's
encoder and GPT-2 small's causal block stack (12 layers each, d_model 768, sequence 128; see
transformer_stack).

  python bench/onnx_export.py --out DIR [--configs resnet50@1,resnet50@32,...] [--reps 5] [--no-torch-compile]
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
from machine import cpu_model, measured_utc, ort_session, timed  # noqa: E402
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


# The table: ResNet-50 and MobileNetV2 at batch 1 and 32, BERT-base at 1 and 8; the
# other models at batch 1.
CONFIGS = ("resnet18@1,mobilenet_v2@1,mobilenet_v2@32,resnet50@1,resnet50@32,transformer@1,"
           "bert_base@1,bert_base@8,gpt2_small@1")


def make(name, torch, torchvision, batch=1):
    if name in ("bert_base", "gpt2_small"):
        torch.manual_seed(0)
        x = np.random.default_rng(0).standard_normal((batch, 128, 768)).astype(np.float32)
        return transformer_stack(torch, causal=name == "gpt2_small"), x
    if name == "transformer":
        torch.manual_seed(0)
        x = np.random.default_rng(0).standard_normal((batch, 128, 256)).astype(np.float32)
        return transformer_block(torch), x
    model = build(name, torch, torchvision)
    x = np.random.default_rng(1).uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)
    return model, x


def config_key(name, batch):
    return name if batch == 1 else f"{name}_b{batch}"


def torch_compile_times(torch, model, xt, reps):
    """torch.compile's first call (it compiles: seconds) and then its own timing loop."""
    import time

    compiled = torch.compile(model)
    with torch.no_grad():
        t = time.perf_counter()
        compiled(xt)
        first = time.perf_counter() - t
        row = timed(lambda: compiled(xt), reps)
    row["first_call_s"] = first
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs", default=CONFIGS, help="NAME@BATCH,... (the batch defaults to 1)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile (minutes per model)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import onnxruntime as ort
    import torch
    import torchvision
    torch.set_num_threads(THREADS)
    result = {"machine": cpu_model(), "measured_utc": measured_utc(), "threads": THREADS,
              "versions": {"torch": torch.__version__, "onnxruntime": ort.__version__}, "models": {}}
    for config in args.configs.split(","):
        name, _, b = config.partition("@")
        batch = int(b or 1)
        key = config_key(name, batch)
        model, x = make(name, torch, torchvision, batch)
        path = os.path.join(args.out, f"{key}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["input"], output_names=["output"],
                              opset_version=17, dynamo=False)
            want_torch = model(torch.from_numpy(x)).numpy()
        sess = ort_session(ort, path, THREADS)
        got = sess.run(None, {"input": x})[0]
        np.savez(os.path.join(args.out, f"{key}.npz"), input=x, ort=got, torch=want_torch)
        row = {"model": name, "batch": batch, "shape": list(x.shape),
               "onnxruntime": timed(lambda: sess.run(None, {"input": x}), args.reps)}
        del sess
        xt = torch.from_numpy(x)
        with torch.no_grad():
            row["torch_eager"] = timed(lambda: model(xt), args.reps)
        if not args.no_torch_compile:
            row["torch_compile"] = torch_compile_times(torch, model, xt, args.reps)
        result["models"][key] = row
        print(key, json.dumps(row), flush=True)
    with open(os.path.join(args.out, "ort.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
