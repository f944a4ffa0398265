"""MGMatch's measured policy and on-time enforcement: which path runs, SCIP's limit, answers kept.

Behaviour, not timing: the policy's choice from its estimates, the warm-started SCIP path when the
runtime predictor says the MIP closes, SCIP's limit = the budget minus the build, builds abandoned
at the deadline, and an answer that always carries the feasible assignment found.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.solvers import exact as exact_mod
from mgmatch.solvers import policy
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.exact import ScipSolver
from mgmatch.solvers.mgmatch import history as hist
from mgmatch.solvers.mgmatch import solver as mg
from mgmatch.solvers.mip import BuildClock, BuildInterrupted, MipModel
from mgmatch.solvers.surrogate import GradientPredictor

SEED = 3


@pytest.fixture(autouse=True)
def fresh_build_clocks(monkeypatch, history):
    """Each test measures its own build times (the clocks are process-wide; the history, conftest's, is the test's)."""
    eng, sur = BuildClock(), BuildClock()
    monkeypatch.setattr(exact_mod, "ENGAGEMENT_BUILDS", eng)
    history.engagement_builds = eng
    history.surrogate_builds = sur
    history.polish_rounds = BuildClock()
    history.predict_times = {}
    history.predict_skips = {}
    history.predict_warm = set()
    history.surrogate_times = {}
    history.stage_misses = {}
    history.stage_warm = _AllWarm()
    return eng, sur


class _AllWarm(set):
    """Every stage key counts as seen: tests measure from the first stage."""

    def __contains__(self, key) -> bool:
        return True


def problems(preset: str, count: int, seed: int = SEED) -> list[Problem]:
    out = []
    for inst in generate_instances(preset, count, seed):
        name, model = resolve_model(inst)
        out.append(Problem(inst, model, model_name=name))
    return out


def optimum(pr: Problem) -> np.ndarray:
    sol = get_solver("exact").solve(pr, Budget.of(None))
    assert sol.status == "optimal"
    return team_of_from_teams(pr.instance, sol.teams)


class FixedPredictor:
    """Predicts one given assignment (one-hot) for every problem; counts its calls."""

    version = "fixed"

    def __init__(self, team_of: np.ndarray, sleep_s: float = 0.0):
        self.team_of, self.sleep_s, self.calls = team_of, sleep_s, 0

    def predict(self, problems_: list[Problem]) -> list[np.ndarray]:
        self.calls += 1
        time.sleep(self.sleep_s)
        out = []
        for pr in problems_:
            p = np.zeros((pr.instance.n, pr.instance.teams))
            sel = np.flatnonzero(self.team_of >= 0)
            p[sel, self.team_of[sel]] = 1.0
            out.append(p)
        return out


# --------------------------------------------------------------------------- the choice


def test_policy_picks_enumeration_scip_or_pipeline_from_its_estimates(monkeypatch):
    small, = problems("3v3", 1)
    big, = problems("12v12", 1)
    c = policy.choose(small, 10.0)
    assert c.assignments is not None and c.assignments > 0
    assert c.path == "enumerate"  # a few thousand assignments: well inside 10 s
    # 12v12 is never counted out (too many assignments): SCIP when its estimate fits, else the pipeline
    est = policy.scip_estimate_s(big.instance.n, sum(big.instance.sizes), policy.hidden_neurons(big))
    assert policy.choose(big, est / policy.SCIP_RATIO * 1.01).path == "scip"
    assert policy.choose(big, est / policy.SCIP_RATIO * 0.9).path == "pipeline"
    # a tight budget: a 3v3 pool is enumerated as far as it goes, a 12v12 pool never is
    assert policy.choose(small, 0.001).path == "enumerate"
    assert policy.choose(big, 0.001).path == "pipeline"
    assert policy.choose(big, None).path == "scip"  # no limit: the exact MIP
    # forcing a path keeps the estimates
    forced = policy.choose(small, 10.0, forced="pipeline")
    assert forced.path == "pipeline" and forced.scip_estimate_s == c.scip_estimate_s
    with pytest.raises(ValueError):
        policy.choose(small, 1.0, forced="nope")


def test_runtime_predictor_grows_with_the_pool():
    assert policy.scip_estimate_s(15, 6) < policy.scip_estimate_s(45, 24) < policy.scip_estimate_s(95, 24)
    assert policy.enumerate_estimate_s(100) < policy.enumerate_estimate_s(10_000)
    assert policy.enumerate_chunk(None) == 65_536
    assert 2_048 == policy.enumerate_chunk(0.001) <= policy.enumerate_chunk(0.1) <= policy.enumerate_chunk(10.0) == 65_536


def test_a_deeper_head_is_estimated_by_the_neurons_its_mip_must_linearize():
    """12v12-deep (hidden 64 + 64): at tight budgets the estimate scales by all 128 hidden neurons (no
    time to look closer, and the pipeline is the answer anyway); where even the calibrated head's
    MIP could close, it scales by the neurons this pool's MIP needs a binary for, 27-31 of 128 with
    the penalized head (its pools are proven in 0.5-1.3 s; by all neurons the estimate was 20-27 s,
    by these 1.2-1.3 s)."""
    from mgmatch.solvers.mip import MipModel

    deep, = problems("12v12-deep", 1)
    flat, = problems("12v12", 1)
    assert policy.hidden_neurons(deep) == 128 and policy.hidden_neurons(flat) == 16
    n, s = deep.instance.n, sum(deep.instance.sizes)
    assert policy.scip_estimate_s(n, s, 128) >= 60 * policy.scip_estimate_s(n, s, 16)
    assert policy.scip_estimate_s(n, s) == policy.scip_estimate_s(n, s, 16)  # the calibrated head
    tight = policy.choose(deep, 0.1)
    assert tight.path == "pipeline" and tight.scip_estimate_s == pytest.approx(policy.scip_estimate_s(n, s, 128))
    bigm = policy.bigm_neurons(deep)
    assert 16 < bigm < 64
    # never fewer than the MIP builder's own binaries (its back-substituted bounds are tighter)
    mip = MipModel.build(deep.compiled, checker=deep.checker, settings="exact")
    assert mip.add_engagement_objective(deep)["bigm_neurons"] <= bigm
    mip.dispose()
    est = policy.scip_estimate_s(n, s, bigm)
    assert policy.choose(deep, 3.0).scip_estimate_s == pytest.approx(est)
    assert policy.choose(deep, est / policy.SCIP_RATIO * 1.01).path == "scip"
    assert policy.choose(deep, est / policy.SCIP_RATIO * 0.9).path == "pipeline"
    assert policy.bigm_neurons(flat) <= 16


def test_large_pools_are_not_counted():
    """Counting a 95-candidate pool's assignments costs more than enumeration could ever save."""
    from mgmatch.lab.bench_batch import pool_instance

    inst = pool_instance("12v12", 95, 1, 0)
    name, model = resolve_model(inst)
    c = policy.choose(Problem(inst, model, model_name=name), 0.1)
    assert c.assignments is None and c.enumerate_estimate_s is None and c.path == "pipeline"


