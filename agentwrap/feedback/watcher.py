"""Watching a project: a watchdog observer, ignore rules, bursts.

The observer is watchdog's native one (inotify on Linux: the kernel tells us,
nothing is polled), recursive over the project. Changes under ignored paths
are dropped before anything else happens:

* version control, virtualenvs (any dir with a ``pyvenv.cfg``), caches,
  ``node_modules``, editor swap and backup files, agentwrap's own files;
* whatever ``.gitignore`` files ignore (the root's, nested ones, and
  ``.git/info/exclude``), matched with ``pathspec``'s gitignore semantics
  rather than hand-written globbing; a changed ``.gitignore`` is read again.

Changes are gathered into bursts (:class:`Debouncer`): a burst ends after
``debounce_s`` without a change (or ``max_wait_s`` after it began, so a
process that never stops writing still gets reported), and its files reach
the callback once, in the order they first changed. A formatter rewriting
200 files is one burst.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pathspec
from watchdog.events import (
    FileSystemEvent,
    FileSystemEventHandler,
    FileSystemMovedEvent,
)
from watchdog.observers import Observer

IGNORED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".jj", ".venv", "venv", ".env", "__pycache__", "node_modules",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".cache", ".eggs",
    ".ipynb_checkpoints", ".next", ".turbo", ".parcel-cache", ".gradle", ".idea",
})
IGNORED_FILES = frozenset({".agentwrap.toml", "agentwrap-messages.md", ".DS_Store", "4913"})
IGNORED_SUFFIXES = (".swp", ".swx", ".swo", "~", ".pyc", ".pyo", ".tmp")


@dataclass(frozen=True)
class Change:
    path: str  # relative to the root, '/'-separated
    kind: str  # created | modified | deleted | moved


@dataclass(frozen=True)
class Burst:
    changes: tuple[Change, ...]
    started: float  # monotonic time of its first change
    first_event_ns: int  # time.time_ns() of the first change, for benchmarks

    @property
    def files(self) -> list[str]:
        return [c.path for c in self.changes]

    @property
    def existing(self) -> list[str]:
        """Files still there (a deleted file cannot be checked)."""
        return [c.path for c in self.changes if c.kind != "deleted"]


class IgnoreRules:
    """Whether a path under ``root`` is ignored; ``.gitignore`` files read once
    each and again when they change."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._venvs: dict[str, bool] = {}  # dirs known to be virtualenvs
        self._lock = threading.Lock()

    def forget(self, rel_dir: str) -> None:
        """A ``.gitignore`` in ``rel_dir`` changed: read it again next time."""
        with self._lock:
            self._specs.pop(rel_dir, None)

    def _spec(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        with self._lock:
            if rel_dir in self._specs:
                return self._specs[rel_dir]
        lines: list[str] = []
        base = self.root / rel_dir if rel_dir else self.root
        names = [".gitignore"] + ([".git/info/exclude"] if not rel_dir else [])
        for name in names:
            try:
                lines += (base / name).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                pass
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        with self._lock:
            self._specs[rel_dir] = spec
        return spec

    def _is_venv(self, rel_dir: str) -> bool:
        """A virtualenv stays one, so a yes is kept; a no is asked again (a
        venv being created has its dirs before its ``pyvenv.cfg``)."""
        if rel_dir in self._venvs:
            return True
        if (self.root / rel_dir / "pyvenv.cfg").is_file():
            self._venvs[rel_dir] = True
            return True
        return False

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        parts = rel.split("/")
        name = parts[-1]
        if name in IGNORED_FILES or name.endswith(IGNORED_SUFFIXES) or name.startswith(".#"):
            return True
        dirs = parts if is_dir else parts[:-1]
        for i, d in enumerate(dirs):
            if d in IGNORED_DIRS or d.endswith(".egg-info") or self._is_venv("/".join(parts[:i + 1])):
                return True
        for i in range(len(parts)):  # each .gitignore from the root down
            spec = self._spec("/".join(parts[:i]))
            if spec is None:
                continue
            sub = "/".join(parts[i:]) + ("/" if is_dir or i < len(parts) - 1 else "")
            if spec.match_file(sub) or any(
                    spec.match_file("/".join(parts[i:j]) + "/") for j in range(i + 1, len(parts))):
                return True
        return False


class Debouncer:
    """Gathers changes into bursts and hands each to ``on_burst`` (on a
    thread of its own, so the observer's thread never waits for a check)."""

    def __init__(self, on_burst: Callable[[Burst], None], *, debounce_s: float = 0.3,
                 max_wait_s: float = 3.0) -> None:
        self.on_burst = on_burst
        self.debounce_s = debounce_s
        self.max_wait_s = max_wait_s
        self._cond = threading.Condition()
        self._pending: dict[str, Change] = {}
        self._first = 0.0
        self._first_ns = 0
        self._last = 0.0
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="feedback:debounce",
                                        daemon=True)
        self._thread.start()

    def add(self, change: Change) -> None:
        with self._cond:
            now = time.monotonic()
            if not self._pending:
                self._first, self._first_ns = now, time.time_ns()
            prev = self._pending.get(change.path)
            # created then modified is still "created"; anything then deleted is "deleted"
            kind = prev.kind if prev is not None and change.kind == "modified" else change.kind
            self._pending[change.path] = Change(change.path, kind)
            self._last = now
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                now = time.monotonic()
                due = min(self._last + self.debounce_s, self._first + self.max_wait_s)
                if now < due:
                    self._cond.wait(due - now)
                    continue
                burst = Burst(tuple(self._pending.values()), self._first, self._first_ns)
                self._pending = {}
            try:
                self.on_burst(burst)
            except Exception:
                import logging

                logging.getLogger("agentwrap.feedback").exception("feedback burst failed")

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(5.0)


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self.w = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        kind = {"created": "created", "modified": "modified", "deleted": "deleted",
                "moved": "moved", "closed": "modified"}.get(event.event_type)
        if kind is None:
            return
        if event.is_directory and kind != "moved":
            return
        paths = [event.src_path] if kind != "moved" else []
        if isinstance(event, FileSystemMovedEvent):
            paths = [event.dest_path]
            self.w.note(event.src_path, "deleted", event.is_directory)
        for p in paths:
            self.w.note(p, kind, event.is_directory)


class Watcher:
    """A recursive observer on ``root`` feeding a :class:`Debouncer`."""

    def __init__(self, root: Path, on_burst: Callable[[Burst], None], *,
                 debounce_s: float = 0.3, max_wait_s: float = 3.0) -> None:
        self.root = root.resolve()
        self.rules = IgnoreRules(self.root)
        self.debouncer = Debouncer(on_burst, debounce_s=debounce_s, max_wait_s=max_wait_s)
        self.observer = Observer()
        self.observer.daemon = True
        self.observer.schedule(_Handler(self), str(self.root), recursive=True)
        self.ignored = 0  # events dropped by the rules

    def start(self) -> Watcher:
        self.observer.start()
        return self

    def note(self, path: str | bytes, kind: str, is_dir: bool) -> None:
        p = os.fsdecode(path)
        try:
            rel = Path(p).relative_to(self.root).as_posix()
        except ValueError:
            return
        if rel in ("", "."):
            return
        name = rel.rsplit("/", 1)[-1]
        if name == ".gitignore":
            self.rules.forget(rel.rsplit("/", 1)[0] if "/" in rel else "")
        if self.rules.ignored(rel, is_dir):
            self.ignored += 1
            return
        self.debouncer.add(Change(rel, kind))

    def stop(self) -> None:
        self.observer.stop()
        self.observer.join(5.0)
        self.debouncer.stop()
