"""The shared MIP builder: a compiled instance → a pyscipopt model (exact and surrogate solves).

Stable API (used by the ``scip``/``exact`` methods here and by MGMatch's surrogate solve)::

    mip = MipModel.build(problem.compiled, checker=problem.checker, settings="exact")
    mip.add_engagement_objective(problem)      # exact: max EnG, ReLUs by big-M
    # or  mip.set_linear_objective(p)          # surrogate: max Σ p[i, j]·x[i, j], p: [N, D]
    mip.warm_start(team_of)                    # optional hint, complete or partial (−2 = unknown)
    mip.set_time_limit(seconds)                # wall clock; None = no limit
    res = mip.solve()                          # MipResult

Attributes: ``mip.model`` (the pyscipopt Model), ``mip.x`` (object array [N, D] of binaries),
``mip.xhat`` (all X̂ variables in compiled order), ``mip.stats`` (sizes of what was built).

**Rows** are written as CIP text and read by SCIP in one call (:mod:`mgmatch.solvers.cip`,
:func:`write_rules`): a 12v12 model (131 variables, ~160 rows) builds in ~7.7 ms instead of ~9.3
(median of 16; most of what is left is creating the SCIP model, ~2.5 ms, and SCIP's parse).
Every linear row of the compiled form is added as is. A logical row IF cond THEN row
is linearized with an indicator w ≥ truth(cond): literals are x or 1 − x; an AND node of m
children gets w ≥ Σ children − (m − 1), an OR node w ≥ each child (only the lower direction
is needed: the solver never gains by raising w, so the projection on x is exact). The indicator
of the root relaxes the consequent by big-M: ``a·X̂ ≤ b + M·(1 − w)`` with M = (max activity of
the row) − b, the max activity computed from the row's own coefficients with "a player is on at
most one team" (per player, only the largest positive coefficient counts). An ``==`` consequent
becomes two rows; a consequent that can never be violated is dropped. A root that is a single
literal uses it directly; a root OR is split into one rule per child (IF a∨b THEN r ≡ both).

**Engagement** (paper Eq. 1, appendix D). The first head layer's pre-activation is linear in x:
a_n = b_n + Σ_ij c_nij·x_ij with c_nij = Σ_k W1[n, j·E + k]·e_ik. Its exact range over "team j
has K_j players, each player on at most one team" is an assignment problem over players × team
slots (``scipy.optimize.linear_sum_assignment``); later layers use interval arithmetic, and, where
the time allows, the tighter of it and a back-substitution to x (:func:`backsub_bounds`). A neuron
with ub ≤ 0 vanishes, one with lb ≥ 0 is linear (y = a), the others get a binary δ and
y ≥ a, y ≥ 0, y ≤ a − lb·(1 − δ), y ≤ ub·δ. The last layer is the (linear) objective.

**Result.** :meth:`MipModel.solve` reads x of SCIP's solutions best first and returns the first
assignment the checker accepts (it never returns one the checker rejects), with SCIP's status
(``optimal``, ``infeasible``, ``timelimit``, …), the dual bound and the wall time.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from pyscipopt import SCIP_PARAMSETTING, Model, quicksum

from mgmatch.core.checker import Checker
from mgmatch.core.compiler import CAnd, CCond, CLit, Compiled, COr, Row

from .build_time import BuildClock, BuildInterrupted, check_deadline
from .cip import CipText
from .relu_bounds import backsub_bounds, first_layer_bounds, first_layer_coefficients

#: parameter presets of :meth:`MipModel.build`
SETTINGS = ("default", "exact", "fast")

#: depth-first node selection's priority in :meth:`MipModel.solve_first` (above every default one)
DFS_FIRST_PRIORITY = 1_000_000

#: a consequent whose big-M is at most this is treated as never violated (float noise)
_EPS = 1e-9
#: bound the pre-activations of hidden layers after the first by back-substitution
#: (:func:`backsub_bounds`) as well as interval arithmetic
BACKSUB_BOUNDS = True
#: ... when there is no deadline or at least this many seconds are left: it costs ~15–40 ms on a
#: 12v12-deep pool (128 assignment problems), which online budgets ≤ 100 ms cannot spare
BACKSUB_MIN_LEFT_S = 0.5


#: engagement MIPs (rules + big-M objective) and surrogate MIPs (rules + linear objective)
ENGAGEMENT_BUILDS = BuildClock()
SURROGATE_BUILDS = BuildClock()
#: the part of :meth:`MipModel.build` that cannot be interrupted: a new SCIP model reading the rows
SCIP_READS = BuildClock()
#: freeing a searched engagement MIP (:meth:`MipModel.dispose`), by the compiled size
ENGAGEMENT_FREES = BuildClock()


@dataclass
class MipResult:
    """What one SCIP solve produced.

    ``status`` is SCIP's (``optimal``, ``infeasible``, ``timelimit``, ``inforunbd``, …);
    ``team_of`` the best checker-approved assignment (None when none); ``objective`` SCIP's value
    of that solution; ``bound`` the dual bound (None when SCIP has none); ``verified_best`` is False
    when SCIP's incumbent was rejected by the checker and a worse pool solution was returned.
    """

    status: str
    team_of: np.ndarray | None
    objective: float | None
    bound: float | None
    time_s: float
    nodes: int = 0
    n_solutions: int = 0
    verified_best: bool = True

    @property
    def optimal(self) -> bool:
        return self.status == "optimal" and self.team_of is not None and self.verified_best


@dataclass
class MipModel:
    compiled: Compiled
    model: Model
    x: np.ndarray  # [N, D] of pyscipopt Variables
    xhat: list
    checker: Checker | None = None
    stats: dict = field(default_factory=dict)
    key: tuple | None = None  # (settings, threads) of its SCIP instance, for :meth:`release`

    @property
    def reused(self) -> bool:
        """Its SCIP instance served an earlier problem (it may not be transformed back)."""
        return self.model is not None and bool(self.model.data)

    # ------------------------------------------------------------------ build

    @classmethod
    def build(cls, compiled: Compiled, checker: Checker | None = None, fast: bool = False,
              threads: int = 1, settings: str = "default", deadline: float | None = None,
              reuse: bool = False) -> MipModel:
        """Variables, every linear row and every linearized logical row; no objective yet.

        The rows are written as CIP text and read by SCIP in one call (:mod:`mgmatch.solvers.cip`).

        Args:
            compiled: the standard form (``problem.compiled``).
            checker: judges the assignments read back (``problem.checker``); without it
                :meth:`solve` returns SCIP's best solution unverified.
            fast: shorthand for ``settings="fast"``.
            threads: SCIP threads (1: the service runs many solves side by side).
            settings: SCIP parameter preset, one of :data:`SETTINGS`: ``"default"`` (SCIP's own),
                ``"exact"`` (separation off, fast presolve: measured best on the engagement MIP,
                see README.md, "Exact solves") or ``"fast"`` (presolve, separation and symmetry off:
                tiny repeated surrogate solves).
            deadline: a ``time.perf_counter()`` instant; building past it raises
                :class:`BuildInterrupted` (checked between rows), so a budgeted solve never waits
                for a model it has no time to solve.
            reuse: read the problem into an idle SCIP instance of this thread (see
                :meth:`release`) when there is one. Such a model must never be transformed back
                (``model.freeTransform()``, as :func:`~mgmatch.solvers.pas.true_search` does): pyscipopt
                then visits the wrappers of every variable the instance ever had, and those of freed
                problems crash it. :attr:`reused` says which it got.
        """
        if fast:
            settings = "fast"
        if settings not in SETTINGS:
            raise ValueError(f"settings must be one of {SETTINGS}, got {settings!r}")
        cip = CipText()
        cip.add_vars(compiled.n_vars)
        stats = {"variables": compiled.n_vars, **write_rules(cip, compiled, 0, deadline)}
        # creating the SCIP model and reading the text cannot be interrupted: not started when its
        # measured time (SCIP_READS) does not fit before the deadline
        size = BuildClock.size(compiled)
        if deadline is not None and time.perf_counter() + SCIP_READS.expected_s(size) >= deadline:
            SCIP_READS.skipped(size)
            raise BuildInterrupted("no time left to read the MIP into SCIP (measured read times)")
        t0 = time.perf_counter()
        m = (_idle_model(settings, threads) if reuse else None) or new_model(settings, threads)
        xhat = cip.read(m)
        SCIP_READS.record(time.perf_counter() - t0, size)
        check_deadline(deadline)
        N, D = compiled.n_players, compiled.n_teams
        mip = cls(compiled, m, np.asarray(xhat[:N * D], dtype=object).reshape(N, D), xhat, checker, stats,
                  (settings, threads))
        scopes = getattr(_IDLE, "scopes", None)
        if scopes:
            scopes[-1].append(mip)
        return mip

    def release(self) -> None:
        """Done with this model: its SCIP instance (plugins loaded, parameters reset at the next
        build) serves this thread's next :meth:`build` with the same settings (``reuse=True``),
        which skips creating one (12v12 surrogate stage at 20 ms: 7.2 → 6.1 ms). This object is unusable
        after (its variables belong to the freed problem); a model never released is simply
        garbage-collected."""
        m, self.model, self.x, self.xhat = self.model, None, None, None
        if m is None or self.key is None:
            return
        idle = getattr(_IDLE, "models", None)
        if idle is None:
            idle = _IDLE.models = {}
        kept = idle.setdefault(self.key, [])
        if len(kept) < IDLE_KEEP:
            kept.append(m)

    def dispose(self) -> None:
        """Free this model's SCIP problem and instance now, not whenever it is garbage-collected: a
        12v12-deep engagement MIP after a search took 3–4 ms to free, which landed after the answer
        was built (measured by callers with :data:`ENGAGEMENT_FREES`). This object is unusable after."""
        m, self.model, self.x, self.xhat = self.model, None, None, None
        if m is not None:
            m.freeProb()
        del m  # the last reference: the instance is freed here

    def exclude(self, players) -> None:
        """Players that may not be placed: x fixed to 0 (the model must not be solving;
        ``model.freeTransform()`` first after a solve)."""
        for i in np.asarray(players, dtype=np.int64).reshape(-1).tolist():
            for j in range(self.x.shape[1]):
                self.model.chgVarUb(self.x[i, j], 0.0)

    # ------------------------------------------------------------------ objectives

    def set_linear_objective(self, p: np.ndarray) -> None:
        """Maximize Σ p[i, j]·x[i, j] (the surrogate objective, paper Eq. 20). Shapes: p [N, D]."""
        p = np.asarray(p, dtype=np.float64)
        if p.shape != self.x.shape:
            raise ValueError(f"p must have shape {self.x.shape}, got {p.shape}")
        self.model.setObjective(quicksum(float(p[i, j]) * self.x[i, j]
                                         for i in range(p.shape[0]) for j in range(p.shape[1])
                                         if p[i, j] != 0.0), "maximize")

    def add_engagement_objective(self, problem, deadline: float | None = None) -> dict:
        """Maximize the engagement network EnG, its ReLUs linearized by big-M with tight bounds.

        ``deadline`` (a ``perf_counter()`` instant): raise :class:`BuildInterrupted` past it
        (checked per neuron).

        Returns the neuron statistics (also merged into ``self.stats``): ``neurons`` (hidden
        head neurons), ``stable_active``, ``stable_inactive``, ``bigm_neurons`` (= new binaries).
        """
        layers = problem.model.head_weights
        N, D = self.x.shape
        sizes = list(self.compiled.sizes)
        W1, b1 = layers[0]
        c = first_layer_coefficients(W1, problem.embeddings, D)
        xs = [self.x[i, j] for i in range(N) for j in range(D)]

        def lin(coef: np.ndarray, b: float):
            flat = coef.reshape(-1)
            return quicksum(float(a) * v for a, v in zip(flat.tolist(), xs, strict=True) if a != 0.0) + float(b)

        st = {"neurons": 0, "stable_active": 0, "stable_inactive": 0, "bigm_neurons": 0, "backsub_layers": 0}
        if len(layers) == 1:  # no hidden layer: the objective is linear in x
            self.model.setObjective(lin(c[0], b1[0]), "maximize")
            self.stats.update(st)
            return st
        check_deadline(deadline)
        lo, hi = first_layer_bounds(c, b1, sizes, deadline)
        check_deadline(deadline)
        # pre-activations of the current layer, as linear expressions (in x, then in y)
        pre = []
        for n in range(len(b1)):
            check_deadline(deadline)
            pre.append(lin(c[n], b1[n]))
        m = self.model
        history = [(lo, hi)]  # bounds of each hidden layer's pre-activations (all neurons)
        for k in range(1, len(layers)):
            ys, ylo, yhi = [], [], []
            for n, a in enumerate(pre):
                check_deadline(deadline)
                st["neurons"] += 1
                if hi[n] <= 0.0:
                    st["stable_inactive"] += 1
                    continue
                y = m.addVar(lb=0.0, ub=float(hi[n]), vtype="C")
                if lo[n] >= 0.0:
                    st["stable_active"] += 1
                    m.addCons(y == a)
                    ylo.append(lo[n])
                else:
                    st["bigm_neurons"] += 1
                    d = m.addVar(vtype="B")
                    m.addCons(y >= a)
                    m.addCons(y <= a - float(lo[n]) * (1 - d))
                    m.addCons(y <= float(hi[n]) * d)
                    ylo.append(0.0)
                ys.append((n, y))
                yhi.append(hi[n])
            W, b = layers[k]
            keep = [n for n, _ in ys]
            Wk = W[:, keep]
            ylo_a, yhi_a = np.asarray(ylo), np.asarray(yhi)
            lo = b + np.minimum(Wk * ylo_a, Wk * yhi_a).sum(1)
            hi = b + np.maximum(Wk * ylo_a, Wk * yhi_a).sum(1)
            if k < len(layers) - 1:  # a hidden layer's big-M bounds
                if BACKSUB_BOUNDS and (deadline is None or deadline - time.perf_counter() >= BACKSUB_MIN_LEFT_S):
                    blo, bhi = backsub_bounds(layers[1:k + 1], history, c, b1, sizes, deadline)
                    lo, hi = np.maximum(lo, blo), np.minimum(hi, bhi)
                    st["backsub_layers"] += 1
                history.append((lo, hi))
            pre = [quicksum(float(Wk[o, q]) * y for q, (_, y) in enumerate(ys) if Wk[o, q] != 0.0) + float(b[o])
                   for o in range(W.shape[0])]
        m.setObjective(pre[0], "maximize")
        st["objective_bounds"] = (float(lo[0]), float(hi[0]))
        self.stats.update(st)
        return st

    # ------------------------------------------------------------------ control

    def warm_start(self, team_of: np.ndarray) -> bool:
        """Hand SCIP a solution hint. ``team_of`` [N]: team per player, −1 bench, −2 unknown.

        A hint is a partial solution: the known players' x, the rest (auxiliaries of the rules and
        of the engagement network, unknown players) completed by SCIP's completesol heuristic
        before presolve (switched on here under every preset). Returns whether SCIP stored it.
        """
        t = np.asarray(team_of).reshape(-1)
        N, D = self.x.shape
        sol = self.model.createPartialSol()
        known = 0
        for i in range(N):
            if t[i] == -2:
                continue
            known += 1
            for j in range(D):
                self.model.setSolVal(sol, self.x[i, j], 1.0 if t[i] == j else 0.0)
        unknown_rate = 1.0 - known * D / max(1, self.model.getNVars())
        # SCIP completes a hint's unknowns (the rules' auxiliaries, the neurons) with its
        # completesol heuristic, which the "exact" preset's fast heuristics switch off (frequency
        # −1): there every hint was dropped unread (12v12-deep, 3 s from a 300 ms `surrogate`
        # answer: 6.6% below that answer instead of 0.02% above it; 8 instances, seed 1)
        if self.model.getParam("heuristics/completesol/freq") < 0:
            self.model.setParam("heuristics/completesol/freq", 0)
        # completesol ignores hints with more unknowns than this rate (default 0.85)
        self.model.setParam("heuristics/completesol/maxunknownrate", min(1.0, max(0.85, unknown_rate + 0.05)))
        return bool(self.model.addSol(sol))

    def set_time_limit(self, seconds: float | None) -> None:
        """Wall-clock limit for :meth:`solve`; None removes it."""
        self.model.setParam("limits/time", 1e20 if seconds is None else max(0.0, float(seconds)))

    def solve_first(self, seconds: float) -> MipResult:
        """Solve until SCIP's first solution or ``seconds``, depth first (status ``sollimit`` when
        one was found). SCIP's own node selection and no solution limit are restored afterwards, so
        the solve can go on: :meth:`set_time_limit` (SCIP's clock runs on across calls:
        ``model.getSolvingTime()`` + more) and :meth:`solve` again. On 20 12v12 surrogate MIPs
        (``bench quality`` pools, seed 1000003) the first solution came after 6.1 ms (median; p90
        10.2) with SCIP's best-estimate node selection, 3.9 ms (p90 6.9) depth first."""
        m = self.model
        priority = m.getParam("nodeselection/dfs/stdpriority")
        m.setParam("nodeselection/dfs/stdpriority", DFS_FIRST_PRIORITY)
        m.setParam("limits/solutions", 1)
        self.set_time_limit(seconds)
        try:
            return self.solve()
        finally:
            m.setParam("nodeselection/dfs/stdpriority", priority)
            m.setParam("limits/solutions", -1)

    def solve(self) -> MipResult:
        m = self.model
        t0 = time.perf_counter()
        m.optimizeNogil()  # releases the GIL: concurrent solves in one process run in parallel
        elapsed = time.perf_counter() - t0
        status = m.getStatus()
        nodes = int(m.getNNodes())
        bound = None
        if status not in ("infeasible", "inforunbd", "unbounded"):
            db = m.getDualbound()
            if abs(db) < 1e19:
                bound = float(db)
        sols = m.getSols() if m.getNSols() > 0 else []
        N, D = self.x.shape
        for k, s in enumerate(sols):
            vals = np.asarray([[m.getSolVal(s, self.x[i, j]) for j in range(D)] for i in range(N)])
            team_of = np.where(vals.max(1) > 0.5, vals.argmax(1), -1).astype(np.int64)
            if self.checker is None or bool(self.checker.feasible(team_of[None])[0]):
                return MipResult(status, team_of, float(m.getSolObjVal(s)), bound, elapsed, nodes,
                                 len(sols), verified_best=(k == 0))
        return MipResult(status, None, None, bound, elapsed, nodes, len(sols), verified_best=not sols)


