#!/usr/bin/env bash
# Install agentwrap for this user on Debian/Ubuntu: tmux (and, as root, a C
# compiler for the pty backend's native relay) from apt when missing,
# agentwrap in its own venv, and the `agentwrap` command on PATH.
#   bash scripts/install.sh            (as root: /usr/local/bin/agentwrap)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

need_apt=()
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
    # Optional: without it the pty backend relays in Python (slower on floods).
    if [ "$(id -u)" -eq 0 ]; then
        need_apt+=(gcc libc6-dev)
    else
        echo "note: no C compiler; the pty backend will use its Python relay" \
             "(sudo apt-get install -y gcc, then re-run this script, for the native one)" >&2
    fi
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing: ${need_apt[*]}; install them with: sudo apt-get install -y ${need_apt[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

venv=${AGENTWRAP_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/agentwrap/venv}
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
# our distribution was called "agentwrap" before it became agentwrap-supervisor (that
# name on PyPI is another project's): an old install in this venv goes first
"$venv/bin/python" -m pip uninstall -y -q agentwrap >/dev/null 2>&1 || true
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$here"

if [ "$(id -u)" -eq 0 ]; then bindir=/usr/local/bin; else bindir=$HOME/.local/bin; fi
mkdir -p "$bindir"
ln -sfn "$venv/bin/agentwrap" "$bindir/agentwrap"
echo "installed: $bindir/agentwrap ($("$venv/bin/agentwrap" --version))" >&2
case ":$PATH:" in *":$bindir:"*) ;; *) echo "add $bindir to your PATH" >&2 ;; esac
