"""Shells and raw input (hardening issue, item 7).

A shell runs whatever is typed into it: under the quoting block a webhook's
``; touch x`` ran as a command. A profile now says whether its program is a
shell; there a message *is* a command, typed as is, one at a time, and only
from sources the user's own config trusts with raw input. ``send --raw`` types
any message as is, under the same trust rule.

The shell tests drive a real ``bash`` in a real tmux server.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import AwEnv
from support.delivery_kit import get, send, wait_terminal, write_config
from test_cli import assert_clean_error

from agentwrap.config import load_config
from agentwrap.delivery.framing import Injection, render_raw
from agentwrap.detect.profiles import load_profile, parse_profile, profile_for_command
from agentwrap.errors import ConfigError, ProfileError
from agentwrap.message import Kind, Message, NewMessage, Source, Status
from agentwrap.paths import Paths
from agentwrap.sessions.lifecycle import RunOptions, resolve_profile

needs_bash = pytest.mark.skipif(not shutil.which("bash"), reason="bash not installed")


def _message(content: str) -> Message:
    """A stored message, as the engine would hand it to ``render_raw``."""
    import tempfile

    from agentwrap.queue.sqlite import SQLiteMessageStore

    with tempfile.TemporaryDirectory() as d:
        store = SQLiteMessageStore(Path(d) / "db")
        msg, _ = store.enqueue(NewMessage(session="s", content=content), kind=Kind.COMMAND)
        store.close()
    return msg


# --- framing and profiles --------------------------------------------------------------


def test_raw_text_is_sanitized_but_not_quoted() -> None:
    inj: Injection = render_raw(_message("make test\x1b[31m\n"), token="t1")
    assert inj.text == "make test"
    assert "[agentwrap" not in inj.text and not inj.ack_requested
    assert inj.raw and inj.mark == "maketest"


def test_a_raw_mark_is_the_end_of_the_last_line_without_spaces() -> None:
    inj = render_raw(_message("for f in *; do\n  echo \"$f\"   \ndone\n\n"), token="t1")
    assert inj.mark == "done"
    long = render_raw(_message("echo " + "x" * 100), token="t1")
    assert long.mark == "x" * 24


def test_the_shell_profile_is_raw_and_picked_for_interactive_shells() -> None:
    shell = load_profile("shell")
    assert shell.shell and shell.raw
    for argv in (["bash"], ["/bin/zsh", "-l"], ["sh", "-i"], ["dash"]):
        assert profile_for_command(argv).name == "shell", argv
    # A shell that only launches something runs an unknown program: not "shell".
    for argv in (["bash", "-lc", "claude"], ["sh", "start.sh"], ["bash", "-c", "x"], ["sh", "-"]):
        assert profile_for_command(argv).name == "generic", argv


def test_a_shell_profile_must_be_raw(tmp_path: Path) -> None:
    base = {"name": "x", "input": {"input_region": "last_line"}, "detect": {}}
    with pytest.raises(ProfileError, match="framing must be \"raw\""):
        parse_profile({**base, "shell": True}, tmp_path / "x.toml")
    with pytest.raises(ProfileError, match="framing"):
        parse_profile({**base, "framing": "quoted"}, tmp_path / "x.toml")
    assert parse_profile({**base, "framing": "raw"}, tmp_path / "x.toml").raw


def test_a_shell_cannot_be_run_under_a_quoting_profile(aw: AwEnv) -> None:
    with pytest.raises(ProfileError, match="is a shell"):
        resolve_profile(RunOptions(argv=["bash"], profile="generic"), aw.paths)
    res = aw.cli("run", "--detach", "--name", "b", "--profile", "generic", "--", "bash")
    assert "is a shell" in assert_clean_error(res, 78)
    # a launcher is not a shell session: any profile may run it
    assert resolve_profile(RunOptions(argv=["bash", "-lc", "x"], profile="generic"), aw.paths)


# --- who may send raw text: the user's config only -------------------------------------


def _paths(root: Path) -> Paths:
    return Paths(config_dir=root / "c", state_dir=root / "s", runtime_dir=root / "r")


def test_trust_defaults_to_the_local_user(tmp_path: Path) -> None:
    assert load_config(_paths(tmp_path), tmp_path).trust.raw_sources == ("user",)


def test_trust_is_read_from_the_user_config_only(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text('[trust]\nraw_sources = ["user", "scheduler"]\n')
    assert load_config(paths, tmp_path).trust.raw_sources == ("user", "scheduler")
    project = tmp_path / "repo"
    project.mkdir()
    for text in ('[trust]\nraw_sources = ["webhook"]\n',
                 '[profiles.shell.trust]\nraw_sources = ["webhook"]\n'):
        (project / ".agentwrap.toml").write_text(text)
        with pytest.raises(ConfigError, match="may only be set in your own config file"):
            load_config(paths, project)


def test_trust_names_known_sources(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    paths.config_dir.mkdir(parents=True)
    for bad in ('"everyone"', '"system"'):
        paths.config_file.write_text(f"[trust]\nraw_sources = [{bad}]\n")
        with pytest.raises(ConfigError, match="unknown source"):
            load_config(paths, tmp_path)


def test_a_command_never_shares_a_batch(tmp_path: Path) -> None:
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(tmp_path / "db")
    store.enqueue(NewMessage(session="s", content="a"))
    store.enqueue(NewMessage(session="s", content="b"), kind=Kind.COMMAND)
    store.enqueue(NewMessage(session="s", content="c"))
    batches = [[m.content for m in store.claim_batch("s", f"b{i}", 10_000)] for i in range(3)]
    assert batches == [["a"], ["b"], ["c"]]


# --- a real bash in tmux ------------------------------------------------------------------


def _start_bash(aw: AwEnv, name: str = "sh") -> None:
    write_config(aw)
    env_rc = aw.root / "rc"
    env_rc.write_text("PS1='$ '\n")
    aw.cli("run", "--detach", "--name", name, "--cols", "100", "--rows", "30", "--",
           "bash", "--noprofile", "--rcfile", str(env_rc), "-i", check=True)
    rec = aw.wait_state(name, "ready")
    assert rec.profile == "shell"


@needs_bash
def test_a_message_to_a_shell_runs_as_a_command_exactly_once(aw: AwEnv) -> None:
    _start_bash(aw)
    out = aw.project / "ran.txt"
    ids = [send(aw, "sh", f"echo line-{i} >> {out}") for i in range(3)]
    finals = [wait_terminal(aw, mid, 60) for mid in ids]
    assert [m.status for m in finals] == [Status.DELIVERED] * 3, [m.detail for m in finals]
    assert all(m.kind is Kind.COMMAND for m in finals)
    assert out.read_text().splitlines() == ["line-0", "line-1", "line-2"]


@needs_bash
def test_a_shell_refuses_untrusted_sources_and_stores_nothing(aw: AwEnv) -> None:
    _start_bash(aw)
    pwned = aw.project / "pwned"
    res = aw.cli("send", "sh", f"; touch {pwned}", "--source", "webhook")
    assert "not trusted" in assert_clean_error(res, 77)
    assert "raw_sources" in res.stderr
    res = aw.cli("send", "sh", "echo hi", "--ack")
    assert res.returncode == 65 and "nothing would acknowledge" in res.stderr
    hist = json.loads(aw.cli("history", "sh", "--json", check=True).stdout)
    assert hist == []
    assert not pwned.exists()


@needs_bash
def test_the_supervisor_refuses_an_untrusted_command_that_reached_the_store(aw: AwEnv) -> None:
    # Defence in depth: another writer of the store (or a config changed since)
    # must not get a webhook's text typed into a shell.
    _start_bash(aw)
    pwned = aw.project / "pwned"
    store = aw.store()
    msg, _ = store.enqueue(
        NewMessage(session="sh", content=f"touch {pwned}", source=Source.WEBHOOK),
        kind=Kind.COMMAND,
    )
    store.close()
    aw.cli("send", "sh", "true", check=True)  # wakes the supervisor
    final = wait_terminal(aw, msg.id, 30)
    assert final.status is Status.FAILED and "refused" in final.detail
    assert not pwned.exists()


@needs_bash
def test_trusting_a_source_in_the_user_config_lets_it_run_commands(aw: AwEnv) -> None:
    _start_bash(aw)
    aw.paths.config_file.write_text(
        aw.paths.config_file.read_text() + '\n[trust]\nraw_sources = ["user", "scheduler"]\n'
    )
    out = aw.project / "nightly"
    mid = send(aw, "sh", f"touch {out}", "--source", "scheduler")
    assert wait_terminal(aw, mid, 60).status is Status.DELIVERED
    assert out.exists()


@needs_bash
def test_a_long_command_that_wraps_is_typed_once(aw: AwEnv) -> None:
    _start_bash(aw)
    out = aw.project / "wrapped.txt"
    payload = "w" * 230  # wraps over three rows at 100 columns
    mid = send(aw, "sh", f"echo {payload} > {out}")
    final = wait_terminal(aw, mid, 60)
    assert final.status is Status.DELIVERED, final.detail
    assert out.read_text().strip() == payload


# --- send --raw into anything -------------------------------------------------------------


def test_raw_text_reaches_an_agent_exactly_as_written(aw: AwEnv) -> None:
    write_config(aw)
    aw.start_standin()
    aw.wait_state("sa", "ready")
    mid = send(aw, "sa", "/compact keep it short", "--raw")
    final = wait_terminal(aw, mid, 60)
    assert final.status is Status.DELIVERED, final.detail
    assert aw.received()[-1] == "/compact keep it short"
    assert get(aw, mid).kind is Kind.COMMAND


def test_raw_text_from_an_untrusted_source_is_refused(aw: AwEnv) -> None:
    write_config(aw)
    aw.start_standin()
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "/exit", "--raw", "--source", "agent")
    assert "not trusted" in assert_clean_error(res, 77)
    assert aw.received() == []


def test_help_explains_shells_and_raw(aw: AwEnv) -> None:
    text = aw.cli("send", "--help", check=True).stdout
    assert "--raw" in text and "raw_sources" in text
