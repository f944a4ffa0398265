"""The Alman–McKay game queue against brute force; role approximation and partition within ρ."""

from __future__ import annotations

import collections
import itertools
import json
import math

import numpy as np
import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Player
from mgmatch.solvers.dispatch import PoolShape, Waiting, make_policy
from mgmatch.solvers.game_queue import GameQueue, Params, best_split, d_p, imbalance, partition, v_q
from mgmatch.solvers.game_queue.roles import RoleGameQueue, RolePlayer, exhaustive_role_game, role_game_approx

INF = math.inf


def brute_best(skills: dict[str, float], times: dict[str, float], P: Params) -> float:
    """Least g over every game (every pair of disjoint teams), straight from the definitions."""
    ids = list(skills)
    s = np.asarray([skills[i] for i in ids])
    t = np.asarray([times[i] for i in ids])
    teams = np.asarray(list(itertools.combinations(range(len(ids)), P.k)))
    a, b = np.triu_indices(len(teams), 1)
    members = np.concatenate([teams[a], teams[b]], axis=1)
    ok = np.asarray([len(set(row)) == 2 * P.k for row in members.tolist()])
    a, b, members = a[ok], b[ok], members[ok]
    sx, sy = s[teams[a]], s[teams[b]]
    if math.isinf(P.p):
        d = np.abs(sx.max(axis=1) - sy.max(axis=1))
    else:
        d = np.abs((sx ** P.p).sum(axis=1) ** (1 / P.p) - (sy ** P.p).sum(axis=1) ** (1 / P.p))
    z = s[members]
    dev = np.abs(z - z.mean(axis=1, keepdims=True))
    v = dev.max(axis=1) if math.isinf(P.q) else np.mean(dev ** P.q, axis=1) ** (1 / P.q)
    g = P.alpha * d + v + P.beta * t[members].min(axis=1)
    return float(g.min())


def test_imbalance_components_match_the_definitions():
    assert v_q([1, 3], 1) == pytest.approx(1.0)
    assert v_q([0, 0, 0, 4], 2) == pytest.approx(math.sqrt((9 + 3 * 1) / 4))
    assert v_q([0, 0, 0, 4], INF) == pytest.approx(3.0)
    assert d_p([3, 4], [5, 0], 2) == pytest.approx(0.0)
    assert d_p([1, 9], [5, 5], 1) == pytest.approx(0.0)
    assert d_p([1, 9], [5, 5], INF) == pytest.approx(4.0)
    d, mask = best_split(np.array([1.0, 2.0, 3.0, 4.0]), 1.0)  # {1,4} vs {2,3}
    assert d == 0.0 and list(mask) == [True, False, False, True]
    assert Params(5, alpha=1, q=2).window == math.floor(8 * 5 ** 1.5)
    assert Params(2, alpha=0, q=INF).window == 8
    assert Params(3, alpha=1, q=1).rho == pytest.approx(2 * 3 * 2)


@pytest.mark.parametrize("seed", range(6))
def test_best_game_equals_exhaustive_search_through_inserts_and_deletes(seed):
    rng = np.random.default_rng(seed)
    k = 2 if seed % 3 else 3
    P = Params(k, alpha=[0.0, 0.5, 1.0, 2.0][seed % 4], p=[1.0, 2.0, INF][seed % 3], q=[1.0, 2.0, INF, 3.0][seed % 4])
    n = 16 if k == 2 else 11  # the k = 2 windows (W = 8…24) are shorter than the list for α small
    skills = {f"p{i}": float(x) for i, x in enumerate(rng.random(n) ** 2 * 100)}
    if seed % 2:  # ties in skill
        skills = {pid: float(round(s / 10) * 10) for pid, s in skills.items()}
    times = collections.defaultdict(float)
    gq = GameQueue(P.k, P.alpha, P.p, P.q)
    for pid, s in skills.items():
        gq.insert(pid, s, 0.0)
    live = dict(skills)
    for step in range(6):
        g = gq.best_game()
        assert g.priority == pytest.approx(brute_best(live, times, P), abs=1e-9)
        assert len(g.team_x) == len(g.team_y) == k and set(g.players) <= set(live)
        assert g.imbalance == pytest.approx(imbalance([live[i] for i in g.team_x], [live[i] for i in g.team_y], P))
        if step % 2 == 0:
            pid = sorted(live)[int(rng.integers(len(live)))]
            gq.delete(pid)
            del live[pid]
        else:
            pid = f"new{step}"
            live[pid] = float(rng.random() * 100)
            gq.insert(pid, live[pid], 0.0)


def test_time_sensitive_priority_equals_exhaustive_search():
    rng = np.random.default_rng(7)
    for trial in range(4):
        P = Params(2, alpha=1.0, p=1.0, q=2.0, beta=[0.5, 2.0, 10.0, 0.1][trial])
        skills = {f"p{i}": float(x) for i, x in enumerate(rng.random(12) * 50)}
        times = {pid: float(rng.random() * 10) for pid in skills}
        gq = GameQueue.bulk(list(skills), list(skills.values()), list(times.values()),
                            k=2, alpha=P.alpha, p=P.p, q=P.q, beta=P.beta)
        g = gq.best_game()
        assert g.priority == pytest.approx(brute_best(skills, times, P), abs=1e-9)


