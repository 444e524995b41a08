"""The real agent CLIs under agentwrap, against the loopback model server.

Each scenario runs for Claude Code, Codex, Aider and Gemini CLI. What reached
the model is asserted from the model server's request log, never from the
screen alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest

from agentwrap.detect.profiles import load_profile

from .conftest import AgentSession
from .test_answering import on_app_server

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def tag() -> str:
    return f"E2E{uuid.uuid4().hex[:8]}"


def test_startup_context_reaches_model_once(make_session: Make, agent_name: str) -> None:
    _startup_context(make_session(agent_name), agent_name)


def test_startup_context_with_codex_hooks(make_session: Make) -> None:
    """Codex gets hooks only with the person's own codex_hook_trust = "bypass";
    its SessionStart hook runs when the first prompt is submitted (the typed
    context), and hands nothing over twice."""
    s = make_session("codex")
    s.write_config('[run]\ncodex_hook_trust = "bypass"\n')
    _startup_context(s, "codex", hooks=True)


def _startup_context(s: AgentSession, agent_name: str, hooks: bool | None = None) -> None:
    """``run --context``: through the SessionStart hook where the agent has
    hooks (in flight until the session's first model turn, then delivered,
    then acknowledged from the reply), else typed once the agent is ready."""
    marker = tag()
    handoff = s.root / "handoff.md"
    handoff.write_text(f"Last session: refactored the parser. Marker {marker}.\nNext: tests.\n")
    s.start("--context", str(handoff), "--require-ack")
    st = s.wait_state("ready", "busy", timeout=90)
    hooked = "hooks" in (st.get("channels") or [])
    assert hooks is None or hooked == hooks, st
    # Codex runs SessionStart only at the first prompt: there the context is typed
    hooked = hooked and load_profile(agent_name).channels.session_start_at_launch
    by = "typing"
    if hooked:
        # handed over by the SessionStart hook; the model reads it with the
        # person's first prompt, never typed meanwhile
        s.wait_until(lambda: s.history() and s.history()[0]["status"] != "pending", 30,
                     "startup context handed at the start")
        s.wait_state("ready", timeout=60)
        time.sleep(2.0)
        assert not s.received_with(marker) and s.history()[0]["status"] == "delivering"
        by = "the person's first prompt"
        s.type_keys("What do you know so far?")
        time.sleep(0.5)
        s.press("Enter")
    s.wait_until(lambda: s.received_with(marker), 90, "startup context at the model")
    msgs = s.wait_until(  # the reply's ACK, found on screen or by the turn-end hook
        lambda: [m for m in s.history() if m["status"] == "acknowledged"], 60,
        "startup context acknowledged",
    )
    time.sleep(1.0)
    assert len(s.received_with(marker)) == 1
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(s._paths().db_path)
    try:
        through = [a.channel for a in store.attempts(msgs[0]["id"])]
    finally:
        store.close()
    assert (through == ["hook"]) == hooked, (
        through, s._paths().supervisor_log(s.name).read_text()[-3000:])  # handed once, never typed
    print(f"{agent_name}: startup context through {through}, at the model with {by}")


BIG_LINE = 'quotes "double" \'single\' back\\slash $(whoami) `tick` ${HOME} tab\tend ü ñ 中文 🚀'


def big_content(marker: str) -> str:
    lines = [f"{marker} line {i:03d}: {BIG_LINE}" for i in range(60)]
    text = "\n".join(lines)
    assert 4500 < len(text.encode()) < 10_000
    return text


def test_what_is_sent_arrives_as_sent(make_session: Make, agent_name: str) -> None:
    """One start, every way a message's content can go wrong on its way in (each
    check used to start the agent of its own: four starts for one path):

    - 20 acknowledged deliveries in a row: ready, typed, each ACK found, each at
      the model once, none lost, none doubled (test_repeated_deliveries was a
      start of its own for this: the same path, one more start per agent);
    - 60 lines of quotes, shell syntax, tabs and CJK/emoji, byte for byte, one message;
    - ``send --raw`` (hardening 7): the text as is, no quoting block, and refused
      from a webhook;
    - escape sequences, C0/C1 controls and a bracketed-paste end: none reach the agent;
    - a person's draft is never overwritten: the next message waits for the box;
    - kill -9 at ready is seen (test_agent_killed_mid_delivery_ends_in_one_state and
      test_message_sent_while_streaming_is_delivered_once_after_reply kill in the
      other two phases: issue 14.2's three).
    """
    s = make_session(agent_name)
    s.write_config("[limits]\nrate_per_minute = 100\n")  # 24 messages inside a minute
    s.start()
    st = s.wait_state("ready", timeout=90)
    print(f"{agent_name}: ready after {st['since'] - s.started_at:.2f}s ({st['explain']})")

    repeated_deliveries(s, agent_name)

    marker = tag()
    content = big_content(marker)
    res = s.send(content, "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    got = s.wait_received(marker)
    assert len(got) == 1, f"{len(got)} requests carried the multi-line message"
    # The one documented change: profiles whose agent expands pasted tabs.
    tabs = load_profile(agent_name).input.tabs_as_spaces
    expected = content.replace("\t", " " * tabs) if tabs else content
    assert expected in got[0], "content changed on its way to the model"

    s.wait_state("ready", timeout=90)
    marker = tag()
    content = f"raw {marker}: summarise the README in one line"
    res = s.send(content, "--raw", "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    got = s.wait_received(marker)
    assert len(got) == 1, f"{len(got)} requests carried the raw message"
    assert content in got[0] and "[agentwrap context" not in got[0]
    refused = s.send(f"raw {marker} from a webhook", "--raw", "--source", "webhook")
    assert refused.returncode == 77, refused.stderr

    s.wait_state("ready", timeout=90)
    marker = tag()
    evil = (
        f"{marker} before \x1b[31mRED\x1b[0m \x1b]0;pwned\x07 mid \x1b[201~ after\x08\x00\x9b31m end"
    )
    # Through stdin: argv cannot carry a NUL byte.
    res = s.cli("send", s.name, "-", "--wait", "--timeout", "90", input=evil)
    assert res.returncode == 0, f"{res.stdout}{res.stderr}"
    got = s.wait_received(marker)
    assert len(got) == 1
    assert "\x1b" not in got[0] and "\x9b" not in got[0] and "\x00" not in got[0]
    assert f"{marker} before RED  mid  after end" in got[0].replace("31m", "")

    s.wait_state("ready", timeout=90)
    check_draft_kept(s)
    kill_and_see_exit(s, "ready")


def check_draft_kept(s: AgentSession) -> None:
    """A person's draft in the box: a message sent meanwhile waits for it (it
    says why), is not typed over it, and goes once the box is empty."""
    draft, marker = f"my unsent draft {tag()}", tag()
    s.type_keys(draft)
    s.wait_state("draft", timeout=20)
    mid = s.send_id(f"queued behind the draft {marker}")
    s.wait_until(
        lambda: [q["waiting_because"] for q in s.cli_json("queue", s.name)]
        == ["draft in input box"], 30, "the message waiting for the draft",
    )
    assert draft in s.screen().replace("\n", "")
    assert not s.received_with(marker)
    s.press(*["BSpace"] * (len(draft) + 2))
    s.wait_until(lambda: s.received_with(marker), 60, "delivery after the draft was cleared")
    assert not s.received_with(draft)
    assert s.wait_until(
        lambda: s.message(mid)["status"] == "delivered", 30, "delivered state"
    )
    s.wait_state("ready", timeout=60)


def kill_and_see_exit(s: AgentSession, phase: str) -> None:
    """kill -9 of the agent is seen as ``exited`` (issue 14.2: kill -9 of a busy
    Gemini while agentwrap waited for an ACK went unseen for ~119 s). The time
    from the kill to ``exited`` is printed per agent and phase (figures for the
    README; a generous deadline here, never a timing assertion)."""
    from agentwrap.terminal.proctree import kill_tree

    pid = s.agent_pid()
    assert pid
    started = time.monotonic()
    kill_tree(pid, 9, grace=1.0)
    # 10 s: far above the ~0.1-0.6 s measured, far below the 119 s regression.
    s.wait_state("exited", timeout=10)
    print(f"EXIT-SEEN {s.agent} {phase}: {time.monotonic() - started:.2f} s")


def test_message_sent_while_streaming_is_delivered_once_after_reply(
    make_session: Make, agent_name: str
) -> None:
    s = make_session(agent_name)
    s.start()
    s.wait_state("ready", timeout=90)
    first, second = tag(), tag()
    res = s.send(f"[[slow: 8]] tell a long story {first}", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_state("busy", timeout=30)
    mid = s.send_id(f"out of band note {second}")
    s.wait_until(lambda: s.received_with(second), 120, "the out-of-band message at the model")
    time.sleep(2.0)
    assert len(s.received_with(second)) == 1
    assert len(s.received_with(first)) == 1
    reqs = [r for r in s.server.requests() if not r.side and r.user_text]
    t_first = next(r.time for r in reqs if first in (r.user_text or ""))
    t_second = next(r.time for r in reqs if second in (r.user_text or ""))
    assert t_second > t_first
    assert s.message(mid)["status"] == "delivered"

    # kill -9 while the model works on a message sent without --ack
    marker = tag()
    s.send(f"[[delay: 60]] keep busy {marker}")
    s.wait_until(lambda: s.received_with(marker), 90, "the message at the model")
    kill_and_see_exit(s, "busy")


ANSWER_NO = {
    "claude": ["Escape"],
    "codex": ["Escape"],
    "gemini": ["Escape"],
    "aider": ["n", "Enter"],
}


INSTRUCTION_FILE = {
    "claude": "CLAUDE.md",
    "codex": "AGENTS.md",
    "aider": "CONVENTIONS.md",
    "gemini": "GEMINI.md",
}


def test_never_ack_falls_back_to_instruction_file_without_typing_it_again(
    make_session: Make, agent_name: str
) -> None:
    """Typed delivery: a missing ACK proves nothing was read, so the message is
    written to the instruction file; it was submitted, so the model may have it,
    and it is never typed again (issue 35.2: typed two more times before).
    (Codex on its app-server proves receipt instead: test_codex_app_server_launch.py.)"""
    s = make_session(agent_name)
    s.write_config(
        "[run]\ncodex_app_server = false\n\n"
        "[delivery]\nbackoff_s = [0.5]\nfallback_after = 2\nack_timeout_s = 2\n"
        "notify_on_failure = false\n"
    )
    s.server.auto_ack = False
    s.start()
    s.wait_state("ready", timeout=90)
    marker = tag()
    res = s.send(f"deploy freeze until 5pm {marker}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 10, f"{res.returncode} {res.stdout}{res.stderr}"
    msg = next(m for m in s.history() if marker in m["content"] and m["source"] == "user")
    assert msg["status"] == "escalated" and msg["attempts"] == 1, msg
    if agent_name == "aider":
        # Aider reads an agentwrap-owned file given with --read at launch.
        from agentwrap.delivery.fallback import context_file

        where = context_file(s._paths().state_dir, s.name, INSTRUCTION_FILE[agent_name])
    else:
        where = s.workdir / INSTRUCTION_FILE[agent_name]
    text = where.read_text()
    assert "<!-- agentwrap:begin agentwrap" in text and marker in text
    assert len(s.received_with(marker)) == 1  # typed once; the notice does not repeat it
    s.wait_until(
        lambda: any("in the section between the 'agentwrap:begin agentwrap'" in t
                    for t in s.server.user_texts()), 90,
        "the fallback notice at the model",
    )
    if agent_name == "aider":
        # Live: the request that carried the notice carried the section too.
        bodies = [json.dumps(r.body) for r in s.server.requests() if not r.side]
        with_notice = [b for b in bodies if "agentwrap:begin agentwrap" in b and marker in b]
        assert with_notice, "the fallback section never reached an aider request"


def test_agent_killed_mid_delivery_ends_in_one_state(make_session: Make, agent_name: str) -> None:
    s = make_session(agent_name)
    s.start()
    s.wait_state("ready", timeout=90)
    marker = tag()
    # The sender asks for an ACK and waits for the end (issue 25.4).
    waiting = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "send", s.name, f"[[delay: 30]] slow one {marker}",
         "--ack", "--wait", "--timeout", "120", "--json"],
        env=s.env, cwd=s.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s.wait_until(lambda: s.received_with(marker), 60, "the message at the model")
    mid = next(m["id"] for m in s.history() if marker in m["content"])
    # agentwrap has seen the submission too (the model may hear of it first).
    s.wait_until(lambda: s.message(mid).get("phase") == "submitted", 30, "phase submitted")
    kill_and_see_exit(s, "awaiting_ack")
    msg = s.wait_until(
        lambda: (m := s.message(mid)) and m["status"] not in ("pending", "delivering") and m, 30,
        "a terminal state",
    )
    # The model received it (submission was proven) before the agent died:
    # delivered without its ACK, never "failed".
    assert msg["status"] == "delivered", msg
    assert "not acknowledged" in msg["detail"], msg
    assert len(s.received_with(marker)) == 1
    # ... and the sender who asked for the ACK can tell it never came: exit 15, not 0
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 15, (waiting.returncode, out, err)
    ended = json.loads(out)
    assert (ended["id"], ended["acknowledged"], ended["outcome"]) == (mid, False, "unacknowledged")


def test_pty_native_relay_delivers_then_exits_with_the_agents_code(
    make_session: Make, agent_name: str
) -> None:
    """pty backend in a terminal, through the native relay: an acknowledged
    delivery, then the wrapper exits with the agent's own exit code."""
    from .conftest import QUIT_KEYS, AnsweringTerminal

    s = make_session(agent_name)
    term = AnsweringTerminal(
        [sys.executable, "-m", "agentwrap", "run", "--backend", "pty", "--name", s.name, "--",
         *s.argv],
        s.env, s.workdir,
    )
    try:
        s.wait_state("ready", timeout=90)
        log = s._paths().supervisor_log(s.name)
        assert "pty relay: native" in log.read_text()
        marker = tag()
        res = s.send(f"relay check {marker}", "--ack", "--wait", "--timeout", "90")
        assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
        assert res.stdout.startswith("acknowledged"), res.stdout
        assert len(s.wait_received(marker)) == 1
        s.wait_state("ready", timeout=60)
        keys = {"C-c": b"\x03", "C-d": b"\x04"}
        for key in QUIT_KEYS[agent_name]:
            term.send(keys[key])
            time.sleep(0.4)
        code = term.wait_exit(timeout=60)
    finally:
        term.close()
    rec = next(r for r in s.cli_json("ls", "--all") if r["name"] == s.name)
    assert rec["state"] == "exited"
    assert code == rec["exit_code"], (code, rec)


