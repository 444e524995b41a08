"""The ``agentwrap`` command.

Every sub-command is a thin layer over the library: parse, call, print. People
get rich tables and live views; scripts get ``--json``. Expected failures are
:class:`~agentwrap.errors.AgentwrapError` and print one line with the cause and
one with what to do next, then exit non-zero.

Everything shown comes from outside (message content, source ids, session
names, screen text, paths): it is never read as rich markup. Table cells are
:class:`rich.text.Text`, printed lines pass through :func:`escape`, and the
consoles do not replace ``:emoji:`` codes. When stdout is not a terminal
(a pipe, ``| less``, a script), tables become plain aligned lines, one per
row, never wrapped or cut.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from . import __version__
from .errors import AgentwrapError, InvalidMessage, SessionNotRunning
from .message import Message, NewMessage, Priority, Source, Status
from .paths import Paths, private_problems
from .registry import Registry, SessionRecord, Transition
from .sanitize import decode_utf8

EXIT_BY_STATUS = {
    Status.DELIVERED: 0,
    Status.ACKNOWLEDGED: 0,
    Status.ESCALATED: 10,
    Status.EXPIRED: 11,
    Status.EVICTED: 12,
    Status.CANCELLED: 13,
    Status.FAILED: 14,
}
EXIT_TIMEOUT = 124

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # one line per error/hint

MAIN_HELP = """\
Run a terminal coding agent under supervision and deliver context into it.

agentwrap starts the agent under tmux (default) or a pty, watches its screen to
know whether it is starting, ready, busy, waiting for an answer or holding your
unsent draft, and types queued messages into it only at safe moments, verified,
acknowledged, retried, and written to the agent's instruction file as a last
resort.

examples:
  agentwrap run claude                         # start Claude Code, supervised
  agentwrap run --detach --name api codex      # headless; attach later
  agentwrap run claude --context handoff.md    # startup context, once ready
  agentwrap send api "CI failed on main" --source webhook --source-id github
  echo "focus on the docs" | agentwrap send api -
  agentwrap state api --explain                # what state, and why
  agentwrap ls                                 # running sessions
  agentwrap queue api / history api / metrics  # what waits, what happened

