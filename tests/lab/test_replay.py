"""Ticket streams (mgmatch-tickets/v1), the simulated-clock driver, ``mgmatch replay``,
``mgmatch generate-tickets`` and ``mgmatch bench waits``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mgmatch.app.config import parse_config
from mgmatch.core.errors import InvalidInput
from mgmatch.lab.replay import (
    STREAM_FORMAT,
    generate_stream,
    parse_arrival,
    read_stream,
    simulate,
    summarize,
    write_stream,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
from cli_helpers import run as cli_run  # noqa: E402


def run(*args) -> subprocess.CompletedProcess:
    return cli_run(*args, timeout=600)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _pool(**kw):
    return {"name": "3v3", "teams": 2, "team_size": 3, "engagement_model": "3v3", "method": "exact",
            "time_budget_ms": 200, "max_candidates": 12, **kw}


def _config(tmp_path, name="a.yaml", **kw):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"pools": [_pool(**kw)]}))
    return path


# --------------------------------------------------------------------------- the stream format

GOOD = {"time": 1.5, "pool": "3v3", "players": [{"id": "a", "features": [0.0]}]}


@pytest.mark.parametrize(("line", "field"), [
    ("{not json", "line"),
    (json.dumps([1, 2]), "ticket"),
    (json.dumps({**GOOD, "time": -1}), "time"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "time"}), "time"),
    (json.dumps({**GOOD, "pool": ""}), "pool"),
    (json.dumps({**GOOD, "players": []}), "players"),
    (json.dumps({**GOOD, "players": [{"id": "a"}]}), "players[0].features"),
    (json.dumps({**GOOD, "players": [{"id": "a", "features": [0]}, {"id": "a", "features": [1]}]}), "players[1].id"),
    (json.dumps({**GOOD, "ttl_s": 0}), "ttl_s"),
    (json.dumps({**GOOD, "format": "other/v1"}), "format"),
    (json.dumps({**GOOD, "colour": "red"}), "colour"),
])
def test_a_bad_line_names_its_line_and_field(tmp_path, line, field):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with pytest.raises(InvalidInput) as info:
        read_stream(path)
    assert info.value.field == f"{path} line 2, {field}", str(info.value)


def test_stream_and_config_files_with_a_byte_order_mark_are_read(tmp_path):
    """A ticket stream saved as UTF-8 with a BOM failed on its first line ("not JSON")."""
    from mgmatch.app.config import load_config

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "time": 0.5}) + "\n").encode())
    assert [a.time for a in read_stream(path)] == [0.5, 1.5]
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(b"\xef\xbb\xbf" + _config(tmp_path).read_bytes())
    assert [p.name for p in load_config(cfg).pools] == ["3v3"]


def test_stream_lines_are_sorted_by_time_and_keep_their_names():
    a = parse_arrival({**GOOD, "id": "late", "time": 9}, 1)
    assert a.name == "late" and a.players == [{"id": "a", "features": [0.0]}]
    assert parse_arrival(GOOD, 7).name == "line-7"


def test_generated_streams_are_seeded_and_readable(tmp_path):
    one = generate_stream("3v3", "3v3", 2.0, 20.0, seed=3, party_share=0.5, max_party=3)
    assert one == generate_stream("3v3", "3v3", 2.0, 20.0, seed=3, party_share=0.5, max_party=3)
    assert one != generate_stream("3v3", "3v3", 2.0, 20.0, seed=4, party_share=0.5, max_party=3)
    assert one[0]["format"] == STREAM_FORMAT
    assert {len(t["players"]) for t in one} <= {1, 2, 3} and any(len(t["players"]) > 1 for t in one)
    ids = [p["id"] for t in one for p in t["players"]]
    assert len(ids) == len(set(ids))
    steady = generate_stream("3v3", "3v3", 2.0, 10.0, seed=0, arrivals="steady")
    assert [t["time"] for t in steady] == [0.5 * k for k in range(1, 21)]
    path = tmp_path / "s.jsonl"
    write_stream(one, path)
    back = read_stream(path)
    assert [a.time for a in back] == [t["time"] for t in one] and back[0].players[0]["features"]


# --------------------------------------------------------------------------- the driver


def test_simulated_run_matches_everyone_of_a_steady_stream_with_real_waits():
    lines = generate_stream("3v3", "3v3", 1.0, 60.0, seed=0, arrivals="steady")
    arrivals = [parse_arrival(x, n) for n, x in enumerate(lines, 1)]
    cfg = parse_config({"pools": [_pool()]})
    res = simulate(cfg, arrivals)
    out = summarize(res)
    assert out["tickets"] == 60 and out["matches"] == 10 and out["players_matched"] == 60
    assert out["players_unmatched"] == 0 and out["refused"] == 0
    # one arrival a second, a match of 6 as soon as the 6th arrives: waits 0–5 s (plus the 50 ms tick)
    waits = sorted(s.matched_at - s.created_at for s in res.tickets)
    assert waits[0] >= 0 and waits[-1] <= 5.06
    assert out["wait_p50_s"] == pytest.approx(2.5, abs=0.6)
    assert out["engagement_mean"] is not None and out["skill_gap_mean"] is not None
    # the simulated clock ran the whole stream, not the wall clock
    assert 59 <= out["simulated_s"] <= 62
    assert summarize(simulate(cfg, arrivals))["wait_p50_s"] == out["wait_p50_s"]  # repeatable


def test_simulated_ttl_expires_tickets_that_cannot_match():
    lines = [{"time": float(k), "pool": "3v3", "players": [{"id": f"p{k}", "features": [0.0] * 196}], "ttl_s": 5}
             for k in range(4)]
    lines.append({"time": 20.0, "pool": "3v3", "players": [{"id": "q", "features": [0.0] * 196}]})
    lines += [{"time": 20.0 + k, "pool": "3v3", "players": [{"id": f"r{k}", "features": [0.0] * 196}]}
              for k in range(1, 6)]
    arrivals = [parse_arrival(x, n) for n, x in enumerate(lines, 1)]
    res = simulate(parse_config({"pools": [_pool()]}), arrivals)
    out = summarize(res)
    # the first four expired before the others came: one match of the last six
    assert out["matches"] == 1 and out["players_matched"] == 6 and out["players_unmatched"] == 4
    assert out["tickets_expired"] == 4


def test_players_left_unmatched_are_counted_by_reason():
    # a roles pool, and nobody plays healer: 8 players queue, none can be matched; the run ends once fewer
    # than a match's worth of them is left (3 expired by then)
    roles = {"kind": "roles", "slots": {"tank": 1, "healer": 1, "dps": 1}}
    lines = [{"time": float(k), "pool": "3v3", "ttl_s": 30,
              "players": [{"id": f"p{k}", "features": [0.0] * 196, "roles": ["tank" if k % 2 else "dps"]}]}
             for k in range(8)]
    res = simulate(parse_config({"pools": [_pool(rules=[roles])]}), [parse_arrival(x, n) for n, x in
                                                                      enumerate(lines, 1)])
    out = summarize(res)
    assert out["matches"] == 0 and out["players_unmatched"] == 8 and out["tickets_expired"] == 3
    assert out["unmatched_reasons"] == [
        {"reason": "not enough healer players: a match needs N players who play healer, N queued", "players": 8}]
    assert res.tickets[0].reason == "not enough healer players: a match needs 2 players who play healer, 0 queued"


# --------------------------------------------------------------------------- the commands


@pytest.mark.service
def test_replay_compares_two_configs_as_json_and_as_a_table(tmp_path):
    stream = tmp_path / "s.jsonl"
    proc = run("generate-tickets", "--out", stream, "--rate", "1", "--duration", "60", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tickets"] > 40
    a = _config(tmp_path, "a.yaml")
    b = _config(tmp_path, "b.yaml", dispatch={"policy": "batch", "params": {"interval_s": 10}})
    proc = run("replay", "--tickets", stream, "--config", a, "--config", b, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ra, rb = out["results"]
    assert ra["config"] == str(a) and rb["config"] == str(b)
    for r in (ra, rb):
        assert r["players_matched"] == 6 * r["matches"]
        assert r["players_matched"] + r["players_unmatched"] == ra["players_matched"] + ra["players_unmatched"]
    # rounds every 10 s make players wait for the round
    assert rb["wait_p50_s"] > ra["wait_p50_s"]
    proc = run("replay", "--tickets", stream, "--config", a, "--config", b)
    assert proc.returncode == 0, proc.stderr
    assert "matches formed" in proc.stdout and "wait p99 (s)" in proc.stdout and "b.yaml" in proc.stdout


@pytest.mark.service
def test_replay_refuses_bad_files_with_one_line(tmp_path):
    a = _config(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"time": 0, "pool": "3v3", "players": [{"id": "a", "features": [0.0] * 196}]}) + "\n"
                   + json.dumps({"time": 1, "pool": "5v5", "players": [{"id": "b", "features": [0.0] * 196}]}) + "\n")
    assert one_line_error(run("replay", "--tickets", bad, "--config", a)) == \
        f"mgmatch: {bad} line 2, pool: unknown pool '5v5'; the config has 3v3"
    bad.write_text(json.dumps({"time": 0, "pool": "3v3", "players": [{"id": "a", "features": [0.0] * 5}]}) + "\n")
    line = one_line_error(run("replay", "--tickets", bad, "--config", a))
    assert line.startswith(f"mgmatch: {bad} line 1, players[0].features: expected 196 numbers"), line
    line = one_line_error(run("replay", "--tickets", tmp_path / "none.jsonl", "--config", a))
    assert "none.jsonl" in line and "no such file" in line
    line = one_line_error(run("replay", "--tickets", bad, "--config", a, "--config", a, "--config", a))
    assert "--config" in line


@pytest.mark.service
def test_bench_waits_on_a_steady_stream_meets_the_target(tmp_path):
    out = tmp_path / "w.json"
    proc = run("bench", "waits", "--arrivals", "steady", "--rate", "1", "--duration", "240", "--seed", "0",
               "--json", out)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    # 240 tickets: the first dozen arrive before the pool's throughput is known, and every 6th completes
    # a match on the tick it arrives (no relative error; its estimate says 0)
    assert res["scored"] > 150 and res["zero_wait"] > 30
    assert res["zero_wait_estimated_zero"] >= 0.9 * res["zero_wait"]
    assert res["estimate"]["median_rel_error"] <= 0.3
    assert res["estimate"]["median_rel_error"] < res["queue_drain_baseline"]["median_rel_error"]
    assert "estimated_wait_s" in proc.stdout
    line = one_line_error(run("bench", "waits", "--pool", "nope", "--duration", "10"))
    assert "--pool" in line


@pytest.mark.service
def test_generate_tickets_bounds_the_stream(tmp_path):
    """--rate 1e12 wrote tickets until killed; a party larger than any ticket was accepted."""
    line = one_line_error(run("generate-tickets", "--out", tmp_path / "s.jsonl", "--rate", "1e12", "--duration", "1"))
    assert "--rate × --duration" in line and not (tmp_path / "s.jsonl").exists()
    line = one_line_error(run("generate-tickets", "--out", tmp_path / "s.jsonl", "--max-party", "100",
                              "--party-share", "0.5"))
    assert "--max-party" in line
    assert "--seed" in one_line_error(run("generate-tickets", "--out", tmp_path / "s.jsonl", "--seed", "-1"))
