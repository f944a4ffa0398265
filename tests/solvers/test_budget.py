"""Budget: the helpers every solver reads its time from, and every solver measuring from the budget's start."""

from __future__ import annotations

import time

import pytest

from mgmatch.core.engagement import load_engagement
from mgmatch.core.instance import load_instance
from mgmatch.core.problem import Problem
from mgmatch.solvers.base import Budget, get_solver


def test_deadline_is_start_plus_limit_or_the_default():
    b = Budget(250.0, 10.0)
    assert b.deadline() == pytest.approx(10.25)
    assert b.deadline(default_ms=900.0) == pytest.approx(10.25)  # a limit wins over the default
    free = Budget(None, 10.0)
    assert free.deadline() is None and free.unlimited
    assert free.deadline(default_ms=100.0) == pytest.approx(10.1)
    assert free.or_default(100.0) == Budget(100.0, 10.0)
    assert b.or_default(5.0) is b


def test_remaining_and_expired_against_an_explicit_clock():
    b = Budget(100.0, 5.0)
    assert b.remaining(now=5.04) == pytest.approx(0.06)
    assert b.remaining(now=6.0) == 0.0  # never negative
    assert not b.expired(now=5.099) and b.expired(now=5.1)
    assert Budget(None, 5.0).remaining(now=1e9) is None and not Budget(None, 5.0).expired(now=1e9)
    assert b.elapsed_ms(now=5.03) == pytest.approx(30.0)


def test_share_holds_a_fraction_of_what_is_left_from_now():
    b = Budget(100.0, 0.0)
    half = b.share(0.5, now=0.04)  # 60 ms left → a 30 ms budget starting at 0.04
    assert half.start == 0.04 and half.time_limit_ms == pytest.approx(30.0)
    assert half.deadline() == pytest.approx(0.07)
    assert b.share(0.5, now=0.2).time_limit_ms == 0.0  # nothing left: an expired share
    assert Budget(None, 0.0).share(0.3, now=1.0) == Budget(None, 1.0)
    with pytest.raises(ValueError):
        b.share(1.5)


@pytest.mark.parametrize("method", ["random", "exact", "scip", "enumerate", "local-search", "eomm", "game-queue",
                                    "surrogate"])
def test_every_solver_reports_time_from_the_budget_start(example_paths, method):
    # the budget started 40 ms before the solver was called: that time is the caller's, spent
    # (e.g. on queueing), so the reported solve time includes it and the deadline is not moved
    problem = Problem(load_instance(example_paths["instance"]), load_engagement(example_paths["engagement"]))
    budget = Budget(2000.0, time.perf_counter() - 0.040)
    sol = get_solver(method).solve(problem, budget)
    assert sol.status in ("optimal", "feasible")
    assert sol.time_ms >= 40.0
