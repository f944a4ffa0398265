"""MGMatch's fast solver: oracle surrogate, feasibility, budget, no_solution, and polish."""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.core.presets import generate_instances, resolve_model
from mgmatch.core.problem import Problem
from mgmatch.core.solution import team_of_from_teams
from mgmatch.solvers.base import Budget, get_solver
from mgmatch.solvers.mgmatch import MGMatchSolver, Predictor, round_prediction
from mgmatch.solvers.mip import MipModel
from mgmatch.solvers.polish import polish

# seed 3: the first instances of 3v3 are small enough to enumerate in milliseconds
SEED = 3


def problems(preset: str, count: int, seed: int = SEED) -> list[Problem]:
    out = []
    for inst in generate_instances(preset, count, seed):
        name, model = resolve_model(inst)
        out.append(Problem(inst, model, model_name=name))
    return out


def one_hot(team_of: np.ndarray, teams: int) -> np.ndarray:
    p = np.zeros((team_of.size, teams))
    sel = np.flatnonzero(team_of >= 0)
    p[sel, team_of[sel]] = 1.0
    return p


class OraclePredictor:
    """P = the exact optimum's x* (the paper's §4.3 argument)."""

    version = "oracle"

    def __init__(self, optimum: dict[int, np.ndarray]):
        self.optimum = optimum

    def predict(self, problems_: list[Problem]) -> list[np.ndarray]:
        return [one_hot(self.optimum[id(pr)], pr.instance.teams) for pr in problems_]


class NoisePredictor:
    version = "noise"

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def predict(self, problems_: list[Problem]) -> list[np.ndarray]:
        return [self.rng.random((pr.instance.n, pr.instance.teams)) for pr in problems_]


def optimum(pr: Problem) -> tuple[np.ndarray, float]:
    sol = get_solver("enumerate").solve(pr, Budget.of(None))
    assert sol.status == "optimal"
    return team_of_from_teams(pr.instance, sol.teams), sol.objective


def feasible(pr: Problem, sol) -> bool:
    t = team_of_from_teams(pr.instance, sol.teams)
    return bool(pr.checker.feasible(t[None])[0])


@pytest.fixture(scope="module")
def small3v3() -> list[tuple[Problem, np.ndarray, float]]:
    return [(pr, *optimum(pr)) for pr in problems("3v3", 4)]


def test_noise_predictor_satisfies_protocol():
    assert isinstance(NoisePredictor(0), Predictor)


def test_surrogate_with_oracle_prediction_is_the_exact_optimum(small3v3):
    for pr, t_opt, obj_opt in small3v3:
        # the surrogate MIP alone (no warm start, no polish) recovers x*
        mip = MipModel.build(pr.compiled, checker=pr.checker, fast=True)
        mip.set_linear_objective(one_hot(t_opt, pr.instance.teams))
        res = mip.solve()
        assert res.status == "optimal"
        np.testing.assert_array_equal(res.team_of, t_opt)
        # and the whole solver answers the optimum
        oracle = OraclePredictor({id(pr): t_opt})
        for solver in (MGMatchSolver(oracle, warm_start=False, use_polish=False, policy="pipeline"),
                       MGMatchSolver(oracle, policy="pipeline"), MGMatchSolver(oracle)):
            sol = solver.solve(pr, Budget.of(300))
            assert sol.status in ("feasible", "optimal")
            assert sol.objective == pytest.approx(obj_opt, abs=1e-9)
            np.testing.assert_array_equal(team_of_from_teams(pr.instance, sol.teams), t_opt)


def test_answers_are_feasible_and_within_budget():
    cases = [(pr, 100.0) for pr in problems("3v3", 3, seed=11)] + [(pr, 300.0) for pr in problems("12v12", 1, seed=11)]
    pred = NoisePredictor(5)
    for pr, limit in cases:
        solver = MGMatchSolver(pred)
        t0 = time.perf_counter()
        sol = solver.solve(pr, Budget.of(limit))
        wall = (time.perf_counter() - t0) * 1e3
        assert sol.status in ("feasible", "optimal", "no_solution")
        # the solver stops itself before the deadline; the slack only absorbs OS preemption on a
        # loaded machine (a whole extra stage past the deadline would still fail this)
        assert wall <= limit + max(30.0, 0.5 * limit), f"{wall:.1f} ms for a {limit} ms budget"
        if sol.status != "no_solution":
            assert feasible(pr, sol)
            assert sol.objective == pytest.approx(pr.objective(team_of_from_teams(pr.instance, sol.teams)))
            assert sol.method == "mgmatch" and sol.stats["predictor"] == "noise"
    # a feasible answer on most of them (an accurate predictor is not needed for feasibility)
    found = sum(MGMatchSolver(pred).solve(pr, Budget.of(lim)).status in ("feasible", "optimal") for pr, lim in cases)
    assert found >= len(cases) - 1


