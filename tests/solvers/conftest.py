"""Every solver test starts from a fresh MGMatch history (no measured tabu pace, repair record, stage time
or predictor time) and no measured enumeration rate: repair first
(:meth:`~mgmatch.solvers.mgmatch.MGMatchSolver._repair_first`) then takes a solve only after the test's
own solves measured what it needs, whatever ran before in the process. Solvers built during the test
read and record into ``history``, which a test takes as a fixture to set up or inspect."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def history(monkeypatch):
    import mgmatch.solvers.policy as policy
    from mgmatch.solvers.mgmatch import SolveHistory, using

    monkeypatch.setattr(policy, "_ENUM_RATES", [])  # no measured enumeration rate
    with using(SolveHistory()) as fresh:
        yield fresh
