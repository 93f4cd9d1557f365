# Sourced by the benchmark scripts that time ingot beside its peers (bench_attention.sh,
# bench_vision.sh, onnx_architectures.sh, onnx_models.sh): the peers' virtual environment and
# ingot's current build in build/python-venv.
#
#   bench_env INSTALL PACKAGE...   sets $venv (INGOT_BENCH_VENV, else ~/.cache/ingot-bench-venv),
#                                  creating it if needed; INSTALL=1 pip-installs the packages
#                                  there; then reinstalls ingot from this tree into
#                                  build/python-venv (made by ./scripts/python-test.sh).
bench_env() {
  local install="$1"
  shift
  venv="${INGOT_BENCH_VENV:-$HOME/.cache/ingot-bench-venv}"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if [ "$install" = 1 ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
  fi
  [ -x build/python-venv/bin/python ] || { echo "build/python-venv is missing: run ./scripts/python-test.sh first" >&2; exit 2; }
  build/python-venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation .
}
