"""Fuzzing a real uvicorn server: schemathesis against the live OpenAPI document, and hypothesis
strategies for the hostile shapes of issue 9 (deep bodies, huge numbers, deep rule conditions, absurd
HMAC timestamps, random paths, long ids). Every answer must be a 4xx with the error shape, never a
5xx; random paths must not add metric series. Example counts are bounded (the file runs in `make test`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
)

sys.path.insert(0, str(Path(__file__).parent))
from chaos_helpers import assert_client_error, deep_json, route_labels  # noqa: E402
from svc_helpers import LiveServer  # noqa: E402

from mgmatch.app.api import build_asgi  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings, load_settings  # noqa: E402
from mgmatch.core.presets import generate_instances, load_model  # noqa: E402

HMAC_SECRET = "fuzz-secret"
DIM = load_model("3v3").feature_dim
FUZZ = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def server():
    """The embedded default runtime (memory store, built-in pools, matchmakers running) on uvicorn;
    solve budgets capped at 250 ms so generated requests stay cheap."""
    rt = Runtime.build(Settings(max_time_limit_ms=250))
    rt.start_embedded()
    with LiveServer(build_asgi(rt)) as srv:
        yield srv
    rt.stop()


@pytest.fixture(scope="module")
def hmac_server():
    """The same service with MGMATCH_HMAC_SECRET set in its environment (signed requests required)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MGMATCH_HMAC_SECRET", HMAC_SECRET)
        s = load_settings(embedded_workers=False)
    assert s.hmac_secret == HMAC_SECRET
    rt = Runtime.build(s)
    with LiveServer(build_asgi(rt)) as srv:
        yield srv
    rt.stop()


# --------------------------------------------------------------------------- schemathesis


def test_openapi_fuzzing_gets_no_5xx_and_documented_answers(server):
    """Every operation of the live /openapi.json, positive and negative cases (schemathesis
    strategies; its pytest loader does not run on this pytest): never a 5xx; a schema-invalid
    request is refused; a 2xx answer matches its documented schema and content type."""
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    assert {op.label for op in ops} >= {"POST /v1/solve", "POST /v1/tickets", "GET /v1/tickets/{ticket_id}",
                                        "POST /v1/matches/{match_id}/result", "GET /v1/players/{player_id}",
                                        "POST /v1/matches/{match_id}/accept", "POST /v1/matches/{match_id}/decline"}
    failures: dict[str, str] = {}
    for op in ops:
        # negative cases need something to break: only operations with a request body have one
        modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE) if len(op.body) else (GenerationMode.POSITIVE,)
        for mode in modes:

            @settings(max_examples=25, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def fuzz(case):
                response = case.call(base_url=server.url, timeout=30)
                checks = [not_a_server_error, negative_data_rejection, content_type_conformance]
                if 200 <= response.status_code < 300:
                    checks.append(response_schema_conformance)
                case.validate_response(response, checks=checks)

            try:
                fuzz()
            except (Exception, BaseExceptionGroup) as err:  # every operation's failures, reported together
                failures[f"{op.label} ({mode.value})"] = str(err)[:1500]
    assert not failures, "\n\n".join(f"{k}: {v}" for k, v in failures.items())


# --------------------------------------------------------------------------- hostile shapes


def _post(url: str, path: str, body: str | bytes, **headers) -> httpx.Response:
    return httpx.post(url + path, content=body, headers={"content-type": "application/json", **headers}, timeout=60)


def _instance(seed: int = 0) -> dict:
    """A valid 3v3 solve request without rules (so an edit refused is refused for that edit alone)."""
    return {**generate_instances("3v3", 1, seed)[0].to_json(), "rules": [], "method": "exact", "time_limit_ms": 200}


@FUZZ
@given(kind=st.sampled_from(["object", "list"]), depth=st.integers(1_000, 100_000),
       path=st.sampled_from(["/v1/solve", "/v1/tickets", "/v1/tickets/batch"]), inside=st.booleans())
@example(kind="object", depth=100_000, path="/v1/solve", inside=False)
@example(kind="list", depth=100_000, path="/v1/tickets", inside=False)
@example(kind="list", depth=100_000, path="/v1/tickets", inside=True)
def test_deeply_nested_bodies_get_4xx(server, kind, depth, path, inside):
    deep = deep_json(kind, depth)
    body = '{"pool": "3v3", "players": [{"id": "deep", "features": ' + deep + "}]}" if inside else deep
    assert_client_error(_post(server.url, path, body), f"{kind} nested {depth} deep to {path}")


@FUZZ
@given(value=st.floats(min_value=1e200, max_value=1.7e308), negative=st.booleans(),
       index=st.integers(0, DIM - 1), route=st.sampled_from(["ticket", "solve"]))
@example(value=1e300, negative=False, index=0, route="ticket")
@example(value=1e300, negative=False, index=0, route="solve")
def test_huge_feature_values_get_4xx(server, value, negative, index, route):
    v = -value if negative else value
    if route == "ticket":
        feats = [0.1] * DIM
        feats[index] = v
        body = {"pool": "3v3", "players": [{"id": f"huge-{index}-{value:.3e}", "features": feats}]}
        r = _post(server.url, "/v1/tickets", json.dumps(body))
    else:
        inst = _instance()
        inst["players"][index % len(inst["players"])]["features"][index] = v
        r = _post(server.url, "/v1/solve", json.dumps(inst))
    assert_client_error(r, f"feature {v:g} via {route}")


@FUZZ
@given(depth=st.integers(1_000, 6_000), op=st.sampled_from(["not", "all", "any"]))
@example(depth=3_000, op="not")
def test_deeply_nested_rule_conditions_get_4xx(server, depth, op):
    inst = _instance()
    pid = inst["players"][0]["id"]
    lit = json.dumps([pid, 0])
    # built as text: json.dumps itself refuses to nest this deep
    cond = (f'{{"{op}": ' if op == "not" else f'{{"{op}": [') * depth + lit + ("}" if op == "not" else "]}") * depth
    rule = '{"kind": "if", "when": ' + cond + ', "then": {"terms": [[' + json.dumps(pid) + ', 0, 1]], ' \
           '"sense": "<=", "rhs": 1}}'
    body = json.dumps({**inst, "rules": ["RULE"]}).replace('"RULE"', rule)
    assert_client_error(_post(server.url, "/v1/solve", body), f"`when` nested {depth} × {op}")


@FUZZ
@given(ts=st.one_of(st.text("0123456789", min_size=19, max_size=5_000), st.from_regex(r"-[0-9]{19,400}", fullmatch=True),
                    st.sampled_from(["1e400", "inf", "-inf", "nan", "0x7fffffffffffffff", "1_000", ""])),
       signed=st.booleans())
@example(ts="9" * 400, signed=True)
@example(ts="9" * 400, signed=False)
def test_absurd_hmac_timestamps_get_401(hmac_server, ts, signed):
    body = json.dumps({"pool": "3v3", "players": [{"id": "hmac-player", "features": [0.0] * DIM}]}).encode()
    mac = (hmac.new(HMAC_SECRET.encode(), f"{ts}.POST./v1/tickets.".encode() + body, hashlib.sha256).hexdigest()
           if signed else "0" * 64)
    r = _post(hmac_server.url, "/v1/tickets", body, **{"x-mgmatch-signature": f"t={ts},v1={mac}"})
    assert r.status_code == 401, f"t of {len(ts)} chars ({ts[:20]!r}…), signed={signed}: {r.status_code} {r.text[:200]}"
    assert_client_error(r, "absurd HMAC timestamp")


_SEGMENT = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~", min_size=1, max_size=40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paths=st.lists(st.tuples(st.sampled_from(["/", "/v1/", "/v1/tickets/", "/metrics/", "/docs/"]),
                                st.lists(_SEGMENT, min_size=1, max_size=4)), min_size=150, max_size=150))
