"""MGMatch's fast solver (paper §4.3): predict, solve the surrogate MIP, polish, then search the true MIP.

**Policy first** (:mod:`mgmatch.solvers.policy`, ``policy="auto"``; ``"enumerate"``, ``"scip"`` or
``"pipeline"`` force a path): from measured cost estimates it picks one of three paths —
enumerate every team formation (small pools: a proven optimum in a few ms, or as far as a tight
budget goes), warm-start SCIP on the engagement MIP at once with the rounded prediction (when the
runtime predictor says the MIP closes well inside the time left), or the pipeline below. It also
decides whether the trained predictor runs (its measured time must fit 20% of the time left —
on the pipeline path, of what the surrogate stage, measured per engagement model, leaves — and
not on small pools) or the engagement gradient (``surrogate``'s, ~0.05 ms) stands in. A predictor
whose sidecar carries a measured ``gate`` (an interleaved comparison with ``surrogate`` at each of
several budgets, ``scripts/interleaved.py --gate``) follows its verdict at the measured budget nearest
the solve's: ``gradient`` (MGMatch with it was behind ``surrogate`` there) and it never runs, the
gradient standing in; ``network`` and it runs when it fits half the time left, not 20%.
``stats["predictor_gate"]`` says which verdict applied. Every MIP
build counts against the budget: one that cannot fit (measured build times,
:class:`~mgmatch.solvers.mip.BuildClock`) is not started, one that runs past the deadline is
abandoned (:class:`~mgmatch.solvers.mip.BuildInterrupted`), and SCIP's limit is what is left after
building. ``stats["policy_path"]`` and ``stats["predictor_used"]`` say what ran.

Pipeline inside one wall-clock budget (default 100 ms, INCLUDING encoding and inference):

1. **Predict.** A :class:`Predictor` maps the problem to P [N, D], the probability that player i
   is on team j in the optimum (the multimodal GNN for ``mgmatch``, a bipartite GCN for
   ``bgcn``). Solvers never import torch or ``mgmatch.models``: the predictor is handed in.
2. **Round.** Greedy rounding of P (highest p first, fill every team) gives a candidate; when the
   checker accepts it, it is a fallback answer and SCIP's warm start.
3. **Surrogate MIP** (Eq. 20–21): max Σ p_ij x_ij over the same compiled rules, built by the
   shared :class:`~mgmatch.solvers.mip.MipModel` with its ``fast`` preset, time-limited to
   :data:`SURROGATE_SHARE` of the time left (at least :data:`SURROGATE_MIN_S`; it goes on with
   all the time left when that found no feasible assignment). Same feasible region as the real
   problem, so a proof of infeasibility here is a proof for the instance.
   **Repair first** (``repair_first``, :meth:`MGMatchSolver._repair_first`): when SCIP's search
   (step 5) will not run in this solve (not paying and no probe due, or its measured build will
   not fit; a probe due is not run where repair first applies: :func:`_too_tight_to_probe`) and
   the surrogate stage would leave tabu search fewer than :data:`REPAIR_MAX_ITERATIONS`
   iterations, steps 3–4 are replaced by tabu search from the party-whole rounding, which repairs
   it itself (its penalty on how far outside each broken rule is) and walks on with all the time;
   the surrogate MIP gets the rest only when nothing is feasible by :data:`REPAIR_SHARE` of it.
   Repair first is also taken where the surrogate stage measured for the model and budget (its
   fastest recent run; where none completed, its shortest miss) leaves SCIP's search less than
   :data:`SEARCH_MIN_S` (``search_skipped: no_time``), with no search record needed; and where that
   stage does not even fit what a failed repair would leave it, the walk goes on to the deadline.
   A solve that would answer ``no_solution`` with time left (no feasible start, and the surrogate
   MIP's build did not fit or found nothing) has tabu search repair the rounding the same way with
   what is left (``stats["last_repair"]``).
   ``stats["repair_first"]``: ``repaired`` or ``failed``; where it was considered but not tried,
   ``stats["repair_skipped"]`` says why: ``unmeasured`` (no surrogate stage measured for the model
   and budget, or no tabu pace for the model, yet), ``iterations`` (the pipeline leaves tabu search
   enough) or ``success_rate`` (recent repairs failed too often; a retry that repairs clears their
   record).
4. **Polish** (:mod:`mgmatch.solvers.polish`): best-improvement swaps on the true engagement
   objective, feasibility kept by the checker. The starts (rounding, SCIP's solution pool) are
   polished best first for at most :data:`POLISH_SHARE` of the time left.
   Then **tabu search** (:mod:`mgmatch.solvers.tabu`) walks on from the best polished
   assignment, through worse and rule-breaking neighbours (penalized), with three-player rotations
   added to the moves, for :data:`TABU_SHARE` of the time left — when the runtime predictor says
   SCIP's search is unlikely to improve in time (:data:`TABU_SCIP_RATIO`; ``tabu_share`` sets the
   share instead). Without time for any MIP, polish and tabu search get all of it.
5. **Search the true MIP** (:mod:`mgmatch.solvers.pas`, Predict-and-Search): the surrogate model
   becomes the tight big-M engagement MIP (no second build), warm-started with the best polished
   assignment and cut off at its value, and SCIP searches it with the rest of the budget
   (:data:`FINAL_POLISH_SHARE` kept back). A trust region around P is available
   (``tr_fraction``/``tr_delta``) but off by default: it measured worse on both presets (see the
   :mod:`~mgmatch.solvers.pas` docstring). What SCIP finds better is polished again unless SCIP
   proved it optimal. The surrogate re-solve loop with no-good cuts of earlier versions is gone:
   the true search finds better assignments than the surrogate's next-most-likely ones in the same
   time (12v12 at 100 ms, seed 2000003: 0.55% → 0.09% mean gap).

**Selection search instead, where the team patterns are few** (:mod:`mgmatch.solvers.selection`:
a pool with benched candidates and at most 2 048 ways to split the selected players, e.g. 5v5 or
3v3): the predicted players' best split (Σ_j p_ij ranks them; parties whole) or the feasible
rounding is the start, and the selection search (swap who plays, every split scored) gets all the
time left; the surrogate MIP runs only when neither is feasible, and selections drawn from the
prediction only when it finds nothing either (``stats["selection_start"]``: prediction, rounding,
surrogate, sampled). On a 3v3 pool whose enumeration is not expected to finish in the budget, the
enumeration hands its best over once it has one and :data:`ENUM_SELECTION_SHARE` of the time is
left (``enumeration``). ``selection=False`` keeps the steps above.

The answer is always checker-feasible; when nothing feasible was found in time the status is
``no_solution`` (never a rule-breaking assignment). ``status`` is ``optimal`` when the true
search finished the whole engagement MIP (``stats["search_proven_optimal"]``; bound = objective),
``infeasible`` when SCIP proved the rules unsatisfiable, else ``feasible``. ``stats`` also records where the time went (``predict_ms``,
``surrogate_ms``, ``polish_ms``, ``tabu_ms``, ``search_build_ms``, ``search_ms``, ``search_total_ms``).
"""

from __future__ import annotations

import math
import time
from typing import Protocol, runtime_checkable

import numpy as np

from mgmatch.core.errors import InvalidInput
from mgmatch.core.problem import Problem
from mgmatch.core.rules import IncludeRule, PartyTogetherRule, RoleMinRule, RolesRule
from mgmatch.core.solution import Solution

from .base import Budget, register
from .enumerate import best_assignment
from .lobby import lobby_answer
from .mip import (
    ENGAGEMENT_BUILDS,
    ENGAGEMENT_FREES,
    SCIP_READS,
    SURROGATE_BUILDS,
    BuildClock,
    BuildInterrupted,
    MipModel,
    released,
)
from .moves import warm as warm_moves
from .pas import TR_DELTA, TR_FRACTION, true_search
from .policy import (
    GATED_PREDICT_SHARE,
    PATHS,
    PREDICT_SHARE,
    Choice,
    choose,
    enumerate_chunk,
    gate_budget_ms,
    gate_verdict,
    lobby_path,
    record_enumeration,
    use_trained_predictor,
)
from .polish import PolishResult, polish
from .selection import applicable as selection_applicable
from .selection import selection_search, start_from_scores
from .tabu import TABU_ROUNDS, TabuResult, tabu_search

