"""Size and shape bounds of ``simulate eomm``, ``simulate wu``, ``generate-tickets`` and ``replay``: bad
input exits 2 with one stderr line naming the flag, before any real work (no traceback, no runaway run)."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import one_line_error  # noqa: E402
from cli_helpers import run as cli_run  # noqa: E402

run = partial(cli_run, timeout=120)



# --------------------------------------------------------------------------- simulate eomm


@pytest.mark.service
@pytest.mark.parametrize("pool", ["20002", "1000000", "100000000000000000000000"])
def test_eomm_pool_above_the_world_is_refused(pool):
    line = one_line_error(run("simulate", "eomm", "--pool", pool, "--rounds", "2"))
    assert "--pool" in line and "20,000" in line


@pytest.mark.service
def test_eomm_rounds_are_bounded():
    assert "--rounds" in one_line_error(run("simulate", "eomm", "--pool", "10", "--rounds", "1000000000"))


def test_eomm_pipeline_refuses_a_pool_above_the_world():
    from mgmatch.lab.sim_eomm import simulate

    with pytest.raises(ValueError, match="world"):
        simulate([12], 2, 0, world_size=10)


# --------------------------------------------------------------------------- simulate wu


@pytest.mark.service
@pytest.mark.parametrize("periods", ["1e11", "1e20", "100000001", "100000000000000000000000"])
def test_wu_periods_are_bounded(periods):
    assert "--periods" in one_line_error(run("simulate", "wu", "--periods", periods))


def test_wu_pipeline_refuses_too_many_periods():
    from mgmatch.core.errors import InvalidInput
    from mgmatch.lab.sim_wu import MAX_PERIODS, simulate

    with pytest.raises(InvalidInput):
        simulate(5, 0.5, 1.0, MAX_PERIODS + 1, "greedy")


def test_wu_chunked_draws_match_one_draw(monkeypatch):
    import numpy as np

    from mgmatch.lab import sim_wu

    whole = sim_wu.simulate(2, 0.3, 1.5, 5000, "patient", 3)
    monkeypatch.setattr(sim_wu, "_CHUNK", 7)
    assert sim_wu.simulate(2, 0.3, 1.5, 5000, "patient", 3) == whole
    assert np.isfinite(whole.cost_per_period)


# --------------------------------------------------------------------------- generate-tickets


@pytest.mark.service
def test_generate_tickets_refuses_a_party_larger_than_the_team(tmp_path):
    out = tmp_path / "t.jsonl"
    line = one_line_error(run("generate-tickets", "--out", out, "--preset", "3v3", "--party-share", "0.5",
                              "--max-party", "4", "--duration", "20"))
    assert "--max-party" in line and "does not fit a team of 3" in line
    assert not out.exists()


@pytest.mark.service
@pytest.mark.parametrize("pool", ["", "x" * 100, "Bad Pool", "-lead"])
def test_generate_tickets_refuses_a_bad_pool_name(tmp_path, pool):
    out = tmp_path / "t.jsonl"
    line = one_line_error(run("generate-tickets", "--out", out, "--pool", pool, "--duration", "20"))
    assert line.startswith("mgmatch: --pool") and len(line) < 200
    assert not out.exists()


@pytest.mark.service
def test_generate_tickets_still_writes_a_good_stream(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = run("generate-tickets", "--out", out, "--preset", "3v3", "--party-share", "0.5", "--max-party", "3",
               "--duration", "20", "--pool", "3v3")
    assert proc.returncode == 0, proc.stderr
    assert out.exists()


# --------------------------------------------------------------------------- replay


def _stream_and_config(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = run("generate-tickets", "--out", out, "--duration", "60", "--rate", "1")
    assert proc.returncode == 0, proc.stderr
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"pools": [{"name": "3v3", "teams": 2, "team_size": 3, "engagement_model": "3v3",
                                              "method": "exact", "time_budget_ms": 200, "max_candidates": 12}]}))
    return out, cfg


@pytest.mark.service
@pytest.mark.parametrize("tick", ["1e-9", "1e-6", "0.00001"])
def test_replay_refuses_a_tick_that_runs_too_many_ticks(tmp_path, tick):
    stream, cfg = _stream_and_config(tmp_path)
    line = one_line_error(run("replay", "--tickets", stream, "--config", cfg, "--tick-s", tick))
    assert "--tick-s" in line


@pytest.mark.service
def test_bench_waits_refuses_a_tick_that_runs_too_many_ticks():
    line = one_line_error(run("bench", "waits", "--duration", "30", "--tick-s", "1e-9"))
    assert "--tick-s" in line


def test_replay_tick_budget_counts_live_time_only():
    from types import SimpleNamespace as NS

    from mgmatch.lab.commands.replay import _live_span_s

    cfg = NS(pools=[NS(name="a", ticket_ttl_s=10.0)])
    arrivals = [NS(time=0.0, pool="a", ttl_s=None), NS(time=5.0, pool="a", ttl_s=None),
                NS(time=1000.0, pool="a", ttl_s=2.0)]
    # [0, 15] ∪ [1000, 1002] plus the 10 s drain
    assert _live_span_s(arrivals, [cfg]) == pytest.approx(15 + 2 + 10)
