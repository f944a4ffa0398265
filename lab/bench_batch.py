"""Benchmark of several matches from one pool: joint partition against one match after another.

Pools (seeded) are built the way a matchmaker pool looks: candidates of one preset's world with the
pool's player-free rules only (roles, role_min, party_together, skill_balance, skill_spread, max_ping).
Each pool is made of ``matches`` generated single-match instances (each with its planted feasible match, so M matches
always exist) plus further generated players up to ``candidates``; players keep their instance's
skill bracket, so a pool holds several brackets as a real queue does. The pool's rules are the
loosest of its parts' settings (the largest ``max_diff`` and ``max_ms``), which every planted match
satisfies (``role_min``: the smallest minimum; ``skill_spread``, kept where the preset always sets
one, as ``ffa-32``: the largest window). Pools hold at
most 100 candidates, the large-lobby presets' as many as their presets define (:data:`LARGE_CANDIDATES`).

For each pool, both modes get the SAME total budget: ``joint`` (:func:`mgmatch.solvers.batch.solve_joint`)
gets all of it for one solve; ``sequential`` (:func:`~mgmatch.solvers.batch.solve_sequential`,
the matchmaker's old path) solves one match with ``method`` under ``budget / M``, removes its
players and repeats. Reported per mode: total engagement (the engagement model's value, summed
over the matches formed), matches formed, wall time p50/p99, feasible % (every match passes the
checker and no player is in two), and how often joint beats sequential.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import Instance, parse_instance
from mgmatch.core.presets import generate_with_truth, get_preset, load_model
from mgmatch.core.problem import Problem
from mgmatch.core.rules import (
    IncludeRule,
    MaxPingRule,
    PartyTogetherRule,
    RoleMinRule,
    RolesRule,
    SkillBalanceRule,
    SkillSpreadRule,
)
from mgmatch.solvers.base import Budget, method_info, methods
from mgmatch.solvers.batch import BatchResult, solve_joint, solve_sequential, verify

MAX_CANDIDATES = 100
#: larger pools for the large-lobby presets, the sizes their presets define: ``br-100`` 150–300
#: candidates (one or two lobbies of 100), ``ffa-32`` 48–64 per lobby (two lobbies: 96–128)
LARGE_CANDIDATES = {"br-100": 300, "ffa-32": 128}


def max_candidates(preset: str) -> int:
    """Most candidates a pool of ``preset`` may have here."""
    return LARGE_CANDIDATES.get(preset, MAX_CANDIDATES)


def pool_instance(preset: str, candidates: int, matches: int, seed: int, include: bool = False) -> Instance:
    """One pool of ``candidates`` players with room for ``matches`` planted feasible matches; ``include``:
    with the planted matches' ``include`` rules too (their long waiters, who must play in some match)."""
    p = get_preset(preset)
    S = p.teams * p.team_size
    if matches < 1:
        raise InvalidInput("matches", f"expected an integer ≥ 1, got {matches}")
    cap = max_candidates(preset)
    if candidates > cap:
        raise InvalidInput("candidates", f"at most {cap} for {preset} (a pool's max_candidates), got {candidates}")
    if candidates < matches * S:
        raise InvalidInput("candidates", f"{matches} matches of {S} players need at least {matches * S} candidates, "
                                         f"got {candidates}")
    parts = generate_with_truth(preset, matches + (candidates // p.pool[0]) + 1, seed)
    players: list[dict] = []
    extras: list[dict] = []
    max_diff, max_ms, max_spread, slots = 0.0, 0.0, 0.0, None
    role_min: dict[str, int] = {}
    waiters: list[dict] = []
    seen_balance = seen_ping = seen_spread = False

    def renamed(q: int, pl) -> dict:
        d = pl.to_json()
        d["id"] = f"q{q}.{d['id']}"
        if d.get("party") is not None:
            d["party"] = f"q{q}.{d['party']}"
        d.pop("waited_s", None)
        return d

    for q, g in enumerate(parts):
        inst = g.instance
        for r in inst.rules:
            if isinstance(r, SkillBalanceRule) and q < matches:
                max_diff, seen_balance = max(max_diff, r.max_diff), True
            elif isinstance(r, MaxPingRule) and q < matches:
                max_ms, seen_ping = max(max_ms, r.max_ms), True
            elif isinstance(r, SkillSpreadRule) and q < matches and p.spread_prob >= 1.0:
                max_spread, seen_spread = max(max_spread, r.max_spread), True
            elif isinstance(r, RoleMinRule):
                role_min[r.role] = min(role_min.get(r.role, r.min), r.min)
            elif isinstance(r, RolesRule):
                slots = dict(r.slots)
            elif isinstance(r, IncludeRule) and include and q < matches:
                waiters.append(IncludeRule(tuple(f"q{q}.{pid}" for pid in r.players)).to_json())
        for i, pl in enumerate(inst.players):
            if q < matches and g.witness[i] >= 0:
                players.append(renamed(q, pl))
            else:
                extras.append(renamed(q, pl))
    players += extras[:candidates - len(players)]
    # a party cut by the truncation is smaller; one left alone is no party
    count: dict[str, int] = {}
    for d in players:
        if d.get("party") is not None:
            count[d["party"]] = count.get(d["party"], 0) + 1
    for d in players:
        if d.get("party") is not None and count[d["party"]] < 2:
            del d["party"]
    # the pool's player-free rules its parts have (a free-for-all has no roles and no squad balance)
    rules = [] if slots is None else [RolesRule(slots).to_json()]
    rules += [RoleMinRule(role, n).to_json() for role, n in sorted(role_min.items())]
    if seen_spread:
        rules.append(SkillSpreadRule(max_spread).to_json())
    if seen_balance:
        rules.append(SkillBalanceRule(max_diff).to_json())
    if seen_ping:
        rules.append(MaxPingRule(max_ms).to_json())
    if any(d.get("party") is not None for d in players):
        rules.append(PartyTogetherRule().to_json())
    rules += waiters
    order = np.random.default_rng([seed, 7]).permutation(len(players))  # no ordering hint for the solvers
    return parse_instance({"teams": p.teams, "team_size": p.team_size, "players": [players[i] for i in order],
                           "rules": rules, "engagement_model": preset})


@dataclass
class PoolRun:
    pool: int
    mode: str
    total: float
    matches: int
    time_ms: float
    feasible: bool

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _run(problem_of, mode: str, matches: int, budget_ms: float, method: str, seed: int) -> tuple[BatchResult, Problem]:
    budget = Budget.of(budget_ms)  # the budget opens before encoding, as in the service
    problem = problem_of()
    if mode == "joint":
        res = solve_joint(problem, matches, budget, seed=seed)
    else:
        res = solve_sequential(problem, matches, budget, method=method, seed=seed)
    res.time_ms = budget.elapsed_ms()
    return res, problem


def run(preset: str, candidates: int, matches: int, budget_ms: float, pools: int, seed: int,
        method: str = "surrogate", progress=None) -> dict:
    """Both modes on ``pools`` seeded pools; per-pool rows and the summary per mode."""
    if budget_ms <= 0:
        raise InvalidInput("budget_ms", f"expected a positive number, got {budget_ms}")
    if pools < 1:
        raise InvalidInput("pools", f"expected an integer ≥ 1, got {pools}")
    if method_info(method).needs_predictor:
        raise InvalidInput("method", f"method {method!r} needs a predictor; the batch bench runs model-free methods")
    model = load_model(preset)
    methods()  # import every solver module now, as the service does at start-up
    warm = pool_instance(preset, candidates, matches, seed)
    for mode in ("sequential", "joint"):  # first calls (SCIP, numpy paths) are not timed
        _run(lambda: Problem(warm, model, model_name=preset), mode, matches, budget_ms, method, seed)
    rows: list[PoolRun] = []
    for k in range(pools):
        inst = pool_instance(preset, candidates, matches, seed + k)
        for mode in ("sequential", "joint"):
            res, problem = _run(lambda inst=inst: Problem(inst, model, model_name=preset), mode, matches,
                                budget_ms, method, seed + k)
            ok = len(res.matches) > 0 and not verify(problem, res.matches)
            row = PoolRun(k, mode, res.total, len(res.matches), res.time_ms, ok)
            rows.append(row)
            if progress is not None:
                progress(row)
    summary = {}
    for mode in ("sequential", "joint"):
        rs = [r for r in rows if r.mode == mode]
        t = np.asarray([r.time_ms for r in rs])
        formed = sum(r.matches for r in rs)
        summary[mode] = {"total_mean": float(np.mean([r.total for r in rs])),
                         "matches_mean": float(np.mean([r.matches for r in rs])),
                         # engagement per match formed (the total over every pool / the matches formed)
                         "per_match_mean": float(sum(r.total for r in rs) / formed) if formed else None,
                         "time_p50_ms": float(np.percentile(t, 50)), "time_p99_ms": float(np.percentile(t, 99)),
                         "feasible_pct": 100.0 * sum(r.feasible for r in rs) / len(rs)}
    seq = {r.pool: r for r in rows if r.mode == "sequential"}
    joint = {r.pool: r for r in rows if r.mode == "joint"}
    diff = [joint[k].total - seq[k].total for k in seq]
    wins = sum(d > 1e-9 for d in diff)
    ties = sum(abs(d) <= 1e-9 for d in diff)
    return {"preset": preset, "candidates": candidates, "matches": matches, "budget_ms": budget_ms, "pools": pools,
            "seed": seed, "method": method, "summary": summary,
            "joint_minus_sequential_mean": float(np.mean(diff)),
            "joint_wins": wins, "ties": ties, "joint_losses": len(diff) - wins - ties,
            "rows": [r.to_json() for r in rows]}
