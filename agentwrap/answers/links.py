"""One-tap answer links: signed, bound to one question, expiring, single use.

A notice about a waiting agent (a push message, a chat, an e-mail) carries one
link per option of the question and one for Deny. Each link's token says which
session (and host) and which question it answers, with which choice, until
when, and a nonce the links of one notice share; it is signed with HMAC-SHA256
under a key kept in the state dir (``answer-links.key``, 0600, made once), so a
link can be neither forged nor edited into another question or choice. The
link reaches ``agentwrap serve``'s small page (:mod:`agentwrap.service.links`
checks it against the question open now, the person's rules and the
deny-list; :mod:`agentwrap.surfaces.http.tap` shows it), where a tap spends
it: :class:`LinkLedger` records the nonce durably in the store, so one tap
answers and every later one (the same link, a sibling, another ``serve``
process on the same store) does nothing.

The token is ``base64url(JSON claim) "." base64url(HMAC)``: no secret in it,
only what it answers; the signature is compared with
:func:`hmac.compare_digest`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from ..config import AnswerRule, Config, load_config
from ..detect.question import Question
from ..errors import AnswerLinkRefused
from ..paths import Paths, check_private_file, create_private_once
from .certainty import candidates
from .denylist import Where, destructive, incomplete
from .rules import decide

KEY_FILE = "answer-links.key"
DENY = "deny"  # the choice of a Deny link
DEFAULT_TTL_S = 900.0
#: where links point without ``[serve] public_url``: ``agentwrap serve``'s default address
LOCAL_URL = "http://127.0.0.1:7878"
#: the page of ``serve`` a link opens (the token follows)
TAP_PATH = "/tap/"

SCHEMA = """
CREATE TABLE IF NOT EXISTS answer_links (
    nonce TEXT PRIMARY KEY,         -- shared by the links of one notice: one tap spends them all
    session TEXT NOT NULL,
    question_id TEXT NOT NULL,
    choice TEXT NOT NULL,           -- the option (number or label) tapped, or "deny"
    used REAL NOT NULL
);
"""


def key_path(paths: Paths) -> Path:
    return paths.state_dir / KEY_FILE


def load_or_create_key(paths: Paths) -> bytes:
    """The signing key, made once (32 random bytes, 0600); a second process
    racing to make it uses the first one's."""
    path = key_path(paths)
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    paths.ensure()
    create_private_once(path, secrets.token_hex(32).encode("ascii") + b"\n")
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    check_private_file(path, repair=True)
    text = path.read_text(encoding="ascii").strip()
    if len(text) < 32:
        raise FileNotFoundError(path)
    return text.encode("ascii")


@dataclass(frozen=True)
class Claim:
    """What one link answers, as signed."""

    session: str  # the session's name on its host
    host: str  # the host it runs on ('' : this one)
    question_id: str
    choice: str  # the option's number (as shown) or label, or DENY
    label: str  # the option as the notice shows it
    expires: float  # time.time() after which the link does nothing
    nonce: str  # shared by the links of one notice

    @property
    def deny(self) -> bool:
        return self.choice == DENY

    @property
    def address(self) -> str:
        """The session as the service names it: ``HOST/NAME`` or ``NAME``."""
        return f"{self.host}/{self.session}" if self.host else self.session

    def to_json(self) -> dict[str, Any]:
        return {"s": self.session, "h": self.host, "q": self.question_id, "c": self.choice,
                "l": self.label, "e": self.expires, "n": self.nonce}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Claim:
        fields = (data["s"], data["h"], data["q"], data["c"], data["l"], data["n"])
        if not all(isinstance(v, str) for v in fields) or not isinstance(data["e"], (int, float)):
            raise ValueError("a claim's fields have the wrong types")
        return cls(data["s"], data["h"], data["q"], data["c"], data["l"], float(data["e"]),
                   data["n"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, b"agentwrap-answer-link\0" + body.encode("ascii"),
                         hashlib.sha256).digest())


def sign(key: bytes, claim: Claim) -> str:
    """The token of ``claim``."""
    body = _b64(json.dumps(claim.to_json(), separators=(",", ":"), ensure_ascii=False,
                           sort_keys=True).encode("utf-8"))
    return f"{body}.{_mac(key, body)}"


#: a token longer than this is not one of ours (read before any work is done on it)
MAX_TOKEN_CHARS = 4096


def verify(key: bytes, token: str, *, now: float | None = None) -> Claim:
    """The claim of a token signed with ``key`` that has not expired; else
    :class:`AnswerLinkRefused` (``forged`` or ``expired``)."""
    forged = AnswerLinkRefused("this link is not a valid answer link (it was changed, cut"
                               " short, or made elsewhere): nothing was answered",
                               reason="forged")
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise forged
    body, mac = token.split(".")
    try:
        body.encode("ascii")
        mac.encode("ascii")
    except UnicodeEncodeError:
        raise forged from None
    if not hmac.compare_digest(_mac(key, body), mac):
        raise forged
    try:
        claim = Claim.from_json(json.loads(_unb64(body)))
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise forged from None
    if (time.time() if now is None else now) > claim.expires:
        raise AnswerLinkRefused(
            f"this link expired at {time.strftime('%H:%M:%S', time.localtime(claim.expires))}:"
            " nothing was answered", reason="expired")
    return claim


