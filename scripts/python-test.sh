#!/usr/bin/env bash
# The Python package's tests: a virtual environment in build/python-venv with the build tools
# and test dependencies from PyPI, `pip install .` (scikit-build-core builds the library and the
# nanobind extension in build/python, reusing ccache's objects from build/release), then pytest.
#   INGOT_PY_EXTRAS="jax torch mlx[cpu]"  also installs those frameworks, so their emitter tests run
#                                (otherwise they are skipped, and pytest -rs says so).
#   INGOT_PY_FRAMEWORKS_FROM=DIR  uses the frameworks already installed in the virtual
#                                environment DIR (e.g. ~/.cache/ingot-bench-venv, which
#                                scripts/bench.sh fills) instead of downloading them: the tests
#                                run in build/python-venv-frameworks, whose own packages (ingot,
#                                numpy) come first and DIR's site-packages after them (a .pth file).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/python-venv
frameworks="${INGOT_PY_FRAMEWORKS_FROM:-}"
if [ -n "$frameworks" ]; then
  [ -x "$frameworks/bin/python" ] || { echo "INGOT_PY_FRAMEWORKS_FROM=$frameworks is not a virtual environment" >&2; exit 2; }
  venv=build/python-venv-frameworks
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
if [ -n "$frameworks" ]; then
  site() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
  site "$frameworks/bin/python" >"$(site "$py")/ingot_test_frameworks.pth"
fi
# shellcheck disable=SC2086
# onnx: its helpers write the import tests' models, and its wheel carries ONNX's node tests
# (python/tests/test_onnx.py runs them through ml.onnx.load).
"$py" -m pip install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest ml_dtypes onnx==1.22.0 jinja2 pyyaml ${INGOT_PY_EXTRAS:-}
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation .
"$py" -m pytest python/tests -q -rs