Files: config ~/.config/agentwrap/config.toml (+ .agentwrap.toml in a project),
profiles ~/.config/agentwrap/patterns/*.toml, state ~/.local/state/agentwrap/.
Run `agentwrap doctor` when something does not work.
"""

EXIT_HELP = """\
exit status with --wait: 0 delivered or acknowledged, 10 escalated to the
instruction file, 11 expired, 12 evicted, 13 cancelled, 14 failed, 124 timed
out waiting (the message stays queued). Without --wait: 0 once stored.
Refused before storing: 3 unknown or ended session, 4 idempotency key reused
with other content, 65 invalid message, 75 rate limit / queue full, 77 source
not trusted with raw input.
"""


def _fmt_age(ts: float | None) -> str:
    if not ts:
        return "-"
    secs = max(0.0, time.time() - ts)
    if secs < 60:
        return f"{secs:.0f}s ago"
    if secs < 3600:
        return f"{secs / 60:.0f}m ago"
    return f"{secs / 3600:.1f}h ago"


def _emit_json(data: Any) -> None:
    try:
        text = json.dumps(data, indent=2, default=str)
    except RecursionError:  # deep metadata stored before the depth limit existed
        text = json.dumps(data, default=str)  # the C encoder: no Python frames per level
    sys.stdout.write(text + "\n")


def render_rows(
    console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]],
    *, max_width: int | None = None,
) -> None:
    """A table of untrusted strings: rich on a terminal, plain lines otherwise.

    Cells are :class:`Text`, so ``[/]`` or ``[link=...]`` in a message is shown
    as typed. Off a terminal each row is one line, columns aligned with two
    spaces and nothing cut: what ``grep``, ``awk`` and ``less`` need.
    """
    if not console.is_terminal:
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
        for line in [list(headers), *map(list, rows)]:
            cells = [c.ljust(w) for c, w in zip(line[:-1], widths[:-1], strict=True)] + [line[-1]]
            console.file.write("  ".join(cells).rstrip() + "\n")
        console.file.flush()
        return
    table = Table(box=None, header_style="bold")
    for i, h in enumerate(headers):
        last = i == len(headers) - 1
        table.add_column(h, overflow="ellipsis", no_wrap=True, max_width=max_width if last else None)
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    console.print(table)


def _paths() -> Paths:
    return Paths.from_env()


def _registry(paths: Paths) -> Registry:
    paths.ensure()
    return Registry(paths.db_path)


# --- run / attach / adopt / stop ----------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from .session import RunOptions, attach, run_pty, start_tmux

    if not args.command:
        raise InvalidMessage("no agent command given", hint="e.g. `agentwrap run claude`")
    paths = _paths()
    opts = RunOptions(
        argv=list(args.command), name=args.name, profile=args.profile, backend=args.backend,
        cwd=Path(args.cwd).resolve() if args.cwd else Path.cwd(), detach=args.detach,
        trust_folder=args.trust_folder, require_ack=args.require_ack,
        context_files=[Path(p) for p in args.context], cols=args.cols, rows=args.rows,
    )
    for f in opts.context_files:
        if not f.is_file():
            raise InvalidMessage(
                f"context file not found: {f}", hint="pass an existing file to --context"
            )
    from .config import load_config

    backend = opts.backend or load_config(paths, opts.cwd).run.backend
    if backend == "pty":
        if opts.detach:
            raise InvalidMessage(
                "the pty backend cannot run detached", hint="use --backend tmux for --detach"
            )
        return run_pty(paths, opts, interactive=sys.stdin.isatty())
    rec = start_tmux(paths, opts)
    if opts.detach or not sys.stdin.isatty():
        if args.json:
            _emit_json(rec.to_json())
        else:
            err.print(
                f"started [bold]{escape(rec.name)}[/] ({escape(rec.profile)}, tmux). "
                f"`agentwrap attach {escape(rec.name)}` to see it, "
                f"`agentwrap state {escape(rec.name)}` for its state."
            )
        return 0
    return attach(paths, rec.name)


def cmd_attach(args: argparse.Namespace) -> int:
    from .session import attach

    return attach(_paths(), args.name)


def cmd_adopt(args: argparse.Namespace) -> int:
    from .session import adopt

    pid = adopt(_paths(), args.name)
    err.print(f"supervising {escape(args.name)} (supervisor pid {pid})")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from .session import stop

    rec = stop(_paths(), args.name)
    if args.json:
        _emit_json(rec.to_json())
    else:
        err.print(f"stopped {escape(rec.name)} (exit code {rec.exit_code})")
    return 0


def cmd_supervise(args: argparse.Namespace) -> int:
    from .session import supervise

    return supervise(_paths(), args.name)


# --- ls / state -------------------------------------------------------------------------------


def _liveness_label(rec: SessionRecord) -> str:
    live = rec.liveness
    if live == "stale":
        return "stale (supervisor gone; `agentwrap adopt`)"
    return live


def cmd_ls(args: argparse.Namespace) -> int:
    paths = _paths()
    reg = _registry(paths)
    recs = reg.list(include_ended=args.all)
    pending = _pending_counts(paths, [r.name for r in recs])
    if args.json:
        _emit_json([{**r.to_json(), "pending": pending.get(r.name, 0)} for r in recs])
        return 0
    if not recs:
        err.print("no sessions. Start one with `agentwrap run claude` (or codex, aider, gemini).")
        return 0
    rows = [
        [
            r.name, r.profile, r.backend, r.state + (" +draft" if r.draft and r.state != "draft" else ""),
            _fmt_age(r.state_since), str(pending.get(r.name, 0)), _liveness_label(r), r.cwd,
        ]
        for r in recs
    ]
    render_rows(
        out, ("NAME", "AGENT", "BACKEND", "STATE", "SINCE", "PENDING", "SUPERVISOR", "CWD"), rows
    )
    return 0


def _pending_counts(paths: Paths, names: list[str]) -> dict[str, int]:
    from .queue import SQLiteMessageStore

    store = SQLiteMessageStore(paths.db_path)
    try:
        return {name: store.pending_count(name) for name in names}
    finally:
        store.close()


def _explain(rec: SessionRecord) -> str:
    text = f"{rec.state} ({rec.profile}: {rec.state_reason}; quiet {rec.quiet_ms} ms)"
    if rec.liveness == "stale":
        text += " [stale: the supervisor is gone, this may be out of date]"
    return text


def _state_json(rec: SessionRecord) -> dict[str, Any]:
    return {
        "name": rec.name, "state": rec.state, "signal": rec.state_signal, "rule": rec.state_rule,
        "reason": rec.state_reason, "evidence": rec.state_evidence, "quiet_ms": rec.quiet_ms,
        "draft": rec.draft, "since": rec.state_since, "liveness": rec.liveness,
        "exit_code": rec.exit_code, "explain": _explain(rec),
    }


def cmd_state(args: argparse.Namespace) -> int:
    reg = _registry(_paths())
    rec = reg.get(args.name)
    if args.screen:
        screen = _paths().runtime_dir / f"{args.name}.screen"
        if not screen.exists():
            raise SessionNotRunning(f"no screen recorded for {args.name!r} yet")
        sys.stdout.write(screen.read_text(encoding="utf-8"))
        return 0
    if not args.watch:
        if args.json:
            _emit_json(_state_json(rec))
        elif args.explain:
            out.print(escape(_explain(rec)))
            out.print(escape(f"  decided by: {rec.state_signal} ({rec.state_rule})"))
            if rec.state_evidence:
                out.print(escape(f"  evidence:   {rec.state_evidence}"))
            out.print(f"  since:      {_fmt_age(rec.state_since)}; supervisor {rec.liveness}")
        else:
            out.print(escape(rec.state))
        return 0
    return _watch_state(reg, args)


def _transition_json(name: str, profile: str, t: Transition) -> dict[str, Any]:
    return {
        "name": name, "state": t.state, "signal": t.signal, "rule": t.rule, "reason": t.reason,
        "evidence": t.evidence, "quiet_ms": t.quiet_ms, "draft": t.draft, "since": t.at,
        "explain": f"{t.state} ({profile}: {t.reason}; quiet {t.quiet_ms} ms)",
    }


def _watch_state(reg: Registry, args: argparse.Namespace) -> int:
    """Every state change, in order, until the session ends (or Ctrl-C).

    Follows the supervisor's transition log, not the current state, so a
    state that lasted less than the refresh interval is still shown.
    """
    rec = reg.get(args.name)
    seen = reg.transitions(args.name)
    last_id = seen[-1].id if seen else 0
    recent: list[dict[str, Any]] = [_state_json(rec)]
    plain = args.json or not sys.stdout.isatty()

    def emit(data: dict[str, Any]) -> None:
        if args.json:
            sys.stdout.write(json.dumps(data) + "\n")
        else:
            stamp = time.strftime("%H:%M:%S", time.localtime(data["since"]))
            sys.stdout.write(f"{stamp} {data['explain']}\n")
        sys.stdout.flush()

    def follow() -> bool:
        """Emit new transitions; True once the session has ended."""
        nonlocal last_id
        for t in reg.transitions(args.name, last_id):
            last_id = t.id
            data = _transition_json(args.name, rec.profile, t)
            recent.append(data)
            del recent[:-8]
            if plain:
                emit(data)
            if t.state == "exited":
                return True
        return reg.get(args.name).ended is not None

    try:
        if plain:
            emit(recent[0])
            while not follow():
                time.sleep(0.1)
            return 0
        with Live(console=out, refresh_per_second=10) as live:
            while True:
                done = follow()
                table = Table(box=None, header_style="bold", title=Text(args.name, style="bold"))
                for col in ("TIME", "STATE", "WHY"):
                    table.add_column(col)
                for d in recent:
                    table.add_row(
                        time.strftime("%H:%M:%S", time.localtime(d["since"])),
                        Text(d["state"]), Text(d["reason"]),
                    )
                live.update(table)
                if done:
                    return 0
                time.sleep(0.1)
    except KeyboardInterrupt:
        return 0


# --- messages -------------------------------------------------------------------------------


def _store(paths: Paths) -> Any:
    from .config import load_config
    from .queue import SQLiteMessageStore

    paths.ensure()
    return SQLiteMessageStore(paths.db_path, load_config(paths).limits)


def _message_json(m: Message) -> dict[str, Any]:
    data = asdict(m)
    for key in ("source", "priority", "status", "phase"):
        data[key] = str(data[key]) if data[key] is not None else None
    return data


_METADATA_HINT = "pass a JSON object, e.g. --metadata '{\"pr\": 42}'"


def _read_content(arg: str) -> str:
    if arg == "-":
        return decode_utf8(sys.stdin.buffer.read())
    return arg


def cmd_send(args: argparse.Namespace) -> int:
    from .service import Service

    paths = _paths()
    reg = _registry(paths)
    reg.get(args.name)  # an unknown session is the first thing to hear about
    try:
        metadata = json.loads(args.metadata) if args.metadata else {}
    except ValueError as exc:
        raise InvalidMessage(f"--metadata is not valid JSON: {exc}", hint=_METADATA_HINT) from None
    except RecursionError:  # the store's depth limit would refuse it anyway
        raise InvalidMessage("--metadata nests too deeply", hint=_METADATA_HINT) from None
    if not isinstance(metadata, dict):
        raise InvalidMessage("--metadata must be a JSON object", hint=_METADATA_HINT)
    try:
        source = Source(args.source)
        priority = Priority.parse(args.priority)
    except ValueError as exc:
        raise InvalidMessage(str(exc), hint="see `agentwrap send --help`") from None
    # source system is agentwrap's own: the store refuses it from any sender
    # (enqueue without internal=True), with the error the person sees.
    new = NewMessage(
        session=args.name, content=_read_content(args.content), source=source,
        source_id=args.source_id or "", priority=priority, ttl_s=args.ttl, metadata=metadata,
        correlation_id=args.correlation_id, depth=args.depth,
        idempotency_key=args.idempotency_key, require_ack=args.ack,
    )
    store = _store(paths)
    try:
        sent = Service(paths, store, reg).send(new, raw=args.raw)
        msg, created = sent.message, sent.created
        if not sent.supervised and created:
            err.print(
                f"[yellow]warning:[/] {escape(args.name)}'s supervisor is not running; the message"
                f" waits until `agentwrap adopt {escape(args.name)}`"
            )
        removed = msg.metadata.get("sanitized_removed", 0) if created else 0
        if removed:
            err.print(f"[yellow]note:[/] removed {removed} control/escape sequence(s) from the content")
        if not args.wait:
            if args.json:
                _emit_json({**_message_json(msg), "created": created})
            else:
                err.print(escape(_sent_line(msg, created)))
                out.print(msg.id)
            return 0
        final = _wait_terminal(store, msg.id, args.timeout)
        if final is None:
            err.print(f"still {store.get(msg.id).status} after {args.timeout:.0f} s: {msg.id}")
            return EXIT_TIMEOUT
        if args.json:
            _emit_json(_message_json(final))
        else:
            out.print(escape(f"{final.status}: {final.detail}"))
        return EXIT_BY_STATUS.get(final.status, 1)
    finally:
        store.close()


def _sent_line(msg: Message, created: bool) -> str:
    """What ``send`` says about the message it stored, or found by its key.

    A key stays bound to its first message even once that message has ended
    (see ``SQLiteMessageStore.enqueue``): say which state it is in, never
    "expires in -12 s".
    """
    now = time.time()
    if created:
        return f"queued {msg.id} for {msg.session} ({msg.priority}, expires in" \
               f" {msg.expires - now:.0f} s)"
    if not msg.status.terminal:
        return f"already queued as {msg.id} (same idempotency key): {msg.status}, expires in" \
               f" {max(0.0, msg.expires - now):.0f} s"
    ago = f" {max(0.0, now - msg.finished):.0f} s ago" if msg.finished else ""
    return (
        f"already sent as {msg.id} (same idempotency key): {msg.status}{ago}; the key stays"
        " bound to that message, use a new key to send again"
    )


def _wait_terminal(store: Any, message_id: str, timeout: float) -> Message | None:
    deadline = time.monotonic() + timeout
    while True:
        m: Message = store.get(message_id)
        if m.status.terminal:
            return m
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def cmd_queue(args: argparse.Namespace) -> int:
    paths = _paths()
    rec = _registry(paths).get(args.name)
    store = _store(paths)
    try:
        pending = store.peek(args.name)
        flight = store.in_flight(args.name)
    finally:
        store.close()
    now = time.time()

    def why(m: Message) -> str:
        if m.next_attempt_at > now:
            return f"retry in {m.next_attempt_at - now:.0f} s ({m.detail})"
        if rec.liveness != "running":
            return "supervisor not running (`agentwrap adopt`)"
        if rec.draft or rec.state == "draft":
            return "draft in input box"
        if rec.state == "ready":
            return "due now"
        return {"busy": "agent busy", "waiting_input": "agent is waiting for an answer",
                "starting": "agent starting", "exited": "agent exited"}.get(rec.state, rec.state)

    rows = [(m, "delivering" + (f" ({m.phase})" if m.phase else "")) for m in flight]
    rows += [(m, why(m)) for m in pending]
    if args.json:
        _emit_json([{**_message_json(m), "waiting_because": w} for m, w in rows])
        return 0
    if not rows:
        err.print(escape(f"nothing pending for {args.name} (state: {rec.state})"))
        return 0
    render_rows(out, QUEUE_HEADERS, [queue_row(m, w, now) for m, w in rows], max_width=50)
    return 0


QUEUE_HEADERS = ("ID", "PRIORITY", "SOURCE", "AGE", "EXPIRES", "TRIES", "WAITING BECAUSE", "CONTENT")
HISTORY_HEADERS = ("ID", "SESSION", "STATUS", "TRIES", "CHANNEL", "TOOK", "SOURCE", "DETAIL")


def queue_row(m: Message, waiting_because: str, now: float) -> list[str]:
    return [
        m.id[:8], str(m.priority), m.label, _fmt_age(m.created),
        f"in {max(0, m.expires - now):.0f}s", str(m.attempts), waiting_because,
        " ".join(m.content.split()),  # one line: newlines and tabs become spaces
    ]


def history_row(m: Message, channel: str) -> list[str]:
    took = f"{m.finished - m.created:.1f}s" if m.finished else "-"
    return [
        m.id[:8], m.session, str(m.status), str(m.attempts), channel, took, m.label,
        " ".join(m.detail.split()),
    ]


def cmd_history(args: argparse.Namespace) -> int:
    paths = _paths()
    if args.name:
        _registry(paths).get(args.name)
    store = _store(paths)
    try:
        msgs = store.history(args.name, limit=args.limit)
        attempts = {m.id: store.attempts(m.id) for m in msgs}
    finally:
        store.close()
    if args.json:
        _emit_json([
            {**_message_json(m), "attempt_log": [asdict(a) for a in attempts[m.id]]} for m in msgs
        ])
        return 0
    if not msgs:
        err.print("no messages yet. Send one with `agentwrap send NAME TEXT`.")
        return 0
    rows = [history_row(m, attempts[m.id][-1].channel if attempts[m.id] else "-") for m in msgs]
    render_rows(out, HISTORY_HEADERS, rows, max_width=70)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    store = _store(_paths())
    try:
        mt = store.metrics(args.name)
    finally:
        store.close()
    data = asdict(mt)
    data["by_status"] = {str(k): v for k, v in mt.by_status.items()}
    if args.json:
        _emit_json({"session": args.name, **data})
        return 0
    table = Table(box=None, show_header=False)
    for key, value in data.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        table.add_row(Text(key.replace("_", " ")), Text(shown))
    out.print(table)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    store = _store(_paths())
    try:
        msg = store.cancel(store.get_by_prefix(args.id).id)
    finally:
        store.close()
    if args.json:
        _emit_json(_message_json(msg))
    else:
        err.print(escape(f"cancelled {msg.id}"))
    return 0


# --- doctor / profiles ---------------------------------------------------------------------


def _version_of(cmd: str) -> str:
    try:
        done = subprocess.run(
            [cmd, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else "?"


def cmd_doctor(args: argparse.Namespace) -> int:
    from .backends.relay_helper import helper_status
    from .backends.tmux import tmux_version
    from .config import load_config
    from .profiles import load_all_profiles

    paths = _paths()
    # before anything opens the store: ensure() would repair the modes it finds
    problems: list[dict[str, str]] = [
        {"problem": problem, "fix": fix} for problem, fix in private_problems(paths)
    ]
    report: dict[str, Any] = {"agentwrap": __version__, "python": sys.version.split()[0]}
    if shutil.which("tmux"):
        report["tmux"] = tmux_version()
    else:
        report["tmux"] = None
        problems.append({"problem": "tmux is not installed",
                         "fix": "apt-get install -y tmux (or use --backend pty)"})
    helper, why = helper_status()
    report["pty_relay"] = "native" if helper else "python"
    report["pty_relay_detail"] = why
    if helper is None:
        problems.append({"problem": f"the pty backend's native relay is {why}; it relays in "
                         "Python, which is slower on fast output",
                         "fix": "apt-get install -y gcc, then reinstall agentwrap"})
    report["paths"] = {
        "config": str(paths.config_file), "project_config": ".agentwrap.toml",
        "user_profiles": str(paths.user_patterns_dir), "state": str(paths.state_dir),
        "database": str(paths.db_path), "runtime": str(paths.runtime_dir),
        "tmux_sockets": str(paths.tmux_dir), "audit_log": str(paths.audit_log),
    }
    try:
        cfg = load_config(paths)
        report["config_files"] = [str(p) for p in cfg.sources]
    except AgentwrapError as exc:
        problems.append({"problem": exc.message, "fix": exc.hint})
    agents: dict[str, Any] = {}
    try:
        profiles = load_all_profiles(paths)
    except AgentwrapError as exc:
        problems.append({"problem": exc.message, "fix": exc.hint})
        profiles = {}
    for name, prof in sorted(profiles.items()):
        if name == "generic":
            continue
        exe = next((shutil.which(c) for c in prof.commands if shutil.which(c)), None)
        agents[name] = {"path": exe, "version": _version_of(exe) if exe else None,
                        "profile": str(prof.source)}
    report["agents"] = agents
    if not any(a["path"] for a in agents.values()):
        problems.append({"problem": "no agent CLI found on PATH",
                         "fix": "install one, e.g. npm install -g @anthropic-ai/claude-code"})
    try:
        reg = _registry(paths)
        stale = [r.name for r in reg.list() if r.liveness == "stale"]
        for name in stale:
            problems.append({"problem": f"session {name!r} has no running supervisor",
                             "fix": f"agentwrap adopt {name}   (or agentwrap stop {name})"})
    except AgentwrapError as exc:
        if not any(p["problem"] == exc.message for p in problems):
            problems.append({"problem": exc.message, "fix": exc.hint})
    if paths.db_path.exists():
        problems.extend(_store_problems(paths))
    report["problems"] = problems
    if args.json:
        _emit_json(report)
        return 1 if problems else 0
    out.print(escape(f"agentwrap {__version__}  python {report['python']}  "
                     f"{report['tmux'] or 'tmux MISSING'}  pty relay: {report['pty_relay']}"))
    table = Table(title="agents", box=None, header_style="bold")
    for col in ("AGENT", "FOUND", "VERSION"):
        table.add_column(col)
    for name, a in agents.items():
        found = Text(a["path"]) if a["path"] else Text("not found", style="red")
        table.add_row(Text(name), found, Text(a["version"] or "-"))
    out.print(table)
    for key, value in report["paths"].items():
        out.print(escape(f"  {key:15} {value}"))
    if problems:
        for p in problems:
            out.print(f"[red]problem:[/] {escape(p['problem'])}\n  [green]fix:[/] {escape(p['fix'])}")
        return 1
    out.print("[green]no problems found")
    return 0


def _store_problems(paths: Paths) -> list[dict[str, str]]:
    """The store opens and SQLite's quick_check passes."""
    from .queue import SQLiteMessageStore

    try:
        store = SQLiteMessageStore(paths.db_path)
        try:
            store.check_integrity()
        finally:
            store.close()
    except AgentwrapError as exc:
        return [{"problem": exc.message, "fix": exc.hint}]
    return []


def cmd_profiles(args: argparse.Namespace) -> int:
    from .profiles import load_all_profiles

    profiles = load_all_profiles(_paths())
    rows: list[dict[str, Any]] = [
        {"name": p.name, "commands": list(p.commands), "instruction_file": p.instruction_file,
         "source": str(p.source), "rules": len(p.rules), "dialogs": len(p.dialogs)}
        for p in profiles.values()
    ]
    if args.json:
        _emit_json(rows)
        return 0
    render_rows(
        out, ("NAME", "COMMANDS", "INSTRUCTION FILE", "RULES", "SOURCE"),
        [[r["name"], ", ".join(r["commands"]), r["instruction_file"] or "-", str(r["rules"]),
          r["source"]] for r in rows],
    )
    return 0


# --- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(prog="agentwrap", description=MAIN_HELP, formatter_class=fmt)
    p.add_argument("--version", action="version", version=f"agentwrap {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def add(name: str, help: str, desc: str = "", epilog: str = "") -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=desc or help, epilog=epilog,
                            formatter_class=fmt)
        return sp

    r = add("run", "start an agent under supervision",
            "Start an agent (claude, codex, aider, gemini or any command) under supervision.\n"
            "Keys, screen, resizes and Ctrl-C work as usual; the exit code is the agent's.\n"
            "With tmux (default) the agent keeps running when you detach (prefix d).",
            "examples:\n  agentwrap run claude\n  agentwrap run --detach --name api codex\n"
            "  agentwrap run --backend pty aider --model openai/x\n"
            "  agentwrap run claude --context handoff.md --trust-folder")
    r.add_argument("--name", help="session name (default: the agent's name, made unique)")
    r.add_argument("--profile", help="profile to use (default: chosen from the command name)")
    r.add_argument("--backend", choices=["tmux", "pty"], help="terminal backend (default: config, tmux)")
    r.add_argument("--detach", "-d", action="store_true", help="start headless (tmux); attach later")
    r.add_argument("--context", action="append", default=[], metavar="FILE",
                   help="startup context delivered once the agent is ready (repeatable)")
    r.add_argument("--trust-folder", action="store_true", default=None,
                   help="answer the agent's folder-trust dialog automatically (opt-in)")
    r.add_argument("--require-ack", action="store_true", default=None,
                   help="ask the agent to acknowledge every delivery")
    r.add_argument("--cwd", help="working directory of the agent (default: here)")
    r.add_argument("--cols", type=int, help="width of a detached session")
    r.add_argument("--rows", type=int, help="height of a detached session")
    r.add_argument("--json", action="store_true", help="with --detach: print the session as JSON")
    r.add_argument("command", nargs=argparse.REMAINDER, help="the agent command and its arguments")
    r.set_defaults(func=cmd_run)

    a = add("attach", "put this terminal on a running tmux session (re-adopts it if needed)")
    a.add_argument("name")
    a.set_defaults(func=cmd_attach)

    ad = add("adopt", "restart supervision of a session whose supervisor died",
             "Start a new supervisor for a running tmux session. Messages that were being\n"
             "delivered resume from where they stopped; nothing is typed twice.")
    ad.add_argument("name")
    ad.set_defaults(func=cmd_adopt)

    ls = add("ls", "list sessions")
    ls.add_argument("--all", action="store_true", help="include ended sessions")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_ls)

    st = add("state", "show a session's state (starting, ready, busy, waiting_input, draft, exited)",
             epilog="examples:\n  agentwrap state api --explain\n  agentwrap state api --watch --json")
    st.add_argument("name")
    st.add_argument("--explain", action="store_true", help="which signal and rule decided it")
    st.add_argument("--watch", action="store_true", help="follow changes until the session ends")
    st.add_argument("--screen", action="store_true",
                    help="print the screen the last verdict was based on (to debug a profile)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_state)

    so = add("stop", "stop a session's agent (its whole process tree)")
    so.add_argument("name")
    so.add_argument("--json", action="store_true")
    so.set_defaults(func=cmd_stop)

    se = add("send", "queue a message for a session",
             "Queue a message. It is stored durably before this returns, then typed into\n"
             "the agent at the next safe moment as one marked block, prefixed\n"
             "[source:source_id]. Content is sanitized: escape sequences and control\n"
             "characters are removed. Use - to read the content from stdin.\n\n"
             "Into a shell (profile 'shell': bash, zsh, ...) a message is a command: typed\n"
             "as is, one at a time, and only from sources your config trusts with that\n"
             "([trust] raw_sources, default: user). --raw does the same for any session\n"
             "(an agent's own /command, a REPL's input).",
             EXIT_HELP + "\nexamples:\n  agentwrap send api \"CI: test_login failed\" --source webhook "
             "--source-id github --priority high\n  git diff | agentwrap send api - --wait --timeout 60"
             "\n  agentwrap send sh \"make test\"            # a shell session: runs make test"
             "\n  agentwrap send api --raw \"/compact\"      # typed as is: the agent's own command")
    se.add_argument("name")
    se.add_argument("content", help="the text, or - for stdin")
    se.add_argument("--source", default="user",
                    help="who sends it: " + ", ".join(s.value for s in Source if s is not Source.SYSTEM)
                    + " (default user; system is agentwrap's own)")
    se.add_argument("--source-id", help="who within the source, e.g. github")
    se.add_argument("--priority", default="normal", choices=["low", "normal", "high", "critical"])
    se.add_argument("--ttl", type=float, help="seconds before it expires (default 300, max 3600)")
    se.add_argument("--ack", action=argparse.BooleanOptionalAction, default=None,
                    help="ask the agent to acknowledge (default: config)")
    se.add_argument("--idempotency-key",
                    help="a repeated key returns the first message (whatever its state); the same"
                    " key with other content is an error (exit 4)")
    se.add_argument("--correlation-id")
    se.add_argument("--depth", type=int, default=0, help="hops so far (agent-to-agent)")
    se.add_argument("--metadata", help="JSON object stored with the message")
    se.add_argument("--raw", action="store_true",
                    help="type the text as is (no quoting block, no ACK); trusted sources only")
    se.add_argument("--wait", action="store_true", help="block until the message ends")
    se.add_argument("--timeout", type=float, default=60.0, help="with --wait (default 60 s)")
    se.add_argument("--json", action="store_true")
    se.set_defaults(func=cmd_send)

    q = add("queue", "what is pending for a session, and why it waits")
    q.add_argument("name")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_queue)

    h = add("history", "every message and how it ended")
    h.add_argument("name", nargs="?")
    h.add_argument("--limit", type=int, default=50)
    h.add_argument("--json", action="store_true")
    h.set_defaults(func=cmd_history)

    mt = add("metrics", "delivery figures (first-try rate, retries, escalations, latency)")
    mt.add_argument("name", nargs="?")
    mt.add_argument("--json", action="store_true")
    mt.set_defaults(func=cmd_metrics)

    c = add("cancel", "cancel a pending message (id or unique prefix)")
    c.add_argument("id")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_cancel)

    d = add("doctor", "check tmux, agent CLIs, config and sessions; say how to fix problems")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_doctor)

    pr = add("profiles", "list agent profiles (built-in and yours)")
    pr.add_argument("--json", action="store_true")
    pr.set_defaults(func=cmd_profiles)

    sv = sub.add_parser("_supervise")  # internal: the detached supervisor process
    sv.add_argument("name")
    sv.set_defaults(func=cmd_supervise)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if args.cmd == "run" and args.command and args.command[0] == "--":
        args.command = args.command[1:]
    try:
        code: int = args.func(args)
        return code
    except AgentwrapError as exc:
        # messages quote user input (names, paths): never read it as markup
        err.print(f"[red]error:[/] {escape(exc.message)}")
        if exc.hint:
            err.print(f"[dim]hint:[/] {escape(exc.hint)}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
