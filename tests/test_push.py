"""Notices through Apprise to real services on loopback: an ntfy-compatible HTTP
stand-in and an SMTP sink (aiosmtpd). What arrives says which session on which
host, the exact command and the options; a flood of repaints is one notice;
repeats follow ``renotify_after_s``; a URL's secrets never reach a log, an error
or ``doctor``; a slow or failing service never blocks the caller and is retried.
``[answers] on_timeout = "deny"`` denies on time, recorded as an answer. Waits
are deadlines only."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from conftest import AwEnv
from support.delivery_kit import history, press, write_config
from support.notify_sinks import NtfyStandIn, SmtpSink
from support.waiting import wait_for
from test_answer import answered_events, choices, open_dialog

from agentwrap.answers.telling import Teller
from agentwrap.audit import AuditLog
from agentwrap.config import NotifyConfig, load_config
from agentwrap.delivery import push as push_mod
from agentwrap.delivery.notices import (
    Event,
    Notices,
    event_notice,
    redact,
    waiting_notice,
)
from agentwrap.delivery.push import Push
from agentwrap.detect.question import Item, Option, Question
from agentwrap.errors import ConfigError

SECRET = "tk_S3cr3tT0kenXYZ"


def question(qid: str = "q1", highlighted: int = 1, command: str = "npm test -- --watch") -> Question:
    return Question(id=qid, kind="permission", title="Bash command",
                    questions=(Item("Do you want to proceed?", options=(
                        Option("Yes", number=1),
                        Option("Yes, and don't ask again for npm test", number=2),
                        Option("No", number=3))),),
                    highlighted=highlighted, tool="Bash", command=command, dialog="permission")


@pytest.fixture
def ntfy() -> Iterator[NtfyStandIn]:
    server = NtfyStandIn()
    yield server
    server.close()


@pytest.fixture
def fast_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push_mod, "RETRY_S", (0.05, 0.05, 0.05))


def idle(p: Push) -> bool:
    return p.idle()


def test_a_question_arrives_with_session_host_command_and_options(ntfy: NtfyStandIn) -> None:
    p = Push([ntfy.url()])
    notice = waiting_notice("api", "devbox", question(), 1_767_000_000.0)
    assert p.send(notice)
    (got,) = wait_for(lambda: ntfy.arrived, 30, "the notice at the ntfy stand-in")
    text = got.text
    assert "Waiting: api on devbox" in text
    assert "Session api on host devbox asks: Do you want to proceed?" in text
    assert "Command: npm test -- --watch" in text
    assert "1. Yes; 2. Yes, and don't ask again for npm test; 3. No" in text
    assert "Waiting since 2025-12-29 09:20:00 UTC" in text


def test_the_links_of_an_answer_links_maker_are_in_the_notice(ntfy: NtfyStandIn) -> None:
    class Links:
        def links_for(self, session: str, host: str, question_id: str,
                      options: Any) -> list[tuple[str, str]]:
            labels = [o.label for o in options]  # the question's options, numbered
            return [(o, f"https://hub.example/a/{session}/{question_id}/{i}")
                    for i, o in enumerate([*labels, "Deny"], 1)]

    notice = waiting_notice("api", "devbox", question("q7"), 0.0, links=Links())
    assert notice.links[-1] == ("Deny", "https://hub.example/a/api/q7/4")
    Push([ntfy.url()]).send(notice)
    (got,) = wait_for(lambda: ntfy.arrived, 30, "the notice")
    assert "Yes: https://hub.example/a/api/q7/1" in got.text
    assert "Deny: https://hub.example/a/api/q7/4" in got.text


def test_a_flood_of_repaints_is_one_notice_and_repeats_follow_renotify(
        ntfy: NtfyStandIn, tmp_path: Any) -> None:
    now = [100.0]
    cfg = NotifyConfig(urls=(ntfy.url(),), renotify_after_s=60, desktop=False)
    p = Push(cfg.urls)
    teller = Teller("api", cfg, AuditLog(tmp_path / "audit.log"), clock=lambda: now[0],
                    notices=Notices(cfg, push=p), host="devbox")
    for i in range(500):  # the cursor moves, the screen repaints: the same question
        teller.update(question(highlighted=1 + i % 3))
        now[0] += 0.01
    wait_for(lambda: idle(p), 30, "the push worker idle")
    assert len(ntfy.arrived) == 1
    now[0] += 61
    teller.update(question())
    wait_for(lambda: len(ntfy.arrived) == 2, 30, "the reminder")
    assert ntfy.arrived[1].text.startswith("Still waiting: api on devbox")
    teller.update(question("q2", command="rm x"))  # another question: told at once
    wait_for(lambda: len(ntfy.arrived) == 3, 30, "the next question's notice")
    assert "Command: rm x" in ntfy.arrived[2].text
    told = [json.loads(x) for x in (tmp_path / "audit.log").read_text().splitlines()]
    assert [t["channels"] for t in told] == [["push"]] * 3


def test_a_slow_service_never_blocks_the_sender(ntfy: NtfyStandIn) -> None:
    held = threading.Event()
    original = ntfy.server.RequestHandlerClass.do_POST  # type: ignore[attr-defined]

    def hold(self: Any) -> None:
        held.wait(60)
        original(self)

    ntfy.server.RequestHandlerClass.do_POST = hold  # type: ignore[attr-defined]
    p = Push([ntfy.url()])
    for i in range(5):  # returns while the service holds the first request
        assert p.send(event_notice(Event.FAILED, "api", "devbox", f"failure {i}", f"k{i}", 0.0))
    assert ntfy.arrived == [] and not p.idle()
    held.set()
    wait_for(lambda: len(ntfy.arrived) == 5, 30, "every notice once the service answers")


def test_a_failing_service_is_retried_then_given_up_logged_without_secrets(
        ntfy: NtfyStandIn, fast_retry: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = ntfy.url(token=SECRET)
    p = Push([url])
    ntfy.fail_next = 2
    p.send(event_notice(Event.EXITED, "api", "devbox", "the agent exited with status 1",
                        "exit:api", 0.0))
    (got,) = wait_for(lambda: ntfy.arrived, 30, "the notice after two failures")
    assert "Agent exited: api on devbox" in got.text
    assert got.headers.get("authorization") == f"Bearer {SECRET}"  # the service got its token
    ntfy.fail_next = 99
    p.send(event_notice(Event.FAILED, "api", "devbox", "x", "k", 0.0))
    wait_for(lambda: any(not ok for _, _, ok in p.delivered), 30, "the notice given up")
    wait_for(lambda: "gave up" in caplog.text, 30, "the give-up logged")
    assert len(ntfy.arrived) == 1
    assert SECRET not in caplog.text
    assert "ntfy://***" in caplog.text


def test_a_dead_service_is_logged_redacted(fast_retry: None,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    dead = NtfyStandIn()
    url = dead.url(token=SECRET)
    dead.close()  # nobody listens there now
    p = Push([url], timeout_s=2)
    p.send(event_notice(Event.UNREACHABLE, "api", "devbox", "host b is silent", "h:b", 0.0))
    wait_for(lambda: p.delivered, 60, "the notice given up")
    assert p.delivered[0][2] is False
    assert SECRET not in caplog.text


def test_mailto_reaches_an_smtp_server() -> None:
    sink = SmtpSink()
    try:
        p = Push([sink.url()])
        p.send(waiting_notice("api", "devbox", question(), 0.0))
        (text,) = wait_for(sink.texts, 30, "the e-mail at the SMTP sink")
    finally:
        sink.close()
    assert "Waiting: api on devbox" in text
    assert "Command: npm test -- --watch" in text and "3. No" in text
    assert sink.logins and sink.logins[0][1] == "aw"  # logged in with the URL's account


def test_redact_shows_the_scheme_only() -> None:
    for url in (f"tgram://{SECRET}/12345", f"slack://T0/B0/{SECRET}/#ops",
                f"mailto://me:{SECRET}@gmail.com", f"ntfy://ntfy.sh/topic?token={SECRET}",
                f"ntfys://user:{SECRET}@ntfy.example/t"):
        shown = redact(url)
        assert SECRET not in shown and shown.endswith("://***"), shown
    assert redact("no url here") == "***"


def test_config_checks_urls_and_events_without_printing_them(aw: AwEnv) -> None:
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    for bad, words in ((f'urls = ["{SECRET}@nowhere"]', "not an Apprise URL"),
                       (f'urls = ["ht tp://{SECRET}"]', "not an Apprise URL"),
                       ('events = ["sometimes"]', "unknown event")):
        aw.paths.config_file.write_text(f"[notify]\n{bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=words) as err:
            load_config(aw.paths, aw.project)
        assert SECRET not in str(err.value) + (err.value.hint or "")
    aw.paths.config_file.write_text(
        f'[notify]\nurls = ["ntfy://ntfy.sh/t?token={SECRET}", "tgram://{SECRET}/1"]\n'
        'events = ["waiting"]\n\n[answers]\non_timeout = "deny"\ntimeout_s = 90\n',
        encoding="utf-8")
    cfg = load_config(aw.paths, aw.project)
    assert cfg.notify.events == ("waiting",) and cfg.answers.timeout_s == 90.0
    (aw.project / ".agentwrap.toml").write_text('[answers]\non_timeout = "deny"\n')
    with pytest.raises(ConfigError, match="may only be set in your own config file"):
        load_config(aw.paths, aw.project)
    (aw.project / ".agentwrap.toml").unlink()
    aw.paths.config_file.write_text('[answers]\non_timeout = "approve"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="on_timeout: must be one of deny, leave"):
        load_config(aw.paths, aw.project)


def test_doctor_shows_the_urls_redacted(aw: AwEnv) -> None:
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(
        f'[notify]\nurls = ["ntfy://ntfy.sh/t?token={SECRET}", "nosuchservice://{SECRET}"]\n',
        encoding="utf-8")
    res = aw.cli("doctor", "--json")
    assert SECRET not in res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["notify"]["urls"] == [{"url": "ntfy://***", "known": True},
                                         {"url": "nosuchservice://***", "known": False}]
    assert any("notify.urls[1]" in p["problem"] for p in report["problems"])


def test_events_not_selected_are_not_pushed(ntfy: NtfyStandIn) -> None:
    cfg = NotifyConfig(urls=(ntfy.url(),), events=("exited",), desktop=False)
    p = Push(cfg.urls)
    notices = Notices(cfg, push=p)
    assert notices.tell(waiting_notice("api", "devbox", question(), 0.0)) == []
    assert notices.tell(event_notice(Event.EXITED, "api", "devbox", "gone", "k", 0.0)) == ["push"]
    wait_for(lambda: ntfy.arrived, 30, "the exit notice")
    wait_for(lambda: idle(p), 30, "idle")
    assert len(ntfy.arrived) == 1 and "Agent exited" in ntfy.arrived[0].text


# --- end to end: a real supervisor, the stand-in agent asking a permission ------------------


def notify_config(aw: AwEnv, extra: str = "") -> None:
    write_config(aw, readiness_timeout_s=60)
    with open(aw.paths.config_file, "a", encoding="utf-8") as f:
        f.write(extra)


def test_a_stand_in_asking_a_permission_is_pushed_once_with_its_command(
        aw: AwEnv, ntfy: NtfyStandIn) -> None:
    notify_config(aw, f'\n[notify]\ndesktop = false\nurls = ["{ntfy.url(token=SECRET)}"]\n'
                      '\n[host]\nname = "devbox"\n'
                      '\n[serve]\npublic_url = "https://aw.example.net/aw"\n')
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    q = open_dialog(aw)
    (got,) = wait_for(lambda: ntfy.arrived, 30, "the notice at the ntfy stand-in")
    assert got.headers.get("authorization") == f"Bearer {SECRET}"
    assert "Waiting: sa on devbox" in got.text
    assert f"Command: {q['command']}" in got.text
    assert "1. Yes" in got.text and "2. No" in got.text
    # one-tap links (agentwrap.answers.links): each option, then Deny, signed with
    # this state's key, bound to the session, its host and this question
    from agentwrap.answers.links import TAP_PATH, load_or_create_key, verify

    prefix = f"https://aw.example.net/aw{TAP_PATH}"
    links = [line.split(": ", 1) for line in got.text.splitlines() if prefix in line]
    assert [label for label, _ in links] == ["1. Yes", "2. No", "Deny"], got.text
    key = load_or_create_key(aw.paths)
    claims = [verify(key, unquote(url.split(prefix, 1)[1])) for _, url in links]
    assert {(c.session, c.host, c.question_id) for c in claims} == {("sa", "devbox", q["id"])}
    assert [c.choice for c in claims] == ["1", "2", "deny"]
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    told = [a for a in audit if a["event"] == "told_waiting"]
    assert told and told[0]["question"] == q["id"] and "push" in told[0]["channels"]
    for key in ["Down", "Up"] * 10 + ["Down"]:  # a flood of repaints of the same dialog
        press(aw, key)
    wait_for(lambda: (aw.registry().get("sa").question or {}).get("highlighted") == 2, 30,
             "the supervisor reading the repainted dialog")
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    assert len([a for a in audit if a["event"] == "told_waiting"]) == 1
    assert len(ntfy.arrived) == 1  # one notice for the question, not one per repaint
    log_dir = aw.paths.state_dir
    for path in log_dir.rglob("*.log"):
        assert SECRET not in path.read_text(errors="replace"), path


def test_on_timeout_deny_denies_on_time_recorded_as_an_answer(aw: AwEnv) -> None:
    notify_config(aw, '\n[notify]\ndesktop = false\n\n[answers]\non_timeout = "deny"\n'
                      'timeout_s = 3\n\n[run]\nidle_tick_s = 600\n')
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    q = open_dialog(aw)
    wait_for(lambda: choices(aw), 120, "the timeout's deny reaching the stand-in")
    assert [c["choice"] for c in choices(aw)] == ["cancelled"]
    events = answered_events(aw)
    assert [(e.data["status"], e.data["source"]) for e in events] == [
        ("pending", "policy"), ("applied", "policy")]
    assert events[0].data["rule"] == "on_timeout"
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    (done,) = [a for a in audit if a["event"] == "policy_answered"]
    assert (done["rule"], done["question"]) == ("on_timeout", q["id"])


def test_on_timeout_leaves_what_an_ask_rule_keeps_for_the_person(aw: AwEnv) -> None:
    notify_config(aw, '\n[notify]\ndesktop = false\n\n[answers]\non_timeout = "deny"\n'
                      'timeout_s = 1\n\n[[answer_rules]]\nname = "mine"\ncommand = "touch *"\n'
                      'answer = "ask"\n')
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    open_dialog(aw)
    held = wait_for(lambda: [a for a in (json.loads(x) for x in
                                         aw.paths.audit_log.read_text().splitlines())
                             if a["event"] == "policy_held" and a["rule"] == "on_timeout"],
                    60, "the timeout passed, the question left to the person")
    assert "'mine' leaves it to you" in held[0]["reason"]
    assert choices(aw) == []
    res = aw.cli("answer", "sa", "--option", "1", "--json", "--timeout", "30")
    assert res.returncode == 0, res.stderr
    assert [c["choice"] for c in choices(aw)] == ["chose 1. Yes"]  # never denied meanwhile


def test_an_escalated_message_and_an_unexpected_exit_are_pushed(
        aw: AwEnv, ntfy: NtfyStandIn) -> None:
    write_config(aw, fallback_after=2, remove_fallback_on_delivery=False, notify_on_failure=True)
    with open(aw.paths.config_file, "a", encoding="utf-8") as f:
        f.write(f'\n[notify]\ndesktop = false\nurls = ["{ntfy.url()}"]\n'
                'events = ["failed", "exited"]\n\n[host]\nname = "devbox"\n')
    (aw.project / "AGENTS.md").write_text("# My project\n", encoding="utf-8")
    aw.start_standin("sa", "--never-ack", "--exit-code", "3")
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "nobody acknowledges me", "--ack", "--wait", "--timeout", "90")
    assert res.stdout.startswith("escalated"), (res.stdout, res.stderr)
    (failed,) = wait_for(lambda: ntfy.arrived, 30, "the escalation's notice")
    assert "Delivery failed: sa on devbox" in failed.text
    assert "context was written to AGENTS.md" in failed.text
    wait_for(lambda: len(history(aw)) == 2 and all(
        m["status"] not in ("queued", "pending", "delivering") for m in history(aw).values()),
        60, "the fallback notice's delivery ended")
    aw.wait_state("sa", "ready", timeout=60)
    press(aw, "C-d")  # the stand-in ends with its --exit-code
    wait_for(lambda: len(ntfy.arrived) == 2, 60, "the exit's notice")
    assert "Agent exited: sa on devbox" in ntfy.arrived[1].text
    assert "the agent exited with status 3" in ntfy.arrived[1].text


def test_a_stop_or_a_clean_exit_is_no_unexpected_exit(aw: AwEnv, ntfy: NtfyStandIn) -> None:
    notify_config(aw, f'\n[notify]\ndesktop = false\nurls = ["{ntfy.url()}"]\n')
    aw.start_standin("sa", "--exit-code", "3")
    aw.start_standin("sb")  # exits 0 on Ctrl-D: expected too
    aw.start_standin("sc", "--exit-code", "3")
    for name in ("sa", "sb", "sc"):
        aw.wait_state(name, "ready")
    aw.cli("stop", "sa", check=True)
    press(aw, "C-d", name="sb")
    aw.wait_state("sb", "exited", timeout=60)
    press(aw, "C-d", name="sc")  # the one unexpected exit, told last
    wait_for(lambda: [a for a in ntfy.arrived if "sc on" in a.text], 60, "sc's exit notice")
    assert [a.text.split("\n")[0] for a in ntfy.arrived] == [
        f"Agent exited: sc on {aw.registry().host}"]


# --- a host of the shared store falls silent: one notice per silence -----------------------


def test_a_host_that_falls_silent_is_pushed_once(tmp_path: Any, pg_url: str,
                                                 ntfy: NtfyStandIn) -> None:
    import os
    import time
    from pathlib import Path

    from agentwrap.queue.backend import open_database
    from agentwrap.sessions import hosts
    from agentwrap.sessions.compose import _tell_silent_hosts
    from agentwrap.sessions.registry import Registry

    Registry(tmp_path / "q.db", url=pg_url, host="alpha").close()  # the hosts' tables
    db = open_database(Path(os.devnull), pg_url)
    cfg = NotifyConfig(urls=(ntfy.url(),), desktop=False)
    p = Push(cfg.urls)
    before = list(hosts.HostBeat.listeners)
    try:
        _tell_silent_hosts(Notices(cfg, push=p))
        alpha = hosts.HostBeat(db, "alpha", 1.0, pg_url)
        now = time.time()
        hosts.beat(db, "alpha", 1.0, now=now)
        hosts.beat(db, "beta", 1.0, now=now)
        assert alpha.watch(now) == []  # the first look only learns who is up
        assert [h.name for h in alpha.watch(now + 10)] == ["beta"]  # past 3 periods: silent
        assert alpha.watch(now + 20) == []  # still silent: told once
        wait_for(lambda: ntfy.arrived, 30, "the host's notice")
        hosts.beat(db, "beta", 1.0, now=now + 30)  # back, and silent again: told again
        assert alpha.watch(now + 30) == []
        assert [h.name for h in alpha.watch(now + 40)] == ["beta"]
        wait_for(lambda: len(ntfy.arrived) == 2, 30, "the second silence's notice")
    finally:
        hosts.HostBeat.listeners[:] = before
        db.close()
    assert ntfy.arrived[0].text.startswith("Host unreachable: beta\nHost beta: no heartbeat since")
