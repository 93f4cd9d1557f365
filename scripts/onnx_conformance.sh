#!/usr/bin/env bash
# ONNX's official node tests (the data in the onnx==1.22.0 wheel: one model and its inputs and
# expected outputs per test) through ingot::onnx::load, on the reference interpreter (all 1,765)
# and on the native CPU backend (every test the reference passes), with ONNX's tolerances; then
# the nine real architectures the wheel ships (onnx/backend/test/data/light) on both backends.
#   1. installs onnx==1.22.0 into the benchmark environment ($INGOT_BENCH_VENV, default
#      ~/.cache/ingot-bench-venv) for its test data;
#   2. builds build/release's ingot_onnx_conformance and runs it twice;
#   3. writes bench/results/onnx_conformance_{reference,cpu}.tsv (test, pass|fail|error|unsupported,
#      why) and bench/results/onnx_real_models_{reference,cpu}.tsv, and prints the counts;
#   4. bench/onnx_conformance_report.py: per-operator results in bench/results/onnx_conformance.json,
#      and the refused tests checked against bench/onnx_expected_refusals.tsv (one reason each: a
#      test refused that is not listed, or listed and now passing, fails the script).
# CI runs a representative part through pytest instead (python/tests/test_onnx.py: every test
# listed in python/tests/onnx_node_tests_passing.txt on the reference backend, the first of each
# operator's on the CPU backend). Exit status 1 when a test fails or errors.
#
#   ./scripts/onnx_conformance.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${INGOT_BENCH_VENV:-$HOME/.cache/ingot-bench-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
[ "${1:-}" = --no-install ] || "$venv/bin/python" -m pip install -q --disable-pip-version-check onnx==1.22.0
data="$("$venv/bin/python" -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node"))')"
scripts/build.sh release >/dev/null
mkdir -p bench/results
status=0
build/release/ingot_onnx_conformance "$data" --backend reference --report bench/results/onnx_conformance_reference.tsv || status=1
grep -P "\tpass\t" bench/results/onnx_conformance_reference.tsv | cut -f1 >build/release/onnx_reference_passing.txt
build/release/ingot_onnx_conformance "$data" --backend cpu --list build/release/onnx_reference_passing.txt \
  --report bench/results/onnx_conformance_cpu.tsv || status=1
for b in reference cpu; do
  build/release/ingot_onnx_conformance "$data/../light" --backend $b --report bench/results/onnx_real_models_$b.tsv || status=1
done
# Per-operator results (bench/results/onnx_conformance.json) and the expected-refusal list check.
"$venv/bin/python" bench/onnx_conformance_report.py "$data" || status=1
echo "unsupported, by reason (reference backend):"
grep -P "\tunsupported\t" bench/results/onnx_conformance_reference.tsv | cut -f3 |
  sed -E 's/^[^:]*\.onnx: //; s/ONNX node [^:]*\(([A-Za-z]+)\): /\1: /' | cut -c1-90 | sort | uniq -c | sort -rn | head -25
exit $status
