"""One-tap answer links (agentwrap.answers.links): the token, the key, the ledger.

The fast layer: signing and checking a token (forged, edited, expired), the
key file made once and private, the ledger spending a notice's links once
even for two stores on one database file (two ``serve`` processes), the
callable a notifier takes, and the config keys. The links against a real
``serve`` and a stand-in agent are tests/test_tap.py's.
"""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import AwEnv

from agentwrap.answers.links import (
    DENY,
    LOCAL_URL,
    TAP_PATH,
    Claim,
    LinkLedger,
    LinkMaker,
    LinksFor,
    key_path,
    load_or_create_key,
    sign,
    verify,
)
from agentwrap.answers.store import AnswerStore
from agentwrap.config import load_config
from agentwrap.detect.question import Option
from agentwrap.errors import AnswerLinkRefused, ConfigError

KEY = b"k" * 64


def claim(**kw: object) -> Claim:
    base: dict[str, object] = dict(session="sa", host="", question_id="q1", choice="1",
                                   label="1. Yes", expires=time.time() + 60, nonce="n1")
    base.update(kw)
    return Claim(**base)  # type: ignore[arg-type]


def token_of(url: str) -> str:
    return unquote(url.split(TAP_PATH, 1)[1])


def test_a_token_verifies_to_its_claim_and_nothing_else() -> None:
    c = claim()
    assert verify(KEY, sign(KEY, c)) == c


@pytest.mark.parametrize("change", [
    "other key", "flipped signature", "edited claim", "no signature", "junk", "long",
])
def test_a_forged_or_edited_token_is_refused(change: str) -> None:
    good = sign(KEY, claim())
    body, mac = good.split(".")
    bad = {
        "other key": sign(b"x" * 64, claim()),
        "flipped signature": f"{body}.{mac[:-2]}{'A' if mac[-2] != 'A' else 'B'}{mac[-1]}",
        "edited claim": f"{sign(KEY, claim(choice=DENY)).split('.')[0]}.{mac}",
        "no signature": body,
        "junk": "é.ü",
        "long": "a" * 5000 + "." + mac,
    }[change]
    with pytest.raises(AnswerLinkRefused) as err:
        verify(KEY, bad)
    assert err.value.reason == "forged"


def test_an_expired_token_is_refused() -> None:
    c = claim(expires=time.time() - 1)
    with pytest.raises(AnswerLinkRefused) as err:
        verify(KEY, sign(KEY, c))
    assert err.value.reason == "expired" and "expired at" in err.value.message


def test_the_key_is_made_once_and_private(aw: AwEnv) -> None:
    key = load_or_create_key(aw.paths)
    assert load_or_create_key(aw.paths) == key and len(key) >= 32
    assert stat.S_IMODE(key_path(aw.paths).stat().st_mode) == 0o600


def test_links_for_mints_one_link_per_option_and_deny(aw: AwEnv) -> None:
    maker = LinkMaker(load_or_create_key(aw.paths), "https://aw.example.net/",
                      ttl_s=900, clock=lambda: 1000.0)
    make: LinksFor = maker.links_for  # what a notifier takes
    links = make("sa", "devbox", "q1", [Option("Yes", number=1), {"label": "No", "number": 2},
                                        "Maybe"])
    assert [label for label, _ in links] == ["1. Yes", "2. No", "Maybe", "Deny"]
    assert all(url.startswith("https://aw.example.net/tap/") for _, url in links)
    claims = [verify(maker.key, token_of(url), now=1000.0) for _, url in links]
    assert [c.choice for c in claims] == ["1", "2", "Maybe", DENY]
    assert {c.nonce for c in claims} == {claims[0].nonce}  # one notice: one tap spends all
    assert {(c.session, c.host, c.question_id, c.expires) for c in claims} == {
        ("sa", "devbox", "q1", 1900.0)}
    again = make("sa", "devbox", "q1", [Option("Yes", number=1)])
    assert verify(maker.key, token_of(again[0][1]), now=1000.0).nonce != claims[0].nonce


def test_a_notice_is_spent_once_across_two_stores_of_one_database(tmp_path: Path) -> None:
    stores = [AnswerStore(tmp_path / "aw.db") for _ in range(2)]  # two `serve` processes
    try:
        ledgers = [LinkLedger(s.db) for s in stores]
        c = claim()
        wins: list[bool] = []
        threads = [threading.Thread(target=lambda led=led: wins.append(led.spend(c)))
                   for led in ledgers for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(wins) == [False] * 5 + [True]
        assert ledgers[1].spent(claim(choice=DENY)) is not None  # the sibling is spent too
        assert ledgers[0].spent(claim(nonce="other")) is None
    finally:
        for s in stores:
            s.close()


def test_links_from_the_config(aw: AwEnv) -> None:
    assert LinkMaker.from_config(aw.paths).base == LOCAL_URL  # no public_url: serve's default
    aw.paths.config_file.write_text(
        '[serve]\npublic_url = "https://aw.example.net/aw/"\n[answers]\nlink_ttl_s = 60\n',
        encoding="utf-8")
    maker = LinkMaker.from_config(aw.paths)
    assert maker.ttl_s == 60.0 and maker.key == load_or_create_key(aw.paths)
    (label, url), _deny = maker.links_for("sa", "", "q1", ["Yes"])
    assert label == "Yes" and url.startswith("https://aw.example.net/aw/tap/")


def test_the_config_keys(aw: AwEnv) -> None:
    aw.paths.config_file.write_text(
        '[serve]\npublic_url = "https://aw.example.net/x"\n[answers]\nlink_ttl_s = 60\n',
        encoding="utf-8")
    cfg = load_config(aw.paths)
    assert cfg.serve.public_url == "https://aw.example.net/x" and cfg.answers.link_ttl_s == 60.0
    for bad in ('[serve]\npublic_url = "aw.example.net"\n', '[answers]\nlink_ttl_s = 1\n'):
        aw.paths.config_file.write_text(bad, encoding="utf-8")
        with pytest.raises(ConfigError):
            load_config(aw.paths)
