"""What a person new to agentwrap meets in the first ten minutes (issue 41).

Each of these was found by trying the README as a newcomer: detaching said
nothing of how to come back, hints said ``NAME`` where the session's name
belongs, ``metrics`` printed a Python dict, ``history`` cut every column to
``…`` at 80 columns, and ``doctor`` said "no problems found" under a warning
without saying whether the store connected. Real ``agentwrap`` processes, real
tmux servers, a real pty for the attached terminal.
"""

from __future__ import annotations

import json
import re
import sys

import pexpect
from conftest import AwEnv
from support.delivery_kit import send
from support.hosts_kit import two_hosts

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_detaching_says_the_agent_keeps_running_and_how_to_come_back(aw: AwEnv) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentwrap", "run", "--name", "det", "--profile", "standin", "--", *aw.standin()],
        env=aw.env, cwd=str(aw.project), dimensions=(30, 100), timeout=60,
    )
    try:
        aw.wait_state("det", "ready")
        child.send("\x02d")  # tmux's prefix (C-b), then d: detach
        child.expect_exact("`agentwrap attach det` to come back", timeout=30)
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert aw.registry().get("det").liveness == "running"


def test_a_question_names_the_session_to_answer_and_attach(aw: AwEnv) -> None:
    aw.start_standin("qa", "--dialog-on", "make a file")
    aw.wait_state("qa", "ready")
    send(aw, "qa", "please make a file")
    aw.wait_state("qa", "waiting_input")
    shown = aw.cli("state", "qa", check=True).stdout
    assert "`agentwrap answer qa --option N`" in shown, shown
    assert "`agentwrap attach qa`" in shown, shown
    assert not re.search(r"\bNAME\b", shown), shown


def test_an_error_hint_names_the_session_and_its_troubleshooting_entry(aw: AwEnv) -> None:
    aw.start_standin("dup")
    again = aw.cli("run", "--detach", "--name", "dup", "--profile", "standin", "--",
                   *aw.standin())
    lines = again.stderr.splitlines()
    assert again.returncode != 0 and len(lines) == 2, again.stderr
    assert "`agentwrap stop dup`" in lines[1] and "NAME" not in lines[1], lines[1]
    assert lines[1].endswith("(more: docs/troubleshooting.md#sessionnametaken)"), lines[1]


def test_metrics_prints_a_table_not_a_dict(aw: AwEnv) -> None:
    aw.start_standin("mt")
    aw.wait_state("mt", "ready")
    assert aw.cli("send", "mt", "hello", "--wait", "--timeout", "60").returncode == 0
    shown = aw.cli("metrics", env={"COLUMNS": "80"}, check=True).stdout
    assert "{" not in shown and "'" not in shown, shown
    assert re.search(r"by status\s+delivered 1\b", shown), shown
    assert "…" not in shown, shown  # the channel's name whole at 80 columns
    assert max(len(line) for line in shown.splitlines()) <= 80, shown


def test_history_keeps_whole_columns_at_80_and_120(aw: AwEnv) -> None:
    aw.start_standin("hs")
    aw.wait_state("hs", "ready")
    for n in range(2):
        assert aw.cli("send", "hs", f"message {n} with a long detail to wrap", "--source",
                      "webhook", "--source-id", "github", "--wait", "--timeout", "60"
                      ).returncode == 0
    ids = [m["id"][:8] for m in json.loads(
        aw.cli("history", "hs", "--json", check=True).stdout)]
    for width in (80, 120):
        # a terminal of that width (FORCE_COLOR makes rich draw as on one)
        shown = ANSI.sub("", aw.cli("history", "hs", env={
            "COLUMNS": str(width), "FORCE_COLOR": "1"}, check=True).stdout)
        lines = shown.rstrip("\n").splitlines()
        assert max(len(line) for line in lines) <= width, shown
        assert "…" not in shown, shown  # columns dropped whole, never cut
        head = lines[0].split()
        assert head[:2] == ["ID", "STATUS"] or head[:3] == ["ID", "SESSION", "STATUS"], shown
        assert head[-1] == "DETAIL", shown
        for mid in ids:
            assert any(line.strip().startswith(mid) and "delivered" in line for line in lines), shown
    assert "SOURCE" in lines[0] and "CHANNEL" in lines[0], shown  # 120: room for more


def test_doctor_under_a_warning_does_not_say_no_problems_and_says_the_store_connected(
    aw: AwEnv,
) -> None:
    bin_dir = aw.root / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"  # a release newer than the verified one: a warning
    fake.write_text("#!/bin/sh\necho '999.0.0 (Claude Code)'\n")
    fake.chmod(0o755)
    done = aw.cli("doctor", env={"PATH": f"{bin_dir}:{aw.env['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning:" in done.stdout and "999.0.0" in done.stdout, done.stdout
    assert "no problems found" not in done.stdout, done.stdout
    assert "no problems, 1 warning(s) above" in done.stdout, done.stdout
    assert re.search(r"store\s+.*\(connected\)", done.stdout), done.stdout


def test_doctor_lists_only_this_hosts_supervisors(pg_url: str) -> None:
    """On a shared store another host's sessions are in the list, and their
    supervisors' pids are that host's processes: doctor names this host's only."""
    with two_hosts(pg_url) as (alpha, beta):
        beta.start_standin("b1")
        beta.wait_state("b1", "ready")
        theirs = json.loads(beta.cli("doctor", "--json").stdout)["supervisors"]
        assert any("b1" in names for names in theirs.values()), theirs  # beta's own, on beta
        ours = json.loads(alpha.cli("doctor", "--json").stdout)
        assert ours["supervisors"] == {}, ours["supervisors"]
        assert ours["store_connected"] is True
        shown = alpha.cli("doctor").stdout
        assert "supervisor" not in shown.replace("supervisor host", ""), shown
