"""The delivery engine end to end: real tmux, the scripted stand-in agent, the
real CLI, and direct tmux commands on the test's own server to play the person.

End states are read back through ``agentwrap history NAME --json`` (and the
store); what the agent got is read from the stand-in's log (``aw.received()``),
counted by content and by batch token, so a doubled paste cannot hide.

No test asserts how long anything took: waits are generous deadlines only.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from conftest import AwEnv
from support.delivery_kit import (
    CHILD_AGENT,
    agent_pid,
    arrivals_of,
    audit_events,
    box_line,
    child_pid,
    get,
    header,
    history,
    is_terminal,
    kill9,
    ls_json,
    override_profile_input,
    pane_text,
    pane_title,
    popen_id,
    press,
    queue_json,
    send,
    send_async,
    supervisor_log,
    supervisor_pid,
    type_keys,
    wait_for,
    wait_phase,
    wait_soft,
    wait_terminal,
    write_config,
)

ROOT = Path(__file__).resolve().parents[1]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- 1. ACK ---------------------------------------------------------------------------------


def test_ack_path(aw: AwEnv) -> None:
    write_config(aw)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "please read the ACK path", "--ack", "--wait", "--timeout", "60")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("acknowledged: "), res.stdout
    assert "acknowledged" not in res.stdout[len("acknowledged"):], res.stdout  # said once

    got = aw.received()
    assert len(got) == 1, got
    assert "from the user, sent through agentwrap: their own words]\nplease read the ACK path" in got[0]
    (msg,) = history(aw).values()
    assert msg["status"] == "acknowledged"
    assert msg["attempts"] == 1
    (attempt,) = msg["attempt_log"]
    token = attempt["batch_id"]
    assert attempt["outcome"] == "acknowledged"
    assert f"ACK {token}" in attempt["evidence"], attempt
    assert got[0].count(header(token)) == 1
    assert f'Reply "ACK {token}"' in got[0]


# --- 2. retries -------------------------------------------------------------------------------


def test_lost_submit_key_is_resent_and_delivered_once(aw: AwEnv) -> None:
    write_config(aw, submit_timeout_s=1.0)
    aw.start_standin("sa", "--ignore-enter", "1")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "first enter is lost", "--no-ack", "--wait", "--timeout", "60")
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert res.stdout.startswith("delivered"), res.stdout
    assert arrivals_of(aw, "first enter is lost") == 1
    (msg,) = history(aw).values()
    assert msg["status"] == "delivered" and msg["attempts"] == 1
    assert msg["attempt_log"][0]["outcome"] == "delivered"


def test_a_failed_attempt_is_retried_with_growing_backoff(aw: AwEnv) -> None:
    cfg = write_config(aw, submit_timeout_s=0.5, backoff_s=[0.3, 1.2], fallback_after=4,
                       remove_fallback_on_delivery=False)
    aw.start_standin("sa", "--ignore-enter", "6")  # two attempts' three Enters each are lost
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "retry me please", "--no-ack", "--wait", "--timeout", "90")
    assert res.returncode == 0, (res.stdout, res.stderr)

    msg = next(m for m in history(aw).values() if m["source"] == "user")
    log = msg["attempt_log"]
    assert msg["status"] == "delivered" and msg["attempts"] == 3
    assert [a["number"] for a in log] == [1, 2, 3]
    assert [a["outcome"] for a in log] == ["submit_not_confirmed"] * 2 + ["delivered"], log
    # Retries wait at least the configured, growing backoff after the failure.
    gaps = [b["started"] - a["finished"] for a, b in itertools.pairwise(log)]
    print("retry gaps (s):", [round(g, 3) for g in gaps])
    for gap, backoff in zip(gaps, cfg["backoff_s"], strict=True):
        assert gap >= backoff, (gaps, cfg["backoff_s"])
    # The block stayed in the box: each retry pressed submit again, one copy.
    assert arrivals_of(aw, "retry me please") == 1


def test_an_unacknowledged_delivery_is_never_typed_again(aw: AwEnv) -> None:
    """Submitted (the box emptied, the block showed above it): the model may
    have it, so a missing ACK ends the live path at once (issue 35.2: typed
    three times before). Escalated after its one attempt, whatever
    ``fallback_after`` allows."""
    write_config(aw, backoff_s=[0.3], fallback_after=3, remove_fallback_on_delivery=False)
    aw.start_standin("sa", "--never-ack")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "nobody acknowledges me", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 10 and res.stdout.startswith("escalated"), (res.stdout, res.stderr)
    msg = next(m for m in history(aw).values() if m["source"] == "user")
    assert msg["status"] == "escalated" and msg["attempts"] == 1, msg
    assert [a["outcome"] for a in msg["attempt_log"]] == ["no_ack"]
    assert arrivals_of(aw, "nobody acknowledges me") == 1


# --- 3. fallback ---------------------------------------------------------------------------------

_OLD_SECTION = (
    "<!-- agentwrap:begin agentwrap -->\n"
    "## agentwrap: context not delivered live (old)\n"
    "<!-- agentwrap:ids -->\n"
    "\n"
    "<!-- agentwrap:end agentwrap -->"
)


def test_fallback_writes_instruction_file_and_notifies(aw: AwEnv) -> None:
    write_config(aw, fallback_after=2, remove_fallback_on_delivery=False)
    before = "# My project\n\nUser rule: keep tests fast.\n\n"
    after = "\n\n## More user text\nünïcödé, and no final newline"
    agents_md = aw.project / "AGENTS.md"
    agents_md.write_bytes((before + _OLD_SECTION + after).encode())

    aw.start_standin("sa", "--never-ack")
    aw.wait_state("sa", "ready")
    t0 = time.time()
    content = "deploy ```frozen``` until 5pm\n<!-- agentwrap:end agentwrap -->"
    res = aw.cli("send", "sa", content, "--source", "webhook", "--source-id", "ci", "--ack",
                 "--wait", "--timeout", "90")
    assert res.returncode == 10, (res.stdout, res.stderr)
    assert res.stdout.startswith("escalated"), res.stdout

    msgs = history(aw)
    msg = next(m for m in msgs.values() if m["source"] == "webhook")
    assert msg["status"] == "escalated" and msg["attempts"] == 1  # submitted: never retyped
    assert "written to AGENTS.md, section agentwrap" in msg["detail"]
    # `history` says when the agent will read it (issue 14.3)
    assert "reads it at start-up: the next session sees it" in msg["detail"]

    data = agents_md.read_bytes().decode()
    m = re.search(r"written (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\)", data)
    assert m is not None, data
    assert _iso(t0 - 1) <= m.group(1) <= _iso(time.time() + 1)
    section = (
        "<!-- agentwrap:begin agentwrap -->\n"
        "## agentwrap: context not delivered live (quoted data from outside this session,"
        f" written {m.group(1)})\n"
        f"<!-- agentwrap:ids {msg['id']} -->\n"
        "\n"
        f"- [webhook:ci] ({_iso(msg['created'])}, id {msg['id']})\n"
        "````\n"
        "deploy ```frozen``` until 5pm\n"
        "\\<!-- agentwrap:end agentwrap -->\n"
        "````\n"
        "\n"
        "<!-- agentwrap:end agentwrap -->"
    )
    assert data == before + section + after  # the user's bytes around it untouched

    # The notice was queued for the agent and typed into it.
    notice = wait_for(
        lambda: next((x for x in history(aw).values() if x["source_id"] == "fallback"
                      and x["status"] not in ("pending", "delivering")), None),
        60, "the fallback notice to end",
    )
    assert notice["source"] == "system" and notice["status"] == "delivered", notice
    assert msg["id"] in notice["metadata"]["fallback_ids"]
    assert arrivals_of(aw, "it was written to AGENTS.md, in the section") == 1
    # The notice points to the section; the content reached the agent only in
    # its one attempt, not a second time in the notice.
    assert arrivals_of(aw, "deploy ```frozen``` until 5pm") == 1
    assert arrivals_of(aw, "takes effect in the next session") == 1  # standin: not live
    assert agents_md.read_bytes().decode() == before + section + after


# --- 4. draft guard -------------------------------------------------------------------------------


def test_draft_is_never_overwritten_or_submitted(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    type_keys(aw, "my draft")
    wait_for(lambda: box_line(aw).startswith("❯ my draft"), 20, "the draft to show")
    aw.wait_state("sa", "draft")

    mid = send(aw, "sa", "context while you type")
    (row,) = queue_json(aw)
    assert row["id"] == mid and row["waiting_because"] == "draft in input box", row
    # Several supervisor turns pass; nothing may touch the box.
    time.sleep(1.5)
    assert box_line(aw).rstrip() == "❯ my draft"
    assert aw.received() == []
    assert get(aw, mid).status.value == "pending"

    press(aw, *["BSpace"] * len("my draft"))
    final = wait_terminal(aw, mid)
    assert final.status.value == "delivered", final
    got = aw.received()
    assert len(got) == 1 and "context while you type" in got[0]
    assert "my draft" not in got[0] and "my draf" not in got[0]
    assert history(aw)[mid]["attempts"] == 1


# --- 5. dialog guard --------------------------------------------------------------------------------


def test_nothing_is_typed_while_a_dialog_is_open(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "please OPENDIALOG", "--wait", "--timeout", "60")
    assert res.returncode == 0, (res.stdout, res.stderr)
    rec = aw.wait_state("sa", "waiting_input")
    assert "permission" in rec.state_reason
    # what it asks, read off the screen: in the record, `state`, and the event
    q = rec.question
    assert q is not None and (q["kind"], q["tool"], q["command"]) == ("permission", "Bash", "touch x")
    assert [o["label"] for o in q["questions"][0]["options"]] == ["Yes", "No"]
    assert q["questions"][0]["question"] == "Do you want to proceed?" and q["highlighted"] == 1
    shown = aw.cli("state", "sa", check=True).stdout
    assert "Do you want to proceed?" in shown and "❯ 1. Yes" in shown and q["id"] in shown
    assert json.loads(aw.cli("state", "sa", "--json", check=True).stdout)["question"] == q
    store = aw.store()
    try:
        waiting = [e for e in store.events(0, session="sa", kinds=["session.state"])
                   if e.data["state"] == "waiting_input"]
    finally:
        store.close()
    assert waiting and waiting[-1].data["question"] == q

    mid = send(aw, "sa", "second message, after the dialog")
    (row,) = queue_json(aw)
    assert row["id"] == mid and row["waiting_because"] == "agent is waiting for an answer", row
    time.sleep(1.5)  # several supervisor turns
    screen = pane_text(aw)
    assert "Do you want to proceed?" in screen and "(dialog answered)" not in screen
    assert len(aw.received()) == 1
    assert get(aw, mid).status.value == "pending"

    press(aw, "1")  # the person answers
    final = wait_terminal(aw, mid)
    assert final.status.value == "delivered", final
    got = aw.received()
    assert len(got) == 2 and "second message, after the dialog" in got[1]
    assert arrivals_of(aw, "please OPENDIALOG") == 1  # the message that opened it: not retried
    assert pane_text(aw).count("(dialog answered)") == 1
    reg = aw.registry()
    try:  # answered: nothing asked any more (the verdict after the dialog closed)
        assert reg.get("sa").question is None
    finally:
        reg.close()


# --- 6. batching and priority ----------------------------------------------------------------------


def test_busy_agent_gets_one_batch_highest_priority_first(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    # the busy spell outlasts four `send` processes on a loaded machine (4 s did
    # not at load 8-24: one was typed after the spell, as a second batch)
    aw.start_standin("sa", "--busy", "15")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "warm up", "--wait", "--timeout", "60")
    assert res.returncode == 0, res.stderr
    aw.wait_state("sa", "busy")

    specs = [("low", "cron", "nightly"), ("normal", "ci", "pipeline"),
             ("high", "pager", "oncall"), ("critical", "sec", "alert")]
    procs = [
        send_async(aw, "sa", f"{prio} priority news", "--priority", prio,
                   "--source", "monitoring", "--source-id", sid)
        for prio, sid, _ in specs
    ]
    ids = {}
    for (prio, _, _), proc in zip(specs, procs, strict=True):
        rc, data = popen_id(proc)
        assert rc == 0
        ids[prio] = data["id"]
    # All four were queued while the agent was still busy.
    assert all(get(aw, i).status.value == "pending" for i in ids.values())

    for i in ids.values():
        assert wait_terminal(aw, i).status.value == "delivered"
    got = aw.received()
    assert len(got) == 2, got  # the warm-up, then ONE injection
    block = got[1]
    hist = history(aw)
    tokens: set[str] = {hist[i]["attempt_log"][0]["batch_id"] for i in ids.values()}
    assert len(tokens) == 1
    (token,) = tokens
    lines = block.split("\n")
    assert lines[0].startswith(header(token)) and "4 messages" in lines[0]
    assert lines[-1] == f"[end of agentwrap context {token}]"
    assert lines[1:-1] == [
        "[monitoring:sec] critical priority news",
        "[monitoring:pager] high priority news",
        "[monitoring:ci] normal priority news",
        "[monitoring:cron] low priority news",
    ]


# --- 7. sanitizing --------------------------------------------------------------------------------------


def test_control_sequences_never_reach_the_agent(aw: AwEnv) -> None:
    write_config(aw)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    title = pane_title(aw)
    nasty = (
        "alpha \x1b[31mred\x1b[0m beta\x1b]0;EVILTITLE\x07 gamma\x1b[201~ delta\x07\x08\x15"
        " eps\x9b31m zeta\x1bPdcs\x1b\\ eta\x1bc theta\x85 iota\r\nline2 ünïcödé 日本 🎉"
    )
    res = aw.cli("send", "sa", "-", "--wait", "--timeout", "60", input=nasty)
    assert res.returncode == 0, (res.stdout, res.stderr)
    (got,) = aw.received()
    assert "\nalpha red beta gamma delta eps zeta eta theta iota\nline2 ünïcödé 日本 🎉" in got
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", got), repr(got)
    assert "EVILTITLE" not in got and "201~" not in got
    assert pane_title(aw) == title


# --- 8. the agent dies mid-delivery --------------------------------------------------------------------


def test_agent_dies_mid_delivery(aw: AwEnv) -> None:
    # One message per injection, so the other one is still pending at the death.
    write_config(aw, readiness_timeout_s=60, max_injection_bytes=16)
    aw.start_standin("sa", "--busy", "3", "--die-on", "DIEHERE")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "warm up", "--wait", "--timeout", "60")
    assert res.returncode == 0, res.stderr
    aw.wait_state("sa", "busy")
    dying = send_async(aw, "sa", "x DIEHERE x", "--priority", "high", "--wait",
                       "--timeout", "60")
    other = send_async(aw, "sa", "still queued", "--priority", "low", "--wait", "--timeout", "60")
    rc_dying, m_dying = popen_id(dying)
    rc_other, m_other = popen_id(other)
    assert (rc_dying, m_dying["status"]) == (14, "failed"), m_dying
    assert (rc_other, m_other["status"]) == (14, "failed"), m_other
    assert "session ended" in m_other["detail"]
    assert arrivals_of(aw, "x DIEHERE x") == 1
    assert arrivals_of(aw, "still queued") == 0
    hist = history(aw)
    assert hist[m_dying["id"]]["attempts"] == 1
    wait_for(lambda: aw.registry().get("sa").ended is not None, 20, "the session to end")
    # Exactly one terminal event per message in the audit trail.
    for mid in (m_dying["id"], m_other["id"]):
        events = [e for e in audit_events(aw) if mid in e.get("ids", [])]
        assert len(events) == 1, events


# --- 9. crash safety ----------------------------------------------------------------------------------


def _kill_supervisor(aw: AwEnv) -> None:
    kill9(supervisor_pid(aw))


def _adopt(aw: AwEnv) -> None:
    res = aw.cli("adopt", "sa")
    assert res.returncode == 0, (res.stdout, res.stderr)


def _crash_case(aw: AwEnv, pid: int, phase: str, i: int) -> dict[str, Any]:
    """Send one message, kill -9 the supervisor while it is in ``phase``, adopt,
    and wait for the message's end. ``i`` varies where in the phase the kill lands."""
    aw.wait_state("sa", "ready")
    content = f"crash case {phase} {i}"
    stopped = phase == "pasting"
    if stopped:
        os.kill(pid, signal.SIGSTOP)  # the paste cannot show: PASTING lasts
    try:
        mid = send(aw, "sa", content, "--ack")
        token = wait_phase(aw, mid, [phase]).batch_id
        assert token
        time.sleep((0.0, 0.2, 0.6)[i])  # kill at different points of the phase
        log_mark = len(supervisor_log(aw))
        _kill_supervisor(aw)
        killed_in = get(aw, mid).phase
        if stopped and i == 1:
            # The new supervisor resumes while the agent still has not shown the
            # paste; the agent catches up only after it has looked at the box.
            _adopt(aw)
            wait_for(lambda: "resuming batch" in supervisor_log(aw)[log_mark:], 30,
                     "the new supervisor to resume")
            time.sleep(1.0)  # well within paste_timeout_s
            os.kill(pid, signal.SIGCONT)
            stopped = False
        elif stopped:
            os.kill(pid, signal.SIGCONT)
            stopped = False
            if i == 0:  # the paste has shown before the new supervisor starts
                wait_soft(lambda: token in box_line(aw), 5)
            _adopt(aw)
        else:
            _adopt(aw)
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
    final = wait_terminal(aw, mid, 60)
    return {"phase": phase, "i": i, "id": mid, "token": token, "killed_in": str(killed_in),
            "status": final.status.value, "content": content}


