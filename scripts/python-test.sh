#!/usr/bin/env bash
# The Python package's tests: a virtual environment in build/python-venv with the build tools
# and test dependencies from PyPI, `pip install .` (scikit-build-core builds the library and the
# nanobind extension in build/python, reusing ccache's objects from build/release), then pytest.
#   INGOT_PY_EXTRAS="jax torch"  also installs those frameworks, so their emitter tests run
#                                (otherwise they are skipped, and pytest -rs says so).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
# shellcheck disable=SC2086
"$py" -m pip install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest ml_dtypes ${INGOT_PY_EXTRAS:-}
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation .
"$py" -m pytest python/tests -q -rs
