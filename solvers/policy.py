"""MGMatch's measured policy: which path answers a problem inside its budget.

Before any solving, :func:`choose` estimates what an exact answer would cost and picks one of

- ``enumerate`` — every team formation, checked and scored in numpy batches
  (:mod:`mgmatch.solvers.enumerate`), when the instance has few enough assignments that
  :func:`enumerate_estimate_s` fits :data:`ENUM_SHARE` of the time left. The answer is the proven
  optimum, usually in a few ms (3v3 pools: median ~2 000 assignments).
- ``scip`` — the big-M engagement MIP warm-started at once with the rounded prediction and given
  all the time left, when the **runtime predictor** :func:`scip_estimate_s` says SCIP closes it
  within :data:`SCIP_RATIO` × the time left.
- ``pipeline`` — predict → surrogate MIP → polish → search of the engagement MIP (the paper's fast
  solver), when neither closes in time: a good answer early matters more than a proof.

**The runtime predictor** is a measured rule, not a network: SCIP's wall time to prove the
engagement MIP optimal (``exact`` settings, build included) grows with the candidates N and, a
little less, with fewer team slots S = Σ sizes. A least-squares fit of log time on log N and log S
over 100 calibration solves (30 3v3, 30 12v12, 20 12v12 pools of 90–100 candidates and 10 3v3
pools of 90–100, seed 777, on one core of the shared 2-core machine under load from parallel
sessions; an ad-hoc script) gave ``t_ms = exp(−0.595) · N^1.693 · S^−0.255`` — 3v3 (N 10–19)
median 38 ms, 12v12 (N 30–52) 128 ms, pools 590–660 ms. The residual spread is wide (one
instance in four takes ≥ 1.4× the estimate), so the estimate is an expected time, and the
cost of a wrong bet is bounded: the SCIP path keeps the rounded prediction as its fallback
and polishes whatever SCIP found when it did not close.

The fit saw one head only (one hidden layer of 16 neurons, the big-M binaries are at most those
16). A deeper head's MIP is far harder: ``12v12-deep`` (hidden layers of 64 and 64) took 14.9 s to
prove a 60-candidate pool and had not closed another in 60 s (16% gap), where the fit says 0.25 s
(``exact`` method, seed 7, the two smallest of 40 pools; an ad-hoc script). So the estimate is scaled
by (hidden neurons / 16)^:data:`SCIP_HIDDEN_EXP`: × 64 for 12v12-deep, the faster of the two
measurements. Unscaled, the policy sent 12v12-deep to the SCIP path at budgets of a second and more,
where SCIP's own answer was 0.7% below what the pipeline found in 300 ms. The head shipped since is
fitted with an L1 penalty and most of its neurons are stable over a pool's formations: its pools are
proven in 0.5–1.3 s. So where the time left would let even the calibrated head's MIP close, the
scale counts only the neurons this pool's MIP must linearize (:func:`bigm_neurons`, at least 16):
27–31 of 128 on four 12v12-deep pools, an estimate of 1.2–1.3 s against 20–27 s by all neurons.
At tight budgets the neurons are not counted (~10 ms for a 64-64 head on 100 candidates).

Enumeration costs about 1 µs per assignment plus ~1 ms (``mgmatch.solvers.exact``'s measured
threshold); :data:`ENUM_US_PER_ASSIGNMENT` and :data:`ENUM_BASE_S` are set to 4 µs and 3 ms, as measured on the loaded machine,
and the rate is replaced by the process's own measurements once it has some (:func:`record_enumeration`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mgmatch.core.problem import Problem

from .enumerate import count_assignments

#: calibrated runtime predictor (see the module docstring): log t_ms = a + b·log N + c·log S
SCIP_LOG_MS = (-0.595, 1.693, -0.255)
#: hidden head neurons of the calibration (3v3, 12v12: one layer of 16) and the exponent of the
#: scaling for other heads (see the module docstring)
SCIP_HIDDEN_REF = 16
SCIP_HIDDEN_EXP = 2.0
#: take the SCIP path when the estimate is at most this many times the time left (the estimate is a
#: median with a long tail: at 0.5 and 1.0 the warm-started SCIP path measured worse than the
#: pipeline on 3v3 and 12v12 at 50–100 ms under load, e.g. 3v3 100 ms 0.39% vs 0.32%)
SCIP_RATIO = 0.3
#: below this much time left the pipeline (predict, build the surrogate MIP, solve it) rarely
#: answers a 3v3 pool under load (answered at 20 ms: 25–50%, at 50 ms: 88–94%), while enumeration
#: checked chunk by chunk answers nearly always: a countable pool is then enumerated as far as
#: the budget goes, its best so far the answer
ANYTIME_ENUM_S = 0.06
#: ... when it has at most this many assignments (3v3 pools: at most ~160 000; a 12v12 pool has
#: 10^14 and more, where a partial enumeration is no search at all)
ANYTIME_ENUM_MAX = 1_000_000
#: enumeration cost: µs per assignment and fixed seconds, measured on 3v3 pools under load (1 680
#: assignments 7 ms, 4 200 10–20 ms, 13 500 40–52 ms, 54 880 240–320 ms; about 1 µs + 1 ms quiet)
ENUM_US_PER_ASSIGNMENT = 4.0
ENUM_BASE_S = 0.003
#: ... the rate per assignment is measured, though (:func:`record_enumeration`): the upper quartile of
#: the last ENUM_RATES_KEEP enumerations of at least ENUM_MEASURE_MIN assignments replaces the 4 µs.
#: On a quiet machine the constant was 13x the rate (98 560 assignments in 30 ms): a 3v3 pool of
#: 19 520 assignments, estimated at 81 ms, was handed over at 3 ms of a 10 ms budget with 3 600
#: examined and nothing feasible, and 1–2 of 80 such solves answered nothing
ENUM_RATES_KEEP = 16
ENUM_MEASURE_MIN = 2_048
_ENUM_RATES: list[float] = []
#: enumeration checks its deadline between chunks: a chunk holds about this share of the time left
ENUM_CHUNK_SHARE = 0.15
#: the trained predictor runs when its expected time is at most this share of the time left; else
#: the engagement gradient (~0.05 ms) stands in for it (the GNN took 3–16 ms per pool under load).
#: 0.15 until 2026-11-25: on a slow hour the 5v5 example's network (5.6 ms median, 6.3 upper
#: quartile) no longer fit 7.4 of 49 ms and ran on 4 of 40 pools, and MGMatch fell from 0.38% to
#: 1.57–1.87% at 50 ms. At 0.25 the 12v12-deep network (9–12 ms) ran at 50 ms too and cost more
#: than it gave (MGMatch 2.67–4.45% against surrogate's 1.95–2.28%: the surrogate MIP takes 21–26
#: ms there, and polishing got the rest). At 0.2, same hour: 5v5 0.46% (surrogate 1.42%), 12v12
#: 0.62% (0.82%), 12v12-deep 2.77% and 2.88% (2.84%, 2.78%) at 50 ms, 1.04% and 1.11% (1.24%,
#: 1.15%) at 100 ms
PREDICT_SHARE = 0.2
#: ... but a network whose sidecar's measured gate says ``network`` at the budget nearest this solve's
#: (:func:`gate_verdict`) runs when its expected time fits this share: the gate measured it paying
#: there. 12v12-deep at 50 ms on a slow machine (network 9.5 ms, 30 pools, seed 1000003): forced on,
#: MGMatch 0.21% against `surrogate`'s 0.76%; under the 0.2 rule it never ran, and the two were one
#: algorithm (1.30% against 1.21% in the budgets table)
GATED_PREDICT_SHARE = 0.5
#: enumerate when its estimate is at most this share of the time left (the rest is the fallback's)
ENUM_SHARE = 0.6
#: count assignments exactly only when C(N, S) is at most this (counting a 95-candidate pool costs
#: ~17 ms; such a pool is never enumerable anyway)
COUNT_MAX_COMBOS = 10**7

PATHS = ("auto", "enumerate", "scip", "pipeline")

#: large lobbies (FFA, battle royale) go to the lobby search (:mod:`mgmatch.solvers.lobby`) from this
#: many player→team variables N·D on, when it handles every rule of the pool. Measured (shared 2-core
#: machine under load, docs/benchmarks/large-lobbies.md): at 48–64 candidates × 32 teams (ffa-32,
#: 1 536–2 048 variables) the pipeline (model-free, ``surrogate``) answered 1 pool of 3 at 50 ms and
#: the lobby search every pool; at 150–300 × 25 (br-100) compiling the rules alone takes 0.4–0.5 s and
#: the move scorer ~2 s; local-search and random answer no br-100 pool in the budget and skill is
#: 10–40% behind the lobby search (the joint batch forms several such lobbies by lobby searches too:
#: mgmatch.solvers.batch_lobby). The pipeline's own presets stay below: 12v12-deep pools have ≤ 200
#: variables.
LOBBY_MIN_VARIABLES = 1_500


def lobby_path(problem: Problem) -> bool:
    """Whether MGMatch answers ``problem`` by the lobby search (:data:`LOBBY_MIN_VARIABLES`)."""
    inst = problem.instance
    if inst.n * inst.teams < LOBBY_MIN_VARIABLES:
        return False
    from .lobby import supports

    return supports(problem)


@dataclass(frozen=True)
class Choice:
    """The policy's decision and what it was based on."""

    path: str                    # enumerate | scip | pipeline
    scip_estimate_s: float
    enumerate_estimate_s: float | None   # None: too many assignments to count
    assignments: int | None

    @property
    def small_pool(self) -> bool:
        """Few enough assignments to enumerate as far as a budget goes (3v3 pools)."""
        return self.assignments is not None and self.assignments <= ANYTIME_ENUM_MAX

    def stats(self) -> dict:
        return {"policy_path": self.path, "policy_scip_estimate_ms": round(self.scip_estimate_s * 1e3, 3),
                "policy_enumerate_estimate_ms": (None if self.enumerate_estimate_s is None
                                                 else round(self.enumerate_estimate_s * 1e3, 3)),
                "policy_assignments": self.assignments}


