"""Questions an agent's own hook reported: the exact text, and a rule's decision.

The screen shows a permission dialog or an AskUserQuestion cut to the
terminal's width: a long command ends at the edge, an option's description
wraps or is dropped. Claude Code and Codex run a ``PermissionRequest`` hook
just before they open such a dialog (Copilot CLI its ``permissionRequest`` for
every request, asked or not: its text only, see
:data:`agentwrap.surfaces.hooks.protocol.TEXT_ONLY_QUESTIONS`), with the exact request as JSON
(``tool_name``, ``tool_input``: the command, the file, AskUserQuestion's
``questions`` with headers, options, descriptions, ``multiSelect``); Gemini
CLI only notifies (``Notification`` ``ToolPermission``, ``details.command``), which
gives the exact text but can never answer. So:

* the hook (``agentwrap hook AGENT PermissionRequest``) keeps what it was told
  in ``<runtime>/<session>.question.json`` (0600, replaced atomically: the
  latest request is all there is) with :func:`write_question`, and wakes the
  supervisor;
* when an ``[[answer_rules]]`` rule decides a permission request (the same pure
  :func:`~agentwrap.answers.rules.decide` the supervisor uses, the built-in
  deny-list included), the hook answers it itself (:func:`hook_decision`): the
  dialog never opens. It keeps the answer in the answers table first (the
  supervisor only looks now and then, and by its next look the tool the answer
  allowed may have run), and leaves the request to the dialog when it cannot,
  or when the launch registered it to run in the background (Claude without
  rules at launch: the agent ignores what such a hook prints, so the answer
  would be claimed and never given; the supervisor's rules, read again when the
  config changes, give it on the screen). A veto of the built-in deny-list, an ``ask`` rule, or an
  option that says neither yes nor no leave it to the person: the hook says
  nothing and the dialog opens as usual;
* the supervisor's detector still decides from the screen that a dialog is
  open and where the cursor is; :class:`HookQuestions` only swaps in the exact
  fields when the hook's request is the dialog on screen (same tool, the
  screen's command a cut of the hook's, the same question texts), and keeps
  the screen's question id, so an answer given before the hook's text arrived
  is not made stale. A request no dialog followed, or one for another dialog,
  is ignored. The supervisor announces the hook's own answers
  (:meth:`HookQuestions.take_decided`) like a typed automatic answer.

A hook never waits for a remote answer: an agent held by its hook shows no
dialog at all, so the person at the terminal could not answer either. (A
``hook_wait_s`` would have to give up before the agent's hook timeout and
then let the dialog open; it is not built.)

Nothing here is imported by a hook that does not need it: this module loads
only the question's dataclasses; the config and the policy are imported when
the user's config has answer rules at all.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents.all_agents import AGENTS, get
from ..datagram import wake
from ..detect.question import Item, Option, Question, question_id
from ..paths import Paths, ReplacedFile, check_session_name, write_private

if TYPE_CHECKING:  # the hook imports these only when rules exist
    from ..config import AnswerRule
    from .rules import Decision

#: The tool a hook names, as the profile's dialog names it on screen (answer rules
#: match ``tool`` against one name, whichever way the question was read): each
#: agent's ``tool_names`` (:mod:`agentwrap.agents`).
TOOL_NAMES: dict[str, dict[str, str]] = {
    a.name: dict(a.tool_names) for a in AGENTS.values() if a.tool_names is not None}
#: A profile whose permission dialog gives one tool name for every request.
ONE_TOOL = {a.name: a.one_tool for a in AGENTS.values() if a.one_tool}
ASK_TOOL = "AskUserQuestion"
#: Agents whose hook tells every request, asked or not (Copilot CLI: the read-only
#: ``cat`` it ran unasked; :data:`agentwrap.surfaces.hooks.protocol.TEXT_ONLY_QUESTIONS`):
#: their latest request may be a call no dialog followed, so it says nothing against
#: the dialog on screen.
EVERY_REQUEST = frozenset(a.name for a in AGENTS.values() if a.every_request)
#: A hook's request counts for a dialog first seen at most this long after it.
FRESH_S = 60.0
#: A dialog the hook has not (yet) told about is left to the hook this long (it may
#: still be starting: the agent draws the dialog while its hook runs) ...
HOOK_START_S = 3.0
#: ... and what the hook writes while it decides (its rules exist). A hook that said
#: it decides (or decided) holds the dialog at most this long: one that died
#: half-way, or an agent that ignored its answer, leaves it to the person again.
PENDING = "pending"
HOLD_MAX_S = 10.0
#: What a hook's output may say to the model when it refuses (one short line).
MAX_REASON = 300
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class HookQuestion:
    """One request as a hook reported it (see the module doc)."""

    agent: str
    event: str
    kind: str  # "permission" or "choice" (AskUserQuestion)
    tool: str  # as the screen names it
    tool_name: str  # as the hook named it
    command: str | None
    items: tuple[Item, ...]
    at: float
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    decision: str = ""  # "allow" | "deny" | PENDING | "" (left to the person)
    rule: str = ""
    reason: str = ""
    cwd: str = ""  # the agent's directory (the payload's): the project, for the deny-list

    @property
    def id(self) -> str:
        return question_id(f"hook:{self.event}", self.items, self.tool, self.command)

    def question(self) -> Question:
        """As a :class:`Question` (for the policy, and to show)."""
        return Question(id=self.id, kind="choice" if self.kind == "choice" else "permission",
                        title=self.tool, questions=self.items, tool=self.tool,
                        command=self.command, dialog=f"hook:{self.event}", source="hook")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tool_input"] = dict(self.tool_input)
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> HookQuestion:
        q = Question.from_json({"id": "", "kind": "permission", "title": "",
                                "questions": data.get("items", [])})
        fields = {k: data[k] for k in HookQuestion.__dataclass_fields__ if k in data}
        return HookQuestion(**{**fields, "items": q.questions})


# --- from a hook's payload -----------------------------------------------------------------


def from_payload(agent: str, event: str, payload: Mapping[str, Any],
                 now: float | None = None) -> HookQuestion | None:
    """The request in a ``PermissionRequest`` payload (or Gemini's ``ToolPermission``
    notification), or None (nothing usable)."""
    spec = get(agent)
    if spec is not None and spec.notification_details is not None:
        return _from_notification(spec.name, spec.notification_details, event, payload, now)
    name = payload.get("tool_name", payload.get("toolName"))  # Copilot: camelCase
    tool_input = payload.get("tool_input", payload.get("toolInput"))
    if not isinstance(name, str) or not name or not isinstance(tool_input, dict):
        return None
    at = time.time() if now is None else now
    if name == ASK_TOOL:
        items = _items(tool_input.get("questions"))
        if not items:
            return None
        return HookQuestion(agent, event, "choice", ASK_TOOL, name, None, items, at, tool_input)
    tool = ONE_TOOL.get(agent) or TOOL_NAMES.get(agent, {}).get(name, name)
    command = _command(tool_input)
    asked = Item(question=str(tool_input.get("description") or f"Allow {name}?")[:500])
    cwd = payload.get("cwd")
    return HookQuestion(agent, event, "permission", tool, name, command, (asked,), at, tool_input,
                        cwd=cwd if isinstance(cwd, str) else "")


def _from_notification(agent: str, known: Mapping[str, tuple[str, str]], event: str,
                       payload: Mapping[str, Any], now: float | None) -> HookQuestion | None:
    """An agent that tells its confirmation only as a ``ToolPermission`` notification
    (Gemini CLI), sent as its dialog opens (``details``: the exact command or file;
    ``known``: its ``details.type`` -> the tool its dialog names and the field that
    holds what the screen shows after it). A notification cannot answer, so this is
    text only: no decision is ever taken from it."""
    details = payload.get("details")
    if payload.get("notification_type") != "ToolPermission" or not isinstance(details, dict):
        return None
    tool, key = known.get(str(details.get("type")), ("", ""))
    command = details.get(key) if key else None
    if not tool or not isinstance(command, str) or not command:
        return None
    asked = Item(question=str(details.get("title") or payload.get("message") or "")[:500])
    at = time.time() if now is None else now
    return HookQuestion(agent, event, "permission", tool, tool, command, (asked,), at,
                        {k: v for k, v in details.items() if isinstance(v, (str, int, bool))})


def _command(tool_input: Mapping[str, Any]) -> str | None:
    for key in ("command", "file_path", "notebook_path", "url", "path"):
        value = tool_input.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            import shlex  # an argv list (rare): not every hook run pays for it

            return shlex.join(value)
        if isinstance(value, str) and value:
            return value
    return None


def _items(raw: Any) -> tuple[Item, ...]:
    if not isinstance(raw, list):
        return ()
    items = []
    for q in raw:
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            return ()
        options = tuple(
            Option(label=str(o.get("label", "")), description=str(o.get("description", "")),
                   number=n)
            for n, o in enumerate(q.get("options") or [], start=1) if isinstance(o, dict)
        )
        items.append(Item(question=q["question"], header=str(q.get("header", "")),
                          options=options, multiSelect=bool(q.get("multiSelect", False))))
    return tuple(items)


# --- the file ----------------------------------------------------------------------------


def question_file(paths: Paths, session: str) -> Path:
    return paths.runtime_dir / f"{check_session_name(session)}.question.json"


def write_question(paths: Paths, session: str, hq: HookQuestion) -> Path | None:
    """Keep ``hq`` as the session's latest hook question (0600, atomic) and wake
    its supervisor; None when there is no runtime dir (no supervisor to read it)."""
    path = question_file(paths, session)
    if not path.parent.is_dir():
        return None
    write_private(path, json.dumps(hq.to_json(), ensure_ascii=False).encode("utf-8"))
    wake(paths, session)
    return path


def read_question(paths: Paths, session: str) -> HookQuestion | None:
    try:
        data = json.loads(question_file(paths, session).read_text(encoding="utf-8"))
        return HookQuestion.from_json(data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError, KeyError):
        return None


# --- the hook's decision -------------------------------------------------------------------


def rules_for(paths: Paths, profile: str, cwd: Path) -> tuple[AnswerRule, ...]:
    """The user's answer rules for ``profile`` (none without a user config that
    names them: then neither the config's code nor TOML is loaded)."""
    try:
        if b"answer_rules" not in paths.config_file.read_bytes():
            return ()
    except OSError:
        return ()
    from ..config import load_config

    return load_config(paths, cwd).for_profile(profile).answer_rules