def test_random_paths_do_not_add_metric_series(server, paths):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        known = set(c.get("/openapi.json").json()["paths"]) | {"/openapi.json", "/docs", "/docs/oauth2-redirect",
                                                               "/redoc", "other"}
        before = route_labels(c.get("/metrics").text)
        for prefix, segments in paths:
            r = c.get(prefix + "/".join(segments))
            assert r.status_code < 500, f"GET {prefix + '/'.join(segments)}: {r.status_code}"
        after = route_labels(c.get("/metrics").text)
    new = after - before
    assert new <= known, f"raw paths became metric labels: {sorted(new - known)[:5]} (+{len(new - known)})"
    assert len(after) <= len(before | known)


@FUZZ
@given(n=st.integers(5_000, 50_000), ch=st.sampled_from(["a", "Z", "9", "-", "é", "🎮"]),
       route=st.sampled_from(["ticket", "solve", "get"]))
@example(n=5_000, ch="a", route="ticket")
def test_very_long_player_ids_get_4xx_and_are_not_stored(server, n, ch, route):
    pid = ch * n
    if route == "ticket":
        body = {"pool": "3v3", "players": [{"id": pid, "features": [0.1] * DIM}]}
        r = _post(server.url, "/v1/tickets", json.dumps(body))
    elif route == "solve":
        inst = _instance()
        inst["players"][0]["id"] = pid
        r = _post(server.url, "/v1/solve", json.dumps(inst))
    else:
        r = httpx.get(f"{server.url}/v1/tickets/3v3.{pid}", timeout=30)
        if not r.headers.get("content-type", "").startswith("application/json"):
            # a request line over uvicorn's limit (~16 KB encoded) is refused by the HTTP server
            # itself, before the app, with a plain-text 400
            assert r.status_code == 400, f"GET with a {len(r.request.url.raw_path)}-byte path: {r.status_code}"
            return
    assert_client_error(r, f"player id of {n} × {ch!r} via {route}")