def repeated_deliveries(s: AgentSession, agent_name: str) -> None:
    """20 acknowledged deliveries in a row: each acknowledged, none lost, none doubled."""
    markers = [tag() for _ in range(20)]
    for m in markers:
        res = s.send(f"update {m}", "--ack", "--wait", "--timeout", "90")
        assert res.returncode == 0, f"{m}: {res.stdout}{res.stderr}\n{s.screen()}"
        assert res.stdout.startswith("acknowledged"), res.stdout
    hist = [h for h in s.history() if any(m in h["content"] for m in markers)]
    first = sum(1 for h in hist if h["attempts"] == 1)
    acked = sum(1 for h in hist if h["status"] == "acknowledged")
    print(f"{agent_name}: first-attempt {first}/20, acknowledged {acked}/20")
    assert all(len(s.received_with(m)) == 1 for m in markers)
    assert acked == 20


def is_subsequence(wanted: list[str], seen: list[str]) -> bool:
    it = iter(seen)
    return all(any(s == w for s in it) for w in wanted)


def _permission_is_waiting_input_and_left_alone(s: AgentSession) -> tuple[str, str]:
    """The agent asks a permission: ``waiting_input`` decided by its dialog (or the
    app-server's request) with the question; a message sent meanwhile waits and
    nothing answers the dialog. Returns that message's id and marker."""
    s.wait_state("waiting_input", timeout=60)  # a hook's notification may say so first
    if on_app_server(s):  # Codex on agentwrap's app-server: the server's request is the question
        st = s.wait_until(lambda: (x := s.state())["rule"] == "structured:question" and x, 60,
                          "the app-server's request decides, with what it asks")
        assert st["question"] and st["question"]["source"] == "app-server", st
    else:
        st = s.wait_until(lambda: (x := s.state())["rule"].startswith("dialog:") and x, 60,
                          "the dialog on screen decides, with what it asks")
        assert "answer it in the terminal" in st["reason"], st
    assert st["question"] and st["question"]["kind"] == "permission", st
    marker = tag()
    mid = s.send_id(f"sent while a dialog is open {marker}")
    time.sleep(4.0)
    assert s.state()["state"] == "waiting_input"
    assert not s.received_with(marker)
    assert not (s.workdir / "tool_ran.txt").exists(), "something answered the dialog"
    return mid, marker