def hook_decision(hq: HookQuestion, profile: str,
                  rules: Sequence[AnswerRule]) -> tuple[str, Decision | None]:
    """``("allow" | "deny" | "", decision)`` for a permission request: what the
    hook answers (``""``: nothing, the dialog opens). An option is "allow" when it
    is the first one or its label starts with "yes", "deny" when it starts with
    "no"; any other option is left to the screen, where it can be picked."""
    if hq.kind != "permission" or not rules:
        return "", None
    from .denylist import Where
    from .rules import decide

    # the command runs where the agent is (a "workdir" it names, from there)
    workdir = hq.tool_input.get("workdir")
    where = Where.of(hq.cwd, workdir if isinstance(workdir, str) else None) if hq.cwd else None
    decision = decide(hq.question(), profile, rules, where=where)
    if decision is None or decision.answer is None:
        return "", decision
    if decision.answer.get("deny"):
        return "deny", decision
    option = decision.answer.get("option")
    label = str(option).strip().lower()
    if option == 1 or label == "1" or label.startswith("yes"):
        return "allow", decision
    if label.startswith("no"):
        return "deny", decision
    return "", decision


def decided(hq: HookQuestion, behavior: str, decision: Decision) -> HookQuestion:
    return replace(hq, decision=behavior, rule=decision.rule,
                   reason=decision.reason[:MAX_REASON])