def new_model(settings: str = "default", threads: int = 1) -> Model:
    """An empty SCIP model with the project's parameters: wall clock, ``threads``, seed shift 0, and
    the ``settings`` preset (:data:`SETTINGS`)."""
    if settings not in SETTINGS:
        raise ValueError(f"settings must be one of {SETTINGS}, got {settings!r}")
    m = Model("mgmatch")
    _configure(m, settings, threads)
    m.data = 0  # problems read into this instance (see _idle_model)
    return m


def _configure(m: Model, settings: str, threads: int) -> None:
    m.hideOutput()
    m.setParam("timing/clocktype", 2)  # wall clock, so time limits are real time
    m.setParam("parallel/maxnthreads", threads)
    m.setParam("randomization/randomseedshift", 0)
    apply_settings(m, settings)


#: SCIP instances given back by :meth:`MipModel.release`, per thread: ``models[(settings, threads)]``
_IDLE = threading.local()
#: idle instances kept per thread and settings
IDLE_KEEP = 2
#: an instance serves at most this many problems: pyscipopt keeps a wrapper per variable and
#: constraint it ever handed out (its caches are not cleared with the problem), so a reused
#: instance's memory grows by ~300 small objects per 12v12 problem until it is retired
IDLE_REUSES = 256


@contextmanager
def released():
    """Every :class:`MipModel` built in this thread inside the block is released at its end
    (:meth:`MipModel.release`): a solver wraps one solve in it, so its SCIP instances serve the next
    solve's builds."""
    scopes = getattr(_IDLE, "scopes", None)
    if scopes is None:
        scopes = _IDLE.scopes = []
    scopes.append([])
    try:
        yield
    finally:
        for mip in scopes.pop():
            mip.release()