def scip_estimate_s(n_players: int, slots: int, hidden: int = SCIP_HIDDEN_REF) -> float:
    """The runtime predictor: expected seconds for SCIP to build and prove the engagement MIP of
    ``n_players`` candidates for ``slots`` places under a head with ``hidden`` hidden neurons."""
    a, b, c = SCIP_LOG_MS
    head = (max(1, hidden) / SCIP_HIDDEN_REF) ** SCIP_HIDDEN_EXP
    return head * math.exp(a + b * math.log(max(1, n_players)) + c * math.log(max(1, slots))) / 1e3


def hidden_neurons(problem: Problem) -> int:
    """Hidden neurons of the problem's engagement head (the big-M candidates of its exact MIP)."""
    return int(sum(W.shape[0] for W, _ in problem.model.head_weights[:-1]))


def bigm_neurons(problem: Problem) -> int:
    """Hidden neurons of the head that the pool's exact MIP must linearize with a binary: those whose
    pre-activation can take both signs over the pool's team formations, by the builder's first-layer
    bounds (an assignment problem per neuron) and interval arithmetic after (the MIP's own bounds are
    at least as tight, so this never undercounts its binaries). A penalized head has few: 27–31 of
    12v12-deep's 128 on pools of 68–81 candidates."""
    from .mip import first_layer_bounds, first_layer_coefficients

    layers = problem.model.head_weights
    if len(layers) == 1:
        return 0
    W1, b1 = layers[0]
    c = first_layer_coefficients(W1, problem.embeddings, problem.instance.teams)
    lo, hi = first_layer_bounds(c, b1, list(problem.instance.sizes))
    count = 0
    for W, b in layers[1:]:
        count += int(((lo < 0.0) & (hi > 0.0)).sum())
        ylo, yhi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        lo = b + np.minimum(W * ylo, W * yhi).sum(1)
        hi = b + np.maximum(W * ylo, W * yhi).sum(1)
    return count