def test_unknown_policy_is_an_input_error():
    with pytest.raises(InvalidInput) as err:
        mg.MGMatchSolver(GradientPredictor(), policy="fastest")
    assert err.value.field == "policy"


# --------------------------------------------------------------------------- the SCIP path


def test_scip_path_when_the_runtime_predictor_says_it_closes(monkeypatch):
    pr, = problems("12v12", 1)
    best = optimum(pr)
    seen = {}
    real_warm = MipModel.warm_start

    def warm(self, team_of):
        seen["warm"] = np.asarray(team_of).copy()
        return real_warm(self, team_of)

    monkeypatch.setattr(MipModel, "warm_start", warm)
    monkeypatch.setattr(policy, "scip_estimate_s", lambda n, s, hidden=16: 0.001)  # "closes at once"
    solver = mg.MGMatchSolver(FixedPredictor(best), default_time_limit_ms=60_000)
    sol = solver.solve(pr, Budget.of(60_000))
    assert solver.last_choice.path == "scip" and sol.stats["policy_path"] == "scip"
    assert "surrogate_ms" not in sol.stats  # the surrogate pipeline did not run
    assert np.array_equal(seen["warm"], best)  # warm-started at once with the rounded prediction
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(pr.objective(best), rel=1e-9)


def test_pipeline_when_the_runtime_predictor_says_it_does_not_close(monkeypatch):
    pr, = problems("12v12", 1)
    monkeypatch.setattr(policy, "scip_estimate_s", lambda n, s, hidden=16: 1e6)
    solver = mg.MGMatchSolver(GradientPredictor(), default_time_limit_ms=300)
    sol = solver.solve(pr, Budget.of(300))
    assert sol.stats["policy_path"] == "pipeline" and "surrogate_ms" in sol.stats
    assert sol.has_assignment


