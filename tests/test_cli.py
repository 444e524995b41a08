"""The ``agentwrap`` command as a subprocess: error paths print exactly one
``error:`` line and one ``hint:`` line (no traceback) and exit non-zero;
``--json`` outputs have the promised shape."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import AwEnv

from agentwrap.sessions.registry import SessionRecord


def assert_clean_error(res: subprocess.CompletedProcess[str], code: int) -> str:
    """Exactly ``error: ...`` + ``hint: ...`` on stderr; returns the error line."""
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 2, res.stderr
    assert lines[0].startswith("error: "), res.stderr
    assert lines[1].startswith("hint: ") and len(lines[1]) > len("hint: "), res.stderr
    assert res.returncode == code, (res.returncode, res.stderr)
    return lines[0]


def fake_session(aw: AwEnv, name: str = "fake") -> None:
    """A registered session without a supervisor (stale): enough to queue to."""
    reg = aw.registry()
    reg.register(SessionRecord(name=name, profile="standin", backend="tmux", command=["x"],
                               cwd=str(aw.project), started=time.time()))
    reg.close()


def stored(aw: AwEnv, name: str = "fake") -> int:
    store = aw.store()
    try:
        return len(store.history(name, limit=1000))
    finally:
        store.close()


# --- error paths ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [("send", "nope", "hi"), ("state", "nope"), ("queue", "nope"), ("stop", "nope"),
     ("history", "nope"), ("adopt", "nope")],
    ids=lambda a: a[0],
)
def test_unknown_session(aw: AwEnv, args: tuple[str, ...]) -> None:
    line = assert_clean_error(aw.cli(*args), 3)
    assert line == "error: no session named 'nope'"


def test_agent_command_not_found(aw: AwEnv) -> None:
    res = aw.cli("run", "--detach", "--name", "x", "--", "no-such-agent-4f2a", "--flag")
    assert "no-such-agent-4f2a" in assert_clean_error(res, 69)
    assert aw.registry().find("x") is None


def test_name_taken(aw: AwEnv) -> None:
    aw.start_standin("sa")
    res = aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", "--", *aw.standin())
    assert "'sa' is already running" in assert_clean_error(res, 1)


@pytest.mark.parametrize("name", ["[/x]", "[bold]a", "[red]"])
def test_markup_in_user_input_is_printed_literally(aw: AwEnv, name: str) -> None:
    # rich would read these as (broken) markup and crash with a traceback
    res = aw.cli("state", name)
    assert assert_clean_error(res, 3) == f"error: no session named {name!r}"
    res = aw.cli("run", "--detach", "--name", name, "--profile", "standin", "--", "true")
    assert assert_clean_error(res, 65) == f"error: invalid session name {name!r}"


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ('name = "broken"\n[input]\ninput_region = "last_line"\n[detect]\nquiet_ms = "fast"\n',
         "detect.quiet_ms"),
        ('name = "broken"\n[input]\nsubmit_kye = "Enter"\n', "input.submit_kye"),
        ('name = "broken"\n[input]\ninput_region = "last_line"\n'
         '[[detect.rules]]\nstate = "ready"\npattern = "(["\n',
         "detect.rules[0].pattern"),
        ('name = "broken"\n[detect\n', "not valid TOML"),
    ],
    ids=["wrong-type", "unknown-key", "bad-regex", "bad-toml"],
)
def test_invalid_profile_names_file_and_key(aw: AwEnv, body: str, key: str) -> None:
    path = aw.paths.user_patterns_dir / "broken.toml"
    path.write_text(body)
    for args in (("profiles",), ("run", "--detach", "--profile", "broken", "--", "true")):
        line = assert_clean_error(aw.cli(*args), 78)
        assert str(path) in line and key in line


def test_oversized_content_stores_nothing(aw: AwEnv) -> None:
    fake_session(aw)
    res = aw.cli("send", "fake", "x" * (10 * 1024 + 1))
    assert "10241 bytes" in assert_clean_error(res, 65)
    res = aw.cli("send", "fake", "-", input="y" * (20 * 1024))
    assert_clean_error(res, 65)
    assert stored(aw) == 0


def test_invalid_utf8_on_stdin(aw: AwEnv) -> None:
    fake_session(aw)
    res = subprocess.run(
        [sys.executable, "-m", "agentwrap", "send", "fake", "-"], env=aw.env, cwd=aw.project,
        input=b"valid then \xff\xfe invalid", capture_output=True, timeout=60, check=False,
    )
    text = subprocess.CompletedProcess(res.args, res.returncode, res.stdout.decode(),
                                       res.stderr.decode())
    assert "UTF-8" in assert_clean_error(text, 65)
    assert stored(aw) == 0


@pytest.mark.parametrize("meta", ["{bad", "[1, 2]", '"text"'])
def test_malformed_metadata(aw: AwEnv, meta: str) -> None:
    fake_session(aw)
    line = assert_clean_error(aw.cli("send", "fake", "hi", "--metadata", meta), 65)
    assert "--metadata" in line
    assert stored(aw) == 0


def test_rate_limit_11th_message_in_a_minute(aw: AwEnv) -> None:
    fake_session(aw)
    for i in range(10):
        res = aw.cli("send", "fake", f"message {i}", "--source", "webhook")
        assert res.returncode == 0, res.stderr
    res = aw.cli("send", "fake", "one too many", "--source", "webhook")
    assert "rate limit" in assert_clean_error(res, 75)
    m = re.search(r"^hint: retry in (\d+) s", res.stderr.splitlines()[1])
    assert m and 0 < int(m.group(1)) <= 60
    assert stored(aw) == 10
    # another source has its own budget
    assert aw.cli("send", "fake", "from a person", "--source", "user").returncode == 0


def test_pty_backend_cannot_detach(aw: AwEnv) -> None:
    res = aw.cli("run", "--detach", "--backend", "pty", "--", "true")
    assert_clean_error(res, 65)


# --- sanitizing ----------------------------------------------------------------------------


def test_control_characters_never_reach_the_agent(aw: AwEnv) -> None:
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    nasty = (
        "start \x1b[31mred\x1b[0m bell\x07 \x1b]0;title\x07 \x1b]52;c;ZXZpbA==\x07"
        " end\x1b[201~\rsubmitted? \x08\x15\x03\x04 \x9b31m \u202eevil\u202c done"
    )
    res = aw.cli("send", "sa", nasty, "--wait", "--timeout", "30")
    assert res.returncode == 0, res.stderr
    assert "removed" in res.stderr
    got = aw.received()
    assert len(got) == 1
    body = got[0]
    assert "start red bell" in body and "done" in body
    bad = [c for c in body if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert bad == [] and "\u202e" not in body and "title" not in body
    # and the same via stdin
    res = aw.cli("send", "sa", "-", "--wait", "--timeout", "30", input="piped \x1b[2J\x1bc ok\n")
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in aw.received()[1] and "piped  ok" in aw.received()[1]


# --- help and JSON outputs --------------------------------------------------------------------


@pytest.mark.parametrize("args", [("--help",), ("send", "--help"), ("run", "--help"),
                                  ("store", "migrate", "--help")])
def test_help_mentions_examples(aw: AwEnv, args: tuple[str, ...]) -> None:
    res = aw.cli(*args, check=True)
    assert "examples:" in res.stdout and "agentwrap " in res.stdout


def test_no_command_prints_help(aw: AwEnv) -> None:
    res = aw.cli()
    assert res.returncode == 2 and "examples:" in res.stdout


def test_json_outputs_of_a_live_session(aw: AwEnv) -> None:
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    ls = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert len(ls) == 1
    assert {"name": "sa", "profile": "standin", "backend": "tmux", "liveness": "running",
            "pending": 0}.items() <= ls[0].items()

    st = json.loads(aw.cli("state", "sa", "--json", check=True).stdout)
    assert st["name"] == "sa" and st["state"] == "ready" and st["liveness"] == "running"
    assert {"signal", "rule", "reason", "evidence", "quiet_ms", "draft", "since"} <= set(st)

    explain = aw.cli("state", "sa", "--explain", check=True).stdout.splitlines()
    assert re.fullmatch(r"ready \(standin: prompt box empty; quiet \d+ ms\)", explain[0])
    assert aw.cli("state", "sa", check=True).stdout.strip() == "ready"

    sent = json.loads(aw.cli("send", "sa", "hello", "--json", check=True).stdout)
    assert sent["created"] is True and sent["session"] == "sa"
    aw.wait_for(lambda: len(aw.received()) == 1, what="delivery")
    aw.wait_for(
        lambda: json.loads(aw.cli("history", "sa", "--json", check=True).stdout)[0]["status"]
        in ("delivered", "acknowledged"), what="delivered in history",
    )
    hist = json.loads(aw.cli("history", "sa", "--json", check=True).stdout)
    assert len(hist) == 1 and hist[0]["id"] == sent["id"] and hist[0]["attempt_log"]
    assert json.loads(aw.cli("history", "--json", check=True).stdout)[0]["id"] == sent["id"]

    met = json.loads(aw.cli("metrics", "sa", "--json", check=True).stdout)
    assert met["session"] == "sa" and isinstance(met["by_status"], dict)
    assert sum(met["by_status"].values()) == 1
    assert json.loads(aw.cli("queue", "sa", "--json", check=True).stdout) == []

    stop = json.loads(aw.cli("stop", "sa", "--json", check=True).stdout)
    assert stop["liveness"] == "ended"
    assert json.loads(aw.cli("ls", "--json", check=True).stdout) == []
    assert json.loads(aw.cli("ls", "--all", "--json", check=True).stdout)[0]["name"] == "sa"
    assert_clean_error(aw.cli("send", "sa", "too late"), 3)


def test_doctor_json(aw: AwEnv) -> None:
    res = aw.cli("doctor", "--json")
    assert res.returncode in (0, 1), res.stderr
    rep = json.loads(res.stdout)
    assert rep["tmux"].startswith("tmux ")
    assert rep["paths"]["tmux_sockets"] == str(aw.paths.tmux_dir)  # one server per session
    assert rep["paths"]["database"] == str(aw.paths.db_path)
    assert rep["paths"]["user_profiles"] == str(aw.paths.user_patterns_dir)
    assert {"claude", "codex", "aider", "gemini"} <= set(rep["agents"])
    assert rep["pty_relay"] == "native", rep["pty_relay_detail"]  # built by pip install (gcc)
    assert all({"problem", "fix"} == set(p) for p in rep["problems"])
    assert (res.returncode == 1) == bool(rep["problems"])


def test_profiles_json(aw: AwEnv) -> None:
    rows = json.loads(aw.cli("profiles", "--json", check=True).stdout)
    by_name = {r["name"]: r for r in rows}
    assert {"claude", "codex", "aider", "gemini", "generic", "standin"} <= set(by_name)
    assert by_name["claude"]["commands"] and by_name["claude"]["source"].endswith("claude.toml")
    assert by_name["standin"]["source"] == str(aw.paths.user_patterns_dir / "standin.toml")


def test_profiles_list_the_ten_agents(aw: AwEnv) -> None:
    """Every agent agentwrap supports has a built-in profile `profiles` lists
    (the docs' table of verified versions names the same ten; the README's
    agent table is checked in tests/test_docs.py)."""
    rows = json.loads(aw.cli("profiles", "--json", check=True).stdout)
    nine = {"claude", "codex", "gemini", "aider", "copilot", "opencode", "qwen", "cline", "kimi",
            "pi"}
    builtin = {r["name"] for r in rows if Path(r["source"]).parent.name == "patterns"}
    assert nine <= builtin, nine - builtin
    table = (Path(__file__).resolve().parents[1] / "docs" / "agents" / "index.md").read_text(
        encoding="utf-8")
    for name in nine:
        assert f"\n| `{name}` | " in table, name


def test_doctor_says_a_version_only_when_the_program_names_one(aw: AwEnv) -> None:
    """dash answers --version with "Illegal option --": doctor listed that as
    the shell's version (issue 26). A program's answer counts only when it
    exits 0 and names a version."""
    bin_dir = aw.root / "bin"
    bin_dir.mkdir()
    fakes = {"sh": "echo '/usr/bin/sh: 0: Illegal option --' >&2; exit 2",
             "aider": "echo 'aider 0.86.2'"}
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env_path = f"{bin_dir}:/usr/bin:/bin"
    res = aw.cli("doctor", "--json", env={"PATH": env_path})
    rep = json.loads(res.stdout)
    assert rep["agents"]["shell"]["path"] == str(bin_dir / "sh")
    assert rep["agents"]["shell"]["version"] is None
    assert rep["agents"]["aider"]["version"] == "aider 0.86.2"
    table = aw.cli("doctor", env={"PATH": env_path}).stdout
    assert "Illegal option" not in table


def test_json_commands_refuse_in_json_too(aw: AwEnv) -> None:
    """A script that asked for --json reads a refusal from stdout as JSON,
    with what a retry needs (HTTP says retryAfter; the CLI printed two lines
    of text only, issue 26); the two lines still go to stderr."""
    cfg = aw.paths.config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("[limits]\nrate_per_minute = 1\n")
    reg = aw.registry()
    try:
        reg.register(SessionRecord(name="fake", profile="standin", backend="tmux",
                                   command=["x"], cwd=str(aw.project), started=time.time()))
    finally:
        reg.close()
    first = aw.cli("send", "fake", "one", "--json", check=True)
    assert json.loads(first.stdout)["content"] == "one"
    res = aw.cli("send", "fake", "two", "--json")
    assert res.returncode == 75, res
    got = json.loads(res.stdout)
    assert got["error"] == "RateLimited" and got["exitCode"] == 75
    assert 1 <= got["retryAfter"] <= 60 and "rate" in got["detail"]
    assert res.stderr.startswith("error: ")
    missing = aw.cli("send", "nobody", "x", "--json")
    assert json.loads(missing.stdout)["error"] == "SessionNotFound"


@pytest.mark.parametrize(("shown", "status"), [
    ("2.1.332 (Claude Code)", "verified"),
    ("2.1.400 (Claude Code)", "newer"),
    ("2.1.197 (Claude Code)", "older"),
    ("2.0.5 (Claude Code)", "too_old"),
])
def test_doctor_compares_the_installed_version_with_the_verified_one(
    aw: AwEnv, shown: str, status: str,
) -> None:
    """Issue 22: each agent is listed with the version agentwrap was verified on;
    another installed version is a warning (the exit status stays 0), one older
    than the profile's min_version a problem that says what to do."""
    from agentwrap.detect.profiles import load_profile

    claude = load_profile("claude")
    verified, floor = claude.verified_version, claude.channels.min_version
    assert verified == "2.1.332" and floor == "2.1.0"
    bin_dir = aw.root / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(f"#!/bin/sh\necho '{shown}'\n")
    (bin_dir / "claude").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    rep = json.loads(aw.cli("doctor", "--json", env=env).stdout)
    agent = rep["agents"]["claude"]
    assert (agent["version"], agent["verified_version"]) == (shown, verified)
    assert agent["version_status"] == status
    warned = [w["warning"] for w in rep["warnings"] if w["warning"].startswith("claude ")]
    failed = [p for p in rep["problems"] if p["problem"].startswith("claude ")]
    if status == "verified":
        assert not warned and not failed
    elif status == "too_old":
        assert not warned
        (p,) = failed
        assert f"older than {floor}" in p["problem"] and verified in p["fix"]
    else:
        assert not failed
        (w,) = warned
        assert f"{status} than {verified}" in w
    table = aw.cli("doctor", env=env)
    assert "VERIFIED ON" in table.stdout and verified in table.stdout
    if status in ("newer", "older"):
        assert "warning: claude" in table.stdout
    if status == "too_old":
        assert table.returncode == 1 and "problem: claude 2.0.5 is older than" in table.stdout
