"""A refusal carried over the host link is raised again on the host as the
same class, with the facts its constructor needs (issue 38: a rate limit the
hub imposed reached a host's `send` as a generic LinkProtocolError, so the
command said "the hub refused the call" with the wrong exit code and no
retry time; the hub soak's producers retried ~830 of them blind)."""

from __future__ import annotations

import json

import pytest

from agentwrap import errors
from agentwrap.errors import AgentwrapError, LinkProtocolError
from agentwrap.queue.link_protocol import error, error_from_wire, parse


def across(exc: AgentwrapError) -> AgentwrapError:
    body = parse(error(7, -32000, exc.message, exc))["error"]
    return error_from_wire(body)


@pytest.mark.parametrize("exc", [
    errors.RateLimited("too many messages for 'api'", retry_after=12.4),
    errors.SessionAmbiguous("'a' names two sessions", ["alpha/a", "beta/a"]),
    errors.SessionNotFound("no session 'x'"),
], ids=lambda e: type(e).__name__)
def test_a_refusal_is_raised_again_as_its_own_class_with_its_facts(exc: AgentwrapError) -> None:
    got = across(exc)
    assert type(got) is type(exc) and got.exit_code == exc.exit_code
    assert got.message == exc.message and got.to_json() == exc.to_json()


@pytest.mark.parametrize("after", ["12", None, -1, float("inf"), 10**9, True, [1]])
def test_a_hostile_retry_after_is_not_trusted(after: object) -> None:
    data = {"error": "RateLimited", "detail": "slow down", "retryAfter": after}
    body = json.loads(json.dumps({"code": -32000, "message": "slow down", "data": data}))
    assert isinstance(error_from_wire(body), LinkProtocolError)


def test_hostile_candidates_are_not_trusted_and_many_are_cut() -> None:
    bad = {"error": "SessionAmbiguous", "detail": "two", "candidates": [1, {"x": 2}]}
    assert isinstance(error_from_wire({"message": "two", "data": bad}), LinkProtocolError)
    many = {"error": "SessionAmbiguous", "detail": "many", "candidates": [f"h{i}/a" for i in range(500)]}
    got = error_from_wire({"message": "many", "data": many})
    assert isinstance(got, errors.SessionAmbiguous) and len(got.candidates) == 100
