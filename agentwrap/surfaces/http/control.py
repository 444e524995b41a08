"""What a person does with sessions from the dashboard (issue 26): watch each
one's screen live, start one from their list, stop one.

- ``GET /api/sessions/{name}/screen``: the screen the supervisor last based
  a verdict on, with its colours, as rows of styled runs
  (:mod:`agentwrap.terminal.styles`): text and a style, never an escape
  sequence; colours a palette number 0..15 or ``#rrggbb``, checked when read.
  The event stream says ``session.screen`` (with the new digest) when it
  changed, so a page fetches it again only then, and only for the session it
  shows.
- ``GET /api/launch`` and ``POST /api/sessions``: the sessions the person
  listed in ``[[dashboard.launch]]`` of their own config file, and starting
  one of them as ``run --detach`` does. The request names an entry, never a
  command or a folder: whoever holds a token (or a page that tricked a
  browser) can start only what is listed.
- ``POST /api/sessions/{name}/stop``: stop any session, as ``agentwrap stop``.
- ``GET /api/sessions/{name}/conversation``: the session's conversation in
  order (issue 42): prompts, the messages delivered with their ACK, replies,
  tool calls, questions and answers, as text (:mod:`agentwrap.service.conversation`).
- ``POST /api/sessions/{name}/dismiss``: forget an ended session (its record
  and last screen; its messages stay in the history), as ``agentwrap dismiss``.

The same bearer token as every ``/api`` route; its models are here with the
routes that use them (the rest of the API's are in :mod:`.models`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from ...config import LaunchChoice
from ...terminal.styles import Run, Screen
from . import models as m
from .addresses import Address, session_route
from .auth import require_token
from .routes import ERRORS, Svc, summary

router = APIRouter(prefix="/api", dependencies=[Depends(require_token)])

Palette = Annotated[int, Field(ge=0, le=15)]
Hex = Annotated[str, Field(pattern="^#[0-9a-f]{6}$")]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScreenRun(_Out):
    """Text in one style. Absent fields are the terminal's defaults."""

    text: str = Field(description="no control characters (they are shown as U+FFFD)")
    fg: Palette | Hex | None = Field(
        default=None, description="palette colour 0..15 (the viewer's theme), or #rrggbb")
    bg: Palette | Hex | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False
    strike: bool = False


class ScreenCursor(_Out):
    row: int
    col: int


class ScreenOut(_Out):
    session: str
    digest: str = Field(description="changes whenever the text does (session.screen events carry"
                        " it); empty for a plain screen")
    at: float = Field(description="when it was saved (epoch seconds; 0 if not known)")
    cols: int
    rows: int
    cursor: ScreenCursor
    title: str
    styled: bool = Field(description="false: the plain screen, without colours")
    lines: list[list[ScreenRun]] = Field(description="one list of runs per screen row")


class LaunchOut(_Out):
    name: str
    profile: str | None
    command: str | None
    args: list[str]
    cwd: str
    session: str | None


class LaunchList(_Out):
    choices: list[LaunchOut]
    configured: bool = Field(description="false: nothing listed in [[dashboard.launch]]")


class StartRequest(BaseModel):
    """``POST /api/sessions``: start one of the listed sessions."""

    model_config = ConfigDict(extra="forbid")

    launch: StrictStr = Field(min_length=1, max_length=200,
                              description="the name of a [[dashboard.launch]] entry")
    name: StrictStr | None = Field(default=None, min_length=1, max_length=64,
                                   description="session name (default: the entry's, or the"
                                   " agent's made unique)")


def screen_out(name: str, s: Screen) -> ScreenOut:
    return ScreenOut(session=name, digest=s.digest, at=s.at, cols=s.cols, rows=s.rows,
                     cursor=ScreenCursor(row=s.cursor[0], col=s.cursor[1]), title=s.title,
                     styled=s.styled, lines=[[_run(r) for r in row] for row in s.lines])


def _run(r: Run) -> ScreenRun:
    return ScreenRun(**r.to_json())


