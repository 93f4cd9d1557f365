"""
ingot's C++ compiler (use the `ingot` package, which wraps this module)
"""

from collections.abc import Iterator, Sequence
from typing import overload

import ingot
from ingot._ingot import distributed as distributed, onnx as onnx


class IngotError(ValueError):
    pass

class IOKey:
    """
    What a terminal is linked to: a wire name plus optional shape, dtype, value and exposure.

        ml.IOKey('logits', expose=True)
        ml.IOKey('x', shape=[None, 3], dtype='float32')
    """

    def __init__(self, name: str | None = None, *, shape: object | None = None, dtype: object | None = None, value: object | None = None, expose: bool = False) -> None:
        """
        Creates a key. `shape` is a template ([None, 3, 'N', 'Batch...'], the variadic run also as
        ('Batch', ...) or a bare ... when anonymous), `dtype` a dtype name or
        NumPy dtype, `value` an array (the wire becomes a constant), `expose` makes it an output.
        """

class Connection:
    """
    A wire of a model. Arithmetic on connections of one model adds primitive blocks to it.
    """

    @property
    def name(self) -> str:
        """The wire's name ('' for unnamed wires)."""

    @property
    def T(self) -> Connection:
        """All axes reversed."""

    def transpose(self, perm: Sequence[int] = []) -> Connection:
        """Permutes the axes (no perm: reverses them)."""

    def reshape(self, shape: Sequence[int]) -> Connection:
        """Reshape; -1 is inferred, 0 copies the input's dim."""

    def sum(self, axes: Sequence[int] = [], keepdims: bool = False) -> Connection:
        """Sum over `axes` (all when empty)."""

    def mean(self, axes: Sequence[int] = [], keepdims: bool = False) -> Connection:
        """Mean over `axes` (all when empty)."""

    def max(self, axes: Sequence[int] = [], keepdims: bool = False) -> Connection:
        """Maximum over `axes` (all when empty)."""

    def cast(self, dtype: object) -> Connection:
        """Converts to `dtype`."""

    def slice(self, axis: int, start: int, end: int, step: int = 1) -> Connection:
        """Elements start:end:step of `axis` (the axis stays)."""

    def __getitem__(self, index: int) -> Connection:
        """Index `index` of axis 0 (the axis is dropped)."""

    def __neg__(self) -> Connection:
        """Adds a neg block."""

    @overload
    def __add__(self, arg: Connection, /) -> Connection: ...

    @overload
    def __add__(self, arg: float, /) -> Connection: ...

    def __radd__(self, arg: float, /) -> Connection: ...

    @overload
    def __sub__(self, arg: Connection, /) -> Connection: ...

    @overload
    def __sub__(self, arg: float, /) -> Connection: ...

    def __rsub__(self, arg: float, /) -> Connection: ...

    @overload
    def __mul__(self, arg: Connection, /) -> Connection: ...

    @overload
    def __mul__(self, arg: float, /) -> Connection: ...

    def __rmul__(self, arg: float, /) -> Connection: ...

    @overload
    def __truediv__(self, arg: Connection, /) -> Connection: ...

    @overload
    def __truediv__(self, arg: float, /) -> Connection: ...

    def __rtruediv__(self, arg: float, /) -> Connection: ...

    def __matmul__(self, arg: Connection, /) -> Connection: ...

    @overload
    def __pow__(self, arg: Connection, /) -> Connection: ...

    @overload
    def __pow__(self, arg: float, /) -> Connection: ...

def apply(op: str, x: Connection, **attrs) -> Connection:
    """
    Applies a unary op of the catalogue by name: ml.apply('gelu', x, approximate='tanh').
    """

class BlockCall:
    """A block together with the terminal links it will be added with."""

