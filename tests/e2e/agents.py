"""Locate the real agent CLIs and prepare an isolated first-run state for them.

Installed by ``scripts/install_agents.sh`` into ``$AGENTWRAP_AGENTS_DIR`` (default
``/opt/agentwrap-agents``), with symlinks in ``<dir>/bin``.

``prepare_agent`` writes every state file an agent reads at start into a throwaway
``home`` so that the agent opens straight at its ready prompt, talks only to the
given model server, and never reads or writes the real user's configuration.

Stdlib only; ``mypy --strict`` clean.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENT_NAMES",
    "MODEL_NAMES",
    "AgentLaunch",
    "agents_bin_dir",
    "find_agent",
    "prepare_agent",
]

AGENT_NAMES: tuple[str, ...] = ("claude", "codex", "aider", "gemini")

DEFAULT_AGENTS_DIR = Path("/opt/agentwrap-agents")

# Model names each agent is configured with (the loopback server accepts any).
MODEL_NAMES: dict[str, str] = {
    "claude": "claude-sonnet-4-5",
    "codex": "gpt-5-codex",
    "aider": "openai/agentwrap-model",
    "gemini": "gemini-2.5-flash",
}

_CODEX_KEY_VAR = "AGENTWRAP_CODEX_KEY"


@dataclass(frozen=True)
class AgentLaunch:
    """What to run: argv, the complete environment, and the working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


def agents_bin_dir() -> Path:
    """``$AGENTWRAP_AGENTS_DIR/bin``, or ``/opt/agentwrap-agents/bin``."""
    base = os.environ.get("AGENTWRAP_AGENTS_DIR")
    return (Path(base) if base else DEFAULT_AGENTS_DIR) / "bin"


def find_agent(name: str) -> Path | None:
    """Path of the installed agent executable, or None when it is not installed."""
    if name not in AGENT_NAMES:
        raise ValueError(f"unknown agent {name!r}; expected one of {AGENT_NAMES}")
    path = agents_bin_dir() / name
    if path.exists() and os.access(path, os.X_OK):
        return path
    return None


# --------------------------------------------------------------------------- helpers


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_json(path: Path, data: object) -> None:
    _write(path, json.dumps(data, indent=2) + "\n")


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _base_path(extra: list[Path]) -> str:
    dirs: list[str] = [str(p) for p in extra]
    node = shutil.which("node")
    if node:
        dirs.append(str(Path(node).resolve().parent))
        dirs.append(str(Path(node).parent))
    git = shutil.which("git")
    if git:
        dirs.append(str(Path(git).parent))
    dirs += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    seen: list[str] = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return os.pathsep.join(seen)


