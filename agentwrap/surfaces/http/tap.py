"""The page a one-tap answer link opens (``/tap/TOKEN``): the question again, and one button.

A GET shows what the link answers (the session, the exact command, every
option, the one this link picks) and changes nothing: a phone's link preview,
a mail scanner or a prefetch may open it. The answer is a POST from that page,
its form carrying the signed token (the token is the capability: no cookie,
no login), refused when the request comes from another origin (its
``Origin``, or ``Sec-Fetch-Site: cross-site``). The checks and the answer are
the service's (:mod:`agentwrap.service.links`); this module only renders them
as HTML, every value escaped, under the dashboard's Content-Security-Policy,
with a status code that says the outcome: 200 answered (or would answer),
202 taken but not yet typed, 403 forged or refused, 409 used or stale, 410
expired or closed.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from ...answers.actions import AnswerStatus
from ...config import load_config
from ...errors import AgentwrapError, AnswerLinkRefused, NoOpenQuestion, StaleAnswer
from ...service import Service
from ...service.links import LinkView
from .dashboard import SECURITY_HEADERS
from .pool import ServicePool

router = APIRouter(include_in_schema=False)

STATUS = {"forged": 403, "refused": 403, "origin": 403, "used": 409, "stale": 409,
          "expired": 410, "closed": 410}
#: how long the POST waits for the agent's dialog to close before answering 202
APPLY_WAIT_S = 10.0

e = html.escape
#: the dashboard's headers, but ``same-origin`` referrers: with ``no-referrer`` a
#: browser's POST from the page says ``Origin: null``, which cannot be told from
#: a sandboxed foreign page's (the token in the address never leaves this origin)
HEADERS = {**SECURITY_HEADERS, "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}


def _page(title: str, body: str, status: int) -> HTMLResponse:
    doc = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<meta name="robots" content="noindex">
<meta name="color-scheme" content="light dark">
<title>{e(title)} · agentwrap</title>
<link rel="stylesheet" href="../static/tap.css">
</head>
<body>
<main class="tap">
<h1>{e(title)}</h1>
{body}
</main>
</body>
</html>
"""
    return HTMLResponse(doc, status_code=status, headers=HEADERS)


def _refused(exc: AnswerLinkRefused, view: LinkView | None = None) -> HTMLResponse:
    body = f'<p id="tap-result" class="result error" data-reason="{e(exc.reason)}">{e(exc.message)}</p>'
    if exc.hint:
        body += f'<p class="hint">{e(exc.hint)}</p>'
    if view is not None and view.question is not None and view.question.id == view.claim.question_id:
        body += _question(view, button=False)
    return _page("Nothing answered", body, STATUS.get(exc.reason, 403))


def _question(view: LinkView, *, button: bool, token: str = "") -> str:
    claim, q = view.claim, view.question
    parts = [f'<p class="session">Session <b id="tap-session">{e(claim.address)}</b></p>']
    if q is not None:
        item = q.questions[0] if q.questions else None
        parts.append(f'<section id="tap-question" class="question" data-question="{e(q.id)}">')
        parts.append(f'<p class="q-title">{e(q.title)}</p>')
        if q.command:
            parts.append(f'<pre id="tap-command" class="command">{e(q.command)}</pre>')
        if item is not None:
            parts.append(f'<p class="q-text">{e(item.question)}</p><ol class="options">')
            for o in item.options:
                choice = str(o.number) if o.number is not None else o.label
                mark = ' class="chosen"' if choice == claim.choice else ""
                parts.append(f"<li{mark}>{e(_label(o.number, o.label))}</li>")
            parts.append("</ol>")
        parts.append("</section>")
    if button:
        what = "Deny" if claim.deny else claim.label
        css = "deny" if claim.deny else "approve"
        parts.append(
            '<form method="post" action="" class="tap-form">'
            f'<input type="hidden" name="token" value="{e(token)}">'
            f'<button id="tap-button" class="{css}" type="submit">{e(what)}</button></form>'
            '<p class="hint">One tap answers; this link then works no more.</p>')
    return "\n".join(parts)


def _label(number: int | None, label: str) -> str:
    return f"{number}. {label}" if number is not None else label


def _foreign(request: Request) -> bool:
    """A POST not sent by this page (the browser says so: ``Sec-Fetch-Site``
    other than ``same-origin``, or an ``Origin`` not this server's, ``null``
    included). A request that carries neither is no browser's form (a
    script's, holding the link): the token alone is the capability then."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False
    ours = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
    public = load_config(request.app.state.pool.paths).serve.public_url
    if public:
        p = urlsplit(public)
        ours.add(f"{p.scheme}://{p.netloc}")
    return origin.rstrip("/") not in ours


def _look(svc: Service, token: str) -> LinkView:
    return svc.links.look(token)


@router.get("/tap/{token}")
async def show(token: str, request: Request) -> HTMLResponse:
    """The question a link answers, and its button; nothing changes."""
    pool: ServicePool = request.app.state.pool
    try:
        view = await run_in_threadpool(pool.call, _look, token)
    except AnswerLinkRefused as exc:
        return _refused(exc)
    if view.refusal is not None:
        return _refused(view.refusal, view)
    title = "Deny?" if view.claim.deny else f"Answer “{view.claim.label}”?"
    return _page(title, _question(view, button=True, token=token), 200)


class _Refused(Exception):
    """A tap refused, with what its link would answer (to show the question)."""

    def __init__(self, exc: AnswerLinkRefused, view: LinkView | None) -> None:
        super().__init__(exc.message)
        self.exc, self.view = exc, view


def _tap(svc: Service, token: str) -> tuple[AnswerStatus, str]:
    try:
        result = svc.links.tap(token)
    except AnswerLinkRefused as exc:
        try:
            view: LinkView | None = svc.links.look(token)
        except AnswerLinkRefused:
            view = None
        raise _Refused(exc, view) from None
    a = svc.wait_answer(result.answer.id, APPLY_WAIT_S)
    return a.status, a.detail


@router.post("/tap/{token}")
async def tap(token: str, request: Request) -> HTMLResponse:
    """Answer as the link says, once (see the module)."""
    if _foreign(request):
        return _refused(AnswerLinkRefused("this answer came from another site's page:"
                                          " nothing was answered", reason="origin"))
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    given = form.get("token", [""])[0]
    if given != token:
        return _refused(AnswerLinkRefused("the form does not carry this link's token:"
                                          " nothing was answered", reason="forged"))
    pool: ServicePool = request.app.state.pool
    try:
        status, detail = await run_in_threadpool(pool.call, _tap, token)
    except _Refused as refused:
        return _refused(refused.exc, refused.view)
    except (StaleAnswer, NoOpenQuestion) as exc:
        return _refused(AnswerLinkRefused(f"{exc.message}: nothing was answered", reason="stale"))
    except AgentwrapError as exc:
        return _refused(AnswerLinkRefused(f"{exc.message}: nothing was answered", reason="closed"))
    if status is AnswerStatus.APPLIED:
        msg, code = f"Answered: {detail or 'the dialog closed'}.", 200
    elif status is AnswerStatus.PENDING:
        msg, code = "Sent: the agent's supervisor is typing it.", 202
    else:
        msg, code = f"Not applied ({status.value}): {detail}", 409
    kind = "ok" if code < 300 else "error"
    return _page("Answered" if code == 200 else "Sent" if code == 202 else "Not applied",
                 f'<p id="tap-result" class="result {kind}" data-status="{e(status.value)}">'
                 f"{e(msg)}</p>", code)