def test_zero_budget_gives_no_solution_never_a_rule_breaking_answer(small3v3):
    pr = small3v3[0][0]
    sol = MGMatchSolver(NoisePredictor(0)).solve(pr, Budget.of(0.0))
    assert sol.status == "no_solution"
    assert not sol.has_assignment and sol.objective is None


def test_infeasible_instance_is_never_answered_with_teams(small3v3):
    pr = small3v3[0][0]
    inst = pr.instance.to_json()
    a, b = inst["players"][0]["id"], inst["players"][1]["id"]
    inst = copy.deepcopy(inst)
    inst["rules"].append({"kind": "include", "players": [a, b]})
    inst["rules"].append({"kind": "avoid", "players": [a, b], "scope": "match"})
    from mgmatch.core.instance import parse_instance

    bad = Problem(parse_instance(inst), pr.model)
    sol = MGMatchSolver(NoisePredictor(1)).solve(bad, Budget.of(2000))
    assert sol.status in ("infeasible", "no_solution")
    assert not sol.has_assignment


def test_predictor_is_required_and_checked(small3v3):
    with pytest.raises(InvalidInput, match="predictor"):
        get_solver("mgmatch")
    with pytest.raises(InvalidInput, match="predictor"):
        get_solver("bgcn")

    class Wrong:
        version = "wrong"

        def predict(self, problems_):
            return [np.zeros((3, 3)) for _ in problems_]

    with pytest.raises(ValueError, match="shape"):
        MGMatchSolver(Wrong(), policy="pipeline").solve(small3v3[0][0], Budget.of(1000))
    assert get_solver("bgcn", predictor=NoisePredictor(0)).name == "bgcn"


def test_round_prediction_fills_every_team():
    rng = np.random.default_rng(0)
    p = rng.random((9, 3))
    t = round_prediction(p, (2, 3, 1))
    assert [(t == j).sum() for j in range(3)] == [2, 3, 1]
    assert (t >= -1).all() and (t < 3).all()


def test_round_prediction_keeps_parties_whole_and_fills_every_team():
    rng = np.random.default_rng(3)
    units = [np.asarray([0, 1, 2]), np.asarray([3, 4]), np.asarray([5, 6])]
    for _ in range(50):
        p = rng.random((12, 2))
        t = round_prediction(p, (4, 4), units)
        assert [(t == j).sum() for j in range(2)] == [4, 4]
        # at most one party is split, and only when no team had room for it whole
        split = [u for u in units if len(set(t[u].tolist())) > 1]
        assert len(split) <= 1
    # a party is placed by its members' mean p: here all three on team 1
    p = np.zeros((12, 2))
    p[[0, 1, 2], 1] = [0.9, 0.8, 0.1]
    p[[0, 1, 2], 0] = [0.5, 0.5, 0.5]
    t = round_prediction(p, (4, 4), units)
    assert t[[0, 1, 2]].tolist() == [1, 1, 1]
    assert round_prediction(p, (4, 4))[2] != 1  # one by one, player 2 goes by its own p


def test_the_rounding_takes_players_near_one_host_region_first():
    from mgmatch.core.checker import tolerance
    from mgmatch.solvers.mgmatch import near_region, party_units, rounding

    checked = 0
    for pr in problems("12v12", 8, seed=51):
        chk = pr.checker
        if chk.max_ping is None:
            continue
        p = np.random.default_rng(checked).random((pr.instance.n, pr.instance.teams))
        mask = near_region(pr, p)
        assert mask is not None
        near = chk.ping <= chk.max_ping + tolerance(chk.max_ping)
        for members in party_units(pr) or ():  # a party counts as near only when all of it is
            near[members] = near[members].all(axis=0)
        assert any((near[:, g] == mask).all() for g in range(near.shape[1]))  # one region's near players
        assert all(mask[m].all() or not mask[m].any() for m in party_units(pr) or ())
        t = rounding(pr, p)
        selected = t >= 0
        assert [int((t == j).sum()) for j in range(pr.instance.teams)] == list(pr.instance.sizes)
        # every selected player is near that region (a pool of this world has enough of them)
        assert mask[selected].all()
        checked += 1
    assert checked >= 4


