#!/usr/bin/env bash
# The main job: installs dependencies, builds ingot and runs its demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
build/release/ingot demo "$@"
