"""Build time as part of a budget: measured build times per model size (:class:`BuildClock`), so a budgeted
caller skips a build it has no time for, and the deadline check that abandons one running past it
(:class:`BuildInterrupted`). Used by the MIP builder (:mod:`mgmatch.solvers.mip`) and by the local
searches for their paces."""

from __future__ import annotations

import time

from mgmatch.core.compiler import Compiled


class BuildClock:
    """Measured build times, so a budgeted caller can skip a build it has no time for.

    Records seconds per unit of model size (variables + rows + logical rows of the compiled form)
    of the last builds, shared by every solver of the process (the machine's load is too), apart
    for each size class (sizes within a factor of two: :meth:`size_class`); the expectation for a
    model is the upper quartile of its class's recent rates times its size. Builds are abandoned at
    their deadline anyway (:class:`BuildInterrupted`), but one that cannot fit is not started: on
    the loaded 2-core machine a 12v12 engagement MIP took 10–28 ms to build, so at a 10 ms budget
    starting it only made the answer (no_solution either way) late.

    Why classes: a rate per unit is not one number across sizes, since every build, round or
    iteration has a fixed cost too. With one list for the process, tabu iterations on 6-player
    3-team games (a few hundred cells, ~2.5 µs per cell) made a 12v12 pool's iteration (~100 000
    cells, ~0.1 µs each) look like 0.4 s, and tabu search on it stopped after two iterations; a
    service with several games in one process met the same.
    """

    def __init__(self, keep: int = 16, forget_every: int = 4) -> None:
        self.keep = keep
        self.forget_every = forget_every
        self.by_class: dict[int, list[float]] = {}
        self.skips: dict[int, int] = {}

    @staticmethod
    def size(compiled: Compiled, objective_terms: int = 0) -> int:
        return compiled.n_vars + len(compiled.rows) + len(compiled.logical) + objective_terms

    @staticmethod
    def size_class(size: int) -> int:
        """Sizes in [2^(k−1), 2^k) share class k."""
        return max(1, int(size)).bit_length()

    def rates(self, size: int) -> list[float]:
        """The recent seconds per unit of ``size``'s class (oldest first)."""
        return list(self.by_class.get(self.size_class(size), ()))

    def record(self, seconds: float, size: int) -> None:
        k = self.size_class(size)
        # a new list: readers in other threads never see one being changed
        self.by_class[k] = self.by_class.get(k, [])[-(self.keep - 1):] + [seconds / max(1, size)]

    def skipped(self, size: int) -> None:
        """A caller skipped its work on a model of ``size`` because :meth:`expected_s` said it
        cannot fit. Every ``forget_every``-th skip in a size class forgets the class's largest rate:
        a stage that is not run is not measured again, so without this a few slow moments (a busy
        machine, a collection) could lock it out for the rest of the process (once, every
        12v12-deep solve of a bench process answered after its surrogate stage, at ~16 ms,
        whatever the budget)."""
        k = self.size_class(size)
        self.skips[k] = self.skips.get(k, 0) + 1
        rates = list(self.by_class.get(k, ()))
        if self.skips[k] % self.forget_every == 0 and rates:
            rates.remove(max(rates))
            self.by_class[k] = rates

    def snapshot(self) -> tuple[dict, dict]:
        """The clock's records, for :meth:`restore` (e.g. around a warm-up whose cold times are no
        measurement)."""
        return dict(self.by_class), dict(self.skips)

    def restore(self, state: tuple[dict, dict]) -> None:
        self.by_class, self.skips = dict(state[0]), dict(state[1])

    def expected_s(self, size: int) -> float:
        """Expected seconds to build a model of ``size`` (0 before any of its class was measured:
        then it is tried, and measured)."""
        r = sorted(self.by_class.get(self.size_class(size), ()))
        if not r:
            return 0.0
        return r[int(0.75 * (len(r) - 1))] * size


class BuildInterrupted(Exception):
    """Building the model ran past the ``deadline`` given to :meth:`MipModel.build` or
    :meth:`MipModel.add_engagement_objective` (a budgeted caller answers without this model)."""


def check_deadline(deadline: float | None) -> None:
    """Raise :class:`BuildInterrupted` once ``deadline`` (a ``perf_counter()`` instant) has passed."""
    if deadline is not None and time.perf_counter() >= deadline:
        raise BuildInterrupted("the time budget ran out while the MIP was being built")
