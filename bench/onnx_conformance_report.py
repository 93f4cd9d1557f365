#!/usr/bin/env python3
"""The ONNX conformance report (scripts/onnx_conformance.sh): reads the per-test TSVs that
ingot_onnx_conformance wrote for the reference and CPU backends, names each test's operators
from its model (the onnx package), and writes bench/results/onnx_conformance.json: totals per
backend, and per operator how many of its tests pass on each backend and how many ingot refuses.
It then checks the refusals against the expected-refusal list (bench/onnx_expected_refusals.tsv:
test, reason): a test refused that is not on the list is a regression, a listed test that now
passes must come off the list (--update rewrites it). Exit status 1 on a difference.

  python bench/onnx_conformance_report.py NODE_TEST_DIR [--update]
"""
import collections
import json
import os
import sys

import onnx

RESULTS = os.path.join(os.path.dirname(__file__), "results")
EXPECTED = os.path.join(os.path.dirname(__file__), "onnx_expected_refusals.tsv")


def read_tsv(path):
    rows = {}
    with open(path) as f:
        for line in f:
            name, status, detail = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            rows[name] = (status, detail)
    return rows


def short_reason(detail):
    """The refusal without the model's path."""
    return detail.split("model.onnx: ", 1)[-1][:200]


def main():
    node_dir = sys.argv[1]
    update = "--update" in sys.argv[2:]
    ref = read_tsv(os.path.join(RESULTS, "onnx_conformance_reference.tsv"))
    cpu = read_tsv(os.path.join(RESULTS, "onnx_conformance_cpu.tsv"))
    per_op = collections.defaultdict(lambda: {"tests": 0, "pass_reference": 0, "pass_cpu": 0, "refused": 0, "fail": 0})
    for name, (status, _) in sorted(ref.items()):
        model = onnx.load(os.path.join(node_dir, name, "model.onnx"), load_external_data=False)
        ops = sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}" for n in model.graph.node})
        for op in ops or ["(none)"]:
            e = per_op[op]
            e["tests"] += 1
            e["pass_reference"] += status == "pass"
            e["pass_cpu"] += cpu.get(name, ("",))[0] == "pass"
            e["refused"] += status == "unsupported"
            e["fail"] += status in ("fail", "error") or cpu.get(name, ("",))[0] in ("fail", "error")
    totals = {b: dict(collections.Counter(s for s, _ in rows.values())) for b, rows in (("reference", ref), ("cpu", cpu))}
    with open(os.path.join(RESULTS, "onnx_conformance.json"), "w") as f:
        json.dump({"onnx_node_tests": len(ref), "totals": totals, "per_operator": dict(sorted(per_op.items()))}, f, indent=1)
    with open(os.path.join(RESULTS, "onnx_conformance_ops.md"), "w") as f:
        f.write("# ONNX node tests by operator\n\nWritten by bench/onnx_conformance_report.py from the run in\n"
                "onnx_conformance_{reference,cpu}.tsv (a test counts for every operator its model holds).\n\n"
                f"Totals: reference {totals['reference']}; CPU {totals['cpu']}.\n\n"
                "| operator | tests | pass (reference) | pass (CPU) | refused | fail |\n|---|---|---|---|---|---|\n")
        for op, e in sorted(per_op.items()):
            f.write(f"| {op} | {e['tests']} | {e['pass_reference']} | {e['pass_cpu']} | {e['refused']} | {e['fail']} |\n")
    print(f"per-operator results: {len(per_op)} operators -> bench/results/onnx_conformance.json, onnx_conformance_ops.md")

    refused = {name: short_reason(detail) for name, (status, detail) in ref.items() if status == "unsupported"}
    if update:
        with open(EXPECTED, "w") as f:
            f.write("# ONNX node tests ingot refuses with a clear error, one reason each (written by\n"
                    "# bench/onnx_conformance_report.py --update; scripts/onnx_conformance.sh checks it).\n")
            for name in sorted(refused):
                f.write(f"{name}\t{refused[name]}\n")
        print(f"wrote {len(refused)} expected refusals to {EXPECTED}")
        return 0
    expected = {}
    with open(EXPECTED) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, reason = line.rstrip("\n").split("\t", 1)
            expected[name] = reason
    new = sorted(set(refused) - set(expected))
    fixed = sorted(set(expected) - set(refused))
    for name in new:
        print(f"REGRESSION: {name} is refused and not on the expected list: {refused[name]}")
    for name in fixed:
        print(f"now {ref.get(name, ('missing',))[0]}: {name} (take it off {EXPECTED}: run with --update)")
    print(f"expected refusals: {len(expected)}; refused now: {len(refused)}; new: {len(new)}; no longer refused: {len(fixed)}")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
