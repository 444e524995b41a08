"""Sessions as surfaces show and steer them: the list, one record, its state
changes, its screen; starting a listed session and stopping one.

The registry holds the records; what is added here is what a person
watching needs (pending counts, the screen with its colours, cheap stamps
telling the event stream a new screen was saved) and the rules of starting
and stopping from a surface: only an entry the person listed in their own
config can be started (never a command or a folder a caller names), and
either is audited with who asked.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..audit import AuditLog
from ..config import load_config
from ..errors import InvalidMessage, SessionNotRunning
from ..paths import Paths
from ..queue.store import MessageStore
from ..sessions.registry import Registry, SessionRecord, Transition
from .profiles import ProfileCache
from .views import SessionView

#: How often listing the sessions looks for ended ones past their retention.
PRUNE_EVERY_S = 60.0

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast
    from ..config import LaunchChoice
    from ..terminal.styles import Screen


class Sessions:
    """The sessions' records and screens, and starting and stopping them."""

    def __init__(self, paths: Paths, store: MessageStore, registry: Registry, audit: AuditLog,
                 profiles: ProfileCache) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.audit = audit
        self.profiles = profiles
        self._pruned_at = float("-inf")  # when prune last looked (time.time())
        self._keep: float | None = None  # [sessions] keep_ended_s, read on first use

    def listed(self, include_ended: bool = False) -> list[SessionView]:
        """Every session (running and stale; ended ones too if asked), oldest
        first, with its pending count. Ended sessions past ``[sessions]
        keep_ended_s`` are forgotten first (:meth:`prune`)."""
        self.prune()
        return [SessionView(r, self.store.pending_count(self.registry.address(r)))
                for r in self.registry.list(include_ended=include_ended)]

    def prune(self, now: float | None = None) -> list[str]:
        """Forget this host's sessions that ended more than ``[sessions]
        keep_ended_s`` ago (0: never), with their screens; audited. Looked at
        when the sessions are listed, at most once a minute (cheap, and a
        retention counted in days needs no timer of its own; a short one is
        looked at every quarter of it)."""
        now = time.time() if now is None else now
        if self._keep is None:  # the config as this service found it (serve: at its start)
            self._keep = load_config(self.paths).sessions.keep_ended_s
        keep = self._keep
        if not keep or now - self._pruned_at < min(PRUNE_EVERY_S, keep / 4):
            return []
        self._pruned_at = now
        gone = self.registry.prune_ended(now - keep)
        for name in gone:
            self._forget_screens(name)
            self.audit.write(event="dismissed", session=name, by="retention",
                             keep_ended_s=keep)
        return gone

    def dismiss(self, name: str, *, by: str) -> SessionRecord:
        """Forget one ended session of this host (its record, state log and
        last screen; its messages stay in the history), audited. A running
        one: :class:`~agentwrap.errors.SessionNotEnded`; another host's:
        :class:`~agentwrap.errors.SessionNotRunning` (its screen is kept there)."""
        self._screen_here(name)
        rec = self.registry.dismiss(name)
        self._forget_screens(rec.name)
        self.audit.write(event="dismissed", session=rec.name, by=by)
        return rec

    def _forget_screens(self, name: str) -> None:
        from ..terminal.styles import DOCUMENT_SUFFIX

        for suffix in (".screen", DOCUMENT_SUFFIX):
            (self.paths.runtime_dir / f"{name}{suffix}").unlink(missing_ok=True)

    def state(self, name: str) -> SessionRecord:
        """One session's record: state, and the signal, rule and evidence that
        decided it; ``liveness`` is checked now, never stored. ``name``: NAME
        or HOST/NAME (:meth:`Registry.resolve`)."""
        return self.registry.get(self.registry.resolve(name))

    def transitions(self, name: str, after_id: int = 0) -> list[Transition]:
        """The session's state changes after ``after_id``, oldest first (bounded
        log), so a state shorter than a reader's wake-up is still seen."""
        return self.registry.transitions(name, after_id)

    def _screen_here(self, name: str) -> str:
        """The session's name here; refuse the screen of another host's
        session: its supervisor keeps it in that machine's runtime dir (a file
        here of the same name is not it)."""
        rec = self.registry.get(name)
        if not self.registry.here(rec):
            raise SessionNotRunning(
                f"the screen of {name!r} is kept on its host {rec.host!r}",
                hint=f"ask there: `agentwrap state {name} --screen` on {rec.host}, or its"
                " `agentwrap serve`")
        return rec.name

    def screen(self, name: str) -> str:
        """The screen the session's last verdict was based on (to debug a profile)."""
        path = self.paths.runtime_dir / f"{self._screen_here(name)}.screen"
        if not path.exists():
            raise SessionNotRunning(f"no screen recorded for {name!r} yet")
        return path.read_text(encoding="utf-8")

    def screen_view(self, name: str) -> Screen:
        """The same screen with its colours, for a person watching (the
        dashboard, ``GET /api/sessions/NAME/screen``): rows of styled runs,
        every value checked as it is read (:mod:`agentwrap.terminal.styles`),
        no escape sequence in it. A session whose supervisor kept only the
        plain screen gets that, uncoloured."""
        from ..terminal.styles import DOCUMENT_SUFFIX, Screen, read_document, rows_from_text

        here = self._screen_here(name)
        try:
            got = read_document((self.paths.runtime_dir / f"{here}{DOCUMENT_SUFFIX}").read_bytes())
        except FileNotFoundError:
            got = None
        if got is not None:
            return got
        text = self.screen(name)
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        return Screen(digest="", at=0.0, cols=max((len(x) for x in lines), default=0),
                      cursor=(0, 0), title="", lines=rows_from_text(lines), styled=False)

    def screen_stamps(self, session: str | None = None) -> dict[str, int]:
        """When each session's styled screen was last saved (ns), cheaply (one
        ``stat`` each): how the event stream notices a new screen to announce."""
        from ..terminal.styles import DOCUMENT_SUFFIX

        if session is not None:
            here = self.registry.local(session)  # another host's screens are kept there
            candidates = [self.paths.runtime_dir / f"{here}{DOCUMENT_SUFFIX}"] if here else []
        else:
            try:
                candidates = [p for p in self.paths.runtime_dir.iterdir()
                              if p.name.endswith(DOCUMENT_SUFFIX)]
            except OSError:
                return {}
        out: dict[str, int] = {}
        for path in candidates:
            try:
                out[path.name[:-len(DOCUMENT_SUFFIX)]] = path.stat().st_mtime_ns
            except OSError:
                continue
        return out

    def launch_choices(self) -> tuple[LaunchChoice, ...]:
        """The sessions the person listed for the dashboard to start
        (``[[dashboard.launch]]``, their own config file only)."""
        return load_config(self.paths).launch

    def start(self, choice: str, name: str | None = None, *, by: str) -> SessionRecord:
        """Start the listed session ``choice`` as ``run --detach`` does (tmux,
        a supervisor of its own or the host's); ``name`` overrides its session
        name. Nothing but a listed entry can be started this way: the caller
        names an entry, never a command or a folder."""
        from ..sessions.lifecycle import RunOptions, start_tmux

        choices = {c.name: c for c in self.launch_choices()}
        picked = choices.get(choice)
        if picked is None:
            raise InvalidMessage(
                f"no launch entry named {choice!r}",
                hint=("listed: " + ", ".join(choices)) if choices else
                "list what may be started in [[dashboard.launch]] of"
                " ~/.config/agentwrap/config.toml")
        if not picked.folder.is_dir():
            raise InvalidMessage(f"launch entry {choice!r}: folder not found: {picked.folder}",
                                 hint="fix its cwd in ~/.config/agentwrap/config.toml")
        command = picked.command
        if command is None:
            command = self.profiles.get(str(picked.profile)).commands[0]
        rec = start_tmux(self.paths, RunOptions(
            argv=[command, *picked.args], name=name or picked.session, profile=picked.profile,
            backend="tmux", cwd=picked.folder.resolve(), detach=True))
        self.audit.write(event="started", session=rec.name, launch=picked.name, by=by)
        return rec

    def stop(self, name: str, *, by: str) -> SessionRecord:
        """Stop a running session's agent (its whole process tree), as
        ``agentwrap stop`` does; the record with its exit code."""
        from ..sessions.lifecycle import stop_many

        if self.registry.get(name).ended is not None:
            raise SessionNotRunning(f"session {name!r} has ended already")
        (rec,) = stop_many(self.paths, [name])
        self.audit.write(event="stopped", session=name, by=by)
        return rec