def test_scip_path_keeps_the_start_when_the_build_runs_out(monkeypatch):
    """The SCIP path's model is abandoned at the deadline: the answer is the (feasible) start."""
    pr, = problems("12v12", 1)
    best = optimum(pr)

    def no_time(*a, **k):
        raise BuildInterrupted("test")

    monkeypatch.setattr(MipModel, "build", classmethod(lambda cls, *a, **k: no_time()))
    sol = mg.MGMatchSolver(FixedPredictor(best), policy="scip").solve(pr, Budget.of(200))
    assert sol.status == "feasible"
    t = team_of_from_teams(pr.instance, sol.teams)
    assert pr.checker.feasible(t[None])[0]
    assert sol.objective == pytest.approx(pr.objective(best), rel=1e-9)


def test_pipeline_keeps_the_enumerated_start_when_no_mip_fits(monkeypatch):
    """Enumeration cut short hands its best on; with no time to build the surrogate, that is the answer."""
    pr, = problems("3v3", 1)
    real = mg.best_assignment

    def cut_short(problem, deadline=None, chunk=None, handover=None, empty_handover=False):
        res = real(problem)
        return type(res)(res.team_of, res.objective, False, res.examined, res.feasible)

    monkeypatch.setattr(mg, "best_assignment", cut_short)
    monkeypatch.setattr(MipModel, "build", classmethod(lambda cls, *a, **k: (_ for _ in ()).throw(BuildInterrupted("t"))))
    sol = mg.MGMatchSolver(GradientPredictor(), policy="enumerate", selection=False,
                           repair_first=False).solve(pr, Budget.of(500))
    assert sol.status == "feasible" and sol.stats["enumerate_complete"] is False
    assert sol.stats["surrogate_status"] == "build_interrupted"
    assert sol.objective == pytest.approx(pr.objective(optimum(pr)), rel=1e-9)


def test_enumeration_path_proves_the_optimum():
    pr, = problems("3v3", 1)
    sol = mg.MGMatchSolver(GradientPredictor()).solve(pr, Budget.of(5_000))
    assert sol.stats["policy_path"] == "enumerate" and sol.status == "optimal"
    assert sol.objective == pytest.approx(pr.objective(optimum(pr)), rel=1e-9)
    assert "predict_ms" not in sol.stats and sol.stats["predictor_used"] is None  # no prediction needed


def test_slow_predictor_gives_way_to_the_gradient():
    """Once the trained predictor has been measured too slow for the time left, the gradient stands in."""
    pr, = problems("12v12", 1)
    slow = FixedPredictor(optimum(pr), sleep_s=0.06)
    solver = mg.MGMatchSolver(slow, policy="pipeline")
    # the first call (cold) is not a measurement: the second is
    for calls in (1, 2):
        first = solver.solve(pr, Budget.of(2_000))
        assert first.stats["predictor_used"] == "fixed" and slow.calls == calls
    second = solver.solve(pr, Budget.of(200))  # 60 ms > 20% of 200 ms
    assert second.stats["predictor_used"] == GradientPredictor.version and slow.calls == 2
    assert second.has_assignment
    # the last measurement is never forgotten: a predictor too slow for this budget is not run
    # again at it (each such run lost the time of the surrogate MIP)
    slow.sleep_s = 0.0
    for _ in range(3 * hist.PREDICT_FORGET_EVERY):
        assert solver.solve(pr, Budget.of(200)).stats["predictor_used"] == GradientPredictor.version
    assert slow.calls == 2
    # measured fast at a larger budget, it runs at this one again; the older slow time is forgotten
    # after PREDICT_FORGET_EVERY skips
    assert solver.solve(pr, Budget.of(2_000)).stats["predictor_used"] == "fixed" and slow.calls == 3
    used = [solver.solve(pr, Budget.of(200)).stats["predictor_used"] for _ in range(2 * hist.PREDICT_FORGET_EVERY)]
    assert used[0] == GradientPredictor.version  # [60 ms, 0 ms]: the upper quartile is still 60 ms
    assert used[-1] == "fixed"


