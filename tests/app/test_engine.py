"""Predictor fallback, pinned models with hot reload, A/B arms, and config validation."""

from __future__ import annotations

import gc
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import SPEC_EXAMPLES, client, features, poll, service_config, shipped_predictor_problem  # noqa: E402

from mgmatch.app import metrics  # noqa: E402
from mgmatch.app.ab import Experiment, Plan, bucket, plan_for  # noqa: E402
from mgmatch.app.config import ExperimentConfig, ModelsConfig, load_config, parse_config  # noqa: E402
from mgmatch.app.engine import Engine  # noqa: E402
from mgmatch.app.models_hub import EngagementModels, PredictorDown, Predictors  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.core.errors import InvalidInput  # noqa: E402
from mgmatch.core.instance import parse_instance  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "shipped"


def _small_engine(tmp_path, predictors) -> Engine:
    from mgmatch.solvers.moves import warm

    # as serve and the workers do at start-up (Runtime.warm): the numba kernels loaded now; else the
    # first MGMatch solver of a process loads them inside its solve's budget (0.2-0.4 s, more on a busy
    # machine), and a fallback after a late predictor found no time left
    warm()
    cfg = parse_config(yaml.safe_load(service_config(tmp_path).read_text()))
    return Engine(EngagementModels(cfg.models), predictors, "small")


def _instance():
    return parse_instance(json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text()))


class _Backend:
    """A predictor test double: uniform probabilities after ``delay_s``, or an error."""

    def __init__(self, delay_s=0.0, fail=False):
        self.delay_s, self.fail, self.version = delay_s, fail, "fake@1"

    def predict(self, problems, timeout_s=None):
        if self.fail:
            raise PredictorDown("error", "network failed")
        if timeout_s is not None and self.delay_s > timeout_s:
            time.sleep(timeout_s)
            raise PredictorDown("late", "too slow")
        time.sleep(self.delay_s)
        return [np.full((p.instance.n, p.instance.teams), 0.5) for p in problems]


class _Hub:
    def __init__(self, backend):
        self.backend = backend

    def get(self, name):
        if self.backend is None:
            raise PredictorDown("unavailable", f"no predictor {name}")
        return self.backend


@pytest.fixture
def pipeline_policy(monkeypatch):
    """MGMatch's policy forced to the predict → surrogate → polish → search path as for a large pool
    (the small example pool would otherwise be enumerated without asking the predictor)."""
    import dataclasses

    import mgmatch.solvers.mgmatch.solver as mg
    from mgmatch.solvers import policy

    def as_large_pool(problem, left_s, forced="auto"):
        c = policy.choose(problem, left_s, "pipeline")
        return dataclasses.replace(c, assignments=None, enumerate_estimate_s=None)

    monkeypatch.setattr(mg, "choose", as_large_pool)


@pytest.mark.parametrize("backend,reason", [(None, "unavailable"), (_Backend(delay_s=5.0), "late"),
                                            (_Backend(fail=True), "error")])
def test_predictor_down_or_late_falls_back_within_the_budget(tmp_path, backend, reason, pipeline_policy):
    eng = _small_engine(tmp_path, _Hub(backend))
    before = metrics.FALLBACKS.labels("t", "mgmatch", reason)._value.get()
    t0 = time.perf_counter()
    sol = eng.solve(_instance(), Plan("mgmatch", "exact", 400.0, None, None, "B"), "t")
    took = time.perf_counter() - t0
    assert getattr(sol, "fallback", None) == reason, sol.stats
    assert sol.method in ("exact", "enumerate", "scip") and sol.arm == "B"
    assert sol.status in ("optimal", "feasible") and sol.has_assignment
    assert took < 2.0  # the late predictor was abandoned at half the budget, not awaited for 5 s
    assert metrics.FALLBACKS.labels("t", "mgmatch", reason)._value.get() == before + 1


