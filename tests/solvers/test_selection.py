"""Selection search: exact pair scores, feasible, never worse, optimal on small games, on time, in MGMatch."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem
from mgmatch.core.rules import RULE_KINDS
from mgmatch.solvers import selection as S
from mgmatch.solvers.base import Budget
from mgmatch.solvers.mgmatch import MGMatchSolver
from mgmatch.solvers.surrogate import GradientPredictor

from .test_exact import brute_force, random_problem
from .test_mgmatch import FixedPredictor, optimum, problems
from .test_tabu import local_optima, random_start

GAMES = [(2, [2, 2], 8), (2, [3, 3], 9), (3, [1, 1, 1], 6), (3, [2, 2, 2], 8), (2, [1, 2], 7), (4, [1, 1, 1, 1], 7)]


def feasible_start(pr: Problem, seed: int) -> np.ndarray | None:
    rng = np.random.default_rng(seed)
    sizes = list(pr.instance.sizes)
    for _ in range(400):
        t = np.full(pr.instance.n, -1)
        t[rng.permutation(pr.instance.n)[:sum(sizes)]] = np.repeat(np.arange(len(sizes)), sizes)
        if pr.checker.feasible(t[None])[0]:
            return t
    return None


def pairs(pr: Problem, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (move, split) the search scores from ``t`` as assignments [C, N], with its scores [C]."""
    sc = S._Scorer(pr)
    sel, bench = np.flatnonzero(t >= 0), np.flatnonzero(t < 0)
    base = sc.base(sel)
    out_t, out_v = [], []
    a, b, m, v = sc.singles(sel, bench, base)
    groups = [(a[:, None], bench[b][:, None], m, v)]
    units = [np.asarray(u) for u in parties(pr.instance).values()]
    in_party = np.zeros(pr.instance.n, dtype=bool)
    for u in units:
        in_party[u] = True
    for A, B in S._moves(sel, bench, units, in_party, np.random.default_rng(0)):
        u, m, v = sc.group(sel, base, A, B)
        groups.append((A[u], B[u], m, v))
    for A, B, m, v in groups:
        for r in range(len(m)):
            x = np.full(pr.instance.n, -1)
            x[sel] = sc.P[m[r]]
            x[B[r]] = sc.P[m[r]][A[r]]
            x[sel[A[r]]] = -1
            out_t.append(x)
            out_v.append(v[r])
    return np.asarray(out_t), np.asarray(out_v)


def test_pair_scores_are_the_objective_and_the_rows_never_drop_a_feasible_pair():
    """The linear-term scores of (move, split) pairs equal the evaluator's, and every one-for-one
    swap with every split that the checker accepts is among the scored pairs."""
    checked = 0
    for seed, (teams, sizes, n) in enumerate(GAMES):
        pr = random_problem(2000 + seed, teams, sizes, n, list(RULE_KINDS), plant=True)
        t = feasible_start(pr, seed)
        if t is None:
            continue
        T, v = pairs(pr, t)
        np.testing.assert_allclose(v, pr.objectives(T), rtol=1e-4, atol=1e-4)
        # brute force: every one-for-one swap and every split of its selection
        sc = S._Scorer(pr)
        sel, bench = np.flatnonzero(t >= 0), np.flatnonzero(t < 0)
        every = []
        for a in range(sel.size):
            for b in bench:
                new = sel.copy()
                new[a] = b
                for m in range(len(sc.P)):
                    x = np.full(n, -1)
                    x[new] = sc.P[m]
                    every.append(x)
        every = np.asarray(every)
        ok = every[pr.checker.feasible(every)]
        scored = {x.tobytes() for x in T.astype(np.int64)}
        assert all(x.astype(np.int64).tobytes() in scored for x in ok)
        checked += 1
    assert checked >= 4


def test_selection_search_on_random_games_with_every_rule_kind_reaches_the_brute_force_optimum():
    found = tested = 0
    for seed, (teams, sizes, n) in enumerate(GAMES):
        pr = random_problem(3000 + seed, teams, sizes, n, list(RULE_KINDS), plant=True)
        best, _ = brute_force(pr)
        start = feasible_start(pr, seed)
        if best is None or start is None:
            continue
        res = S.selection_search(pr, start, time.perf_counter() + 10.0, seed=seed, max_iterations=60)
        assert pr.checker.violations(res.team_of) == []
        assert res.objective == pytest.approx(pr.objective(res.team_of))
        assert pr.objective(start) - 1e-12 <= res.objective <= best + 1e-9
        tested += 1
        found += res.objective >= best - 1e-9
    assert tested >= 4
    # every selection is one swap from the next and each is split exactly: small games are solved
    assert found >= tested - 1


def test_selection_search_leaves_the_local_optima_of_polishing():
    escaped = stuck = 0
    for pr in problems("3v3", 6, seed=21):
        _, obj_opt = optimum(pr)
        if not S.applicable(pr):
            continue
        for t in local_optima(pr, obj_opt, range(4)):
            stuck += 1
            res = S.selection_search(pr, t, time.perf_counter() + 5.0, seed=0, max_iterations=40)
            assert pr.checker.feasible(res.team_of[None])[0]
            escaped += res.objective >= obj_opt - 1e-9
    assert stuck >= 5
    assert escaped >= 0.8 * stuck


