"""Start-up validation of the service config: what a job would fail on stops the process first.

A bad config makes ``mgmatch serve`` (and the workers) exit 2 with one line naming the config field;
it never starts and then fails every job of a pool (tickets queued forever). Covered here: an A/B
arm's ``engagement_model`` (unknown, another number of teams, other features), a pool's rules
checked against its teams' sizes with the instance reader's own checks (``roles`` slot counts, also
after a dispatch relaxation), and index-based field paths.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mgmatch.app.ab import plan_for
from mgmatch.app.config import load_config, parse_config
from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import MAIN, ServeProcess, free_port  # noqa: E402

P2 = {"name": "p2", "teams": 2, "team_size": 2, "engagement_model": "3v3", "method": "exact"}


def _model(path: Path, teams: int, dim: int = 4, scale: float = 0.1) -> dict:
    """A small engagement model file scoring ``teams`` teams; its ``models.engagement`` entry."""
    obj = {"format": "mgmatch-engagement/v1", "teams": teams, "feature_dim": dim,
           "player_layers": [{"weight": [[scale * (r == c) for c in range(dim)] for r in range(dim)],
                              "bias": [0.0] * dim}],
           "head_layers": [{"weight": [[scale * ((k % 3) - 1) for k in range(dim * teams)]], "bias": [0.0]}]}
    path.write_text(json.dumps(obj))
    return {"name": path.stem, "path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _write(tmp_path: Path, cfg: dict) -> Path:
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _build(tmp_path: Path, cfg: dict) -> Runtime:
    return Runtime.build(Settings(config=_write(tmp_path, cfg), store="memory"))


def _bad_arm_configs(tmp_path: Path) -> dict[str, tuple[dict, str, str]]:
    """name → (config, field, message part) of configs whose A/B arm cannot score the pool."""
    tri = _model(tmp_path / "tri.json", 3)
    p3 = {"name": "p3", "teams": 3, "team_size": 2, "engagement_model": "tri", "method": "exact"}
    return {
        "unknown": ({"pools": [P2], "experiments": [
            {"name": "e1", "pools": ["p2"], "key": "player", "arms": [{"name": "a", "weight": 1,
                                                                      "engagement_model": "nope"}]}]},
                    "experiments[0].arms[0].engagement_model", "unknown engagement model 'nope'"),
        "teams": ({"pools": [p3], "models": {"engagement": [tri]}, "experiments": [
            {"name": "e1", "pools": ["p3"], "arms": [{"name": "a"}, {"name": "b", "engagement_model": "3v3"}]}]},
                  "experiments[0].arms[1].engagement_model", "model '3v3' scores 2 teams, pool 'p3' has 3"),
        "features": ({"pools": [P2], "experiments": [
            {"name": "e1", "pools": ["p2"], "arms": [{"name": "a", "engagement_model": "12v12"}]}]},
                     "experiments[0].arms[0].engagement_model", "takes 66 features, the tickets of pool 'p2' carry 196"),
        # a global experiment (no pools) covers every pool: its arm is checked against each
        "global": ({"pools": [P2, p3], "models": {"engagement": [tri]}, "experiments": [
            {"name": "e1", "arms": [{"name": "a", "engagement_model": "tri"}]}]},
                   "experiments[0].arms[0].engagement_model", "model 'tri' scores 3 teams, pool 'p2' has 2"),
    }


@pytest.mark.parametrize("case", ["unknown", "teams", "features", "global"])
def test_an_arm_engagement_model_is_checked_at_start_up(tmp_path, case):
    """An arm's model used to get only a start-up WARNING; every job of the arm then failed and its
    tickets stayed queued. Now the runtime refuses to build, naming the arm by index like the pools."""
    cfg, field, needle = _bad_arm_configs(tmp_path)[case]
    with pytest.raises(InvalidInput) as err:
        _build(tmp_path, cfg)
    assert err.value.field == field, str(err.value)
    assert needle in err.value.message


def test_an_arm_of_an_experiment_that_covers_no_pool_of_it_is_not_checked_against_it(tmp_path):
    """A pool takes the first experiment that names it: a later global experiment's arm never runs
    there, so its model is not held to that pool's teams (it must still exist)."""
    tri = _model(tmp_path / "tri.json", 3)
    p3 = {"name": "p3", "teams": 3, "team_size": 2, "engagement_model": "tri", "method": "exact"}
    cfg = {"pools": [P2, p3], "models": {"engagement": [tri]}, "experiments": [
        {"name": "first", "pools": ["p2"], "arms": [{"name": "a"}]},
        {"name": "rest", "arms": [{"name": "a", "engagement_model": "tri"}]}]}
    _build(tmp_path, cfg).stop()
    cfg["experiments"][1]["arms"][0]["engagement_model"] = "nope"
    with pytest.raises(InvalidInput) as err:
        _build(tmp_path, cfg)
    assert err.value.field == "experiments[1].arms[0].engagement_model"


