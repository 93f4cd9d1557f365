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

Lazy arrays and function compile (MLX-style)::

    x = ml.array(np.random.rand(4, 8).astype(np.float32))
    gelu = ml.compile(lambda x: x * (1 + ml.erf(x / 2 ** 0.5)) / 2)   # traced, fused, built natively
    y = np.asarray(gelu(x))

Backends: ``CpuBackend`` (native fused code), ``ReferenceBackend`` (the oracle), and the framework
emitters ``NumpyBackend``, ``TorchBackend``, ``JaxBackend``, ``MlxBackend`` (generated Python source).
"""
from __future__ import annotations

from ._ingot import (  # noqa: F401 - re-exported API
    IOKey,
    IngotError,
    AvgPool2d,
    BasicBlock,
    BatchNorm2d,
    BlockCall,
    Bottleneck,
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
    If,
    InvertedResidual,
    LayerNorm,
    GRU,
    Linear,
    LogSoftmax,
    LSTM,
    MaxPool2d,
    MLP,
    MobileNetV2,
    Model,
    MSELoss,
    MultiHeadAttention,
    Multiply,
    ReferenceBackend,
    RMSNorm,
    RNN,
    Relu,
    Relu6,
    ResNet18,
    ResNet50,
    Scan,
    Sigmoid,
    Softmax,
    Tanh,
    TransformerEncoderLayer,
    While,
    Add,
    apply,
    op_names,
)
# Lazy arrays and their ops: lowercase names (ml.relu, ml.softmax) are functions on ml.arrays;
# CamelCase names (ml.Relu, ml.Softmax) are blocks for logical models.
from ._ingot import (  # noqa: F401 - re-exported API
    abs,
    add,
    arange,
    argmax,
    array,
    asarray,
    astype,
    auto_compile_stats,
    broadcast_to,
    ceil,
    compile_config,
    compile_count,
    compile_region,
    concatenate,
    conv2d,
    cos,
    disable_compile,
    divide,
    dropout,
    enable_compile,
    equal,
    erf,
    exp,
    floor,
    fmod,
    full,
    gelu,
    greater,
    greater_equal,
    gru,
    layer_norm,
    rms_norm,
    less,
    less_equal,
    log,
    log_softmax,
    lstm,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    min,
    minimum,
    mod,
    moments,
    multiply,
    negative,
    not_equal,
    one_hot,
    ones,
    op,
    power,
    relu,
    reset_auto_compile,
    reset_compile_config,
    reshape,
    rnn,
    rsqrt,
    scaled_dot_product_attention,
    set_compile_config,
    sigmoid,
    sign,
    sin,
    softmax,
    sqrt,
    square,
    subtract,
    sum,
    take,
    take_along_axis,
    tanh,
    top_k,
    transpose,
    wait_for_background_compiles,
    where,
    zeros,
)
from . import random
from ._ingot import onnx  # ml.onnx.load(path_or_bytes): ONNX import
from ._ingot import distributed  # ml.distributed: rank(), size(), all_sum(x), ... on MPI
from ._backends import JaxBackend, MlxBackend, NumpyBackend, TorchBackend
from ._compile import PhysicalModel, compile, compile_option_names
from ._control_flow import cond, scan, while_loop
from ._dtypes import DType, bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8  # noqa: F401
from ._dtypes import bool  # noqa: F401,A004 - ml.bool, as MLX and NumPy name it
from ._function_compile import CompiledFunction, eval, grad, value_and_grad, vjp
from ._profile import Profile, profile
from ._ingot import SGD, Adam, AdamW, ClassAccuracy, OptimizerState, TrainModel  # noqa: F401
from ._ingot import AllGather, AllReduce, Broadcast, ReduceScatter  # noqa: F401
from ._train import TrainStep, compile_train_step
from . import signal  # noqa: E402 - ml.signal.context(name), configured by INGOT_CONFIG

__version__ = "0.1.0"

_ARRAY_API = [
    "DType", "bfloat16", "bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
    "abs", "add", "arange", "argmax", "array", "asarray", "astype", "auto_compile_stats", "broadcast_to", "ceil",
    "CompiledFunction", "compile_config", "compile_count", "compile_region", "concatenate", "cond", "conv2d", "cos",
    "disable_compile", "divide", "dropout", "enable_compile", "equal", "erf", "eval", "exp", "floor", "fmod", "full", "gelu",
    "grad", "greater", "greater_equal", "gru", "layer_norm", "less", "less_equal", "log", "log_softmax", "lstm", "matmul", "max",
    "max_pool2d", "maximum", "mean", "min", "minimum", "mod", "moments", "multiply", "negative", "not_equal", "one_hot",
    "ones", "op", "power", "random", "relu", "reset_auto_compile", "reset_compile_config", "reshape", "rms_norm", "rnn", "rsqrt",
    "scaled_dot_product_attention", "scan", "set_compile_config", "sigmoid", "sign", "sin", "softmax", "sqrt", "square", "subtract", "sum", "take",
    "take_along_axis", "tanh", "top_k", "transpose", "value_and_grad", "vjp", "wait_for_background_compiles", "where", "while_loop", "zeros",
]
# An elementwise op that joins the catalogue is ml.<op> with no line here: the extension binds it
# from its definition (python/src/bind_array_ops.cpp), and it is re-exported below.
from . import _ingot as _native  # noqa: E402

for _name in _native.elementwise_forms():
    if _name not in globals() and hasattr(_native, _name):
        globals()[_name] = getattr(_native, _name)
        _ARRAY_API.append(_name)

__all__ = [
    "Add", "AvgPool2d", "BasicBlock", "BatchNorm2d", "BlockCall", "Bottleneck", "Connection", "Conv2d", "CpuBackend",
    "CrossEntropyLoss", "Dropout", "Embedding", "ExampleCNN", "ExampleMLP", "Flatten", "GRU", "Gelu", "GlobalAvgPool2d",
    "IOKey", "Identity", "If", "IngotError", "InvertedResidual", "JaxBackend", "LayerNorm", "MlxBackend", "LSTM", "Linear", "LogSoftmax", "MLP",
    "MSELoss", "MaxPool2d", "MobileNetV2", "Model", "MultiHeadAttention", "Multiply", "NumpyBackend", "PhysicalModel", "Profile",
    "RMSNorm", "RNN", "ReferenceBackend", "Relu", "Relu6", "ResNet18", "ResNet50", "Scan", "Sigmoid", "Softmax", "Tanh",
    "TransformerEncoderLayer",
    "TorchBackend", "While", "apply", "compile", "compile_option_names", "distributed", "op_names", "onnx", "profile",
    "SGD", "Adam", "AdamW", "AllGather", "AllReduce", "Broadcast", "ReduceScatter", "ClassAccuracy", "OptimizerState", "TrainModel", "TrainStep", "compile_train_step", "signal",
] + _ARRAY_API