def test_polish_never_worsens_and_stays_feasible():
    for pr in problems("3v3", 3, seed=11) + problems("12v12", 1, seed=4):
        starts = get_solver("random", seed=2, max_samples=600, default_time_limit_ms=10_000)
        sol = starts.solve(pr, Budget.of(None))
        assert sol.status == "feasible"
        t0 = team_of_from_teams(pr.instance, sol.teams)
        res = polish(pr, t0, deadline=time.perf_counter() + 2.0)
        assert pr.checker.feasible(res.team_of[None])[0]
        assert res.objective >= pr.objective(t0) - 1e-12
        assert res.objective == pytest.approx(pr.objective(res.team_of))
        if res.local_optimum:  # no feasible neighbour is better (best improvement stopped correctly)
            cand = candidate_moves(res.team_of, [])
            ok = pr.checker.feasible(cand)
            if ok.any():
                assert pr.objectives(cand[ok]).max() <= res.objective + 1e-4


def test_polish_respects_its_deadline():
    pr = problems("12v12", 1, seed=4)[0]
    sol = get_solver("random", seed=0, max_samples=200, default_time_limit_ms=10_000).solve(pr, Budget.of(None))
    t0 = team_of_from_teams(pr.instance, sol.teams)
    start = time.perf_counter()
    res = polish(pr, t0, deadline=start)  # already expired: returns the input unchanged
    np.testing.assert_array_equal(res.team_of, t0)
    assert res.rounds == 0


# ---------------------------------------------------------------- the true-MIP search stage


def candidate_moves(team_of: np.ndarray, units: list[np.ndarray]) -> np.ndarray:
    """The polish neighbourhood written plainly in numpy, as full assignments [M, N]: the reference
    that :func:`mgmatch.solvers.moves.neighbourhood` (compiled, as change lists) is tested against."""
    t = np.asarray(team_of)
    N = t.shape[0]
    sel = np.flatnonzero(t >= 0)
    bench = np.flatnonzero(t < 0)
    out = []
    # team swaps: i, k selected on different teams
    if sel.size:
        a, b = np.triu_indices(sel.size, 1)
        i, k = sel[a], sel[b]
        keep = t[i] != t[k]
        i, k = i[keep], k[keep]
        if i.size:
            m = np.repeat(t[None, :], i.size, axis=0)
            r = np.arange(i.size)
            m[r, i], m[r, k] = t[k], t[i]
            out.append(m)
    # bench swaps: i selected leaves, k from the bench takes its team
    if sel.size and bench.size:
        i = np.repeat(sel, bench.size)
        k = np.tile(bench, sel.size)
        m = np.repeat(t[None, :], i.size, axis=0)
        r = np.arange(i.size)
        m[r, k] = t[i]
        m[r, i] = -1
        out.append(m)
    # unit swaps: a party moves as one block with another party or the same number of singles
    for u in units:
        team_u = t[u[0]]
        if not (t[u] == team_u).all():
            continue
        for v in units:
            if v is u or v.size != u.size or not (t[v] == t[v[0]]).all() or t[v[0]] == team_u:
                continue
            if team_u < 0 and t[v[0]] < 0:
                continue
            m = t.copy()
            m[u], m[v] = t[v[0]], team_u
            out.append(m[None, :])
    if not out:
        return np.empty((0, N), dtype=t.dtype)
    return np.concatenate(out, axis=0)


class FixedPredictor:
    """P = one-hot of a given assignment: a deterministic, confidently wrong predictor."""

    version = "fixed"

    def __init__(self, team_of: np.ndarray):
        self.team_of = team_of

    def predict(self, problems_: list[Problem]) -> list[np.ndarray]:
        return [one_hot(self.team_of, pr.instance.teams) for pr in problems_]


def stuck_local_optimum(pr: Problem, obj_opt: float) -> np.ndarray:
    """A feasible assignment that polishing cannot improve and that is below the optimum."""
    for seed in range(40):
        sol = get_solver("random", seed=seed, max_samples=50, default_time_limit_ms=10_000).solve(pr, Budget.of(None))
        if not sol.has_assignment:
            continue
        res = polish(pr, team_of_from_teams(pr.instance, sol.teams))
        if res.local_optimum and res.objective < obj_opt - 1e-6:
            return res.team_of
    raise AssertionError("no sub-optimal local optimum found")


