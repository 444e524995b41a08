"""Untrusted text in the CLI's output, and what ``send`` says about keys,
sources and metadata it refuses.

Rendering is checked twice: through a real ``rich`` console that believes it
is a terminal (where markup would turn into links and styles), and through
the real CLI in a subprocess (a pipe: the compact one-line-per-row layout).
"""

from __future__ import annotations

import io
import json
import time

from conftest import AwEnv
from rich.console import Console
from test_cli import assert_clean_error, fake_session

from agentwrap.message import NewMessage, Source
from agentwrap.surfaces.cli.common import render_rows
from agentwrap.surfaces.cli.messages import HISTORY_HEADERS, QUEUE_HEADERS, history_row, queue_row

HOSTILE = "[/] then [link=https://evil.example]click[/link] and [bold red]loud[/bold red] :smile:"


def terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    console = Console(
        file=buf, record=True, force_terminal=True, color_system="truecolor", width=400,
        highlight=False, emoji=False,
    )
    return console, buf


def stored_hostile(aw: AwEnv) -> None:
    fake_session(aw)
    store = aw.store()
    try:
        store.enqueue(NewMessage(session="fake", content=HOSTILE, source=Source.WEBHOOK,
                                 source_id="[link=https://evil.example]id[/link]"))
    finally:
        store.close()


def test_markup_in_messages_renders_literally_on_a_terminal(aw: AwEnv) -> None:
    stored_hostile(aw)
    store = aw.store()
    try:
        m = store.history("fake")[0]
    finally:
        store.close()
    for headers, row in (
        (QUEUE_HEADERS, queue_row(m, "[bold]why[/]", time.time())),
        (HISTORY_HEADERS, history_row(m, "[red]tmux-paste")),
    ):
        console, raw = terminal()
        render_rows(console, headers, [row])  # "[/]" alone used to raise MarkupError
        text = console.export_text()
        assert "[link=https://evil.example]id[/link]" in text
        assert "\x1b]8;" not in raw.getvalue()  # no OSC 8 hyperlink anywhere
        if headers is QUEUE_HEADERS:
            assert HOSTILE in text and "[bold]why[/]" in text
            assert "\x1b[1;31m" not in raw.getvalue() and "\x1b[1m\x1b[31m" not in raw.getvalue()
        else:
            assert "[red]tmux-paste" in text


def test_cli_queue_and_history_show_markup_as_typed(aw: AwEnv) -> None:
    fake_session(aw)
    res = aw.cli("send", "fake", HOSTILE, "--source-id", "[/]x[bold]", check=True)
    for command in ("queue", "history"):
        res = aw.cli(command, "fake")
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
        assert "[/]x[bold]" in res.stdout
        if command == "queue":
            assert HOSTILE in res.stdout  # never cut off either


def test_piped_tables_are_one_line_per_row_at_80_columns(aw: AwEnv) -> None:
    fake_session(aw)
    long = "word " * 60
    for i in range(3):
        aw.cli("send", "fake", f"{i} {long}", "--source", "webhook", "--source-id", "github",
               check=True)
    aw.env["COLUMNS"] = "80"
    res = aw.cli("queue", "fake")
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "PRIORITY", "SOURCE"]
    assert len(lines) == 4, res.stdout
    assert all(line.rstrip().endswith("word") and "[webhook:github]" in line for line in lines[1:])
    res = aw.cli("history", "fake")
    assert len(res.stdout.splitlines()) == 4, res.stdout
    res = aw.cli("history", "fake", "--json")
    assert len(json.loads(res.stdout)) == 3  # --json unchanged


def test_send_refuses_the_system_source(aw: AwEnv) -> None:
    fake_session(aw)
    res = aw.cli("send", "fake", "hi", "--source", "system")
    assert assert_clean_error(res, 65) == "error: source 'system' is reserved for agentwrap"
    store = aw.store()
    try:
        assert store.history("fake") == []
    finally:
        store.close()


def test_send_with_a_reused_key(aw: AwEnv) -> None:
    fake_session(aw)
    first = aw.cli("send", "fake", "deploy v1", "--idempotency-key", "k1", check=True)
    msg_id = first.stdout.strip()
    same = aw.cli("send", "fake", "deploy v1", "--idempotency-key", "k1", check=True)
    assert same.stdout.strip() == msg_id
    assert f"already queued as {msg_id} (same idempotency key): pending" in same.stderr
    other = aw.cli("send", "fake", "deploy v2", "--idempotency-key", "k1")
    line = assert_clean_error(other, 4)
    assert "'k1'" in line and msg_id[:8] in line and "different content" in line
    aw.cli("cancel", msg_id, check=True)
    ended = aw.cli("send", "fake", "deploy v1", "--idempotency-key", "k1", check=True)
    assert f"already sent as {msg_id} (same idempotency key): cancelled" in ended.stderr
    assert "expires in" not in ended.stderr


def test_send_with_a_key_whose_message_expired(aw: AwEnv) -> None:
    fake_session(aw)
    msg_id = aw.cli("send", "fake", "x", "--idempotency-key", "k", check=True).stdout.strip()
    store = aw.store()
    try:
        store.expire_overdue(now=store.get(msg_id).expires)
    finally:
        store.close()
    res = aw.cli("send", "fake", "x", "--idempotency-key", "k", check=True)
    assert f"already sent as {msg_id} (same idempotency key): expired" in res.stderr
    assert "expires in" not in res.stderr and "-" not in res.stderr.split("expired")[1][:6]


def test_send_refuses_deep_metadata_in_one_line(aw: AwEnv) -> None:
    fake_session(aw)
    for depth in (600, 50_000):  # 50 000: past json.loads's recursion limit
        deep = "[" * depth + "]" * depth
        res = aw.cli("send", "fake", "x", "--metadata", json.dumps({"a": 1})[:-1] + f', "d": {deep}}}')
        line = assert_clean_error(res, 65)
        assert "deeper than 8 levels" in line or "nests too deeply" in line
    res = aw.cli("send", "fake", "x", "--metadata", json.dumps({"blob": "x" * 17_000}))
    assert "the limit is 16384" in assert_clean_error(res, 65)
    ok = aw.cli("send", "fake", "x", "--metadata", json.dumps({"a": [[[{"b": 1}]]]}), "--json")
    assert json.loads(ok.stdout)["metadata"] == {"a": [[[{"b": 1}]]]}