def test_arm_method_and_default_model_errors_name_the_field_by_index(tmp_path):
    cfg = {"pools": [P2], "experiments": [{"name": "e1", "arms": [{"name": "a"}, {"name": "b", "method": "nope"}]}]}
    with pytest.raises(InvalidInput) as err:
        _build(tmp_path, cfg)
    assert err.value.field == "experiments[0].arms[1].method"
    with pytest.raises(InvalidInput) as err:
        _build(tmp_path, {"pools": [P2], "default_engagement_model": "nope"})
    assert err.value.field == "default_engagement_model" and "unknown engagement model 'nope'" in str(err.value)


@pytest.mark.parametrize("pool, field, needle", [
    ({"team_size": 2, "rules": [{"kind": "roles", "slots": {"a": 2, "b": 1}}]},
     "pools[0].rules[0].slots", "slot counts sum to 3 but team 0 has 2 players"),
    ({"teams": 3, "team_sizes": [1, 2, 2], "rules": [{"kind": "party_together"}, {"kind": "roles", "slots": {"a": 2}}]},
     "pools[0].rules[1].slots", "slot counts sum to 2 but team 0 has 1 players"),
    ({"teams": 3, "team_sizes": [2, 2, 1], "rules": [{"kind": "roles", "slots": {"a": 1, "b": 1}}]},
     "pools[0].rules[0].slots", "team 2 has 1 players"),
    ({"team_size": 3, "rules": [{"kind": "roles", "slots": {"a": 1, "b": 2}}],
      "dispatch": {"policy": "immediate", "params": {"relax": [
          {"after_s": 10, "rule": "skill_balance", "set": {"max_diff": 1}},
          {"after_s": 30, "rule": "roles", "set": {"slots": {"a": 1, "b": 1}}}]}}},
     "pools[0].dispatch.params.relax.steps[1]", "after 30 s, rules[0].slots: slot counts sum to 2"),
    ({"team_size": 3, "rules": [{"kind": "include", "players": ["x"]}]}, "pools[0].rules[0].kind", "names players"),
    ({"team_size": 3, "rules": [{"kind": "skill_balance", "max_diff": -1}]}, "pools[0].rules[0].max_diff", "≥ 0"),
])
def test_pool_rules_are_checked_against_the_team_sizes(tmp_path, pool, field, needle):
    """``roles`` slot counts must sum to every team's size (the spec; ``mgmatch solve`` refuses such an
    instance): a pool's rules go through the instance reader's checks on the pool's teams at load, so
    the pool never starts and then fails each job with ``rules[0].slots``."""
    obj = {"pools": [{"name": "ok", "team_size": 2}, {"name": "bad", **pool}]}
    with pytest.raises(InvalidInput) as err:
        parse_config(obj)
    assert err.value.field == f"config.{field.replace('pools[0]', 'pools[1]')}", str(err.value)
    assert needle in err.value.message
    path = _write(tmp_path, {"pools": [{"name": "bad", **pool}]})
    with pytest.raises(InvalidInput) as err:
        load_config(path)
    assert err.value.field.endswith(field) and needle in str(err.value)


def test_config_structure_errors_name_the_entry(tmp_path):
    cases = [
        ({"pools": [{"name": "a", "team_size": 3}, {"name": "a", "team_size": 2}]}, "config.pools[1].name"),
        ({"pools": [{"name": "a", "team_size": 3}], "experiments": [{"name": "e", "arms": [{"name": "x"}, {"name": "x"}]}]},
         "config.experiments[0].arms[1].name"),
        ({"pools": [{"name": "a", "teams": 3, "team_sizes": [3, 3]}]}, "config.pools[0].team_sizes"),
        ({"pools": [{"name": "a", "team_size": 3, "dispatch": {"params": {"max_candidates": 6}}}]},
         "config.pools[0].dispatch.params.max_candidates"),
        ({"pools": [{"name": "a", "team_size": 3, "dispatch": {"params": {"relax": [{"after_s": 1}]}}}]},
         "config.pools[0].dispatch.params.relax.steps[0].rule"),
    ]
    for obj, field in cases:
        with pytest.raises(InvalidInput) as err:
            parse_config(obj)
        assert err.value.field.startswith(field), (obj, str(err.value))


