"""Bad input to the ``mgmatch bench …`` commands: exit 2 and one line naming the flag, before any work.

Every case here once ran forever, allocated without bound, or ended in a traceback (or exit 0 with every
request an error); each must now be refused up front, so these run in about a second each.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import one_line_error  # noqa: E402
from cli_helpers import run as cli_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

run = partial(cli_run, timeout=60)



HUGE = "99999999999999999999"

CASES = [
    # 1. time limits, budgets and ladders: finite, > 0, ≤ a day
    (["exact", "--methods", "scip", "--time-limit-ms", "inf"], "--time-limit-ms"),
    (["exact", "--methods", "scip", "--time-limit-ms", "1e300"], "--time-limit-ms"),
    (["batch", "--budget-ms", "1e300"], "--budget-ms"),
    (["quality", "--time-limit-ms", "inf"], "--time-limit-ms"),
    (["quality", "--time-limit-ms", "1e300"], "--time-limit-ms"),
    (["quality", "--budgets", "inf"], "--budgets"),
    (["quality", "--budgets", "10,1e300"], "--budgets"),
    (["quality", "--ladder-ms", "inf"], "--ladder-ms"),
    (["quality", "--exact-time-limit-s", "inf"], "--exact-time-limit-s"),
    # 2. an empty ladder with methods to plot
    (["quality", "--progress-methods", "random", "--ladder-ms", ""], "--ladder-ms"),
    # bench predictor and bench engagement-fidelity (their commands live in train.py and fit.py)
    (["predictor", "--count", HUGE], "--count"),
    (["predictor", "--threads", "-1"], "--threads"),
    (["predictor", "--preset", "nope"], "--preset"),
    (["predictor", "--predictor", "12v12", "--preset", "3v3", "--count", "2"], "--preset"),
    (["engagement-fidelity", "--count", HUGE], "--count"),
    (["engagement-fidelity", "--model", str(ROOT / "core" / "presets" / "engagement-12v12.json"), "--count", "1"], "--model"),
    # 4. huge counts and sizes
    (["quality", "--count", HUGE], "--count"),
    (["exact", "--count", HUGE], "--count"),
    (["eomm", "--pool", "10000000000"], "--pool"),
    (["eomm", "--pools", HUGE], "--pools"),
    (["game-queue", "--sizes", "100000000000000"], "--sizes"),
    (["game-queue", "--ops", "100000000000000000000"], "--ops"),
    # 5. unreachable or malformed Redis URLs
    (["backfill", "--store", "redis", "--redis-url", "redis://127.0.0.1:1/0"], "--redis-url"),
    (["backfill", "--store", "redis", "--redis-url", "notaurl"], "--redis-url"),
    (["cluster", "--tickets", "12", "--redis-url", "redis+cluster://127.0.0.1:1"], "--redis-url"),
    # backfill's help lists only the pools it takes
    (["backfill", "--pool", "12v12-deep"], "--pool"),
    # 6. bench service: checked before a server starts
    (["service", "--stores", "memory", "--method", "bogus", "--format", "json"], "--method"),
    (["service", "--stores", "memory", "--time-limit-ms", "inf"], "--time-limit-ms"),
    (["service", "--stores", "memory", "--time-limit-ms", "20000"], "--time-limit-ms"),
    (["service", "--stores", "memory", "--ingest-pool", "nope"], "--ingest-pool"),
    (["service", "--stores", "memory", "--solve-rate", "inf"], "--solve-rate"),
    (["service", "--stores", "memory", "--solve-s", "inf"], "--solve-s"),
    (["service", "--stores", "memory", "--ingest-s", "1e12"], "--ingest-s"),
    # bench push: bounded load, a restart only where there is a Redis of its own
    (["push", "--rate", "inf"], "--rate"),
    (["push", "--rate", "nan"], "--rate"),
    (["push", "--duration-s", HUGE], "--duration-s"),
    (["push", "--store", "nope"], "--store"),
    (["push", "--redis-restart"], "--redis-restart"),
    # bench ready with kills: checked before any process starts
    (["ready", "--kill-every-s", "0.05"], "--kill-every-s"),
    (["ready", "--kill-every-s", "inf"], "--kill-every-s"),
    (["ready", "--kill-every-s", "-1"], "--kill-every-s"),
    (["ready", "--kill-every-s", "2", "--solvers", "99"], "--solvers"),
    # bench lift: the seeds of a multi-run
    (["lift", "--seeds", "0,x"], "--seeds"),
    (["lift", "--seeds", "1,1"], "--seeds"),
    (["lift", "--seeds", ","], "--seeds"),
    (["lift", "--seeds", "-1"], "--seeds"),
]


@pytest.mark.service
@pytest.mark.parametrize(("args", "flag"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bench_refuses_bad_input_naming_the_flag(args, flag, monkeypatch):
    monkeypatch.delenv("MGMATCH_MAX_TIME_LIMIT_MS", raising=False)
    line = one_line_error(run("bench", *args))
    assert flag in line, line


@pytest.mark.service
def test_backfill_help_lists_only_the_pools_it_takes():
    proc = run("bench", "backfill", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "12v12-deep" not in proc.stdout
