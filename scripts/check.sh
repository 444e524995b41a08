#!/usr/bin/env bash
# The quick checks, in minutes rather than the whole suite's ~40, each stopping
# the run at its first failure: ruff, mypy --strict, the import contracts, and
# the fast layer of the tests (no tmux, no PostgreSQL, no browser, no network
# namespace, no container, no real agent, no wheel build; see tests/conftest.py).
#   bash scripts/check.sh [pytest args]   (the venv first: bash scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/layers.sh
if [ ! -x .venv/bin/python ]; then
    echo "no .venv here: run bash scripts/setup.sh first" >&2
    exit 2
fi

echo "== ruff" >&2
.venv/bin/ruff check agentwrap tests scripts hatch_build.py
echo "== mypy" >&2
.venv/bin/python -m mypy agentwrap
echo "== import contracts" >&2
.venv/bin/lint-imports --no-cache --no-logo
echo "== the fast layer" >&2
LAYER_WORKERS=$FAST_WORKERS run_layer "$FAST_LAYER" "$@"
