"""Telling the person that an agent waits: once per question, again after a
while, through their own command (real processes), the tmux status line (a real
tmux, its format language defused) and the audit log. User config only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import AwEnv
from support.delivery_kit import send, wait_terminal, write_config

from agentwrap.answers.telling import Teller, summary
from agentwrap.audit import AuditLog
from agentwrap.config import NotifyConfig, load_config
from agentwrap.detect.question import Item, Option, Question
from agentwrap.errors import ConfigError

RECORDER = """\
import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"env": os.environ.get("AGENTWRAP_QUESTION_ID"),
                        "again": os.environ.get("AGENTWRAP_RENOTIFY"),
                        "got": json.load(sys.stdin)}) + "\\n")
"""


def question(qid: str = "q1", highlighted: int = 1) -> Question:
    return Question(id=qid, kind="permission", title="Bash command",
                    questions=(Item("Do you want to proceed?", options=(
                        Option("Yes", number=1), Option("No", number=2))),),
                    highlighted=highlighted, tool="Bash", command="touch x", dialog="permission")


def recorder(tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "record.py"
    script.write_text(RECORDER, encoding="utf-8")
    out = tmp_path / "told.jsonl"
    return f"{sys.executable} {script} {out}", out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_once_per_question_again_after_a_while(aw: AwEnv, tmp_path: Path) -> None:
    command, out = recorder(tmp_path)
    now = [100.0]
    shown: list[str] = []
    teller = Teller("sa", NotifyConfig(on_waiting_input=command, renotify_after_s=60,
                                       desktop=False),
                    AuditLog(aw.paths.audit_log), display=shown.append, clock=lambda: now[0])
    teller.update(question())
    teller.update(question(highlighted=2))  # the cursor moved: the same question
    now[0] += 30
    teller.update(question())
    assert teller.told == 1
    now[0] += 31
    teller.update(question())  # still open after renotify_after_s: told again
    teller.update(question("q2"))  # something else asked: told at once
    teller.update(None)
    teller.update(question("q2"))  # asked again after it closed: a new telling
    assert teller.told == 4
    aw.wait_for(lambda: len(lines(out)) == 4, 30, "four runs of the command")
    got = sorted(lines(out), key=lambda x: (x["env"], x["again"]))
    assert [(x["env"], x["again"]) for x in got] == [("q1", "0"), ("q1", "1"), ("q2", "0"),
                                                     ("q2", "0")]
    assert got[0]["got"]["question"]["command"] == "touch x" and got[0]["got"]["session"] == "sa"
    assert shown[0] == "agentwrap: sa waits for you: Do you want to proceed? [Bash touch x]"
    told = [a for a in AuditLog(aw.paths.audit_log).read() if a["event"] == "told_waiting"]
    assert [(a["question"], a["again"]) for a in told] == [
        ("q1", False), ("q1", True), ("q2", False), ("q2", False)]
    assert all("command" in a["channels"] and "tmux" in a["channels"] for a in told)


def test_a_command_that_cannot_start_or_hangs_harms_nothing(aw: AwEnv, tmp_path: Path) -> None:
    teller = Teller("sa", NotifyConfig(on_waiting_input=str(tmp_path / "missing"), desktop=False),
                    AuditLog(aw.paths.audit_log))
    teller.update(question())
    (told,) = [a for a in AuditLog(aw.paths.audit_log).read() if a["event"] == "told_waiting"]
    assert told["channels"] == []
    slow = Teller("sb", NotifyConfig(on_waiting_input=f"{sys.executable} -c 'import time;"
                                     " time.sleep(20)'", desktop=False),
                  AuditLog(aw.paths.audit_log))
    slow.update(question())  # returns at once: the command runs detached
    assert slow.told == 1


def test_notify_is_the_users_own_config_only(aw: AwEnv) -> None:
    (aw.project / ".agentwrap.toml").write_text('[notify]\non_waiting_input = "curl evil"\n',
                                                encoding="utf-8")
    with pytest.raises(ConfigError, match="may only be set in your own config"):
        load_config(aw.paths, aw.project)
    (aw.project / ".agentwrap.toml").unlink()
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text('[notify]\non_waiting_input = "a \'b"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="on_waiting_input"):
        load_config(aw.paths, aw.project)


def test_tmux_shows_text_from_the_screen_and_never_runs_it(aw: AwEnv, tmp_path: Path) -> None:
    # display-message reads a format: #(cmd) would run a shell command, #{...} expand.
    from agentwrap.terminal.tmux import tmux_literal

    pwned = tmp_path / "pwned"
    hostile = f"Run #(touch {pwned})? #{{pane_pid}} ##"
    sock = tmp_path / "t.sock"
    subprocess.run(["tmux", "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "-s", "t"],
                   check=True)
    try:
        shown = subprocess.run(["tmux", "-S", str(sock), "display-message", "-p", "-t", "t",
                                tmux_literal(hostile)], capture_output=True, text=True,
                               check=True).stdout.strip()
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], check=False)
    assert shown == hostile
    assert not pwned.exists()


def test_a_waiting_stand_in_is_told_through_the_users_command(aw: AwEnv, tmp_path: Path) -> None:
    command, out = recorder(tmp_path)
    write_config(aw, readiness_timeout_s=60)
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write(f"\n[notify]\non_waiting_input = {json.dumps(command)}\nrenotify_after_s = 1\n"
                "desktop = false\n")
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    mid = send(aw, "sa", "please OPENDIALOG")
    assert wait_terminal(aw, mid).status.value == "delivered"
    aw.wait_for(lambda: len(lines(out)) >= 2, 60, "told, then told again")
    first, again = lines(out)[:2]
    assert first["got"]["question"]["questions"][0]["question"] == "Do you want to proceed?"
    assert (first["again"], again["again"]) == ("0", "1")
    assert first["env"] == again["env"] == first["got"]["question"]["id"]
    assert summary(Question.from_json(first["got"]["question"])).startswith("Do you want")
