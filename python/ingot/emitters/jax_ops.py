"""Ops for the code JaxBackend generates: ArrayOps over jax.numpy, run with 64-bit types enabled
(ingot's int64 indices and float64 math need them) inside each call only."""
import jax
import jax.numpy as jnp
import numpy as np

from ._array_ops import ArrayOps, constant_array, export
from ._control_flow import lax_ops


def _x64():
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # older JAX

    return enable_x64()


class JaxOps(ArrayOps):
    def __init__(self):
        super().__init__(jnp)

    def scope(self):
        return _x64()

    def constant(self, c):
        return np.asarray(constant_array(c))  # converted to jax arrays inside the x64 scope

    def jit(self, forward, options):
        """The generated function under jax.jit (compile(..., jit=True), the default)."""
        return jax.jit(forward, **options)

    def erf(self, x):
        return jax.scipy.special.erf(self._float(x))

    def _add_at(self, a, index, value):
        return a.at[index].add(value)  # JAX arrays are immutable: a functional scatter-add

    def _control_flow_ops(self):
        return lax_ops(jax.lax, self.predicate)

    def vjp(self, forward, inputs, constants, cotangents, wrt):
        differentiable = [i for i, w in enumerate(wrt) if w]

        def f(*diff_args):
            args = list(inputs)
            for i, a in zip(differentiable, diff_args):
                args[i] = a
            return forward(args, [jnp.asarray(c) for c in constants])

        outs, pullback = jax.vjp(f, *[inputs[i] for i in differentiable])
        cts = [jnp.zeros_like(o) if c is None else jnp.asarray(c, dtype=o.dtype) for o, c in zip(outs, cotangents)]
        try:
            grads = pullback(cts)
        except ValueError as e:
            if "while_loop" not in str(e):
                raise
            from .._ingot import IngotError

            # JAX transposes no lax.while_loop; ingot's backward graph runs a while with
            # max_iterations as the scan of that many steps, which JAX differentiates.
            raise IngotError("JaxBackend cannot differentiate through a while loop with jax.vjp (JAX has no "
                             "reverse mode for lax.while_loop); use JaxBackend(gradients='ingot') with the "
                             "loop's max_iterations set") from e
        result = [None] * len(inputs)
        for i, g in zip(differentiable, grads):
            result[i] = g
        return outs, result


export(JaxOps(), globals())
lax = jax.lax  # the generated code's control flow: ops.lax.cond / while_loop / scan
