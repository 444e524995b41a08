"""Which signal wins: the precedence between what an agent says and what its screen shows.

A verdict is only as good as the keys it lets through (issue 37): ``ready``
means a message typed now is taken as a new prompt, ``waiting_input`` that the
dialog taking an answer's keys is on screen. An agent's own word (its hooks'
signal, its session file, its app-server) is fast but can be stale or early:
Claude Code's session file still says ``idle`` for a frame after Enter empties
the box while the spinner is already drawn, and it says ``waiting`` (and fires
PermissionRequest) about 0.5 s before the permission dialog is drawn; Copilot
CLI's turn-end hook comes ~0.7 s before its reply and idle footer. So the
agent's word is weighed against the screen by this one table, the same for
every agent; which of the signals an agent has (and in what order they are
consulted) is :func:`chain`.

Decided before the table, strongest first (:class:`~agentwrap.detect.detector.Detector`):

1. the process gone: ``exited``;
2. a question the agent published with its exact text (Codex's app-server):
   ``waiting_input`` at once, since its answer is a reply on that channel and
   needs no screen (:mod:`agentwrap.app_server.replies`); a question
   announced but not yet sent: ``waiting_input`` with nothing to answer;
3. a dialog the profile knows, on screen: ``waiting_input``, whatever any
   signal says (a turn-end hook while a dialog shows is still waiting);
4. an overlay the profile knows, on screen: ``unknown`` (never ready);
5. the agent's latest word (the hook's signal or the published state,
   whichever is newer): :data:`TABLE`, first row that applies;
6. the screen's rules, the quiet window, nothing.

``unknown`` is never ``ready``: no row turns an overlay, a missing input box
or an unexplained still screen into ``ready``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .profiles import Profile

#: How long an agent's "I am asking" may come before its dialog is drawn: the
#: signal is an *expectation* meanwhile (``busy``, nothing typed), not
#: ``waiting_input`` (Claude Code 2.1.332 draws its permission dialog 0.39-0.52 s
#: after its PermissionRequest hook and session file's "waiting"; twice that
#: and more on a loaded machine).
DIALOG_DUE_S = 2.0
#: How long an agent's "my turn is over" may come before its screen agrees (a
#: busy rule still matching, the screen still): the word is an *expectation*
#: meanwhile (``busy``, nothing typed). GitHub Copilot CLI 1.0.102 fires its
#: ``agentStop`` hook up to ~0.7 s before it draws the reply, and idles its
#: "Working" footer 2-3 s after the hook at a load of 15 (issue 37: a message
#: typed before went into the running turn; a 2 s bound let keys through under
#: "Working", then read busy again: a passing ready). After this the word wins:
#: a busy line the redraw left behind.
TURN_END_DUE_S = 8.0


class Source(str, enum.Enum):
    """Who said it."""

    HOOK = "hook"  # the agent's hook (agentwrap.sessions.signals)
    FILE = "file"  # a state the agent publishes (Claude's session file, Codex's app-server status)


class Claim(str, enum.Enum):
    """What the agent said."""

    IDLE = "idle"  # turn end, session file "idle"
    BUSY = "busy"  # prompt submitted, session file "busy"
    ASKS = "asks"  # permission prompt, session file "waiting"


class Seen(str, enum.Enum):
    """What the screen shows (tested in the order of :data:`TABLE`'s rows)."""

    DRAFT = "draft"  # text in the input box
    SPINNING = "spinning"  # a busy rule matches and the screen changed within quiet_ms
    DRAWING = "drawing"  # a busy rule matches (a still screen), the claim younger than TURN_END_DUE_S
    SUBMITTED = "submitted"  # text was seen in the box after the claim and is gone: a prompt went
    ANSWERED = "answered"  # a dialog was drawn after the claim and is gone: it was answered
    NO_BOX = "no-box"  # the profile can see its input box, and it is not on screen
    DUE = "due"  # the claim is younger than DIALOG_DUE_S (no dialog on screen: decided before)
    ANY = "any"


class Outcome(str, enum.Enum):
    """The verdict, or who decides instead."""

    READY = "ready"
    DRAFT = "draft"
    BUSY = "busy"
    WAITING = "waiting_input"
    OVERLAY = "overlay"  # unknown: something the profile does not know covers the box
    SCREEN = "screen"  # the claim says nothing now: the screen's rules decide


@dataclass(frozen=True)
class Row:
    claim: Claim
    seen: Seen
    outcome: Outcome
    why: str
    source: Source | None = None  # None: either source


#: The precedence, first matching row wins (claim, then screen facts in order).
TABLE: tuple[Row, ...] = (
    Row(Claim.IDLE, Seen.DRAFT, Outcome.DRAFT, "text in the input box"),
    Row(Claim.IDLE, Seen.SPINNING, Outcome.BUSY,
        "a busy rule matches on a moving screen: the idle word is stale (Enter was pressed) "
        "or the redraw has not come"),
    Row(Claim.IDLE, Seen.DRAWING, Outcome.BUSY,
        "a busy rule still matches: the turn's end is said before the screen agrees (Copilot's "
        "agentStop ~0.7 s before its reply is drawn): expected, nothing is typed till it does"),
    Row(Claim.IDLE, Seen.SUBMITTED, Outcome.SCREEN,
        "a prompt was typed and sent since: that idle word no longer says anything"),
    Row(Claim.IDLE, Seen.NO_BOX, Outcome.OVERLAY, "the input box is not on screen"),
    Row(Claim.IDLE, Seen.ANY, Outcome.READY, "the agent's own word that its turn is over"),
    Row(Claim.ASKS, Seen.ANSWERED, Outcome.SCREEN, "the dialog it announced was drawn since, and is gone"),
    Row(Claim.ASKS, Seen.NO_BOX, Outcome.OVERLAY,
        "it waits, with neither its input box nor a dialog the profile knows on screen: a picker"
        " (Claude Code says 'waiting' while its rewind picker is open)", Source.FILE),
    Row(Claim.ASKS, Seen.DUE, Outcome.BUSY,
        "it asks, and the dialog is not drawn yet: expected, nothing is typed till it is"),
    Row(Claim.ASKS, Seen.ANY, Outcome.WAITING,
        "it asks, in a dialog the profile cannot read: nothing is typed", Source.HOOK),
    Row(Claim.ASKS, Seen.ANY, Outcome.OVERLAY,
        "it waits, and no dialog the profile knows is on screen", Source.FILE),
    Row(Claim.BUSY, Seen.ANY, Outcome.BUSY, "the agent's own word that a turn runs"),
)


def resolve(source: Source, claim: Claim, seen: frozenset[Seen]) -> Row:
    """The first row of :data:`TABLE` for ``claim`` from ``source`` whose screen
    fact is in ``seen`` (``ANY`` always is)."""
    for row in TABLE:
        if row.claim is claim and (row.source is None or row.source is source) \
                and (row.seen is Seen.ANY or row.seen in seen):
            return row
    raise LookupError(f"no precedence row for {source.value} {claim.value}")  # pragma: no cover


def chain(profile: Profile, app_server: bool = False) -> tuple[str, ...]:
    """The signals ``profile``'s agent has, in the order they are consulted
    (the per-agent column of the precedence; ``app_server``: Codex run with
    ``--app-server``): the docs' table names them."""
    out = ["process"]
    if app_server:
        out.append("app-server question")
    if profile.dialogs:
        out.append("screen dialogs")
    if profile.overlays:
        out.append("screen overlays")
    word = []
    if profile.channels.hooks:
        word.append("hook signal")
    if profile.structured:
        word.append(f"published state ({profile.structured})")
    if app_server:
        word.append("app-server status")
    if word:
        out.append(" / ".join(word) + " (newest wins, by TABLE)")
    if profile.rules:
        out.append("screen rules")
    out.append(f"quiet {profile.quiet_ms} ms")
    return tuple(out)
