#!/usr/bin/env bash
# Install everything the whole test suite needs on a fresh Debian machine:
# tmux, a C compiler for the native pty relay, PostgreSQL, Chromium and its
# driver, iproute2, Podman + runc + debootstrap (the container layer), a venv with agentwrap and its dev extras, and the ten real
# agent CLIs at pinned versions. scripts/test.sh and .ci/run run it first.
#   bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v script >/dev/null 2>&1 || need_apt+=(bsdutils)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# the dashboard's tests: headless Chromium and its WebDriver, from the distribution
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium chromium-driver)
# the PostgreSQL store's tests start a throwaway server of their own (tests/support/pg.py)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
# the partition tests put a host in a network namespace of its own (ip netns, as root)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
# the secrets test traces every program a session starts (tests/test_secrets.py)
command -v strace >/dev/null 2>&1 || need_apt+=(strace)
# the container layer (issue 39): rootful Podman with runc, and debootstrap for the test
# image (tests/support/container.py writes the containers.conf the tests point
# CONTAINERS_CONF at, in ~/.cache/agentwrap-tests: nothing system-wide changes)
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# engine = "docker" is tested with the Docker CLI against a real dockerd the tests start
# themselves (own roots and socket) and against Podman's Docker API
# (tests/test_containers_docker.py); Debian's docker.io brings dockerd, containerd and
# the CLI; apt never starts the daemon (policy-rc.d below)
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
# libc.a: the statically linked hook client a container's agent runs (hatch_build.py)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || ls /usr/lib/*/libc.a >/dev/null 2>&1 || need_apt+=(libc6-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update -qq
    # no daemon an install brings (dockerd, postgresql) is started: the tests start their own
    no_start=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
        no_start=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    if [ "$no_start" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
# our distribution was called "agentwrap" before it became agentwrap-supervisor (that
# name on PyPI is another project's): an old install in this venv goes first
.venv/bin/python -m pip uninstall -y -q agentwrap >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'

# The real agents: end-to-end tests fail (not skip) in CI when one is missing.
bash scripts/install_agents.sh || echo "warning: some agent CLIs did not install (see above)" >&2