def test_a_gate_measured_per_budget_answers_with_the_nearest_budgets_verdict():
    by_budget = {"20": {"use": "gradient"}, "50": {"use": "network"}, "100": {"use": "network"}}
    gate = {"use": "network", "by_budget_ms": by_budget}
    assert policy.gate_verdict(gate, 20.0) == "gradient"
    assert policy.gate_verdict(gate, 10.0) == "gradient"  # below the range: the smallest measured
    assert policy.gate_verdict(gate, 30.0) == "gradient"  # log scale: 30 is nearer 20 than 50
    assert policy.gate_verdict(gate, 33.0) == "network"
    assert policy.gate_verdict(gate, 49.2) == "network"  # the budget less the teardown kept back
    assert policy.gate_verdict(gate, 5000.0) == "network"
    assert policy.gate_verdict(gate, None) == "network"  # unlimited: the largest measured
    # an older gate, one verdict for all budgets: only `gradient` binds, else the unmeasured rule
    assert policy.gate_verdict({"use": "gradient", "by_budget_ms": {"100": {"diff_points": 0.2}}}, 100.0) == "gradient"
    assert policy.gate_verdict({"use": "network", "by_budget_ms": {"100": {"diff_points": -0.2}}}, 100.0) is None
    assert policy.gate_verdict(None, 100.0) is None
    # malformed entries are passed over, not trusted
    assert policy.gate_verdict({"by_budget_ms": {"x": {"use": "network"}, "0": {"use": "network"},
                                                 "50": {"use": "maybe"}}}, 50.0) is None


def test_a_gates_budgets_are_scaled_by_the_two_machines_tabu_paces():
    """A gate measured where tabu search took 500 µs an iteration, read by a process walking at 200 µs:
    a 20 ms solve there does the work of 50 ms on the gate's machine, and reads that verdict."""
    by_budget = {"20": {"use": "gradient"}, "50": {"use": "network"}}
    gate = {"use": "network", "pace_us": 500.0, "by_budget_ms": by_budget}
    assert policy.gate_budget_ms(gate, 20.0, 200e-6) == pytest.approx(50.0)
    assert policy.gate_verdict(gate, 20.0, 200e-6) == "network"
    assert policy.gate_verdict(gate, 50.0, 1250e-6) == "gradient"  # a slower machine: 50 ms reads 20
    # unscaled where a pace is unknown: this process has not walked yet, or the gate predates pace_us
    assert policy.gate_verdict(gate, 20.0, None) == "gradient"
    assert policy.gate_verdict({"by_budget_ms": by_budget}, 20.0, 200e-6) == "gradient"
    for bad in (0.0, -1.0, float("nan"), float("inf"), "fast", None):
        assert policy.gate_budget_ms({**gate, "pace_us": bad}, 20.0, 200e-6) == 20.0
    assert policy.gate_budget_ms(gate, 20.0, 0.0) == 20.0
    # a pace measured at a stalled moment moves a budget at most GATE_SCALE_MAX (or _MIN) times
    assert policy.gate_budget_ms(gate, 20.0, 1e-9) == pytest.approx(20.0 * policy.GATE_SCALE_MAX)
    assert policy.gate_budget_ms(gate, 20.0, 1.0) == pytest.approx(20.0 * policy.GATE_SCALE_MIN)
    assert policy.gate_budget_ms(gate, None, 200e-6) is None
    assert policy.gate_verdict(gate, None, 200e-6) == "network"  # unlimited: the largest measured


def test_the_solver_reads_its_gate_at_the_budget_scaled_by_its_measured_pace(monkeypatch, history):
    """MGMatch scales its budget by its process's tabu pace on the model before reading the gate:
    the same 200 ms solve reads `gradient` unscaled and `network` where its pace is 2.5 times the
    gate machine's."""
    history.predict_times = {}
    history.predict_warm = set()
    pr, = problems("12v12", 1)
    pred = FixedPredictor(optimum(pr))
    pred.gate = {"use": "network", "pace_us": 500.0,
                 "by_budget_ms": {"200": {"use": "gradient"}, "500": {"use": "network"}}}
    solver = mg.MGMatchSolver(pred, policy="pipeline")
    history.tabu_pace = {}
    sol = solver.solve(pr, Budget.of(200))
    assert sol.stats["predictor_gate"] == "gradient" and pred.calls == 0 and sol.has_assignment
    assert sol.stats["gate_budget_ms"] == pytest.approx(200.0, abs=1.0)  # the budget less the teardown kept back
    history.tabu_pace = {hist.model_key(pr): [200e-6]}
    assert history.tabu_pace_s(pr) == pytest.approx(200e-6)
    sol = solver.solve(pr, Budget.of(200))
    assert sol.stats["predictor_gate"] == "network" and pred.calls == 1 and sol.has_assignment
    assert sol.stats["gate_budget_ms"] == pytest.approx(500.0, abs=2.5)