class Model:
    """
    A logical model: blocks with named terminals. `m |= block(...)` adds a block, linking only
    the terminals named in the call; `m += block` also links its input to m's current output.
    """

    def __init__(self) -> None:
        """An empty model."""

    @staticmethod
    def primitive(op: str, inputs: Sequence[str], outputs: Sequence[str] = ['output'], type_name: str = '', **attrs) -> Model:
        """
        A block wrapping one op of the catalogue (`ingot ops`), with the named input and output
        terminals and the op's attributes as keywords: Model.primitive('conv2d', ['input', 'weight'], stride=[2, 2]).
        """

    @overload
    def __ior__(self, arg: Model, /) -> Model: ...

    @overload
    def __ior__(self, arg: BlockCall, /) -> Model:
        """m |= block: adds the block, linking only the terminals its call names."""

    @overload
    def __iadd__(self, arg: Model, /) -> Model: ...

    @overload
    def __iadd__(self, arg: BlockCall, /) -> Model:
        """m += block: adds the block and links its input to the current output."""

    def __call__(self, **kwargs) -> BlockCall:
        """
        Links terminals for the next |= or +=: block(input='x', output=ml.IOKey('y', expose=True)).
        """

    def add(self, block: Model, name: str = '', **links) -> dict[str, Connection]:
        """
        Adds `block` (optionally named) linking the keyword terminals; returns {terminal: Connection}.
        """

    def input(self, name: str, shape: object | None = None, dtype: object | None = None) -> Connection:
        """
        A named input wire (created if absent), optionally with a shape template and dtype.
        """

    def parameter(self, name: str, init: str = 'fan_in(0)', shape: object | None = None) -> Connection:
        """
        A trainable parameter wire; `init` is 'zeros', 'ones', 'normal(0, 0.02)', 'fan_in(0)', ...
        """

    def constant(self, name: str, value: object) -> Connection:
        """A constant wire holding a copy of `value`."""

    def connection(self, name: str) -> Connection:
        """The named wire (created if absent)."""

    @property
    def cin(self) -> Connection:
        """The canonical input wire."""

    @property
    def cout(self) -> Connection:
        """The canonical output wire."""

    def expose(self, connection: Connection, name: str) -> None:
        """Names a wire and makes it an output."""

    def set_cin(self, connection: Connection) -> None:
        """Sets the canonical input."""

    def set_cout(self, connection: Connection) -> None:
        """Sets the canonical output."""

    def set_shapes(self, shapes: dict) -> Model:
        """Shape templates by terminal name."""

    def set_types(self, types: dict) -> Model:
        """Dtypes by terminal name."""

    def set_values(self, values: dict) -> Model:
        """Constant values by terminal name (copied)."""

    def set_name(self, name: str) -> Model:
        """The block's name inside its parent."""

    def set_attribute(self, name: str, value: object) -> Model:
        """
        Sets a named attribute of this block. 'backend': a key of ml.compile's backend_map; that backend compiles this block's nodes, the default backend the rest (the innermost marked block wins).
        """

    def get_attribute(self, name: str) -> str | None:
        """
        The attribute's value, or None when it is not set (an unknown name is an error).
        """

    @property
    def type_name(self) -> str:
        """'Linear', 'Model', or the op name of a primitive."""

    def input_keys(self) -> list[str]:
        """The model's input terminals."""

    def output_keys(self) -> list[str]:
        """The model's output terminals."""

    def terminals(self) -> list:
        """Each terminal as {'name', 'role'}."""

    def summary(self, shapes: dict | None = None) -> str:
        """One row per block: type, shapes, dtype, parameter count."""

    def to_json(self) -> str:
        """The block tree as versioned JSON."""

    @staticmethod
    def from_json(json: str) -> Model:
        """A model from to_json's text."""

    def save(self, path: str) -> None:
        """Writes to_json to `path` (atomically)."""

    @staticmethod
    def load(path: str) -> Model:
        """Reads a model saved with save()."""

    def __copy__(self) -> Model: ...

    def __deepcopy__(self, memo: object) -> Model: ...

def Linear(in_features: int | None = None, out_features: int | None = None, *, dimension: int | None = None, use_bias: bool = True) -> Model:
    """
    y = x @ weight + bias with weight [in, out]. Linear(10) or Linear(dimension=10): 10 outputs, `in`
    inferred from the input; Linear(128, 10) (PyTorch's order): `in` is 128, and an input whose last
    dim is not 128 is a shape error at compile.
    """

def Conv2d(in_channels: int | None = None, out_channels: int | None = None, *, kernel_size: object = 3, stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1, use_bias: bool = True) -> Model:
    """
    NCHW convolution, PyTorch argument order: Conv2d(3, 64, kernel_size=3). in_channels may be None
    (inferred): Conv2d(out_channels=64, kernel_size=3). kernel_size is an int or (kh, kw).
    """

def BatchNorm2d(num_features: int | None = None, eps: float = 1e-05, momentum: float = 0.1) -> Model:
    """
    Per-channel normalization of [N, C, H, W]; running statistics with compile(inference=True).
    BatchNorm2d(64) (PyTorch's form): C is 64, checked at compile; BatchNorm2d(): C inferred.
    """

def LayerNorm(normalized_shape: object | None = None, eps: float = 1e-05, affine: bool = True, *, normalized_dims: int | None = None) -> Model:
    """
    Normalizes over trailing dims: LayerNorm(512) or LayerNorm([4, 5]) (PyTorch's normalized_shape:
    their sizes, checked at compile), LayerNorm(normalized_dims=2) (their count, sizes inferred), or
    LayerNorm() (the last dim).
    """

def RMSNorm(normalized_shape: object | None = None, eps: float = 1e-05, affine: bool = True, *, normalized_dims: int | None = None) -> Model:
    """
    x / sqrt(mean(x**2) + eps) * weight over trailing dims (no centering, no bias); the trailing dims
    as for LayerNorm.
    """

def MultiHeadAttention(embed_dim: int, num_heads: int, *, num_kv_heads: int | None = None, causal: bool = False, masked: bool = False, use_bias: bool = True) -> Model:
    """
    Self-attention on [B, S, embed_dim]: q_proj / k_proj / v_proj, the fused attention op, out_proj.
    num_kv_heads < num_heads: grouped-query attention; masked adds a 'mask' terminal (bool: True
    attends; float: added to the scores).
    """

def TransformerEncoderLayer(d_model: int, num_heads: int, ffn_dim: int, *, num_kv_heads: int | None = None, causal: bool = False, masked: bool = False, norm_first: bool = False, rms_norm: bool = False, activation: str = 'gelu', eps: float = 1e-05) -> Model:
    """
    Self-attention and a feed-forward block (linear1, activation, linear2), each with a residual
    add and a norm: post-norm (BERT) or norm_first (GPT-2, LLaMA); rms_norm picks RMSNorm.
    """

def Relu() -> Model:
    """max(x, 0)."""

def Gelu(tanh_approximation: bool = False) -> Model:
    """GELU, erf form or tanh approximation."""

def Sigmoid() -> Model:
    """1 / (1 + exp(-x))."""