def record_enumeration(seconds: float, examined: int) -> None:
    """An enumeration's time for ``examined`` assignments, into this process's measured rate
    (:func:`enumeration_rate_s`); runs of fewer than :data:`ENUM_MEASURE_MIN` say little of the rate."""
    global _ENUM_RATES
    if examined >= ENUM_MEASURE_MIN and seconds > 0:
        _ENUM_RATES = (_ENUM_RATES + [seconds / examined])[-ENUM_RATES_KEEP:]  # a new list: no reader sees it change


def enumeration_rate_s() -> float:
    """Seconds per assignment: the upper quartile of this process's recent enumerations, or
    :data:`ENUM_US_PER_ASSIGNMENT` before any was measured."""
    rates = sorted(_ENUM_RATES)
    return rates[int(0.75 * (len(rates) - 1))] if rates else ENUM_US_PER_ASSIGNMENT * 1e-6


def enumerate_estimate_s(assignments: int) -> float:
    return ENUM_BASE_S + enumeration_rate_s() * assignments


def enumerate_chunk(left_s: float | None, lo: int = 2_048, hi: int = 65_536) -> int:
    """Assignments per enumeration batch, so that one batch takes about ENUM_CHUNK_SHARE of the time left."""
    if left_s is None:
        return hi
    return int(min(hi, max(lo, ENUM_CHUNK_SHARE * left_s / enumeration_rate_s())))


