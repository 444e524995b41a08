"""``agentwrap run --on-timeout deny|leave --answer-timeout SECONDS`` (issue 40):
what becomes of a question nobody answers, for one session. The session's
value beats the config's ``[answers]`` (shown by ``state --explain`` and kept
in the record's options); a value the options do not take is refused with one
``error:`` and one ``hint:`` line, exit 64, and starts nothing. Waits are
deadlines only."""

from __future__ import annotations

import json

import pytest
from conftest import AwEnv
from support.delivery_kit import write_config
from support.waiting import wait_for
from test_answer import answered_events, choices, open_dialog
from test_cli import assert_clean_error

from agentwrap.config import AnswersConfig
from agentwrap.errors import InvalidRunOption
from agentwrap.session_options import SessionOptions, timeout_policy


def config(aw: AwEnv, answers: str) -> None:
    write_config(aw, readiness_timeout_s=60)
    with open(aw.paths.config_file, "a", encoding="utf-8") as f:
        f.write(f"\n[notify]\ndesktop = false\n\n[answers]\n{answers}\n"
                "\n[run]\nidle_tick_s = 600\n")


def test_the_sessions_values_beat_the_configs() -> None:
    cfg = AnswersConfig(on_timeout="deny", timeout_s=900.0, link_ttl_s=60.0)
    assert SessionOptions().answers(cfg) is cfg  # nothing given: the config decides
    assert SessionOptions(on_timeout="leave").answers(cfg) == AnswersConfig("leave", 900.0, 60.0)
    assert SessionOptions(answer_timeout_s=5.0).answers(cfg) == AnswersConfig("deny", 5.0, 60.0)
    assert SessionOptions(on_timeout="deny", answer_timeout_s=0.0).answers(cfg).timeout_s == 0.0
    # kept in the record's JSON and read back; a value agentwrap never writes reads as unset
    opts = SessionOptions.from_json({"on_timeout": "deny", "answer_timeout_s": 3})
    assert (opts.on_timeout, opts.answer_timeout_s) == ("deny", 3.0)
    assert SessionOptions.from_json(opts.to_json()) == opts
    odd = SessionOptions.from_json({"on_timeout": "approve", "answer_timeout_s": -1})
    assert (odd.on_timeout, odd.answer_timeout_s) == (None, None)


@pytest.mark.parametrize(("on", "secs", "words"), [
    ("approve", None, "--on-timeout: must be one of deny, leave, got 'approve'"),
    ("DENY", "5", "--on-timeout: must be one of deny, leave"),
    (None, "soon", "--answer-timeout: not a number of seconds: 'soon'"),
    (None, "-1", "--answer-timeout: must be 0 or more seconds, got '-1'"),
    (None, "nan", "--answer-timeout: must be 0 or more seconds"),
    (None, "inf", "--answer-timeout: must be 0 or more seconds"),
])
def test_timeout_policy_refuses_what_it_does_not_take(on: str | None, secs: str | None,
                                                      words: str) -> None:
    with pytest.raises(InvalidRunOption, match=words) as err:
        timeout_policy(on, secs)
    assert err.value.exit_code == 64 and err.value.hint


@pytest.mark.parametrize("args", [
    ("--on-timeout", "approve"),
    ("--answer-timeout", "soon"),
    ("--answer-timeout", "-5"),
    ("--on-timeout", "deny", "--answer-timeout", "inf"),
    ("--on-timeout", "deny"),  # no timeout here nor in [answers]: it would deny nothing
    ("--on-timeout", "deny", "--answer-timeout", "0"),
], ids=["policy", "not-a-number", "negative", "infinite", "deny-no-timeout", "deny-zero"])
def test_a_bad_value_is_refused_and_starts_nothing(aw: AwEnv, args: tuple[str, ...]) -> None:
    config(aw, 'on_timeout = "leave"')
    res = aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", *args, "--",
                 *aw.standin())
    line = assert_clean_error(res, 64)
    assert "--on-timeout" in line or "--answer-timeout" in line, line
    assert aw.registry().find("sa") is None
    assert not aw.paths.tmux_socket_for("sa").exists()
    assert not aw.log.exists()  # the stand-in never ran


def test_a_sessions_deny_beats_the_configs_leave(aw: AwEnv) -> None:
    config(aw, 'on_timeout = "leave"\ntimeout_s = 900')
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG",
                     run_args=("--on-timeout", "deny", "--answer-timeout", "3"))
    aw.wait_state("sa", "ready")
    explain = aw.cli("state", "sa", "--explain", check=True).stdout
    assert "on timeout: deny (run --on-timeout), after 3 s (run --answer-timeout)" in explain
    (listed,) = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert (listed["options"]["on_timeout"], listed["options"]["answer_timeout_s"]) == ("deny", 3)
    q = open_dialog(aw)
    wait_for(lambda: choices(aw), 120, "the session's timeout denying the question")
    assert [c["choice"] for c in choices(aw)] == ["cancelled"]
    events = answered_events(aw)
    assert events[0].data["rule"] == "on_timeout" and events[-1].data["status"] == "applied"
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    (done,) = [a for a in audit if a["event"] == "policy_answered"]
    assert (done["rule"], done["question"]) == ("on_timeout", q["id"])
