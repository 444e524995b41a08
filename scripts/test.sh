#!/usr/bin/env bash
# Install everything the whole test suite needs on a fresh Debian machine
# (scripts/setup.sh: tmux, a C compiler for the native pty relay, PostgreSQL,
# Chromium, a venv with agentwrap and its dev extras, the ten real agent CLIs
# at pinned versions), then run it, end-to-end tests included: first the quick
# checks (scripts/check.sh: ruff, mypy, the import contracts, the fast layer),
# so a lint or type error fails in minutes, then the other layers.
#   bash scripts/test.sh [pytest args]
#   bash scripts/test.sh --slow-layers [pytest args]   (only the layers check.sh
#       does not run, without installing: what .ci/run runs after check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/layers.sh

if [ "${1:-}" = "--slow-layers" ]; then
    shift
else
    bash scripts/setup.sh
    bash scripts/check.sh "$@"
fi
# The waiting layers first (minutes, in parallel), then the real agents (the
# longest part: in AW_E2E_WORKERS processes, two by default, with the timing tests
# alone after them); a failure in the first still runs the second.
rc=0
LAYER_WORKERS=$WAITING_WORKERS run_layer "$WAITING_LAYERS" "$@" || rc=$?
run_e2e "$@" || rc=$?
exit "$rc"