def _good_config(tmp_path: Path) -> dict:
    """Unusual but valid: 3 teams, uneven team sizes, a roles rule with a valid relaxation, arms with
    alternative engagement models of the same game (teams and features)."""
    tri, tri2 = _model(tmp_path / "tri.json", 3), _model(tmp_path / "tri2.json", 3, scale=0.2)
    return {
        "pools": [
            {"name": "trio", "teams": 3, "team_sizes": [1, 2, 3], "engagement_model": "tri", "method": "exact",
             "rules": [{"kind": "party_together"}, {"kind": "role_min", "role": "tank", "min": 0}],
             "max_candidates": 12, "time_budget_ms": 2000},
            {"name": "roles", "teams": 2, "team_size": 3, "engagement_model": "3v3", "method": "exact",
             "rules": [{"kind": "roles", "slots": {"tank": 1, "healer": 1, "dps": 1}}], "max_candidates": 12,
             "dispatch": {"policy": "immediate", "params": {"relax": [
                 {"after_s": 30, "rule": "roles", "set": {"slots": {"tank": 1, "dps": 2}}}]}}},
            {"name": "big", "teams": 2, "team_size": 12, "engagement_model": "12v12", "method": "exact",
             "max_candidates": 48},
        ],
        "models": {"engagement": [tri, tri2]},
        "experiments": [
            {"name": "trio-models", "pools": ["trio"], "key": "player",
             "arms": [{"name": "base", "weight": 1}, {"name": "alt", "weight": 1, "engagement_model": "tri2"}]},
            {"name": "deep", "pools": ["big"], "key": "match",
             "arms": [{"name": "base"}, {"name": "deep", "engagement_model": "12v12-deep"}]},
        ],
    }


def test_an_unusual_good_config_builds_and_its_arm_solves(tmp_path):
    rt = _build(tmp_path, _good_config(tmp_path))
    try:
        trio = rt.pools["trio"]
        assert trio.sizes == (1, 2, 3) and trio.feature_dim == 4 and rt.pools["big"].feature_dim == 66
        arm = rt.experiments.for_pool("trio").config.arms[1]
        inst = parse_instance({"teams": 3, "team_sizes": [1, 2, 3], "engagement_model": "tri",
                               "players": [{"id": f"p{i}", "features": [0.1 * i, 0.0, 1.0, -0.5]} for i in range(8)]})
        sol = rt.engine.solve(inst, plan_for(trio, arm), "trio")
        assert sol.has_assignment and sol.engagement_model == "tri2"
        assert [len(t) for t in sol.teams] == [1, 2, 3]
    finally:
        rt.stop()


def _serve(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([*MAIN, *args], capture_output=True, text=True, timeout=timeout,
                          env={**__import__("os").environ, "MGMATCH_STORE": "memory"})


@pytest.mark.service
def test_serve_and_workers_exit_2_on_a_bad_config(tmp_path):
    """The audit's repro configs: ``serve`` (and a worker, before it waits for Redis) exits 2 with one
    line naming the field instead of starting and failing every job."""
    bad = dict(_bad_arm_configs(tmp_path))
    bad["roles"] = ({"pools": [{**P2, "rules": [{"kind": "roles", "slots": {"a": 2, "b": 1}}]}]},
                    "pools[0].rules[0].slots", "slot counts sum to 3 but team 0 has 2 players")
    runs = [(["serve", "--port", str(free_port())], case) for case in ("unknown", "teams", "roles")]
    runs.append((["worker", "solver", "--redis-url", "redis://127.0.0.1:1/0"], "unknown"))
    for args, case in runs:
        cfg, field, needle = bad[case]
        path = tmp_path / f"{case}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        out = _serve([*args, "--config", str(path)], timeout=90)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2, (args, case, out.stderr[-2000:])
        assert len(lines) == 1 and field in lines[0] and needle in lines[0] and "Traceback" not in out.stderr, \
            (args, case, out.stderr)


@pytest.mark.service
def test_serve_starts_with_the_unusual_good_config(tmp_path):
    path = _write(tmp_path, _good_config(tmp_path))
    with ServeProcess("--config", path) as srv:
        pass
    assert "engagement_model" not in srv.stderr and "ERROR" not in srv.stderr, srv.stderr[-2000:]