def test_working_predictor_is_used_and_its_version_reported(tmp_path, pipeline_policy):
    eng = _small_engine(tmp_path, _Hub(_Backend()))
    sol = eng.solve(_instance(), Plan("mgmatch", "exact", 2000.0, None, None, None), "t")
    assert sol.method == "mgmatch" and sol.model_version == "fake@1"
    assert not hasattr(sol, "fallback") or sol.fallback is None
    # where the budget went, for operators: waiting before the solve, encoding, then the solver's stages
    assert {"queued_ms", "encode_ms", "predict_ms"} <= set(sol.stats) and sol.stats["encode_ms"] >= 0


def test_a_pool_whose_predictor_was_trained_for_another_model_falls_back(tmp_path, pipeline_policy):
    """The service's predictor refuses a problem of another engagement model (3v3 pool, 12v12 network):
    the solve falls back to the model-free method with reason ``error`` instead of being guided by it."""
    if (problem := shipped_predictor_problem("12v12")) is not None:
        pytest.skip(problem)
    from mgmatch.core.presets import generate_instances

    eng = Engine(EngagementModels(ModelsConfig()), Predictors(ModelsConfig()), None)
    inst = generate_instances("3v3", 1, seed=0)[0]
    sol = eng.solve(inst, Plan("mgmatch", "surrogate", 1000.0, "3v3", "12v12", None), "t")
    assert sol.fallback == "error" and sol.method == "surrogate" and sol.has_assignment


def test_default_fallback_is_the_model_free_surrogate(tmp_path):
    eng = _small_engine(tmp_path, _Hub(None))
    sol = eng.solve(_instance(), plan_for(None, None, default_method="mgmatch", default_budget_ms=400.0), "t")
    assert sol.fallback == "unavailable" and sol.method == "surrogate"
    assert sol.status in ("feasible", "optimal") and sol.has_assignment


def test_settle_freezes_the_start_up_heap(tmp_path):
    rt = Runtime.build(Settings(config=service_config(tmp_path)))
    try:
        rt.settle()
        assert gc.get_freeze_count() > 0  # full collections no longer walk the start-up objects
    finally:
        gc.unfreeze()


def test_onnx_pin_and_hot_reload(tmp_path):
    for name in ("3v3", "3v3-bgcn"):
        if (problem := shipped_predictor_problem(name)) is not None:
            pytest.skip(problem)
    live = tmp_path / "live.onnx"
    shutil.copy(SHIPPED / "3v3.onnx", live)
    shutil.copy(SHIPPED / "3v3.json", live.with_suffix(".json"))  # the exporter's sidecar pins the digest
    hub = Predictors(ModelsConfig(predictors=[{"name": "live", "path": str(live)}], reload_interval_s=0.1))
    first = hub.get("live").version
    assert first.startswith("3v3@")
    # a new export (file + sidecar) is picked up without a restart
    shutil.copy(SHIPPED / "3v3-bgcn.onnx", live)
    shutil.copy(SHIPPED / "3v3-bgcn.json", live.with_suffix(".json"))
    assert hub.check_reload() == ["live"]
    second = hub.get("live").version
    assert second != first and second.startswith("3v3-bgcn@")
    # a file that does not match its pin is refused; the loaded version keeps serving
    live.write_bytes(live.read_bytes() + b"tampered")
    assert hub.check_reload() == []
    assert hub.get("live").version == second
    # a config pin that does not match refuses the first load
    bad = Predictors(ModelsConfig(predictors=[{"name": "x", "path": str(live), "sha256": "0" * 64}]))
    with pytest.raises(PredictorDown) as err:
        bad.get("x")
    assert err.value.reason == "rejected"
    # only .onnx files load as predictors
    other = Predictors(ModelsConfig(predictors=[{"name": "y", "path": str(tmp_path / "m.pkl"), "sha256": "0" * 64}]))
    with pytest.raises(PredictorDown, match="onnx"):
        other.get("y")


