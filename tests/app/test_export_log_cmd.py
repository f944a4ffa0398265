"""`mgmatch export-log`: bad arguments exit 2 with one line on stderr and write nothing; a Redis store exports."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import free_port  # noqa: E402

from mgmatch.app.commands.export_log import parse_since  # noqa: E402
from mgmatch.app.store import MatchRecord, MatchResult, RedisStore, Ticket, new_ticket_id  # noqa: E402
from mgmatch.cli import main  # noqa: E402


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("MGMATCH_STORE", "MGMATCH_REDIS_URL", "MGMATCH_CONFIG", "MGMATCH_KEY_PREFIX"):
        monkeypatch.delenv(var, raising=False)


def test_since_takes_unix_seconds_or_iso_8601():
    assert parse_since("1795400000.5") == 1795400000.5
    assert parse_since("2026-11-23T18:00:00Z") == parse_since("2026-11-23T18:00:00") == 1795456800.0
    assert parse_since("2026-11-23T19:00:00+01:00") == 1795456800.0


def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys):
    out = tmp_path / "log.jsonl"
    dead = f"redis://127.0.0.1:{free_port()}/0"
    cases = [
        (["--out", str(out)], "--store"),  # the default memory store cannot be exported from outside the service
        (["--out", str(out), "--store", "memory"], "--store"),
        (["--out", str(out), "--store", "disk"], "store"),
        (["--out", str(out), "--store", "redis", "--since", "yesterday"], "--since"),
        (["--out", str(out), "--store", "redis", "--since", "nan"], "--since"),
        (["--out", str(out), "--store", "redis", "--pool", "Bad Pool"], "--pool"),
        (["--out", str(tmp_path / "no" / "log.jsonl"), "--store", "redis"], "--out"),
        (["--out", str(tmp_path), "--store", "redis"], "--out"),
        (["--out", str(out), "--store", "redis", "--config", str(tmp_path / "none.yaml")], "none.yaml"),
        (["--out", str(out), "--store", "redis", "--redis-url", dead], "--redis-url"),
        (["--store", "redis"], "--out"),
    ]
    for args, needle in cases:
        t0 = time.time()
        code, _, err = _run(capsys, "export-log", *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in err, (args, err)
        assert time.time() - t0 < 30
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.redis
def test_exports_the_pools_of_the_config_from_redis(tmp_path, capsys, redis_url, monkeypatch):
    url, prefix = redis_url
    monkeypatch.setenv("MGMATCH_KEY_PREFIX", prefix)
    store = RedisStore.from_url(url, prefix=prefix)
    now = time.time()
    mids = []
    for k in range(3):
        ids = [store.create(Ticket(new_ticket_id("3v3"), "3v3", [{"id": f"x{k}{s}", "features": [0.5] * 3}],
                                   now, now + 60))[0].id for s in "ab"]
        assert store.claim("3v3", ids, f"c{k}", now + 30)
        mid = f"3v3.c{k}-0-t"
        rec = MatchRecord(mid, "3v3", [[{"id": f"x{k}a", "features": [0.5] * 3}], [{"id": f"x{k}b", "features": [0.5] * 3}]])
        assert store.commit("3v3", f"c{k}", ids, [], MatchResult(mid, [[f"x{k}a"], [f"x{k}b"]], {ids[0]: 0, ids[1]: 1}),
                            rec)
        mids.append(mid)
    store.put_match_result("3v3", mids[0], {"engagement": 1.0})
    store.put_match_result("3v3", mids[2], {"engagement": 2.0})
    out = tmp_path / "log.jsonl"
    code, stdout, err = _run(capsys, "export-log", "--out", str(out), "--store", "redis", "--redis-url", url)
    assert code == 0, err
    assert json.loads(stdout) == {"out": str(out), "matches": 2, "per_pool": {"3v3": 2, "12v12": 0},
                                  "without_result": {"3v3": 1, "12v12": 0}}
    assert [json.loads(x)["match_id"] for x in out.read_text().splitlines()] == [mids[0], mids[2]]
    later = store.get_match("3v3", mids[2]).time
    code, stdout, _ = _run(capsys, "export-log", "--out", str(out), "--store", "redis", "--redis-url", url,
                           "--pool", "3v3", "--since", repr(later))
    assert code == 0 and json.loads(stdout)["per_pool"] == {"3v3": 1}
    store.close()


@pytest.mark.redis
def test_a_redis_url_alone_implies_the_redis_store(tmp_path, capsys, redis_url, monkeypatch):
    """`export-log --redis-url URL --out F` exited 2 asking for `--store redis` as well."""
    url, prefix = redis_url
    monkeypatch.setenv("MGMATCH_KEY_PREFIX", prefix)
    store = RedisStore.from_url(url, prefix=prefix)
    now = time.time()
    ids = [store.create(Ticket(new_ticket_id("3v3"), "3v3", [{"id": f"u{s}", "features": [0.5] * 3}],
                               now, now + 60))[0].id for s in "ab"]
    assert store.claim("3v3", ids, "c0", now + 30)
    mid = "3v3.c0-0-t"
    rec = MatchRecord(mid, "3v3", [[{"id": "ua", "features": [0.5] * 3}], [{"id": "ub", "features": [0.5] * 3}]])
    assert store.commit("3v3", "c0", ids, [], MatchResult(mid, [["ua"], ["ub"]], {ids[0]: 0, ids[1]: 1}), rec)
    store.put_match_result("3v3", mid, {"engagement": 1.0})
    out = tmp_path / "log.jsonl"
    code, stdout, err = _run(capsys, "export-log", "--redis-url", url, "--out", str(out))
    assert code == 0, err
    assert json.loads(stdout)["per_pool"]["3v3"] == 1
    assert [json.loads(x)["match_id"] for x in out.read_text().splitlines()] == [mid]
    # the URL from the environment does the same
    monkeypatch.setenv("MGMATCH_REDIS_URL", url)
    code, stdout, err = _run(capsys, "export-log", "--out", str(out), "--pool", "3v3")
    assert code == 0 and json.loads(stdout)["matches"] == 1, err
    # a store given outright still wins: the memory store cannot be exported from outside the service
    code, _, err = _run(capsys, "export-log", "--redis-url", url, "--store", "memory", "--out", str(out))
    assert code == 2 and "--store" in err.strip().splitlines()[0], err
    store.close()
