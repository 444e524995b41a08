"""What a session was launched with, as the registry keeps it: typed, read once.

``agentwrap run`` records a few facts of the launch in the session's record
(:mod:`agentwrap.sessions.lifecycle` writes them; the registry stores them as
JSON in ``sessions.options``), and many places read them back: the delivery
engine (``require_ack``, the channels that reach a busy agent), the supervisor
(``trust_folder``, its hooks, what becomes of a question nobody answers:
``on_timeout`` / ``answer_timeout_s`` beat the config's ``[answers]``),
``adopt`` (who supervises), ``state`` and the HTTP API (the channels, the
permission gate). Parsed here once, with one
default per field, instead of each reader fishing in a dict with its own.

It lives in the foundation because both :mod:`agentwrap.sessions` (which
stores it) and :mod:`agentwrap.delivery` (a layer below, which reads it through
:class:`agentwrap.delivery.seams.SessionInfo`) need it.

Old rows lack keys added since, a newer agentwrap may write keys this one does
not know, and a value of the wrong type reads as the field's default:
:meth:`SessionOptions.from_json` takes them all. :meth:`SessionOptions.to_json`
gives back the keys it was read from, in their order (unknown ones as stored),
so a record prints as it was written (a value of the wrong type, never written
by agentwrap, as the default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .config import ON_TIMEOUT, AnswersConfig
from .errors import InvalidRunOption

#: The channels of an agent's own hooks: ``hooks`` hand messages over between
#: tool calls and report what the agent does; ``hook-signals`` only report
#: (Kimi Code 2.1.0: its hooks' output never reaches the model).
HOOK_CHANNELS = ("hooks", "hook-signals")


@dataclass(frozen=True)
class SessionOptions:
    """A session's launch options (see the module doc)."""

    #: the agent may trust the project folder without asking (its trust dialog is answered)
    trust_folder: bool = False
    #: every message asks for an ACK; None: the config's ``require_ack`` decides
    require_ack: bool | None = None
    #: who supervises a tmux session: "host" (one process for all) or "process"
    supervisor: str = ""
    #: the native channels registered at launch (hooks, hook-signals, mcp, read-file); None: not
    #: recorded (launched before native channels, or by an older agentwrap)
    channels: tuple[str, ...] | None = None
    #: why a channel was not registered
    channel_notes: tuple[str, ...] = ()
    agent_version: str | None = None  # the agent's version, as probed at launch
    #: set for an agent that runs tools without asking by default (OpenCode): its gate
    permission_gate: str | None = None
    #: Codex on a private app-server (issue 24, ``[run] codex_app_server``): its
    #: socket (``unix:///...``) and pid when the TUI runs on it; None: not asked for
    app_server: str | None = None
    app_server_pid: int | None = None
    #: why the launch fell back to today's (typed, read off the screen) when asked for
    app_server_note: str | None = None
    #: ``run --on-timeout``: "deny" or "leave" a question nobody answered in time;
    #: None: the config's ``[answers] on_timeout`` decides
    on_timeout: str | None = None
    #: ``run --answer-timeout``: seconds a question stays open first (0: never times
    #: out); None: the config's ``[answers] timeout_s``
    answer_timeout_s: float | None = None
    #: the container the agent runs in (issue 39: ``run --container`` / ``--image``), its
    #: engine's program, whether the session started it (``--image``: removed at the
    #: end unless ``--keep``), and whether it is kept
    container: str | None = None
    container_engine: str | None = None
    container_owned: bool = False
    container_keep: bool = False
    #: keys this agentwrap does not know (a newer one's), kept as stored
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the keys as stored, in order (to_json writes them back)
    stored_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def has(self, channel: str) -> bool:
        """Whether ``channel`` (``hooks``, ``mcp``, ``read-file``) was registered."""
        return channel in (self.channels or ())

    def has_hooks(self) -> bool:
        """Whether the agent's hooks were registered (either of :data:`HOOK_CHANNELS`)."""
        return any(self.has(c) for c in HOOK_CHANNELS)

    def answers(self, base: AnswersConfig) -> AnswersConfig:
        """``base`` (the config's ``[answers]`` for this agent) with what the
        session was launched with put over it: the session's value wins."""
        changes: dict[str, Any] = {}
        if self.on_timeout is not None:
            changes["on_timeout"] = self.on_timeout
        if self.answer_timeout_s is not None:
            changes["timeout_s"] = self.answer_timeout_s
        return replace(base, **changes) if changes else base

    def describe_timeout(self) -> str:
        """What ``run --on-timeout`` / ``--answer-timeout`` set for the session
        ("" when neither was given: the config's ``[answers]`` decides)."""
        parts = []
        if self.on_timeout is not None:
            parts.append(f"{self.on_timeout} (run --on-timeout)")
        if self.answer_timeout_s is not None:
            parts.append(f"after {self.answer_timeout_s:g} s (run --answer-timeout)")
        return ", ".join(parts)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SessionOptions:
        """The options in a record's stored JSON (tolerant; see the module doc)."""
        data = data if isinstance(data, Mapping) else {}
        known = {f.name for f in fields(cls)} - {"extra", "stored_keys"}
        return cls(
            trust_folder=_bool(data.get("trust_folder")) or False,
            require_ack=_bool(data.get("require_ack")),
            supervisor=_str(data.get("supervisor")) or "",
            channels=_strings(data.get("channels")),
            channel_notes=_strings(data.get("channel_notes")) or (),
            agent_version=_str(data.get("agent_version")),
            permission_gate=_str(data.get("permission_gate")),
            app_server=_str(data.get("app_server")),
            app_server_pid=_int(data.get("app_server_pid")),
            app_server_note=_str(data.get("app_server_note")),
            on_timeout=on if (on := _str(data.get("on_timeout"))) in ON_TIMEOUT else None,
            answer_timeout_s=_seconds(data.get("answer_timeout_s")),
            container=_str(data.get("container")),
            container_engine=_str(data.get("container_engine")),
            container_owned=_bool(data.get("container_owned")) or False,
            container_keep=_bool(data.get("container_keep")) or False,
            extra={k: v for k, v in data.items() if k not in known},
            stored_keys=tuple(data),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON to store: the keys read (in their order), then every other
        field that differs from its default."""
        values: dict[str, Any] = {
            "trust_folder": self.trust_folder, "require_ack": self.require_ack,
            "supervisor": self.supervisor,
            "channels": None if self.channels is None else list(self.channels),
            "channel_notes": list(self.channel_notes), "agent_version": self.agent_version,
            "permission_gate": self.permission_gate, "app_server": self.app_server,
            "app_server_pid": self.app_server_pid, "app_server_note": self.app_server_note,
            "on_timeout": self.on_timeout, "answer_timeout_s": self.answer_timeout_s,
            "container": self.container, "container_engine": self.container_engine,
            "container_owned": self.container_owned, "container_keep": self.container_keep,
        }
        default = SessionOptions()
        out: dict[str, Any] = {}
        for key in self.stored_keys:
            out[key] = values[key] if key in values else self.extra.get(key)
        for key, value in values.items():
            if key not in out and getattr(self, key) != getattr(default, key):
                out[key] = value
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else None


def timeout_policy(on_timeout: str | None,
                   timeout_s: str | float | None) -> tuple[str | None, float | None]:
    """``run --on-timeout`` and ``--answer-timeout`` as the record keeps them
    (None: not given, the config decides), or :class:`InvalidRunOption` for a
    value they do not take: a policy other than deny/leave, seconds that are
    not a number, negative, or not finite."""
    if on_timeout is not None and on_timeout not in ON_TIMEOUT:
        raise InvalidRunOption(
            f"--on-timeout: must be one of {', '.join(ON_TIMEOUT)}, got {on_timeout!r}",
            hint="--on-timeout deny denies a question nobody answered in --answer-timeout"
            " seconds; leave keeps it open")
    if timeout_s is None:
        return on_timeout, None
    try:
        seconds = float(timeout_s)
    except ValueError:
        raise InvalidRunOption(f"--answer-timeout: not a number of seconds: {timeout_s!r}",
                               hint="e.g. --answer-timeout 300 (0: never)") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidRunOption(
            f"--answer-timeout: must be 0 or more seconds, got {timeout_s!r}",
            hint="e.g. --answer-timeout 300 (0: never)")
    return on_timeout, seconds


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list | tuple):
        return None
    return tuple(str(v) for v in value)


__all__ = ["SessionOptions", "timeout_policy"]
