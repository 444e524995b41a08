# The test layers, sourced by scripts/check.sh and scripts/test.sh. The markers
# are applied by tests/conftest.py from the fixtures a test reaches (its LAYERS,
# registered in pyproject.toml); the fast layer is every test that reaches none.
# Bytecode: a harness that exports PYTHONDONTWRITEBYTECODE makes every process
# compile agentwrap from source again (each `agentwrap` call a test makes: ~0.4 s
# of CPU more) and pytest rewrite every test module's asserts on every run.
unset PYTHONDONTWRITEBYTECODE
SLOW_LAYERS="tmux or postgres or browser or netns or container or e2e or build"
FAST_LAYER="not ($SLOW_LAYERS)"

# Workers (pytest-xdist) per layer: the fast layer is CPU-bound (one process a
# core); the tmux, PostgreSQL, browser, netns and build layers wait on the
# processes they start, in part (three: not four, their heaviest tests are close to
# a core each: four of the slowest took 171 s of CPU, their whole tree counted, for
# the 193 s they last took on a quiet clean clone); the real agents run one at a
# time: an agent's start is seconds of CPU, and the timing under it is what those
# tests check.
FAST_WORKERS=${AW_FAST_WORKERS:-2}
WAITING_LAYERS="($SLOW_LAYERS) and not e2e"
WAITING_WORKERS=${AW_WAITING_WORKERS:-3}
# The real agents: two processes (AW_E2E_WORKERS changes it; 1: one at a time);
# then the tests marked `timing` (tests/e2e/conftest.py TIMING: a check inside a
# window of time) run afterwards, one at a time. Every e2e test has its own HOME,
# XDG dirs, tmux server, model server port and TMPDIR (tests/e2e/conftest.py), so
# two run at once: two quiet clean-clone runs passed every real-agent test that
# way (Dec 2 2026). On a machine loaded by other work (load 20-33) OpenCode twice
# drew no screen within its 120 s start deadline beside a second agent: there,
# AW_E2E_WORKERS=1.
E2E_WORKERS=${AW_E2E_WORKERS:-2}

# run_e2e [pytest args]: the real agents' layer, in E2E_WORKERS processes, the
# `timing` tests alone after the others.
run_e2e() {
    local rc=0
    if [ "$E2E_WORKERS" -gt 1 ]; then
        LAYER_WORKERS=$E2E_WORKERS run_layer "e2e and not timing" "$@" || rc=$?
        run_layer "e2e and timing" "$@" || rc=$?
    else
        run_layer "e2e" "$@" || rc=$?
    fi
    return "$rc"
}

# [LAYER_WORKERS=N] run_layer EXPR [pytest args]: the tests of the layer EXPR
# selects among the ones the arguments name, in N processes (default one); none
# selected (pytest's exit code 5) is no failure.
run_layer() {
    local expr=$1
    shift
    local rc=0
    local workers=()
    if [ "${LAYER_WORKERS:-1}" -gt 1 ]; then
        # worksteal: a process that runs out of tests takes the rest of another's
        # share, so a layer does not end with one process on its last slow tests
        # while the others wait
        workers=(-n "$LAYER_WORKERS" --dist worksteal)
    fi
    .venv/bin/python -m pytest -p no:cacheprovider -q --durations=40 "${workers[@]}" -m "$expr" "$@" \
        || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "(no test of -m \"$expr\" among these)"
        return 0
    fi
    return "$rc"
}
