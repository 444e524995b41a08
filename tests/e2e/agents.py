"""Locate the real agent CLIs and prepare an isolated first-run state for them.

Installed by ``scripts/install_agents.sh`` into ``$AGENTWRAP_AGENTS_DIR`` (default
``/opt/agentwrap-agents``), with symlinks in ``<dir>/bin``.

``prepare_agent`` writes every state file an agent reads at start into a throwaway
``home`` so that the agent opens straight at its ready prompt, talks only to the
given model server, and never reads or writes the real user's configuration.

Stdlib only; ``mypy --strict`` clean.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENT_NAMES",
    "MODEL_NAMES",
    "MORE_AGENTS",
    "AgentLaunch",
    "agents_bin_dir",
    "find_agent",
    "prepare_agent",
]

AGENT_NAMES: tuple[str, ...] = ("claude", "codex", "aider", "gemini")
# The CLIs added by issue 22: prepared here like the four, tested apart (tests/e2e/
# test_copilot_opencode_qwen.py, test_cline_kimi.py) so the older e2e tests do not run on them.
MORE_AGENTS: tuple[str, ...] = ("copilot", "opencode", "qwen", "cline", "kimi", "pi")

DEFAULT_AGENTS_DIR = Path("/opt/agentwrap-agents")

# Model names each agent is configured with (the loopback server accepts any).
MODEL_NAMES: dict[str, str] = {
    "claude": "claude-sonnet-4-5",
    "codex": "gpt-5-codex",
    "aider": "openai/agentwrap-model",
    "gemini": "gemini-2.5-flash",
    "copilot": "agentwrap-model",
    "opencode": "agentwrap-model",
    "qwen": "agentwrap-model",
    "cline": "agentwrap-model",
    "kimi": "agentwrap-model",
    "pi": "agentwrap-model",
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
    if name not in (*AGENT_NAMES, *MORE_AGENTS):
        raise ValueError(f"unknown agent {name!r}; expected one of {AGENT_NAMES + MORE_AGENTS}")
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


def _prepare_copilot(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    """GitHub Copilot CLI offline against the loopback server (BYOK env). The
    folder-trust dialog is skipped by listing the project in trustedFolders.
    Its first start unpacks ~235 MB into ``COPILOT_PKG_CACHE_HOME``: the one
    ``install_agents.sh`` filled (``<agents dir>/copilot-pkg``) is shared."""
    config: dict[str, object] = {"banner": "never", "beep": False}
    if trusted:
        config["trustedFolders"] = [str(workdir)]
    _write_json(home / ".copilot" / "config.json", config)
    pkg = agents_bin_dir().parent / "copilot-pkg"
    if pkg.is_dir() and os.access(pkg, os.W_OK):
        env["COPILOT_PKG_CACHE_HOME"] = str(pkg)
    env.update(
        {
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": url.rstrip("/") + "/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "agentwrap-test-key",
            "COPILOT_MODEL": MODEL_NAMES["copilot"],
            "COPILOT_PROVIDER_MAX_PROMPT_TOKENS": "128000",
            "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS": "16384",
        }
    )
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _prepare_opencode(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    """OpenCode with one OpenAI-compatible provider (its bundled
    ``@ai-sdk/openai-compatible``: nothing is downloaded). OpenCode runs
    every tool without asking by default (no "permission" here): a test that
    wants its dialog sets agentwrap's ``[run] ask_first`` (or the env var
    ``OPENCODE_PERMISSION``). Its start-up install of a plugin package goes to
    a closed loopback port instead of the npm registry, without npm's retries
    (with a plugin configured, agentwrap's included, OpenCode waits at start
    for that install: npm's retries of a refused connection take ~70 s)."""
    model = MODEL_NAMES["opencode"]
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"agentwrap/{model}",
        "small_model": f"agentwrap/{model}",
        "provider": {
            "agentwrap": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "agentwrap loopback",
                "options": {"baseURL": url.rstrip("/") + "/v1", "apiKey": "agentwrap-test-key"},
                "models": {model: {"name": model}},
            }
        },
    }
    _write_json(home / ".config" / "opencode" / "opencode.json", config)
    env.update(
        {
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "npm_config_registry": "http://127.0.0.1:9/",
            "npm_config_fetch_retries": "0",
        }
    )
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _prepare_qwen(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    """Qwen Code with OpenAI auth against the loopback server. Managed auto
    memory is off: it follows every turn with a model request of its own.
    Auto-update is off (0.15.10 otherwise runs ``npm install -g`` of the
    latest release at start, which needs node 22), and npm's global prefix
    is the throwaway home's in case it runs anyway."""
    settings: dict[str, object] = {
        "$version": 4,
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "security": {"folderTrust": {"enabled": not trusted}},
        "memory": {"enableManagedAutoMemory": False},
        "model": {"name": MODEL_NAMES["qwen"]},
        "ide": {"enabled": False, "hasSeenNudge": True},
    }
    if onboarded:
        sec = settings["security"]
        assert isinstance(sec, dict)
        sec["auth"] = {"selectedType": "openai"}
    _write_json(home / ".qwen" / "settings.json", settings)
    env.update(
        {
            "OPENAI_BASE_URL": url.rstrip("/") + "/v1",
            "OPENAI_API_KEY": "agentwrap-test-key",
            "OPENAI_MODEL": MODEL_NAMES["qwen"],
            "npm_config_prefix": str(home / ".npm-global"),
        }
    )
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _prepare_cline(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    """Cline CLI with its "OpenAI Compatible" provider: the file
    ``cline auth -p openai -k K -m M -b URL`` writes. The ClinePass notice box
    over the composer is turned off by env. Cline runs every tool without
    asking by default: a test that wants its permission dialog adds
    ``--auto-approve false``."""
    providers = {
        "version": 1,
        "lastUsedProvider": "openai-compatible",
        "modes": {},
        "providers": {
            "openai-compatible": {
                "settings": {
                    "provider": "openai-compatible",
                    "apiKey": "agentwrap-test-key",
                    "model": MODEL_NAMES["cline"],
                    "baseUrl": url.rstrip("/") + "/v1",
                },
                "updatedAt": "2026-01-01T00:00:00.000Z",
                "tokenSource": "manual",
            }
        },
    }
    if onboarded:
        _write_json(home / ".cline" / "data" / "settings" / "providers.json", providers)
    env.update({"CLINE_DISABLE_CLINE_PASS_NOTICE": "1", "CLINE_TELEMETRY_DISABLED": "1"})
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _kimi_workdir_key(workdir: Path) -> str:
    """Kimi Code 2.1.0's key for a trusted folder (``encodeWorkDirKey``):
    ``wd_<slug of the last part>_<sha256 of the path, 12 hex>``."""
    path = str(workdir).rstrip("/")
    slug = re.sub(r"[^a-z0-9._-]+", "-", path.rsplit("/", 1)[-1].lower()).strip("-")[:40].strip("-")
    slug = "workspace" if slug in ("", ".", "..") else slug
    return f"wd_{slug}_{hashlib.sha256(path.encode()).hexdigest()[:12]}"


def _prepare_kimi(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    """Kimi Code with one OpenAI provider in ``~/.kimi-code/config.toml``. Its
    "Trust this folder?" dialog is skipped by the trust record it writes
    itself (``workspace-trust/<key>``); auto-upgrade and the feedback survey
    are off in ``tui.toml``."""
    kimi = home / ".kimi-code"
    if onboarded:
        _write(
            kimi / "config.toml",
            'default_model = "agentwrap"\n\n[providers.agentwrap]\ntype = "openai"\n'
            f"base_url = {_toml_str(url.rstrip('/') + '/v1')}\n"
            'api_key = "agentwrap-test-key"\n\n[models.agentwrap]\nprovider = "agentwrap"\n'
            f"model = {_toml_str(MODEL_NAMES['kimi'])}\nmax_context_size = 128000\n",
        )
    _write(
        kimi / "tui.toml",
        'theme = "dark"\ndisable_feedback_survey = true\ncache_expiry_hint = false\n\n'
        "[notifications]\nenabled = false\n\n[upgrade]\nauto_install = false\n",
    )
    if trusted:
        record = {"root": str(workdir), "trustedAt": int(time.time() * 1000)}
        _write_json(kimi / "workspace-trust" / _kimi_workdir_key(workdir), record)
    env["KIMI_CLI_NO_AUTO_UPDATE"] = "1"
    _ensure_git_repo(workdir, env)
    return [str(exe)]


def _prepare_pi(
    exe: Path,
    home: Path,
    workdir: Path,
    url: str,
    env: dict[str, str],
    trusted: bool,
    onboarded: bool,
) -> list[str]:
    """pi with one OpenAI-compatible provider in ``~/.pi/agent/models.json``
    (``"api": "openai-completions"``: Chat Completions) made the default in
    ``settings.json``. ``PI_OFFLINE`` stops its start-up network calls (the
    version check, install telemetry). pi has no folder trust and no
    permission dialogs: every tool runs without asking."""
    agent = home / ".pi" / "agent"
    model = MODEL_NAMES["pi"]
    if onboarded:
        _write_json(agent / "models.json", {"providers": {"agentwrap": {
            "baseUrl": url.rstrip("/") + "/v1",
            "api": "openai-completions",
            "apiKey": "agentwrap-test-key",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": model, "name": model, "reasoning": False,
                        "contextWindow": 128000, "maxTokens": 16384}],
        }}})
    settings: dict[str, object] = {"enableInstallTelemetry": False, "collapseChangelog": True}
    if onboarded:
        settings.update({"defaultProvider": "agentwrap", "defaultModel": model})
    _write_json(agent / "settings.json", settings)
    env.update({"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"})
    _ensure_git_repo(workdir, env)
    return [str(exe)]


_PREPARERS = {
    "claude": _prepare_claude,
    "codex": _prepare_codex,
    "aider": _prepare_aider,
    "gemini": _prepare_gemini,
    "copilot": _prepare_copilot,
    "opencode": _prepare_opencode,
    "qwen": _prepare_qwen,
    "cline": _prepare_cline,
    "kimi": _prepare_kimi,
    "pi": _prepare_pi,
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