def test_selection_search_is_seeded_respects_its_deadline_and_refuses_what_it_cannot_do():
    pr = problems("3v3", 1, seed=5)[0]
    t = random_start(pr, 2)
    a = S.selection_search(pr, t, time.perf_counter() + 10.0, seed=7, max_iterations=20)
    b = S.selection_search(pr, t, time.perf_counter() + 10.0, seed=7, max_iterations=20)
    np.testing.assert_array_equal(a.team_of, b.team_of)
    assert a.iterations == b.iterations
    res = S.selection_search(pr, t, time.perf_counter())  # already past: the start, untouched
    np.testing.assert_array_equal(res.team_of, t)
    assert res.iterations == 0 and not res.improved
    t0 = time.perf_counter()
    S.selection_search(pr, t, t0 + 0.03)
    assert time.perf_counter() - t0 < 0.03 + 0.05  # one iteration at most past the window (loaded CI)
    broken = t.copy()
    broken[broken >= 0] = 0
    with pytest.raises(ValueError):
        S.selection_search(pr, broken, time.perf_counter() + 1.0)
    big = problems("12v12", 1, seed=5)[0]
    assert not S.applicable(big)  # 2.7 million team patterns: left to tabu search and SCIP
    with pytest.raises(ValueError):
        S.selection_search(big, random_start(big, 0), time.perf_counter() + 1.0)


def test_start_from_scores_takes_the_top_players_and_whole_parties():
    for pr in problems("3v3", 4, seed=9):
        n = pr.instance.n
        t = S.start_from_scores(pr, np.arange(n, 0, -1, dtype=float))
        if t is None:
            continue
        assert pr.checker.feasible(t[None])[0]
        for members in parties(pr.instance).values():
            assert len(set((t[members] >= 0).tolist())) == 1  # a party plays whole or not at all
    pr = problems("3v3", 1, seed=9)[0]
    # every player is scored the same: some split of the first six by index is chosen, if feasible
    t = S.start_from_scores(pr, np.zeros(pr.instance.n))
    assert t is None or (t >= 0).sum() == sum(pr.instance.sizes)


def test_mgmatch_starts_the_selection_search_from_the_prediction_or_the_surrogate(monkeypatch, history):
    import mgmatch.solvers.mgmatch.pipeline as mg
    import mgmatch.solvers.mgmatch.prediction as prediction_mod

    tested = 0
    for pr in problems("3v3", 3, seed=21):
        if not S.applicable(pr):
            continue
        t_opt, obj_opt = optimum(pr)
        sol = MGMatchSolver(FixedPredictor(t_opt), policy="pipeline").solve(pr, Budget.of(300))
        assert sol.stats["selection_start"] == "prediction" and "surrogate_ms" not in sol.stats
        assert sol.objective == pytest.approx(obj_opt)
        # the predicted players have no feasible split: the surrogate MIP's answer is the start
        with monkeypatch.context() as m:
            m.setattr(mg, "start_from_scores", lambda problem, score, *a, **k: None)
            sol = MGMatchSolver(FixedPredictor(t_opt), policy="pipeline").solve(pr, Budget.of(300))
            assert sol.stats["selection_start"] == "rounding"  # the rounded prediction is feasible
            m.setattr(prediction_mod, "round_prediction", lambda p, sizes, units=None: np.full(p.shape[0], -1))
            sol = MGMatchSolver(FixedPredictor(t_opt), policy="pipeline").solve(pr, Budget.of(300))
            assert sol.stats["selection_start"] == "surrogate" and sol.stats["surrogate_status"]
            assert sol.stats["selection_iterations"] > 0 and feasible_team(pr, sol)
            # ... and when the surrogate MIP cannot be built in time either: selections drawn by score
            m.setattr(mg, "start_from_scores", lambda problem, score, deadline=None, seed=0, samples=S.START_SAMPLES:
                      None if samples == 0 else S.start_from_scores(problem, score, deadline, seed, samples))
            m.setattr(mg.MipModel, "build", classmethod(lambda cls, *a, **k: (_ for _ in ()).throw(mg.BuildInterrupted("t"))))
            sol = MGMatchSolver(FixedPredictor(t_opt), policy="pipeline").solve(pr, Budget.of(300))
            assert sol.stats["surrogate_status"] == "build_interrupted"
            assert sol.stats["selection_start"] == "sampled" and feasible_team(pr, sol)
        # selection=False: the assignment-level stages as before
        sol = MGMatchSolver(FixedPredictor(t_opt), policy="pipeline", selection=False).solve(pr, Budget.of(300))
        assert "selection_start" not in sol.stats and "polish_ms" in sol.stats
        tested += 1
    assert tested >= 2


def feasible_team(pr: Problem, sol) -> bool:
    from mgmatch.core.solution import team_of_from_teams

    return bool(pr.checker.feasible(team_of_from_teams(pr.instance, sol.teams)[None])[0])