def test_true_search_improves_on_the_polished_answer(small3v3):
    pr, t_opt, obj_opt = small3v3[0]
    stuck = stuck_local_optimum(pr, obj_opt)
    pred = FixedPredictor(stuck)
    # without the search stage the answer stays at the local optimum the predictor points to ...
    plain = MGMatchSolver(pred, search=False, policy="pipeline", selection=False).solve(pr, Budget.of(3000))
    assert plain.status == "feasible" and feasible(pr, plain)
    assert plain.objective < obj_opt - 1e-6
    # ... the search of the engagement MIP from it (warm start + cutoff) reaches the proven optimum
    sol = MGMatchSolver(pred, policy="pipeline", selection=False).solve(pr, Budget.of(3000))
    assert sol.status == "optimal" and feasible(pr, sol)  # proven: SCIP finished the engagement MIP
    assert sol.objective == pytest.approx(obj_opt, abs=1e-9) and sol.bound == pytest.approx(sol.objective)
    assert sol.stats["search_proven_optimal"] is True
    assert sol.stats["polished_objective"] < obj_opt - 1e-6  # the improvement came from the search


def test_true_search_alone_never_worsens_and_proves_an_optimal_incumbent(small3v3):
    from mgmatch.solvers.pas import true_search

    pr, t_opt, obj_opt = small3v3[1]
    stuck = stuck_local_optimum(pr, obj_opt)
    for incumbent in (stuck, t_opt):
        inc_obj = pr.objective(incumbent)
        mip = MipModel.build(pr.compiled, checker=pr.checker, fast=True)
        mip.set_linear_objective(one_hot(incumbent, pr.instance.teams))
        mip.solve()
        res = true_search(pr, mip, one_hot(incumbent, pr.instance.teams), incumbent, inc_obj,
                          stop=time.perf_counter() + 5.0)
        assert res.proven_optimal
        if res.team_of is None:  # nothing better than the incumbent: it is the optimum
            assert inc_obj == pytest.approx(obj_opt, abs=1e-9)
        else:
            assert pr.checker.feasible(res.team_of[None])[0]
            assert res.objective > inc_obj
            assert res.objective == pytest.approx(obj_opt, abs=1e-9)


def test_trust_region_keeps_the_search_near_the_prediction(small3v3):
    from mgmatch.solvers.pas import trust_region

    pr, t_opt, obj_opt = small3v3[0]
    stuck = stuck_local_optimum(pr, obj_opt)
    # radius 0 over every x: the region holds exactly the predicted assignment
    mip = MipModel.build(pr.compiled, checker=pr.checker, settings="exact")
    mip.add_engagement_objective(pr)
    assert trust_region(mip, one_hot(stuck, pr.instance.teams), 1.0, 0) is not None
    res = mip.solve()
    assert res.status == "optimal"
    np.testing.assert_array_equal(res.team_of, stuck)
    # an empty region is no constraint
    assert trust_region(mip, one_hot(stuck, pr.instance.teams), 0.0, 0) is None


def test_search_with_a_trust_region_answers_feasibly_and_never_below_polish(small3v3):
    for pr, _t_opt, obj_opt in small3v3[:2]:
        stuck = stuck_local_optimum(pr, obj_opt)
        solver = MGMatchSolver(FixedPredictor(stuck), tr_fraction=0.5, tr_delta=2, policy="pipeline", selection=False)
        sol = solver.solve(pr, Budget.of(2000))
        assert sol.status in ("feasible", "optimal") and feasible(pr, sol)
        assert sol.objective >= sol.stats["polished_objective"] - 1e-12
        assert sol.objective <= obj_opt + 1e-9