#: default wall-clock budget when the caller gives none (the paper's 3v3 online limit)
DEFAULT_TIME_LIMIT_MS = 100.0
#: share of the time left after building the surrogate MIP that its solve may take (it usually
#: proves its optimum sooner); tuned on 12v12 seed 2000003 with the shares below (0.3 → 0.1: its
#: long tail went to the true search)
SURROGATE_SHARE = 0.1
#: ... but at least this long (seconds) when the budget allows
SURROGATE_MIN_S = 0.005
#: share of the time left after the surrogate spent polishing its answers before the true search.
#: Tuned on 12v12 seed 2000003: at 50 ms the mean gap went 0.76% (0.15) → 0.55% (0.4) → 0.49%
#: (0.6); at 100 ms 0.15% (0.15) → 0.10% (0.4) → 0.09% (0.6). 0.5; 3v3 was 0.00% with all of them
POLISH_SHARE = 0.5
#: share of the budget that a partial enumeration (one not expected to finish) leaves to a selection
#: search from its best (:mod:`mgmatch.solvers.selection`)
ENUM_SELECTION_SHARE = 0.7
#: a partial enumeration that has found nothing feasible by then stops there too, and the pipeline
#: (rounding, surrogate MIP: SCIP finds feasible points where they are rare) gets the time left
EMPTY_HANDOVER = True
#: share of the time left before the true search kept back to polish what it finds
FINAL_POLISH_SHARE = 0.08
#: share of the time left after polishing that tabu search (:mod:`mgmatch.solvers.tabu`) walks on
#: from the best polished assignment before SCIP searches the engagement MIP from its best ...
TABU_SHARE = 0.5
#: ... when the runtime predictor's estimate of an exact SCIP solve is more than this many times the
#: time left (SCIP's search then rarely improves in time). Measured quiet, 20 pools each
#: (``mgmatch bench quality``'s pools, seed 1000003; the 5v5 example's held-out pools):
#: 5v5 at 50 ms 4.39% without tabu, 2.81% with 0.5 of the time; 12v12 at 20 ms 4.75% → 4.12%,
#: at 50 ms 0.66% → 0.65%, but at 100 ms, where SCIP often proves the optimum, 0.13% → 0.22%
TABU_SCIP_RATIO = 3.0
#: ... or when SCIP's search of the engagement MIP improved or proved the answer in fewer than this
#: share of the last solves of the same engagement model at the same budget (at least
#: SEARCH_MIN_SEEN of them, SEARCH_KEEP kept): the estimate knows only N and the slots, and a game's
#: own model can be much harder (5v5 example: estimated 97 ms, measured 425 ms at N = 30)
SEARCH_HIT_RATE = 0.25
SEARCH_MIN_SEEN = 4
SEARCH_KEEP = 16
#: the search is skipped (tabu search takes its time) when the slowest of the last
#: SEARCH_BUILDS_KEEP builds of the engagement objective for this model took more than this share
#: of the time left for it: a 12v12-deep head (64-64) took 9–27 ms to add, and at 100 ms the build
#: was abandoned on 3 of 4 slow pools, its time lost
SEARCH_BUILD_SHARE = 0.5
SEARCH_BUILDS_KEEP = 8
#: the search is skipped (``no_time``; tabu search takes its time) when the surrogate stage measured for
#: the model and budget and polishing would leave it less than this: a 12v12 engagement MIP alone takes
#: 5–10 ms to build. At 10 ms on 12v12 it left ~2 ms; with no search record (a process serving only
#: that budget: the search never runs, so it is never found not paying) repair first was never
#: considered, the surrogate stage took 5–7 ms, and 84% of 80 solves answered nothing
SEARCH_MIN_S = 0.005
#: while the search is not paying, one solve in this many still runs it (after tabu search) ...
SEARCH_PROBE_EVERY = 4
#: ... and after each probe that did not pay either, one in twice as many, up to this many (at
#: 20 ms on 12v12 the search never paid, and every 4th solve lost ~4 ms of tabu search to it)
SEARCH_PROBE_MAX = 32
#: solves between probes now, by (engagement model, budget, method)
_SEARCH_PROBE_GAP: dict[tuple, int] = {}
#: seconds of the last surrogate stages (build and solve) by engagement model and budget
#: (:func:`_stage_key`; a stage's length follows the budget: its share of the time left): on the pipeline path
#: the trained predictor must fit PREDICT_SHARE of the time left after it (12v12 at 20 ms: the
#: network's 3.1 ms fit 20% of the budget, and MGMatch measured 0.66% with it against 0.46% with the
#: engagement gradient; at 30 ms 0.23% against 0.37%; the 5v5 example, whose selection search has
#: no surrogate stage, 0.92% against 1.58% at 20 ms)
_SURROGATE_TIMES: dict[tuple, list[float]] = {}
SURROGATE_TIMES_KEEP = 8
#: surrogate stages that did not fit (build interrupted, or no time left to solve), as long as the
#: time they had, by the same key: where no stage ever completes, they stand for its time (a lower
#: bound)
_STAGE_MISSES: dict[tuple, list[float]] = {}
#: stage keys whose first stage this process has seen (:func:`_record_stage`)
_STAGE_WARM: set[tuple] = set()
#: solves per stage key that skipped the stage, and every how many of them the slowest record is
#: forgotten (:func:`_wear_stage`)
_STAGE_SKIPS: dict[tuple, int] = {}
STAGE_FORGET_EVERY = 8
#: solves per (engagement model, budget) since the search stopped paying
_SEARCH_SKIPS: dict[tuple, int] = {}
#: seconds of the last builds of the engagement objective in the search, by engagement model
_SEARCH_BUILDS: dict[str, list[float]] = {}
#: whether each of the last searches (by engagement model and budget) improved or proved
_SEARCH_HITS: dict[tuple, list[bool]] = {}
#: **repair first** (``repair_first``, :meth:`MGMatchSolver._repair_first`): when SCIP's search will not
#: run, tabu search walks the party-whole rounding of P to a feasible assignment and on, with all
#: the time, instead of the surrogate MIP giving it a start; when it has none by this share of the
#: time left, the surrogate MIP gets the rest (measured on 120 12v12 pools: 99% of the roundings
#: (:func:`rounding`) are repaired within 5 ms)
REPAIR_SHARE = 0.35
#: under a ``max_ping`` rule the tabu stage first walks from the rounding of each other host region
#: that can hold the match (:func:`region_admits`), REGION_PROBE_SHARE of its time in all, and goes on
#: from the best answer: the rounding's region is the one the prediction favours, and the walk does
#: not change regions (a 12v12 pool of 96 candidates: 2.8% from its region at 100 ms, 0.2% from the
#: optimum's). Only where the stage has REGION_PROBE_MIN_S, and each probe at least REGION_PROBE_EACH_S
REGION_PROBES = True
REGION_PROBE_SHARE = 0.4
REGION_PROBE_MIN_S = 0.02
REGION_PROBE_EACH_S = 0.005
#: ... only where the pipeline would leave tabu search fewer than this many iterations: (time left −
#: the model's measured surrogate stage) / its measured time per tabu iteration. Measured with
#: interleaved solves (repair first on, off): 12v12 at 20 ms (~19 iterations after the surrogate
#: stage) 0.29% against 0.40% and 0.28% against 0.42% (120 pools each); at 50 ms (~90) 0.12%
#: against 0.11%; pools of 90-100 at 50 ms (~56) 1.21% against 0.77% and 1.24% against 0.69%
#: (30 pools): the surrogate MIP's choice of who plays from a long bench is worth its time there.
#: The estimate (``stats["repair_expected_iterations"]``) measured 1–20 on 12v12 at 20 ms, 61–83 at
#: 50 ms, 51–67 on those pools at 50 ms (10th–90th percentiles)
REPAIR_MAX_ITERATIONS = 45
#: ... and only while repairs succeed: at least REPAIR_MIN_RATE of the last REPAIR_KEEP tries (by
#: engagement model, budget, method and the predictor that ran, :func:`_repair_key`; judged from
#: REPAIR_MIN_SEEN on). A failed try leaves the
#: surrogate MIP 65% of the time: 12v12-deep at 20 ms repaired 44% of its pools in time, and 5% went
#: unanswered. While they do not, one solve in REPAIR_RETRY_EVERY tries again (doubling after each
#: retry that fails, up to REPAIR_RETRY_MAX); a retry that repairs starts the record afresh. At 85%,
#: chance runs of 3 failures in 16 (12v12 at 20 ms fails ~5%) turned it off for ~50 solves at a
#: time; before retries cleared the record, 2 early failures of 4 kept it off on 43 of 80
#: 12v12-deep solves at 50 ms (where ~92% repair)
REPAIR_MIN_RATE = 0.7
REPAIR_KEEP = 16
REPAIR_MIN_SEEN = 4
REPAIR_RETRY_EVERY = 16
REPAIR_RETRY_MAX = 128
#: whether each of the last repair-first tries repaired in time, by search key
_REPAIRS: dict[tuple, list[bool]] = {}
#: solves since the last retry and the gap between retries, by search key
_REPAIR_SKIPS: dict[tuple, int] = {}
_REPAIR_RETRY_GAP: dict[tuple, int] = {}
#: seconds per tabu iteration lately, by engagement model
_TABU_PACE: dict[str, list[float]] = {}
#: time kept for building the Solution after polishing, seconds
FINISH_RESERVE_S = 0.002
#: measured teardown (seconds per unit of compiled size): from the instant a solve's answer is
#: built until the solve has returned (the Solution built, the models and arrays of the solve freed).
#: Beyond FINISH_RESERVE_S, its upper quartile is kept back from the budget. The large part of it
#: was a searched engagement MIP freed by the garbage collector: 12v12-deep answers at 100 ms came
#: back 3–6.5 ms after they were built when the search had run (bench p99 105.4 ms); that model is now
#: freed inside the budget (MipModel.dispose, ENGAGEMENT_FREES), and 0.2–1.4 ms are left after the
#: answer (`python scripts/teardown.py --preset 12v12-deep --budget-ms 100`)
TEARDOWN = BuildClock()
#: ... but never more than this share of the budget
TEARDOWN_MAX_SHARE = 0.1
#: SCIP checks its time limit between nodes and overshoots it by a few ms: stop it this early
SCIP_MARGIN_S = 0.004
#: ... but a first feasible assignment is looked for until this close to the answer's reserve: with
#: none, there is no answer at all (a first-solution solve of a 12v12 surrogate MIP overran its limit
#: by 0.2 ms median, 2.4 ms at most, in 23 measured)
FIRST_MARGIN_S = 0.001
#: ... or the largest of the last FIRST_OVERSHOOT_KEEP overruns measured on pools of this size (by
#: 16 candidates): SCIP checks its clock between LP solves, and a 12v12-deep pool's took longer (its
#: answers at 20 ms came 1.5–5.5 ms late with the fixed margin)
FIRST_OVERSHOOT_KEEP = 8
_FIRST_OVERSHOOT: dict[int, list[float]] = {}
#: ... and SCIP's search of the engagement MIP stops this early: SCIP_MARGIN_S, or the largest of
#: the last FIRST_OVERSHOOT_KEEP overruns past its limit measured on pools of this size (a
#: 12v12-deep engagement MIP's LP solves are long: 100 ms answers came 2–4 ms late with the fixed margin)
_SEARCH_OVERSHOOT: dict[int, list[float]] = {}
#: measured polish rounds (seconds per N² candidates): no round is started that could not finish;
#: a round on a 95-candidate pool took 30–50 ms under load, so without it the first round of a
#: late answer ran 40 ms past the budget
POLISH_ROUNDS = BuildClock()
#: seconds of the last calls of each trained predictor (by version) in this process
_PREDICT_TIMES: dict[str, list[float]] = {}
#: solves that skipped each trained predictor as too slow; every PREDICT_FORGET_EVERY-th forgets
#: its oldest time, but never the last one: emptied, the list made the predictor run again every 9th
#: solve, and at a budget it cannot fit each such solve lost its answer (12v12 at 20 ms: a 5–8 ms
#: network, then no time for the surrogate MIP; 2 of 20 pools unanswered)
_PREDICT_SKIPS: dict[str, int] = {}
PREDICT_FORGET_EVERY = 8
#: :meth:`MGMatchSolver.prepare`: calls of a cold predictor (the second call of a fresh ONNX session
#: still took 7.7 ms against 5.2 later, on a 12v12-deep pool) and the seconds of a first tabu walk
PREPARE_PREDICTS = 2
PREPARE_WALK_S = 0.003
#: predictor versions called once in this process: the first call (a cold ONNX session: allocation,
#: first-run optimisation) is not a measurement of the next ones and is not recorded
_PREDICT_WARM: set[str] = set()