# --- the supervisor's side -------------------------------------------------------------


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().rstrip("…").rstrip(".").strip()


def matches(hq: HookQuestion, q: Question) -> bool:
    """Whether the dialog on screen (``q``) shows the hook's request ``hq``."""
    if hq.kind == "choice":
        if q.tool != ASK_TOOL:
            return False
        asked = {_norm(i.question) for i in hq.items}
        return any(_norm(i.question) in asked for i in q.questions if i.question)
    if q.kind != "permission" or (q.tool and q.tool != hq.tool):
        return False
    if not q.command:
        return True
    if not hq.command:
        return False
    shown, exact = _norm(q.command), _norm(hq.command)
    if q.command_unsure:  # read from wrapped lines: where its spaces were is not known
        shown, exact = _SPACE.sub("", shown), _SPACE.sub("", exact)
    return bool(shown) and (exact.startswith(shown) or exact.endswith(shown))


def merged(q: Question, hq: HookQuestion) -> Question:
    """``q`` with the hook's exact fields; the screen's id, cursor and numbering kept."""
    if hq.kind != "choice":
        return replace(q, command=hq.command or q.command, tool=q.tool or hq.tool,
                       source="hook", command_unsure="" if hq.command else q.command_unsure)
    by_text = {_norm(i.question): i for i in hq.items}
    items = []
    for item in q.questions:
        exact = by_text.get(_norm(item.question))
        if exact is None:
            items.append(item)
            continue
        descriptions = {_norm(o.label): o.description for o in exact.options}
        options = tuple(replace(o, description=descriptions.get(_norm(o.label), o.description))
                        for o in item.options)
        items.append(replace(item, question=exact.question, header=exact.header or item.header,
                             multiSelect=exact.multiSelect, options=options))
    return replace(q, questions=tuple(items), source="hook")