def test_engagement_model_file_needs_a_matching_pin(tmp_path):
    model = tmp_path / "m.json"
    shutil.copy(SPEC_EXAMPLES / "engagement-small.json", model)
    with pytest.raises(InvalidInput, match="sha256"):
        EngagementModels(ModelsConfig(engagement=[{"name": "m", "path": str(model)}])).get("m")
    with pytest.raises(InvalidInput, match="does not match"):
        EngagementModels(ModelsConfig(engagement=[{"name": "m", "path": str(model), "sha256": "a" * 64}])).get("m")


def test_arms_are_stable_and_weighted():
    exp = Experiment(ExperimentConfig(name="e", arms=[{"name": "a", "weight": 1}, {"name": "b", "weight": 3}]))
    again = Experiment(ExperimentConfig(name="e", arms=[{"name": "a", "weight": 1}, {"name": "b", "weight": 3}]))
    arms = [exp.arm_for(f"player-{i}").name for i in range(8000)]
    assert arms == [again.arm_for(f"player-{i}").name for i in range(8000)]
    assert abs(arms.count("a") / len(arms) - 0.25) < 0.02
    salted = Experiment(ExperimentConfig(name="e", salt="x", arms=[{"name": "a"}, {"name": "b", "weight": 3}]))
    assert [salted.arm_for(f"player-{i}").name for i in range(200)] != arms[:200]
    assert 0 <= bucket("anything") < 1 and bucket("k") == bucket("k")


def test_arm_overrides_the_pool_plan():
    cfg = load_config(None)
    arm = ExperimentConfig(name="e", arms=[{"name": "fast", "method": "random", "time_budget_ms": 20}]).arms[0]
    plan = plan_for(cfg.pool("3v3"), arm)
    assert (plan.method, plan.time_budget_ms, plan.arm, plan.engagement_model) == ("random", 20, "fast", "3v3")
    assert plan_for(cfg.pool("3v3"), None).arm is None


def test_ab_by_config_end_to_end(tmp_path, live):
    cfg_path = service_config(tmp_path)
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["experiments"] = [
        {"name": "pool-split", "pools": ["small"], "key": "player",
         "arms": [{"name": "control", "weight": 1}, {"name": "rand", "weight": 1, "method": "random"}]},
        {"name": "solve-split", "pools": ["solve"], "key": "header",
         "arms": [{"name": "h1", "weight": 1}, {"name": "h2", "weight": 1, "method": "random"}]},
    ]
    cfg_path.write_text(yaml.safe_dump(cfg))
    rt = Runtime.build(Settings(config=cfg_path))
    rt.start_embedded(tick_s=0.02)
    srv = live(rt)
    exp = rt.experiments.for_pool("small")
    inst = json.loads((SPEC_EXAMPLES / "instance-3v3-small.json").read_text())
    with client(srv.url) as c:
        # /v1/solve: the header picks the arm, the arm picks the method
        for key in ("alpha", "beta", "gamma", "delta"):
            want = rt.experiments.for_pool("solve").arm_for(key)
            sol = c.post("/v1/solve", json=inst, headers={"x-mgmatch-ab-key": key}).json()
            assert sol["arm"] == want.name and sol["method"] == (want.method or "exact")
        # tickets: the arm is fixed per player; matches never mix arms
        ids, arm_of = [], {}
        for i in range(40):
            r = c.post("/v1/tickets", json={"pool": "small", "players": [{"id": f"ab{i}", "features": features(i)}]})
            t = r.json()
            assert t["arm"] == exp.arm_for(f"ab{i}").name
            ids.append(t["id"])
            arm_of[f"ab{i}"] = t["arm"]
        counts = {a: list(arm_of.values()).count(a) for a in ("control", "rand")}
        full = {a: n - n % 6 for a, n in counts.items()}
        poll(lambda: sum(c.get(f"/v1/tickets/{t}").json()["status"] == "matched" for t in ids) == sum(full.values()),
             timeout=60)
        for t in ids:
            view = c.get(f"/v1/tickets/{t}").json()
            if view["status"] == "matched":
                members = [p for team in view["match"]["teams"] for p in team]
                assert {arm_of[p] for p in members} == {view["arm"]} == {view["match"]["arm"]}
                assert view["match"]["method"] == ("random" if view["arm"] == "rand" else "exact")
        text = c.get("/metrics").text
    assert 'arm="rand"' in text and 'arm="control"' in text


