"""Match records and results in the store, over both implementations: kept atomically with the commit, one
result per match (the first stays), bounded by retention and count, paged in time order, exported as spec §5."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mgmatch.app.results import export_matchlog
from mgmatch.app.store import (
    MatchRecord,
    MatchResult,
    MemoryStore,
    RedisStore,
    Ticket,
    match_pool,
    new_ticket_id,
)
from mgmatch.pipeline.matchlog import load_matchlog


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("cluster", marks=[pytest.mark.redis, pytest.mark.cluster])])
def make(request):
    """Factory: make(**limits) → a store of the parametrized kind with those match limits."""
    made = []

    def _make(**limits):
        if request.param == "memory":
            s = MemoryStore(**limits)
        else:
            url, prefix = request.getfixturevalue("cluster_url" if request.param == "cluster" else "redis_url")
            s = RedisStore.from_url(url, prefix=prefix, **limits)
        made.append(s)
        return s

    yield _make
    for s in made:
        s.close()


def _match(store, k: int, pool: str = "p", owner: str | None = "key:a", record: bool = True, dim: int = 2):
    """Queue, claim and commit one 1v1 match (players u{k}a, u{k}b); returns (match id, committed)."""
    now = time.time()
    ids = []
    for side in "ab":
        t = Ticket(new_ticket_id(pool), pool, [{"id": f"u{k}{side}", "features": [float(k)] * dim}], now, now + 60,
                   owner=owner)
        ids.append(store.create(t)[0].id)
    claim = f"c{k}"
    assert store.claim(pool, ids, claim, now + 30)
    mid = f"{pool}.{claim}-0-x"
    result = MatchResult(mid, [[f"u{k}a"], [f"u{k}b"]], {ids[0]: 0, ids[1]: 1}, method="exact", objective=1.5)
    rec = MatchRecord(mid, pool, [[{"id": f"u{k}a", "features": [float(k)] * dim, "waited_s": 1.0}],
                                  [{"id": f"u{k}b", "features": [float(k)] * dim}]],
                      method="exact", objective=1.5, owners=[owner] if owner else []) if record else None
    return mid, store.commit(pool, claim, ids, [], result, rec)


def test_match_ids_name_their_pool():
    assert match_pool("3v3.abc-0-12ef") == "3v3" and match_pool("small.c1.tok-2-x") == "small"
    assert match_pool("nodot") is None and match_pool("Bad.x") is None and match_pool(".x") is None


def test_a_commit_keeps_the_record_and_a_result_once(make):
    s = make()
    t0 = time.time()
    mid, ok = _match(s, 1)
    assert ok
    rec = s.get_match("p", mid)
    assert rec is not None and rec.result is None and rec.owners == ["key:a"]
    assert rec.teams[0] == [{"id": "u1a", "features": [1.0, 1.0], "waited_s": 1.0}]
    assert rec.player_ids() == {"u1a", "u1b"} and rec.method == "exact" and rec.objective == 1.5
    assert t0 - 2 < rec.time < time.time() + 2  # the store's clock
    assert s.get_match("other", mid) is None and s.get_match("p", "p.nope") is None
    stored, fresh = s.put_match_result("p", mid, {"engagement": 0.25, "players": {"u1a": 1.0}})
    assert fresh and stored.result == {"engagement": 0.25, "players": {"u1a": 1.0}} and stored.result_at is not None
    again, fresh = s.put_match_result("p", mid, {"engagement": 9.0})
    assert not fresh and again.result == {"engagement": 0.25, "players": {"u1a": 1.0}}  # the first stays
    assert s.get_match("p", mid).result["engagement"] == 0.25
    assert s.put_match_result("p", "p.nope", {"engagement": 1.0}) == (None, False)


def test_no_record_without_a_successful_commit(make):
    s = make()
    mid, ok = _match(s, 1, record=False)
    assert ok and s.get_match("p", mid) is None
    # a commit that conflicts (its tickets were cancelled meanwhile) keeps no record either
    now = time.time()
    t = Ticket(new_ticket_id("p"), "p", [{"id": "z", "features": [0.0, 0.0]}], now, now + 60)
    tid = s.create(t)[0].id
    assert s.claim("p", [tid], "cz", now + 30)
    s.cancel(tid)
    rec = MatchRecord("p.cz-0-x", "p", [[{"id": "z", "features": [0.0, 0.0]}]])
    assert not s.commit("p", "cz", [tid], [], MatchResult("p.cz-0-x", [["z"]], {tid: 0}), rec)
    assert s.get_match("p", "p.cz-0-x") is None
    assert [m for m, _ in s.match_index("p", float("-inf"), 10)] == []


def test_records_are_bounded_by_count_oldest_first(make):
    s = make(match_max_count=3)
    mids = [_match(s, k)[0] for k in range(5)]
    assert [m for m, _ in s.match_index("p", float("-inf"), 10)] == mids[2:]
    assert s.get_match("p", mids[0]) is None and s.get_match("p", mids[1]) is None  # gone, not only unindexed
    assert s.put_match_result("p", mids[0], {"engagement": 1.0}) == (None, False)
    assert [r.match_id for r in s.iter_matches("p")] == mids[2:]


def test_records_are_bounded_by_retention(make):
    s = make(match_retention_s=0.4)
    old, _ = _match(s, 0)
    assert s.get_match("p", old) is not None
    time.sleep(0.6)
    assert s.get_match("p", old) is None
    assert s.put_match_result("p", old, {"engagement": 1.0}) == (None, False)
    new, _ = _match(s, 1)  # a later commit also trims the index by age
    assert [m for m, _ in s.match_index("p", float("-inf"), 10)] == [new]
    assert [r.match_id for r in s.iter_matches("p")] == [new]


def test_iter_matches_pages_in_time_order_from_since(make):
    s = make()
    mids = [_match(s, k)[0] for k in range(7)]
    _match(s, 99, pool="q")  # another pool's records stay apart
    got = list(s.iter_matches("p", batch=2))
    assert [r.match_id for r in got] == mids
    times = [r.time for r in got]
    assert times == sorted(times)
    assert [r.match_id for r in s.iter_matches("p", since=times[4], batch=3)] == mids[4:]
    assert [r.match_id for r in s.iter_matches("q")] == ["q.c99-0-x"]


@pytest.mark.redis
def test_redis_match_keys_carry_the_pool_hash_tag(redis_url):
    import redis

    url, prefix = redis_url
    s = RedisStore.from_url(url, prefix=prefix, match_retention_s=100)
    mid, _ = _match(s, 1, pool="ab-1")
    r = redis.Redis.from_url(url, decode_responses=True)
    keys = set(r.scan_iter(f"{prefix}:*:m*"))
    assert keys == {f"{prefix}:{{ab-1}}:m:{mid}", f"{prefix}:{{ab-1}}:matches"}
    assert 99 < r.ttl(f"{prefix}:{{ab-1}}:m:{mid}") <= 100
    s.close()


def test_export_writes_matches_with_a_result_as_a_spec_matchlog(make, tmp_path):
    s = make()
    mids = [_match(s, k)[0] for k in range(4)]
    for k, mid in enumerate(mids[:3]):
        s.put_match_result("p", mid, {"engagement": k / 2, **({"players": {f"u{k}b": -1.0}} if k == 1 else {})})
    out = tmp_path / "log.jsonl"
    stats = export_matchlog(s, ["p", "empty"], out)
    assert stats.written == {"p": 3, "empty": 0} and stats.without_result == {"p": 1, "empty": 0}
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["match_id"] for x in lines] == mids[:3]
    assert all(x["format"] == "mgmatch-matchlog/v1" for x in lines)
    assert lines[1]["teams"][1] == [{"id": "u1b", "features": [1.0, 1.0], "engagement": -1.0}]
    assert lines[0]["teams"][0] == [{"id": "u0a", "features": [0.0, 0.0], "waited_s": 1.0}]
    data = load_matchlog([out])  # the fitter's reader accepts it
    assert data.matches == 3 and data.teams == 2 and data.feature_dim == 2
    assert list(data.y) == [0.0, 0.5, 1.0]
    assert export_matchlog(s, ["p"], out, since=lines[2]["time"]).written == {"p": 1}


def test_export_refuses_mixed_shapes_and_leaves_the_old_file(make, tmp_path):
    s = make()
    a, _ = _match(s, 1, pool="p", dim=2)
    b, _ = _match(s, 2, pool="q", dim=3)
    s.put_match_result("p", a, {"engagement": 1.0})
    s.put_match_result("q", b, {"engagement": 1.0})
    out = tmp_path / "log.jsonl"
    out.write_text("old\n")
    with pytest.raises(ValueError, match="pool q has 2 teams of players with 3 features"):
        export_matchlog(s, ["p", "q"], out)
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]


def test_an_unreachable_redis_raises_store_unavailable(tmp_path):
    from svc_helpers import free_port

    from mgmatch.app.store import StoreUnavailable

    s = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")
    calls = [lambda: s.get_match("p", "p.x"), lambda: s.put_match_result("p", "p.x", {"engagement": 1.0}),
             lambda: s.match_index("p", 0.0, 10), lambda: s.get_matches("p", ["p.x"]), lambda: list(s.iter_matches("p")),
             lambda: export_matchlog(s, ["p"], tmp_path / "log.jsonl")]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            call()
    assert list(tmp_path.iterdir()) == []
    s.close()
