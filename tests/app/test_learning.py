"""Pools that learn from their results (spec §7, mgmatch.app.learning): config, data, exploration, refits."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mgmatch.app import metrics
from mgmatch.app.ab import plan_for
from mgmatch.app.config import load_config, parse_config
from mgmatch.app.learning import EXPLORE, Learning, PoolLearner, version_of
from mgmatch.app.models_hub import EngagementModels
from mgmatch.app.store import MatchRecord
from mgmatch.core.engagement import parse_engagement
from mgmatch.core.errors import InvalidInput

F = 3


def linear_model(w: list[float], bias: float = 0.0) -> dict:
    """E = bias + Σ_k w_k·(S0_k − S1_k): identity players, a linear head."""
    return {"format": "mgmatch-engagement/v1", "teams": 2, "feature_dim": F,
            "player_layers": [{"weight": np.eye(F).tolist(), "bias": [0.0] * F}],
            "head_layers": [{"weight": [list(w) + [-v for v in w]], "bias": [bias]}]}


def write_model(path: Path, obj: dict) -> str:
    body = json.dumps(obj).encode()
    path.write_bytes(body)
    return hashlib.sha256(body).hexdigest()


def pool_config(tmp_path: Path, model: dict, **learning) -> dict:
    sha = write_model(tmp_path / "eng0.json", model)
    return {"pools": [{"name": "skirmish", "teams": 2, "team_size": 2,
                       "engagement_model": {"path": "eng0.json", "sha256": sha}, "method": "surrogate",
                       "learning": {"min_results": 10, "refit_every": 10, "min_holdout": 5, "epochs": 5,
                                    **learning}}]}


def load(tmp_path: Path, obj: dict):
    (tmp_path / "svc.yaml").write_text(json.dumps(obj))
    return load_config(tmp_path / "svc.yaml")


def learner_for(cfg) -> PoolLearner:
    engagement = EngagementModels(cfg.models)
    pool = cfg.pools[0]
    pool.feature_dim = engagement.get(pool.engagement_model).feature_dim
    return Learning(cfg, engagement).get(pool.name)


def record(k: int, feats: np.ndarray, y: float, pool: str = "skirmish") -> MatchRecord:
    teams = [[{"id": f"m{k}p{j}{i}", "features": feats[j, i].tolist()} for i in range(feats.shape[1])]
             for j in range(2)]
    return MatchRecord(match_id=f"{pool}.m{k}", pool=pool, teams=teams, model_version="v0", policy="exploit",
                       propensity=0.9, result={"engagement": y})


def feed(learner: PoolLearner, n: int, truth: dict, seed: int = 0, start: int = 0, noise: float = 0.0) -> None:
    rng = np.random.default_rng(seed)
    model = parse_engagement(truth)
    for k in range(start, start + n):
        feats = rng.normal(size=(2, 2, F))
        y = float(model.head(model.embed(feats.reshape(-1, F)).reshape(2, 2, -1).sum(1).reshape(-1)))
        learner.on_result(record(k, feats, y + (rng.normal() * noise if noise else 0.0)))
    learner.flush()


# --------------------------------------------------------------------------- config


def test_learning_paths_resolve_against_the_config_folder(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0, 0, 0]), seed_log="hist.jsonl"))
    learning = cfg.pools[0].learning
    assert learning.seed_log == tmp_path / "hist.jsonl"
    assert learning.dir == tmp_path / "learned"
    assert (learning.explore, learning.explore_min, learning.explorers, learning.balance_units) == (0.05, 0.01, 0, True)
    from mgmatch.app.config import LearningConfig

    assert LearningConfig().refit_every == 100
    assert learning.holdout_share == 0.2  # the documented defaults


@pytest.mark.parametrize(("key", "value", "field"), [("explore", 1.5, "explore"), ("refit_every", 0, "refit_every"),
                                                      ("nonsense", 1, "nonsense"), ("explore_min", 0.5, "explore_min"),
                                                      ("balance_units", "yes", "balance_units")])
def test_bad_learning_keys_name_their_field(tmp_path, key, value, field):
    obj = pool_config(tmp_path, linear_model([0, 0, 0]))
    obj["pools"][0]["learning"][key] = value
    with pytest.raises(InvalidInput) as err:
        parse_config(obj)
    assert field in err.value.field


def test_a_learning_pool_needs_a_starting_model():
    with pytest.raises(InvalidInput) as err:
        parse_config({"pools": [{"name": "p", "teams": 2, "team_size": 2, "learning": {}}]})
    assert "learning" in err.value.field


# --------------------------------------------------------------------------- exploration


def test_policy_draws_are_seeded_and_explore_the_configured_share(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0]), explore=0.3, explore_min=0.3))
    lp = learner_for(cfg)
    plan = plan_for(cfg.pools[0], None)
    draws = [lp.decide(plan) for _ in range(2000)]
    share = np.mean([d.policy == EXPLORE for d in draws])
    assert 0.26 < share < 0.34
    assert {d.plan.method for d in draws if d.policy == EXPLORE} == {"explore"}
    assert {d.plan.method for d in draws if d.policy != EXPLORE} == {"surrogate"}
    assert {round(d.propensity, 6) for d in draws} == {0.3, 0.7}
    again = learner_for(load(tmp_path / ".." / tmp_path.name, pool_config(tmp_path, linear_model([1, 0, 0]),
                                                                          explore=0.3, explore_min=0.3)))
    assert [again.decide(plan).policy for _ in range(50)] == [d.policy for d in draws[:50]]


def test_explore_share_decays_with_results_toward_its_floor(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0]), explore=0.2, explore_min=0.05,
                                     explore_half_life=100))
    lp = learner_for(cfg)
    assert lp.explore_share() == pytest.approx(0.2)
    lp.results = 100
    assert lp.explore_share() == pytest.approx(0.125)
    lp.results = 10_000
    assert lp.explore_share() == pytest.approx(0.05, abs=1e-6)


def test_skill_and_other_models_are_not_drawn(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0])))
    lp = learner_for(cfg)
    plan = plan_for(cfg.pools[0], None)
    from dataclasses import replace

    assert lp.decide(replace(plan, method="skill")) is None
    assert lp.decide(replace(plan, engagement_model="other")) is None


# --------------------------------------------------------------------------- data and refits


def test_results_go_to_train_and_holdout_logs_once(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0])))
    lp = learner_for(cfg)
    feed(lp, 200, linear_model([1, 0, 0]))
    feed(lp, 5, linear_model([1, 0, 0]))  # the same match ids again: not appended twice
    train = lp.train_log.read_text().splitlines()
    hold = lp.holdout_log.read_text().splitlines()
    assert len(train) + len(hold) == 200 == lp.results
    assert 20 < len(hold) < 60  # holdout_share 0.2
    line = json.loads(train[0])
    assert line["policy"] == "exploit" and line["propensity"] == 0.9 and line["model_version"] == "v0"


def test_a_partial_last_line_is_cut_at_start_up(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0])))
    lp = learner_for(cfg)
    feed(lp, 30, linear_model([1, 0, 0]))
    n = len(lp.train_log.read_text().splitlines())
    with open(lp.train_log, "a") as f:
        f.write('{"match_id": "skirmish.half", "teams": [[{"id"')  # a writer killed mid-append
    again = learner_for(load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0]))))
    assert len(again.train_log.read_text().splitlines()) == n
    assert again.train_log.read_text().endswith("\n")
    assert again.results == 30


@pytest.mark.slow
def test_a_better_refit_goes_live_versioned_by_sha256_and_survives_a_restart(tmp_path):
    truth = linear_model([1.0, -0.5, 0.25], 0.3)
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0]), epochs=40))
    lp = learner_for(cfg)
    start = lp.live_version
    before = metrics.LEARNING_REFITS.labels("skirmish", "live")._value.get()
    feed(lp, 400, truth)
    assert lp.due()
    assert lp.refit() == "live", lp.refits
    assert metrics.LEARNING_REFITS.labels("skirmish", "live")._value.get() == before + 1
    pointer = json.loads(lp.pointer.read_text())
    body = (lp.dir / pointer["file"]).read_bytes()
    assert pointer["sha256"] == hashlib.sha256(body).hexdigest()
    assert lp.live_version == version_of(pointer["sha256"]) != start
    assert lp.engagement.version("skirmish") == lp.live_version
    assert lp.refits[-1]["candidate_mse"] < lp.refits[-1]["live_mse"]
    # another process (or a restart) serves the same model
    again = learner_for(load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0]))))
    assert again.live_version == lp.live_version
    assert again.changed


@pytest.mark.slow
def test_a_worse_refit_never_goes_live(tmp_path):
    truth = linear_model([1.0, -0.5, 0.25], 0.3)
    cfg = load(tmp_path, pool_config(tmp_path, truth, epochs=2))  # the live model is the truth itself
    lp = learner_for(cfg)
    start = lp.live_version
    before = metrics.LEARNING_REFITS.labels("skirmish", "rejected")._value.get()
    feed(lp, 60, truth)
    assert lp.refit() == "rejected"
    assert metrics.LEARNING_REFITS.labels("skirmish", "rejected")._value.get() == before + 1
    assert lp.live_version == start and not lp.pointer.exists()


@pytest.mark.slow
def test_a_failed_refit_is_counted_and_the_live_model_stays(tmp_path):
    bad_log = tmp_path / "hist.jsonl"
    bad_log.write_text(json.dumps({"format": "mgmatch-matchlog/v1", "teams": [[{"id": "a", "features": [1.0]}],
                                                                              [{"id": "b", "features": [2.0]}]],
                                   "engagement": 1.0}) + "\n")
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0]), seed_log="hist.jsonl"))
    lp = learner_for(cfg)
    start = lp.live_version
    before = metrics.LEARNING_REFITS.labels("skirmish", "failed")._value.get()
    feed(lp, 60, linear_model([1.0, 0, 0]))
    assert lp.refit() == "failed"
    assert metrics.LEARNING_REFITS.labels("skirmish", "failed")._value.get() == before + 1
    assert lp.live_version == start


def test_a_pointer_that_does_not_check_out_is_ignored(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0])))
    lp = learner_for(cfg)
    lp.dir.mkdir(parents=True, exist_ok=True)
    (lp.dir / "x.json").write_text(json.dumps(linear_model([1.0, 0, 0])))
    lp.pointer.write_text(json.dumps({"file": "x.json", "sha256": "0" * 64}))
    start = lp.live_version
    assert lp.poll() is False
    assert lp.live_version == start


@pytest.mark.slow
@pytest.mark.service
def test_a_refit_in_the_child_process_goes_live_as_inline(tmp_path):
    from mgmatch.app.learning import new_refit_executor

    truth = linear_model([1.0, -0.5, 0.25], 0.3)
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0]), epochs=10))
    lp = learner_for(cfg)
    feed(lp, 200, truth)
    executor = new_refit_executor()
    try:
        assert lp.refit(executor) == "live", lp.refits
    finally:
        executor.shutdown()
    assert lp.changed and (lp.dir / f"{json.loads(lp.pointer.read_text())['sha256']}.json").is_file()


def _served(lp: PoolLearner, version: str, ys: np.ndarray, start: int) -> None:
    from dataclasses import replace

    feats = np.zeros((2, 2, F))
    for k, y in enumerate(ys):
        lp.on_result(replace(record(start + k, feats, float(y)), model_version=version))
    lp.flush()


def test_a_live_refit_whose_matches_do_worse_is_rolled_back_to_the_better_earlier_one(tmp_path):
    from mgmatch.app.learning import ROLLBACK_MIN_RESULTS

    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0])))
    lp = learner_for(cfg)
    good = lp.install(linear_model([1.0, 0.0, 0.0]), {})
    bad = lp.install(linear_model([0.0, 1.0, 0.0]), {})
    rng = np.random.default_rng(0)
    n = ROLLBACK_MIN_RESULTS
    _served(lp, good, 2.0 + 0.3 * rng.normal(size=n), 0)
    _served(lp, bad, 1.98 + 0.3 * rng.normal(size=n - 1), n)
    assert lp.guard() is None                      # the live version has too few results to judge
    _served(lp, bad, 1.98 + 0.3 * rng.normal(size=1), 2 * n)
    assert lp.guard() is None                      # 0.02 apart: within two standard errors (about 0.085)
    before = metrics.LEARNING_REFITS.labels("skirmish", "rollback")._value.get()
    _served(lp, bad, 1.0 + 0.3 * rng.normal(size=n), 3 * n)
    assert lp.guard() == good
    assert lp.live_version == good and lp.engagement.version("skirmish") == good
    assert json.loads(lp.pointer.read_text())["version"] == good
    assert metrics.LEARNING_REFITS.labels("skirmish", "rollback")._value.get() == before + 1
    assert lp.refits[-1] == {"results": lp.results, "outcome": "rollback", "from": bad, "version": good}
    assert lp.guard() is None                      # the version rolled back to is not judged against itself
    # a restart counts the same results from the logs (explore results and other versions apart)
    again = learner_for(load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0]))))
    assert again.live_version == good
    assert again.served[bad][0] == 2 * n and again.served[good][0] == n


def test_the_starting_model_is_never_a_rollback_target(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([0.0, 0.0, 0.0])))
    lp = learner_for(cfg)
    start = lp.live_version
    _served(lp, start, np.full(200, 3.0), 0)
    live = lp.install(linear_model([1.0, 0.0, 0.0]), {})
    _served(lp, live, np.full(200, 1.0) + np.linspace(0, 0.1, 200), 200)
    assert lp.guard() is None and lp.live_version == live


@pytest.mark.slow
def test_explore_matches_are_thompson_draws_over_the_live_explorers(tmp_path):
    truth = linear_model([1.0, -0.5, 0.25], 0.3)
    obj = pool_config(tmp_path, linear_model([0.0, 0.0, 0.0]), epochs=20, explore=1.0, explore_min=1.0, explorers=2)
    lp = learner_for(load(tmp_path, obj))
    plan = plan_for(lp.pool, None)
    assert {lp.decide(plan).plan.method for _ in range(20)} == {"explore"}   # no explorers yet: random draws
    feed(lp, 300, truth)
    assert lp.refit() == "live", lp.refits
    shas = json.loads((lp.dir / json.loads(lp.pointer.read_text())["file"]).read_text())["training"]["explorers"]
    assert len(shas) == 2 and all((lp.dir / f"{s}.json").is_file() for s in shas)
    assert lp.explorers == ["skirmish#0", "skirmish#1"]
    draws = [lp.decide(plan) for _ in range(200)]
    assert {d.plan.engagement_model for d in draws} == set(lp.explorers)
    assert {d.plan.method for d in draws} == {"surrogate"} and {d.policy for d in draws} == {EXPLORE}
    assert lp.engagement.get("skirmish#1").feature_dim == F
    # a restart serves the same explorers; an explorer file that does not check out keeps the pointer unused
    again = learner_for(load(tmp_path, obj))
    assert again.explorers == lp.explorers and again.live_version == lp.live_version
    (lp.dir / f"{shas[1]}.json").write_text(json.dumps(linear_model([9.0, 0, 0])))
    third = learner_for(load(tmp_path, obj))
    assert third.live_version == third.start_version and third.explorers == []


def test_zero_explorers_keep_random_explore_draws(tmp_path):
    cfg = load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0]), explorers=0))
    assert cfg.pools[0].learning.explorers == 0
    with pytest.raises(InvalidInput, match="explorers"):
        load(tmp_path, pool_config(tmp_path, linear_model([1, 0, 0]), explorers=-1))