def Tanh() -> Model:
    """tanh(x)."""

def Softmax(axis: int = -1) -> Model:
    """softmax over `axis`."""

def LogSoftmax(axis: int = -1) -> Model:
    """log_softmax over `axis`."""

def Dropout(p: float = 0.5, seed: int = 0) -> Model:
    """
    Training: zeroes elements with probability p (seeded); inference: identity.
    """

def MaxPool2d(kernel_size: int, stride: int | None = None, padding: int = 0, ceil_mode: bool = False) -> Model:
    """
    Max pooling (stride defaults to kernel_size; ceil_mode as in PyTorch: a last window past the padded end where the floor rule stops short).
    """

def AvgPool2d(kernel_size: int, stride: int | None = None, padding: int = 0) -> Model:
    """Average pooling (stride defaults to kernel_size)."""

def GlobalAvgPool2d() -> Model:
    """[N, C, H, W] -> [N, C]."""

def Flatten() -> Model:
    """[N, d1, d2, ...] -> [N, d1*d2*...]."""

def Embedding(num_embeddings: int, dim: int) -> Model:
    """Rows of weight [num_embeddings, dim] by index."""

def Add() -> Model:
    """left + right."""

def Multiply() -> Model:
    """left * right."""

def Identity() -> Model:
    """input -> output unchanged."""

def MLP(widths: Sequence[int], activation: str = 'relu') -> Model:
    """Linear layers of `widths` with `activation` between them."""

def MSELoss(reduction: str = 'mean') -> Model:
    """Mean squared error of input and target."""

def CrossEntropyLoss(reduction: str = 'mean', one_hot_target: bool = False) -> Model:
    """Cross entropy of logits and integer (or one-hot) targets."""

def Relu6() -> Model:
    """min(max(x, 0), 6): MobileNet's clamped ReLU."""

def BasicBlock(planes: int, stride: int = 1, downsample: bool = False) -> Model:
    """
    ResNet's basic block (torchvision's module names: conv1, bn1, conv2, bn2, downsample.0/.1).
    """

def Bottleneck(planes: int, stride: int = 1, downsample: bool = False, groups: int = 1, base_width: int = 64) -> Model:
    """
    ResNet's bottleneck (4 * planes out; ResNeXt with groups > 1), torchvision's module names.
    """

def InvertedResidual(in_channels: int, out_channels: int, stride: int, expand_ratio: int) -> Model:
    """MobileNetV2's inverted residual (torchvision's module names)."""

def ResNet18(num_classes: int = 1000) -> Model:
    """
    torchvision's ResNet-18: [N, 3, H, W] -> logits; parameters named as its state dict (fc.weight is [in, out]).
    """

def ResNet50(num_classes: int = 1000) -> Model:
    """
    torchvision's ResNet-50: [N, 3, H, W] -> logits; parameters named as its state dict (fc.weight is [in, out]).
    """

def MobileNetV2(num_classes: int = 1000, width_mult: float = 1.0) -> Model:
    """
    torchvision's MobileNetV2: [N, 3, H, W] -> logits; parameters named as its state dict (classifier.1.weight is [in, out]).
    """

def LSTM(input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True, batch_first: bool = False, bidirectional: bool = False, nonlinearity: str = 'tanh') -> Model:
    """
    torch.nn.LSTM as a block (gates i, f, g, o; parameters weight_ih_l0 [4H, in], weight_hh_l0,
    bias_ih_l0, bias_hh_l0, '_reverse' for the backward direction, so a state dict loads as is).
    Terminals: input [T, N, in] ([N, T, in] with batch_first), output [T, N, D*H], h_n and c_n
    [num_layers*D, N, H]; zero initial states. Each layer is a Scan over its time steps.
    """

def GRU(input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True, batch_first: bool = False, bidirectional: bool = False, nonlinearity: str = 'tanh') -> Model:
    """
    torch.nn.GRU as a block (gates r, z, n; PyTorch's parameter names and layout). Terminals:
    input, output, h_n, as for LSTM.
    """

def RNN(input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True, batch_first: bool = False, bidirectional: bool = False, nonlinearity: str = 'tanh') -> Model:
    """
    torch.nn.RNN as a block (h' = tanh or relu of x W_ih^T + b_ih + h W_hh^T + b_hh; PyTorch's
    parameter names). Terminals: input, output, h_n, as for LSTM.
    """

def If(condition: str, then_branch: object, else_branch: object) -> Model:
    """
    then_branch where `condition` (a terminal name or an expression over terminals, e.g. 'x_norm > 1')
    holds, else else_branch; both produce the same outputs. A condition that reads data needs
    compile(..., dynamic_control_flow=True). See include/ingot/control_blocks.h.
    """

def While(condition: str, body: object, initial_state: dict | None = None, loop_vars: dict | None = None, output_vars: dict | None = None, max_iterations: int | None = None) -> Model:
    """
    Runs `body` while `condition` (an expression over loop variables and terminals, e.g.
    'step < max_steps') holds. initial_state: {loop variable: wire name or constant};
    loop_vars: {loop variable: body output or expression, e.g. 'step + 1'}; output_vars:
    {output terminal: loop variable}. max_iterations bounds the loop (gradients through a
    data-dependent trip count need it).
    """