def test_state_watch_through_start_reply_dialog_exit(make_session: Make, agent_name: str) -> None:
    """`agentwrap state --watch --json` as a person would watch it, through a reply, a
    permission dialog left alone while a message waits (then answered No: the message
    goes in once), and the agent's exit."""
    import json
    import subprocess
    import threading

    from .conftest import QUIT_KEYS

    s = make_session(agent_name)
    s.start()
    watcher = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "state", s.name, "--watch", "--json"],
        env=s.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    seen: list[str] = []

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            seen.append(json.loads(line)["state"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # it watches once it has printed the state it found (its start takes seconds on
        # a loaded machine): what the session did before that, it never saw
        s.wait_until(lambda: seen, 60, "the watcher's first line")
        s.wait_state("ready", timeout=90)
        assert s.send("[[delay: 3]] [[reply: hello there]] say hi", "--wait").returncode == 0
        s.wait_until(lambda: "busy" in seen, 30, "busy")
        s.wait_state("ready", timeout=60)
        assert s.send("[[tool]] create the file", "--wait").returncode == 0
        mid, marker = _permission_is_waiting_input_and_left_alone(s)
        if on_app_server(s):  # the server asks ~0.8 s before the TUI draws its dialog, and
            # a key pressed before that is lost: a person answers the dialog they see
            s.wait_until(lambda: "Would you like to run" in s.screen(), 30, "the TUI's dialog")
        s.press(*ANSWER_NO[agent_name])
        s.wait_until(lambda: s.received_with(marker), 90, "delivery after the dialog closed")
        assert len(s.received_with(marker)) == 1
        assert s.wait_until(lambda: s.message(mid)["status"] == "delivered", 30, "delivered")
        s.wait_state("ready", timeout=60)
        s.press(*QUIT_KEYS[agent_name])
        s.wait_state("exited", timeout=60)
        watcher.wait(timeout=30)
    finally:
        watcher.kill()
    reader.join(timeout=5)
    print(f"{agent_name} states: {seen}")
    assert is_subsequence(["ready", "busy", "ready", "waiting_input", "ready", "exited"], seen), seen


TRUST_AGENTS = ("claude", "codex", "gemini")  # aider has no folder-trust dialog


@pytest.mark.parametrize("agent", TRUST_AGENTS)
def test_trust_dialog_is_waiting_input_until_opted_in(make_session: Make, agent: str) -> None:
    """Never answered silently: without --trust-folder the dialog stays, with a
    message; with it, agentwrap answers and the agent reaches ready. (Codex's
    dialog is its local TUI's: a project Codex has no trust decision for is
    launched as Codex's own, not on the app-server, test_codex_app_server_launch.py.)"""
    s = make_session(agent, trusted=False)
    s.start()
    st = s.wait_state("waiting_input", timeout=90)
    assert st["rule"] == "dialog:trust_folder", st
    assert "--trust-folder" in st["reason"], st
    time.sleep(3.0)
    assert s.state()["state"] == "waiting_input"  # nobody answered it

    t = make_session(agent, trusted=False)
    t.name = f"{agent}-trusting"
    # Gemini applies a trust decision by exiting with 199 for its launcher
    # process to restart it; the test env turns that launcher off, a person's
    # setup has it.
    t.env.pop("GEMINI_CLI_NO_RELAUNCH", None)
    t.start("--trust-folder")
    t.wait_state("ready", timeout=90)