def _ensure_git_repo(workdir: Path, env: dict[str, str]) -> None:
    if (workdir / ".git").exists():
        return
    git_env = {
        **env,
        "GIT_AUTHOR_NAME": "agentwrap",
        "GIT_AUTHOR_EMAIL": "agentwrap@localhost",
        "GIT_COMMITTER_NAME": "agentwrap",
        "GIT_COMMITTER_EMAIL": "agentwrap@localhost",
    }
    subprocess.run(
        ["git", "init", "-q", "-b", "main", str(workdir)],
        env=git_env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    readme = workdir / "README.md"
    if not readme.exists():
        readme.write_text("# scratch project for agentwrap tests\n", encoding="utf-8")
    subprocess.run(["git", "-C", str(workdir), "add", "-A"], env=git_env, check=True)
    subprocess.run(
        ["git", "-C", str(workdir), "commit", "-q", "-m", "init"],
        env=git_env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _common_env(home: Path, bin_dirs: list[Path]) -> dict[str, str]:
    env = {
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "LOGNAME": os.environ.get("LOGNAME", os.environ.get("USER", "root")),
        "SHELL": "/bin/bash",
        "PATH": _base_path(bin_dirs),
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "NO_UPDATE_NOTIFIER": "1",
        "NPM_CONFIG_UPDATE_NOTIFIER": "false",
        "DO_NOT_TRACK": "1",
        # keep everything on loopback even if a proxy is configured for the registries
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    _write(
        home / ".gitconfig",
        "[user]\n\tname = agentwrap\n\temail = agentwrap@localhost\n"
        "[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n",
    )
    return env


# --------------------------------------------------------------------------- per agent


def _prepare_claude(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    state: dict[str, object] = {
        "numStartups": 1,
        "autoUpdates": False,
        "theme": "dark",
        "hasSeenTasksHint": True,
        "tipsHistory": {},
        "bypassPermissionsModeAccepted": False,
    }
    if onboarded:
        state["hasCompletedOnboarding"] = True
        state["lastOnboardingVersion"] = "2.1.197"
    if trusted:
        state["projects"] = {
            str(workdir): {
                "allowedTools": [],
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
                "projectOnboardingSeenCount": 1,
            }
        }
    _write_json(home / ".claude.json", state)
    _write_json(home / ".claude" / "settings.json", {"autoUpdates": False})
    env.update(
        {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_AUTH_TOKEN": "agentwrap-test-token",
            "ANTHROPIC_MODEL": MODEL_NAMES["claude"],
            "ANTHROPIC_SMALL_FAST_MODEL": MODEL_NAMES["claude"],
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "0",
        }
    )
    return [str(exe)]


def _prepare_codex(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    codex_home = home / ".codex"
    lines = [
        "check_for_update_on_startup = false",
        "",
    ]
    if onboarded:
        lines[0:0] = [
            f"model = {_toml_str(MODEL_NAMES['codex'])}",
            'model_provider = "agentwrap"',
        ]
    lines += [
        "[features]",
        "daemon_auto_start = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[model_providers.agentwrap]",
        'name = "agentwrap loopback"',
        f"base_url = {_toml_str(url.rstrip('/') + '/v1')}",
        f"env_key = {_toml_str(_CODEX_KEY_VAR)}",
        'wire_api = "responses"',
        "",
    ]
    if trusted:
        lines += [f"[projects.{_toml_str(str(workdir))}]", 'trust_level = "trusted"', ""]
    _write(codex_home / "config.toml", "\n".join(lines))
    env.update(
        {
            "CODEX_HOME": str(codex_home),
            _CODEX_KEY_VAR: "agentwrap-test-key",
        }
    )
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _prepare_aider(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    model = MODEL_NAMES["aider"]
    conf = [
        f"model: {model}",
        f"openai-api-base: {url.rstrip('/')}/v1",
        "openai-api-key: agentwrap-test-key",
        "gitignore: false",
        "show-release-notes: false",
        "check-update: false",
        "analytics: false",
        "auto-commits: false",
        "dirty-commits: false",
        "stream: true",
        "pretty: true",
        "fancy-input: true",
        "suggest-shell-commands: true",
        "detect-urls: false",
        "restore-chat-history: false",
        f"input-history-file: {home / '.aider.input.history'}",
        f"chat-history-file: {home / '.aider.chat.history.md'}",
    ]
    if onboarded:
        conf.append("show-model-warnings: false")
    _write(home / ".aider.conf.yml", "\n".join(conf) + "\n")
    aider_dir = home / ".aider"
    _write_json(
        aider_dir / "analytics.json",
        {
            "uuid": "00000000-0000-4000-8000-000000000000",
            "permanently_disable": True,
            "asked_opt_in": True,
        },
    )
    # A fresh (<24 h) price cache stops aider fetching the price list at start. With
    # onboarded=False it does not name our model, so aider shows its model warning
    # and asks "Open documentation url for more info?".
    bare = model.split("/", 1)[1] if onboarded else "gpt-4o-mini"
    entry = {
        "max_tokens": 16384,
        "max_input_tokens": 128000,
        "max_output_tokens": 16384,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_function_calling": True,
    }
    cache = aider_dir / "caches" / "model_prices_and_context_window.json"
    _write_json(cache, {bare: entry, f"openai/{bare}": entry})
    now = time.time()
    os.utime(cache, (now, now))
    env.update(
        {
            "AIDER_CHECK_UPDATE": "false",
            "AIDER_ANALYTICS": "false",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            # litellm: never fetch the remote model cost map
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _prepare_gemini(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    gem = home / ".gemini"
    settings: dict[str, object] = {
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "security": {
            "folderTrust": {"enabled": not trusted},
        },
        "ui": {"hideTips": False},
        "model": {"name": MODEL_NAMES["gemini"]},
        "ide": {"enabled": False, "hasSeenNudge": True},
    }
    if onboarded:
        sec = settings["security"]
        assert isinstance(sec, dict)
        sec["auth"] = {"selectedType": "gemini-api-key"}
    _write_json(gem / "settings.json", settings)
    env.update(
        {
            "GOOGLE_GEMINI_BASE_URL": url.rstrip("/"),
            "GEMINI_API_KEY": "agentwrap-test-key",
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
    )
    return [str(exe)]


_PREPARERS = {
    "claude": _prepare_claude,
    "codex": _prepare_codex,
    "aider": _prepare_aider,
    "gemini": _prepare_gemini,
}


def prepare_agent(
    name: str,
    home: Path,
    workdir: Path,
    server_url: str,
    *,
    trusted: bool = True,
    onboarded: bool = True,
) -> AgentLaunch:
    """Seed first-run state for ``name`` in ``home`` and return how to launch it.

    ``trusted=False`` leaves the folder-trust dialog to appear (Claude, Codex,
    Gemini; Aider has none). ``onboarded=False`` leaves onboarding to happen
    (Claude: first-run screens; Codex: sign-in screen; Gemini: auth picker;
    Aider: the model-warning question).
    """
    exe = find_agent(name)
    if exe is None:
        raise FileNotFoundError(
            f"agent {name!r} is not installed in {agents_bin_dir()}; run scripts/install_agents.sh"
        )
    home = home.resolve()
    workdir = workdir.resolve()
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    env = _common_env(home, [agents_bin_dir()])
    argv = _PREPARERS[name](exe, home, workdir, server_url, env, trusted, onboarded)
    return AgentLaunch(argv=argv, env=env, cwd=workdir)