def Scan(body: object, xs: dict | None = None, initial_state: dict | None = None, loop_vars: dict | None = None, ys: dict | None = None, output_vars: dict | None = None, reverse: bool = False) -> Model:
    """
    Runs `body` once per step of the leading axis of its sequences. xs: {body input: sequence
    terminal}; initial_state / loop_vars / output_vars: carried loop variables as for While;
    ys: {output terminal: body output}, stacked along a new leading axis; reverse: last step first.
    """

def ExampleCNN(num_classes: int = 10) -> Model:
    """The bundled CNN."""

def ExampleMLP() -> Model:
    """The bundled MLP 784 -> 256 -> 10."""

class Backend:
    """Where a compiled model runs."""

    @property
    def name(self) -> str:
        """The backend's name ('reference', 'cpu', 'numpy', ...)."""

class ReferenceBackend(Backend):
    """
    The reference interpreter: runs each op's reference kernel (the oracle).
    """

    def __init__(self) -> None: ...

class CpuBackend(Backend):
    """
    Native code: the graph becomes one generated C++ library (fused loops, BLAS),
    built with the system compiler and cached on disk.
    """

    def __init__(self, *, cache: bool = True, cache_dir: str | None = None, compiler: str | None = None, extra_flags: Sequence[str] = [], num_threads: int = 0, winograd: bool = True, blas: bool = True, dnnl_matmul: bool = True) -> None:
        """
        cache: use the disk cache; cache_dir: default $INGOT_CACHE_DIR, $XDG_CACHE_HOME/ingot or ~/.cache/ingot;
        compiler: default $INGOT_CXX, $CXX, c++/g++/clang++; extra_flags: appended to the build command;
        num_threads: OpenMP threads per call (0: OpenMP's default; compile's cpu_options overrides it); winograd: 3x3 stride-1 float32
        convs run oneDNN's Winograd kernels where it has them (AVX-512): faster, a few times the rounding error (False: direct);
        blas: products in oneDNN's sgemm and OpenBLAS (else in plain loops, as without a BLAS library);
        dnnl_matmul: float32 matmuls by constant weights (up to 256 rows) run as oneDNN 1x1 convolutions, weights reordered once at
        load, bias / activation / residual add inside (False: sgemm and a pass).
        """

    @property
    def cache(self) -> bool: ...

    @property
    def cache_dir(self) -> str: ...

    @property
    def compiler(self) -> str: ...

    @property
    def extra_flags(self) -> list[str]: ...

    @property
    def num_threads(self) -> int: ...

    @property
    def winograd(self) -> bool: ...

    @property
    def blas(self) -> bool: ...

    @property
    def dnnl_matmul(self) -> bool: ...

    @staticmethod
    def compile_count() -> int:
        """How many times this process ran the C++ compiler."""

class PythonBackend(Backend):
    """A backend whose code an ingot.emitters emitter generates."""

    def __init__(self, name: str, emitter: object) -> None:
        """`emitter.lower(graph_json)` returns the runner."""

def compile_option_names() -> list[str]:
    """Every keyword ingot.compile accepts besides the backend."""

def op_names() -> list[str]:
    """The op catalogue (src/ops/families.h), sorted by name."""

def elementwise_forms() -> dict:
    """
    The elementwise ops' forms (ElementwiseForms in src/ir/op_registry.h) by op name: kind, arity,
    python (an expression over x or a, b and array-API functions; '' when each emitter writes it), onnx.
    """

class PhysicalModel:
    """A compiled model (see ingot.PhysicalModel for the documented wrapper)."""

    def randomize_params(self, seed: int = 0) -> dict:
        """Fresh parameters from their initializers, deterministic per seed."""

    def evaluate(self, params: dict, inputs: dict) -> dict:
        """Runs the model (GIL released); returns {output: array}."""

    def evaluate_with_gradients(self, params: dict, inputs: dict, output_gradients: dict) -> tuple:
        """
        Runs the model and ingot's backward graph; returns (outputs, gradients).
        """

    def gradient_names(self) -> list[str]:
        """What gets a gradient."""

    def get_shapes(self) -> dict:
        """Shape of every terminal; symbols stay strings."""

    def get_types(self) -> dict[str, ingot.DType]:
        """The dtype of every terminal (ml.float32, ...)."""

    def input_names(self) -> list[str]:
        """The run-time data inputs."""

    def parameter_names(self) -> list[str]:
        """The parameters."""

    def constant_names(self) -> list[str]:
        """The constants."""

    def output_names(self) -> list[str]:
        """The outputs."""

    def parameter_count(self) -> int:
        """Total elements of statically shaped parameters."""

    def summary(self) -> str:
        """Terminals with types and shapes, as text."""

    def graph_json(self) -> str:
        """The optimized graph as JSON."""

    def graph_text(self) -> str:
        """The optimized graph as text."""

    def save_params(self, path: str, params: dict) -> None:
        """Writes parameters as safetensors."""

    def load_params(self, path: str) -> dict:
        """Reads parameters saved with save_params (checked against the model)."""

def compile(model: Model, backend: Backend, options: dict) -> PhysicalModel:
    """
    Compiles `model` for `backend` with the options dict (see ingot.compile).
    """

class ProfileSession:
    """Records per-kernel times of evaluations from creation until stop()."""

    def __init__(self) -> None: ...

    def stop(self) -> None:
        """Stops recording (idempotent)."""

    @property
    def recording(self) -> bool:
        """True until stop()."""

    def rows(self) -> list:
        """
        Per kernel: name, backend, count, total_s, mean_s, share (largest total first).
        """

    def events(self) -> list:
        """Every recorded kernel run, in order."""

    def summary(self) -> str:
        """A table: kernel, backend, count, total ms, mean us, share."""

    def chrome_trace(self) -> str:
        """The Chrome/Perfetto trace JSON text."""

    def write_chrome_trace(self, path: str) -> None:
        """Writes the Chrome/Perfetto trace JSON to `path`."""

