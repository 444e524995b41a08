"""Delivery: queued messages into the agent's input, provably.

Here live the delivery engine (``engine``: window, batch, verified submit, ACK,
retry), the framing of a batch as one marked, quoted block (``framing``) and
the last resort, the marked section of the agent's instruction file and the
notifications about it (``fallback``). Imports point down: to ``detect``
(profiles, regions, states), ``queue`` (the store), ``terminal`` (snapshots)
and the foundation; never to ``sessions`` or ``surfaces``. The engine is
driven by a supervisor it is handed; that type is named only for the type
checker (see the import-linter contract in ``pyproject.toml``).

The engine's jobs, one module each: the typing window (``window``: may it
type now, and if not, why), what the screen proves (``evidence``), an ACK in
the agent's reply with the rows its TUI wrapped joined (``replies``), waiting
for a batch's ACK (``ack``), what one attempt came to (``outcome``), the
choice of the last resort (``escalation``) and what the engine needs of the
layer above, as protocols (``seams``). Beside the typing: which channel
carries the messages while the agent works (``choice``), handing them over
as text a reader shows the model itself (``handover``) and Aider's read file
(``read_channel``). What the person hears of, wherever they are (a question,
a failure, an exit, a silent host), goes through one seam (``notices``): the
desktop and the push services of ``[notify] urls``, sent through Apprise from
worker threads (``push``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from . import handover as handover
    from .choice import APP_SERVER as APP_SERVER
    from .choice import AgentState as AgentState
    from .choice import busy_channel_of as busy_channel_of
    from .choice import busy_reason as busy_reason
    from .choice import channel_for as channel_for
    from .engine import DeliveryEngine as DeliveryEngine
    from .engine import end_queue as end_queue
    from .fallback import context_file as context_file
    from .fallback import notify_desktop as notify_desktop
    from .fallback import prepare_context_file as prepare_context_file
    from .framing import as_pasted as as_pasted
    from .framing import entry as entry
    from .handover import CONSUMABLE_KINDS as CONSUMABLE_KINDS
    from .handover import MAX_TAKE as MAX_TAKE
    from .handover import AckRule as AckRule
    from .handover import Claimed as Claimed
    from .handover import ack_rule as ack_rule
    from .handover import claim as claim
    from .handover import compose as compose
    from .handover import started as started
    from .notices import NO_LINKS as NO_LINKS
    from .notices import AnswerLinks as AnswerLinks
    from .notices import Event as Event
    from .notices import Notice as Notice
    from .notices import Notices as Notices
    from .notices import event_notice as event_notice
    from .notices import redact as redact
    from .notices import waiting_notice as waiting_notice
    from .notices import when as when
    from .push import check_urls as check_urls
    from .push import notices_of as notices_of
    from .read_channel import FILE_NAME as FILE_NAME
    from .read_channel import ReadFileChannel as ReadFileChannel
    from .seams import AnswerDriver as AnswerDriver
    from .seams import Asking as Asking
    from .seams import DraftFlag as DraftFlag
    from .seams import Driver as Driver

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "choice": ("APP_SERVER", "AgentState", "busy_channel_of", "busy_reason", "channel_for"),
    "engine": ("DeliveryEngine", "end_queue"),
    "fallback": ("context_file", "notify_desktop", "prepare_context_file"),
    "framing": ("as_pasted", "entry"),
    "handover": (
        "AckRule",
        "CONSUMABLE_KINDS",
        "Claimed",
        "MAX_TAKE",
        "ack_rule",
        "claim",
        "compose",
        "handover",
        "started",
    ),
    "notices": (
        "AnswerLinks",
        "Event",
        "NO_LINKS",
        "Notice",
        "Notices",
        "event_notice",
        "redact",
        "waiting_notice",
        "when",
    ),
    "push": ("check_urls", "notices_of"),
    "read_channel": ("FILE_NAME", "ReadFileChannel"),
    "seams": ("AnswerDriver", "Asking", "DraftFlag", "Driver"),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
