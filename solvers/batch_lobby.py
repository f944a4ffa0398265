"""The joint batch on large lobbies (issue 31): M matches of a pool the policy sends to the lobby search.

At 25 squads from 300 candidates (or 32 players from 128) compiling the pool's rules for SCIP takes
longer than the whole budget (~0.5 s at 25 squads), so :func:`mgmatch.solvers.batch.solve_joint`
hands such pools (:func:`mgmatch.solvers.policy.lobby_path`) to :func:`lobby_batch`, which compiles
nothing: the matches are formed one after another by the lobby search
(:func:`mgmatch.solvers.lobby.lobby_search`) on the whole pool, each restricted to the players no
earlier match took and given an equal share of the time left (a match that finishes early or finds
nothing leaves its time to the next ones). When that forms fewer than M (the first lobby took the
players a later one needed), the lobbies are formed again with the first drawn from one host region,
and the time such a re-forming leaves goes to searching each lobby again (:func:`lobby_batch`).

Rules. Every rule but ``include`` holds per match, with the other matches' players benched (the
batch's contract, as in the small-pool joint batch). ``include`` holds over the batch: each
included player is in SOME match. The included players go to the first match when one lobby can
hold them all (a host region within the ping limit and a skill window of every one of them);
otherwise each match takes the largest group one lobby can hold, until none is left; a group around
which the lobby search builds no lobby in a share of the match's time is split at its widest gap in
skill (:func:`groups_to_try`). A batch that leaves an included player out is no answer.
"""

from __future__ import annotations

import time

import numpy as np

from mgmatch.core.problem import Problem
from mgmatch.core.rules import IncludeRule, SkillSpreadRule

from .lobby import lobby_search

#: share of a match's time the lobby search gets to build a first lobby around a group of included
#: players before the batch tries a smaller group (:func:`groups_to_try`)
GROUP_SHARE = 0.3
#: a re-forming (the first lobby drawn from one region, when the lobbies came out short) gets this share
#: of the time left, and none starts after this share of the batch's time
RETRY_SHARE = 0.1
RETRY_UNTIL = 0.8
#: the improve phase searches a lobby again only with at least this share of a match's time
IMPROVE_MIN = 0.25


def included(problem: Problem) -> np.ndarray:
    """bool [N]: the players some ``include`` rule names."""
    inst = problem.instance
    out = np.zeros(inst.n, dtype=bool)
    for r in inst.rules:
        if isinstance(r, IncludeRule):
            out[[inst.index[p] for p in r.players]] = True
    return out


def match_problem(problem: Problem, group: np.ndarray) -> Problem:
    """The pool with its per-match rules and one ``include`` rule of the players ``group`` marks (the
    included players this match takes); embeddings and model shared with ``problem``."""
    inst = problem.instance
    rules = [r for r in inst.rules if not isinstance(r, IncludeRule)]
    if group.any():
        rules.append(IncludeRule(tuple(inst.ids[i] for i in np.flatnonzero(group))))
    out = Problem(inst.with_rules(rules), problem.model, problem.model_name)
    out.__dict__["embeddings"] = problem.embeddings
    return out


def include_group(problem: Problem, left: np.ndarray) -> np.ndarray:
    """bool [N]: the largest group of the included players ``left`` marks that one lobby can hold by
    the ping limit (one host region) and the skill window (one ``skill_spread``); all of them when one
    lobby can."""
    inst = problem.instance
    ch = problem.checker
    idx = np.flatnonzero(left)
    regions = [np.ones(inst.n, dtype=bool)]
    if ch.far is not None and ch.far.shape[1]:
        regions = [~ch.far[:, r] for r in range(ch.far.shape[1])]
    spreads = [r.max_spread for r in inst.rules if isinstance(r, SkillSpreadRule)]
    skill = np.nan_to_num(inst.skills(), nan=0.0)
    best = idx[:0]
    for ok in regions:
        ok = ok.copy()
        for members in ch.parties.values():  # a party comes whole or not at all
            if not ok[members].all():
                ok[members] = False
        g = idx[ok[idx]]
        if spreads and len(g):
            s = skill[g]
            windows = [g[(s >= s0 - 1e-9) & (s <= s0 + min(spreads) + 1e-9)] for s0 in np.unique(s)]
            g = max(windows, key=len)
        if len(g) > len(best):
            best = g
    out = np.zeros(inst.n, dtype=bool)
    out[best] = True
    return out


def groups_to_try(problem: Problem, group: np.ndarray) -> list[np.ndarray]:
    """``group``, then (for a lobby search that built nothing with it) its part on either side of the
    widest gap in skill, the larger part first: the lobby search centres its skill window and squad
    balance on the included players, and included players of two skill brackets may fit no lobby."""
    idx = np.flatnonzero(group)
    if len(idx) < 2:
        return [group]
    skill = np.nan_to_num(problem.instance.skills(), nan=0.0)
    idx = idx[np.argsort(skill[idx], kind="stable")]
    cut = int(np.argmax(np.diff(skill[idx]))) + 1
    parts = sorted([idx[:cut], idx[cut:]], key=len, reverse=True)
    out = [group]
    for part in parts:
        g = np.zeros_like(group)
        g[part] = True
        out.append(g)
    return out


