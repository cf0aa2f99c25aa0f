#!/usr/bin/env bash
# Runs the benchmarks in order: QUIC FETCH, catalog LOOKUP, world load.
# Each prints a table and writes bench/out/<name>.json and bench/results/<name>.json.
# Arguments go to all three: --quick (a smoke run; world_load always loads once) and
# --wait-quiet SECONDS (on a shared machine, wait for other processes before each phase).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap
PY=.venv/bin/python
echo "== quic_fetch ==";     "$PY" -m bench.quic_fetch "$@"
echo "== lookup_catalog =="; "$PY" -m bench.lookup_catalog "$@"
echo "== world_load ==";     "$PY" -m bench.world_load "$@"