def test_supervisor_killed_in_every_phase_types_nothing_twice(aw: AwEnv) -> None:
    # Slow, observable phases: a long submit delay holds SUBMITTING, a busy
    # agent holds SUBMITTED (awaiting ACK), a stopped agent holds PASTING.
    override_profile_input(aw, submit_delay_ms=1000)
    write_config(aw, readiness_timeout_s=60, paste_timeout_s=10, submit_timeout_s=5,
                 ack_timeout_s=1.0, fallback_after=5)
    # The stand-in runs as a child of the pane's process: tmux would continue the
    # pane's own process the moment it is stopped.
    aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", "--cols", "100",
           "--rows", "30", "--", sys.executable, str(CHILD_AGENT), *aw.standin("--busy", "1.5"),
           check=True)
    aw.wait_state("sa", "ready")
    pid = child_pid(agent_pid(aw))
    cases = [
        _crash_case(aw, pid, phase, i)
        for phase in ("pasting", "submitting", "submitted")
        for i in range(3)
    ]

    hist = history(aw)
    problems = []
    for c in cases:
        m = hist[c["id"]]
        n = arrivals_of(aw, c["content"])
        tokens = {a["batch_id"] for a in m["attempt_log"]} | {c["token"]}
        per_token = {t: arrivals_of(aw, header(t)) for t in tokens}
        print(f"{c['phase']:10} #{c['i']} killed in {c['killed_in']:10} -> {m['status']}"
              f" attempts={m['attempts']} arrivals={n} per_token={per_token}")
        if m["status"] != "acknowledged" or n != 1 or any(v > 1 for v in per_token.values()):
            problems.append((c, m["status"], m["detail"], n, per_token))
    assert not problems, problems
    # Every case was killed in the phase it was meant to test (or later).
    assert all(c["killed_in"] != "None" for c in cases), cases


