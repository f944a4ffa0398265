"""Solver tests start from no measured tabu pace, no repair record and no measured enumeration rate: repair first
(:meth:`~mgmatch.solvers.mgmatch.MGMatchSolver._repair_first`) then takes a solve only after the test's
own solves measured what it needs, whatever ran before in the process."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_repair_history(monkeypatch):
    import mgmatch.solvers.mgmatch as mg
    import mgmatch.solvers.policy as policy

    for name in ("_TABU_PACE", "_REPAIRS", "_REPAIR_SKIPS", "_REPAIR_RETRY_GAP"):
        monkeypatch.setattr(mg, name, {})
    monkeypatch.setattr(policy, "_ENUM_RATES", [])  # and no measured enumeration rate
