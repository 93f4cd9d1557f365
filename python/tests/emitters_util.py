"""A one-primitive model for the emitter tests."""
from __future__ import annotations

import ingot as ml


def op_spec_model(op, inputs, attrs) -> ml.Model:
    """`op` over wires named like `inputs` (positional terminals in0, in1, ...), output 'output' exposed."""
    terminals = [f"in{i}" for i in range(len(inputs))]
    links = dict(zip(terminals, inputs))
    links["output"] = ml.IOKey("output", expose=True)
    m = ml.Model()
    m |= ml.Model.primitive(op, terminals, ["output"], **attrs)(**links)
    return m
