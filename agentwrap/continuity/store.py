"""Where handoff records live: ``<state>/continuity/<project key>/``.

One folder per project, keyed by the project's real path (a hash, so any path
fits; the folder's name starts with the project dir's name for people). In it:

* ``<started ms>-<session>.json``: one record per launch, replaced atomically
  (:func:`~agentwrap.paths.write_private`: temp file, 0600, rename) every time
  the session's supervisor updates it, so a killed session leaves the last one
  written; the newest ``keep`` are kept.
* ``next.md``: the handoff as a person edited it (``agentwrap context edit``),
  used instead of the rendered newest record at the next start.
* ``cleared``: ``agentwrap context clear`` was run; records older than it are not
  handed over.

And ``<state>/continuity/handoff/<session>.json``: the handoff prepared for a
session at its launch, for its session-start hook (see :mod:`.handoff`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..paths import Paths, check_session_name, private_dir, write_private
from .record import HandoffRecord

DIR_NAME = "continuity"
NEXT_FILE = "next.md"
CLEARED_FILE = "cleared"
_SLUG_RE = re.compile(r"[^A-Za-z0-9._-]+")


def project_path(cwd: Path | str) -> str:
    """The key of a project: its real path (symlinks resolved)."""
    return os.path.realpath(str(cwd))


def project_key(project: str) -> str:
    name = _SLUG_RE.sub("_", Path(project).name)[:40] or "root"
    return f"{name}-{hashlib.sha256(project.encode('utf-8')).hexdigest()[:16]}"


@dataclass
class ContinuityStore:
    paths: Paths
    keep: int = 10

    @property
    def root(self) -> Path:
        return self.paths.state_dir / DIR_NAME

    def project_dir(self, project: str) -> Path:
        return self.root / project_key(project)

    def _ensure(self, folder: Path) -> Path:
        private_dir(self.paths.state_dir, repair=True)
        private_dir(self.root, repair=True)
        private_dir(folder, repair=True)
        return folder

    # --- records --------------------------------------------------------------------

    def save(self, rec: HandoffRecord) -> Path:
        """Replace the record's file atomically (0600); prune the oldest beyond ``keep``."""
        folder = self._ensure(self.project_dir(rec.project))
        path = folder / f"{rec.id}.json"
        fresh = not path.exists()
        write_private(path, json.dumps(rec.to_json(), ensure_ascii=False).encode("utf-8"))
        if fresh:
            self.prune(rec.project)
        return path

    def records(self, project: str) -> list[HandoffRecord]:
        """The project's records, oldest first (unreadable ones skipped)."""
        folder = self.project_dir(project)
        out: list[HandoffRecord] = []
        try:
            names = sorted(p for p in os.listdir(folder) if p.endswith(".json"))
        except OSError:
            return out
        for name in names:
            try:
                data = json.loads((folder / name).read_text(encoding="utf-8"))
                rec = HandoffRecord.from_json(data)
            except (OSError, ValueError, TypeError):
                continue
            if rec.project == project:
                out.append(rec)
        return out

    def projects(self) -> list[str]:
        """Every project with records (its real path, as recorded)."""
        found: list[str] = []
        try:
            folders = sorted(self.root.iterdir())
        except OSError:
            return found
        for folder in folders:
            for name in sorted(os.listdir(folder), reverse=True):
                if not name.endswith(".json"):
                    continue
                try:
                    found.append(str(json.loads((folder / name).read_text("utf-8"))["project"]))
                    break
                except (OSError, ValueError, KeyError, TypeError):
                    continue
        return found

    def prune(self, project: str) -> None:
        folder = self.project_dir(project)
        try:
            names = sorted(p for p in os.listdir(folder) if p.endswith(".json"))
        except OSError:
            return
        for name in names[: max(0, len(names) - max(1, self.keep))]:
            (folder / name).unlink(missing_ok=True)

    def latest(
        self, project: str, *, exclude: str = "",
        accept: Callable[[HandoffRecord], bool] = lambda _: True,
    ) -> HandoffRecord | None:
        """The newest record worth handing over that is not ``exclude`` (the
        starting session's own), not older than a ``clear``, and ``accept``-ed."""
        cleared = self.cleared_at(project)
        for rec in reversed(self.records(project)):
            if rec.id == exclude or rec.started < cleared or not rec.substantial:
                continue
            if accept(rec):
                return rec
        return None

    # --- what a person did to the next handoff -------------------------------------

    def next_file(self, project: str) -> Path:
        return self.project_dir(project) / NEXT_FILE

    def edited(self, project: str) -> str | None:
        try:
            return self.next_file(project).read_text(encoding="utf-8")
        except OSError:
            return None

    def write_edited(self, project: str, text: str) -> Path:
        path = self.next_file(project)
        self._ensure(path.parent)
        write_private(path, text.encode("utf-8"))
        return path

    def drop_edited(self, project: str) -> None:
        self.next_file(project).unlink(missing_ok=True)

    def cleared_at(self, project: str) -> float:
        try:
            return float(self.project_dir(project).joinpath(CLEARED_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return 0.0

    def clear(self, project: str, now: float) -> None:
        """Nothing older than ``now`` is handed over any more (records stay listed)."""
        folder = self._ensure(self.project_dir(project))
        write_private(folder / CLEARED_FILE, repr(now).encode())
        self.drop_edited(project)

    # --- the handoff prepared for one launch ----------------------------------------

    def handoff_file(self, session: str) -> Path:
        return self.root / "handoff" / f"{check_session_name(session)}.json"

    def write_handoff(self, session: str, data: dict[str, object]) -> Path:
        path = self.handoff_file(session)
        self._ensure(path.parent)
        write_private(path, json.dumps(data, ensure_ascii=False).encode("utf-8"))
        return path

    def read_handoff(self, session: str) -> dict[str, object] | None:
        try:
            data = json.loads(self.handoff_file(session).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def drop_handoff(self, session: str) -> None:
        self.handoff_file(session).unlink(missing_ok=True)


__all__ = ["ContinuityStore", "project_key", "project_path"]
