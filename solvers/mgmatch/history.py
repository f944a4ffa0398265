"""MGMatch's cost model: what its solves measured on this machine, in one object the solver is handed.

A tight budget is spent by measured costs, not by fixed guesses: how long the surrogate stage takes for
an engagement model at a budget, how fast tabu search walks, whether SCIP's search of the engagement
MIP has been paying, how often repair first succeeds, how long the trained predictor takes. Each
record is a short list of recent values (old ones age out, so a slow moment does not decide for good)
kept per key: the engagement model, the budget and the method (a service's pools each keep their own
budget and method, and records of one would misstate another).

:class:`SolveHistory` holds all of it. The service and the CLI share the process's one
(:func:`default_history`), so every solve of a process learns from the ones before it; a test, a
benchmark arm or a second solver that must not share them builds its own (``SolveHistory()``) and
hands it to :class:`~mgmatch.solvers.mgmatch.MGMatchSolver` (``history=``), or makes it the process's
default for a while (:func:`using`). The build clocks SCIP's builds are timed with are the machine's,
shared with the exact solver: a new history reads the process clocks of :mod:`mgmatch.solvers.mip`
unless it is given its own.

Records are replaced, never changed in place (:meth:`SolveHistory.remember`): solver threads read
them without locks and never see a list half-written.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mgmatch.core.problem import Problem

from .. import mip
from ..interface import Budget
from ..mip import BuildClock

#: recent surrogate stages (and stage misses) kept per key
SURROGATE_TIMES_KEEP = 8
#: every this many solves that skip the surrogate stage forget its slowest record (never the last)
STAGE_FORGET_EVERY = 8
#: SCIP's search of the engagement MIP counts as not paying when it improved or proved the answer in
#: fewer than this share of the last SEARCH_KEEP searches of a key (judged from SEARCH_MIN_SEEN on)
SEARCH_HIT_RATE = 0.25
SEARCH_MIN_SEEN = 4
SEARCH_KEEP = 16
#: builds of the engagement objective kept per engagement model
SEARCH_BUILDS_KEEP = 8
#: while the search is not paying, one solve in this many still runs it (a probe) ...
SEARCH_PROBE_EVERY = 4
#: ... and after each probe that did not pay either, one in twice as many, up to this many
SEARCH_PROBE_MAX = 32
#: SCIP's overruns past its time limit kept per pool size class
FIRST_OVERSHOOT_KEEP = 8
#: calls of a trained predictor kept per predictor version
PREDICT_KEEP = 8
#: every this many solves that skip a trained predictor as too slow forget its oldest time (never the last)
PREDICT_FORGET_EVERY = 8


@dataclass
class SolveHistory:
    """Everything MGMatch measured in earlier solves, read by the next ones to spend their budget.

    Attributes (each record a list of recent values, by key; keys from :func:`search_key`,
    :func:`stage_key`, :func:`repair_key` and :func:`model_key`):
        surrogate_times: Seconds of the last surrogate stages (build and solve) by stage key.
        stage_misses: Surrogate stages that did not fit (build interrupted, or no time left to solve),
            as long as the time they had: where no stage completed, they stand for its time (a lower
            bound).
        stage_warm: Stage keys whose first stage this process has seen (that first one creates SCIP's
            first instance and is not a measurement).
        stage_skips: Solves per stage key that skipped the stage (repair first).
        search_hits: Whether each of the last searches of the engagement MIP improved or proved.
        search_skips: Solves per search key since the search stopped paying.
        search_probe_gap: Solves between probes of a search that is not paying, by search key.
        search_builds: Seconds of the last builds of the engagement objective, by engagement model.
        repairs: Whether each of the last repair-first tries repaired in time, by repair key.
        repair_skips: Solves since the last retry of repair first, by repair key.
        repair_retry_gap: Solves between retries of repair first while it is failing, by repair key.
        tabu_pace: Seconds per tabu iteration lately, by engagement model.
        first_overshoot: How far SCIP's first-solution solves ran past their limit, by pool size class.
        search_overshoot: How far SCIP's searches ran past their limit, by pool size class.
        predict_times: Seconds of the last calls of each trained predictor, by version.
        predict_skips: Solves that skipped each trained predictor as too slow.
        predict_warm: Predictor versions called once (the cold first call is not a measurement).
        polish_rounds: Polish rounds' seconds per N² candidates: no round starts that could not finish.
        teardown: Seconds from an answer built until the solve has returned, per compiled size (kept
            back from the budget).
        surrogate_builds, engagement_builds, engagement_frees: The machine's SCIP build clocks
            (:mod:`mgmatch.solvers.mip`'s process clocks unless given).
    """

    surrogate_times: dict[tuple, list[float]] = field(default_factory=dict)
    stage_misses: dict[tuple, list[float]] = field(default_factory=dict)
    stage_warm: set[tuple] = field(default_factory=set)
    stage_skips: dict[tuple, int] = field(default_factory=dict)
    search_hits: dict[tuple, list[bool]] = field(default_factory=dict)
    search_skips: dict[tuple, int] = field(default_factory=dict)
    search_probe_gap: dict[tuple, int] = field(default_factory=dict)
    search_builds: dict[str, list[float]] = field(default_factory=dict)
    repairs: dict[tuple, list[bool]] = field(default_factory=dict)
    repair_skips: dict[tuple, int] = field(default_factory=dict)
    repair_retry_gap: dict[tuple, int] = field(default_factory=dict)
    tabu_pace: dict[str, list[float]] = field(default_factory=dict)
    first_overshoot: dict[int, list[float]] = field(default_factory=dict)
    search_overshoot: dict[int, list[float]] = field(default_factory=dict)
    predict_times: dict[str, list[float]] = field(default_factory=dict)
    predict_skips: dict[str, int] = field(default_factory=dict)
    predict_warm: set[str] = field(default_factory=set)
    polish_rounds: BuildClock = field(default_factory=BuildClock)
    teardown: BuildClock = field(default_factory=BuildClock)
    surrogate_builds: BuildClock = field(default_factory=lambda: mip.SURROGATE_BUILDS)
    engagement_builds: BuildClock = field(default_factory=lambda: mip.ENGAGEMENT_BUILDS)
    engagement_frees: BuildClock = field(default_factory=lambda: mip.ENGAGEMENT_FREES)

    @staticmethod
    def remember(record: dict, key, value, keep: int) -> None:
        """Append ``value`` to ``record[key]``, keeping the last ``keep`` (a new list: readers in other
        threads never see one being changed)."""
        record[key] = record.get(key, [])[-(keep - 1):] + [value]

    # ---------------------------------------------------------------- the surrogate stage

    def record_stage(self, record: dict, problem: Problem, budget: Budget, seconds: float, method: str = "") -> None:
        """A surrogate stage's time (``record``: :attr:`surrogate_times`) or miss (:attr:`stage_misses`).
        The first of each key in the process is not a measurement: it pays for SCIP's first instance."""
        key = stage_key(problem, budget, method)
        if key not in self.stage_warm:
            self.stage_warm.add(key)
            return
        self.remember(record, key, seconds, SURROGATE_TIMES_KEEP)

    def wear_stage(self, problem: Problem, budget: Budget, method: str = "") -> None:
        """A solve that skips the surrogate stage measures none: every :data:`STAGE_FORGET_EVERY`-th such
        solve forgets the slowest record, so one taken at a slow moment does not keep the stage away for
        good. The fastest, the last one left, stays: emptied, the record would send the next solve into
        the stage to measure it again, at a budget it may not fit."""
        key = stage_key(problem, budget, method)
        self.stage_skips[key] = self.stage_skips.get(key, 0) + 1
        times = self.surrogate_times.get(key)
        if times and len(times) > 1 and self.stage_skips[key] % STAGE_FORGET_EVERY == 0:
            slowest = times.index(max(times))
            self.surrogate_times[key] = times[:slowest] + times[slowest + 1:]

    def stage_s(self, problem: Problem, budget: Budget, method: str = "") -> float | None:
        """The surrogate stage's expected seconds at this key: the upper quartile of its records."""
        return upper_quartile(self.surrogate_times.get(stage_key(problem, budget, method)))

    def fastest_stage(self, problem: Problem, budget: Budget, method: str = "", min_solve_s: float = 0.0) -> float:
        """The fastest recent surrogate stage at this key; where none completed, the shortest miss; without
        either, :meth:`stage_estimate`, else 0.0."""
        key = stage_key(problem, budget, method)
        recorded = self.surrogate_times.get(key) or self.stage_misses.get(key)
        if recorded:
            return min(recorded)
        return self.stage_estimate(problem, min_solve_s) or 0.0

    def stage_estimate(self, problem: Problem, min_solve_s: float) -> float | None:
        """A surrogate stage not yet measured at this key, from what the process measured elsewhere: the
        expected build of a surrogate MIP of this size (shared by budgets and methods) plus the least
        time a stage solves. None before any build of the size was measured. It keeps the first solves
        at a new budget from running the stage only to measure it where it does not fit."""
        build = self.surrogate_builds.expected_s(BuildClock.size(problem.compiled))
        return None if build <= 0.0 else build + min_solve_s

    def repair_iterations(self, problem: Problem, budget: Budget, now: float, method: str = "",
                          reserve_s: float = 0.0, min_solve_s: float = 0.0) -> float | None:
        """Tabu iterations the pipeline would leave after the surrogate stage, at the measured paces of
        this key (None: the stage or the pace not measured yet). Where no stage completed, the shortest
        miss stands for it; where none was tried, :meth:`stage_estimate`."""
        key = stage_key(problem, budget, method)
        stage = upper_quartile(self.surrogate_times.get(key))
        if stage is None and self.stage_misses.get(key):
            stage = min(self.stage_misses[key])
        if stage is None:
            stage = self.stage_estimate(problem, min_solve_s)
        pace = self.tabu_pace_s(problem)
        if stage is None or pace is None:
            return None
        return (budget.deadline() - reserve_s - now - stage) / pace

    # ---------------------------------------------------------------- tabu search

    def tabu_pace_s(self, problem: Problem) -> float | None:
        """Seconds per tabu iteration on ``problem``'s engagement model lately (the upper quartile of the
        last walks' paces); None before a walk of it."""
        return upper_quartile(self.tabu_pace.get(model_key(problem)))

    def record_tabu(self, problem: Problem, seconds: float, iterations: int) -> None:
        """A walk's pace, from walks of 4 iterations or more (a walk's fixed costs spread over few
        iterations overstate it), or from any walk while there is none: a model whose walks only ever
        get a few iterations must still get a pace, or repair first, which needs one, is never tried."""
        model = model_key(problem)
        if iterations >= 4 or (iterations >= 1 and not self.tabu_pace.get(model)):
            self.remember(self.tabu_pace, model, seconds / iterations, SURROGATE_TIMES_KEEP)

    # ---------------------------------------------------------------- SCIP's search of the engagement MIP

    def not_paying(self, key: tuple) -> bool:
        """SCIP's search improved or proved fewer than :data:`SEARCH_HIT_RATE` of the last solves under
        ``key`` (at least :data:`SEARCH_MIN_SEEN` of them)."""
        hits = self.search_hits.get(key)
        return hits is not None and len(hits) >= SEARCH_MIN_SEEN and sum(hits) < SEARCH_HIT_RATE * len(hits)

    def probe_due(self, key: tuple) -> bool:
        """Counts one more solve under ``key`` while its search is not paying; True for the one in
        :attr:`search_probe_gap` that probes it again."""
        self.search_skips[key] = self.search_skips.get(key, 0) + 1
        if self.search_skips[key] >= self.search_probe_gap.get(key, SEARCH_PROBE_EVERY):
            self.search_skips[key] = 0
            return True
        return False

    def record_search(self, key: tuple, hit: bool, probing: bool) -> None:
        """A search's outcome; a probe that paid resets the gap between probes, one that did not doubles it."""
        self.remember(self.search_hits, key, hit, SEARCH_KEEP)
        if probing:
            gap = self.search_probe_gap.get(key, SEARCH_PROBE_EVERY)
            self.search_probe_gap[key] = SEARCH_PROBE_EVERY if hit else min(2 * gap, SEARCH_PROBE_MAX)

    def record_search_build(self, model: str, seconds: float) -> None:
        self.remember(self.search_builds, model, seconds, SEARCH_BUILDS_KEEP)

    def slowest_search_build(self, model: str) -> float | None:
        builds = self.search_builds.get(model)
        return max(builds) if builds else None

    def forget_oldest_build(self, model: str) -> None:
        """A search skipped because its measured builds would not fit forgets the oldest of them, so a
        build slowed by a busy moment is measured again (a skipped search measures nothing)."""
        builds = self.search_builds.get(model)
        if builds:
            self.search_builds[model] = builds[1:]

    def overshoot_margin(self, record: dict, n: int, floor: float) -> float:
        """How early to stop SCIP on a pool of ``n`` candidates: ``floor``, or the largest overrun past its
        limit lately on pools of this size class (``record``: :attr:`first_overshoot` or
        :attr:`search_overshoot`). SCIP checks its clock between LP solves, and large pools' are long."""
        return max([floor, *record.get(n // 16, [])])

    def record_overshoot(self, record: dict, n: int, seconds: float) -> None:
        self.remember(record, n // 16, max(0.0, seconds), FIRST_OVERSHOOT_KEEP)

    # ---------------------------------------------------------------- the trained predictor

    def expected_predict_s(self, version: str) -> float | None:
        """The predictor's expected time: the upper quartile of its recent calls (None: never measured,
        or every measurement forgotten)."""
        return upper_quartile(self.predict_times.get(version))

    def record_predict(self, version: str, seconds: float) -> None:
        """A call's time; the first call of a version (a cold session) is not a measurement."""
        if version in self.predict_warm:
            self.remember(self.predict_times, version, seconds, PREDICT_KEEP)
        self.predict_warm.add(version)

    def predictor_skipped(self, version: str, small_pool: bool) -> None:
        """A solve skipped the predictor as too slow: every :data:`PREDICT_FORGET_EVERY`-th forgets its
        oldest time but the last, so a busy moment does not keep it off for good."""
        self.predict_skips[version] = self.predict_skips.get(version, 0) + 1
        times = self.predict_times.get(version, ())
        if not small_pool and len(times) > 1 and self.predict_skips[version] % PREDICT_FORGET_EVERY == 0:
            self.predict_times[version] = self.predict_times[version][1:]


def model_key(problem: Problem) -> str:
    """The engagement model a record belongs to (its name, else the object's identity)."""
    return problem.model_name or f"id:{id(problem.model)}"


def search_key(problem: Problem, budget: Budget, method: str) -> tuple:
    """Searches are compared per engagement model, budget and method (a pool's are fixed in the
    service). The method is part of the key because two methods on one model start the search from
    different answers and would take each other's probes; ``key[0]`` is the model (its builds are the
    model's)."""
    return (model_key(problem), None if budget.time_limit_ms is None else round(budget.time_limit_ms), method)


def stage_key(problem: Problem, budget: Budget, method: str = "") -> tuple:
    """The surrogate stage is measured per engagement model, budget and method: its length follows the
    budget (a share of the time left), and one method's solves must not wear down another's records."""
    return search_key(problem, budget, method)


def repair_key(problem: Problem, budget: Budget, method: str, predictor: str | None) -> tuple:
    """Repair first's record is kept per search key and per predictor that ran: a walk from the
    network's rounding, after the network's time, says nothing of one from the gradient's."""
    return (*search_key(problem, budget, method), predictor)


def upper_quartile(times: list[float] | None) -> float | None:
    """The nearest-rank upper quartile (of two, the slower); None for no measurement."""
    if not times:
        return None
    return sorted(times)[math.ceil(0.75 * (len(times) - 1))]


_DEFAULT = SolveHistory()


def default_history() -> SolveHistory:
    """The process's history: what every solver built without ``history=`` reads and records into."""
    return _DEFAULT


@contextmanager
def using(history: SolveHistory) -> Iterator[SolveHistory]:
    """Make ``history`` the process's default while the block runs (solvers built inside it read and
    record there), then put the previous one back."""
    global _DEFAULT
    before, _DEFAULT = _DEFAULT, history
    try:
        yield history
    finally:
        _DEFAULT = before


def tabu_pace_s(problem: Problem) -> float | None:
    """The process history's tabu pace for ``problem``'s model (:meth:`SolveHistory.tabu_pace_s`)."""
    return default_history().tabu_pace_s(problem)