def test_a_network_gated_in_at_a_budget_runs_where_the_unmeasured_rule_would_skip_it(monkeypatch, history):
    """A 60 ms predictor does not fit 20% of 200 ms, but a gate that measured it ahead at 200 ms lets
    it run when it fits half the time left; at a budget the gate measured it behind, it never runs."""
    history.predict_times = {}  # no earlier test's times of the "fixed" predictor
    history.predict_warm = set()
    pr, = problems("12v12", 1)
    slow = FixedPredictor(optimum(pr), sleep_s=0.06)
    slow.gate = {"use": "network", "by_budget_ms": {"200": {"use": "network"}, "2000": {"use": "gradient"}}}
    solver = mg.MGMatchSolver(slow, policy="pipeline")
    solver.solve(pr, Budget.of(5_000))  # the gate says gradient at 2 s and beyond: not called
    assert slow.calls == 0
    for calls in (1, 2):  # cold, then measured (60 ms)
        sol = solver.solve(pr, Budget.of(200))
        assert sol.stats["predictor_used"] == "fixed" and sol.stats["predictor_gate"] == "network"
        assert slow.calls == calls
    sol = solver.solve(pr, Budget.of(200))  # 60 ms fits half of 200 ms less the surrogate stage
    assert sol.stats["predictor_used"] == "fixed" and slow.calls == 3 and sol.has_assignment
    sol = solver.solve(pr, Budget.of(2_000))
    assert sol.stats["predictor_gate"] == "gradient" and slow.calls == 3
    assert sol.stats["predictor_used"] == GradientPredictor.version
    # with no gate the 0.2 rule holds: the same predictor is not run at 200 ms
    slow.gate = None
    assert solver.solve(pr, Budget.of(200)).stats["predictor_used"] == GradientPredictor.version
    assert slow.calls == 3


def test_the_predictor_must_fit_the_time_the_surrogate_stage_leaves(history):
    """On the pipeline path the network competes with the search for what the surrogate stage
    (measured per engagement model) leaves: 40 ms fits 20% of 300 ms, not of 300 − 150 ms."""
    pr, = problems("12v12", 1)
    pred = FixedPredictor(optimum(pr), sleep_s=0.04)
    solver = mg.MGMatchSolver(pred, policy="pipeline")
    for _ in range(2):  # the first call is cold, the second measured (40 ms)
        solver.solve(pr, Budget.of(2_000))
    assert history.surrogate_times[hist.stage_key(pr, Budget.of(2_000), solver.name)]  # the surrogate stages were measured
    # kept per method: another method's solves of this model and budget neither read nor wear them
    assert hist.stage_key(pr, Budget.of(2_000), "surrogate") not in history.surrogate_times
    key = hist.stage_key(pr, Budget.of(300), solver.name)
    assert key not in history.surrogate_times  # kept per budget: 2 s stages say nothing of 300 ms ones
    history.surrogate_times[key] = [0.001]
    assert solver.solve(pr, Budget.of(300)).stats["predictor_used"] == "fixed"
    history.surrogate_times[key] = [0.15]
    sol = solver.solve(pr, Budget.of(300))
    assert sol.stats["predictor_used"] == GradientPredictor.version and sol.has_assignment
    # another engagement model has no surrogate history: the whole time left counts
    other = Problem(pr.instance, pr.model, model_name="another")
    assert solver.solve(other, Budget.of(300)).stats["predictor_used"] == "fixed"


# --------------------------------------------------------------------------- SCIP's limit counts the build


def test_scip_limit_is_the_budget_minus_the_build(monkeypatch):
    pr, = problems("3v3", 1)
    real_build = MipModel.build.__func__
    limits = []

    def slow_build(cls, *a, **k):
        time.sleep(0.05)
        return real_build(cls, *a, **k)

    real_limit = MipModel.set_time_limit

    def record(self, seconds):
        limits.append(seconds)
        return real_limit(self, seconds)

    monkeypatch.setattr(MipModel, "build", classmethod(slow_build))
    monkeypatch.setattr(MipModel, "set_time_limit", record)
    solver = ScipSolver()
    budget = Budget.of(300)
    solver.solve(pr, budget)
    build_s = solver.last_stats["build_s"]
    assert build_s >= 0.05
    assert limits == [solver.last_stats["time_limit_s"]]
    assert limits[0] <= 0.3 - build_s  # what was left after building, not the whole budget
    assert limits[0] >= 0.3 - build_s - 0.03  # minus only the reading margin (and a little clock)


