"""The checker remembers single verdicts (a solve checks its start more than once) without ever
giving another assignment's verdict; benchmarks drop what solves left on a problem."""

from __future__ import annotations

import numpy as np

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
