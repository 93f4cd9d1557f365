"""
ingot's C++ compiler (use the `ingot` package, which wraps this module)
"""

from collections.abc import Sequence
from typing import overload


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
        Creates a key. `shape` is a template ([None, 3, 'N', 'Batch...']), `dtype` a dtype name or
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

def Linear(dimension: int, use_bias: bool = True) -> Model:
    """y = x @ weight + bias with weight [in, dimension]; `in` is inferred."""

def Conv2d(in_channels: int | None = None, out_channels: int | None = None, *, kernel_size: object = 3, stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1, use_bias: bool = True) -> Model:
    """
    NCHW convolution, PyTorch argument order: Conv2d(3, 64, kernel_size=3). in_channels may be None
    (inferred): Conv2d(out_channels=64, kernel_size=3). kernel_size is an int or (kh, kw).
    """

def BatchNorm2d(eps: float = 1e-05, momentum: float = 0.1) -> Model:
    """
    Per-channel normalization of [N, C, H, W]; running statistics with compile(inference=True).
    """

def LayerNorm(normalized_dims: int = 1, eps: float = 1e-05, affine: bool = True) -> Model:
    """Normalizes over the last `normalized_dims` dims."""

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

def MaxPool2d(kernel_size: int, stride: int | None = None, padding: int = 0) -> Model:
    """Max pooling (stride defaults to kernel_size)."""

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

    def __init__(self, *, cache: bool = True, cache_dir: str | None = None, compiler: str | None = None, extra_flags: Sequence[str] = [], num_threads: int = 0) -> None:
        """
        cache: use the disk cache; cache_dir: default $INGOT_CACHE_DIR, $XDG_CACHE_HOME/ingot or ~/.cache/ingot;
        compiler: default $INGOT_CXX, $CXX, c++/g++/clang++; extra_flags: appended to the build command;
        num_threads: OpenMP threads per parallel loop (0: OpenMP's default).
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

    def get_types(self) -> dict[str, str]:
        """Dtype name of every terminal."""

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