def test_short_budgets_are_respected_with_the_search_stage():
    cases = [(pr, 50.0) for pr in problems("3v3", 3, seed=21)] + [(pr, 100.0) for pr in problems("12v12", 2, seed=21)]
    pred = NoisePredictor(7)
    searched = 0
    for pr, limit in cases:
        t0 = time.perf_counter()
        sol = MGMatchSolver(pred, policy="pipeline").solve(pr, Budget.of(limit))
        wall = (time.perf_counter() - t0) * 1e3
        # the slack only absorbs OS preemption on a loaded machine; a stage run past the deadline
        # (a SCIP solve without its time limit, a polish without its deadline) would exceed it
        assert wall <= limit + max(30.0, 0.5 * limit), f"{wall:.1f} ms for a {limit} ms budget"
        assert sol.status in ("feasible", "optimal", "no_solution")
        if sol.status != "no_solution":
            assert feasible(pr, sol)
            searched += "search_ms" in sol.stats
    assert searched >= 1  # the stage ran within these budgets


class GatedPredictor(FixedPredictor):
    """A FixedPredictor carrying a sidecar's measured ``gate``, counting its calls."""

    def __init__(self, team_of: np.ndarray, use: str):
        super().__init__(team_of)
        self.gate = {"use": use, "by_budget_ms": {"100": {"diff_points": 0.01}}}
        self.calls = 0

    def predict(self, problems_):
        self.calls += 1
        return super().predict(problems_)


def test_a_network_gated_out_by_its_measurement_never_runs_and_the_gradient_stands_in():
    """A predictor whose measured gate says ``gradient`` (MGMatch with it was behind ``surrogate``) is
    never called: MGMatch predicts with the engagement gradient, as ``surrogate`` does, and says why."""
    pr, = problems("3v3", 1)
    start, _ = optimum(pr)
    gated = GatedPredictor(start, "gradient")
    sol = MGMatchSolver(gated, policy="pipeline").solve(pr, Budget.of(200))
    assert gated.calls == 0 and sol.has_assignment
    assert sol.stats["predictor_used"] == "engagement-gradient" and sol.stats["predictor_gate"] == "gradient"
    kept = GatedPredictor(start, "network")
    sol = MGMatchSolver(kept, policy="pipeline").solve(pr, Budget.of(200))
    assert kept.calls == 1 and sol.stats["predictor_used"] == "fixed" and "predictor_gate" not in sol.stats


def test_a_searched_engagement_mip_is_freed_inside_the_budget_and_its_free_measured(monkeypatch, small3v3, history):
    """The engagement MIP that SCIP's search ran on is freed before the answer (its time measured and
    kept back from the next search), not by the garbage collector after the answer was built: on
    12v12-deep at 100 ms that came 3–6.5 ms after the answer."""
    from mgmatch.solvers.mip import ENGAGEMENT_FREES, BuildClock

    pr, t_opt, obj_opt = small3v3[0]
    freed = []
    orig = MipModel.dispose

    def dispose(self):
        assert self.model is not None
        orig(self)
        freed.append(self)

    monkeypatch.setattr(MipModel, "dispose", dispose)
    history.engagement_frees = BuildClock()
    sol = MGMatchSolver(FixedPredictor(stuck_local_optimum(pr, obj_opt)), policy="pipeline",
                        selection=False).solve(pr, Budget.of(3000))
    assert sol.stats["search_solves"] >= 1 and feasible(pr, sol)
    assert len(freed) == 1 and freed[0].model is None and freed[0].x is None
    assert history.engagement_frees.rates(BuildClock.size(pr.compiled))  # measured
    assert ENGAGEMENT_FREES is not history.engagement_frees


def test_the_measured_teardown_is_kept_back_from_the_budget_and_counted_in_time_ms(monkeypatch, small3v3, history):
    import mgmatch.solvers.mgmatch.solver as mg
    from mgmatch.solvers.mip import BuildClock

    pr, t_opt, _ = small3v3[0]
    size = BuildClock.size(pr.compiled)
    clock = BuildClock()
    history.teardown = clock
    seen = []
    solver = MGMatchSolver(FixedPredictor(t_opt), policy="pipeline")
    inner = solver._solve

    def spy(problem, budget):
        seen.append(budget)
        sol = inner(problem, budget)
        time.sleep(0.004)  # a teardown after the answer was built
        return sol

    monkeypatch.setattr(solver, "_solve", spy)
    sol = solver.solve(pr, Budget.of(200))
    assert seen[-1].time_limit_ms == 200  # nothing measured yet: the whole budget
    assert sol.time_ms >= seen[-1].elapsed_ms() - 1.0 and clock.expected_s(size) >= 0.004  # counted, measured
    # 4 ms measured: beyond the 2 ms finish reserve, 2 ms are kept back ...
    sol = solver.solve(pr, Budget.of(200))
    assert seen[-1].time_limit_ms == pytest.approx(200 - 1e3 * (clock.rates(size)[0] * size - mg.FINISH_RESERVE_S), abs=0.5)
    assert seen[-1].time_limit_ms < 198.5 and sol.has_assignment
    # ... but never more than TEARDOWN_MAX_SHARE of the budget
    clock.record(10.0, size)
    clock.record(10.0, size)
    solver.solve(pr, Budget.of(50))
    assert seen[-1].time_limit_ms == pytest.approx(50 * (1 - mg.TEARDOWN_MAX_SHARE))


