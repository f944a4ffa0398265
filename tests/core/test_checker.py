"""The checker remembers single verdicts (a solve checks its start more than once) without ever
giving another assignment's verdict; benchmarks drop what solves left on a problem."""

from __future__ import annotations

import numpy as np
import pytest

from mgmatch.core import checker as checker_mod
from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem


def _problem() -> Problem:
    inst = generate_instances("12v12", 1, 5)[0]
    name, model = resolve_model(inst)
    return Problem(inst, model, model_name=name)


def _assignments(pr: Problem, count: int, seed: int) -> np.ndarray:
    """Random team fills: most break some rule, a few (from the exact optimum's neighbourhood) none."""
    rng = np.random.default_rng(seed)
    N, sizes = pr.instance.n, pr.instance.sizes
    out = []
    for _ in range(count):
        t = np.full(N, -1, dtype=np.int64)
        order = rng.permutation(N)
        k = 0
        for j, s in enumerate(sizes):
            t[order[k:k + s]] = j
            k += s
        out.append(t)
    return np.asarray(out)


def test_single_verdicts_are_remembered_and_always_the_batch_verdict(monkeypatch):
    monkeypatch.setattr(checker_mod, "FEASIBLE_MEMO", 8)  # overflow the memo in this test
    pr = _problem()
    from mgmatch.solvers.base import Budget, get_solver

    best = get_solver("surrogate").solve(pr, Budget.of(2000))
    assert best.has_assignment
    from mgmatch.core.solution import team_of_from_teams

    good = team_of_from_teams(pr.instance, best.teams)
    batch = np.vstack([good[None], _assignments(pr, 40, 1)])
    truth = pr.checker.rule_masks(batch).all(0)
    assert truth[0] and not truth.all()
    for _ in range(2):  # the second pass reads remembered verdicts (and the memo overflowed on the way)
        for t, ok in zip(batch, truth, strict=True):
            assert pr.checker.feasible(t[None]).tolist() == [bool(ok)]
            assert pr.checker.feasible(t.astype(np.int32)[None]).tolist() == [bool(ok)]  # keyed by value
    assert len(pr.checker._feasible_memo) <= 8
    # an array changed in place after its check is judged afresh, not by the old verdict
    t = good.copy()
    assert pr.checker.feasible(t[None])[0]
    t[np.flatnonzero(t >= 0)[0]] = -1  # one team short of its size
    assert not pr.checker.feasible(t[None])[0]
    # batches are judged whole, as before
    assert pr.checker.feasible(batch).tolist() == truth.tolist()


def test_forget_solves_drops_what_solves_built_and_keeps_the_encoding():
    pr = _problem()
    from mgmatch.solvers.base import Budget, get_solver

    get_solver("surrogate").solve(pr, Budget.of(50))
    pr.checker.feasible(_assignments(pr, 1, 2))
    emb, comp, chk = pr.embeddings, pr.compiled, pr.checker
    assert pr.extra and chk._feasible_memo
    pr.forget_solves()
    assert not pr.extra and "_feasible_memo" not in chk.__dict__
    assert pr.embeddings is emb and pr.compiled is comp and pr.checker is chk


def test_one_rule_visitor_dispatches_every_kind_and_fails_loudly():
    """Every rule kind reaches its own visitor method; a kind a visitor does not handle, or an object that
    is no rule, is an error naming it, never a silent skip."""
    from mgmatch.core.rules import RULE_KINDS, RuleVisitor, parse_rule

    examples = {
        "linear": {"kind": "linear", "terms": [["a", 0, 1.0]], "sense": "<=", "rhs": 1},
        "if": {"kind": "if", "when": ["a", 0], "then": {"terms": [["b", 0, 1.0]], "sense": "<=", "rhs": 0}},
        "roles": {"kind": "roles", "slots": {"tank": 1}},
        "role_min": {"kind": "role_min", "role": "tank", "min": 1},
        "role_max": {"kind": "role_max", "role": "tank", "max": 1},
        "skill_balance": {"kind": "skill_balance", "max_diff": 10},
        "skill_spread": {"kind": "skill_spread", "max_spread": 10},
        "party_together": {"kind": "party_together"},
        "avoid": {"kind": "avoid", "players": ["a", "b"], "scope": "team"},
        "max_ping": {"kind": "max_ping", "max_ms": 100},
        "include": {"kind": "include", "players": ["a"]},
    }
    assert sorted(examples) == sorted(RULE_KINDS)

    class Names(RuleVisitor[str]):
        def other(self, rule, *args, **kwargs):
            return f"other:{rule.kind}:{args}"

    class Roles(RuleVisitor[str]):
        def visit_roles(self, rule):
            return "roles"

    for kind, obj in examples.items():
        rule = parse_rule(obj, "rules[0]")
        assert Names().visit(rule, 7) == f"other:{kind}:(7,)"
        if kind == "roles":
            assert Roles().visit(rule) == "roles"
        else:
            with pytest.raises(NotImplementedError, match=f"Roles does not handle rule kind '{kind}'"):
                Roles().visit(rule)
    with pytest.raises(TypeError, match="not a rule kind: dict"):
        Names().visit({"kind": "linear"})


def test_the_checker_compiler_and_move_scorer_handle_every_rule_kind():
    """The visitors that must give every kind its meaning (the checker's verdict and explanation, the
    compiler's rows, the move scorer's rows) each have their own method for every kind."""
    from mgmatch.core.checker import _Explains, _Holds
    from mgmatch.core.compiler import _RuleRows as CompilerRows
    from mgmatch.core.rules import RULE_KINDS, RuleVisitor
    from mgmatch.solvers.moves import _RuleRows as ScorerRows

    for visitor in (_Holds, _Explains, CompilerRows, ScorerRows):
        missing = [k for k in RULE_KINDS if getattr(visitor, f"visit_{k}") is getattr(RuleVisitor, f"visit_{k}")]
        assert missing == [], f"{visitor.__qualname__} has no method for {missing}"