def test_scip_abandons_a_build_past_the_deadline():
    pr, = problems("12v12", 1)
    solver = ScipSolver()
    sol = solver.solve(pr, Budget(1.0, time.perf_counter() - 1.0))  # a budget already spent
    assert sol.status == "no_solution" and solver.last_stats["status"] == "no_time"


def test_build_deadline_raises_and_none_builds():
    pr, = problems("3v3", 1)
    with pytest.raises(BuildInterrupted):
        MipModel.build(pr.compiled, checker=pr.checker, deadline=time.perf_counter() - 1.0)
    mip = MipModel.build(pr.compiled, checker=pr.checker, deadline=time.perf_counter() + 60)
    with pytest.raises(BuildInterrupted):
        mip.add_engagement_objective(pr, deadline=time.perf_counter() - 1.0)


def test_a_build_measured_too_slow_for_the_time_left_is_not_started(monkeypatch, fresh_build_clocks):
    eng, _ = fresh_build_clocks
    pr, = problems("12v12", 1)
    best = optimum(pr)
    size = BuildClock.size(pr.compiled)
    eng.by_class.clear()  # (the exact solve above measured one build)
    eng.record(0.5, size)  # a build of this size took 500 ms
    assert eng.expected_s(size) == pytest.approx(0.5)

    def must_not_build(*a, **k):
        raise AssertionError("built a model that could not fit")

    monkeypatch.setattr(MipModel, "build", classmethod(must_not_build))
    solver = ScipSolver()
    sol = solver.solve(pr, Budget.of(100))
    assert sol.status == "no_solution" and solver.last_stats["status"] == "no_time"
    # MGMatch's SCIP path falls back to polishing its start instead
    sol = mg.MGMatchSolver(FixedPredictor(best), policy="scip").solve(pr, Budget.of(100))
    assert sol.status == "feasible" and sol.objective == pytest.approx(pr.objective(best), rel=1e-9)


def test_a_surrogate_build_measured_too_slow_is_skipped_only_when_there_is_an_answer_to_polish(fresh_build_clocks):
    _, sur = fresh_build_clocks
    pr, = problems("12v12", 1)
    best = optimum(pr)
    sur.record(0.5, BuildClock.size(pr.compiled))  # a build of this size took 500 ms
    # a feasible start (the rounded prediction): the build is not started, the start is polished
    sol = mg.MGMatchSolver(FixedPredictor(best), policy="pipeline").solve(pr, Budget.of(100))
    assert sol.stats["surrogate_status"] == "build_interrupted" and sol.has_assignment
    # no answer yet (a prediction whose rounding breaks rules): the build is tried anyway, and it
    # answers within the budget
    # (a swap of a selected and a benched player whose rounding, parties whole and players near a
    # host region first, still breaks rules)
    for i, k in itertools.product(np.flatnonzero(best >= 0), np.flatnonzero(best < 0)):
        wrong = best.copy()
        wrong[i], wrong[k] = -1, best[i]
        pred = FixedPredictor(wrong)
        if not pr.checker.feasible(mg.rounding(pr, pred.predict([pr])[0])[None])[0]:
            break
    else:
        raise AssertionError("no swap whose rounding breaks rules")
    # (repair_first=False: what earlier tests measured must not send it down the repair path)
    sol = mg.MGMatchSolver(pred, policy="pipeline", repair_first=False).solve(pr, Budget.of(300))
    assert sol.stats["rounding_feasible"] is False
    assert sol.stats["surrogate_status"] != "build_interrupted" and sol.has_assignment
    assert sol.time_ms <= 300 + 5


def test_build_clock_is_an_upper_quartile_of_recent_rates():
    clock = BuildClock(keep=4)
    assert clock.expected_s(100) == 0.0  # never measured: always try
    for s in (0.01, 0.02, 0.03, 0.04, 0.05):
        clock.record(s, 100)
    assert len(clock.rates(100)) == 4  # the oldest is forgotten
    assert clock.expected_s(120) == pytest.approx(120 / 100 * 0.04)


def test_build_clock_keeps_sizes_apart():
    """A small model's rate per unit (its fixed cost spread over few units) says nothing of a large
    one's: each size class (within a factor of two) is measured on its own."""
    clock = BuildClock()
    clock.record(0.001, 200)  # a tiny game: 5 µs per unit
    assert clock.expected_s(100_000) == 0.0  # a 12v12 pool's size: never measured, so tried
    clock.record(0.01, 100_000)  # 0.1 µs per unit
    assert clock.expected_s(100_000) == pytest.approx(0.01)
    assert clock.expected_s(150) == pytest.approx(150 * 5e-6)  # the small class unchanged
    assert clock.size_class(64) == clock.size_class(127) != clock.size_class(128)


