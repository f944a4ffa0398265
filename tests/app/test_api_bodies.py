"""A body that is not JSON (truncated, garbage, not UTF-8, empty) on every JSON-body route of a real uvicorn
server: 400 naming ``body`` with the parser's reason, exactly as ``/v1/solve`` answers it; never a 422 naming
a character offset ("[15]: JSON decode error") or a 400 naming ``request``, and tickets already queued stay."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import LiveServer, client, features, service_config  # noqa: E402

from mgmatch.app.api import build_asgi  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402

ROUTES = ["/v1/solve", "/v1/tickets", "/v1/tickets/batch", "/v1/backfills", "/v1/matches/small.m1/result"]
NOT_JSON = {
    "truncated": b'{"pool":"trio",',
    "garbage": b"garbage",
    "not-utf8": b'{"pool": "\xff\xfe"}',
    "empty": b"",
}
JSON_TYPE = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One live server (in-memory store, no workers, so a lone ticket stays queued) and one ticket queued on it."""
    rt = Runtime.build(Settings(config=service_config(tmp_path_factory.mktemp("cfg")), embedded_workers=False))
    with LiveServer(build_asgi(rt)) as srv, client(srv.url) as c:
        r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "kept", "features": features(1)}]})
        assert r.status_code == 201, r.text
        yield c, r.json()["id"]
    rt.stop()


def _still_queued(c, ticket_id: str) -> None:
    r = c.get(f"/v1/tickets/{ticket_id}")
    assert r.status_code == 200 and r.json()["status"] == "queued" and r.json()["players"] == ["kept"], r.text


def _assert_not_json(r, raw: bytes) -> None:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["field"] == "body", r.text
    assert err["message"].startswith("body: not valid JSON ("), r.text
    try:
        json.loads(raw)
    except ValueError as why:  # the parser's own reason (position, or the codec's complaint)
        assert str(why)[:200] in err["message"], (str(why), r.text)


@pytest.mark.parametrize("kind", list(NOT_JSON))
@pytest.mark.parametrize("path", ROUTES)
def test_a_body_that_is_not_json_is_400_body_on_every_route(server, path, kind):
    c, ticket_id = server
    raw = NOT_JSON[kind]
    r = c.post(path, content=raw, headers=JSON_TYPE)
    _assert_not_json(r, raw)
    # word for word what /v1/solve answers for the same bytes
    assert r.json() == c.post("/v1/solve", content=raw, headers=JSON_TYPE).json()
    _still_queued(c, ticket_id)


def test_the_audited_truncated_ticket_names_body_and_the_parsers_position(server):
    c, ticket_id = server
    r = c.post("/v1/tickets", content=b'{"pool":"trio",', headers=JSON_TYPE)
    assert r.status_code == 400 and r.json()["error"] == {
        "field": "body",
        "message": "body: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 16 (char 15))"}
    _still_queued(c, ticket_id)


@pytest.mark.parametrize("headers", [{"content-type": "text/plain"},
                                     {"content-type": "application/x-www-form-urlencoded"}, {}],
                         ids=["text", "form", "none"])
@pytest.mark.parametrize("path", ROUTES)
def test_garbage_under_another_content_type_is_400_body_too(server, path, headers):
    c, ticket_id = server
    for raw in (b"garbage", b"\xff\xfe"):  # what `curl -d garbage` sends without a JSON content type
        _assert_not_json(c.post(path, content=raw, headers=headers), raw)
    _still_queued(c, ticket_id)


@pytest.mark.parametrize("path", ROUTES)
def test_json_of_the_wrong_shape_stays_422(server, path):
    """Only a body that is not JSON is 400: JSON that is not the route's object keeps its 422."""
    c, ticket_id = server
    for raw in (b"[1]", b"null", b'"x"', b"{}"):
        r = c.post(path, content=raw, headers=JSON_TYPE)
        assert r.status_code == 422, (path, raw, r.text)
    r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": "x", "features": "no"}]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "players[0].features", r.text
    r = c.post("/v1/matches/small.m1/result", content=b'{"engagement": NaN}', headers=JSON_TYPE)
    assert r.status_code == 422 and r.json()["error"]["field"] == "engagement", r.text
    _still_queued(c, ticket_id)