def use_trained_predictor(expected_s: float | None, left_s: float | None, small_pool: bool = False,
                          share: float = PREDICT_SHARE) -> bool:
    """Whether the trained predictor runs: its expected time (None: never measured) fits ``share`` of
    the time left, and the pool is not a small one (:attr:`Choice.small_pool`), where the network's
    3–16 ms bought nothing: 3v3 at 100 ms under load, the pipeline reached 0.32% with the network and
    0.05% with the engagement gradient (16 instances, seed 4242); 12v12 at 50 ms the network
    helped (11.1% vs 16.4%)."""
    if small_pool:
        return False
    if expected_s is None or left_s is None:
        return True
    return expected_s <= share * left_s


#: a gate's budgets are scaled by the two machines' tabu paces only within these bounds (a pace
#: measured at a stalled moment must not move a solve to a verdict ten budgets away)
GATE_SCALE_MIN, GATE_SCALE_MAX = 0.2, 5.0


def gate_budget_ms(gate: dict | None, budget_ms: float | None, pace_s: float | None) -> float | None:
    """``budget_ms`` on the machine that measured ``gate``: scaled by that machine's tabu pace (the
    gate's ``pace_us``, seconds per iteration of MGMatch's tabu search on the model while it was
    measured) over this process's (``pace_s``, :func:`mgmatch.solvers.mgmatch.tabu_pace_s`), within
    [:data:`GATE_SCALE_MIN`, :data:`GATE_SCALE_MAX`]. What pays at a budget is set by the work that
    fits it, not by milliseconds: the 12v12-deep gate measured on a machine whose 12v12 pace was
    445–709 µs per iteration said ``gradient`` at 20 ms, and on one at 178–190 µs the network was
    ahead there by 0.07–0.09 points (± 0.03). Unscaled where either pace is unknown (a gate measured before it
    recorded one; a process that has not walked yet)."""
    if budget_ms is None or not isinstance(gate, dict):
        return budget_ms
    theirs = gate.get("pace_us")
    if (not isinstance(theirs, (int, float)) or not math.isfinite(theirs) or theirs <= 0
            or pace_s is None or not math.isfinite(pace_s) or pace_s <= 0):
        return budget_ms
    scale = min(GATE_SCALE_MAX, max(GATE_SCALE_MIN, theirs * 1e-6 / pace_s))
    return budget_ms * scale