# --- 10. expiry -----------------------------------------------------------------------------------------


def test_message_expires_while_agent_is_busy(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--busy", "4")
    aw.wait_state("sa", "ready")
    assert aw.cli("send", "sa", "warm up", "--wait", "--timeout", "60").returncode == 0
    aw.wait_state("sa", "busy")
    res = aw.cli("send", "sa", "short lived", "--ttl", "1", "--wait", "--timeout", "30")
    assert res.returncode == 11, (res.returncode, res.stdout, res.stderr)
    assert res.stdout.startswith("expired")
    aw.wait_state("sa", "ready")
    # A later message is delivered, and the expired one never was.
    assert aw.cli("send", "sa", "later", "--wait", "--timeout", "60").returncode == 0
    assert arrivals_of(aw, "short lived") == 0
    msg = next(m for m in history(aw).values() if m["content"] == "short lived")
    assert msg["status"] == "expired" and msg["attempt_log"] == []


# --- 11. wake-up latency ---------------------------------------------------------------------------------


def test_message_sent_while_ready_is_typed_promptly(aw: AwEnv) -> None:
    write_config(aw)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    time.sleep(1.0)  # let the supervisor settle into its idle wait
    t0 = time.time()
    send(aw, "sa", "how fast")
    wait_for(lambda: arrivals_of(aw, "how fast") == 1, 30, "the message to arrive")
    import json

    arrived = json.loads(aw.log.read_text().splitlines()[0])["t"]
    print(f"send -> typed latency: {arrived - t0:.3f} s (includes the CLI's start-up)")


# --- known gap (see the report): our own block left in the input box -----------------------------


def test_block_left_in_box_after_unconfirmed_submit_does_not_block_the_queue(aw: AwEnv) -> None:
    write_config(aw, submit_timeout_s=0.5, fallback_after=3, remove_fallback_on_delivery=False)
    aw.start_standin("sa", "--ignore-enter", "3")  # the first attempt's three Enters are lost
    aw.wait_state("sa", "ready")
    mid = send(aw, "sa", "stuck enter")
    final = wait_terminal(aw, mid)
    wait_for(lambda: all(is_terminal(m["status"]) for m in history(aw).values()), 30,
             "every message (the fallback notice too) to end")
    assert "[agentwrap context" not in box_line(aw)
    # The retry pressed submit again on the block already in the box: one copy.
    assert arrivals_of(aw, "stuck enter") == 1
    assert final.status.value == "delivered"
    assert final.attempts == 2


# --- 12. the supervisor never goes blind -----------------------------------------------------------


def test_agent_killed_while_awaiting_ack_is_seen_and_the_message_counts_delivered(
    aw: AwEnv,
) -> None:
    # Issue 14.2: while agentwrap waited for an ACK nothing drained the agent's
    # output; a redrawing agent filled the pipe and its death went unnoticed for
    # minutes. Here the agent redraws its whole screen every 5 ms, never ACKs,
    # and is killed while the ACK is awaited (hard stop 4 x 60 s away).
    write_config(aw, readiness_timeout_s=60, ack_timeout_s=60)
    aw.start_standin("sa", "--busy", "600", "--spin", "0.005", "--never-ack")
    aw.wait_state("sa", "ready")
    # The sender asked for an ACK and waits for the end (issue 25.4).
    waiting = send_async(aw, "sa", "please acknowledge", "--ack", "--wait", "--timeout", "120")
    mid = wait_for(lambda: next((i for i, m in history(aw).items()
                                 if m["content"] == "please acknowledge"), None), 30, "stored")
    wait_phase(aw, mid, ["submitted"])
    time.sleep(1.0)  # the flood runs while the ACK is awaited
    started = time.monotonic()
    kill9(agent_pid(aw))
    final = wait_terminal(aw, mid, 60)
    rec = wait_for(lambda: (r := aw.registry().get("sa")).ended and r, 30, "the session to end")
    print(f"agent exit seen {time.monotonic() - started:.2f} s after kill -9 (awaiting ACK)")
    # It was proven submitted before the wait: delivered, never failed.
    assert final.status.value == "delivered", final
    assert "not acknowledged" in final.detail
    assert rec.state == "exited"
    assert arrivals_of(aw, "please acknowledge") == 1
    # ... but not acknowledged, and the sender can tell: exit 15, not 0
    rc, data = popen_id(waiting)
    assert rc == 15, data
    assert (data["id"], data["status"], data["acknowledged"], data["outcome"]) == (
        mid, "delivered", False, "unacknowledged")
    assert history(aw)[mid]["attempt_log"][-1]["outcome"] == "unacknowledged"


def test_stop_during_a_delivery_step_leaves_the_batch_to_resume(aw: AwEnv) -> None:
    # "stop" reaches a supervisor that is inside a delivery step (here: waiting
    # for a paste the stopped agent cannot show): it stops at once, and the
    # batch keeps its write-ahead phase for the next supervisor.
    write_config(aw, readiness_timeout_s=60, paste_timeout_s=30)
    # A child of the pane's process: tmux continues the pane's own process.
    aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", "--cols", "100",
           "--rows", "30", "--", sys.executable, str(CHILD_AGENT), *aw.standin(), check=True)
    aw.wait_state("sa", "ready")
    pid = child_pid(agent_pid(aw))
    os.kill(pid, signal.SIGSTOP)
    try:
        mid = send(aw, "sa", "typed once")
        wait_phase(aw, mid, ["pasting"])
        supervisor_pid(aw)  # supervised now
        from agentwrap.datagram import wake
        wake(aw.paths, "sa", b"stop")
        # The session's supervision ends (its process, or its thread of the host)
        wait_for(lambda: _liveness(aw, "sa") == "stale", 20, "the supervision to stop")
        assert get(aw, mid).phase is not None and get(aw, mid).phase.value == "pasting"
    finally:
        os.kill(pid, signal.SIGCONT)
    _adopt(aw)
    assert wait_terminal(aw, mid, 60).status.value == "delivered"
    assert arrivals_of(aw, "typed once") == 1


