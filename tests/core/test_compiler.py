"""The compiled standard form: sizes, encodings and the facts the MIP and the encoder rely on."""

from __future__ import annotations

import numpy as np

from mgmatch.core.compiler import ORIGIN_ONE_TEAM, ORIGIN_TEAM_SIZE, CAnd, CLit, compile_instance, cond_eval
from mgmatch.core.instance import parse_instance


def _base(n=6, size=2, teams=2, rules=(), **extra):
    players = []
    for i in range(n):
        p = {"id": f"p{i}", "features": [float(i)], "skill": 1000.0 + 100 * i, "roles": ["a", "b"] if i % 2 else ["a"],
             "pings": {"eu": 20 + 30 * i, "us": 200 - 30 * i}}
        p.update(extra.get(i, {}))
        players.append(p)
    return parse_instance({"teams": teams, "team_size": size, "players": players, "rules": list(rules)})


def test_base_rows_are_the_papers_eq2_and_eq3():
    c = compile_instance(_base())
    one = [r for r in c.rows if r.origin == ORIGIN_ONE_TEAM]
    size = [r for r in c.rows if r.origin == ORIGIN_TEAM_SIZE]
    assert len(one) == 6 and all(r.sense == "<=" and r.rhs == 1 for r in one)
    assert len(size) == 2 and all(r.sense == "==" and r.rhs == 2 for r in size)
    assert c.n_vars == c.n_x == 12 and c.stats()["constraints"] == 8


def test_logical_rule_becomes_nnf_over_x():
    inst = _base(rules=[{"kind": "if", "when": {"not": {"any": [["p0", 0], {"not": ["p1", 1]}]}},
                         "then": {"terms": [["p2", 0, 1]], "sense": "<=", "rhs": 0}}])
    c = compile_instance(inst)
    (lr,) = c.logical
    # NOT (p0@0 OR NOT p1@1) == (NOT p0@0) AND p1@1
    assert lr.cond == CAnd((CLit(c.x(0, 0), True), CLit(c.x(1, 1), False)))
    xhat = np.zeros(c.n_vars)
    xhat[c.x(1, 1)] = 1
    assert cond_eval(lr.cond, xhat)
    xhat[c.x(0, 0)] = 1
    assert not cond_eval(lr.cond, xhat)


def test_high_level_encodings_have_the_documented_size():
    rules = [{"kind": "skill_spread", "max_spread": 250}, {"kind": "max_ping", "max_ms": 100},
             {"kind": "roles", "slots": {"a": 1, "b": 1}}, {"kind": "skill_balance", "max_diff": 50}]
    c = compile_instance(_base(rules=rules))
    st = c.stats()
    # windows: one per distinct skill (6); hosts: 2 regions; role aux: 3 two-role players × 2 teams × 2 roles
    assert st["aux_variables"] == 6 + 2 + 12
    assert c.regions == ["eu", "us"] and len(c.region_vars) == 2
    spread = [r for r in c.rows if r.origin == 0]
    assert len(spread) == 6 + 1
    balance = [r for r in c.rows if r.origin == 3]
    assert len(balance) == 2 and {r.sense for r in balance} == {"<=", ">="}


def test_skill_balance_row_measures_mean_difference():
    c = compile_instance(_base(rules=[{"kind": "skill_balance", "max_diff": 50}]))
    row = next(r for r in c.rows if r.origin == 0 and r.sense == "<=")
    xhat = np.zeros(c.n_vars)
    for i in (0, 1):
        xhat[c.x(i, 0)] = 1
    for i in (4, 5):
        xhat[c.x(i, 1)] = 1
    # team 0 mean 1050, team 1 mean 1450
    assert row.activity(xhat) == np.float64(-400.0)