def test_a_long_waiter_wins_with_beta_and_not_without():
    # a tight group that arrived late and a slightly looser group holding an early entrant
    skills = [100, 100, 100, 100, 300, 302, 304, 306]
    times = [50, 50, 50, 50, 0, 50, 50, 50]
    ids = [f"p{i}" for i in range(8)]
    plain = GameQueue.bulk(ids, skills, times, k=2, beta=0.0).best_game()
    timed = GameQueue.bulk(ids, skills, times, k=2, beta=1.0).best_game()
    assert set(plain.players) == {"p0", "p1", "p2", "p3"}
    assert "p4" in timed.players


def test_incremental_queue_matches_a_fresh_build_after_random_operations():
    rng = np.random.default_rng(11)
    kw = dict(k=3, alpha=1.0, p=1.0, q=2.0)
    n = 400
    info = {f"p{i}": float(s) for i, s in enumerate(np.clip(rng.normal(1000, 200, n), 0, None))}
    gq = GameQueue.bulk(list(info), list(info.values()), None, **kw)
    nid = n
    for r in range(300):
        op = r % 3
        if op == 0:
            pid = f"p{nid}"
            nid += 1
            info[pid] = float(max(0.0, rng.normal(1000, 200)))
            gq.insert(pid, info[pid], 0.0)
        elif op == 1:
            pid = list(info)[int(rng.integers(len(info)))]
            del info[pid]
            gq.delete(pid)
        elif r % 30 == 2:
            fresh = GameQueue.bulk(list(info), list(info.values()), None, **kw)
            assert gq.best_game().priority == pytest.approx(fresh.best_game().priority, abs=1e-9)
    assert len(gq) == len(info)


def test_pop_and_best_games_are_disjoint_and_leave_the_queue_intact():
    rng = np.random.default_rng(2)
    ids = [f"p{i}" for i in range(40)]
    gq = GameQueue.bulk(ids, rng.random(40) * 100, None, k=2)
    games = gq.best_games(3)
    assert len(games) == 3
    members = [p for g in games for p in g.players]
    assert len(set(members)) == 12 and len(gq) == 40
    assert games[0].imbalance == gq.best_game().imbalance
    first = gq.pop_game()
    assert len(gq) == 36 and all(p not in gq for p in first.players)


def test_bad_input_raises_invalid_input():
    gq = GameQueue(2)
    gq.insert("a", 1.0)
    with pytest.raises(InvalidInput, match="already"):
        gq.insert("a", 2.0)
    with pytest.raises(InvalidInput, match="skill"):
        gq.insert("b", -1.0)
    with pytest.raises(InvalidInput, match="not in the queue"):
        gq.delete("zz")
    with pytest.raises(InvalidInput, match="^q"):
        GameQueue(2, q=0.5)
    with pytest.raises(InvalidInput, match="^k"):
        GameQueue(0)
    assert gq.best_game() is None  # fewer than 2k players


