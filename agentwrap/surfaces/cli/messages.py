"""Commands for messages: ``send``, ``queue``, ``history``, ``metrics``, ``cancel``.

Each is an adapter over :class:`~agentwrap.service.Service`: parse, call,
print. ``send`` has the service store the message and wake the supervisor and,
with ``--wait``, waits on the event bus until the message ends, mapping its
end state to the exit codes in ``EXIT_BY_STATUS`` (``EXIT_UNACKNOWLEDGED`` for
one delivered whose ACK was asked and never came). ``queue`` shows why each
pending message waits; ``history`` and ``metrics`` what the store kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ...errors import InvalidMessage
from ...message import Message, NewMessage, Priority, Source, Status, acknowledged, end_outcome
from ...queue.sanitize import decode_utf8
from ...service import Service
from .common import emit_json, err, fmt_age, open_service, out, render_rows

EXIT_BY_STATUS = {
    Status.DELIVERED: 0,
    Status.ACKNOWLEDGED: 0,
    Status.ESCALATED: 10,
    Status.EXPIRED: 11,
    Status.EVICTED: 12,
    Status.CANCELLED: 13,
    Status.FAILED: 14,
}
#: Delivered, but the ACK asked of it never came (the agent exited first): a
#: sender who asked for an ACK must not read it as acknowledged (0).
EXIT_UNACKNOWLEDGED = 15
EXIT_TIMEOUT = 124


def _message_json(m: Message) -> dict[str, Any]:
    data = asdict(m)
    for key in ("source", "priority", "status", "phase"):
        data[key] = str(data[key]) if data[key] is not None else None
    data["framing"] = m.framing
    return data


_METADATA_HINT = "pass a JSON object, e.g. --metadata '{\"pr\": 42}'"


def _read_content(arg: str) -> str:
    if arg == "-":
        return decode_utf8(sys.stdin.buffer.read())
    return arg


def cmd_send(args: argparse.Namespace) -> int:
    with open_service() as svc:
        return _send(svc, args)


def _send(svc: Service, args: argparse.Namespace) -> int:
    svc.state(args.name)  # unknown: the first thing to hear
    args.name = svc.session_name(args.name)  # HOST/NAME on a shared store: whose it is
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
    sent = svc.send(new, raw=args.raw)
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
            emit_json({**_message_json(msg), "created": created})
        else:
            err.print(escape(_sent_line(msg, created)))
            out.print(msg.id)
        return 0
    final = svc.wait_for_end_state(msg.id, args.timeout)
    if final is None:
        err.print(f"still {svc.get(msg.id).status} after {args.timeout:.0f} s: {msg.id}")
        return EXIT_TIMEOUT
    entry = svc.message(final.id)  # the message and its attempts read together
    final, attempts = entry.message, entry.attempts
    acked = acknowledged(final.status, attempts)
    if args.json:
        emit_json({**_message_json(final), "acknowledged": acked,
                    "outcome": end_outcome(final.status, attempts)})
    else:
        out.print(escape(end_line(final, acked)))
    return EXIT_UNACKNOWLEDGED if acked is False else EXIT_BY_STATUS.get(final.status, 1)


def end_line(m: Message, acked: bool | None) -> str:
    """``STATUS: detail``, once: most details already begin with their status
    ("acknowledged: ACK 3f9c2a1b"), which printed it twice."""
    status = f"{m.status}{' (not acknowledged)' if acked is False else ''}"
    detail = m.detail
    if detail == str(m.status) or detail.startswith(f"{m.status}:"):
        detail = detail[len(str(m.status)):].lstrip(": ")
    return f"{status}: {detail}" if detail else status


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


def cmd_queue(args: argparse.Namespace) -> int:
    now = time.time()
    with open_service() as svc:
        view = svc.peek(args.name, now)
    if args.json:
        emit_json([{**_message_json(w.message), "waiting_because": w.waiting_because}
                    for w in view.entries])
        return 0
    if not view.entries:
        err.print(escape(f"nothing pending for {args.name} (state: {view.session.state})"))
        return 0
    rows = [queue_row(w.message, w.waiting_because, now) for w in view.entries]
    render_rows(out, QUEUE_HEADERS, rows, max_width=50)
    return 0


QUEUE_HEADERS = ("ID", "PRIORITY", "SOURCE", "AGE", "EXPIRES", "TRIES", "WAITING BECAUSE", "CONTENT")
HISTORY_HEADERS = ("ID", "SESSION", "STATUS", "TRIES", "CHANNEL", "TOOK", "SOURCE", "AS", "DETAIL")
# On a narrow terminal these go first, in this order (`history --json` has them all):
# ID, STATUS and DETAIL say what happened to which message, the rest how
HISTORY_DROP = ("AS", "SESSION", "TOOK", "TRIES", "CHANNEL", "SOURCE")


def queue_row(m: Message, waiting_because: str, now: float) -> list[str]:
    return [
        m.id[:8], str(m.priority), m.label, fmt_age(m.created),
        f"in {max(0, m.expires - now):.0f}s", str(m.attempts), waiting_because,
        " ".join(m.content.split()),  # one line: newlines and tabs become spaces
    ]


def history_row(m: Message, channel: str) -> list[str]:
    took = f"{m.finished - m.created:.1f}s" if m.finished else "-"
    return [
        m.id[:8], m.session, str(m.status), str(m.attempts), channel, took, m.label,
        m.framing, " ".join(m.detail.split()),
    ]


def _from_source(m: Message, name: str) -> bool:
    fb = m.metadata.get("feedback") if isinstance(m.metadata, dict) else None
    names = fb.get("sources", []) if isinstance(fb, dict) else []
    return str(m.source) == name or name in m.source_id.split("+") or name in names


def cmd_history(args: argparse.Namespace) -> int:
    if getattr(args, "conversation", False):
        return _conversation(args)
    with open_service() as svc:
        entries = svc.history(args.name or None, limit=args.limit if not getattr(
            args, "source", None) else 1000)
    if getattr(args, "source", None):  # a message source, or a feedback source's name
        entries = [e for e in entries if _from_source(e.message, args.source)][:args.limit]
    if args.json:
        emit_json([
            {**_message_json(e.message), "attempt_log": [asdict(a) for a in e.attempts]}
            for e in entries
        ])
        return 0
    if not entries:
        err.print(escape(f"no messages yet. Send one with `agentwrap send {args.name or 'NAME'} TEXT`."))
        return 0
    rows = [history_row(e.message, e.channel) for e in entries]
    render_rows(out, HISTORY_HEADERS, rows, drop=HISTORY_DROP)
    return 0


#: What each entry kind is called in the conversation's text form.
WHO = {"prompt": "you", "message": "message", "reply": "agent", "tool": "tool",
       "question": "asked", "answer": "answer"}


def _conversation(args: argparse.Namespace) -> int:
    if not args.name:
        raise InvalidMessage("--conversation needs a session name",
                             hint="agentwrap history NAME --conversation")
    with open_service() as svc:
        got = svc.conversation(args.name, limit=max(args.limit, 1) * 10)
    if args.json:
        emit_json(got.to_json())
        return 0
    if not got.entries:
        err.print(escape(f"nothing in the conversation of {got.session} yet"))
        return 0
    for e in got.entries:
        head = time.strftime("%H:%M:%S", time.localtime(e.at)) + " " + WHO.get(e.kind, e.kind)
        if e.kind == "message":
            ack = {True: "ACK", False: "no ACK", None: "no ACK asked"}[e.acked]
            head += f" {e.message_id[:8]} {e.target} ({e.status}, {ack})"
        elif e.kind == "tool":
            head += f" {e.tool}"
        out.print(Text(head, style="bold"))
        out.print(Text(e.text if e.kind != "tool" else e.target or e.text))
    err.print(escape(f"(the agent's side read from: {got.source})"))
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    with open_service() as svc:
        mt = svc.metrics(args.name)
    data = asdict(mt)
    data["by_status"] = {str(k): v for k, v in mt.by_status.items()}
    if args.json:
        emit_json({"session": args.name, **data})
        return 0
    channels = data.pop("by_channel")
    table = Table(box=None, show_header=False)
    for key, value in data.items():
        # by_status: a row of counts (the statuses that have any), not a dict
        shown = (", ".join(f"{status} {n}" for status, n in value.items() if n) or "none"
                 if key == "by_status" else _figure(value))
        table.add_row(Text(key.replace("_", " ")), Text(shown))
    out.print(table)
    if channels:
        per = Table(title="by channel (a message counts for the channel that ended it)",
                    title_justify="left")
        # short heads, so that the table fits 80 columns without cutting a channel's name
        heads = {"attempts": "attempts", "failed_attempts": "failed", "delivered": "delivered",
                 "first_try_rate": "first try", "p50_latency_s": "p50 s",
                 "p95_latency_s": "p95 s"}
        per.add_column("channel", no_wrap=True)
        for head in heads.values():
            per.add_column(head, justify="right", no_wrap=True)
        for channel, figures in channels.items():
            per.add_row(Text(channel), *(Text(_figure(figures[h])) for h in heads))
        out.print(per)
    return 0


def _figure(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def cmd_cancel(args: argparse.Namespace) -> int:
    with open_service() as svc:
        msg = svc.cancel(args.id)
    if args.json:
        emit_json(_message_json(msg))
    else:
        err.print(escape(f"cancelled {msg.id}"))
    return 0