def _idle_model(settings: str, threads: int) -> Model | None:
    """An idle instance with ``settings``, its problem freed and its parameters as :func:`new_model`
    sets them (measured: ~0.5 ms to free a solved 12v12 problem, ~0.07 ms for the parameters,
    against ~2.5 ms to create an instance and load SCIP's plugins); None when there is none."""
    kept = getattr(_IDLE, "models", {}).get((settings, threads))
    while kept:
        m = kept.pop()
        if m.data >= IDLE_REUSES:
            continue  # retired: dropped, a new one takes its place
        m.freeProb()
        m.resetParams()
        _configure(m, settings, threads)
        m.data += 1
        return m
    return None


def activity_bounds(r: Row, n_teams: int, n_x: int) -> tuple[float, float]:
    """Min and max of a row's activity over binaries where a player is on at most one team."""
    hi: dict[int, float] = {}
    lo: dict[int, float] = {}
    amax = amin = 0.0
    for v, c in zip(r.vars.tolist(), r.coefs.tolist(), strict=True):
        if v < n_x:  # group x terms per player: at most one of them is 1
            p = v // n_teams
            hi[p] = max(hi.get(p, 0.0), c)
            lo[p] = min(lo.get(p, 0.0), c)
        else:
            amax += max(c, 0.0)
            amin += min(c, 0.0)
    return amin + sum(lo.values()), amax + sum(hi.values())