def gate_verdict(gate: dict | None, budget_ms: float | None, pace_s: float | None = None) -> str | None:
    """A predictor sidecar's measured ``gate`` (``scripts/interleaved.py --gate``) at a solve's budget.

    A gate measured per budget (``by_budget_ms`` entries carrying ``use``) answers with the verdict
    at the measured budget nearest ``budget_ms`` on a log scale (the largest one for an unlimited
    solve), after scaling it to the gate's machine by tabu pace (:func:`gate_budget_ms`; ``pace_s``
    is this process's): ``"network"`` (the network runs when it fits :data:`GATED_PREDICT_SHARE` of
    the time left) or ``"gradient"`` (it never runs). An older gate, one verdict for every budget,
    answers ``"gradient"`` when it says so and None otherwise, as does a missing gate: the
    unmeasured rule (:data:`PREDICT_SHARE`) decides.
    """
    if not isinstance(gate, dict):
        return None
    measured: dict[float, str] = {}
    by_budget = gate.get("by_budget_ms")
    if isinstance(by_budget, dict):
        for b, entry in by_budget.items():
            try:
                ms = float(b)
            except (TypeError, ValueError):
                continue
            if isinstance(entry, dict) and entry.get("use") in ("network", "gradient") and math.isfinite(ms) and ms > 0:
                measured[ms] = entry["use"]
    if not measured:
        return "gradient" if gate.get("use") == "gradient" else None
    budget_ms = gate_budget_ms(gate, budget_ms, pace_s)
    if budget_ms is None or not math.isfinite(budget_ms) or budget_ms <= 0:
        return measured[max(measured)]
    nearest = min(measured, key=lambda ms: (abs(math.log(ms / budget_ms)), ms))
    return measured[nearest]


def assignments_if_countable(problem: Problem) -> int | None:
    """The exact number of assignments, or None when the pool is too large to be worth counting."""
    inst = problem.instance
    if math.comb(inst.n, min(inst.n, sum(inst.sizes))) > COUNT_MAX_COMBOS:
        return None
    return count_assignments(problem)


def choose(problem: Problem, left_s: float | None, forced: str = "auto") -> Choice:
    """Pick the path for ``problem`` with ``left_s`` seconds left (None: no limit).

    Args:
        forced: ``auto`` decides; ``enumerate``, ``scip`` or ``pipeline`` force that path (the
            estimates are still reported), for measuring each path on its own.
    """
    if forced not in PATHS:
        raise ValueError(f"policy must be one of {PATHS}, got {forced!r}")
    inst = problem.instance
    slots = sum(inst.sizes)
    hidden = hidden_neurons(problem)
    est_scip = scip_estimate_s(inst.n, slots, hidden)
    left = math.inf if left_s is None else left_s
    if hidden > SCIP_HIDDEN_REF and scip_estimate_s(inst.n, slots) <= SCIP_RATIO * left:
        # a head larger than the calibrated one, with time enough that even the calibrated head's
        # MIP could close: scale by the neurons this pool's MIP must linearize, not by all of them
        # (a penalized head's are few; the calibrated head's estimate is the floor)
        est_scip = scip_estimate_s(inst.n, slots, max(SCIP_HIDDEN_REF, bigm_neurons(problem)))
    count = assignments_if_countable(problem)
    est_enum = None if count is None else enumerate_estimate_s(count)
    if forced != "auto":
        return Choice(forced, est_scip, est_enum, count)
    if count is not None and (est_enum <= ENUM_SHARE * left
                              or (left < ANYTIME_ENUM_S and count <= ANYTIME_ENUM_MAX)):
        path = "enumerate"
    elif est_scip <= SCIP_RATIO * left:
        path = "scip"
    else:
        path = "pipeline"
    return Choice(path, est_scip, est_enum, count)
