"""ingot: a compiler for machine-learning models, from Python.

    import ingot as ml
    model = ml.Model()
    model |= ml.Conv2d(3, 64, kernel_size=3)
    model += ml.Relu()
    model += ml.GlobalAvgPool2d()
    model += ml.Linear(dimension=10)(output=ml.IOKey("logits", expose=True))
    pm = ml.compile(model, ml.CpuBackend(), shapes={"input": [None, 3, 32, 32]}, jit=True)
    params = pm.randomize_params()
    outputs = pm.evaluate(params, {"input": x})          # NumPy arrays in and out, no copies

Backends: ``CpuBackend`` (native fused code), ``ReferenceBackend`` (the oracle), and the framework
emitters ``NumpyBackend``, ``TorchBackend``, ``JaxBackend`` (generated Python source).
"""
from __future__ import annotations

from ._ingot import (  # noqa: F401 - re-exported API
    IOKey,
    IngotError,
    AvgPool2d,
    BatchNorm2d,
    BlockCall,
    Connection,
    Conv2d,
    CpuBackend,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    ExampleCNN,
    ExampleMLP,
    Flatten,
    Gelu,
    GlobalAvgPool2d,
    Identity,
    LayerNorm,
    Linear,
    LogSoftmax,
    MaxPool2d,
    MLP,
    Model,
    MSELoss,
    Multiply,
    ReferenceBackend,
    Relu,
    Sigmoid,
    Softmax,
    Tanh,
    Add,
    apply,
    compile_option_names,
)
from ._backends import JaxBackend, NumpyBackend, TorchBackend
from ._compile import PhysicalModel, compile
from ._profile import Profile, profile

__version__ = "0.1.0"

__all__ = [
    "Add", "AvgPool2d", "BatchNorm2d", "BlockCall", "Connection", "Conv2d", "CpuBackend", "CrossEntropyLoss",
    "Dropout", "Embedding", "ExampleCNN", "ExampleMLP", "Flatten", "Gelu", "GlobalAvgPool2d", "IOKey", "Identity",
    "IngotError", "JaxBackend", "LayerNorm", "Linear", "LogSoftmax", "MLP", "MSELoss", "MaxPool2d", "Model",
    "Multiply", "NumpyBackend", "PhysicalModel", "Profile", "ReferenceBackend", "Relu", "Sigmoid", "Softmax", "Tanh",
    "TorchBackend", "apply", "compile", "compile_option_names", "profile",
]
