"""A reply whose ACK the agent's TUI wraps onto the next row (issue 35.2).

Each TUI wraps its reply at its own width, under its own gutter: ``● ...
step 39 ACK`` on one row, ``  9d98ee19`` on the next. Searched one row at a
time, that ACK was never found: the message was typed again twice (the model
got it three times) and then written to the instruction file. Here each
agent runs in a pane narrow enough for its replies to wrap, typing only
(``--no-channels``: the screen is the only place the ACK can be found; the
hooks' whole-reply path is :mod:`tests.test_hooks`), and the model's reply is
made to break exactly between ``ACK`` and the token:

1. a ruler reply (``w01 w02 ...``) shows how many cells of text the TUI puts
   on a reply's first row;
2. the message asks for an ACK, and the model answers filler of that width
   less `` ACK``, then the token, which cannot fit and goes to the next row.

The model log shows the message exactly once, it ends acknowledged after
one attempt, and the screen shows the wrap it was found across.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable

import pytest

from agentwrap.message import Attempt

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]

#: Every agent whose TUI wraps its own reply text; the pane is this narrow.
AGENTS = ("copilot", "qwen", "cline", "kimi", "claude", "codex", "gemini")
COLS = 80
RULER = " ".join(f"w{n:02d}" for n in range(1, 60))


def attempts(s: AgentSession, mid: str) -> list[Attempt]:
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(s._paths().db_path)
    try:
        return store.attempts(mid)
    finally:
        store.close()


def tag() -> str:
    return f"E2E{uuid.uuid4().hex[:8]}"


def first_row_text(screen: str) -> str:
    """The ruler's first row as the TUI drew it, from ``w01`` to the last word
    on its row, once the whole reply is drawn below the echoed prompt (whose
    rows hold the ruler too, after ``[[reply:``); "" until then."""
    rows = screen.splitlines()
    at = next((i for i in range(len(rows) - 1, -1, -1)
               if "w01 w02" in rows[i] and "[[" not in rows[i]), None)
    if at is None or not any("w59" in x and "]]" not in x for x in rows[at:]):
        return ""
    return " ".join(re.findall(r"w\d\d", rows[at][rows[at].index("w01"):]))


def filler(width: int) -> str:
    """Words (letters only) exactly ``width`` characters long."""
    words: list[str] = []
    while len(" ".join(words)) < width:
        words.append("step")
    text = " ".join(words)
    extra = len(text) - width
    if extra:
        words[-1] = words[-1][: len(words[-1]) - extra] if len(words[-1]) > extra else ""
        text = " ".join(w for w in words if w)
    while len(text) < width:  # a dropped last word: lengthen the one before
        text += "s"
    return text


def wrapped_between(screen: str, token: str) -> bool:
    """Whether a row ends with ``ACK`` and the next one starts (past its gutter) with the token."""
    rows = screen.splitlines()
    return any(a.rstrip(" │┃").endswith("ACK") and b.strip(" │┃").startswith(token)
               for a, b in itertools.pairwise(rows))


@pytest.mark.parametrize("agent", AGENTS)
def test_a_wrapped_ack_is_found_and_the_message_typed_once(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    if agent == "codex":
        s.write_config("[run]\ncodex_app_server = false\n")  # typed, as every other here
    s.start("--no-channels", "--cols", str(COLS), "--rows", "40")
    wrapped_ack_once(s, agent, hooks=False)


#: The agents whose turn-end hook carries the reply (tests/test_hooks.py TURN_ENDS;
#: Codex's hooks need the person's bypass, Gemini's a root-owned settings chain).
REPLY_HOOKS = ("claude", "qwen", "copilot", "cline")


@pytest.mark.parametrize("agent", REPLY_HOOKS)
def test_with_the_agents_hooks_the_wrapped_ack_ends_the_message_once(
    make_session: Make, agent: str
) -> None:
    """The same with the agent's hooks: the turn-end hook reads the ACK in the
    whole reply and ends the typed batch, or the screen search finds it first;
    either way one attempt, acknowledged once, typed once."""
    s = make_session(agent)
    s.start("--cols", str(COLS), "--rows", "40")
    wrapped_ack_once(s, agent, hooks=True)


def wrapped_ack_once(s: AgentSession, agent: str, *, hooks: bool) -> None:
    """The ruler, then the wrapped ACK: typed once, acknowledged once (on screen,
    or with ``hooks`` by the turn-end hook too)."""
    s.wait_state("ready", timeout=120)

    # 1. how wide a reply's first row is
    res = s.send(f"[[reply: {RULER}]]", "--no-ack", "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    width = len(s.wait_until(lambda: first_row_text(s.screen()), 60, "the ruler reply on screen"))
    s.wait_state("ready", timeout=60)
    assert 20 < width < COLS, s.screen()

    # 2. the ACK reply: the token cannot fit on the row "ACK" ends
    marker = tag()
    res = s.send(f"[[ack-after: {filler(width - 4)}]] wrap check {marker}", "--ack", "--wait",
                 "--timeout", "120")
    screen = s.screen()
    print(f"{agent}: reply rows {width} cells; screen at the end:\n{screen}")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{screen}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    assert len(s.wait_received(marker)) == 1, "typed more than once"
    msg = next(m for m in s.history() if marker in m["content"])
    assert msg["status"] == "acknowledged" and msg["attempts"] == 1, msg
    (attempt,) = attempts(s, msg["id"])
    token = attempt.batch_id
    assert attempt.outcome == "acknowledged", attempt
    by_hook = attempt.evidence.endswith("acknowledged (seen) through hook")
    print(f"{agent}: acknowledged {'by the turn-end hook' if by_hook else 'on screen'}")
    assert f"ACK {token}" in attempt.evidence or (hooks and by_hook), attempt
    # the reply as drawn (a hook may end the batch before the TUI has drawn it all)
    s.wait_until(lambda: wrapped_between(s.screen(), token), 30,
                 f"the reply wrapped between ACK and {token}")