def test_a_skipped_stage_forgets_its_largest_rate_every_few_skips():
    clock = BuildClock(keep=16, forget_every=4)
    for rate in (1.0, 2.0, 3.0, 1e3):
        clock.record(rate, 1)
    clock.record(7.0, 1_000)  # another size class: skips of size 1 leave it alone
    before = clock.expected_s(1)
    for _ in range(3):
        clock.skipped(1)
    assert clock.expected_s(1) == before  # three skips: nothing forgotten yet
    clock.skipped(1)
    assert sorted(clock.rates(1)) == [1.0, 2.0, 3.0] and clock.expected_s(1) < before
    for _ in range(12):
        clock.skipped(1)
    assert clock.rates(1) == [] and clock.expected_s(1) == 0.0  # measured again at its next chance
    assert clock.rates(1_000) == [7.0 / 1_000]


def test_polishing_and_tabu_locked_out_by_slow_moments_come_back(monkeypatch, history):
    """Rates inflated by slow moments (here planted: 1 s per unit) keep polishing and tabu search
    from starting; since a stage that does not run is not measured, the skips themselves must
    wear the estimate down, or every later solve would answer right after the surrogate stage."""
    from mgmatch.solvers import tabu as tabu_mod

    pr, = problems("12v12", 1)
    slow_polish, slow_tabu = BuildClock(), BuildClock()
    for _ in range(6):
        for k in range(30):  # every size class
            slow_polish.record(2.0 ** k, 2 ** k)
            slow_tabu.record(2.0 ** k, 2 ** k)
    history.polish_rounds = slow_polish
    monkeypatch.setattr(tabu_mod, "TABU_ROUNDS", slow_tabu)
    history.search_hits = {}
    solver = mg.MGMatchSolver(GradientPredictor(), policy="pipeline")
    ran = []
    for _ in range(40):
        # 150 ms: the surrogate stage must finish on a loaded CI machine (at 60 ms it was cut off once,
        # leaving no answer). The deadline holds within a loaded machine's scheduling delay; a stage
        # started against the planted pace would overrun by seconds
        sol = solver.solve(pr, Budget.of(150))
        assert sol.has_assignment and sol.time_ms <= 150 + 25
        ran.append(sol.stats.get("polish_moves", 0) > 0 or sol.stats.get("tabu_iterations", 0) > 0)
    assert not ran[0]  # locked out at first
    assert all(ran[-5:])  # then measured again, and running


def test_no_polish_round_is_started_that_the_measured_pace_says_cannot_finish(monkeypatch, history):
    pr, = problems("12v12", 1)
    slow = BuildClock()
    slow.record(10.0, pr.instance.n ** 2)  # a round took 10 s
    history.polish_rounds = slow
    sol = mg.MGMatchSolver(GradientPredictor(), policy="pipeline").solve(pr, Budget.of(400))
    assert sol.stats["polish_starts"] == 0 and sol.stats["polish_moves"] == 0
    assert sol.has_assignment  # the surrogate's answer, unpolished
    t = team_of_from_teams(pr.instance, sol.teams)
    assert pr.checker.feasible(t[None])[0]


def test_polish_reports_the_rounds_it_timed_apart_from_the_pace_given():
    from mgmatch.solvers.polish import polish

    pr, = problems("3v3", 1)
    start = optimum(pr)
    res = polish(pr, start, deadline=time.perf_counter() + 10, round_s=0.5)
    assert res.measured_round_s > 0 and res.round_s >= 0.5 > res.measured_round_s
    idle = polish(pr, start, deadline=time.perf_counter() + 0.1, round_s=5.0)  # no round fits
    assert idle.measured_round_s == 0 and idle.rounds == 0


