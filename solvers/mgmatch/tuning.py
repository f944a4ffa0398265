"""How MGMatch divides a budget between its stages: shares, reserves and thresholds, each with its reason.

The values were tuned with ``mgmatch bench quality`` and interleaved comparisons on the presets; the
measurements belong to the benchmark pages of the docs, the reasons stay here. The measured state
they are applied to lives in :mod:`mgmatch.solvers.mgmatch.history`.
"""

from __future__ import annotations

#: default wall-clock budget when the caller gives none (the paper's 3v3 online limit)
DEFAULT_TIME_LIMIT_MS = 100.0

# ------------------------------------------------------------------ the surrogate MIP

#: share of the time left after building the surrogate MIP that its solve may take: it usually proves
#: its optimum sooner, and its long tail is worth more to the search of the true objective
SURROGATE_SHARE = 0.1
#: ... but at least this long (seconds) when the budget allows
SURROGATE_MIN_S = 0.005

# ------------------------------------------------------------------ enumeration

#: share of the budget that a partial enumeration (one not expected to finish) leaves to a selection
#: search from its best (:mod:`mgmatch.solvers.selection`)
ENUM_SELECTION_SHARE = 0.7
#: a partial enumeration that has found nothing feasible by then stops there too, and the pipeline
#: (rounding, surrogate MIP: SCIP finds feasible points where they are rare) gets the time left
EMPTY_HANDOVER = True

# ------------------------------------------------------------------ polish and tabu search

#: share of the time left after the surrogate stage spent polishing its answers before the true search
POLISH_SHARE = 0.5
#: share of the time left before the true search kept back to polish what it finds
FINAL_POLISH_SHARE = 0.08
#: share of the time left after polishing that tabu search (:mod:`mgmatch.solvers.tabu`) walks on from
#: the best polished assignment before SCIP searches the engagement MIP from its best ...
TABU_SHARE = 0.5
#: ... when the runtime predictor's estimate of an exact SCIP solve is more than this many times the
#: time left: SCIP's search then rarely improves in time, while where it often proves the optimum,
#: tabu search's share is better left to it
TABU_SCIP_RATIO = 3.0
#: under a ``max_ping`` rule the tabu stage first walks from the rounding of each other host region
#: that can hold the match, REGION_PROBE_SHARE of its time in all, and goes on from the best answer:
#: the rounding's region is the one the prediction favours, and tabu search does not change regions.
#: Only where the stage has REGION_PROBE_MIN_S, and each probe at least REGION_PROBE_EACH_S
REGION_PROBES = True
REGION_PROBE_SHARE = 0.4
REGION_PROBE_MIN_S = 0.02
REGION_PROBE_EACH_S = 0.005

# ------------------------------------------------------------------ SCIP's search of the engagement MIP

#: the search is skipped (tabu search takes its time) when the slowest recent build of the engagement
#: objective for this model took more than this share of the time left for it: a build abandoned at
#: the deadline is time lost, and deep heads take long to add
SEARCH_BUILD_SHARE = 0.5
#: the search is skipped (``no_time``; tabu search takes its time) when the surrogate stage and
#: polishing would leave it less than this: building an engagement MIP alone takes about as long, and
#: a process that serves only such a budget never runs the search, so it never learns that it does
#: not pay
SEARCH_MIN_S = 0.005

# ------------------------------------------------------------------ repair first

#: **repair first** (:meth:`~mgmatch.solvers.mgmatch.MGMatchSolver._repair_first`): when SCIP's search
#: will not run, tabu search walks the party-whole rounding of P to a feasible assignment and on, with
#: all the time, instead of the surrogate MIP giving it a start; when it has none by this share of the
#: time left, the surrogate MIP gets the rest
REPAIR_SHARE = 0.35
#: ... only where the pipeline would leave tabu search fewer than this many iterations: (time left −
#: the model's measured surrogate stage) / its measured time per tabu iteration. With more, the
#: surrogate MIP's choice of who plays from a long bench is worth its time
REPAIR_MAX_ITERATIONS = 45
#: ... and only while repairs succeed: at least REPAIR_MIN_RATE of the last REPAIR_KEEP tries (by
#: :func:`~mgmatch.solvers.mgmatch.history.repair_key`; judged from REPAIR_MIN_SEEN on), since a
#: failed try leaves the surrogate MIP too little time to find an answer. While they do not, one
#: solve in REPAIR_RETRY_EVERY tries again (doubling after each retry that fails, up to
#: REPAIR_RETRY_MAX), and a retry that repairs starts the record afresh: a chance run of early
#: failures must not hold repair first off for long
REPAIR_MIN_RATE = 0.7
REPAIR_KEEP = 16
REPAIR_MIN_SEEN = 4
REPAIR_RETRY_EVERY = 16
REPAIR_RETRY_MAX = 128

# ------------------------------------------------------------------ reserves and margins

#: time kept for building the Solution after polishing, seconds
FINISH_RESERVE_S = 0.002
#: the measured teardown (from the answer built until the solve has returned: the Solution built, the
#: solve's models and arrays freed) is kept back from the budget beyond FINISH_RESERVE_S, but never
#: more than this share of it
TEARDOWN_MAX_SHARE = 0.1
#: SCIP checks its time limit between nodes and overshoots it by a few ms: stop it this early
SCIP_MARGIN_S = 0.004
#: ... but a first feasible assignment is looked for until this close to the answer's reserve (with
#: none there is no answer at all), or the largest recent overrun on pools of the size
#: (:meth:`~mgmatch.solvers.mgmatch.history.SolveHistory.overshoot_margin`)
FIRST_MARGIN_S = 0.001

# ------------------------------------------------------------------ warming up

#: :meth:`~mgmatch.solvers.mgmatch.MGMatchSolver.prepare`: calls of a cold predictor (a fresh ONNX
#: session is still slow on its second call) and the seconds of a first tabu walk
PREPARE_PREDICTS = 2
PREPARE_WALK_S = 0.003
