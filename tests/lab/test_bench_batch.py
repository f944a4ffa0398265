"""`mgmatch bench batch`: the seeded pools it builds, its JSON, and its one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mgmatch.core.presets import load_model
from mgmatch.core.problem import Problem
from mgmatch.lab.bench_batch import pool_instance, run

RULE_KINDS = {"roles", "skill_balance", "max_ping", "party_together"}


def test_a_pool_is_seeded_player_free_and_the_right_size():
    a = pool_instance("3v3", 40, 4, 5)
    b = pool_instance("3v3", 40, 4, 5)
    assert a.to_json() == b.to_json()
    assert pool_instance("3v3", 40, 4, 6).to_json() != a.to_json()
    assert a.n == 40 and len(set(a.ids)) == 40
    assert {r.to_json()["kind"] for r in a.rules} <= RULE_KINDS  # what a pool's config may hold
    party_sizes = {}
    for p in a.players:
        if p.party is not None:
            party_sizes[p.party] = party_sizes.get(p.party, 0) + 1
    assert all(n >= 2 for n in party_sizes.values())


def test_bad_pool_sizes_name_the_field():
    from mgmatch.core.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        pool_instance("12v12", 60, 3, 0)
    assert err.value.field == "candidates"
    with pytest.raises(InvalidInput) as err:
        pool_instance("3v3", 120, 4, 0)
    assert err.value.field == "candidates"
    for preset, over in (("ffa-32", 129), ("br-100", 301)):  # the large presets' pools: up to 128 / 300
        with pytest.raises(InvalidInput) as err:
            pool_instance(preset, over, 2, 0)
        assert err.value.field == "candidates" and preset in err.value.message


def test_run_reports_both_modes_on_the_same_pools():
    res = run("3v3", 24, 2, 400.0, 2, 11)
    assert set(res["summary"]) == {"sequential", "joint"}
    assert [(r["pool"], r["mode"]) for r in res["rows"]] == [(0, "sequential"), (0, "joint"),
                                                            (1, "sequential"), (1, "joint")]
    for mode, s in res["summary"].items():
        assert 0 <= s["feasible_pct"] <= 100 and s["time_p50_ms"] <= s["time_p99_ms"], mode
    assert res["joint_wins"] + res["ties"] + res["joint_losses"] == 2
    # the totals are the engagement model's values of feasible matches
    problem = Problem(pool_instance("3v3", 24, 2, 11), load_model("3v3"), "3v3")
    assert problem.instance.n == 24
    assert all(r["total"] >= 0 for r in res["rows"])


sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
from cli_helpers import run as cli_run  # noqa: E402


def _cli(*args: str) -> subprocess.CompletedProcess:
    return cli_run("bench", "batch", *args, timeout=300)


@pytest.mark.service
@pytest.mark.parametrize("args, needle", [
    (["--candidates", "10"], "--candidates"),
    (["--matches", "0"], "--matches"),
    (["--budget-ms", "0"], "--budget-ms"),
    (["--preset", "5v5"], "--preset"),
    (["--method", "nope"], "--method"),
    (["--method", "mgmatch"], "--method"),
    (["--pools", "0"], "--pools"),
    (["--preset", "3v3", "--candidates", "128"], "--candidates"),
    (["--preset", "ffa-32", "--candidates", "129"], "--candidates"),
    (["--preset", "br-100", "--candidates", "301"], "--candidates"),
    (["--preset", "br-100", "--candidates", "150", "--matches", "2"], "--candidates"),
])
def test_bad_flags_exit_2_with_one_line(args, needle):
    out = _cli(*args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr


@pytest.mark.service
def test_the_command_writes_its_json(tmp_path):
    path = tmp_path / "batch.json"
    out = _cli("--candidates", "12", "--matches", "2", "--pools", "1", "--budget-ms", "300", "--json", str(path))
    assert out.returncode == 0, out.stderr
    assert "joint" in out.stdout and "sequential" in out.stdout
    res = json.loads(path.read_text())
    assert res["candidates"] == 12 and res["matches"] == 2 and len(res["rows"]) == 2


def test_a_free_for_all_pool_has_only_the_rules_its_parts_have():
    # ffa-32: teams of one, no roles and no squad balance; the pool still holds the planted lobby
    inst = pool_instance("ffa-32", 64, 1, seed=2)
    kinds = {r.kind for r in inst.rules}
    assert "roles" not in kinds and "skill_balance" not in kinds
    assert inst.n == 64 and inst.teams == 32


def test_large_lobby_pools_have_the_presets_sizes_and_rules():
    br = pool_instance("br-100", 300, 2, seed=1)
    assert br.n == 300 and br.teams == 25
    kinds = {r.kind for r in br.rules}
    assert {"role_min", "skill_balance", "max_ping", "party_together"} <= kinds and "include" not in kinds
    ffa = pool_instance("ffa-32", 128, 2, seed=1)
    assert ffa.n == 128 and "skill_spread" in {r.kind for r in ffa.rules}
    # with the planted matches' long waiters: one include rule per planted match, its players in the pool
    inc = [r for r in pool_instance("ffa-32", 128, 2, seed=1, include=True).rules if r.kind == "include"]
    assert len(inc) == 2 and all(p.startswith(f"q{q}.") for q, r in enumerate(inc) for p in r.players)


@pytest.mark.service
def test_both_modes_form_large_lobbies_in_the_bench(tmp_path):
    path = tmp_path / "batch.json"
    out = _cli("--preset", "ffa-32", "--candidates", "128", "--matches", "2", "--pools", "1", "--budget-ms", "1000",
               "--method", "lobby", "--json", str(path))
    assert out.returncode == 0, out.stderr
    res = json.loads(path.read_text())
    for mode in ("sequential", "joint"):
        assert res["summary"][mode]["matches_mean"] == 2 and res["summary"][mode]["feasible_pct"] == 100, mode