def holds_back(question: Question, profile: str, project: str, rules: Sequence[AnswerRule], *,
               open_for_s: float) -> str:
    """Why the person's rules or the built-in deny-list keep a link from picking
    an option of ``question`` ("" when nothing does): a rule that denies it
    decides first; a command the deny-list holds, or one that may be cut off,
    is never approved from afar (Deny is always allowed)."""
    where = Where.of(project) if project else None
    decision = decide(question, profile, rules, open_for_s=open_for_s, where=where)
    if decision is not None and decision.answer == {"deny": True}:
        return f"your answer rule {decision.rule!r} denies this question"
    for text in candidates(question):
        why = destructive(text, where=where)
        if why is not None:
            return f"the built-in deny-list holds this command ({why})"
    if question.command and incomplete(question.command):
        return "the command shown may be cut off"
    return ""


class _Database(Protocol):
    """What the ledger needs of the store's database (:class:`agentwrap.queue.db.Database`)."""

    def ensure(self, schema: str, names: tuple[str, ...]) -> None: ...
    def write(self) -> Any: ...
    def read(self, sql: str, params: tuple[Any, ...] = ()) -> Sequence[Any]: ...


class LinkLedger:
    """The nonces of the links that were tapped, in the one store: a tap
    spends its notice's links for every ``serve`` of that store."""

    def __init__(self, db: _Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self._clock = clock
        db.ensure(SCHEMA, ("answer_links",))

    def spend(self, claim: Claim) -> bool:
        """Record the tap of ``claim``'s notice; False when one of its links
        was tapped already (then nothing is recorded)."""
        with self.db.write() as w:
            w.take_turns(f"answer-link:{claim.nonce}")  # of two taps at once, one wins
            row = w.conn.execute("SELECT used FROM answer_links WHERE nonce = ?",
                                 (claim.nonce,)).fetchone()
            if row is not None:
                return False
            w.conn.execute(
                "INSERT INTO answer_links (nonce, session, question_id, choice, used)"
                " VALUES (?, ?, ?, ?, ?)",
                (claim.nonce, claim.address, claim.question_id, claim.choice, self._clock()))
            return True

    def spent(self, claim: Claim) -> float | None:
        """When ``claim``'s notice was tapped, or None."""
        rows = self.db.read("SELECT used FROM answer_links WHERE nonce = ?", (claim.nonce,))
        return float(rows[0]["used"]) if rows else None


class LinksFor(Protocol):
    """What a notifier calls for the links of one question's notice."""

    def __call__(self, session: str, host: str, question_id: str,
                 options: Sequence[Any]) -> list[tuple[str, str]]: ...


def _choice(option: Any) -> tuple[str, str]:
    """(choice, label) of one option as a notifier has it: an
    :class:`~agentwrap.detect.question.Option`, its JSON, a label, or a number."""
    if isinstance(option, Mapping):
        number, label = option.get("number"), str(option.get("label", ""))
    elif isinstance(option, (str, int)):
        number, label = None, str(option)
    else:
        number, label = getattr(option, "number", None), str(getattr(option, "label", ""))
    choice = str(number) if number is not None else label
    if not choice:
        raise ValueError(f"an option with neither a number nor a label: {option!r}")
    return choice, (f"{number}. {label}" if number is not None and label else label or choice)


class LinkMaker:
    """Mints the links of a notice: one per option, then Deny. Its
    :meth:`links_for` is the :class:`LinksFor` a notifier takes."""

    def __init__(self, key: bytes, public_url: str, *, ttl_s: float = DEFAULT_TTL_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.key = key
        self.base = public_url.rstrip("/")
        self.ttl_s = ttl_s
        self._clock = clock

    @classmethod
    def from_config(cls, paths: Paths, config: Config | None = None) -> LinkMaker:
        """The links of the user's config: on ``[serve] public_url`` (without
        one, ``serve``'s own default address, which only this machine opens),
        expiring after ``[answers] link_ttl_s``."""
        cfg = config if config is not None else load_config(paths)
        return cls(load_or_create_key(paths), cfg.serve.public_url or LOCAL_URL,
                   ttl_s=cfg.answers.link_ttl_s)

    def url(self, token: str) -> str:
        return f"{self.base}{TAP_PATH}{quote(token, safe='')}"

    def links_for(self, session: str, host: str, question_id: str,
                  options: Sequence[Any]) -> list[tuple[str, str]]:
        """(label, url) for each option of the question, then ("Deny", url)."""
        expires = self._clock() + self.ttl_s
        nonce = secrets.token_urlsafe(12)
        out = []
        for option in options:
            choice, label = _choice(option)
            if choice == DENY:
                continue
            out.append((label, self.url(sign(self.key, Claim(
                session, host, question_id, choice, label, expires, nonce)))))
        out.append(("Deny", self.url(sign(self.key, Claim(
            session, host, question_id, DENY, "Deny", expires, nonce)))))
        return out

    __call__ = links_for
