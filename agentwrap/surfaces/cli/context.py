"""``agentwrap context``: the handoff the next session in a project gets.

While a session runs, agentwrap keeps a handoff record of it per project
(:mod:`agentwrap.continuity`); the next ``agentwrap run`` there hands the
newest one to the agent as startup context. These commands show that context,
let a person edit it or clear it, and list the records kept.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from ...errors import ConfigError
from .common import emit_json, err, fmt_age, out, render_rows, user_paths

if TYPE_CHECKING:  # the continuity records load only when the command runs
    from ...config import ContinuityConfig
    from ...paths import Paths

HELP = "the handoff the next session in this project gets (show, edit, clear, list)"
DESCRIPTION = """\
While a session runs, agentwrap keeps a handoff record of it for its project
(the goal from its first prompt, files changed, tool calls, checks, messages
delivered and still queued, the agent's last reply, how it ended), written as
it goes, so a crashed or killed session leaves one. The next `agentwrap run`
in the project hands the newest record to the agent as startup context (at
most [continuity] max_bytes, default 4 KB): through the agent's session-start
hook where it has one, else typed once it is ready. `run --no-continuity`
skips it; [continuity] enabled = false turns it off."""
EPILOG = """\
examples:
  agentwrap context show                # what the next run here gets
  agentwrap context show --json         # the record and the text, for scripts
  agentwrap context edit                # change it in $EDITOR (used once)
  agentwrap context clear               # hand nothing over from earlier sessions
  agentwrap context list --all          # the records kept, every project"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("context", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=fmt)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    def verb(name: str, help: str) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, help=help, description=help, formatter_class=fmt)
        v.add_argument("--cwd", metavar="DIR", help="the project (default: here)")
        v.set_defaults(func=cmd_context, verb=name)
        return v

    s = verb("show", "print the startup context the next `agentwrap run` here would get")
    s.add_argument("--json", action="store_true",
                   help="the text, where it comes from and the record, as JSON")
    verb("edit", "edit that context in $EDITOR; the edited text is handed over once")
    verb("clear", "hand nothing over from the sessions so far (their records stay listed)")
    ls = verb("list", "list the handoff records kept (newest first)")
    ls.add_argument("--all", action="store_true", help="every project, not only this one")
    ls.add_argument("--json", action="store_true")


def cmd_context(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...continuity.launch import prepare, previous, store_for
    from ...continuity.store import project_path
    from ...terminal.proctree import alive

    paths = user_paths()
    cwd = Path(args.cwd).resolve() if args.cwd else Path.cwd()
    cfg = load_config(paths, cwd).continuity
    project = project_path(cwd)
    store = store_for(paths, cfg)
    if args.verb == "show":
        handoff = prepare(paths, cfg, cwd)
        rec = previous(store, project)
        if args.json:
            emit_json({"project": project, "enabled": cfg.enabled,
                        "source": handoff.record if handoff else None,
                        "text": handoff.text if handoff else None,
                        "bytes": len(handoff.text.encode("utf-8")) if handoff else 0,
                        "record": rec.to_json() if rec else None})
            return 0
        if handoff is None:
            err.print("no handoff for this project" + ("" if cfg.enabled else
                      " ([continuity] enabled = false)"))
            return 0
        out.print(escape(handoff.text))
        return 0
    if args.verb == "edit":
        return _edit(paths, cfg, cwd, project)
    if args.verb == "clear":
        store.clear(project, time.time())
        err.print(f"cleared: the next run in {escape(project)} gets no handoff from earlier"
                  " sessions")
        return 0
    projects = store.projects() if args.all else [project]
    recs = [r for p in projects for r in store.records(p)]
    recs.sort(key=lambda r: r.started, reverse=True)
    for r in recs:
        if r.end_state == "running" and (not r.writer_pid or not alive(r.writer_pid)):
            r.end_state = "crashed"
    if args.json:
        emit_json([{"id": r.id, **r.to_json()} for r in recs])
        return 0
    if not recs:
        err.print("no handoff records" + ("" if args.all else " for this project"))
        return 0
    render_rows(out, ["RECORD", "AGENT", "STARTED", "ENDED", "FILES", "PROJECT", "GOAL"], [
        [r.id, r.agent, fmt_age(r.started), r.end_state, str(len(r.files_changed)), r.project,
         " ".join(r.goal.split())[:60]]
        for r in recs
    ], max_width=60)
    return 0


def _edit(paths: Paths, cfg: ContinuityConfig, cwd: Path, project: str) -> int:
    from ...continuity.launch import prepare, store_for

    store = store_for(paths, cfg)
    handoff = prepare(paths, cfg, cwd)
    current = handoff.text if handoff else ""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        argv = shlex.split(editor)
    except ValueError as exc:
        raise ConfigError(f"$EDITOR cannot be split into words: {exc}") from None
    fd, name = tempfile.mkstemp(prefix="agentwrap-handoff-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(current)
        done = subprocess.run([*argv, name], check=False)
        if done.returncode != 0:
            err.print(f"the editor exited with {done.returncode}: nothing changed")
            return 1
        text = Path(name).read_text(encoding="utf-8")
    finally:
        Path(name).unlink(missing_ok=True)
    if text == current:
        err.print("unchanged")
        return 0
    path = store.write_edited(project, text)
    err.print(f"saved: the next run here gets the edited text once ({escape(str(path))})")
    return 0


__all__ = ["add_parser", "cmd_context"]
