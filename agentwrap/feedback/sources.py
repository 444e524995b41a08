"""What ``[[feedback]]`` and ``[[schedule]]`` tables mean, and which may run.

Trust. A table runs a command, so where it comes from matters: the person's
own config file is theirs, but a project's ``.agentwrap.toml`` arrives with a
``git clone``. A project's tables (a preset too: ``pytest`` imports the
project's ``conftest.py``) run only when the person's config names the
project in ``[trust] feedback_projects``; otherwise they are left out and
:attr:`Selection.skipped` says why, so ``agentwrap watch`` and the session log
can tell the person what to add. Commands typed on the command line
(``agentwrap watch --run``) are the person's own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from ..config import CommandTable, Config
from ..errors import ConfigError
from ..message import Priority
from .presets import PRESETS

TRIGGERS = ("edit", "watch", "start")
ROLES = ("environment", "user")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_FEEDBACK_KEYS = ("name", "preset", "run", "on", "paths", "priority", "timeout_s",
                  "max_output", "role")
_SCHEDULE_KEYS = ("name", "run", "every", "session", "priority", "timeout_s", "max_output",
                  "role")
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_OUTPUT = 64 * 1024


@dataclass(frozen=True)
class FeedbackSource:
    """One check: its command (argv words, ``{files}`` an item of its own),
    when it runs and on which files."""

    name: str
    argv: tuple[str, ...]
    on: frozenset[str] = frozenset({"edit", "watch"})
    paths: tuple[str, ...] = ()  # gitignore-style globs; () = every file
    priority: Priority = Priority.HIGH  # of failures; recoveries are normal
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output: int = DEFAULT_MAX_OUTPUT  # bytes kept of stdout+stderr
    role: str = "environment"
    no_files: str = "."  # {files} of a run without files
    per_file: bool = True
    origin: str = "command line"
    _spec: pathspec.GitIgnoreSpec | None = field(default=None, compare=False, repr=False)

    def matches(self, rel: str) -> bool:
        """Whether a changed file (relative, '/'-separated) concerns this source."""
        if not self.paths:
            return True
        spec = self._spec or pathspec.GitIgnoreSpec.from_lines(self.paths)
        return spec.match_file(rel)

    def command(self, files: list[str]) -> list[str]:
        """The argv of a run on ``files``: ``{files}`` expands to one item per
        file (never through a shell, so a file name is never a command)."""
        out: list[str] = []
        for word in self.argv:
            if word == "{files}":
                out += files if files else [self.no_files]
            else:
                out.append(word.replace("{files}", " ".join(files) or self.no_files))
        return out


@dataclass(frozen=True)
class ScheduleSource:
    """A command run every :attr:`every_s` for one session."""

    name: str
    argv: tuple[str, ...]
    every_s: float
    session: str
    priority: Priority = Priority.NORMAL
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output: int = DEFAULT_MAX_OUTPUT
    role: str = "environment"
    origin: str = "command line"

    def as_feedback(self) -> FeedbackSource:
        return FeedbackSource(self.name, self.argv, frozenset(), (), self.priority,
                              self.timeout_s, self.max_output, self.role, per_file=False,
                              origin=self.origin)


@dataclass(frozen=True)
class Selection:
    """The sources that may run for a project, and those left out, with why."""

    feedback: tuple[FeedbackSource, ...]
    schedules: tuple[ScheduleSource, ...]
    skipped: tuple[str, ...] = ()

    def on(self, trigger: str) -> list[FeedbackSource]:
        return [s for s in self.feedback if trigger in s.on]


def split_command(run: str, where: str) -> tuple[str, ...]:
    try:
        argv = tuple(shlex.split(run))
    except ValueError as exc:
        raise ConfigError(f"{where}: cannot split the command into words: {exc}",
                          hint="quote it like a shell command line (no shell runs it)") from None
    if not argv:
        raise ConfigError(f"{where}: the command is empty")
    return argv


def parse_duration(text: Any, where: str) -> float:
    """``"15m"``, ``"30s"``, ``"2h"``, ``"1d"`` or a number of seconds; at least 1 s."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    elif isinstance(text, str) and (m := re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)):
        seconds = float(m[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]]
    else:
        raise ConfigError(f"{where}: a duration like \"15m\", \"30s\" or \"2h\", got {text!r}")
    if seconds < 1:
        raise ConfigError(f"{where}: at least one second, got {text!r}")
    return seconds


