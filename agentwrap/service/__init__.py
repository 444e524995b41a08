"""The application service: the one path from every surface to the store.

Surfaces (the CLI, the HTTP API, MCP tools, hooks and feedback watchers) are
thin adapters over :class:`Service`: they parse, call one method and print.
Whatever must hold for every surface is decided here, once: the store
validates content, applies limits and honours idempotency keys; the service
adds what needs the *session* (does it exist and still run, how will the
message be typed, may this source have text typed as is), the audit line of
every accepted or cancelled message, and waking the session's supervisor once
the message is stored. Readers get typed answers (the queue with why each
message waits, history with attempts, sessions with their pending counts) and
the event bus (:mod:`agentwrap.events`): what happened, in order, and a way to
wait for the next thing without polling.

:meth:`Service.open` builds the store and registry from :class:`Paths` and the
user's config; the plain constructor takes them ready-made (tests, a server
holding its own).

:class:`Service` (:mod:`.api`) is one object for the surfaces; each of its
jobs is a module of its own, which it delegates to:

* :mod:`.sending`: admission (session, trust, kind, an agent's flow limits),
  storing, the audit line and the wake-up; cancelling;
* :mod:`.hand_over`: messages a reader takes itself (MCP tools, hooks, the
  SessionStart context) and the agent's acknowledgement;
* :mod:`.reading`: messages, attempts, a session's queue and why each waits;
* :mod:`.sessions`: the sessions' records and screens, starting and stopping;
* :mod:`.answering`: answers to the questions agents ask; :mod:`.links`: answering
  from a one-tap link, checked against the open question, the rules and the deny-list;
* :mod:`.takeover`: a page's live terminal of a session and taking over its keyboard;
* :mod:`.conversation`: a session's whole conversation in order (the messages
  delivered with their ACK, the agent's replies and tool calls from its best source);
* :mod:`.hosts`: the hosts of a shared store, and forgetting one gone for good;
* :mod:`.remote`: what only a session's own host can do, asked of it (the hub's view);
  :mod:`.remote_terminal`: another host's pane on the hub's page, watched and typed into;
* :mod:`.events`: waiting on the event bus;
* :mod:`.moving`: moving the store to another (SQLite <-> PostgreSQL);
* :mod:`.views` and :mod:`.profiles`: the typed answers, the parsed profiles.
"""

from typing import TYPE_CHECKING

from ..sessions.registry import SessionRecord, Transition
from .api import Service
from .events import RECHECK_S
from .hand_over import ACK_STATUSES, MAX_NOTE_CHARS
from .sending import AGENT_FLOW_MAX_AGE_S, AGENT_MAX_DEPTH, AGENT_SEND_WINDOW_S, AGENT_SENDS
from .views import HistoryEntry, QueueView, Sent, SessionView, Waiting

if TYPE_CHECKING:  # at run time: __getattr__, on first use
    from .conversation import Conversation as Conversation
    from .hosts import HostView as HostView
    from .moving import MoveReport as MoveReport
    from .moving import migrate as migrate_store
    from .moving import place as store_place

#: Names of :mod:`.moving` (the store's migration, with both backends' code) and
#: :mod:`.hosts`, imported on first use: every command and a hook import this
#: package, only ``agentwrap store migrate`` moves a store and ``hosts`` lists
#: them (issue 23: ~12 ms of each start).
_LATER = {"MoveReport": ("moving", "MoveReport"), "migrate_store": ("moving", "migrate"),
          "store_place": ("moving", "place"), "HostView": ("hosts", "HostView"),
          "Conversation": ("conversation", "Conversation")}


def __getattr__(name: str) -> object:
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attr = _LATER[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


__all__ = [
    "ACK_STATUSES", "AGENT_FLOW_MAX_AGE_S", "AGENT_MAX_DEPTH", "AGENT_SENDS",
    "AGENT_SEND_WINDOW_S", "MAX_NOTE_CHARS", "RECHECK_S", "Conversation", "HistoryEntry", "HostView", "MoveReport",
    "QueueView", "Sent", "Service", "SessionRecord", "SessionView", "Transition", "Waiting",
    "migrate_store", "store_place",
]
