"""A start-up context's receipt, on every real agent (issue 35).

The previous session's handoff (here a person's edited ``next.md``) goes to a
new session on the channel its agent's table row says
(:data:`agentwrap.sessions.channels.START_CONTEXT`): the agent's session-start
hook where that hook's output is proven to reach the model's request, else
typed (with an ACK asked) once the agent is ready. Either way the receipt
(``continuity_delivered``, or the typed message ``delivered`` /
``acknowledged``) must be for what the model got: the model server's log says
whether the handoff reached the model. Qwen Code 0.15.10's interactive UI runs
its SessionStart hook and throws the output away: it was recorded delivered
and never reached the model.

And Cline's goal: its TaskStart payload has no prompt, so the handoff notes
took the goal from nowhere; the prompt is in the task's own history.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .agents import AGENT_NAMES, MORE_AGENTS
from .conftest import AgentSession
from .test_delivery_real import _startup_context

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def _bodies(s: AgentSession) -> list[str]:
    """Every main model request's body, as JSON text (a hook's context may sit in
    a system or an earlier user message: not only the person's last text)."""
    return [json.dumps(r.body, ensure_ascii=False) for r in s.server.requests()
            if not r.side and r.body is not None]


def _handoff(s: AgentSession) -> dict[str, Any]:
    from agentwrap.continuity.hooks import handoff_file, read_json

    return read_json(handoff_file(s._paths(), s.name))


def _receipt(s: AgentSession, data: dict[str, Any]) -> str:
    """What agentwrap recorded of the handoff having reached the model ("" for nothing)."""
    if data.get("channel") == "hook":
        return "delivered" if _handoff(s).get("delivered_at") else ""
    status = str(s.message(str(data["message"]))["status"])
    return status if status in ("delivered", "acknowledged") else ""


@pytest.mark.parametrize("agent", [*AGENT_NAMES, *MORE_AGENTS])
def test_a_startup_handoff_is_received_where_its_receipt_says(make_session: Make,
                                                             agent: str) -> None:
    from agentwrap.continuity.store import ContinuityStore, project_path
    from agentwrap.detect.profiles import load_profile
    from agentwrap.sessions.channels import start_context

    s = make_session(agent)
    marker = f"HANDOFF{uuid.uuid4().hex[:8]}"
    s.workdir.mkdir(parents=True, exist_ok=True)
    ContinuityStore(s._paths()).write_edited(
        project_path(s.workdir), f"Last session: refactored the parser. Marker {marker}.\n")
    s.start()
    s.wait_state("ready", "busy", timeout=120)
    data = s.wait_until(lambda: (d := _handoff(s)).get("channel") and d, 30, "the handoff")
    row = start_context(load_profile(agent))
    hooked = "hooks" in (s.state().get("channels") or [])
    assert data["channel"] == (row.channel if hooked else "typed"), (data, row)
    if data["channel"] == "hook":  # handed at the start; the model reads it with a prompt
        s.wait_until(lambda: _handoff(s).get("handed_at"), 60, "the handoff handed")
        s.wait_state("ready", timeout=60)
        s.type_keys("Tell me what you know so far")  # no "?": Gemini CLI opens its shortcuts
        time.sleep(0.5)
        s.press("Enter")
    got = s.wait_until(lambda: _receipt(s, data), 120, "the handoff's receipt")
    # the receipt is there: the model must have had the handoff
    s.wait_until(lambda: any(marker in b for b in _bodies(s)), 30,
                 f"the handoff ({got} through {data['channel']}) at the model")
    first = next(b for b in _bodies(s) if marker in b)
    assert first.count(marker) == 1, "handed over twice in one request"
    print(f"{agent}: handoff through {data['channel']} ({row.proof}), receipt {got}")


def test_clines_handoff_takes_its_goal_from_the_prompt(make_session: Make) -> None:
    """Cline's TaskStart says no prompt; its UserPromptSubmit does
    (``userPromptSubmit.prompt``): the handoff record's goal is the person's prompt."""
    from agentwrap.continuity.hooks import notes_file, read_json
    from agentwrap.continuity.store import ContinuityStore, project_path

    s = make_session("cline")
    s.start()
    s.wait_state("ready", timeout=120)
    goal = f"Tidy the parser module {uuid.uuid4().hex[:8]}"
    s.type_keys(goal)
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: any(goal in b for b in _bodies(s)), 60, "the prompt at the model")
    notes = s.wait_until(lambda: (n := read_json(notes_file(s._paths(), s.name))).get("goal")
                         and n, 30, "the goal in the handoff notes")
    assert goal in notes["goal"] and notes["prompts"] == 1, notes
    records = ContinuityStore(s._paths()).records
    rec = s.wait_until(lambda: (r := records(project_path(s.workdir))) and r[-1].goal and r[-1],
                       30, "the goal in the handoff record")
    assert goal in rec.goal, rec


@pytest.mark.parametrize("agent", MORE_AGENTS)
def test_queued_startup_context_reaches_the_model_once(make_session: Make, agent: str) -> None:
    """``run --context`` (what is queued when the agent starts) on the five CLIs
    test_delivery_real.py does not run: by the start hook only where it runs at launch
    and its output reaches the model, else typed; at the model once, acknowledged."""
    _startup_context(make_session(agent), agent)
