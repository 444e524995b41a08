"""Answers to the questions an agent asks: the whole feature in one place.

An agent asks (a permission dialog on its screen, a question told by a hook);
somebody answers: a person (``agentwrap answer``, HTTP, the page, a file in the
answer folder, :mod:`.folder`) or a rule of the person's policy. Every answer passes the same
checks (:mod:`.intake`), becomes a typed action (:mod:`.actions`), is stored
(:mod:`.store`), and the session's supervisor
types it with the agent's own keys (:mod:`.keys`) only while the same question
is open, or replies to the hook that asked (:mod:`.hook_questions`), or, through the
small :class:`~.keys.Replies` it owns, to the agent's own server whose request
the question came from (Codex's app-server, :mod:`agentwrap.app_server`, which
sits above this layer). The rules
(:mod:`.rules`) never approve what the deny-list (:mod:`.denylist`) calls
destructive, nor a command not read with certainty (:mod:`.certainty`); :mod:`.auto` is where a rule's decision has effects, and
:mod:`.telling` tells the person what waits for them; :mod:`.links` mints and checks the
signed, single-use links a notice carries to answer from a phone in one tap.

This layer sits between ``sessions`` (which wires it into a supervisor) and
``delivery``; reading the question off a screen stays in
:mod:`agentwrap.detect.question`. Importing the package is free: a hook
imports :mod:`.hook_questions` alone, within its start-up budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from . import hook_questions as hook_questions
    from .actions import AnswerAction as AnswerAction
    from .actions import AnswerStatus as AnswerStatus
    from .actions import DenyAnswer as DenyAnswer
    from .actions import HookAnswer as HookAnswer
    from .actions import OptionAnswer as OptionAnswer
    from .actions import from_json as from_json
    from .auto import AutoAnswer as AutoAnswer
    from .denylist import Where as Where
    from .denylist import destructive as destructive
    from .denylist import incomplete as incomplete
    from .folder import AnswerFolder as AnswerFolder
    from .hook_questions import HookQuestion as HookQuestion
    from .hook_questions import HookQuestions as HookQuestions
    from .hook_questions import announcement as announcement
    from .intake import AnswerIntake as AnswerIntake
    from .intake import AnswerResult as AnswerResult
    from .keys import Answerer as Answerer
    from .keys import Replies as Replies
    from .links import Claim as Claim
    from .links import LinkLedger as LinkLedger
    from .links import LinkMaker as LinkMaker
    from .links import LinksFor as LinksFor
    from .links import holds_back as holds_back
    from .links import load_or_create_key as load_or_create_key
    from .links import sign as sign
    from .links import verify as verify
    from .rules import LiveRules as LiveRules
    from .store import Answer as Answer
    from .store import AnswerStore as AnswerStore
    from .telling import Teller as Teller

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "actions": ("AnswerAction", "AnswerStatus", "DenyAnswer", "HookAnswer", "OptionAnswer",
                "from_json"),
    "auto": ("AutoAnswer",),
    "denylist": ("Where", "destructive", "incomplete"),  # the chat bridge refuses approvals
    "folder": ("AnswerFolder",),
    "hook_questions": ("HookQuestion", "HookQuestions", "announcement", "hook_questions"),
    "intake": ("AnswerIntake", "AnswerResult"),
    "keys": ("Answerer", "Replies"),
    "links": ("Claim", "LinkLedger", "LinkMaker", "LinksFor", "holds_back", "load_or_create_key",
              "sign", "verify"),
    "rules": ("LiveRules",),
    "store": ("Answer", "AnswerStore"),
    "telling": ("Teller",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