def _liveness(aw: AwEnv, name: str) -> str:
    return str(next(r for r in ls_json(aw) if r["name"] == name)["liveness"])


def test_a_dying_agent_screen_is_not_evidence_of_submission(aw: AwEnv) -> None:
    # Issue 8.10: the agent dies while our block sits in its box and the submit
    # key is on its way; the last screen of a dead pane (box emptied) must not
    # be read as "submitted".
    override_profile_input(aw, submit_delay_ms=1500)
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    mid = send(aw, "sa", "never submitted")
    wait_phase(aw, mid, ["submitting"])
    kill9(agent_pid(aw))
    final = wait_terminal(aw, mid, 60)
    assert final.status.value == "failed", final
    assert arrivals_of(aw, "never submitted") == 0


_COOKED_REPL = """
import sys
log = open(sys.argv[1], "a", encoding="utf-8")
while True:
    try:
        line = input("> ")
    except EOFError:
        break
    log.write(line + "\\n")
    log.flush()
"""


def test_generic_repl_after_a_burst_is_ready_not_a_draft(aw: AwEnv) -> None:
    # Issue 8.11: a cooked-mode REPL fed a many-line block prints one prompt per
    # line it reads, all on one line ("> > > >"). That is no draft: the
    # session must come back to ready and every message end delivered.
    write_config(aw, readiness_timeout_s=20)
    (aw.paths.config_file).write_text(
        aw.paths.config_file.read_text() + "\n[limits]\nrate_per_minute = 1000\n"
    )
    lines_log = aw.root / "lines.txt"
    aw.cli("run", "--detach", "--name", "g", "--profile", "generic", "--", sys.executable,
           "-c", _COOKED_REPL, str(lines_log), check=True)
    aw.wait_state("g", "ready")
    ids = [send(aw, "g", f"burst message {i:03d}") for i in range(40)]
    finals = [wait_terminal(aw, mid, 120) for mid in ids]
    assert [m.status.value for m in finals] == ["delivered"] * 40, [
        (m.status.value, m.detail) for m in finals if m.status.value != "delivered"
    ]
    rec = aw.wait_state("g", "ready", timeout=30)
    assert rec.state == "ready"
    got = lines_log.read_text(encoding="utf-8")
    for i in range(40):
        assert got.count(f"burst message {i:03d}") == 1