def write_rules(cip: CipText, compiled: Compiled, first: int = 0, deadline: float | None = None) -> dict:
    """Every linear row of ``compiled`` and its logical rows, linearized (module docstring), written
    to ``cip`` over the X̂ variables ``first``, ``first + 1``, … (already added); new indicator
    variables are added. Returns the counts (``linear_rows``, ``logical_rows``,
    ``logical_indicators``, ``bigm_rows``, ``dropped_consequents``)."""
    st = {"linear_rows": 0, "logical_rows": len(compiled.logical), "logical_indicators": 0, "bigm_rows": 0,
          "dropped_consequents": 0}
    for k, r in enumerate(compiled.rows):
        if k % 16 == 0:
            check_deadline(deadline)
        cip.add_row(r.vars + first if first else r.vars, r.coefs, r.sense, r.rhs)
        st["linear_rows"] += 1

    def indicator(c: CCond) -> tuple[dict[int, float], float]:
        """w ≥ truth(c) on every integer point, 0 ≤ w ≤ 1, as (terms, constant)."""
        if isinstance(c, CLit):
            return ({c.var + first: -1.0}, 1.0) if c.negated else ({c.var + first: 1.0}, 0.0)
        kids = [indicator(a) for a in c.args]
        w = cip.add_var("C", 0.0, 1.0)
        st["logical_indicators"] += 1
        if isinstance(c, CAnd):  # w ≥ Σ kids − (m − 1)
            terms: dict[int, float] = {w: 1.0}
            const = 0.0
            for t, k in kids:
                for v, a in t.items():
                    terms[v] = terms.get(v, 0.0) - a
                const += k
            cip.add_row(list(terms), list(terms.values()), ">=", const - (len(kids) - 1))
        else:  # w ≥ each child
            for t, k in kids:
                cip.add_row([w, *t], [1.0, *(-a for a in t.values())], ">=", k)
        return {w: 1.0}, 0.0

    def logical(cond: CCond, then: Row) -> None:
        if isinstance(cond, COr):  # IF a ∨ b THEN r  ≡  (IF a THEN r) ∧ (IF b THEN r)
            for a in cond.args:
                logical(a, then)
            return
        lo, hi = activity_bounds(then, compiled.n_teams, compiled.n_x)
        parts = []
        if then.sense in ("<=", "==") and hi - then.rhs > _EPS:
            parts.append(("<=", hi - then.rhs))
        if then.sense in (">=", "==") and then.rhs - lo > _EPS:
            parts.append((">=", then.rhs - lo))
        if not parts:
            st["dropped_consequents"] += 1
            return
        w, wc = indicator(cond)
        for sense, big_m in parts:
            # a·X̂ ≤ b + M·(1 − w)  /  a·X̂ ≥ b − M·(1 − w), w = Σ terms + wc
            sign = 1.0 if sense == "<=" else -1.0
            vs = np.concatenate([then.vars + first, np.fromiter(w, dtype=np.int64, count=len(w))])
            cs = np.concatenate([then.coefs, sign * big_m * np.fromiter(w.values(), dtype=np.float64, count=len(w))])
            cip.add_row(vs, cs, sense, then.rhs + sign * big_m * (1.0 - wc))
            st["bigm_rows"] += 1

    for lr in compiled.logical:
        check_deadline(deadline)
        logical(lr.cond, lr.then)
    return st