@runtime_checkable
class Predictor(Protocol):
    """Solution prediction: one probability matrix per problem.

    ``version`` names the model (recorded in every answer). ``predict`` returns, per problem, an
    array p [N, D] with values in [0, 1]: the predicted probability that player i is on team j in
    the optimal assignment. Batch several problems in one call when you can.
    """

    version: str

    def predict(self, problems: list[Problem]) -> list[np.ndarray]: ...


def round_prediction(p: np.ndarray, sizes: tuple[int, ...] | list[int],
                     units: list[np.ndarray] | None = None) -> np.ndarray:
    """Greedy rounding: take (player, team) pairs by decreasing p until every team is full.

    With ``units`` (parties: player index arrays), a party is placed whole, by its members' mean
    p, where its team has room for it; players a party-whole rounding could not place (no team
    with room for the party) are placed one by one after. Shapes: p [N, D] → team_of [N] (−1 bench).
    Always fills every team (N ≥ Σ sizes).
    """
    N, D = p.shape
    free = np.asarray(sizes, dtype=np.int64).copy()
    t = np.full(N, -1, dtype=np.int64)
    if units:
        groups = [np.asarray(u, dtype=np.int64) for u in units if len(u) > 1]
        unit_of = np.full(N, -1, dtype=np.int64)
        for k, g in enumerate(groups):
            unit_of[g] = k
        singles = np.flatnonzero(unit_of < 0)  # the units after the parties: one player each
        unit_of[singles] = len(groups) + np.arange(singles.size)
        U = len(groups) + singles.size
        # each unit's mean p [units, D], in one pass (a list of per-unit means took ~1 ms of a
        # 12v12-deep pool's 20 ms budget on a slow machine)
        sums = np.zeros((U, D))
        np.add.at(sums, unit_of, p)
        score = sums / np.bincount(unit_of, minlength=U)[:, None]
        for flat in np.argsort(-score, axis=None, kind="stable"):
            u, j = divmod(int(flat), D)
            g = groups[u] if u < len(groups) else singles[u - len(groups):u - len(groups) + 1]
            if t[g[0]] < 0 and free[j] >= g.size:
                t[g] = j
                free[j] -= g.size
                if not free.any():
                    return t
    for flat in np.argsort(-p, axis=None, kind="stable"):
        i, j = divmod(int(flat), D)
        if t[i] < 0 and free[j] > 0:
            t[i] = j
            free[j] -= 1
            if not free.any():
                break
    return t


def near_region(problem: Problem, p: np.ndarray) -> np.ndarray | None:
    """Under a ``max_ping`` rule, the players within its limit of the host region whose
    nearby players the prediction favours most (the largest Σ_j p_ij of its best Σ sizes near
    players): bool [N]. None without the rule or when no region has enough near players.

    Under ``party_together`` a player counts as near a region only when his whole party is: a
    12v12 pool of 95 candidates had exactly 24 players near one region, two of them in parties with
    far members, and its rounding (that region first) was never repaired. Regions whose near players
    cannot meet the ``include`` and role rules (:func:`region_admits`) are passed over while another
    can: a 12v12-deep pool's rounding took a region with 25 near players, too few damage dealers and
    none of the included players, and tabu search walked 200 iterations without a feasible state."""
    near = near_players(problem)
    if near is None:
        return None
    slots = sum(problem.instance.sizes)
    mass = p.sum(axis=1)
    regions = [g for g in range(near.shape[1]) if near[:, g].sum() >= slots]
    regions = [g for g in regions if region_admits(problem, near[:, g])] or regions
    best, mask = -np.inf, None
    for g in regions:
        value = _favour(mass, near[:, g], slots)
        if value > best:
            best, mask = value, near[:, g]
    return mask


def _favour(mass: np.ndarray, near: np.ndarray, slots: int) -> float:
    """How much the prediction favours a region: Σ_j p_ij of its best ``slots`` near players
    (``mass``: Σ_j p_ij per player)."""
    return float(np.sort(mass[near])[::-1][:slots].sum())


def near_players(problem: Problem) -> np.ndarray | None:
    """bool [N, regions]: the player, and under ``party_together`` his whole party, is within the
    ``max_ping`` limit of the region (None without the rule)."""
    chk = problem.checker
    if chk.far is None:
        return None
    near = ~chk.far
    for members in party_units(problem) or ():
        near[members] = near[members].all(axis=0)
    return near


def region_admits(problem: Problem, near: np.ndarray) -> bool:
    """Whether the players ``near`` (bool [N]) can meet the rules that need certain players on the
    teams: every ``include`` player among them, and for each ``roles`` rule every set of its roles
    (Hall's condition) and each ``role_min`` with enough of them for all the teams. A necessary
    condition only (it ignores the other rules and how the players split into teams)."""
    chk = problem.checker
    D = problem.instance.teams
    index = problem.instance.index
    for rule in problem.instance.rules:
        if isinstance(rule, IncludeRule):
            if not all(near[index[x]] for x in rule.players):
                return False
        elif isinstance(rule, RolesRule):
            can, need, _ = chk.hall(rule)
            if (can[near].sum(axis=0) < D * need).any():
                return False
        elif isinstance(rule, RoleMinRule):
            if int(chk.accepts(rule.role)[near].sum()) < D * rule.min:
                return False
    return True


def rounding(problem: Problem, p: np.ndarray) -> np.ndarray:
    """The rounding of P that solves start from: parties whole (:func:`party_units`) and, under a
    ``max_ping`` rule, players near one host region (:func:`near_region`) before any far one.
    On 120 12v12 pools, tabu search repaired 53% of the roundings without the region within 3 ms,
    95% with it (88% and 99% within 5 ms); interleaved, on and off, MGMatch at 20 ms measured 0.27%
    against 0.33% (120 pools; 119 repairs in time against 103)."""
    mask = near_region(problem, p)
    q = p if mask is None else np.where(mask[:, None], p, p - 2.0)  # p ∈ [0, 1]: far players last
    return round_prediction(q, problem.instance.sizes, party_units(problem))


def party_units(problem: Problem) -> list[np.ndarray] | None:
    """The parties a ``party_together`` rule keeps whole (player index arrays), else None."""
    if not any(isinstance(r, PartyTogetherRule) for r in problem.instance.rules):
        return None
    return [np.asarray(m, dtype=np.int64) for m in problem.checker.parties.values()]


