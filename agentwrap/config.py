"""Configuration: TOML with sensible defaults, layered.

Layers, later wins: built-in defaults, ``~/.config/agentwrap/config.toml``,
the project's ``.agentwrap.toml`` (nearest one from the working directory up),
then ``[profiles.<agent>]`` tables of those files for one agent, then command
line flags. Unknown keys are errors, so a typo never silently does nothing.

Example::

    [run]
    backend = "tmux"            # or "pty"
    relay = "auto"              # pty backend: "native" C relay if built, else "python"
    supervisor = "host"         # tmux: one supervisor process for all sessions, or "process"
    trust_folder = false        # answer folder-trust dialogs automatically
    channels = true             # native hooks + MCP server per launch (run --no-channels)
    codex_hook_trust = "off"    # user config only; "bypass": see agentwrap.sessions.channels
    codex_app_server = true     # Codex's TUI on a private app-server (issue 24); false: typed
    ask_first = false           # start OpenCode, Cline (no permission gate by default) asking first

    [delivery]
    require_ack = true
    backoff_s = [1, 2, 5, 10, 30]
    fallback_after = 3
    steer = "high"              # Codex on its app-server: steer high/critical into a running turn

    [limits]
    rate_per_minute = 20

    [profiles.codex.delivery]
    ack_timeout_s = 10

    [store]                     # user config only; or AGENTWRAP_STORE_URL
    url = "postgresql://aw@db.example/agentwrap?sslmode=verify-full"  # default: SQLite

    [host]                      # user config only; AGENTWRAP_HOST_NAME wins over name
    name = "devbox"             # default: the hostname; how the shared store names this machine
    heartbeat_s = 5.0           # a host silent for 3x this is `unreachable` to the others
    hub_poll_s = 60.0           # joined to a hub: an idle session's look for a lost wake

    [container]                 # user config only: run --container NAME / --image IMAGE
    engine = "podman"           # or "docker"; default: whichever is on PATH
    run_args = ["--network", "host"]  # extra flags of the engine's `run` (--image)
    env = ["ANTHROPIC_BASE_URL"]  # variables handed to the agent inside (by name)

    [serve]                     # user config only
    takeover_idle_s = 120       # a page's "type" mode ends after this long without a key
    public_url = "https://aw.example.net"  # how a phone reaches `serve`: one-tap links use it

    [sessions]                  # user config only
    keep_ended_s = 604800       # an ended session stays listed this long (0: until dismissed)

    [trust]                     # user config only: who may type raw (shells, send --raw)
    raw_sources = ["user"]
    instruction_sources = ["user", "agent:lead"]  # typed as your own words, not quoted data

    [sources]                   # user config only: the only ids a source may send as
    webhook = ["github", "ci"]

    [notify]                    # user config only: when an agent waits for you
    on_waiting_input = "notify-me --json"   # run with the question as JSON on stdin
    renotify_after_s = 300
    urls = ["ntfy://ntfy.sh/my-agents"]      # Apprise URLs: ntfy, tgram, slack, mailto, ...
    events = ["waiting", "failed", "exited", "unreachable"]

    [answers]                   # user config only: a question nobody answers
    on_timeout = "deny"         # or "leave" (the default)
    timeout_s = 900
    link_ttl_s = 900            # a one-tap answer link works this long (once)

    [chat.telegram]             # user config only: `agentwrap chat telegram`, both ways
    token_file = "~/.config/agentwrap/telegram.token"   # 0600; or AGENTWRAP_TELEGRAM_TOKEN
    chat_ids = [123456789]      # the only chats heard (ids, not names)

    [[answer_rules]]            # user config only: answer some questions automatically
    name = "tests"              # (agentwrap.answers.rules says how they are matched)
    agent = "claude"            # profile name (glob)
    tool = "Bash"               # glob, or "re:REGEX"
    command = "npm test*"       # glob (every sub-command must match), or "re:REGEX"
    answer = { option = 1 }     # or { option = "Yes" }, { deny = true }, or "ask"

    [[dashboard.launch]]        # user config only: what the dashboard may start
    name = "web: claude"        # as the page lists it
    profile = "claude"          # the agent (its command, unless `command` says)
    cwd = "~/src/web"           # the folder it runs in
    args = ["--model", "opus"]  # after the command (optional)
    session = "web"             # session name (optional; else from the profile)
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import ConfigError
from .message import QueueLimits, Source
from .paths import Paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT_FILE = ".agentwrap.toml"
RELAY_MODES = ("auto", "native", "python")  # [run] relay: which pty relay copies bytes
# [run] supervisor: who supervises tmux sessions. "host": one long-lived process
# for all of them (a thread each); "process": a process per session.
SUPERVISOR_MODES = ("host", "process")


@dataclass(frozen=True)
class RunConfig:
    backend: str = "tmux"
    trust_folder: bool = False  # opt-in: answer trust dialogs automatically
    cols: int = 160  # size of a detached tmux session
    rows: int = 45
    relay: str = "auto"  # pty backend: "native" (C helper), "python", or "auto" (native if built)
    supervisor: str = "host"  # tmux backend: "host" (one process for all) or "process"
    channels: bool = True  # register the agent's native hooks and MCP server per launch
    # agentwrap's MCP server in each launch: off until a real agent's model has
    # been seen offered and calling its tools (hooks are proven; MCP is not yet)
    mcp: bool = False
    # "bypass": register Codex's hooks with --dangerously-bypass-hook-trust, which
    # also runs *every* untrusted hook of that launch (the person's own, a
    # project's .codex/). "off": Codex gets the MCP server only. User config only.
    codex_hook_trust: str = "off"
    # issue 24: run Codex's TUI on a private app-server (codex --remote) that
    # agentwrap owns: state from the server, messages as turn/start or
    # turn/steer, approvals as replies (docs/codex-app-server.md). On by default;
    # false keeps the launch typed and read off the screen. A Codex without it, or
    # a server that fails, falls back to that launch
    codex_app_server: bool = True
    # start an agent that runs every tool without asking (OpenCode, Cline) in its
    # ask-first mode (the profile's [permissions] ask_first_env or _args); off: no gate
    ask_first: bool = False
    # how often a settled, silent screen is looked at anyway (output, exits and
    # wake-ups are seen at once): higher costs idle sessions less CPU
    idle_tick_s: float = 10.0


@dataclass(frozen=True)
class StoreConfig:
    """[store]: where the queue lives (user config only). Empty: the SQLite
    file of this machine; ``postgresql://...``: a server every host shares
    (libpq's URL; keep the password in ~/.pgpass, not here). The environment's
    AGENTWRAP_STORE_URL wins over it (:func:`agentwrap.queue.open.store_url`)."""

    url: str = ""


@dataclass(frozen=True)
class HostConfig:
    """[host]: this machine in a store several hosts share (user config only).
    ``name``: empty for the hostname (AGENTWRAP_HOST_NAME wins over both;
    :func:`agentwrap.sessions.hosts.host_name`); ``heartbeat_s``: how often
    its supervisors and ``serve`` tell the store it is up."""

    name: str = ""
    heartbeat_s: float = 5.0
    # joined to a hub: how often a settled session looks at the hub's queue
    # anyway; the hub pushes a wake for every message, so this poll only finds
    # one whose wake was lost (lower: such a message waits less; higher: a
    # thousand idle sessions cost the hub less)
    hub_poll_s: float = 60.0


#: [container] engine: the container engines agentwrap runs agents in (issue 39)
CONTAINER_ENGINES = ("docker", "podman")


@dataclass(frozen=True)
class ContainerConfig:
    """[container]: agents run in a container (``run --container NAME`` / ``--image IMAGE``;
    user config only: a project's file must not add mounts or flags to a container).
    ``engine``: docker or podman ("" for whichever is on PATH, podman first);
    ``run_args``: extra flags for the engine's ``run`` (``--image``), e.g. mounts
    or ``--network host``; ``env``: names of variables passed from agentwrap's
    environment to the agent inside (their values never on a command line)."""

    engine: str = ""
    run_args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServeConfig:
    """[serve]: the HTTP server and its dashboard as the world reaches it (user
    config only: a project's file must not lengthen how long a page may type into
    agents, nor point one-tap links elsewhere)."""

    # a page's take-over ("Type") ends after this long without a key: a forgotten
    # tab neither holds the keyboard nor keeps queued messages waiting
    takeover_idle_s: float = 120.0
    public_url: str = ""  # the server's address as a phone opens it (one-tap links are built on it)


@dataclass(frozen=True)
class SessionsConfig:
    """[sessions]: ended sessions kept (user config only: the registry is the
    machine's, a project's file must not forget another project's sessions).
    ``keep_ended_s``: an ended session stays listed (``ls --all``, the page's
    Ended section) with its history and last screen this long, then is
    forgotten; ``agentwrap dismiss NAME`` forgets one at once. 0: kept until dismissed."""

    keep_ended_s: float = 7 * 24 * 3600.0


@dataclass(frozen=True)
class DeliveryConfig:
    readiness_timeout_s: float = 30.0  # no window within this: the attempt failed
    # ... but an agent busy with a tool while its hooks can take the message at
    # the next tool call: the attempt fails only after this long
    busy_channel_timeout_s: float = 600.0
    require_ack: bool = False
    ack_timeout_s: float = 5.0  # after the agent goes quiet
    ack_wording: str = 'Reply "ACK {token}" once you have read this.'
    ack_patterns: tuple[str, ...] = ()  # extra ACK regexes ({token} = batch token)
    backoff_s: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0)
    fallback_after: int = 3  # failed attempts before writing the instruction file (one
    # submitted but never acknowledged goes there at once: it is never typed again)
    notify_on_failure: bool = True
    remove_fallback_on_delivery: bool = True
    typing_grace_ms: int = 1500  # the person typed less than this ago: wait
    max_injection_bytes: int = 10 * 1024
    paste_timeout_s: float = 3.0  # pasted text must show in the box within this
    submit_timeout_s: float = 5.0  # the box must empty / the agent react within this
    # Codex on its app-server (issue 24): which messages are steered into a running
    # turn (turn/steer) instead of waiting for its end: "high" (priority high and
    # critical), "all", or "off"
    steer: str = "high"


@dataclass(frozen=True)
class TrustConfig:
    """Who may have text typed *as is*: into a shell (where a message is a
    command) or with ``send --raw`` (where an agent's own syntax is live).
    Only the user's own config file may set it, never a project's
    ``.agentwrap.toml``: a cloned repository must not grant itself a shell."""

    raw_sources: tuple[str, ...] = ("user",)  # message sources; "user" = a local `send`
    # Whose messages are typed as the person's own words rather than quoted
    # as data: a source ("user": `send`, the dashboard, the API with your
    # token) or one sender of it ("agent:lead", source:source_id). Everything
    # else (webhooks, watchers, other agents) stays data the model weighs.
    instruction_sources: tuple[str, ...] = ("user",)
    # projects (dirs, ~ allowed) whose [[feedback]] and [[schedule]] may run their
    # commands: a cloned repository's .agentwrap.toml must not run anything unasked
    feedback_projects: tuple[str, ...] = ()

    def speaks_for_user(self, source: str, source_id: str) -> bool:
        """Whether a message from ``source`` / ``source_id`` is the person's own words."""
        return source in self.instruction_sources \
            or f"{source}:{source_id}" in self.instruction_sources


@dataclass(frozen=True)
class NotifyConfig:
    """How a person hears that an agent waits for an answer. User config only:
    ``on_waiting_input`` is a command agentwrap runs, and a cloned project's
    ``.agentwrap.toml`` must not make it run anything."""

    on_waiting_input: str = ""  # argv (split like a shell, never run by one); question JSON on stdin
    renotify_after_s: float = 300.0  # the same question still open: tell again (0: never)
    desktop: bool = True  # notify-send, where there is one
    tmux_message: bool = True  # a message on the tmux status line of attached clients
    # push services, as Apprise URLs (ntfy://, tgram://, slack://, mailto://, ...): they
    # hold secrets, so they are never printed (agentwrap.delivery.notices.redact)
    urls: tuple[str, ...] = ()
    # which events reach the urls: waiting (for an answer), failed (a message escalated
    # or failed), exited (an agent exited unexpectedly), unreachable (a host went silent)
    events: tuple[str, ...] = ("waiting", "failed", "exited", "unreachable")
    send_timeout_s: float = 10.0  # one send to one service gives up after this (then retried)


@dataclass(frozen=True)
class AnswersConfig:
    """``[answers]``: what becomes of a question nobody answers, and how long a
    one-tap link answers one (user config only)."""

    # after timeout_s with no answer: "deny" (the dialog's deny keys, recorded as an
    # answer of rule "on_timeout") or "leave" it open; an "ask" rule still leaves it
    on_timeout: str = "leave"
    timeout_s: float = 0.0  # 0: never
    link_ttl_s: float = 900.0  # a one-tap answer link (agentwrap.answers.links) expires after this long


@dataclass(frozen=True)
class TelegramConfig:
    """``[chat.telegram]``: the Telegram bridge (``agentwrap chat telegram``). User
    config only: it names the chats whose buttons approve commands. The token is
    read from ``token_file`` (0600) or ``AGENTWRAP_TELEGRAM_TOKEN``, never kept here."""

    token_file: str = ""  # the bot token BotFather gave, one line, chmod 600
    chat_ids: tuple[int, ...] = ()  # the only chats heard; others are ignored and logged
    api_url: str = "https://api.telegram.org"  # the Bot API's address (a local Bot API server)
    poll_timeout_s: float = 25.0  # getUpdates' long poll (Telegram holds it this long)


@dataclass(frozen=True)
class ContinuityConfig:
    """The handoff from one session to the next in a project (agentwrap.continuity)."""

    enabled: bool = True  # deliver the previous session's handoff at `agentwrap run`
    max_bytes: int = 4096  # bound of the startup context made from it
    keep: int = 10  # records kept per project


@dataclass(frozen=True)
class FeedbackOptions:
    """``[feedback_options]``: how much feedback one turn may take (agentwrap.feedback)."""

    budget_tokens: int = 1000  # per turn, all sources together (~4 characters a token)
    debounce_ms: int = 300  # a burst of file changes ends after this much quiet


@dataclass(frozen=True)
class CommandTable:
    """One ``[[feedback]]`` or ``[[schedule]]`` table as written, and the file it
    came from; :mod:`agentwrap.feedback.sources` checks and applies it."""

    origin: Path
    user: bool  # from the person's own config file (else a project's)
    data: Mapping[str, Any]


@dataclass(frozen=True)
class AnswerRule:
    """One ``[[answer_rules]]`` entry: which questions it answers, and how.

    Matched by :func:`agentwrap.answers.rules.decide`. User config only: a
    cloned project's ``.agentwrap.toml`` must not approve its own commands.
    """

    name: str  # shown in the audit log and the announcement
    agent: str = "*"  # profile name: glob, or "re:REGEX"
    kind: str = "*"  # permission, choice, confirm, trust, text
    tool: str = "*"
    command: str = "*"  # "*" also matches a question without a command
    option: int | str | None = None  # answer: pick this option (number as shown, or label)
    deny: bool = False  # answer: the dialog's deny keys
    ask: bool = False  # never answered by a rule: a deny-list entry of the user's own
    after_s: float = 0.0  # only once the question has been open this long (answer on timeout)

    @property
    def approves(self) -> bool:
        """Picks an option (which may say yes): the built-in deny-list can veto it."""
        return self.option is not None


@dataclass(frozen=True)
class LaunchChoice:
    """One ``[[dashboard.launch]]`` entry: a session the dashboard may start
    (``run --detach``). User config only, and the page picks an entry by name,
    never sends a command: a page or a token holder can start only what the
    person listed here."""

    name: str
    cwd: str  # as written (~ allowed); checked when the session starts
    profile: str | None = None
    command: str | None = None  # the program; default: the profile's command
    args: tuple[str, ...] = ()
    session: str | None = None

    @property
    def folder(self) -> Path:
        return Path(self.cwd).expanduser()


@dataclass(frozen=True)
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    delivery: DeliveryConfig = field(default_factory=DeliveryConfig)
    limits: QueueLimits = field(default_factory=QueueLimits)
    store: StoreConfig = field(default_factory=StoreConfig)
    host: HostConfig = field(default_factory=HostConfig)
    container: ContainerConfig = field(default_factory=ContainerConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    sessions: SessionsConfig = field(default_factory=SessionsConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    answers: AnswersConfig = field(default_factory=AnswersConfig)
    continuity: ContinuityConfig = field(default_factory=ContinuityConfig)
    # [sources]: per source, the only source ids it may send as (webhook =
    # ["github", "ci"]); a source not named is not restricted. User config only.
    source_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    answer_rules: tuple[AnswerRule, ...] = ()  # [[answer_rules]], in order; user config only
    launch: tuple[LaunchChoice, ...] = ()  # [[dashboard.launch]]; user config only
    telegram: TelegramConfig | None = None  # [chat.telegram]; user config only
    feedback_options: FeedbackOptions = field(default_factory=FeedbackOptions)
    feedback: tuple[CommandTable, ...] = ()  # [[feedback]] of both files, user's first
    schedules: tuple[CommandTable, ...] = ()  # [[schedule]], likewise
    sources: tuple[Path, ...] = ()
    profile_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def for_profile(self, profile: str) -> Config:
        """This config with ``[profiles.<profile>]`` applied on top."""
        override = self.profile_overrides.get(profile)
        if not override:
            return self
        return _apply(self, override, f"profiles.{profile}")


_SECTIONS = {
    "run": RunConfig, "delivery": DeliveryConfig, "limits": QueueLimits, "store": StoreConfig,
    "host": HostConfig, "container": ContainerConfig, "trust": TrustConfig,
    "notify": NotifyConfig, "answers": AnswersConfig, "serve": ServeConfig,
    "sessions": SessionsConfig,
    "continuity": ContinuityConfig, "feedback_options": FeedbackOptions,
}
COMMAND_TABLES = ("feedback", "schedule")  # arrays of tables, checked by agentwrap.feedback
USER_ONLY_SECTIONS = ("trust", "sources", "notify", "answer_rules", "dashboard", "store",
                      "host", "chat", "answers", "serve", "container", "sessions")  # never from a project's file
USER_ONLY_KEYS = (("run", "codex_hook_trust"),)  # keys of other sections, likewise
CODEX_HOOK_TRUST = ("off", "bypass")
STEER_MODES = ("off", "high", "all")
ON_TIMEOUT = ("deny", "leave")
NOTIFY_EVENTS = ("waiting", "failed", "exited", "unreachable")


def _coerce(value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, got {value!r}")
        return value
    if isinstance(default, int) and not isinstance(default, bool):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{where}: must be a whole number >= 0, got {value!r}")
        return value
    if isinstance(default, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{where}: must be a number >= 0, got {value!r}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string, got {value!r}")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: must be a list, got {value!r}")
        kind = type(default[0]) if default else str
        items = [_coerce(v, kind() if kind is not float else 0.0, f"{where}[]") for v in value]
        return tuple(items)
    raise ConfigError(f"{where}: unsupported value {value!r}")  # pragma: no cover


def _apply(cfg: Config, data: Mapping[str, Any], where: str) -> Config:
    for section, value in data.items():
        if section == "profiles" and where == "":
            continue
        if section == "sources":
            cfg = replace(cfg, source_ids=_source_ids(value, dotted_section(where, section)))
            continue
        if section in COMMAND_TABLES:
            if where:
                raise ConfigError(f"{where}: [[{section}]] is set at the top level")
            if not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value):
                raise ConfigError(f"{section}: must be an array of tables ([[{section}]])")
            continue  # kept with their file by load_config
        if section == "answer_rules":
            if where:
                raise ConfigError(f"{where}: [[answer_rules]] are set at the top level",
                                  hint='name the agent in the rule: agent = "claude"')
            cfg = replace(cfg, answer_rules=_answer_rules(value))
            continue
        if section == "dashboard":
            if where:
                raise ConfigError(f"{where}: [dashboard] is set at the top level")
            cfg = replace(cfg, launch=_launch_choices(value))
            continue
        if section == "chat":
            if where:
                raise ConfigError(f"{where}: [chat] is set at the top level")
            cfg = replace(cfg, telegram=_chat(value))
            continue
        if section in ("store", "host") and where:
            raise ConfigError(f"{where}: [{section}] is set at the top level",
                              hint="every agent of a machine shares one store and one host name")
        if section not in _SECTIONS:
            raise ConfigError(
                f"{where or 'config'}: unknown section [{section}]",
                hint=f"known sections: {', '.join(_SECTIONS)}, profiles",
            )
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}{section}: must be a table")
        current = getattr(cfg, section)
        known = {f.name for f in fields(current)}
        changes = {}
        for key, v in value.items():
            dotted = f"{where + '.' if where else ''}{section}.{key}"
            if key not in known:
                raise ConfigError(
                    f"{dotted}: unknown key", hint=f"known keys: {', '.join(sorted(known))}"
                )
            changes[key] = _coerce(v, getattr(current, key), dotted)
        if section == "serve" and changes.get("public_url"):
            _check_public_url(changes["public_url"])
        if section == "answers" and "link_ttl_s" in changes and changes["link_ttl_s"] < 10:
            raise ConfigError(f"answers.link_ttl_s: must be at least 10, got {changes['link_ttl_s']!r}")
        if section == "run" and changes.get("backend", "tmux") not in ("tmux", "pty"):
            raise ConfigError(f"run.backend: must be 'tmux' or 'pty', got {changes['backend']!r}")
        if section == "notify" and changes.get("on_waiting_input"):
            try:
                shlex.split(changes["on_waiting_input"])
            except ValueError as exc:
                raise ConfigError(f"notify.on_waiting_input: cannot split it into words: {exc}",
                                  hint="quote it like a shell command line") from None
        if section == "notify":
            _check_notify(changes, dotted_section(where, section))
        if section == "answers" and changes.get("on_timeout", "leave") not in ON_TIMEOUT:
            raise ConfigError(f"{dotted_section(where, section)}.on_timeout: must be one of"
                              f" {', '.join(ON_TIMEOUT)}, got {changes['on_timeout']!r}")
        if section == "trust":
            _check_sources(changes.get("raw_sources", ()), f"{dotted_section(where, section)}.raw_sources")
            _check_sources(tuple(n.split(":", 1)[0] for n in changes.get("instruction_sources", ())),
                           f"{dotted_section(where, section)}.instruction_sources")
        if section == "run" and changes.get("supervisor", "host") not in SUPERVISOR_MODES:
            raise ConfigError(
                f"run.supervisor: must be one of {', '.join(SUPERVISOR_MODES)},"
                f" got {changes['supervisor']!r}"
            )
        if section == "run" and changes.get("codex_hook_trust", "off") not in CODEX_HOOK_TRUST:
            raise ConfigError(
                f"run.codex_hook_trust: must be one of {', '.join(CODEX_HOOK_TRUST)},"
                f" got {changes['codex_hook_trust']!r}"
            )
        if section == "delivery" and changes.get("steer", "off") not in STEER_MODES:
            raise ConfigError(
                f"{dotted_section(where, section)}.steer: must be one of"
                f" {', '.join(STEER_MODES)}, got {changes['steer']!r}"
            )
        if section == "serve" and changes.get("takeover_idle_s", 1.0) <= 0:
            raise ConfigError("serve.takeover_idle_s: must be more than 0,"
                              f" got {changes['takeover_idle_s']!r}")
        if section == "container" and changes.get("engine", "") not in ("", *CONTAINER_ENGINES):
            raise ConfigError(f"container.engine: must be one of {', '.join(CONTAINER_ENGINES)},"
                              f" got {changes['engine']!r}", hint="or leave it out: found on PATH")
        if section == "host" and changes.get("heartbeat_s", 1.0) < 0.1:
            raise ConfigError(f"host.heartbeat_s: must be at least 0.1, got {changes['heartbeat_s']!r}")
        if section == "host" and changes.get("hub_poll_s", 1.0) < 1.0:
            raise ConfigError(f"host.hub_poll_s: must be at least 1, got {changes['hub_poll_s']!r}")
        if section == "run" and changes.get("idle_tick_s", 1.0) < 0.5:
            raise ConfigError(f"run.idle_tick_s: must be at least 0.5, got {changes['idle_tick_s']!r}")
        if section == "run" and changes.get("relay", "auto") not in RELAY_MODES:
            raise ConfigError(
                f"run.relay: must be one of {', '.join(RELAY_MODES)}, got {changes['relay']!r}"
            )
        cfg = replace(cfg, **{section: replace(current, **changes)})
    return cfg


def _check_public_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"serve.public_url: must be http(s)://HOST[:PORT][/PATH], got {url!r}",
                          hint='e.g. public_url = "https://aw.example.net"')


def dotted_section(where: str, section: str) -> str:
    return f"{where + '.' if where else ''}{section}"


def _check_notify(changes: Mapping[str, Any], where: str) -> None:
    """``[notify] urls`` look like URLs (shown redacted: they hold secrets) and
    ``events`` are known kinds."""
    for i, url in enumerate(changes.get("urls", ())):
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
            raise ConfigError(f"{where}.urls[{i}]: not an Apprise URL (SCHEME://...)",
                              hint="e.g. ntfy://ntfy.sh/my-topic; see the notifications docs")
    for kind in changes.get("events", ()):
        if kind not in NOTIFY_EVENTS:
            raise ConfigError(f"{where}.events: unknown event {kind!r}",
                              hint=f"known events: {', '.join(NOTIFY_EVENTS)}")


def _check_sources(names: tuple[str, ...], where: str) -> None:
    known = [s.value for s in Source if s is not Source.SYSTEM]
    for name in names:
        if name not in known:
            raise ConfigError(f"{where}: unknown source {name!r}", hint=f"one of: {', '.join(known)}")


def _source_ids(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a table, e.g. webhook = [\"github\", \"ci\"]")
    _check_sources(tuple(value), where)
    out: dict[str, tuple[str, ...]] = {}
    for source, ids in value.items():
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise ConfigError(f"{where}.{source}: must be a list of source ids, got {ids!r}")
        out[source] = tuple(ids)
    return out


_RULE_KEYS = ("name", "agent", "kind", "tool", "command", "answer", "after_s")


def check_matcher(value: Any, where: str) -> str:
    """A glob, or ``re:`` and a regular expression that compiles."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a glob or 're:REGEX', got {value!r}")
    if value.startswith("re:"):
        try:
            re.compile(value[3:])
        except re.error as exc:
            raise ConfigError(f"{where}: not a regular expression: {exc}") from None
    return value


def _answer_rules(value: Any) -> tuple[AnswerRule, ...]:
    if not isinstance(value, list):
        raise ConfigError("answer_rules: must be an array of tables ([[answer_rules]])")
    rules = []
    for i, table in enumerate(value):
        where = f"answer_rules[{i}]"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: must be a table")
        unknown = sorted(set(table) - set(_RULE_KEYS))
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key",
                              hint=f"known keys: {', '.join(_RULE_KEYS)}")
        name = table.get("name", where)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.name: must be a string")
        agent, kind, tool, command = (
            check_matcher(table.get(k, "*"), f"{where}.{k}")
            for k in ("agent", "kind", "tool", "command"))
        after = _coerce(table.get("after_s", 0.0), 0.0, f"{where}.after_s")
        answer = table.get("answer")
        rule = AnswerRule(name=name, agent=agent, kind=kind, tool=tool, command=command,
                          after_s=after)
        if answer == "ask":
            rule = replace(rule, ask=True)
        elif isinstance(answer, Mapping) and len(answer) == 1 and "option" in answer:
            option = answer["option"]
            if isinstance(option, bool) or not isinstance(option, (int, str)) or option == "":
                raise ConfigError(f"{where}.answer.option: a number or a label, got {option!r}")
            rule = replace(rule, option=option)
        elif isinstance(answer, Mapping) and dict(answer) == {"deny": True}:
            rule = replace(rule, deny=True)
        else:
            raise ConfigError(
                f"{where}.answer: must be {{ option = N }}, {{ option = \"label\" }},"
                f" {{ deny = true }} or \"ask\", got {answer!r}")
        rules.append(rule)
    return tuple(rules)


_LAUNCH_KEYS = ("name", "cwd", "profile", "command", "args", "session")


def _chat(value: Any) -> TelegramConfig | None:
    if not isinstance(value, Mapping) or set(value) - {"telegram"}:
        raise ConfigError("chat: only [chat.telegram] may be set there")
    table = value.get("telegram")
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError("chat.telegram: must be a table")
    known = {f.name for f in fields(TelegramConfig)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"chat.telegram.{unknown[0]}: unknown key",
                          hint=f"known keys: {', '.join(sorted(known))}")
    ids = table.get("chat_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in ids):
        raise ConfigError("chat.telegram.chat_ids: must be a list of chat ids (whole numbers)",
                          hint="e.g. chat_ids = [123456789]; a group's id is negative")
    base = TelegramConfig()
    url = _coerce(table.get("api_url", base.api_url), base.api_url, "chat.telegram.api_url")
    if not url.startswith(("https://", "http://")):
        raise ConfigError(f"chat.telegram.api_url: must be an http(s) URL, got {url!r}")
    return TelegramConfig(
        token_file=_coerce(table.get("token_file", ""), "", "chat.telegram.token_file"),
        chat_ids=tuple(ids), api_url=url.rstrip("/"),
        poll_timeout_s=_coerce(table.get("poll_timeout_s", base.poll_timeout_s),
                               base.poll_timeout_s, "chat.telegram.poll_timeout_s"))


def _launch_choices(value: Any) -> tuple[LaunchChoice, ...]:
    if not isinstance(value, Mapping) or set(value) - {"launch"}:
        raise ConfigError("dashboard: only [[dashboard.launch]] entries may be set there")
    tables = value.get("launch", [])
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise ConfigError("dashboard.launch: must be an array of tables ([[dashboard.launch]])")
    out: list[LaunchChoice] = []
    for i, table in enumerate(tables):
        where = f"dashboard.launch[{i}]"
        unknown = sorted(set(table) - set(_LAUNCH_KEYS))
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key",
                              hint=f"known keys: {', '.join(_LAUNCH_KEYS)}")
        text = {k: table.get(k) for k in ("name", "cwd", "profile", "command", "session")}
        for key, v in text.items():
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise ConfigError(f"{where}.{key}: must be a non-empty string, got {v!r}")
        if text["name"] is None or text["cwd"] is None:
            raise ConfigError(f"{where}: needs a name and a cwd")
        if text["profile"] is None and text["command"] is None:
            raise ConfigError(f"{where}: needs a profile or a command",
                              hint='e.g. profile = "claude"')
        args = table.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}.args: must be a list of strings, got {args!r}")
        if any(c.name == text["name"] for c in out):
            raise ConfigError(f"{where}.name: {text['name']!r} is listed twice")
        out.append(LaunchChoice(name=str(text["name"]), cwd=str(text["cwd"]),
                                profile=text["profile"], command=text["command"],
                                args=tuple(args), session=text["session"]))
    return tuple(out)


def _user_only(data: Mapping[str, Any], path: Path) -> None:
    """A project's file may not set what only the user may decide."""
    tables = [("", data)] + [
        (f"profiles.{name}.", table) for name, table in dict(data.get("profiles") or {}).items()
        if isinstance(table, Mapping)
    ]
    for prefix, table in tables:
        for section in USER_ONLY_SECTIONS:
            if section in table:
                raise ConfigError(
                    f"{path}: [{prefix}{section}] may only be set in your own config file",
                    hint="a project's .agentwrap.toml cannot grant trust; move it to"
                    " ~/.config/agentwrap/config.toml",
                )
        for section, key in USER_ONLY_KEYS:
            if isinstance(table.get(section), Mapping) and key in table[section]:
                raise ConfigError(
                    f"{path}: {prefix}{section}.{key} may only be set in your own config file",
                    hint="a project's .agentwrap.toml cannot turn off an agent's safeguards;"
                    " move it to ~/.config/agentwrap/config.toml",
                )


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def find_project_file(start: Path) -> Path | None:
    for d in [start, *start.parents]:
        candidate = d / PROJECT_FILE
        if candidate.is_file():
            return candidate
        if (d / ".git").exists():
            break
    return None


def _file_bytes(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


class ConfigCache:
    """:func:`load_config` for a long-lived process that needs the config as
    it is *now* on every call (the HTTP server checks ``[sources]`` and
    ``[trust]`` per message), without parsing TOML each time. The files are
    found and read on every call (small files: microseconds) and parsed again
    only when their bytes differ from the last parse. Bytes, not mtimes: two
    edits within one timestamp tick must not leave a stale trust setting."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._cached: dict[Path, tuple[tuple[object, ...], Config]] = {}

    def load(self, cwd: Path) -> Config:
        project = find_project_file(cwd)
        key = (project, _file_bytes(self.paths.config_file), _file_bytes(project))
        hit = self._cached.get(cwd)
        if hit is not None and hit[0] == key:
            return hit[1]
        cfg = load_config(self.paths, cwd)
        if len(self._cached) > 64:  # many projects: keep it bounded
            self._cached.clear()
        self._cached[cwd] = (key, cfg)
        return cfg


def load_config(paths: Paths, cwd: Path | None = None) -> Config:
    cfg = Config()
    overrides: dict[str, dict[str, Any]] = {}
    sources: list[Path] = []
    tables: dict[str, list[CommandTable]] = {k: [] for k in COMMAND_TABLES}
    files = [paths.config_file]
    project = find_project_file(cwd or Path.cwd())
    if project is not None:
        files.append(project)
    for path in files:
        if not path.is_file():
            continue
        data = _read(path)
        if path != paths.config_file:
            _user_only(data, path)
        try:
            cfg = _apply(cfg, data, "")
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from None
        profiles = data.get("profiles", {})
        if not isinstance(profiles, Mapping):
            raise ConfigError(f"{path}: [profiles] must be a table of tables")
        for name, table in profiles.items():
            try:  # validate now, in the file that says it, not at first use
                _apply(cfg, table, f"profiles.{name}")
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from None
            overrides.setdefault(name, {}).update(table)
        for key in COMMAND_TABLES:
            tables[key] += [CommandTable(path, path == paths.config_file, t)
                            for t in data.get(key, ())]
        sources.append(path)
    return replace(cfg, sources=tuple(sources), profile_overrides=overrides,
                   feedback=tuple(tables["feedback"]), schedules=tuple(tables["schedule"]))