# --- 12. one delivery per message: the channel that reaches a busy agent -------------------------------


def test_busy_agent_with_hooks_is_never_typed_into_and_its_hook_takes_the_message(
    aw: AwEnv,
) -> None:
    """With hooks registered, a busy agent's messages wait for the hook between
    tool calls (a typed block would become a user turn of its own), even where
    the agent takes typing while busy, and a busy spell longer than the
    readiness timeout is not a failed attempt."""
    write_config(aw, readiness_timeout_s=1)
    override_profile_input(aw, accepts_input_while_busy=True)
    # busy long enough for the checks below on a loaded machine (8 s was not, with
    # two other test processes beside it: the spell ended and the message was typed)
    aw.start_standin("sa", "--busy", "20")
    aw.wait_state("sa", "ready")
    # The launch registered hooks (what `run` records for Claude Code): the
    # engine is built from the record, so a new supervisor adopts the session.
    _kill_supervisor(aw)
    reg = aw.registry()
    try:
        reg.update("sa", options=replace(reg.get("sa").options, channels=("hooks",)))
    finally:
        reg.close()
    _adopt(aw)
    aw.wait_state("sa", "ready")
    assert aw.cli("send", "sa", "warm up", "--wait", "--timeout", "60").returncode == 0
    aw.wait_state("sa", "busy")
    mid = send(aw, "sa", "build broke on main", "--priority", "high")
    # Busy for three readiness timeouts: no typing, no failed attempt.
    wait_for(lambda: "agent busy; its hooks" in json.dumps(queue_json(aw, "sa")), 20,
             "the queue to say the hooks will take it")
    time.sleep(3)
    assert get(aw, mid).status.value == "pending" and get(aw, mid).attempts == 0
    payload = (ROOT / "tests" / "fixtures" / "hooks" / "claude" / "PostToolBatch.json").read_bytes()
    hook = subprocess.run([sys.executable, "-m", "agentwrap", "hook", "claude", "PostToolBatch"],
                          input=payload, env={**aw.env, "AGENTWRAP_SESSION": "sa"},
                          capture_output=True, check=True)
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "[user:cli] build broke on main" in context or "build broke on main" in context
    done = wait_terminal(aw, mid)
    assert done.status.value == "delivered"
    log = history(aw)[mid]["attempt_log"]
    assert [(a["channel"], a["outcome"]) for a in log] == [("hook", "delivered")]
    aw.wait_state("sa", "ready", timeout=60)  # the rest of the 20 s busy spell
    time.sleep(1)
    assert arrivals_of(aw, "build broke on main") == 0  # never typed as well