def test_role_approximation_is_within_rho_of_the_best_role_feasible_game():
    rng = np.random.default_rng(5)
    checked = 0
    for trial in range(40):
        k = 2 if trial % 2 else 3
        roles = [f"r{i}" for i in range(k)]
        P = Params(k, alpha=[0.0, 1.0, 2.0][trial % 3], p=[1.0, 2.0, INF][trial % 3], q=[1.0, 2.0, INF][(trial // 3) % 3])
        n = 2 * k + int(rng.integers(0, 4))
        players = [RolePlayer(f"p{i}", float(rng.random() * 100),
                              frozenset(r for r in roles if rng.random() < 0.5) or frozenset([roles[i % k]]))
                   for i in range(n)]
        exact = exhaustive_role_game(players, roles, P)
        approx = role_game_approx(players, roles, P)
        if exact is None:
            assert approx is None
            continue
        checked += 1
        assert approx.imbalance <= P.rho * exact.imbalance + 1e-9
        assert approx.imbalance >= exact.imbalance - 1e-9
    assert checked >= 25


def test_role_queue_returns_role_feasible_games():
    q = RoleGameQueue(["tank", "heal"], alpha=1.0)
    q.insert("t1", 100, ["tank"])
    q.insert("t2", 105, ["tank"])
    q.insert("h1", 300, ["heal"])
    q.insert("d1", 101, ["tank", "heal"])
    g = q.best_game()  # t1, t2 tanks; d1 and h1 the healers
    assert set(g.players) == {"t1", "t2", "d1", "h1"}
    q.insert("h2", 110, ["heal"])
    g = q.best_game()
    assert set(g.players) == {"t1", "t2", "d1", "h2"}  # h1 is far away
    with pytest.raises(InvalidInput, match="roles"):
        q.insert("x", 1, ["dps"])


def test_offline_partition_is_within_rho_of_the_optimal_partition():
    rng = np.random.default_rng(9)
    for trial in range(5):
        P = Params(2, alpha=[0.5, 1.0, 2.0, 0.0, 1.0][trial], p=1.0, q=[2.0, 1.0, INF, 2.0, 2.0][trial])
        skills = rng.random(12) * 100
        ids = [f"p{i}" for i in range(12)]
        part = partition(ids, skills, P)
        assert sorted(p for g in part.games for p in g.players) == sorted(ids)
        # optimal partition into 3 games, by enumeration over 4-subsets and their best split
        f = {}
        for sub in itertools.combinations(range(12), 4):
            z = np.sort(skills[list(sub)])
            f[sub] = P.alpha * best_split(z, P.p)[0] + v_q(z, P.q)
        opt = math.inf
        for a in itertools.combinations(range(1, 12), 3):
            first = (0, *a)
            rest = [i for i in range(12) if i not in first]
            for b in itertools.combinations(rest[1:], 3):
                second = (rest[0], *b)
                third = tuple(i for i in rest if i not in second)
                opt = min(opt, max(f[first], f[second], f[third]))
        assert opt - 1e-9 <= part.worst <= P.rho * opt + 1e-9


def test_partition_leaves_the_remainder_unassigned():
    part = partition([f"p{i}" for i in range(11)], list(range(11)), Params(2))
    assert len(part.games) == 2 and len(part.unassigned) == 3


def test_game_queue_policy_puts_the_best_game_in_the_candidate_pool():
    rng = np.random.default_rng(4)
    skills = rng.random(30) * 1000
    waiting = [Waiting(f"t{i}", (Player(id=f"u{i}", features=(0.0,), skill=float(s)),), enqueued_at=float(i))
               for i, s in enumerate(skills)]
    pol = make_policy("game_queue", max_candidates=10)
    d = pol.decide(waiting, PoolShape.uniform(2, 2), now=100.0)
    best = GameQueue.bulk([f"u{i}" for i in range(30)], skills, None, k=2).best_game()
    assert d.solve and {f"t{p[1:]}" for p in best.players} <= set(d.tickets)
    assert len(d.tickets) <= 10
    # incremental: the matched players leave, the next decision sees the rest
    left = [w for w in waiting if w.ticket_id not in set(d.tickets[:4])]
    d2 = pol.decide(left, PoolShape.uniform(2, 2), now=101.0)
    assert d2.solve and not set(d2.tickets) & set(d.tickets[:4])
    strict = make_policy("game_queue", max_imbalance=0.0)
    assert not strict.decide(waiting, PoolShape.uniform(2, 2), now=100.0).solve


def _cli(argv: list[str]) -> int:
    from mgmatch.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code


def test_bench_cli_writes_json(tmp_path, capsys):
    out = tmp_path / "gq.json"
    assert _cli(["bench", "game-queue", "--sizes", "200,500", "--k", "3", "--ops", "30", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert [r["n"] for r in res["results"]] == [200, 500]
    assert all(r["insert_us"] > 0 and r["delete_us"] > 0 and r["query_us"] > 0 for r in res["results"])
    assert "insert µs" in capsys.readouterr().out
    assert _cli(["bench", "game-queue", "--sizes", "3", "--k", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2k" in err[0]


def test_game_queue_method_returns_the_least_imbalanced_feasible_game(example_paths):
    from mgmatch.core.engagement import load_engagement
    from mgmatch.core.instance import load_instance
    from mgmatch.core.problem import Problem
    from mgmatch.core.solution import team_of_from_teams
    from mgmatch.solvers.base import Budget
    from mgmatch.solvers.game_queue import GameQueueSolver

    inst = load_instance(example_paths["instance"])
    problem = Problem(inst, load_engagement(example_paths["engagement"]))
    sol = GameQueueSolver().solve(problem, Budget.of(5000))
    assert sol.status == "feasible" and sol.method == "game-queue"
    team_of = team_of_from_teams(inst, sol.teams, "teams")
    assert problem.checker.violations(team_of) == []
    skill = {p.id: p.skill for p in inst.players}
    P = Params(3)
    assert sol.imbalance == pytest.approx(imbalance([skill[i] - min(skill.values()) for i in sol.teams[0]],
                                                    [skill[i] - min(skill.values()) for i in sol.teams[1]], P))
    # no feasible game is less imbalanced
    lo = min(skill.values())
    for sub in itertools.combinations(inst.ids, 6):
        for xs in itertools.combinations(sub, 3):
            ys = [i for i in sub if i not in xs]
            t = np.full(inst.n, -1)
            t[[inst.index[i] for i in xs]] = 0
            t[[inst.index[i] for i in ys]] = 1
            if imbalance([skill[i] - lo for i in xs], [skill[i] - lo for i in ys], P) < sol.imbalance - 1e-9:
                assert not problem.checker.feasible(np.stack([t, np.where(t >= 0, 1 - t, -1)])).any()
    with pytest.raises(InvalidInput, match="k"):
        Params(12)