def apply_settings(m: Model, settings: str) -> None:
    """Apply a parameter preset of :data:`SETTINGS` to a SCIP model (before it is solved)."""
    if settings == "fast":
        m.setPresolve(SCIP_PARAMSETTING.OFF)
        m.setSeparating(SCIP_PARAMSETTING.OFF)
        m.setParam("misc/usesymmetry", 0)
    elif settings == "exact":
        # The root's cut loop dominated the default solve (the aggregation/c-MIR separator alone
        # took 8.5 of 9.5 s on one 3v3 instance); without cuts the tight big-M bounds carry the
        # search: median 3v3 solve 1.8 s → 0.09 s, 12v12 0.2 s. Then, measured on 20 12v12
        # instances (seed 2000003, cold solves to optimality, build included): 147 ms mean with
        # the two settings above; strong branching only until one pseudo-cost observation per
        # variable (relpscost reliability 1 instead of 5–8) 103 ms; plus conflict analysis off
        # 89 ms; plus fast heuristics 78 ms. Presolve off was slower (136 ms).
        m.setSeparating(SCIP_PARAMSETTING.OFF)
        m.setPresolve(SCIP_PARAMSETTING.FAST)
        m.setHeuristics(SCIP_PARAMSETTING.FAST)
        m.setParam("misc/usesymmetry", 0)
        m.setParam("branching/relpscost/minreliable", 1.0)
        m.setParam("branching/relpscost/maxreliable", 1.0)
        m.setParam("conflict/enable", False)
