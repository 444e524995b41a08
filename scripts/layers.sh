# The test layers, sourced by scripts/check.sh and scripts/test.sh. The markers
# are applied by tests/conftest.py from the fixtures a test reaches (its LAYERS,
# registered in pyproject.toml); the fast layer is every test that reaches none.
SLOW_LAYERS="tmux or postgres or browser or netns or container or e2e or build"
FAST_LAYER="not ($SLOW_LAYERS)"

# run_layer EXPR [pytest args]: the tests of the layer EXPR selects among the
# ones the arguments name; none selected (pytest's exit code 5) is no failure.
run_layer() {
    local expr=$1
    shift
    local rc=0
    .venv/bin/python -m pytest -p no:cacheprovider -q --durations=25 -m "$expr" "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "(no test of -m \"$expr\" among these)"
        return 0
    fi
    return "$rc"
}