def test_a_block_never_outgrows_the_screen_of_an_agent_that_shows_pastes_line_by_line(
    aw: AwEnv,
) -> None:
    """The stand-in shows a paste line by line, as Aider does (no "[Pasted
    text]" placeholder): 40 one-line messages queued while it works would make
    a block taller than its 30 rows, whose input box then has no edges on
    screen (state unknown, paste not seen, everything to the fallback file).
    Batches stay within half the screen instead; each message arrives once."""
    from agentwrap.message import NewMessage, QueueLimits, Source
    from agentwrap.service import Service

    aw.start_standin("sa", "--busy", "3")
    aw.wait_state("sa", "ready")
    send(aw, "sa", "start working")
    aw.wait_state("sa", "busy")
    with Service.open(aw.paths, limits=QueueLimits(rate_per_minute=1000)) as svc:
        ids = [svc.send(NewMessage(session="sa", content=f"line message {i:02d}",
                                   source=Source.WEBHOOK, source_id="ci")).message.id
               for i in range(40)]
    for mid in ids:
        assert wait_terminal(aw, mid, timeout=120).status.value == "delivered", mid
    tokens = {get(aw, mid).batch_id for mid in ids}
    assert len(tokens) >= 3  # 40 lines in blocks of at most 13
    for i in range(40):
        assert arrivals_of(aw, f"line message {i:02d}") == 1