_POOL = {"name": "a", "team_size": 3}
_CAPTURE = {"dir": "caps", "salt": "a long secret"}


@pytest.mark.parametrize("where, path, field", [
    ("pool", ["teams"], "pools[0].teams"),
    ("pool", ["team_size"], "pools[0].team_size"),
    ("pool", ["time_budget_ms"], "pools[0].time_budget_ms"),
    ("pool", ["max_candidates"], "pools[0].max_candidates"),
    ("pool", ["ticket_ttl_s"], "pools[0].ticket_ttl_s"),
    ("pool", ["lease_s"], "pools[0].lease_s"),
    ("pool", ["scan_window"], "pools[0].scan_window"),
    ("pool", ["max_inflight_jobs"], "pools[0].max_inflight_jobs"),
    ("pool", ["feature_dim"], "pools[0].feature_dim"),
    ("pool", ["capture", "sample_rate"], "pools[0].capture.sample_rate"),
    ("top", ["capture", "seed"], "capture.seed"),
    ("top", ["capture", "max_files"], "capture.max_files"),
    ("top", ["capture", "max_bytes"], "capture.max_bytes"),
    ("top", ["capture", "queue"], "capture.queue"),
    ("top", ["capture", "solve_requests"], "capture.solve_requests"),
    ("top", ["solve", "time_budget_ms"], "solve.time_budget_ms"),
    ("top", ["models", "reload_interval_s"], "models.reload_interval_s"),
    ("arm", ["weight"], "experiments[0].arms[0].weight"),
    ("arm", ["time_budget_ms"], "experiments[0].arms[0].time_budget_ms"),
])
@pytest.mark.parametrize("bad", ["2", True, "yes"])
def test_config_numbers_and_flags_are_strict(where, path, field, bad):
    """``teams: '2'`` (a string) was read as 2 and ``true`` as 1; every number and flag of the config is
    now strict, as the JSON formats are, and the error names the key."""
    if field.endswith("solve_requests") and bad is True:
        return  # a boolean is what that key takes
    obj = {"pools": [dict(_POOL)]}
    if where == "pool":
        target = obj["pools"][0]
    elif where == "arm":
        obj["experiments"] = [{"name": "e", "arms": [{"name": "x"}]}]
        target = obj["experiments"][0]["arms"][0]
    else:
        target = obj
    if path[0] == "capture":
        target["capture"] = dict(_CAPTURE)
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = bad
    with pytest.raises(InvalidInput) as err:
        parse_config(obj)
    assert err.value.field == f"config.{field}", str(err.value)


def test_config_integral_floats_are_integers():
    cfg = parse_config({"pools": [{**_POOL, "teams": 2.0, "team_size": 3.0, "max_candidates": 24.0,
                                   "time_budget_ms": 100}]})
    pool = cfg.pools[0]
    assert (pool.teams, pool.team_size, pool.max_candidates) == (2, 3, 24) and isinstance(pool.teams, int)
    with pytest.raises(InvalidInput, match="pools\\[0\\].teams"):
        parse_config({"pools": [{**_POOL, "teams": 2.5}]})


def test_config_errors_name_the_field(tmp_path):
    bad = [
        ({"pools": []}, "config.pools"),
        ({"pools": [{"name": "Bad Name", "team_size": 3}]}, "config.pools[0].name"),
        ({"pools": [{"name": "a", "team_size": 3, "max_candidates": 500}]}, "config.pools[0].max_candidates"),
        ({"pools": [{"name": "a", "team_size": 3, "rules": [{"kind": "include", "players": ["x"]}]}]},
         "config.pools[0].rules[0].kind"),
        ({"pools": [{"name": "a", "team_size": 3}], "experiments": [{"name": "e", "pools": ["zz"], "arms": [{"name": "x"}]}]},
         "config.experiments[0].pools[0]"),
        ({"pools": [{"name": "solve", "team_size": 3}]}, "config.pools[0].name"),
    ]
    for obj, field in bad:
        with pytest.raises(InvalidInput) as err:
            parse_config(obj)
        assert err.value.field == field, (obj, str(err.value))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"pools": [{"name": "a", "team_size": 3, "method": "nope"}]}))
    with pytest.raises(InvalidInput, match="pools\\[0\\].method"):
        Runtime.build(Settings(config=path))