class array:
    """
    A lazy array (MLX-style). Ops on arrays record a graph; it runs when data is read
    (np.asarray(a), a.item(), a.tolist(), print) or on ml.eval(). ml.compile(fn) traces
    functions of arrays into one optimized, natively built executable.

        x = ml.array(np.ones((2, 3), np.float32))
        y = ml.softmax(x @ x.T * 0.5, axis=-1)   # Python numbers take x's dtype
        np.asarray(y)                            # evaluates; a read-only view, no copy
    """

    def __init__(self, x: object, dtype: object | None = None) -> None:
        """
        Copies `x` (NumPy array, anything with __dlpack__ or the buffer protocol, a list or a number) into
        an array, cast to `dtype` when given. An ml.array is shared, not copied. Without a dtype, Python
        floats become float32, ints int64, bools bool; arrays keep their dtype.
        """

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, a tuple of ints."""

    @property
    def dtype(self) -> ingot.DType:
        """
        The dtype: ml.float32, ml.int64, ml.bool, ... (equal to its name, 'float32', and to NumPy's dtype).
        """

    @property
    def ndim(self) -> int:
        """The number of axes."""

    @property
    def size(self) -> int:
        """The number of elements."""

    @property
    def T(self) -> array:
        """The axes reversed (lazy)."""

    def item(self) -> int | float | bool:
        """The value of a one-element array as a Python number (evaluates)."""

    def tolist(self) -> object:
        """The values as nested Python lists (evaluates)."""

    def eval(self) -> array:
        """
        Computes the array now (and every pending array something still holds); returns it.
        """

    def astype(self, dtype: object) -> array:
        """The values converted to `dtype` ('float16', np.int32, ...)."""

    def reshape(self, *args) -> array:
        """
        a.reshape(2, -1) or a.reshape((2, -1)): the same data in a new shape; -1 is inferred.
        """

    def transpose(self, *args) -> array:
        """a.transpose(1, 0, 2) or a.transpose((1, 0, 2)); no axes reverses them."""

    def sum(self, axis: object | None = None, keepdims: bool = False) -> array:
        """
        Reduces over `axis` (an int, a tuple of ints, or None for all axes); see ml.sum.
        """

    def mean(self, axis: object | None = None, keepdims: bool = False) -> array:
        """
        Reduces over `axis` (an int, a tuple of ints, or None for all axes); see ml.sum.
        """

    def max(self, axis: object | None = None, keepdims: bool = False) -> array:
        """
        Reduces over `axis` (an int, a tuple of ints, or None for all axes); see ml.sum.
        """

    def min(self, axis: object | None = None, keepdims: bool = False) -> array:
        """
        Reduces over `axis` (an int, a tuple of ints, or None for all axes); see ml.sum.
        """

    def argmax(self, axis: object | None = None, keepdims: bool = False) -> array:
        """
        Index of the largest element along `axis` (None: of the flattened array), int64.
        """

    def __array__(self, dtype: object | None = None, copy: object | None = None) -> object: ...

    def __dlpack__(self, **kwargs) -> object: ...

    def __dlpack_device__(self) -> tuple: ...

    __array_ufunc__: None = None

    __hash__: None = None

    def __repr__(self) -> str: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator: ...

    def __bool__(self) -> bool: ...

    def __float__(self) -> float: ...

    def __int__(self) -> int: ...

    def __getitem__(self, arg: object, /) -> array: ...

    def __add__(self, other: object, /) -> array: ...

    def __radd__(self, other: object, /) -> array: ...

    def __sub__(self, other: object, /) -> array: ...

    def __rsub__(self, other: object, /) -> array: ...

    def __mul__(self, other: object, /) -> array: ...

    def __rmul__(self, other: object, /) -> array: ...

    def __truediv__(self, other: object, /) -> array: ...

    def __rtruediv__(self, other: object, /) -> array: ...

    def __mod__(self, other: object, /) -> array: ...

    def __rmod__(self, other: object, /) -> array: ...

    def __pow__(self, other: object, /) -> array: ...

    def __rpow__(self, other: object, /) -> array: ...

    def __matmul__(self, other: object, /) -> array: ...

    def __rmatmul__(self, other: object, /) -> array: ...

    def __lt__(self, other: object, /) -> array: ...

    def __le__(self, other: object, /) -> array: ...

    def __gt__(self, other: object, /) -> array: ...

    def __ge__(self, other: object, /) -> array: ...

    def __eq__(self, other: object, /) -> array: ...

    def __ne__(self, other: object, /) -> array: ...

    def __neg__(self) -> array: ...

    def __pos__(self) -> array: ...

    def __abs__(self) -> array: ...

def asarray(x: object, dtype: object | None = None) -> array:
    """
    Like ml.array, but C-contiguous data of the right dtype is viewed, not copied (NumPy's asarray).
    Arrays are values: do not write into the source while an array computed from it is pending.
    """

def exp(x: object) -> array:
    """e ** x, elementwise."""

def log(x: object) -> array:
    """Natural logarithm, elementwise."""

def sqrt(x: object) -> array:
    """Square root, elementwise."""

def rsqrt(x: object) -> array:
    """1 / sqrt(x), elementwise."""

def sin(x: object) -> array:
    """Sine, elementwise."""

def cos(x: object) -> array:
    """Cosine, elementwise."""

def tanh(x: object) -> array:
    """Hyperbolic tangent, elementwise."""

def sigmoid(x: object) -> array:
    """1 / (1 + exp(-x)), elementwise."""

def erf(x: object) -> array:
    """The error function, elementwise."""

def abs(x: object) -> array:
    """Absolute value, elementwise."""

def relu(x: object) -> array:
    """max(x, 0), elementwise."""

def sign(x: object) -> array:
    """-1, 0 or 1 by the sign of x, elementwise."""

def floor(x: object) -> array:
    """Largest integer <= x, elementwise."""

def ceil(x: object) -> array:
    """Smallest integer >= x, elementwise."""

def square(x: object) -> array:
    """x * x, elementwise."""

def negative(x: object) -> array:
    """-x, elementwise."""

def add(x1: object, x2: object) -> array:
    """x1 + x2 with NumPy broadcasting."""

def subtract(x1: object, x2: object) -> array:
    """x1 - x2 with NumPy broadcasting."""

def multiply(x1: object, x2: object) -> array:
    """x1 * x2 with NumPy broadcasting."""

def divide(x1: object, x2: object) -> array:
    """x1 / x2 with NumPy broadcasting."""

def power(x1: object, x2: object) -> array:
    """x1 ** x2 with NumPy broadcasting."""

def mod(x1: object, x2: object) -> array:
    """x1 % x2 with the sign of x2 (NumPy mod); an integer x2 of 0 gives 0."""

def fmod(x1: object, x2: object) -> array:
    """
    C's fmod: the remainder with the sign of x1; an integer x2 of 0 gives 0.
    """

def maximum(x1: object, x2: object) -> array:
    """The larger of x1 and x2, elementwise."""

def minimum(x1: object, x2: object) -> array:
    """The smaller of x1 and x2, elementwise."""

def equal(x1: object, x2: object) -> array:
    """x1 == x2, elementwise (bool)."""

def not_equal(x1: object, x2: object) -> array:
    """x1 != x2, elementwise (bool)."""

def less(x1: object, x2: object) -> array:
    """x1 < x2, elementwise (bool)."""

def less_equal(x1: object, x2: object) -> array:
    """x1 <= x2, elementwise (bool)."""

def greater(x1: object, x2: object) -> array:
    """x1 > x2, elementwise (bool)."""

def greater_equal(x1: object, x2: object) -> array:
    """x1 >= x2, elementwise (bool)."""

def sum(x: object, axis: object | None = None, keepdims: bool = False) -> array:
    """Sum over `axis` (an int, a tuple of ints, or None for all axes)."""

def mean(x: object, axis: object | None = None, keepdims: bool = False) -> array:
    """Mean over `axis` (an int, a tuple of ints, or None for all axes)."""

def max(x: object, axis: object | None = None, keepdims: bool = False) -> array:
    """Maximum over `axis` (an int, a tuple of ints, or None for all axes)."""

def min(x: object, axis: object | None = None, keepdims: bool = False) -> array:
    """Minimum over `axis` (an int, a tuple of ints, or None for all axes)."""

def where(condition: object, x: object, y: object) -> array:
    """x where `condition` is true, else y (broadcast)."""

def matmul(a: object, b: object) -> array:
    """Matrix product (batched over leading axes), as `a @ b`."""

def gelu(x: object, tanh_approximation: bool = False) -> array:
    """GELU: x * Phi(x) (erf form, or the tanh approximation)."""

def astype(x: object, dtype: object) -> array:
    """The values converted to `dtype`."""

def argmax(x: object, axis: object | None = None, keepdims: bool = False) -> array:
    """
    Index of the largest element along `axis` (None: of the flattened array), int64.
    """

def top_k(x: object, k: int, axis: int = -1, largest: bool = True) -> tuple:
    """
    (values, int64 indices) of the `k` largest (or smallest) elements along `axis`, in order; NaN counts as the largest, equal values come in index order (ONNX's TopK).
    """

def moments(x: object, axis: object | None = None, keepdims: bool = False) -> tuple:
    """(mean, variance) over `axis` in one pass."""

def softmax(x: object, axis: int = -1) -> array:
    """exp(x) / sum(exp(x)) along `axis` (numerically stable)."""

def log_softmax(x: object, axis: int = -1) -> array:
    """log(softmax(x)) along `axis` (numerically stable)."""

def layer_norm(x: object, weight: object, bias: object, axis: int = -1, eps: float = 1e-05) -> array:
    """(x - mean) / sqrt(var + eps) * weight + bias along `axis`."""

def rms_norm(x: object, weight: object | None = None, axis: int = -1, eps: float = 1e-05) -> array:
    """x / sqrt(mean(x**2) + eps) * weight over dims `axis`..end (RMSNorm)."""

def lstm(x: object, h0: object, c0: object, w_ih: object, w_hh: object, b_ih: object, b_hh: object, reverse: bool = False, batch_first: bool = False) -> tuple:
    """
    One LSTM layer as torch.nn.LSTM computes it (gates i, f, g, o; w_ih [4H, I], w_hh [4H, H], b_ih, b_hh [4H]): x [T, B, I] ([B, T, I] with batch_first), h0, c0 [B, H] -> (ys, h_T, c_T). A scan over the steps after one matmul of x over all of them; `reverse` runs last to first (a bidirectional layer's second half).
    """

def gru(x: object, h0: object, w_ih: object, w_hh: object, b_ih: object, b_hh: object, reverse: bool = False, batch_first: bool = False) -> tuple:
    """
    One GRU layer as torch.nn.GRU computes it (gates r, z, n; w_ih [3H, I], w_hh [3H, H]): -> (ys, h_T).
    """

def rnn(x: object, h0: object, w_ih: object, w_hh: object, b_ih: object, b_hh: object, reverse: bool = False, batch_first: bool = False, nonlinearity: str = 'tanh') -> tuple:
    """
    One Elman RNN layer as torch.nn.RNN computes it (w_ih [H, I], w_hh [H, H]): -> (ys, h_T).
    """

def scaled_dot_product_attention(q: object, k: object, v: object, mask: object | None = None, scale: float = 0.0, is_causal: bool = False, causal_offset: int = 0) -> array:
    """
    softmax(q @ k^T * scale + mask) @ v as one op (q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv]); scale 0 means 1/sqrt(D); a bool mask is True where a query may attend, a float one is added; is_causal hides keys j > i + causal_offset; k and v may have fewer heads (axis -3) that divide q's (grouped-query attention).
    """

def conv2d(x: object, weight: object, stride: object = (1, 1), padding: object = (0, 0)) -> array:
    """2-D convolution, NCHW input and OIHW weight (no bias)."""

def max_pool2d(x: object, kernel_size: object, stride: object | None = None, padding: object = 0, ceil_mode: bool = False) -> array:
    """
    Max pooling over (kh, kw) windows of an NCHW array (stride defaults to the window; padding counts as -inf; ceil_mode as in PyTorch: a last window past the padded end where the floor rule stops short).
    """

def reshape(x: object, shape: object) -> array:
    """The same data in a new shape; one -1 is inferred."""

def transpose(x: object, axes: object | None = None) -> array:
    """Permutes the axes (None reverses them)."""

def broadcast_to(x: object, shape: object) -> array:
    """x broadcast to `shape` (NumPy rules)."""

def concatenate(arrays: object, axis: int = 0) -> array:
    """Joins arrays along an existing axis."""

def take(x: object, indices: object, axis: int = 0) -> array:
    """Elements at integer `indices` along `axis`."""

def take_along_axis(x: object, indices: object, axis: int) -> array:
    """NumPy's take_along_axis."""

def one_hot(labels: object, num_classes: int, dtype: object = 'float32') -> array:
    """
    Integer labels [...] as one-hot rows [..., num_classes]; a label outside [0, num_classes) gives a row of zeros.
    """

def zeros(shape: object, dtype: object = 'float32') -> array:
    """An array of zeros."""

def ones(shape: object, dtype: object = 'float32') -> array:
    """An array of ones."""

def full(shape: object, fill_value: float, dtype: object = 'float32') -> array:
    """An array filled with `fill_value`."""

def arange(n: int, dtype: object = 'float32') -> array:
    """0, 1, ..., n - 1 (float32 unless `dtype` says otherwise, as in C++)."""

def op(name: str, *inputs, **attrs) -> object:
    """
    Any op of the catalogue (ml.op_names()) by name: ml.op('gelu', x, approximate='tanh').
    Returns an array, or a tuple for ops with several outputs.
    """

def dropout(x: object, p: float, key: object | None = None) -> array:
    """
    Inverted dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p).
    """

def acos(x: object) -> array:
    """inverse cosine, elementwise."""

def asin(x: object) -> array:
    """inverse sine, elementwise."""

def atan(x: object) -> array:
    """inverse tangent, elementwise."""

class RandomState:
    """
    The global random state (an int64 scalar array each draw without a key reads and
    advances). List ml.random.state in compile's inputs and outputs so a compiled
    function draws fresh numbers on every call.
    """

    def __init__(self) -> None: ...

    @property
    def value(self) -> array:
        """The state array (this thread's)."""

    @value.setter
    def value(self, arg: array, /) -> None: ...

def compile_count() -> int:
    """
    How many functions ml.compile has traced and built (cache hits do not count).
    """

def disable_compile() -> None:
    """
    Compiled functions run uncompiled (and auto-compile stops) until enable_compile().
    """

def enable_compile() -> None:
    """Undoes disable_compile()."""

def compile_config() -> dict:
    """
    The function-compile and auto-compile settings (first read from the INGOT_* environment variables).
    """

def set_compile_config(**changes) -> None:
    """
    Changes the given settings and keeps the others: disable_compile, auto_compile, auto_compile_threshold,
    compile_all, debug, instruction_log, backend, inject_build_failure (see README). backend:
    ml.CpuBackend(...) (the default), ml.ReferenceBackend(), 'cpu' or 'reference'.
    """

def reset_compile_config() -> None:
    """
    Back to the settings of the INGOT_* environment variables (and enable_compile()).
    """

def auto_compile_stats() -> dict:
    """
    The hot path's counters: evaluations, eager_runs, compiled_runs, compiles_started/finished, compile_failures, distinct_graphs.
    """

def wait_for_background_compiles() -> None:
    """
    Blocks until every queued auto-compile build has finished (for tests; eval never needs it).
    """

def reset_auto_compile() -> None:
    """Forgets every hot-path count and compiled graph, and zeroes the stats."""

class compile_region:
    """
    with ml.compile_region('training_loop'): ... evaluates everything inside as one unit:
    ml.eval calls are deferred to the end of the block and run as one graph, which the hot
    path counts and compiles (even without INGOT_AUTO_COMPILE). Reading data inside still
    evaluates at once. An exception leaving the block drops the deferred work.
    """

    def __init__(self, name: str) -> None: ...

    def __enter__(self) -> object:
        """Opens the region."""

    def __exit__(self, exc_type: object | None, exc: object | None, traceback: object | None) -> bool:
        """
        Closes the region: runs the deferred evaluations, or drops them when the block raised.
        """

class TrainModel:
    """
    A model with its losses, regularization and metrics (Mithril's TrainModel):
      tm = ml.TrainModel(model)
      tm.add_loss(ml.CrossEntropyLoss(), {'input': 'output', 'target': 'target'})
      tm.add_metric(ml.ClassAccuracy(), {'input': 'output', 'target': 'target'}, 'accuracy')
    """

    def __init__(self, model: Model) -> None: ...

    def add_loss(self, loss: Model, connections: object, reduction: str = 'mean', coefficient: float = 1.0, name: str = '') -> TrainModel:
        """
        Adds a loss block; connections link its terminals to wires of the model ({terminal: wire}); names that are no wire become data inputs. Reduced by `reduction` (mean | sum), scaled by `coefficient`, added to final_cost.
        """

    def add_regularization(self, kind: str, coefficient: float, pattern: str) -> TrainModel:
        """
        Adds coefficient * sum(|p|) (kind 'l1') or coefficient * 0.5 * sum(p^2) ('l2') over the parameters whose names match the glob `pattern`.
        """

    def add_metric(self, metric: Model, connections: object, name: str) -> TrainModel:
        """Adds a metric block wired like a loss; never differentiated."""

def AllReduce(op: str = 'sum') -> Model:
    """
    Block: every rank's input combined by op (sum | mean | max), for ml.distributed's group.
    """

def AllGather() -> Model:
    """Block: every rank's input concatenated along axis 0, in rank order."""

def Broadcast(root: int = 0) -> Model:
    """Block: rank `root`'s input on every rank."""

def ReduceScatter() -> Model:
    """Block: the sum over ranks split along axis 0; rank r keeps part r."""

def ClassAccuracy() -> Model:
    """The fraction of rows whose argmax matches the target class (a metric)."""

class Optimizer:
    """An optimizer for compile_train_step (SGD, Adam, AdamW)."""

    @property
    def name(self) -> str: ...

    def hyperparameters(self) -> list[str]:
        """The hyperparameters set_hyperparameter takes."""

class SGD(Optimizer):
    """PyTorch's SGD (dampening 0), with momentum, weight decay and Nesterov."""

    def __init__(self, *, lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False) -> None: ...

class Adam(Optimizer):
    """Adam as in PyTorch (weight decay added to the gradient)."""

    def __init__(self, *, lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-08, weight_decay: float = 0.0) -> None: ...

class AdamW(Adam):
    """Adam with decoupled weight decay, as in PyTorch."""

    def __init__(self, *, lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-08, weight_decay: float = 0.01) -> None: ...

class OptimizerState:
    """The optimizer's slots (by '<slot>:<parameter>') and its step count."""

    @property
    def step(self) -> int: ...

    @step.setter
    def step(self, arg: int, /) -> None: ...

    @property
    def slots(self) -> dict:
        """The slots as NumPy arrays viewing the state's memory."""

class TrainStep:
    """
    Forward, backward and optimizer update compiled as one executable (compile_train_step).
    """

    def randomize_params(self, seed: int = 0) -> dict:
        """Parameters drawn from each parameter's initializer, as NumPy arrays."""

    def init_state(self, params: dict) -> OptimizerState:
        """Zero optimizer slots for the trained parameters; step 0."""

    def run(self, params: dict, state: OptimizerState, batch: dict) -> dict:
        """
        One step: updates `params` (in place) and `state`; returns {'loss', 'losses', 'metrics'}. Data parallel, `batch` is this rank's shard (ml.distributed.shard_batch) and the first run gives every rank rank 0's parameters and state; losses and metrics are the global batch's.
        """

    def set_hyperparameter(self, name: str, value: float) -> None:
        """Changes a run-time hyperparameter ('lr', ...) without recompiling."""

    def set_lr(self, lr: float) -> None: ...

    @property
    def data_parallel(self) -> bool: ...

    @property
    def group_size(self) -> int:
        """The ranks the step averages over (1 unless data parallel)."""

    @property
    def trained_parameters(self) -> list[str]: ...

    def sync_from_root(self, params: dict, state: OptimizerState) -> None:
        """Gives every rank rank 0's parameters and optimizer state."""

    def save_checkpoint(self, path: str, params: dict, state: OptimizerState) -> None:
        """
        Parameters, slots and step as one safetensors file, written atomically (data parallel: by rank 0 only).
        """

    def load_checkpoint(self, path: str, params: dict, state: OptimizerState) -> None:
        """Reads a save_checkpoint file into params and state."""

    def graph_text(self) -> str:
        """The optimized step graph as text."""

def compile_train_step(model: TrainModel, backend: Backend, optimizer: Optimizer, options: dict) -> TrainStep:
    """Compiles a TrainModel's training step (see ingot.compile_train_step)."""