def _common(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "priority" in table:
        try:
            out["priority"] = Priority.parse(str(table["priority"]))
        except ValueError as exc:
            raise ConfigError(f"{where}.priority: {exc}") from None
    if "timeout_s" in table:
        t = table["timeout_s"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 3600:
            raise ConfigError(f"{where}.timeout_s: seconds, 0 < t <= 3600, got {t!r}")
        out["timeout_s"] = float(t)
    if "max_output" in table:
        n = table["max_output"]
        if isinstance(n, bool) or not isinstance(n, int) or not 256 <= n <= 16 * 1024 * 1024:
            raise ConfigError(f"{where}.max_output: bytes, 256..16 MiB, got {n!r}")
        out["max_output"] = n
    if "role" in table:
        if table["role"] not in ROLES:
            raise ConfigError(f"{where}.role: one of {', '.join(ROLES)}, got {table['role']!r}")
        out["role"] = table["role"]
    return out


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ConfigError(f"{where}.name: a short name (letters, digits, . _ -), got {value!r}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: must be a list of strings, got {value!r}")
    return tuple(value)


def feedback_source(table: Mapping[str, Any], where: str, origin: str = "") -> FeedbackSource:
    """A ``[[feedback]]`` table checked: a preset by name (``name = "ruff"``
    alone, or ``preset = "ruff"`` with a name of its own), or a command."""
    unknown = sorted(set(table) - set(_FEEDBACK_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key",
                          hint=f"known keys: {', '.join(_FEEDBACK_KEYS)}")
    name = _name(table.get("name"), where)
    preset_name = table.get("preset", None if "run" in table else name)
    kw: dict[str, Any] = {}
    if preset_name is not None:
        preset = PRESETS.get(str(preset_name))
        if preset is None:
            raise ConfigError(f"{where}: no preset {preset_name!r} and no run = \"...\"",
                              hint=f"presets: {', '.join(PRESETS)}")
        kw.update(argv=tuple(shlex.split(preset.run)), on=frozenset(preset.on),
                  paths=preset.paths, no_files=preset.no_files, per_file=preset.per_file)
    if "run" in table:
        if not isinstance(table["run"], str):
            raise ConfigError(f"{where}.run: must be a string")
        kw["argv"] = split_command(table["run"], f"{where}.run")
        kw["per_file"] = any("{files}" in w for w in kw["argv"])
    if "on" in table:
        on = _strings(table["on"], f"{where}.on")
        bad = [t for t in on if t not in TRIGGERS]
        if bad:
            raise ConfigError(f"{where}.on: unknown trigger {bad[0]!r}",
                              hint=f"one or more of: {', '.join(TRIGGERS)}")
        kw["on"] = frozenset(on)
    if "paths" in table:
        kw["paths"] = _strings(table["paths"], f"{where}.paths")
    kw.update(_common(table, where))
    src = FeedbackSource(name=name, origin=origin or where, **kw)
    spec = pathspec.GitIgnoreSpec.from_lines(src.paths) if src.paths else None
    object.__setattr__(src, "_spec", spec)
    return src


def schedule_source(table: Mapping[str, Any], where: str, origin: str = "") -> ScheduleSource:
    unknown = sorted(set(table) - set(_SCHEDULE_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key",
                          hint=f"known keys: {', '.join(_SCHEDULE_KEYS)}")
    for key in ("run", "every", "session"):
        if key not in table:
            raise ConfigError(f"{where}: needs {key} = ...",
                              hint='[[schedule]] every = "15m", run = "...", session = "..."')
    if not isinstance(table["run"], str) or not isinstance(table["session"], str):
        raise ConfigError(f"{where}: run and session must be strings")
    argv = split_command(table["run"], f"{where}.run")
    name = _name(table.get("name", Path(argv[0]).name[:40] or "schedule"), where)
    return ScheduleSource(name=name, argv=argv, every_s=parse_duration(table["every"],
                          f"{where}.every"), session=table["session"],
                          origin=origin or where, **_common(table, where))


def trusted_project(cfg: Config, project_file: Path) -> bool:
    """Whether the person's own config trusts this project's commands."""
    root = project_file.parent.resolve()
    return any(Path(entry).expanduser().resolve() == root for entry in cfg.trust.feedback_projects)


def select(cfg: Config) -> Selection:
    """Every ``[[feedback]]`` and ``[[schedule]]`` of ``cfg`` checked (a bad
    table raises :class:`ConfigError`), a project's left out unless trusted."""
    feedback: list[FeedbackSource] = []
    schedules: list[ScheduleSource] = []
    skipped: list[str] = []
    for kind, tables in (("feedback", cfg.feedback), ("schedule", cfg.schedules)):
        for i, t in enumerate(tables):
            where = f"{t.origin}: {kind}[{i}]"
            src: FeedbackSource | ScheduleSource = (
                feedback_source(t.data, where, str(t.origin)) if kind == "feedback"
                else schedule_source(t.data, where, str(t.origin)))
            if not _allowed(cfg, t):
                skipped.append(
                    f"[[{kind}]] {src.name!r} of {t.origin} not run: the project is not trusted"
                    f" (add {str(t.origin.parent)!r} to [trust] feedback_projects in your own"
                    " config)")
                continue
            if isinstance(src, FeedbackSource):
                feedback = [s for s in feedback if s.name != src.name] + [src]  # later wins
            else:
                schedules.append(src)
    return Selection(tuple(feedback), tuple(schedules), tuple(skipped))


def _allowed(cfg: Config, table: CommandTable) -> bool:
    return table.user or trusted_project(cfg, table.origin)