def test_a_pool_answered_without_the_network_does_not_report_its_version(tmp_path):
    """The policy enumerates the small example pool: optimal, no predictor call, no fallback, and the
    answer names the engagement model's version, not the network's."""
    calls = []

    class Counting(_Backend):
        def predict(self, problems, timeout_s=None):
            calls.append(1)
            return super().predict(problems, timeout_s)

    eng = _small_engine(tmp_path, _Hub(Counting()))
    sol = eng.solve(_instance(), Plan("mgmatch", "exact", 2000.0, None, None, None), "t")
    assert sol.method == "mgmatch" and sol.status == "optimal" and calls == []
    assert sol.stats["policy_path"] == "enumerate" and sol.stats["predictor_used"] is None
    assert sol.model_version != "fake@1" and sol.model_version == eng.engagement.version("small")
    assert not hasattr(sol, "fallback") or sol.fallback is None


def test_start_up_prepares_each_pools_first_solve_on_a_warm_up_pool_of_its_game(tmp_path, monkeypatch):
    """`serve` and the workers call ``warm()`` before their first solve: a pool whose method can
    prepare (MGMatch, BGCN, surrogate) gets the network's cold calls and SCIP's first model then, on a
    rule-free pool of its game, so its first real solve is measured and not cold; methods that cannot
    (exact) are left alone, and a pool whose warm-up fails is logged, not fatal."""
    import mgmatch.solvers.mgmatch as mg

    history = mg.SolveHistory()  # the test's own: no predictor warmed by earlier tests
    model = SPEC_EXAMPLES / "engagement-small.json"
    cfg = {"pools": [{"name": "net", "teams": 2, "team_size": 3, "engagement_model": "3v3", "method": "mgmatch",
                      "rules": [{"kind": "party_together"}], "time_budget_ms": 100, "max_candidates": 12},
                     {"name": "grad", "teams": 2, "team_size": 3, "engagement_model": "small", "method": "surrogate",
                      "time_budget_ms": 50, "max_candidates": 12},
                     {"name": "proof", "teams": 2, "team_size": 3, "engagement_model": "3v3", "method": "exact",
                      "time_budget_ms": 300, "max_candidates": 12}],
           "models": {"engagement": [{"name": "small", "path": str(model),
                                      "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}]}}
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with mg.using(history):  # the runtime's solvers read and record there
        rt = Runtime.build(Settings(config=path, store="memory"))
        try:
            calls = []
            real = mg.MGMatchSolver.prepare
            monkeypatch.setattr(mg.MGMatchSolver, "prepare", lambda self, problem, **kw: calls.append(1) or real(
                self, problem, **kw))
            rt.warm()
            rt.settle()  # serve warms twice (start_embedded, then settle): the warm-up runs once
            assert rt.prepared == [("net", "mgmatch"), ("grad", "surrogate")] and len(calls) == 2
            assert rt.prepare_solvers() == [("net", "mgmatch"), ("grad", "surrogate")]
            version = rt.predictors.get("3v3").version
            assert version in history.predict_warm  # the first real solve's call is a measurement
            # a process without predictors still prepares its model-free pools
            no_net = Runtime.build(Settings(config=path, store="memory"))
            no_net.predictors = None
            try:
                no_net.warm()
                assert no_net.prepared == [("grad", "surrogate")]
            finally:
                no_net.stop()

            def broken(self, problem, measure=True):
                raise RuntimeError("no SCIP here")

            monkeypatch.setattr(mg.MGMatchSolver, "prepare", broken)
            assert rt.prepare_solvers() == []  # logged; the pools' first solves pay instead
        finally:
            rt.stop()