def test_the_enumeration_rate_is_measured(monkeypatch):
    """Enumeration estimates use the process's measured rate once there is one (the fixed 4 µs per
    assignment, measured under load, was 13x a quiet machine's rate: a 3v3 pool of 19 520 assignments,
    estimated at 81 ms, was handed over unfinished at 10 ms and sometimes answered nothing)."""
    monkeypatch.setattr(policy, "_ENUM_RATES", [])
    assert policy.enumerate_estimate_s(10_000) == pytest.approx(policy.ENUM_BASE_S + 10_000 * 4e-6)
    policy.record_enumeration(0.001, 100)  # too few assignments to say anything of the rate
    assert policy._ENUM_RATES == []
    for seconds in (0.003, 0.004, 0.010, 0.005):
        policy.record_enumeration(seconds, 10_000)
    assert policy.enumeration_rate_s() == pytest.approx(0.5e-6)  # the upper quartile of 0.3, 0.4, 0.5, 1.0 µs
    assert policy.enumerate_estimate_s(10_000) == pytest.approx(policy.ENUM_BASE_S + 0.005)
    assert policy.enumerate_chunk(0.1) == int(policy.ENUM_CHUNK_SHARE * 0.1 / 0.5e-6)
    # MGMatch's enumerations and the enumerate method's are measured
    monkeypatch.setattr(policy, "_ENUM_RATES", [])
    pr = max(problems("3v3", 10, seed=21), key=lambda q: policy.choose(q, None).assignments or 0)
    get_solver("enumerate").solve(pr, Budget.of(None))
    assert len(policy._ENUM_RATES) == 1
    mg.MGMatchSolver(FixedPredictor(optimum(pr)), policy="enumerate").solve(pr, Budget.of(5_000))
    assert len(policy._ENUM_RATES) == 2


def test_prepare_warms_the_predictor_and_scip_outside_the_budget_and_leaves_the_problem_as_it_was(monkeypatch,
                                                                                                  fresh_build_clocks, history):
    """`mgmatch solve` is a one-shot process: ``prepare`` makes the predictor's cold calls (not
    recorded: the solve's own call is the first measurement), builds a surrogate MIP whose SCIP
    instance the solve's build then reuses, records a warm build and tabu pace (so the first solve
    at a tight budget can pick its path), and leaves nothing on the problem (a twin did the work).
    With ``measure=False`` (the service's warm-up pool, of another shape) it records nothing."""
    from mgmatch.solvers import mip as mip_mod
    from mgmatch.solvers import tabu as tabu_mod

    _, surrogate_builds = fresh_build_clocks
    pr, = problems("12v12", 1)
    fixed = FixedPredictor(optimum(pr))
    solver = mg.MGMatchSolver(fixed, policy="pipeline")
    monkeypatch.setattr(mip_mod, "_IDLE", type(mip_mod._IDLE)())  # this thread holds no idle instance
    history.tabu_pace = {}
    reads, rounds = BuildClock(), BuildClock()
    for mod in (mip_mod, mg):
        monkeypatch.setattr(mod, "SCIP_READS", reads)
    for mod in (tabu_mod, mg):
        monkeypatch.setattr(mod, "TABU_ROUNDS", rounds)
    solver.prepare(pr, measure=False)
    assert not surrogate_builds.by_class and not reads.by_class and not rounds.by_class and not history.tabu_pace
    history.predict_warm = set()
    fixed.calls = 0
    before = (set(pr.__dict__), {k: len(v) if isinstance(v, dict) else v for k, v in pr.checker.__dict__.items()})
    solver.prepare(pr)
    assert fixed.calls == mg.PREPARE_PREDICTS and "fixed" in history.predict_warm
    assert "fixed" not in history.predict_times  # cold calls are no measurement
    after = (set(pr.__dict__), {k: len(v) if isinstance(v, dict) else v for k, v in pr.checker.__dict__.items()})
    assert pr.extra == {} and after == before
    # measured: one warm build, the warm walk's pace and iterations, one SCIP read (the cold pass's put back)
    assert [len(v) for v in surrogate_builds.by_class.values()] == [1]
    assert len(history.tabu_pace[hist.model_key(pr)]) == 1 and rounds.by_class
    assert [len(v) for v in reads.by_class.values()] == [1]
    assert sum(len(v) for v in mip_mod._IDLE.models.values()) == 1  # its SCIP instance, idle for the solve
    sol = solver.solve(pr, Budget.of(5_000))
    assert fixed.calls == mg.PREPARE_PREDICTS + 1 and len(history.predict_times["fixed"]) == 1
    assert sol.has_assignment
    solver.prepare(pr)  # a warm predictor is not called again
    assert fixed.calls == mg.PREPARE_PREDICTS + 1


def test_the_gradient_method_prepares_without_a_network():
    pr, = problems("3v3", 1)
    solver = get_solver("surrogate")
    solver.prepare(pr)
    assert pr.extra == {} and solver.solve(pr, Budget.of(1_000)).has_assignment