class MGMatchSolver:
    """Predictor → surrogate MIP (SCIP) → polish → true-MIP search. See the module docstring.

    Options: ``use_polish=False`` returns the best surrogate answer as is (no polish, no search);
    ``search=False`` stops after polishing (which then gets all the time); ``tr_fraction`` /
    ``tr_delta`` set the search's trust region around P (``tr_fraction=0``: none);
    ``selection=False`` never runs the selection search (:mod:`mgmatch.solvers.selection`), so
    pools with few team splits take the same steps as the others.
    """

    def __init__(self, predictor: Predictor | None = None, name: str = "mgmatch",
                 default_time_limit_ms: float = DEFAULT_TIME_LIMIT_MS, polish_share: float = POLISH_SHARE,
                 use_polish: bool = True, warm_start: bool = True, search: bool = True,
                 surrogate_share: float = SURROGATE_SHARE, tr_fraction: float = TR_FRACTION,
                 tr_delta: float = TR_DELTA, policy: str = "auto", tabu_share: float | None = None,
                 selection: bool = True, repair_first: bool = True, seed: int = 0):
        if predictor is None:
            raise InvalidInput("predictor", f"method {name!r} needs a solution predictor "
                                            "(e.g. mgmatch.models.runtime.load_predictor(name)); none was given")
        if not hasattr(predictor, "predict"):
            raise InvalidInput("predictor", f"{type(predictor).__name__} has no predict(problems) method")
        self.predictor = predictor
        self.name = name
        self.default_time_limit_ms = default_time_limit_ms
        self.polish_share = polish_share
        self.use_polish = use_polish
        self.warm_start = warm_start
        self.search = search
        self.surrogate_share = surrogate_share
        self.tr_fraction = tr_fraction
        self.tr_delta = tr_delta
        if policy not in PATHS:
            raise InvalidInput("policy", f"expected one of {', '.join(PATHS)}, got {policy!r}")
        self.policy = policy
        if tabu_share is not None and not 0.0 <= tabu_share <= 1.0:
            raise InvalidInput("tabu_share", f"must be within [0, 1] (or None: the measured rule), got {tabu_share!r}")
        self.tabu_share = tabu_share
        self.selection = selection
        self.repair_first = repair_first
        self.seed = seed
        self.last_choice: Choice | None = None
        warm_moves()  # the local searches' compiled scorer: loaded now, not inside the first budget

    def prepare(self, problem: Problem, measure: bool = True) -> None:
        """Before a solve's budget starts, what the first solve in a process would do once inside it
        (``mgmatch solve`` calls it on its pool; the service at start-up on a warm-up pool of each
        pool's game, :meth:`mgmatch.app.runtime.Runtime.prepare_solvers`): the trained predictor's
        first calls (a cold ONNX session allocates and optimises: 9 ms against 5 on a 12v12-deep
        pool), a first surrogate MIP (the build's first paths in pyscipopt and SCIP; its instance then
        serves this thread's next build) and a first tabu walk. Nothing is left on ``problem``: the
        work runs on a twin of it, and the solve does all of its own.

        ``measure``: then build the surrogate MIP and walk once more, warm, and record those as a
        solve records them (the surrogate build's time by size, tabu search's pace), so the first
        solve at a tight budget can choose its path from them as later ones do (a one-shot
        `mgmatch solve` of a 12v12-deep pool at 10 ms answered nothing without them: it ran the
        surrogate stage to measure it). Only for ``problem`` itself: a warm-up pool of another
        shape would misstate them."""
        from .surrogate import GradientPredictor

        twin = Problem(problem.instance, problem.model, model_name=problem.model_name)
        key = str(getattr(self.predictor, "version", None))
        if not isinstance(self.predictor, GradientPredictor) and key not in _PREDICT_WARM:
            for _ in range(PREPARE_PREDICTS):
                self.predictor.predict([twin])
            _PREDICT_WARM.add(key)
        p = GradientPredictor().predict([twin])[0]
        # the cold pass's times (a first SCIP read, a first tabu iteration) are no measurement: the
        # clocks the solve consults are put back as they were before it
        clocks = (SCIP_READS, TABU_ROUNDS)
        before = [c.snapshot() for c in clocks]
        self._prepare_pass(twin, p, record=False)
        for c, state in zip(clocks, before, strict=True):
            c.restore(state)
        if measure:
            self._prepare_pass(twin, p, record=True)

    def _prepare_pass(self, twin: Problem, p: np.ndarray, record: bool) -> None:
        """One surrogate MIP built and solved, and one tabu walk of :data:`PREPARE_WALK_S`; ``record``:
        the build's time and the walk's pace recorded as a solve records them."""
        with released():
            t0 = time.perf_counter()
            mip = MipModel.build(twin.compiled, checker=twin.checker, fast=True, reuse=True)
            if record:
                SURROGATE_BUILDS.record(time.perf_counter() - t0, BuildClock.size(twin.compiled))
            mip.set_linear_objective(p)
            mip.set_time_limit(SURROGATE_MIN_S)
            mip.solve()
        start, stop = rounding(twin, p), time.perf_counter() + PREPARE_WALK_S
        if record:
            self._tabu_run(twin, start, stop, 0.0, {})
        else:
            tabu_search(twin, start, stop, seed=self.seed)

    def expected_predict_s(self) -> float | None:
        """The trained predictor's expected time: the upper quartile of its last 8 calls in this
        process (kept per predictor version, since the service builds a solver per solve; None:
        never run, or every measurement forgotten)."""
        return _upper_quartile(_PREDICT_TIMES.get(str(getattr(self.predictor, "version", None))))

    def _predict(self, problem: Problem, left_s: float | None = None, stats: dict | None = None,
                 small_pool: bool = False, budget_ms: float | None = None) -> np.ndarray:
        """P [N, D] from the trained predictor, or from the engagement gradient (as ``surrogate``)
        when the policy says the predictor does not pay (:func:`~mgmatch.solvers.policy.use_trained_predictor`:
        its expected time does not fit the time left, or the pool is a small one), or when its
        sidecar's measured gate says ``gradient`` at the budget nearest ``budget_ms``
        (:func:`~mgmatch.solvers.policy.gate_verdict`); where the gate says ``network`` there, it must fit
        :data:`~mgmatch.solvers.policy.GATED_PREDICT_SHARE` of the time left instead of ``PREDICT_SHARE``.

        The first call of a predictor in the process is not measured (a cold ONNX session: the 5v5
        example at 50 ms ran at 1.42% instead of 0.45% when that call kept the process on the
        gradient), and every :data:`PREDICT_FORGET_EVERY`-th solve that skips the predictor as too
        slow forgets its oldest measurement but the last, so a busy moment does not keep it off."""
        from .surrogate import GradientPredictor

        trained = not isinstance(self.predictor, GradientPredictor)
        key = str(getattr(self.predictor, "version", None))
        gate = getattr(self.predictor, "gate", None) if trained else None
        scaled = gate_budget_ms(gate, budget_ms, tabu_pace_s(problem))  # the budget on the gate's machine
        verdict = gate_verdict(gate, scaled) if trained else None
        if verdict is not None and stats is not None and scaled is not None:
            stats["gate_budget_ms"] = round(scaled, 1)
        if verdict == "gradient":
            # measured offline: with this network MGMatch was behind the engagement gradient (`surrogate`)
            # at this budget, or nowhere ahead of it
            if stats is not None:
                stats["predictor_used"] = GradientPredictor.version
                stats["predictor_gate"] = "gradient"
            return self._checked(problem, GradientPredictor().predict([problem]))
        share = GATED_PREDICT_SHARE if verdict == "network" else PREDICT_SHARE
        if verdict == "network" and stats is not None:
            stats["predictor_gate"] = "network"
        if trained and not use_trained_predictor(self.expected_predict_s(), left_s, small_pool, share):
            _PREDICT_SKIPS[key] = _PREDICT_SKIPS.get(key, 0) + 1
            if not small_pool and len(_PREDICT_TIMES.get(key, ())) > 1 and _PREDICT_SKIPS[key] % PREDICT_FORGET_EVERY == 0:
                _PREDICT_TIMES[key] = _PREDICT_TIMES[key][1:]
            if stats is not None:
                stats["predictor_used"] = GradientPredictor.version
            return self._checked(problem, GradientPredictor().predict([problem]))
        t0 = time.perf_counter()
        out = self.predictor.predict([problem])
        if trained and key in _PREDICT_WARM:
            _remember(_PREDICT_TIMES, key, time.perf_counter() - t0, 8)
        _PREDICT_WARM.add(key)
        if stats is not None:
            stats["predictor_used"] = getattr(self.predictor, "version", None)
        return self._checked(problem, out)

    def _checked(self, problem: Problem, out: list) -> np.ndarray:
        N, D = problem.instance.n, problem.instance.teams
        if len(out) != 1:
            raise ValueError(f"predictor returned {len(out)} predictions for 1 problem")
        p = np.asarray(out[0], dtype=np.float64)
        if p.shape != (N, D):
            raise ValueError(f"predictor returned shape {p.shape}, expected ({N}, {D})")
        if not np.isfinite(p).all():
            raise ValueError("predictor returned non-finite probabilities")
        return np.clip(p, 0.0, 1.0)

    def solve(self, problem: Problem, budget: Budget) -> Solution:
        """The measured policy (:mod:`mgmatch.solvers.policy`) picks the path, then runs it; the time
        that freeing its SCIP models takes after the answer (:data:`TEARDOWN`) is kept back from the
        budget, and counts in the answer's ``time_ms``."""
        budget = budget.or_default(self.default_time_limit_ms)
        if self.policy == "auto" and lobby_path(problem):  # large lobbies: before compiling (policy.lobby_path)
            return lobby_answer(problem, budget, self.name)
        size = BuildClock.size(problem.compiled)
        keep = 0.0
        if budget.time_limit_ms is not None:
            keep = min(max(0.0, TEARDOWN.expected_s(size) - FINISH_RESERVE_S), TEARDOWN_MAX_SHARE * budget.time_limit_ms / 1e3)
        sol = self._solve(problem, Budget(budget.time_limit_ms - 1e3 * keep, budget.start) if keep > 0 else budget)
        done = time.perf_counter()  # the solve's frames, and the SCIP models they held, are gone
        TEARDOWN.record(max(0.0, done - budget.start - sol.time_ms / 1e3), size)
        return sol.model_copy(update={"time_ms": round(budget.elapsed_ms(done), 3)})

    def _solve(self, problem: Problem, budget: Budget) -> Solution:
        version = getattr(self.predictor, "version", None)
        stats: dict = {"predictor": version, "predictor_used": None}  # None: answered without predicting

        def answer(team_of, status) -> Solution:
            return problem.solution(team_of, status, self.name, budget.elapsed_ms(), stats=stats)

        if budget.expired():
            return answer(None, "no_solution")
        t0 = time.perf_counter()
        choice = choose(problem, budget.remaining(), self.policy)
        self.last_choice = choice
        stats.update(choice.stats(), policy_ms=round((time.perf_counter() - t0) * 1e3, 3))
        starts: dict[bytes, np.ndarray] = {}
        if choice.path == "enumerate":
            t1 = time.perf_counter()
            # an enumeration not expected to finish hands its best over to a selection search (where
            # that applies) once it has one and ENUM_SELECTION_SHARE of the time is left
            selecting = (self.selection and selection_applicable(problem) and budget.remaining() is not None
                         and choice.enumerate_estimate_s is not None
                         and choice.enumerate_estimate_s > budget.remaining())
            handover = budget.share(1.0 - ENUM_SELECTION_SHARE).deadline() if selecting else None
            res = best_assignment(problem, budget.deadline() - FINISH_RESERVE_S,
                                  chunk=enumerate_chunk(budget.remaining()), handover=handover,
                                  empty_handover=EMPTY_HANDOVER)
            stats.update(enumerate_ms=round((time.perf_counter() - t1) * 1e3, 3), enumerate_complete=res.complete,
                         enumerate_examined=res.examined)
            record_enumeration(time.perf_counter() - t1, res.examined)
            if res.complete:
                return answer(res.team_of, "infeasible" if res.team_of is None else "optimal")
            if res.team_of is not None and selecting:
                stats["selection_start"] = "enumeration"
                best, _ = self._tabu(problem, res.team_of, res.objective, budget.deadline() - FINISH_RESERVE_S,
                                     0.0, stats)
                return answer(best, "feasible")
            if res.team_of is not None:  # cut short: its best is one more start for the pipeline
                starts[res.team_of.tobytes()] = res.team_of
        if budget.remaining() <= FINISH_RESERVE_S:
            return answer(next(iter(starts.values()), None), "feasible" if starts else "no_solution")
        t0 = time.perf_counter()
        # the network competes with the search for the time the fixed stages leave: on the pipeline
        # path, the surrogate stage's measured time (not with a selection search, which has none)
        left = budget.remaining()
        if choice.path != "scip" and not (self.selection and self.use_polish and selection_applicable(problem)):
            left -= _upper_quartile(_SURROGATE_TIMES.get(_stage_key(problem, budget, self.name))) or 0.0
        p = self._predict(problem, left, stats, small_pool=choice.small_pool and self.policy == "auto",
                          budget_ms=budget.time_limit_ms)
        stats["predict_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        if budget.remaining() <= FINISH_RESERVE_S:
            return answer(next(iter(starts.values()), None), "feasible" if starts else "no_solution")

        # greedy rounding: a free candidate and the warm start when it is feasible
        rounded = rounding(problem, p)
        rounding_ok = bool(problem.checker.feasible(rounded[None])[0])
        if rounding_ok:
            starts.setdefault(rounded.tobytes(), rounded.copy())
        stats["rounding_feasible"] = rounding_ok
        with released():  # the SCIP instances built here serve the next solve's builds
            if choice.path == "scip":
                sol = self._scip_path(problem, budget, p, starts, stats, answer)
            else:
                sol = self._pipeline(problem, budget, p, rounded, starts, stats, answer)
        if sol.status == "no_solution" and self.use_polish and self._tabu_share(None) > 0:
            # nothing feasible yet and time left (the surrogate MIP's measured read or build did not
            # fit, as in a fresh process whose first SCIP reads were slow; or it found nothing in its
            # time): tabu search repairs the rounding with what is left. Without it, 2 of a new
            # process's first 40 12v12 solves at 20 ms answered nothing 2 ms in, and a 3v3 pool
            # whose feasible assignments are rare answered nothing 6 ms into 10 ms
            res = self._tabu_run(problem, rounded, budget.deadline() - FINISH_RESERVE_S, 0.0, stats)
            if res.iterations:
                stats["last_repair"] = "repaired" if res.team_of is not None else "failed"
            if res.team_of is not None:
                return answer(res.team_of, "feasible")
        return sol

    def _scip_path(self, problem: Problem, budget: Budget, p: np.ndarray, starts: dict, stats: dict,
                   answer) -> Solution:
        """The engagement MIP warm-started at once with the best start, with all the time left.

        SCIP's limit is what is left of the budget after building the model (minus the margin it
        overshoots by and a reserve to polish an unproven answer); without a proof, the better of
        SCIP's answer and the start is polished with the reserve.
        """
        deadline = budget.deadline()
        stop = deadline - FINISH_RESERVE_S
        t1 = time.perf_counter()
        start = max(starts.values(), key=problem.objective) if starts else None
        best, best_obj = start, (None if start is None else problem.objective(start))
        size = BuildClock.size(problem.compiled)
        mip = None
        if ENGAGEMENT_BUILDS.expected_s(size) > stop - t1:  # no time to build: polish the start
            ENGAGEMENT_BUILDS.skipped(size)
        else:
            try:
                mip = MipModel.build(problem.compiled, checker=problem.checker, settings="exact", deadline=stop,
                                     reuse=True)
                mip.add_engagement_objective(problem, deadline=stop)
                ENGAGEMENT_BUILDS.record(time.perf_counter() - t1, size)
            except BuildInterrupted:
                mip = None
        if mip is not None and start is not None and self.warm_start:
            mip.warm_start(start)
        stats["scip_build_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        left = stop - time.perf_counter() - SCIP_MARGIN_S
        reserve = left * FINAL_POLISH_SHARE
        limit = left - reserve
        stats["scip_limit_ms"] = round(max(0.0, limit) * 1e3, 3)
        if mip is not None and limit > 0:
            mip.set_time_limit(limit)
            res = mip.solve()
            stats.update(scip_status=res.status, scip_ms=round(res.time_s * 1e3, 3), scip_nodes=res.nodes)
            if res.status == "infeasible" and res.team_of is None and start is None:
                return answer(None, "infeasible")
            if res.team_of is not None:
                obj = problem.objective(res.team_of)
                if res.optimal:
                    return answer(res.team_of, "optimal")
                if best_obj is None or obj > best_obj:
                    best, best_obj = res.team_of, obj
        if best is None:
            return answer(None, "no_solution")
        res_p = self._polish(problem, best, stop)
        stats["final_polish_moves"] = res_p.rounds
        if res_p.objective > best_obj:
            best = res_p.team_of
        return answer(best, "feasible")

    @staticmethod
    def _polish(problem: Problem, team_of: np.ndarray, deadline: float, pace: float = 0.0) -> PolishResult:
        """:func:`polish` paced by the measured rounds (:data:`POLISH_ROUNDS`) and recording them."""
        size = problem.instance.n ** 2
        res = polish(problem, team_of, deadline=deadline, round_s=max(pace, POLISH_ROUNDS.expected_s(size)))
        if res.measured_round_s > 0:
            POLISH_ROUNDS.record(res.measured_round_s, size)
        elif not res.local_optimum:
            POLISH_ROUNDS.skipped(size)  # no round fitted at the measured pace
        return res

    def _tabu_share(self, left_s: float | None, key: tuple | None = None) -> float:
        """The tabu stage's share of the time left: the given one, or by the measured rule
        (:data:`TABU_SCIP_RATIO`) from the policy's SCIP estimate, or from how often SCIP's search
        helped lately (:data:`SEARCH_HIT_RATE`, ``key`` from :func:`_search_key`); ``left_s`` None:
        no SCIP search follows, tabu search may take all the time."""
        if self.tabu_share is not None:
            return self.tabu_share
        if left_s is None:
            return 1.0
        if _not_paying(key):
            # SCIP's search has not been paying: tabu search takes all the time, except that one
            # solve in _SEARCH_PROBE_GAP still searches (after tabu), to notice when it pays again
            return TABU_SHARE if _probe_due(key) else 1.0
        est = self.last_choice.scip_estimate_s if self.last_choice is not None else 0.0
        return TABU_SHARE if est > TABU_SCIP_RATIO * left_s else 0.0

    def _tabu(self, problem: Problem, best: np.ndarray, best_obj: float, stop: float, pace: float,
              stats: dict) -> tuple[np.ndarray, float]:
        """The anytime local search from ``best`` until ``stop``; the better of the two.

        Selection search (:mod:`mgmatch.solvers.selection`: who plays, every team split scored)
        where it applies (benched candidates, few team patterns; ``stats["selection_*"]``), else
        tabu search on assignments (``stats["tabu_*"]``)."""
        t0 = time.perf_counter()
        if t0 + pace >= stop:
            POLISH_ROUNDS.skipped(problem.instance.n ** 2)  # the pace given is polishing's
            return best, best_obj
        if self.selection and selection_applicable(problem):
            sel = selection_search(problem, best, stop, seed=self.seed)
            _add(stats, selection_ms=round((time.perf_counter() - t0) * 1e3, 3), selection_iterations=sel.iterations,
                 selection_restarts=sel.restarts)
            stats["selection_improved"] = stats.get("selection_improved", False) or sel.improved
            return (sel.team_of, sel.objective) if sel.objective > best_obj else (best, best_obj)
        res = self._tabu_run(problem, best, stop, pace, stats)
        if res.objective > best_obj:
            return res.team_of, res.objective
        return best, best_obj

    def _region_probes(self, problem: Problem, p: np.ndarray, best: np.ndarray, best_obj: float, stop: float,
                       pace: float, stats: dict) -> tuple[np.ndarray, float]:
        """Short tabu walks from the rounding of P in each other host region that can hold the match
        (:data:`REGION_PROBES`); the best of them and ``best``. ``stats["region_probes"]``: how many ran,
        ``stats["region_probe_won"]``: one of them beat ``best``."""
        near = near_players(problem) if REGION_PROBES else None
        left = stop - time.perf_counter()
        if near is None or left < REGION_PROBE_MIN_S or (self.selection and selection_applicable(problem)):
            return best, best_obj
        slots = sum(problem.instance.sizes)
        selected = np.asarray(best) >= 0
        mass = p.sum(axis=1)
        alts = [g for g in range(near.shape[1]) if near[:, g].sum() >= slots and not near[selected, g].all()
                and region_admits(problem, near[:, g])]
        # the regions the prediction favours first, as many as get REGION_PROBE_EACH_S each
        alts.sort(key=lambda g: -_favour(mass, near[:, g], slots))
        alts = alts[:int(REGION_PROBE_SHARE * left / REGION_PROBE_EACH_S)]
        if not alts:
            return best, best_obj
        each = REGION_PROBE_SHARE * left / len(alts)
        units = party_units(problem)
        won = False
        for g in alts:
            start = round_prediction(np.where(near[:, g][:, None], p, p - 2.0), problem.instance.sizes, units)
            res = self._tabu_run(problem, start, min(time.perf_counter() + each, stop), pace, stats)
            if res.team_of is not None and res.objective > best_obj:
                best, best_obj, won = res.team_of, res.objective, True
        stats["region_probes"] = len(alts)
        stats["region_probe_won"] = won
        return best, best_obj

    def _tabu_run(self, problem: Problem, start: np.ndarray, stop: float, pace: float, stats: dict,
                  feasible_by: float | None = None) -> TabuResult:
        """:func:`tabu_search`, its time and iterations added to ``stats`` and its pace remembered."""
        t0 = time.perf_counter()
        res = tabu_search(problem, start, stop, seed=self.seed, round_s=pace, feasible_by=feasible_by)
        took = time.perf_counter() - t0
        _add(stats, tabu_ms=round(took * 1e3, 3), tabu_iterations=res.iterations, tabu_restarts=res.restarts)
        stats["tabu_improved"] = stats.get("tabu_improved", False) or res.improved
        model = _model_key(problem)
        # from runs of 4 iterations or more (a run's fixed costs spread over few iterations
        # overstate the pace), or from any run while there is none: else a model whose tabu search
        # only ever gets a few iterations (12v12-deep at 20 ms) never had a pace, and repair first,
        # which needs one, was never tried there
        if res.iterations >= 4 or (res.iterations >= 1 and not _TABU_PACE.get(model)):
            _remember(_TABU_PACE, model, took / res.iterations, SURROGATE_TIMES_KEEP)
        return res

    def _repair_first(self, problem: Problem, budget: Budget, rounded: np.ndarray, starts: dict, stats: dict,
                      answer, alone: bool = False) -> Solution | None:
        """Tabu search from the best start, or from ``rounded`` (:func:`rounding` of P), with all the time
        left, its penalty walking a rule-breaking start to a feasible one. None (the time left goes
        to the surrogate MIP) when nothing is feasible by :data:`REPAIR_SHARE` of the time left, when
        the rules after it say no (:data:`REPAIR_MAX_ITERATIONS`, :data:`REPAIR_MIN_RATE`), or when
        the surrogate stage (for this engagement model and budget) or tabu search (for this model)
        was never measured; ``stats["repair_skipped"]`` says which. ``alone``: the surrogate stage is
        measured as not fitting the time left at all, so there is no fallback to give the time to:
        tabu search walks until the deadline whatever the recent repairs did (12v12 at 10 ms: with
        the success rule, repair first was off in 46 of 80 solves, which then answered nothing)."""
        stop = budget.deadline() - FINISH_RESERVE_S
        t0 = time.perf_counter()
        expected = _repair_iterations(problem, budget, t0, self.name)
        if expected is None:
            stats["repair_skipped"] = "unmeasured"
            return None
        stats["repair_expected_iterations"] = round(expected, 1)
        if stats["repair_expected_iterations"] >= REPAIR_MAX_ITERATIONS:
            stats["repair_skipped"] = "iterations"  # the pipeline leaves tabu search time enough
            return None
        key = _repair_key(problem, budget, self.name, stats.get("predictor_used"))
        tries = _REPAIRS.get(key, [])
        retry = False
        if not alone and len(tries) >= REPAIR_MIN_SEEN and sum(tries) < REPAIR_MIN_RATE * len(tries):
            _REPAIR_SKIPS[key] = _REPAIR_SKIPS.get(key, 0) + 1
            if _REPAIR_SKIPS[key] < _REPAIR_RETRY_GAP.get(key, REPAIR_RETRY_EVERY):
                stats["repair_skipped"] = "success_rate"
                return None
            _REPAIR_SKIPS[key], retry = 0, True
        _wear_stage(problem, budget, self.name)
        start = max(starts.values(), key=problem.objective) if starts else rounded
        res = self._tabu_run(problem, start, stop, 0.0, stats,
                             feasible_by=None if alone else t0 + REPAIR_SHARE * (stop - t0))
        repaired = res.team_of is not None
        if retry and repaired:
            # a retry that repairs starts the record afresh: the failures before it no longer count
            # (kept, a chance run of early failures held repair first off for ~16 solves per
            # success needed to outweigh them: 12v12-deep at 50 ms skipped it on 43 of 80 solves)
            _REPAIRS[key] = [True]
            _REPAIR_RETRY_GAP[key] = REPAIR_RETRY_EVERY
        else:
            _remember(_REPAIRS, key, repaired, REPAIR_KEEP)
        if retry and not repaired:
            _REPAIR_RETRY_GAP[key] = min(2 * _REPAIR_RETRY_GAP.get(key, REPAIR_RETRY_EVERY), REPAIR_RETRY_MAX)
        stats["repair_first"] = "repaired" if repaired else "failed"
        if not repaired:
            if not starts and res.last is not None:
                # a last repair (nothing feasible after the surrogate stage either) resumes where this
                # walk stopped instead of from the rounding again: a 12v12 pool of 96 candidates needs
                # 20 iterations, and at 10 ms the first walk gave up after 16, the surrogate MIP found
                # nothing, and the last repair started over with time for a few
                rounded[:] = res.last
            return None
        return answer(res.team_of, "feasible")

    def _polish_only(self, problem: Problem, stop: float, starts: dict, stats: dict, answer) -> Solution:
        """No time for a MIP: the best start polished, then tabu-searched, until ``stop``
        (``no_solution`` without one)."""
        if not starts:
            return answer(None, "no_solution")
        best = max(starts.values(), key=problem.objective)
        best_obj = problem.objective(best)
        res_p = self._polish(problem, best, stop)
        stats["final_polish_moves"] = res_p.rounds
        if res_p.objective > best_obj:
            best, best_obj = res_p.team_of, res_p.objective
        if self._tabu_share(None) > 0:
            best, best_obj = self._tabu(problem, best, best_obj, stop, res_p.round_s, stats)
        return answer(best, "feasible")

    def _selection_answer(self, problem: Problem, p: np.ndarray, starts: dict, stop: float, stats: dict,
                          answer) -> Solution:
        """Selection search until ``stop`` from the best start (the surrogate MIP's; when it found
        none, selections drawn by the prediction, :func:`start_from_scores`)."""
        if starts:
            stats.setdefault("selection_start", "surrogate")
        else:
            start = start_from_scores(problem, p.sum(axis=1), stop, seed=self.seed)
            if start is None:
                return answer(None, "no_solution")
            starts[start.tobytes()] = start
            stats["selection_start"] = "sampled"
        best = max(starts.values(), key=problem.objective)
        best, _ = self._tabu(problem, best, problem.objective(best), stop, 0.0, stats)
        return answer(best, "feasible")

    def _pipeline(self, problem: Problem, budget: Budget, p: np.ndarray, rounded: np.ndarray, starts: dict,
                  stats: dict, answer) -> Solution:
        """Surrogate MIP → polish → search of the engagement MIP (the module docstring's steps 3–5)."""
        deadline = budget.deadline()
        selecting = self.selection and self.use_polish and selection_applicable(problem)
        if selecting:
            # few team patterns and benched candidates: the predicted players, best split, are the
            # start of a selection search with all the time (the surrogate MIP only when they
            # have no feasible split)
            t1 = time.perf_counter()
            start = start_from_scores(problem, p.sum(axis=1), samples=0)
            stats["selection_start_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
            if start is not None:
                starts.setdefault(start.tobytes(), start)
            if starts:  # the predicted players' best split, or the rounding when that is better
                stats["selection_start"] = "prediction" if start is not None else "rounding"
                best = max(starts.values(), key=problem.objective)
                best, _ = self._tabu(problem, best, problem.objective(best), deadline - FINISH_RESERVE_S, 0.0, stats)
                return answer(best, "feasible")

        # when SCIP's search of the engagement MIP will not run in this solve (it has not been
        # paying and this is no probe, or its measured builds will not fit what the surrogate stage
        # and polishing leave), the surrogate MIP is there only for a feasible start: tabu search
        # repairs the rounding instead and walks on with all the time
        key = _search_key(problem, budget, self.name)
        probe = None  # None: the search's measured rule decides after polishing
        skip = None   # why the search will not run: "not_paying", "build_too_slow", "no_time", "too_tight_to_probe"
        if self.search and self.use_polish and self.tabu_share is None and not selecting:
            if _not_paying(key):
                probe = _probe_due(key)
                skip = None if probe else "not_paying"
                if probe and self.repair_first and _too_tight_to_probe(problem, budget, self.name):
                    probe, skip = None, "too_tight_to_probe"
            builds = _SEARCH_BUILDS.get(key[0])
            stage = _upper_quartile(_SURROGATE_TIMES.get(_stage_key(problem, budget, self.name))) or 0.0
            after = (deadline - time.perf_counter() - stage) * (1.0 - self.polish_share)
            if skip is None and not probe and builds and max(builds) > SEARCH_BUILD_SHARE * after:
                skip = "build_too_slow"
            # the fastest recent stage decides whether the search and the fallback of a failed repair
            # can have any time at all (one slow stage, e.g. a process's first, must not decide it for
            # good: a solve that repairs first records no stage)
            fastest = _fastest_stage(problem, budget, self.name)
            left = deadline - FINISH_RESERVE_S - time.perf_counter()
            if skip is None and not probe and fastest > 0.0 and (left - fastest) * (1.0 - self.polish_share) < SEARCH_MIN_S:
                skip = "no_time"
            if skip is not None and self.repair_first:
                # no fallback: the surrogate stage does not fit what a failed repair would leave it
                alone = fastest >= (1.0 - REPAIR_SHARE) * left
                done = self._repair_first(problem, budget, rounded, starts, stats, answer, alone=alone)
                if done is not None:
                    stats["search_skipped"] = skip
                    if skip == "build_too_slow":
                        _forget_oldest_build(key[0])
                    return done

        # a model the search may turn into the engagement MIP needs a new SCIP instance
        searchless = not (self.search and self.use_polish) or selecting or skip is not None
        # surrogate MIP (Eq. 20-21): its share of the budget left (at least SURROGATE_MIN_S); when
        # that gave no feasible assignment, the solve goes on with all the time left
        t1 = time.perf_counter()
        stop = deadline - FINISH_RESERVE_S
        mip = None
        if stop - time.perf_counter() > SCIP_MARGIN_S:
            size = BuildClock.size(problem.compiled)
            try:
                # a build measured as too slow is not started when there is an answer to polish
                # instead; without one it is tried anyway (abandoned at the deadline, so never
                # late): at 20 ms on 12v12, build times vary 5–10 ms with what ran just before,
                # and skipping left 9 of 40 pools unanswered
                if starts and SURROGATE_BUILDS.expected_s(size) > stop - time.perf_counter():
                    SURROGATE_BUILDS.skipped(size)
                    t1 = None  # not started: no stage to record
                    raise BuildInterrupted("no time to build the surrogate MIP (measured build times)")
                mip = MipModel.build(problem.compiled, checker=problem.checker, fast=True, deadline=stop,
                                     reuse=searchless)
                SURROGATE_BUILDS.record(time.perf_counter() - t1, size)
            except BuildInterrupted:
                stats["surrogate_status"] = "build_interrupted"
                if t1 is None:
                    stats["surrogate_ms"] = 0.0
                else:
                    stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
                    # started and did not fit: a miss, as long as all the time it had (else a budget
                    # where it never fits never has a measured stage, the search is never found to
                    # have no time, and repair first is never tried: 12v12 at 10 ms, 84% unanswered)
                    _record_stage(_STAGE_MISSES, problem, budget, max(stop, time.perf_counter()) - t1, self.name)
                if selecting:
                    return self._selection_answer(problem, p, starts, stop, stats, answer)
                return self._polish_only(problem, stop, starts, stats, answer)
            mip.set_linear_objective(p)
            if self.warm_start and starts:
                mip.warm_start(next(iter(starts.values())))
            room = stop - time.perf_counter() - SCIP_MARGIN_S
            surrogate_s = min(room, max(room * self.surrogate_share, SURROGATE_MIN_S))
            if surrogate_s > 0:
                if starts:
                    mip.set_time_limit(surrogate_s)
                    res = mip.solve()
                else:
                    # nothing to polish yet: a first feasible assignment depth first, with all the
                    # time if need be, then SCIP's own search for the surrogate's share
                    bucket = problem.instance.n // 16
                    margin = max([FIRST_MARGIN_S, *_FIRST_OVERSHOOT.get(bucket, [])])
                    limit = room + SCIP_MARGIN_S - margin
                    res = mip.solve_first(limit)
                    if res.status == "timelimit":
                        _remember(_FIRST_OVERSHOOT, bucket, max(0.0, res.time_s - limit), FIRST_OVERSHOOT_KEEP)
                    more = stop - time.perf_counter() - SCIP_MARGIN_S
                    if res.status == "sollimit" and more > 2 * SURROGATE_MIN_S:
                        # (with less left, polishing the first solution on the true objective pays more)
                        mip.set_time_limit(mip.model.getSolvingTime() + max(more * self.surrogate_share,
                                                                            SURROGATE_MIN_S))
                        first, res = res, mip.solve()
                        if res.team_of is None:
                            res = first
                stats["surrogate_status"] = res.status
                if res.status == "infeasible" and res.team_of is None and not starts:
                    stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
                    return answer(None, "infeasible")
                for t in _pool(mip, problem, res.team_of):
                    starts.setdefault(t.tobytes(), t)
            else:  # built, but no time left to solve it: a miss (as above)
                mip = None
                _record_stage(_STAGE_MISSES, problem, budget, max(stop, time.perf_counter()) - t1, self.name)
        stats["surrogate_ms"] = round((time.perf_counter() - t1) * 1e3, 3)
        if mip is not None:
            _record_stage(_SURROGATE_TIMES, problem, budget, time.perf_counter() - t1, self.name)
        if selecting:
            return self._selection_answer(problem, p, starts, stop, stats, answer)
        if not starts:
            return answer(None, "no_solution")
        cands = list(starts.values())
        vals = [problem.objective(t) for t in cands]
        order = np.argsort(vals)[::-1]
        best, best_obj = cands[order[0]], vals[order[0]]
        stats["surrogate_objective"] = best_obj
        if not self.use_polish:
            return answer(best, "feasible")

        # polish the starts best first, with at most the polishing share of the time left when
        # the true search follows (all of it otherwise)
        t2 = time.perf_counter()
        searching = self.search and mip is not None
        polish_stop = min(budget.share(self.polish_share).deadline(), stop) if searching else stop
        pace = POLISH_ROUNDS.expected_s(problem.instance.n ** 2)  # seconds per polish round
        polished, moves = 0, 0
        for k in order:
            if time.perf_counter() + pace >= polish_stop:
                if not polished:
                    POLISH_ROUNDS.skipped(problem.instance.n ** 2)
                break
            res_p = self._polish(problem, cands[k], polish_stop, pace)
            pace = max(pace, res_p.round_s)
            polished += 1
            moves += res_p.rounds
            if res_p.objective > best_obj:
                best, best_obj = res_p.team_of, res_p.objective
        stats.update(polish_ms=round((time.perf_counter() - t2) * 1e3, 3), polish_starts=polished,
                     polish_moves=moves, polished_objective=best_obj)
        if not searching:
            return answer(best, "feasible")

        # tabu search walks on from the local optimum with its share of the time left
        probing = probe is not None
        if mip.reused:  # predicted not to search (it cannot: see MipModel.build)
            share = 1.0
        elif probe is None:
            share = self._tabu_share(budget.remaining(), key)
        else:
            share = TABU_SHARE if probe else 1.0
        if share > 0:
            tabu_stop = min(budget.share(share).deadline(), stop)
            best, best_obj = self._region_probes(problem, p, best, best_obj, tabu_stop, pace, stats)
            best, best_obj = self._tabu(problem, best, best_obj, tabu_stop, pace, stats)
        if share >= 1.0 and (self.tabu_share is None or mip.reused):
            stats["search_skipped"] = skip or "not_paying"
            if skip == "build_too_slow":
                _forget_oldest_build(key[0])
            return answer(best, "feasible")

        # Predict-and-Search on the true objective, from the best assignment so far;
        # time is kept back to polish what it finds unless it proves the optimum. When building
        # the engagement objective would take most of what is left (its measured builds for this
        # model), tabu search goes on with the time instead
        t3 = time.perf_counter()
        reserve = max(budget.remaining() * FINAL_POLISH_SHARE, 2 * pace)
        builds = _SEARCH_BUILDS.get(key[0])
        if builds and max(builds) > SEARCH_BUILD_SHARE * (stop - reserve - t3):
            stats["search_skipped"] = "build_too_slow"
            _forget_oldest_build(key[0])
            if self._tabu_share(None) > 0:
                best, best_obj = self._tabu(problem, best, best_obj, stop, pace, stats)
            return answer(best, "feasible")
        # freeing the searched model is inside the budget too (measured; it is done before polishing)
        msize = BuildClock.size(problem.compiled)
        free_s = ENGAGEMENT_FREES.expected_s(msize)
        bucket = problem.instance.n // 16
        margin = max([SCIP_MARGIN_S, *_SEARCH_OVERSHOOT.get(bucket, [])])
        found = true_search(problem, mip, p, best, best_obj, stop=stop - reserve - free_s,
                            fraction=self.tr_fraction, delta=self.tr_delta, margin_s=margin)
        stats.update(found.stats)
        if "search_overshoot_ms" in found.stats:
            _remember(_SEARCH_OVERSHOOT, bucket, max(0.0, found.stats["search_overshoot_ms"] / 1e3), FIRST_OVERSHOOT_KEEP)
        t4 = time.perf_counter()
        mip.dispose()
        ENGAGEMENT_FREES.record(time.perf_counter() - t4, msize)
        if found.team_of is not None and found.objective > best_obj:
            best, best_obj = found.team_of, found.objective
            if not found.proven_optimal:
                res_p = self._polish(problem, best, stop, pace)
                stats["final_polish_moves"] = res_p.rounds
                if res_p.objective > best_obj:
                    best, best_obj = res_p.team_of, res_p.objective
        hit = found.proven_optimal or found.team_of is not None
        _remember(_SEARCH_HITS, key, hit, SEARCH_KEEP)
        if probing:  # a probe that paid resets the gap between probes, one that did not doubles it
            gap = _SEARCH_PROBE_GAP.get(key, SEARCH_PROBE_EVERY)
            _SEARCH_PROBE_GAP[key] = SEARCH_PROBE_EVERY if hit else min(2 * gap, SEARCH_PROBE_MAX)
            stats["search_probe"] = True
        if "search_build_ms" in found.stats:
            _remember(_SEARCH_BUILDS, key[0], found.stats["search_build_ms"] / 1e3, SEARCH_BUILDS_KEEP)
        stats["search_total_ms"] = round((time.perf_counter() - t3) * 1e3, 3)
        # SCIP finished the whole engagement MIP: its answer, or (nothing better under the objective
        # limit) the polished incumbent, is the optimum — same proof as the exact solver's
        return answer(best, "optimal" if found.proven_optimal else "feasible")


def _record_stage(history: dict, problem: Problem, budget: Budget, seconds: float, method: str = "") -> None:
    """A surrogate stage's time (or miss) into ``history``; the first of each model and budget in this
    process is not a measurement (a new process's first stage creates SCIP's first instance: 68 ms
    of a 50 ms budget on 12v12, and with repair first taken, no later stage corrected it)."""
    key = _stage_key(problem, budget, method)
    if key not in _STAGE_WARM:
        _STAGE_WARM.add(key)
        return
    _remember(history, key, seconds, SURROGATE_TIMES_KEEP)


def _wear_stage(problem: Problem, budget: Budget, method: str = "") -> None:
    """A solve that skips the surrogate stage (repair first) measures none: every
    :data:`STAGE_FORGET_EVERY`-th such solve forgets the slowest recorded stage, so one measured at a
    slow moment does not keep the stage away for good; but never the fastest, the last one left.
    Emptied, the list made the next solve run the stage to measure it again, and at a budget it does
    not fit that solve lost its answer: 12v12 pools of 90–100 at 10 ms, 1 of 12 in a bench run (the
    stage found nothing in 3.9 ms, and the repair after it had time for one iteration)."""
    key = _stage_key(problem, budget, method)
    _STAGE_SKIPS[key] = _STAGE_SKIPS.get(key, 0) + 1
    times = _SURROGATE_TIMES.get(key)
    if times and len(times) > 1 and _STAGE_SKIPS[key] % STAGE_FORGET_EVERY == 0:
        slowest = times.index(max(times))
        _SURROGATE_TIMES[key] = times[:slowest] + times[slowest + 1:]


def _fastest_stage(problem: Problem, budget: Budget, method: str = "") -> float:
    """The fastest recent surrogate stage of this model and budget; where none completed, the shortest
    miss (:data:`_STAGE_MISSES`); without either, :func:`_stage_estimate`, else 0.0."""
    key = _stage_key(problem, budget, method)
    recorded = _SURROGATE_TIMES.get(key) or _STAGE_MISSES.get(key)
    if recorded:
        return min(recorded)
    return _stage_estimate(problem) or 0.0


def _stage_estimate(problem: Problem) -> float | None:
    """A surrogate stage not yet measured at this model and budget, estimated from what the process
    measured elsewhere: the expected build of a surrogate MIP of this size (:data:`SURROGATE_BUILDS`,
    shared by budgets and methods) and the least time a stage solves (:data:`SURROGATE_MIN_S`).
    None before any build of the size was measured. Without it, the first solves of a budget
    ran the stage to measure it (the process's first is not recorded, :func:`_record_stage`), and
    where it does not fit they answered nothing: 12v12-deep at 10 ms, the first timed solve of a
    bench process in 5 of 6 seeds."""
    build = SURROGATE_BUILDS.expected_s(BuildClock.size(problem.compiled))
    return None if build <= 0.0 else build + SURROGATE_MIN_S


def _repair_iterations(problem: Problem, budget: Budget, now: float, method: str = "") -> float | None:
    """Tabu iterations the pipeline would leave after the surrogate stage, at the measured paces of
    this model and budget (None: one of them not measured yet). Where no stage completed, the
    shortest miss stands for it."""
    key = _stage_key(problem, budget, method)
    stage = _upper_quartile(_SURROGATE_TIMES.get(key))
    if stage is None and _STAGE_MISSES.get(key):
        stage = min(_STAGE_MISSES[key])
    if stage is None:
        stage = _stage_estimate(problem)
    pace = tabu_pace_s(problem)
    if stage is None or pace is None:
        return None
    return (budget.deadline() - FINISH_RESERVE_S - now - stage) / pace


def _search_key(problem: Problem, budget: Budget, method: str) -> tuple:
    """Searches are compared per engagement model, budget and method (a pool's are fixed in the
    service). The method is part of the key since `mgmatch` and `surrogate` on one model start the
    search from different answers, and with one shared probe counter the every-4th probe fell on one
    of them only (12v12-deep at 50 ms: `mgmatch` searched, `surrogate` gave the time to tabu search);
    ``key[0]`` is the model (its measured builds, :data:`_SEARCH_BUILDS`, are the model's)."""
    model = _model_key(problem)
    return (model, None if budget.time_limit_ms is None else round(budget.time_limit_ms), method)


def _repair_key(problem: Problem, budget: Budget, method: str, predictor: str | None) -> tuple:
    """Repair first's record is kept per search key and per predictor that ran: a walk from the
    network's rounding, after the network's time, says nothing of one from the gradient's. One
    method runs both where its gate's scaled budget (:func:`~mgmatch.solvers.policy.gate_budget_ms`)
    or its predictor's measured time sits at a boundary; with one record, the network's failed
    repairs turned repair first off for the gradient's solves too."""
    return (*_search_key(problem, budget, method), predictor)


def _stage_key(problem: Problem, budget: Budget, method: str = "") -> tuple:
    """The surrogate stage's measurements are kept per engagement model, budget and method: shared
    across budgets, the longer stages of 50 and 100 ms solves in a bench process that runs several
    budgets stood for the 20 ms ones (a service's pools each have their one budget); shared across
    methods, one method's solves wore the records down and the other's paid for measuring the stage
    again (interleaved 12v12 at 10 ms: the 2 of 80 MGMatch solves that did, none of `surrogate`'s;
    A/B arms of one pool run in one process the same way)."""
    return _search_key(problem, budget, method)


def tabu_pace_s(problem: Problem) -> float | None:
    """Seconds per tabu-search iteration on ``problem``'s engagement model in this process lately (the
    upper quartile of the last walks' paces, as repair first reads it); None before a walk of it."""
    return _upper_quartile(_TABU_PACE.get(_model_key(problem)))


def _upper_quartile(times: list[float] | None) -> float | None:
    """The nearest-rank upper quartile (of two, the slower); None for no measurement."""
    if not times:
        return None
    return sorted(times)[math.ceil(0.75 * (len(times) - 1))]


def _model_key(problem: Problem) -> str:
    return problem.model_name or f"id:{id(problem.model)}"


def _forget_oldest_build(model: str) -> None:
    """A search skipped because its measured builds would not fit forgets the oldest of them: a build
    slowed by a busy moment is then measured again (a skipped search measures nothing)."""
    builds = _SEARCH_BUILDS.get(model)
    if builds:
        _SEARCH_BUILDS[model] = builds[1:]


def _probe_due(key: tuple) -> bool:
    """Counts one more solve under ``key`` while its search is not paying; True for the one in
    :data:`_SEARCH_PROBE_GAP` that probes it again."""
    _SEARCH_SKIPS[key] = _SEARCH_SKIPS.get(key, 0) + 1
    if _SEARCH_SKIPS[key] >= _SEARCH_PROBE_GAP.get(key, SEARCH_PROBE_EVERY):
        _SEARCH_SKIPS[key] = 0
        return True
    return False


def _too_tight_to_probe(problem: Problem, budget: Budget, method: str = "") -> bool:
    """A probe due where repair first applies (the pipeline would leave tabu search fewer than
    :data:`REPAIR_MAX_ITERATIONS`) is not run: the surrogate stage, polishing and a search that
    has not been paying cost the whole answer there. 12v12 at 20 ms (80 solves, seed 1000003): the
    8 solves that took the pipeline instead of repair first (4 first ones, 4 probes) included the
    one pool left unanswered (its surrogate MIP found nothing in 16 ms) and one of the worst
    answers, 0.84%, where the median was 0.23%. The search, not paying, is then never probed again
    at that budget."""
    expected = _repair_iterations(problem, budget, time.perf_counter(), method)
    return expected is not None and expected < REPAIR_MAX_ITERATIONS


def _not_paying(key: tuple) -> bool:
    """SCIP's search improved or proved fewer than :data:`SEARCH_HIT_RATE` of the last solves under
    ``key`` (at least :data:`SEARCH_MIN_SEEN` of them)."""
    hits = _SEARCH_HITS.get(key)
    return hits is not None and len(hits) >= SEARCH_MIN_SEEN and sum(hits) < SEARCH_HIT_RATE * len(hits)


def _add(stats: dict, **values) -> None:
    """Add to counters in ``stats`` (a stage that runs twice in one solve reports both runs)."""
    for k, v in values.items():
        stats[k] = round(stats.get(k, 0) + v, 3)


def _remember(history: dict, key, value, keep: int) -> None:
    """Append ``value`` to ``history[key]``, keeping the last ``keep`` (a new list: readers in other
    threads never see one being changed)."""
    history[key] = history.get(key, [])[-(keep - 1):] + [value]


def _read(mip: MipModel, sol) -> np.ndarray:
    m = mip.model
    N, D = mip.x.shape
    vals = np.asarray([[m.getSolVal(sol, mip.x[i, j]) for j in range(D)] for i in range(N)])
    return np.where(vals.max(1) > 0.5, vals.argmax(1), -1).astype(np.int64)


def _pool(mip: MipModel, problem: Problem, first: np.ndarray | None, limit: int = 10) -> list[np.ndarray]:
    """The checker-feasible assignments of SCIP's solution pool (best surrogate value first)."""
    out = [] if first is None else [first]
    sols = mip.model.getSols() if mip.model.getNSols() > 0 else []
    rest = [_read(mip, s) for s in sols[:limit]]
    if rest:
        T = np.stack(rest)
        out += [t for t in T[problem.checker.feasible(T)]]
    return out


@register("mgmatch", "MGMatch: multimodal GNN prediction → surrogate MIP (SCIP) → polish → search of the engagement MIP; 100 ms default", needs_predictor=True)
def mgmatch_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="mgmatch", **options)


@register("bgcn", "BGCN baseline: bipartite-GCN prediction → surrogate MIP (SCIP) → polish → engagement-MIP search; 100 ms default", needs_predictor=True, predictor_suffix="-bgcn")
def bgcn_solver(predictor: Predictor | None = None, **options) -> MGMatchSolver:
    return MGMatchSolver(predictor, name="bgcn", **options)
