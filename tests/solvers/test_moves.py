"""The compiled neighbourhood scorer against the checker and the engagement model (every rule kind)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mgmatch.core.compiler import parties
from mgmatch.core.problem import Problem
from mgmatch.core.rules import RULE_KINDS
from mgmatch.solvers.moves import Moves, MoveScorer, neighbourhood, scorer_of
from mgmatch.solvers.polish import polish
from mgmatch.solvers.tabu import tabu_search

from .test_exact import random_problem
from .test_mgmatch import candidate_moves, problems


def random_state(pr: Problem, rng: np.random.Generator) -> np.ndarray:
    """A random assignment that fills every team (rules may break)."""
    t = np.full(pr.instance.n, -1, dtype=np.int64)
    perm = rng.permutation(pr.instance.n)
    k = 0
    for j, size in enumerate(pr.instance.sizes):
        t[perm[k:k + size]] = j
        k += size
    return t


def random_moves(cur: np.ndarray, teams: int, rng: np.random.Generator, count: int) -> Moves:
    """Moves of 1–5 players to any position, team sizes not kept (the scorer must count those too)."""
    ptr, players, pos = [0], [], []
    for _ in range(count):
        k = int(rng.integers(1, min(5, cur.size) + 1))
        who = rng.choice(cur.size, k, replace=False)
        players += who.tolist()
        pos += rng.integers(-1, teams, k).tolist()
        ptr.append(len(players))
    return Moves(np.asarray(ptr, dtype=np.int64), np.asarray(players, dtype=np.int64), np.asarray(pos, dtype=np.int64))


def reference_excess(scorer: MoveScorer, t: np.ndarray) -> float:
    """How far outside its bounds each plain row of assignment ``t`` is (in the row's scale), plus
    the party members away from their party's most common position, plus the far players of the
    nearest ping region when every region has one: from scratch, for the kernel's incremental one
    to be checked against."""
    P = scorer.D + 1
    act = np.zeros(scorer.lo.size)
    for i, j in enumerate(t):
        k = i * P + (j if j >= 0 else scorer.D)
        np.add.at(act, scorer.ridx[scorer.ptr[k]:scorer.ptr[k + 1]], scorer.rcoef[scorer.ptr[k]:scorer.ptr[k + 1]])
    plain = scorer.row_if < 0
    out = np.maximum(scorer.lo - act, 0.0) + np.maximum(act - scorer.hi, 0.0)
    total = float((out[plain] / scorer.rscale[plain]).sum())
    for k in range(scorer.party_ptr.size - 1):  # party members away from the party's most common position
        pos = t[scorer.party_members[scorer.party_ptr[k]:scorer.party_ptr[k + 1]]]
        total += pos.size - np.unique(pos, return_counts=True)[1].max()
    if scorer.has_ping and (t >= 0).any():
        far = scorer.far[t >= 0].sum(axis=0)
        if far.min() >= 0.5:
            total += float(far.min())
    return total


def assert_parity(pr: Problem, cur: np.ndarray, moves: Moves) -> int:
    """The scorer's verdicts and values equal the checker's and the model's; the feasible count."""
    scorer = MoveScorer(pr)
    vals, broken, _, excess = scorer.score(cur, moves)
    cand = np.stack([moves.apply(cur, m) for m in range(len(moves))])
    feasible = pr.checker.feasible(cand)
    bad = np.flatnonzero(feasible != (broken == 0))
    assert bad.size == 0, (pr.checker.violations(cand[bad[0]]), int(broken[bad[0]]))
    assert (broken >= 0).all()
    np.testing.assert_allclose(excess, [reference_excess(scorer, t) for t in cand], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(vals, pr.objectives(cand), rtol=1e-5, atol=1e-5)
    return int(feasible.sum())


@pytest.mark.parametrize("seed", range(12))
def test_scorer_agrees_with_the_checker_on_every_rule_kind(seed):
    rng = np.random.default_rng(seed)
    teams = int(rng.integers(2, 4))
    size = int(rng.integers(1, 4))
    n = teams * size + int(rng.integers(1, 6))
    pr = random_problem(seed, teams, [size] * teams, n, list(RULE_KINDS), plant=True)
    # from the planted witness (feasible: its neighbours are often feasible too) and random states
    units = [np.asarray(m) for m in parties(pr.instance).values()]
    witness = pr.extra["witness"]
    assert MoveScorer(pr).score(witness, Moves(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                               np.zeros(0, dtype=np.int64)))[1].tolist() == [0]
    for cur in [witness] + [random_state(pr, rng) for _ in range(3)]:
        assert_parity(pr, cur, neighbourhood(cur, units, rotations=200, rng=rng))
        assert_parity(pr, cur, random_moves(cur, teams, rng, 150))


@pytest.mark.parametrize("seed", range(4))
def test_the_touched_rows_path_agrees_too(monkeypatch, seed):
    """Pools with more than DENSE_ROWS rows track only the rows a move touches: the same verdicts."""
    import mgmatch.solvers.moves as moves_mod

    monkeypatch.setattr(moves_mod, "DENSE_ROWS", 0)
    rng = np.random.default_rng(50 + seed)
    pr = random_problem(200 + seed, 2, [3, 3], 9, list(RULE_KINDS), plant=True)
    assert MoveScorer(pr).Lr.shape[2] == 0  # the touched-rows path
    units = [np.asarray(m) for m in parties(pr.instance).values()]
    for cur in [pr.extra["witness"], random_state(pr, rng)]:
        assert_parity(pr, cur, neighbourhood(cur, units, rotations=200, rng=rng))
        assert_parity(pr, cur, random_moves(cur, 2, rng, 150))


def test_scorer_agrees_with_the_checker_on_the_presets():
    rng = np.random.default_rng(3)
    feasible = 0
    for preset in ("3v3", "12v12", "12v12-deep"):
        for pr in problems(preset, 2, seed=11):
            cur = random_state(pr, rng)
            units = [np.asarray(m) for m in parties(pr.instance).values()]
            assert_parity(pr, cur, neighbourhood(cur, units, rotations=300, rng=rng))
            # from a feasible state (a polished witness) many neighbours are feasible
            sol = tabu_search(pr, cur, time.perf_counter() + 2.0, seed=0, max_iterations=60)
            if sol.team_of is not None:
                feasible += assert_parity(pr, sol.team_of, neighbourhood(sol.team_of, units, 300, rng))
    assert feasible > 0


def test_rules_on_teams_the_match_lacks_and_unequal_sizes():
    rng = np.random.default_rng(5)
    for seed in range(4):
        pr = random_problem(100 + seed, 3, [1, 2, 3], 9, list(RULE_KINDS), plant=True)
        cur = random_state(pr, rng)
        assert_parity(pr, cur, random_moves(cur, 3, rng, 300))


def test_neighbourhood_is_the_polish_neighbourhood():
    pr = problems("12v12", 1, seed=7)[0]
    cur = random_state(pr, np.random.default_rng(1))
    units = [np.asarray(m) for m in parties(pr.instance).values()]
    moves = neighbourhood(cur, units)
    mine = {moves.apply(cur, m).tobytes() for m in range(len(moves))}
    theirs = {row.tobytes() for row in candidate_moves(cur, units).astype(np.int64)}
    assert mine == theirs and len(moves) > 0


def test_rotations_are_three_player_cycles_that_keep_team_sizes():
    pr = problems("12v12", 1, seed=8)[0]
    cur = random_state(pr, np.random.default_rng(2))
    moves = neighbourhood(cur, [], rotations=100, rng=np.random.default_rng(0))
    widths = np.diff(moves.ptr)
    assert (widths == 3).sum() == 100
    for m in np.flatnonzero(widths == 3):
        t = moves.apply(cur, int(m))
        assert (t != cur).sum() == 3
        assert [int((t == j).sum()) for j in range(2)] == list(pr.instance.sizes)


def party_whole_states():
    """(seed, problem, parties, a random party-whole rounding, in-party mask) for the 12v12 pools of
    seeds 30–35 that have parties."""
    from mgmatch.solvers.mgmatch import round_prediction

    for seed in range(6):
        pr = problems("12v12", 1, seed=30 + seed)[0]
        units = [np.asarray(m) for m in parties(pr.instance).values()]
        if not units:
            continue
        rng = np.random.default_rng(seed)
        cur = round_prediction(rng.random((pr.instance.n, pr.instance.teams)), pr.instance.sizes, units)
        in_party = np.zeros(cur.size, dtype=bool)
        for u in units:
            in_party[u] = True
        yield seed, pr, units, cur, in_party


def test_party_exchanges_move_a_whole_party_and_as_many_players_of_no_party_back():
    checked = 0
    # parties whole (a random party-whole rounding), so that they can be exchanged
    for seed, pr, units, cur, in_party in party_whole_states():
        base = len(neighbourhood(cur, units))
        moves = neighbourhood(cur, units, 0, np.random.default_rng(seed), party_draws=5, teams=pr.instance.teams)
        whole = [u for u in units if (cur[u] == cur[u[0]]).all()]
        expected = 0
        for u in whole:  # 5 draws per other position that has enough players of no party
            for b in range(-1, pr.instance.teams):
                expected += 5 * (b != cur[u[0]] and int(((cur == b) & ~in_party).sum()) >= u.size)
        assert len(moves) - base == expected
        for m in range(base, len(moves)):  # the exchanges come after the polish neighbourhood
            t = moves.apply(cur, m)
            moved = np.flatnonzero(t != cur)
            party = [u for u in whole if set(u.tolist()) <= set(moved.tolist())]
            assert len(party) == 1, "each exchange moves exactly one whole party"
            u = party[0]
            others = np.setdiff1d(moved, u)
            assert others.size == u.size and not in_party[others].any()
            assert (t[u] == cur[others[0]]).all() and (t[others] == cur[u[0]]).all()
            assert [int((t == j).sum()) for j in range(pr.instance.teams)] == list(pr.instance.sizes)
            checked += 1
    assert checked > 50


def test_a_split_party_is_gathered_in_one_move():
    """A party split over two positions: for every position with enough players of no party, some
    party exchange moves the members not there yet to it, and as many players of no party from
    there take exactly their places (team sizes kept)."""
    checked = 0
    for seed, pr, units, cur, in_party in party_whole_states():
        u = max(units, key=len)
        # split it: its first member trades places with a player of no party elsewhere
        other = np.flatnonzero(~in_party & (cur != cur[u[0]]))[0]
        cur[u[0]], cur[other] = cur[other], cur[u[0]]
        assert len(set(cur[u].tolist())) == 2
        base = len(neighbourhood(cur, units))
        moves = neighbourhood(cur, units, 0, np.random.default_rng(seed), party_draws=4, teams=pr.instance.teams)
        for b in range(-1, pr.instance.teams):
            away = u[cur[u] != b]
            if int(((cur == b) & ~in_party).sum()) < away.size:
                continue
            found = 0
            for m in range(base, len(moves)):  # the exchanges come after the polish neighbourhood
                t = moves.apply(cur, m)
                if not (t[u] == b).all() or set(np.flatnonzero(t != cur).tolist()) & (set(u.tolist()) - set(away.tolist())):
                    continue
                moved = np.flatnonzero(t != cur)
                others = np.setdiff1d(moved, u)
                assert others.size == away.size and not in_party[others].any() and (cur[others] == b).all()
                assert sorted(t[others].tolist()) == sorted(cur[away].tolist())
                assert [int((t == j).sum()) for j in range(pr.instance.teams)] == list(pr.instance.sizes)
                found += 1
            assert found == 4  # one per draw
            checked += 1
    assert checked >= 6


def test_excess_ranks_the_neighbour_nearer_to_feasible_higher():
    """States breaking the skill balance alike (one rule): the larger the gap, the larger the excess."""
    null = Moves(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    compared = 0
    for seed in range(8):
        pr = random_problem(200 + seed, 2, [4, 4], 10, ["skill_balance"], plant=True)
        scorer = MoveScorer(pr)
        order = np.argsort(scorer.skill)
        lopsided = np.full(pr.instance.n, -1, dtype=np.int64)  # the weakest on team 0, the strongest on team 1
        lopsided[order[:4]] = 0
        lopsided[order[-4:]] = 1
        milder = lopsided.copy()  # the strongest of team 0 and the weakest of team 1 traded
        milder[order[3]], milder[order[-4]] = 1, 0
        s_lop, s_mild = scorer.score(lopsided, null), scorer.score(milder, null)
        if s_lop.broken[0] and s_mild.broken[0]:
            assert s_lop.broken[0] == s_mild.broken[0]  # as many rules broken: only the excess tells them apart
            assert s_lop.excess[0] > s_mild.excess[0] > 0
            compared += 1
    assert compared >= 3


def test_tabu_marks_moves_of_tabu_players():
    pr = problems("3v3", 1, seed=9)[0]
    cur = random_state(pr, np.random.default_rng(4))
    moves = neighbourhood(cur, [])
    until = np.zeros(cur.size, dtype=np.int64)
    until[int(np.flatnonzero(cur >= 0)[0])] = 10
    tabu = scorer_of(pr).score(cur, moves, until, it=5).tabu
    expect = [bool((until[moves.players(m)] > 5).any()) for m in range(len(moves))]
    assert tabu.tolist() == expect and any(expect) and not all(expect)


def test_a_scorer_that_is_wrong_never_leaks_a_broken_answer(monkeypatch):
    """The checker has the last word: a scorer calling every move feasible cannot make tabu search
    or polishing return an assignment that breaks a rule."""
    pr = problems("12v12", 1, seed=12)[0]
    scorer = scorer_of(pr)
    real = scorer.score

    def lying(cur, moves, until=None, it=0, proxy=False):
        sc = real(cur, moves, until, it, proxy=proxy)
        return sc._replace(broken=np.zeros_like(sc.broken), excess=np.zeros_like(sc.excess))

    monkeypatch.setattr(scorer, "score", lying)
    start = tabu_search(pr, random_state(pr, np.random.default_rng(0)), time.perf_counter() + 5.0,
                        max_iterations=80).team_of
    assert start is None or pr.checker.feasible(start[None])[0]
    if start is not None:
        res = polish(pr, start, deadline=time.perf_counter() + 2.0)
        assert pr.checker.feasible(res.team_of[None])[0]
        assert res.objective >= pr.objective(start) - 1e-12


def test_party_whole_rounding_is_the_greedy_of_unit_means():
    """Greedy rounding with parties whole, against a plain reading of its definition: units (the
    parties, then every other player alone, by index) ranked by their members' mean p per team,
    ties by unit then team order; a unit goes where its team has room; the rest player by player."""
    from mgmatch.solvers.mgmatch import round_prediction

    def reference(p, sizes, units):
        N, D = p.shape
        free = np.asarray(sizes).copy()
        t = np.full(N, -1)
        groups = [np.asarray(u) for u in units if len(u) > 1]
        grouped = {int(i) for g in groups for i in g}
        groups += [np.asarray([i]) for i in range(N) if i not in grouped]
        ranked = sorted(((-p[g].mean(axis=0)[j], u, j) for u, g in enumerate(groups) for j in range(D)))
        for _, u, j in ranked:
            g = groups[u]
            if t[g[0]] < 0 and free[j] >= g.size:
                t[g], free[j] = j, free[j] - g.size
        for _, i, j in sorted((-p[i, j], i, j) for i in range(N) for j in range(D)):
            if free.any() and t[i] < 0 and free[j] > 0:
                t[i], free[j] = j, free[j] - 1
        return t

    rng = np.random.default_rng(11)
    for trial in range(300):
        N, D = int(rng.integers(6, 60)), int(rng.integers(2, 4))
        sizes = [int(rng.integers(1, N // D // 2 + 2))] * D
        if sum(sizes) > N:
            continue
        # ties too: p drawn from {0, 0.5, 1} on every third trial
        p = rng.random((N, D)) if trial % 3 else rng.integers(0, 3, (N, D)) / 2.0
        perm, units, k = rng.permutation(N), [], 0
        while k < N:
            s = int(rng.integers(1, 4))
            units.append(perm[k:k + s])
            k += s
        assert np.array_equal(round_prediction(p, sizes, units), reference(p, sizes, units)), trial