class ConversationEntry(_Out):
    """One entry of a conversation: text only (a page shows it as text)."""

    kind: str = Field(description="prompt (the person's), message (delivered by agentwrap),"
                      " reply, tool, question or answer")
    at: float = Field(description="when (seconds since the epoch)")
    text: str
    source: str = Field(description="where it was read: transcript, hook, screen, or queue"
                        " (agentwrap's own record of a delivered message)")
    tool: str = Field(description="a tool call's tool")
    target: str = Field(description="a tool call's command or path; a message's sender label")
    messageId: str = Field(description="a delivered message's id")
    status: str = Field(description="a delivered message's status")
    acked: bool | None = Field(description="a delivered message's ACK came (null: none asked)")
    channel: str


class ConversationOut(_Out):
    session: str
    source: str = Field(description="where the agent's side was read: transcript, hook,"
                        " screen (the last resort) or none")
    entries: list[ConversationEntry] = Field(description="oldest first")


def launch_out(c: LaunchChoice) -> LaunchOut:
    return LaunchOut(name=c.name, profile=c.profile, command=c.command, args=list(c.args),
                     cwd=c.cwd, session=c.session)


NOT_RUNNING: dict[int | str, dict[str, Any]] = {
    409: {"model": m.ApiError, "description": "no screen recorded yet"}}


@session_route(router, "GET", "/sessions/{name}/screen", response_model=ScreenOut,
               response_model_exclude_defaults=True, responses={**ERRORS, **NOT_RUNNING})
def get_screen(name: Address, svc: Svc) -> ScreenOut:
    """The session's screen as its supervisor last saw it, colours kept, as text
    and styles only (safe to show as text; no escape sequences)."""
    return screen_out(svc.session_name(name), svc.screen_view(name))


@router.get("/launch", response_model=LaunchList, responses=ERRORS)
def list_launch(svc: Svc) -> LaunchList:
    """What the dashboard may start: ``[[dashboard.launch]]`` of the user's config."""
    choices = svc.launch_choices()
    return LaunchList(choices=[launch_out(c) for c in choices], configured=bool(choices))


@router.post("/sessions", status_code=201, response_model=m.SessionSummary,
             responses={**ERRORS, 409: {"model": m.ApiError,
                                        "description": "the session name is taken"}})
def start_session(body: StartRequest, svc: Svc) -> m.SessionSummary:
    """Start a listed session detached (like ``agentwrap run --detach``), supervised."""
    rec = svc.start(body.launch, body.name, by="http")
    return m.SessionSummary(**summary(rec, 0))


@session_route(router, "POST", "/sessions/{name}/stop", response_model=m.SessionSummary,
               responses={**ERRORS, 409: {"model": m.ApiError,
                                          "description": "the session has ended already,"
                                          " or it runs on another host"}})
def stop_session(name: Address, svc: Svc) -> m.SessionSummary:
    """Stop the session's agent and its whole process tree (like ``agentwrap stop``)."""
    rec = svc.stop(name, by="http")
    return m.SessionSummary(**summary(rec, 0))


@session_route(router, "GET", "/sessions/{name}/conversation", response_model=ConversationOut,
               responses=ERRORS)
def get_conversation(
    name: Address, svc: Svc,
    limit: Annotated[int, Query(ge=1, le=2000, description="at most this many entries")] = 500,
) -> ConversationOut:
    """The session's conversation in order: the person's prompts, each delivered message
    where it landed with its ACK, the agent's replies and tool calls, from the best source its
    agent offers (its transcript, its hooks, the screen as the last resort)."""
    got = svc.conversation(name, limit=limit)
    return ConversationOut(session=got.session, source=got.source,
                           entries=[ConversationEntry(**e.to_json()) for e in got.entries])


@session_route(router, "POST", "/sessions/{name}/dismiss", response_model=m.SessionSummary,
               responses={**ERRORS, 409: {"model": m.ApiError,
                                          "description": "the session has not ended, or it"
                                          " runs on another host"}})
def dismiss_session(name: Address, svc: Svc) -> m.SessionSummary:
    """Forget an ended session: its record, state log and last screen (its messages stay in
    the history), like ``agentwrap dismiss``."""
    rec = svc.dismiss(name, by="http")
    return m.SessionSummary(**summary(rec, 0))