def _form(problem: Problem, matches: int, end: float, seed: int, first: np.ndarray | None = None
          ) -> tuple[list[np.ndarray], list[dict]]:
    """Lobbies one after another until ``matches``, a failure or ``end``, each with an equal share of the time
    left; ``first`` (bool [N]): the players the first lobby may take (None: all)."""
    inst = problem.instance
    inc = included(problem)
    used = np.zeros(inst.n, dtype=bool)
    out: list[np.ndarray] = []
    log: list[dict] = []
    for k in range(matches):
        if int((~used).sum()) < inst.n_selected or time.perf_counter() >= end:
            break
        left = inc & ~used
        group = left if not left.any() else include_group(problem, left)
        if left.any() and not group.any():
            break  # an included player no lobby admits (no region within the ping limit): none can hold him
        t0 = time.perf_counter()
        share_end = t0 + (end - t0) / (matches - k)
        avail = ~used if k or first is None else first & ~used
        if int(avail.sum()) < inst.n_selected:
            break
        tries = groups_to_try(problem, group)
        for n, group in enumerate(tries):  # noqa: B007 - the group found is the one recorded below
            now = time.perf_counter()
            # a group that may still be split gets a share of the match's time to build a first lobby
            found_by = None if n == len(tries) - 1 else now + GROUP_SHARE * (share_end - now)
            team_of, st = lobby_search(match_problem(problem, group), share_end, seed + k, available=avail,
                                       found_by=found_by)
            if team_of is not None:
                break
        log.append({"ms": round((time.perf_counter() - t0) * 1e3, 1), "found": team_of is not None,
                    "included": int(group.sum()), "groups_tried": n + 1})
        if team_of is None:
            break  # the next lobby, from fewer players, would fail the same way (or leave an included player out)
        out.append(team_of)
        used |= team_of >= 0
    return out, log


def _first_lobby_regions(problem: Problem, free: np.ndarray) -> list[np.ndarray]:
    """Where to draw the first lobby from when the lobbies formed one after another came out short (bool
    [N] masks, in the order to try): outside the host region that admits the most of the players the
    failed lobby had (``free``), which keeps them for the later lobbies; inside it; then inside each
    other region, the fullest first. None without a ping rule."""
    far = problem.checker.far
    if far is None or not far.shape[1]:
        return []
    near = ~far
    r = int(np.argmax((near & free[:, None]).sum(0)))
    out = [~near[:, r], near[:, r]]
    out += [near[:, q] for q in np.argsort(-near.sum(0), kind="stable") if q != r]
    return out


def _covers(inc: np.ndarray, rows: list[np.ndarray]) -> bool:
    """Whether the lobbies ``rows`` hold every included player (``inc``, bool [N])."""
    used = np.zeros(inc.shape[0], dtype=bool)
    for t in rows:
        used |= t >= 0
    return not (inc & ~used).any()


def lobby_batch(problem: Problem, matches: int, end: float, seed: int, stats: dict) -> tuple[list[np.ndarray], bool]:
    """Up to ``matches`` disjoint lobbies (team_of [N] each, −1: not in that match) by ``end`` (a
    ``time.perf_counter()`` instant), and whether every included player is in one of them. Each
    lobby is checker-feasible on its match problem (:func:`match_problem`), whose rules are the pool's
    per-match rules; the caller verifies the batch.

    **Form**: the lobbies one after another, each with an equal share of the time left (the one-at-a-time
    path without re-encoding the pool per match). When fewer than ``matches`` came out (the first lobby
    took players a later one needed: at 300 ``br-100`` candidates the fullest host region of the players
    left may admit ~100), again with the first lobby drawn from one region
    (:func:`_first_lobby_regions`), each try with :data:`RETRY_SHARE` of the time left, until the
    lobbies are all there or :data:`RETRY_UNTIL` of the time is gone. **Improve** (the time such a
    re-forming left, where a lobby's share is at least :data:`IMPROVE_MIN` of a match's): each lobby
    searched again with the other lobbies' players benched and its included players kept; the better
    of the two stays."""
    inst = problem.instance
    inc = included(problem)
    t0 = time.perf_counter()
    rows, log = _form(problem, matches, end, seed)
    stats["form_matches"] = len(rows)
    if len(rows) < matches and time.perf_counter() < end:
        taken = np.zeros(inst.n, dtype=bool)
        for t in rows:
            taken |= t >= 0
        for n, first in enumerate(_first_lobby_regions(problem, ~taken)):
            t1 = time.perf_counter()
            if len(rows) == matches or t1 > t0 + RETRY_UNTIL * (end - t0):
                break
            alt, alt_log = _form(problem, matches, t1 + RETRY_SHARE * (end - t1), seed + (n + 1) * matches, first)
            stats.setdefault("reformed_matches", []).append(len(alt))
            if (_covers(inc, alt), len(alt)) > (_covers(inc, rows), len(rows)):
                rows, log = alt, alt_log
    objs = [problem.objective(t) for t in rows]
    improved = 0
    for k in range(len(rows)):
        now = time.perf_counter()
        share_end = now + (end - now) / (len(rows) - k)
        if share_end - now < IMPROVE_MIN * (end - t0) / matches:
            continue  # too little left to build a lobby again and climb past the one it has
        others = np.zeros(inst.n, dtype=bool)
        for j, t in enumerate(rows):
            if j != k:
                others |= t >= 0
        keep = inc & (rows[k] >= 0)  # its included players stay in it (no other lobby has them)
        team_of, _ = lobby_search(match_problem(problem, keep), share_end, seed + 3 * matches + k, available=~others)
        if team_of is not None:
            v = problem.objective(team_of)
            if v > objs[k]:
                rows[k], objs[k] = team_of, v
                improved += 1
    stats["lobby_matches"] = log
    stats["improved_matches"] = improved
    return rows, _covers(inc, rows)
