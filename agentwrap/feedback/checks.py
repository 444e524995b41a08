"""Running a set of sources on changed files and reporting: what the edit
hook, a session's watcher and ``agentwrap watch`` share."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from ..config import load_config
from ..message import Message
from ..paths import Paths
from ..service import Service
from .emit import Ran, report
from .runner import lock_path, run_source
from .sources import FeedbackSource, select

BUSY_TIMEOUT_MS = 2000


def relative(files: Sequence[Path], root: Path) -> list[str]:
    """Files under ``root``, relative and '/'-separated; others are dropped
    (an agent editing ~/.bashrc is not this project's check to run)."""
    out: list[str] = []
    base = root.resolve()
    for f in files:
        try:
            out.append(Path(f).resolve().relative_to(base).as_posix())
        except (ValueError, OSError):
            continue
    return list(dict.fromkeys(out))


def run_all(
    paths: Paths, cwd: Path, sources: Sequence[FeedbackSource], files: list[str], trigger: str,
) -> list[Ran]:
    """Each source whose paths match ``files`` (all of them for a run without
    files), run on its matching files; in parallel, one thread per source."""
    todo: list[tuple[FeedbackSource, list[str]]] = []
    for src in sources:
        mine = [f for f in files if src.matches(f)]
        if files and not mine:
            continue
        todo.append((src, mine))
    results: list[Ran | None] = [None] * len(todo)

    def one(i: int, src: FeedbackSource, mine: list[str]) -> None:
        res = run_source(src, mine if src.per_file else [], cwd, lock_path(paths, cwd, src.name))
        # the files named are the ones that made it run (not Aider's cache in the same burst)
        results[i] = Ran(src, res, trigger, tuple(mine))

    threads = [threading.Thread(target=one, args=(i, s, m), daemon=True)
               for i, (s, m) in enumerate(todo)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def run_edit_checks(
    paths: Paths, session: str, edited: Sequence[Path], *, turn: str | None,
    channel: str = "hook",
) -> list[Message]:
    """The ``edit`` sources of the session's project, on ``edited``, reported."""
    if not paths.db_path.is_file():
        return []
    with Service.open(paths, busy_timeout_ms=BUSY_TIMEOUT_MS) as service:
        rec = service.state(session)
        if rec.ended is not None:
            return []
        cwd = Path(rec.cwd)
        cfg = load_config(paths, cwd)
        sources = select(cfg).on("edit")
        files = relative(edited, cwd)
        if not sources or not files:
            return []
        runs = run_all(paths, cwd, sources, files, "edit")
        return report(service, session, runs, budget_tokens=cfg.feedback_options.budget_tokens,
                      turn=turn, channel=channel)


def main(argv: list[str] | None = None) -> int:
    """``python -m agentwrap.feedback.checks --session S [--turn T] FILE...``:
    the edit hook's checks in a process of their own (see
    :func:`agentwrap.feedback.edit_hook.after_tool`)."""
    ap = argparse.ArgumentParser(prog="agentwrap.feedback.checks")
    ap.add_argument("--session", required=True)
    ap.add_argument("--turn")
    ap.add_argument("--channel", default="hook")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args(argv)
    run_edit_checks(Paths.from_env(), args.session, [Path(f) for f in args.files],
                    turn=args.turn, channel=args.channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
