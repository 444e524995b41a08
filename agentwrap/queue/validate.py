"""The checks a message passes before the store touches the database.

Everything here is stateless: the shape, size and TTL of a new message, its
metadata (depth, keys and size, without recursion), its ids, and the sources,
priorities and kinds reserved for agentwrap itself, against the configured
:class:`~agentwrap.message.QueueLimits`. What needs the stored rows (rate,
pending limits, idempotency keys) is the store's (:mod:`agentwrap.queue.sqlite`,
:mod:`agentwrap.queue.admission`), which calls :func:`validate` first and
:func:`check_same` for a reused key.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import IdempotencyConflict, InvalidMessage, MessageTooLarge
from ..message import Kind, Message, NewMessage, Priority, QueueLimits, Source
from ..paths import check_session_name
from .sanitize import check_text, sanitize

E = TypeVar("E", bound=enum.Enum)

MAX_DEPTH = 16  # agent-to-agent forwarding deeper than this is a loop
MAX_ID_CHARS = 128  # source_id, correlation_id, idempotency_key
# A shorter TTL vanishes when added to a timestamp (a float of ~1.8e9 s has a
# resolution of ~2e-7 s): 5e-324 would be stored as expires == created.
MIN_TTL_S = 0.001


@dataclass(frozen=True)
class Checked:
    """A NewMessage after validation: everything enqueue needs to insert a row."""

    new: NewMessage
    content: str
    content_bytes: int
    source: Source
    priority: Priority
    ttl_s: float
    metadata_json: str
    kind: Kind
    internal: bool


RESERVED_PRIORITIES = frozenset({Priority.STARTUP})  # ahead of all, never evicted

# Kinds a caller may enqueue without ``internal=True``. A COMMAND is still a
# privilege: the application service grants it by the session's trust policy.
SENDER_KINDS = frozenset({Kind.CONTENT, Kind.INSTRUCTION, Kind.COMMAND})


def validate(new: NewMessage, limits: QueueLimits, kind: Kind, internal: bool) -> Checked:
    """Every stateless check of enqueue, before the database is touched."""
    source = _enum(Source, new.source, "source")
    priority = _enum(Priority, new.priority, "priority")
    kind = _enum(Kind, kind, "kind")
    if not internal:
        # agentwrap's own sources, priorities and kinds carry privileges (no
        # rate limit, first in line, acted upon): no sender may claim them.
        reserved = (
            f"source '{source}'" if source is Source.SYSTEM
            else f"priority '{priority}'" if priority in RESERVED_PRIORITIES
            else f"kind '{kind}'" if kind not in SENDER_KINDS
            else None
        )
        if reserved:
            raise InvalidMessage(
                f"{reserved} is reserved for agentwrap",
                hint="send as another source (user, webhook, agent, ...) with priority low,"
                " normal, high or critical",
            )
    check_session_name(new.session)
    if not isinstance(new.content, str):
        raise InvalidMessage("content must be text")
    check_text(new.content)
    if not new.content.strip():
        raise InvalidMessage("content is empty", hint="send some text")
    clean = sanitize(new.content)
    if not clean.text.strip():
        raise InvalidMessage(
            "content is empty after removing terminal control sequences",
            hint="send plain text; escape sequences and control characters are removed",
        )
    size = len(clean.text.encode("utf-8"))
    if size > limits.max_content_bytes:
        raise MessageTooLarge(f"content is {size} bytes; the limit is {limits.max_content_bytes}")
    metadata = _check_metadata(new.metadata, limits)
    if clean.removed:
        metadata["sanitized_removed"] = clean.removed
    _check_id("source_id", new.source_id, allow_empty=True)
    for name, value in (
        ("correlation_id", new.correlation_id),
        ("idempotency_key", new.idempotency_key),
    ):
        if value is not None:
            _check_id(name, value, allow_empty=False)
    if (
        isinstance(new.depth, bool)
        or not isinstance(new.depth, int)
        or not (0 <= new.depth <= MAX_DEPTH)
    ):
        raise InvalidMessage(
            f"depth {new.depth!r} is out of range 0..{MAX_DEPTH}",
            hint="messages forwarded between agents this deep are probably looping",
        )
    return Checked(
        new=new,
        content=clean.text,
        content_bytes=size,
        source=source,
        priority=priority,
        ttl_s=_check_ttl(new.ttl_s, limits),
        metadata_json=_dump_json(metadata),
        kind=kind,
        internal=internal,
    )


def check_same(first: Message, checked: Checked) -> None:
    """A reused idempotency key must name the same message, or it is a conflict.

    Compared: what the agent would read and who it claims to be from
    (content after sanitizing, source, source_id, priority, kind). TTL,
    metadata and ack are not: a retry may recompute them.
    """
    new = checked.new
    differs = [
        name
        for name, a, b in (
            ("content", first.content, checked.content),
            ("source", first.source, checked.source),
            ("source_id", first.source_id, new.source_id),
            ("priority", first.priority, checked.priority),
            ("kind", first.kind, checked.kind),
        )
        if a != b
    ]
    if differs:
        raise IdempotencyConflict(
            f"idempotency key {new.idempotency_key!r} was already used in session"
            f" {new.session!r} by message {first.id[:8]} ({first.status}) with a different"
            f" {', '.join(differs)}"
        )


def _check_ttl(ttl_s: float | None, limits: QueueLimits) -> float:
    if ttl_s is None:
        return limits.default_ttl_s
    if (
        isinstance(ttl_s, bool)
        or not isinstance(ttl_s, (int, float))
        or not (math.isfinite(ttl_s) and MIN_TTL_S <= ttl_s <= limits.max_ttl_s)
    ):
        raise InvalidMessage(
            f"ttl {ttl_s!r} s is out of range [{MIN_TTL_S:g}, {limits.max_ttl_s:g}]",
            hint="give a TTL of at least 1 ms and no longer than limits.max_ttl_s",
        )
    return float(ttl_s)


def _check_id(name: str, value: str, *, allow_empty: bool) -> None:
    """Ids end up in labels typed into the terminal and in logs: short and printable."""
    if not isinstance(value, str):
        raise InvalidMessage(f"{name} must be text")
    if not value and not allow_empty:
        raise InvalidMessage(f"{name} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise InvalidMessage(f"{name} is {len(value)} characters; the limit is {MAX_ID_CHARS}")
    check_text(value)
    if value != sanitize(value).text or "\n" in value or "\t" in value:
        raise InvalidMessage(f"{name} {value!r} contains control characters")


def _check_metadata(metadata: Any, limits: QueueLimits) -> dict[str, Any]:
    """A JSON object within the limits; returned as its JSON round trip (what
    get() will give back).

    The limits are checked by one iterative walk before anything is
    serialized: it stops at the first level too deep (no recursion, so no
    RecursionError, and a cycle is just "too deep") and as soon as a lower
    bound of the serialized size passes the limit, so a 20 MB object costs
    about as much to refuse as a 16 KB one. Only then is the object dumped
    and its exact size checked.
    """
    if not isinstance(metadata, dict):
        raise InvalidMessage("metadata must be a JSON object (a dict)")
    _walk_metadata(metadata, limits)
    dumped = _dump_json(metadata)
    size = len(dumped.encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise _metadata_too_large(f"{size} bytes", limits)
    loaded = json.loads(dumped)
    assert isinstance(loaded, dict)
    return loaded


def _metadata_too_large(size: str, limits: QueueLimits) -> MessageTooLarge:
    return MessageTooLarge(
        f"metadata is {size} as JSON; the limit is {limits.max_metadata_bytes}",
        hint="keep metadata to a few ids and flags; put bulk data in the content or a file",
    )


def _walk_metadata(metadata: dict[str, Any], limits: QueueLimits) -> None:
    """Depth, key and (lower bound of) size limits, without recursion."""
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    size = 0  # bytes the JSON text will have at least
    keys = 0
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limits.max_metadata_depth:
                raise InvalidMessage(
                    f"metadata nests deeper than {limits.max_metadata_depth} levels",
                    hint="flatten the metadata; it is for a few ids and flags",
                )
            size += 2 + max(0, len(value) - 1)  # brackets and commas
            if isinstance(value, dict):
                keys += len(value)
                if keys > limits.max_metadata_keys:
                    raise InvalidMessage(
                        f"metadata has more than {limits.max_metadata_keys} keys",
                        hint="flatten the metadata; it is for a few ids and flags",
                    )
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InvalidMessage(
                            f"metadata key {key!r} is not a string",
                            hint="JSON objects have string keys",
                        )
                    if len(key) > limits.max_metadata_key_chars:
                        raise InvalidMessage(
                            f"a metadata key is {len(key)} characters; the limit is"
                            f" {limits.max_metadata_key_chars}"
                        )
                    size += len(key) + 3  # quotes and colon
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            size += len(value) + 2  # UTF-8 has at least one byte per character
        elif isinstance(value, int) and not isinstance(value, bool):
            size += max(1, value.bit_length() * 3 // 10)  # decimal digits, from below
        else:
            size += 1  # float, bool, null; other types fail in _dump_json
        if size > limits.max_metadata_bytes:
            raise _metadata_too_large(f"more than {limits.max_metadata_bytes} bytes", limits)


def _dump_json(value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(
            f"metadata is not JSON-serialisable: {exc}",
            hint="use strings, numbers, booleans, null, lists and objects with string keys",
        ) from None


def _enum(kind: type[E], value: object, name: str) -> E:
    try:
        return kind(value)
    except ValueError:
        raise InvalidMessage(f"unknown {name} {value!r}") from None