def test_the_search_stops_as_early_as_scip_recently_overran_its_limit(monkeypatch, small3v3, history):
    """SCIP checks its clock between LP solves; where those are long (a 12v12-deep engagement MIP),
    it stopped 5–7 ms past its limit and the answer came late. The search's margin is the largest
    recent overrun on pools of this size (at least SCIP_MARGIN_S), and each search reports its own."""
    import mgmatch.solvers.mgmatch.pipeline as mg

    pr, t_opt, obj_opt = small3v3[0]
    bucket = pr.instance.n // 16
    history.search_overshoot = {bucket: [0.001, 0.009]}
    margins = []
    inner = mg.true_search

    def spy(*args, **kwargs):
        margins.append(kwargs["margin_s"])
        res = inner(*args, **kwargs)
        res.stats["search_overshoot_ms"] = 3.0  # as if SCIP had stopped 3 ms past its limit
        return res

    monkeypatch.setattr(mg, "true_search", spy)
    solver = MGMatchSolver(FixedPredictor(stuck_local_optimum(pr, obj_opt)), policy="pipeline", selection=False)
    sol = solver.solve(pr, Budget.of(3000))
    assert margins == [0.009] and feasible(pr, sol)
    assert history.search_overshoot[bucket] == [0.001, 0.009, 0.003]
    history.search_overshoot = {}
    solver.solve(pr, Budget.of(3000))
    assert margins[-1] == mg.SCIP_MARGIN_S  # nothing measured: the fixed margin


def test_true_search_reports_how_far_past_its_limit_scip_stopped():
    from mgmatch.solvers.pas import true_search

    pr = problems("12v12-deep", 1, seed=4)[0]
    mip = MipModel.build(pr.compiled, checker=pr.checker, settings="exact")
    start = round_prediction(np.random.default_rng(0).random((pr.instance.n, pr.instance.teams)), pr.instance.sizes)
    found = true_search(pr, mip, np.zeros((pr.instance.n, pr.instance.teams)), start, -1e9,
                        stop=time.perf_counter() + 0.2, fraction=0.0, margin_s=0.004)
    assert found.stats["search_status"] == ["timelimit"]  # a 12v12-deep engagement MIP takes seconds to prove
    assert -5.0 < found.stats["search_overshoot_ms"] < 50.0


def test_a_region_whose_near_players_cannot_meet_the_include_and_role_rules_is_passed_over():
    from mgmatch.core.rules import IncludeRule, RolesRule
    from mgmatch.lab.bench_quality import problems_for
    from mgmatch.solvers.mgmatch import near_region, party_units, region_admits

    pr = problems_for("12v12-deep", 40, 1000003)[22]
    chk = pr.checker
    near = ~chk.far
    for members in party_units(pr) or ():
        near[members] = near[members].all(axis=0)
    enough = [g for g in range(near.shape[1]) if near[:, g].sum() >= sum(pr.instance.sizes)]
    admits = [g for g in enough if region_admits(pr, near[:, g])]
    assert len(enough) == 3 and admits == [0]
    # the others fail both conditions: an included player far, and too few players for a set of roles
    inc = next(r for r in pr.instance.rules if isinstance(r, IncludeRule))
    roles = next(r for r in pr.instance.rules if isinstance(r, RolesRule))
    can, need, _ = chk.hall(roles)
    for g in set(enough) - set(admits):
        assert not all(near[pr.instance.index[x], g] for x in inc.players)
        assert (can[near[:, g]].sum(axis=0) < pr.instance.teams * need).any()
    # a prediction that favours a failing region's players still rounds into region 0
    p = np.where(near[:, enough[-1]][:, None], 1.0, 0.0) * np.ones((1, pr.instance.teams))
    assert (near_region(pr, p) == near[:, 0]).all()