def disagreeing(q: Question, hq: HookQuestion) -> Question:
    """``q`` as read off the screen, unsure when the agent's fresh request for a
    dialog of the same tool says another command: one of the two texts was misread
    (a tip taken for the command, issue 35), or the request is another call's; either
    way the screen's text is no certainty a rule may approve on. Any other request
    (another kind, another tool, one of :data:`EVERY_REQUEST`'s) may be another
    call's: ``q`` as it is."""
    if q.kind != "permission" or hq.kind != "permission" or (q.tool and q.tool != hq.tool) \
            or q.command_unsure or hq.agent in EVERY_REQUEST:
        return q
    return replace(q, command_unsure="the command on screen is not the one the agent's hook"
                   " was asked about")


class HookQuestions:
    """The supervisor's view of a session's hook questions: :meth:`refine` for
    the detector (:class:`~agentwrap.detect.detector.QuestionSource`),
    :meth:`take_decided` for the announcements. Requests written before
    ``since`` (this launch's start) are another session's."""

    def __init__(self, paths: Paths, session: str, since: float = 0.0) -> None:
        self.path = question_file(paths, session)
        self.paths, self.session, self.since = paths, session, since
        self._file = ReplacedFile(self.path, lambda: read_question(paths, session))
        self._paired: dict[str, float] = {}  # screen question id -> its hook request's "at"
        self._announced: tuple[float, str] | None = None
        self._opened: dict[str, float] = {}  # dialog id -> first asked about (monotonic)

    def latest(self) -> HookQuestion | None:
        hq = self._file.read()
        return hq if hq is not None and hq.at >= self.since else None

    def refine(self, q: Question) -> Question:
        """``q`` (read off the screen) with the exact fields of the hook's request,
        when that request is this dialog. A request pairs with a dialog only within
        :data:`FRESH_S` of being written (one no dialog followed goes stale), then
        stays paired while the dialog is open, however long."""
        hq = self.latest()
        if hq is None or q.source == "hook":
            return q
        if self._paired.get(q.id) != hq.at:
            if time.time() - hq.at > FRESH_S:
                return q
            if not matches(hq, q):
                return disagreeing(q, hq)
            if len(self._paired) > 64:
                self._paired.clear()
            self._paired[q.id] = hq.at
        return merged(q, hq)

    def holds(self, q: Question) -> bool:
        """Whether the agent's hook may still answer the permission dialog ``q``
        itself, so the supervisor's own answer rules must not type into it yet:
        the hook said it decides (PENDING) or decided, less than :data:`HOLD_MAX_S`
        ago, or has not told about this dialog yet and it opened less than
        :data:`HOOK_START_S` ago. Claude Code
        draws the dialog while its PermissionRequest hook runs: whoever answers
        first wins, and a rule's answer must come through one of them only."""
        if q.kind != "permission":
            return False
        hq = self.latest()
        if hq is not None and (self._paired.get(q.id) == hq.at
                               or (time.time() - hq.at <= FRESH_S and matches(hq, q))):
            return hq.decision != "" and time.time() - hq.at < HOLD_MAX_S
        now = time.monotonic()
        if len(self._opened) > 64:
            self._opened.clear()
        return now - self._opened.setdefault(q.id, now) < HOOK_START_S

    def take_decided(self) -> HookQuestion | None:
        """The hook's latest own answer, once (None: none new)."""
        hq = self.latest()
        if hq is None or hq.decision not in ("allow", "deny"):
            return None
        key = (hq.at, hq.id)
        if key == self._announced:
            return None
        self._announced = key
        return hq


def announcement(session: str, hq: HookQuestion) -> str:
    what = " ".join(x for x in (hq.tool, hq.command or "") if x)
    verb = "approved" if hq.decision == "allow" else "refused"
    return f"agentwrap: {session}: {verb} {what} by rule {hq.rule!r} (through the agent's hook)"


__all__ = [
    "EVERY_REQUEST", "FRESH_S", "HookQuestion", "HookQuestions", "announcement", "decided",
    "disagreeing", "from_payload", "hook_decision", "matches", "merged", "question_file",
    "read_question", "rules_for", "write_question",
]