def test_enumeration_hands_over_to_the_selection_search_once_it_has_an_answer():
    from mgmatch.solvers.enumerate import best_assignment
    from mgmatch.solvers.policy import choose

    # the pool with the most assignments (~3·10^5)
    pr = max(problems("3v3", 200, seed=21), key=lambda q: choose(q, None).enumerate_estimate_s or 0.0)
    assert S.applicable(pr)
    # handover already past: it stops at the first chunk with a feasible assignment
    res = best_assignment(pr, time.perf_counter() + 30.0, chunk=2048, handover=time.perf_counter())
    assert not res.complete and res.team_of is not None and pr.checker.feasible(res.team_of[None])[0]
    t0 = time.perf_counter()
    full = best_assignment(pr)
    full_ms = 1e3 * (time.perf_counter() - t0)
    assert full.complete and res.examined < full.examined
    # MGMatch: an enumeration not expected to finish in the budget hands its best to the selection search.
    # The budget is this machine's full enumeration (the handover comes at 30% of it), and at least 60 ms
    # (room to find an answer on a loaded machine); a third of the fixed-rate estimate finished in time here
    budget_ms = max(60.0, full_ms)
    assert 1e3 * choose(pr, None).enumerate_estimate_s > budget_ms  # not expected to finish
    sol = MGMatchSolver(FixedPredictor(full.team_of), policy="enumerate").solve(pr, Budget.of(budget_ms))
    assert sol.stats["enumerate_complete"] is False and sol.stats["selection_start"] == "enumeration"
    assert feasible_team(pr, sol) and sol.objective <= full.objective + 1e-9
    # selection=False: the partial enumeration's best goes to the pipeline as before
    sol = MGMatchSolver(FixedPredictor(full.team_of), policy="enumerate", selection=False).solve(pr, Budget.of(budget_ms))
    assert "selection_start" not in sol.stats and feasible_team(pr, sol)


def test_an_enumeration_with_nothing_feasible_at_the_handover_leaves_the_time_to_the_pipeline(monkeypatch, history):
    """A partial enumeration that has found nothing by its handover stops there (``empty_handover``),
    and the pipeline finds the answer: pools whose few feasible assignments come late in the
    enumeration order went unanswered at 10–20 ms (3v3: 5 of 100 pools at 10 ms, 3 at 20 ms)."""
    import mgmatch.solvers.mgmatch.solver as mg
    from mgmatch.solvers.enumerate import best_assignment

    pr, = problems("3v3", 1, seed=21)
    now = time.perf_counter()
    kept = best_assignment(pr, now + 30.0, chunk=2048, handover=now)  # waits for a feasible one
    assert kept.team_of is not None
    empty = best_assignment(pr, now + 30.0, chunk=2048, handover=now, empty_handover=True)
    assert not empty.complete and empty.team_of is None and empty.examined == 0
    calls = []

    def nothing_by_the_handover(problem, deadline=None, chunk=None, handover=None, empty_handover=False):
        calls.append((handover, empty_handover))
        return best_assignment(problem, deadline, chunk, handover=time.perf_counter(), empty_handover=empty_handover)

    monkeypatch.setattr(mg, "best_assignment", nothing_by_the_handover)
    monkeypatch.setattr(mg, "choose", lambda problem, left, policy: _not_finishing(problem, left))
    sol = MGMatchSolver(GradientPredictor(), policy="enumerate").solve(pr, Budget.of(500))
    assert calls and calls[0][0] is not None and calls[0][1] is True
    assert sol.stats["enumerate_complete"] is False and sol.stats["enumerate_examined"] == 0
    assert sol.status == "feasible" and feasible_team(pr, sol) and "surrogate_status" in sol.stats


def _not_finishing(problem, left):
    """The policy's enumeration choice, with an estimate past the time left (a partial enumeration)."""
    import dataclasses

    from mgmatch.solvers.policy import choose

    c = choose(problem, left, "enumerate")
    return dataclasses.replace(c, enumerate_estimate_s=10 * left)


def test_a_large_bench_is_sampled_within_the_pair_cap(monkeypatch):
    """Hostile sizes: a pool with far more candidates than seats scores a bounded random share of
    the bench per iteration (memory stays bounded), and still answers feasibly and never worse."""
    monkeypatch.setattr(S, "MAX_PAIRS", 200)
    pr = max(problems("3v3", 6, seed=21), key=lambda q: q.instance.n)
    t = random_start(pr, 0)
    seen = []
    real = S._Scorer.singles

    def spy(self, sel, bench, base):
        seen.append(sel.size * bench.size * len(self.P))
        return real(self, sel, bench, base)

    monkeypatch.setattr(S._Scorer, "singles", spy)
    res = S.selection_search(pr, t, time.perf_counter() + 10.0, seed=1, max_iterations=10)
    assert seen and max(seen) <= 200
    assert pr.checker.feasible(res.team_of[None])[0] and res.objective >= pr.objective(t) - 1e-12
