"""Schema-driven fuzzing of the HTTP API (issue 10) with schemathesis.

The hand-written tests of :mod:`test_http_api` check the cases someone
thought of; this file lets the OpenAPI document itself produce the requests:
every operation, with values that fit the schema (positive) and values that
break it (negative), against the real app, store and registry. For every
answer: no 5xx, a status code, content type and body the document lists, an
invalid request refused with a 4xx, and an operation that declares the
bearer token refusing a request without it. A check that fails here means
the server or its document is wrong, and the fix goes there, never into the
check. Afterwards the store is opened directly and every row the fuzzer got
stored must keep the queue's rules (sanitized content within the limit, a
sender's priority and source, a sane expiry, bounded depth, ids and
metadata), whatever the HTTP layer let through.

Bounded and reproducible: a fixed number of examples per operation and mode,
``derandomize`` (the same requests on every run), no shrinking (a failure is
reported as found; its request is printed), no deadline (CI machines are
noisy). Sessions exist (an agent profile, a shell that takes raw commands, an
ended one) and messages too, and generated names and ids are swapped for
theirs some of the time, so the fuzzer reaches past the 404s. The event
stream is endless: schemathesis reads it for a short timeout and cuts it.
Everything runs in-process except one small run against ``agentwrap serve`` on
127.0.0.1, which checks the same through a real socket and uvicorn.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from conftest import AwEnv
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from support.http_kit import TOKEN, Served, body, in_process, register, serve
from test_sanitize import assert_safe

from agentwrap.message import Kind, Priority, QueueLimits, Source
from agentwrap.paths import check_session_name
from agentwrap.queue.sanitize import sanitize
from agentwrap.queue.validate import MAX_DEPTH, MAX_ID_CHARS

#: Per operation and generation mode. Small: the point is breadth (every
#: operation, both modes, on every run), not a long search.
EXAMPLES = 12
LIVE_EXAMPLES = 5
#: The event stream never ends by itself: read it this long, then cut it.
STREAM_S = 0.3
#: Names the fuzzer's path parameters are swapped for, some of the time.
SESSIONS = ["fake", "sh", "gen", "gone"]
#: Their profiles (_sessions registers them so).
PROFILES = {"fake": "standin", "sh": "shell", "gen": "generic", "gone": "standin"}
#: Generous enough that the fuzzer's messages are stored, not rate-limited.
LIMITS = QueueLimits(rate_per_minute=100_000, max_pending_per_session=40)
#: Every answer: no 5xx, a documented status, type and shape; an invalid
#: request refused (4xx); an operation that declares the token needs it.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection, ignored_auth]
#: The event stream costs STREAM_S a request: a few suffice to check its framing.
STREAM_EXAMPLES = 3


def _sessions(aw: AwEnv) -> None:
    """One of each kind the API treats differently."""
    for name in SESSIONS:  # an agent (quoted content), a shell (every message is a
        register(aw, name, profile=PROFILES[name])  # command), a generic program, an ended one
    reg = aw.registry()
    try:
        reg.mark_ended("gone", 0)  # 409 for new messages
    finally:
        reg.close()


def _timeout(case: Case) -> float:
    """Seconds the client waits: the event stream is cut after a moment,
    anything else that takes this long has hung."""
    return STREAM_S if case.operation.path == "/api/events" else 60.0


def _swap(case: Case, name: str | None, message_id: str | None) -> None:
    """Point a positive case at something that exists: the fuzzer's own
    names and ids are almost always 404s, which test little past the lookup.
    A ``wait`` is cut short (no agent runs; it would wait for nothing)."""
    params = case.path_parameters or {}
    if name is not None and "name" in params:
        params["name"] = name
    if message_id is not None and "message_id" in params:
        params["message_id"] = message_id
    wait = (case.query or {}).get("wait")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0.05:
        assert case.query is not None
        case.query["wait"] = 0.05


def _fuzz(
    schema: schemathesis.BaseSchema, call: Callable[[Case], None], ids: list[str],
    examples: int, modes: list[GenerationMode],
) -> list[str]:
    """Every operation in every mode; returns the failures (operation, mode, error)."""
    failures: list[str] = []
    ops = [result.ok() for result in schema.get_all_operations()]
    assert len(ops) >= 10, [op.label for op in ops]
    for op in ops:
        # a path parameter that is any string has no invalid value to send
        negatable = len(op.query) + len(op.headers) + len(op.body) > 0
        for mode in [m for m in modes if negatable or m is GenerationMode.POSITIVE]:
            n = STREAM_EXAMPLES if op.path == "/api/events" else examples
            try:
                _run(op, mode, call, ids, n)
            except Exception as exc:
                inner = getattr(exc, "exceptions", ())  # hypothesis: flaky, several errors
                failures.append(f"--- {op.label} [{mode.value}]\n{exc}" + "".join(
                    f"\n  {type(e).__name__}: {e}" for e in inner))
    return failures


def _run(
    op: schemathesis.APIOperation, mode: GenerationMode, call: Callable[[Case], None],
    ids: list[str], examples: int,
) -> None:
    """One operation in one mode: ``examples`` requests, the same ones every run."""
    positive = mode is GenerationMode.POSITIVE

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode), name=st.sampled_from([*SESSIONS, None]),
           mid=st.sampled_from([*ids, *(i[:8] for i in ids), None]))
    def run(case: Case, name: str | None, mid: str | None) -> None:
        if positive:
            _swap(case, name, mid)
        call(case)

    run()


def _seed(post: Callable[[str, dict[str, Any]], str], n: int = 6) -> list[str]:
    """Messages whose ids the fuzzer may use (get, cancel)."""
    return [post(name, body(f"seed {i}", source="user"))
            for i, name in enumerate(["fake", "sh", "gen"] * (n // 3))]


# --- the store's rules ------------------------------------------------------------------


def _json_depth_and_keys(value: Any) -> tuple[int, int]:
    if isinstance(value, dict):
        inner = [_json_depth_and_keys(v) for v in value.values()]
        return 1 + max((d for d, _ in inner), default=0), len(value) + sum(k for _, k in inner)
    if isinstance(value, list):
        inner = [_json_depth_and_keys(v) for v in value]
        return 1 + max((d for d, _ in inner), default=0), sum(k for _, k in inner)
    return 0, 0


def assert_stored_messages_keep_the_rules(aw: AwEnv, limits: QueueLimits) -> int:
    """Read every row of the store as it is on disk and check the queue's rules."""
    db = sqlite3.connect(f"file:{aw.paths.db_path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute("SELECT * FROM messages").fetchall()
        # a session the fuzzer stopped and then dismissed has no record any more, and its
        # messages stay in the history: its profile is the one _sessions gave it
        sessions = {**PROFILES, **{r["name"]: r["profile"]
                                   for r in db.execute("SELECT name, profile FROM sessions")}}
    finally:
        db.close()
    senders = {s.value for s in Source} - {Source.SYSTEM.value}
    for row in rows:
        where = f"message {row['id']} ({row['session']})"
        content = row["content"]
        assert content.strip(), where
        assert len(content.encode("utf-8")) == row["content_bytes"] <= limits.max_content_bytes, where
        assert_safe(content)
        assert sanitize(content).text == content, f"{where}: stored content is not sanitized"
        assert row["source"] in senders, f"{where}: source {row['source']!r}"
        assert row["priority"] in {p.value for p in Priority} - {Priority.STARTUP.value}, where
        assert row["kind"] in {Kind.CONTENT.value, Kind.INSTRUCTION.value, Kind.COMMAND.value}, where
        if row["kind"] == Kind.COMMAND.value:  # raw only into a shell, only from "user"
            assert sessions[row["session"]] == "shell" and row["source"] == "user", where
        # the person's own words only from the person's source (the default [trust])
        assert (row["kind"] == Kind.INSTRUCTION.value) == (
            row["source"] == "user" and sessions[row["session"]] != "shell"), where
        assert row["session"] in sessions and check_session_name(row["session"]), where
        ttl = row["expires"] - row["created"]
        assert math.isfinite(ttl) and 0 < ttl <= limits.max_ttl_s + 1e-6, f"{where}: ttl {ttl}"
        assert row["created"] <= row["updated"] <= time.time() + 1, where
        assert isinstance(row["depth"], int) and 0 <= row["depth"] <= MAX_DEPTH, where
        for name in ("source_id", "correlation_id", "idempotency_key"):
            value = row[name]
            if value is None:
                continue
            assert len(value) <= MAX_ID_CHARS, f"{where}: {name} too long"
            assert sanitize(value).text == value and "\n" not in value and "\t" not in value, (
                f"{where}: {name} {value!r}")
        metadata = json.loads(row["metadata"])
        assert isinstance(metadata, dict), where
        metadata.pop("sanitized_removed", None)  # the store's own note, not the sender's
        dumped = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
        assert len(dumped.encode("utf-8")) <= limits.max_metadata_bytes, where
        depth, keys = _json_depth_and_keys(metadata)
        assert depth <= limits.max_metadata_depth and keys <= limits.max_metadata_keys, where
        for key in _all_keys(metadata):
            assert len(key) <= limits.max_metadata_key_chars, where
    return len(rows)


def _all_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _all_keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _all_keys(v)


# --- in-process -------------------------------------------------------------------------


def test_fuzz_every_operation_in_process(aw: AwEnv) -> None:
    _sessions(aw)
    client = in_process(aw, LIMITS)
    app = client.app
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        def post(name: str, payload: dict[str, Any]) -> str:
            r = client.post(f"/api/sessions/{name}/input", json=payload)
            assert r.status_code == 201, r.text
            return str(r.json()["id"])

        ids = _seed(post)
        schema = schemathesis.openapi.from_dict(app.openapi())
        schema.app = app

        def call(case: Case) -> None:
            case.call_and_validate(headers=auth, checks=CHECKS, timeout=_timeout(case))

        failures = _fuzz(schema, call, ids, EXAMPLES, list(GenerationMode))
        assert not failures, "\n".join(failures)
    finally:
        app.state.pool.close()
    assert assert_stored_messages_keep_the_rules(aw, LIMITS) > len(ids)  # the fuzzer's too


# --- the real server on loopback ---------------------------------------------------------


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    aw.paths.config_file.write_text(
        f"[limits]\nrate_per_minute = {LIMITS.rate_per_minute}\n"
        f"max_pending_per_session = {LIMITS.max_pending_per_session}\n", encoding="utf-8")
    _sessions(aw)
    yield from serve(aw)


def test_fuzz_the_real_server_on_loopback(aw: AwEnv, server: Served) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    auth = {"Authorization": f"Bearer {server.token}"}
    with server.client() as c:
        def post(name: str, payload: dict[str, Any]) -> str:
            r = c.post(f"/api/sessions/{name}/input", json=payload)
            assert r.status_code == 201, r.text
            return str(r.json()["id"])

        ids = _seed(post)
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")

    def call(case: Case) -> None:
        case.call_and_validate(base_url=server.url, headers=auth, checks=CHECKS,
                               timeout=_timeout(case))

    failures = _fuzz(schema, call, ids, LIVE_EXAMPLES, list(GenerationMode))
    assert not failures, "\n".join(failures)
    assert assert_stored_messages_keep_the_rules(aw, LIMITS) > len(ids)
