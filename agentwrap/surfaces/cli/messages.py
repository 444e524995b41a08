"""Commands for messages: ``send``, ``queue``, ``history``, ``metrics``, ``cancel``.

``send`` stores the message durably, wakes the session's supervisor and, with
``--wait``, polls the store until the message ends, mapping its end state to
the exit codes in ``EXIT_BY_STATUS``. ``queue`` says why each pending message
waits; ``history`` and ``metrics`` read what the store kept.
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
from ...message import Message, NewMessage, Priority, Source, Status
from ...paths import Paths
from ...queue.sanitize import decode_utf8
from .common import _emit_json, _fmt_age, _paths, _registry, err, out, render_rows

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


def _store(paths: Paths) -> Any:
    from ...config import load_config
    from ...queue.sqlite import SQLiteMessageStore

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
    from ...service import Service

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
