"""Scenario presets: generator, shipped models, model resolution, and `mgmatch generate`."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from mgmatch.cli import main
from mgmatch.core.checker import Checker
from mgmatch.core.errors import InvalidInput
from mgmatch.core.instance import parse_instance
from mgmatch.core.presets import (
    PRESETS,
    generate_instances,
    generate_with_witness,
    load_model,
    model_names,
    resolve_model,
    stats,
)
from mgmatch.core.problem import Problem

# paper Table 1: 74.8 / 148.7 constraints, 14% / 11% logical
TARGETS = {"3v3": (74.8, 0.14), "12v12": (148.7, 0.11)}


@pytest.fixture(scope="module")
def batches():
    return {name: generate_with_witness(name, 50, 11) for name in PRESETS}


def test_presets_and_models_are_named_alike():
    assert set(PRESETS) == {"3v3", "12v12", "12v12-deep", "ffa-32", "br-100"}
    assert set(model_names()) == set(PRESETS)


@pytest.mark.parametrize("name", ["3v3", "12v12", "12v12-deep", "ffa-32", "br-100"])
def test_generator_is_deterministic_by_seed(name):
    a = [i.to_json() for i in generate_instances(name, 4, 5)]
    b = [i.to_json() for i in generate_instances(name, 4, 5)]
    c = [i.to_json() for i in generate_instances(name, 4, 6)]
    assert a == b
    assert a != c
    # a longer run starts with the same instances
    assert [i.to_json() for i in generate_instances(name, 6, 5)][:4] == a


@pytest.mark.parametrize("name", ["3v3", "12v12", "12v12-deep"])
def test_instances_parse_back_validate_and_hold_a_feasible_witness(batches, name):
    p = PRESETS[name]
    model = load_model(name)
    for inst, witness in batches[name]:
        obj = json.loads(json.dumps(inst.to_json()))
        again = parse_instance(obj)
        assert again.to_json() == obj
        assert again.engagement_model == name
        assert inst.teams == p.teams and inst.sizes == (p.team_size,) * p.teams
        assert p.pool[0] <= inst.n <= p.pool[1]
        Problem(again, model)  # dims match the shipped model
        assert Checker(again).violations(witness) == []


@pytest.mark.parametrize("name", ["3v3", "12v12"])
def test_constraint_counts_match_the_paper(batches, name):
    s = stats([inst for inst, _ in batches[name]])
    cons, share = TARGETS[name]
    assert abs(s["constraints"] - cons) / cons < 0.08, s
    assert abs(s["logical_share"] - share) < 0.025, s


@pytest.mark.parametrize("name", ["3v3", "12v12"])
def test_rules_look_like_a_game(batches, name):
    kinds: dict[str, int] = {}
    for inst, witness in batches[name]:
        for r in inst.rules:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        regions = {reg for p in inst.players for reg in p.pings}
        assert 2 <= len(regions) <= 4
        parties: dict[str, list[int]] = {}
        for i, p in enumerate(inst.players):
            if p.party is not None:
                parties.setdefault(p.party, []).append(i)
        assert all(len(m) >= 2 for m in parties.values())
        # a party is whole on one team or whole on the bench in the witness
        for m in parties.values():
            assert len(set(witness[m].tolist())) == 1
    for kind in ("roles", "skill_balance", "party_together", "max_ping", "include", "avoid", "if"):
        assert kinds.get(kind, 0) > 0, (kind, kinds)
    assert kinds["roles"] == kinds["max_ping"] == kinds["skill_balance"] == 50


def test_random_team_formations_rarely_satisfy_every_rule(batches):
    """Like the paper (7.8% for 3v3), most assignments that fill the teams break some rule."""
    rng = np.random.default_rng(0)
    shares = []
    for inst, _ in batches["3v3"][:20]:
        T = np.full((2000, inst.n), -1)
        for b in range(2000):
            pick = rng.choice(inst.n, 6, replace=False)
            T[b, pick[:3]], T[b, pick[3:]] = 0, 1
        shares.append(Checker(inst).feasible(T).mean())
    assert 0.0 < np.mean(shares) < 0.2


@pytest.mark.parametrize("name", ["3v3", "12v12"])
def test_shipped_model_dims_and_training_record(name):
    m = load_model(name)
    p = PRESETS[name]
    assert (m.teams, m.feature_dim) == (p.teams, p.feature_dim)
    assert 8 <= m.embed_dim <= 16
    assert len(m.head_layers) == 2 and len(m.head_layers[0].bias) <= 24
    t = m.training
    assert t is not None and t["command"].startswith(f"mgmatch fit-engagement --preset {name} ")
    assert t["matches"] >= 50_000 and t["epochs"] >= 1
    assert t["holdout"]["mse"] < 0.3 * t["holdout"]["target_var"]


@pytest.mark.parametrize("name", ["3v3", "12v12"])
def test_shipped_model_scores_engagement_on_the_papers_scale(batches, name):
    lo, hi = {"3v3": (4.0, 6.5), "12v12": (13.0, 22.0)}[name]
    m = load_model(name)
    vals = [Problem(inst, m).objective(w) for inst, w in batches[name][:10]]
    assert lo < np.mean(vals) < hi


def test_load_model_unknown_name_names_the_field():
    with pytest.raises(InvalidInput) as err:
        load_model("5v5")
    assert err.value.field == "engagement_model"


def test_resolve_model_override_named_default_and_mismatch():
    inst = generate_instances("3v3", 1, 0)[0]
    m12 = load_model("12v12")
    assert resolve_model(inst, m12)[1] is m12
    assert resolve_model(inst) == ("3v3", load_model("3v3"))
    unnamed = dataclasses.replace(inst, engagement_model=None)
    assert resolve_model(unnamed)[0] == "3v3"
    inst12 = dataclasses.replace(generate_instances("12v12", 1, 0)[0], engagement_model=None)
    assert resolve_model(inst12)[0] == "12v12"
    obj = unnamed.to_json()
    for p in obj["players"]:
        p["features"] = p["features"][:5]
    with pytest.raises(InvalidInput) as err:
        resolve_model(parse_instance(obj))
    assert err.value.field == "engagement_model" and "feature_dim=5" in str(err.value)
    with pytest.raises(InvalidInput):
        resolve_model(dataclasses.replace(inst, engagement_model="nope"))


def _run(argv, capsys):
    with pytest.raises(SystemExit) as ex:
        main(argv)
    out = capsys.readouterr()
    return ex.value.code, out.out, out.err


def test_generate_writes_instances_and_the_model(tmp_path, capsys):
    code, out, err = _run(["generate", "--preset", "3v3", "--count", "3", "--seed", "4", "--out", str(tmp_path), "--stats"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engagement.json", "instance-00000.json",
                                                          "instance-00001.json", "instance-00002.json"]
    assert json.loads(out)["instances"] == 3
    expected = generate_instances("3v3", 3, 4)
    for k in range(3):
        got = json.loads((tmp_path / f"instance-{k:05d}.json").read_text())
        assert got == expected[k].to_json()
    assert json.loads((tmp_path / "engagement.json").read_text()) == load_model("3v3").to_json()


@pytest.mark.parametrize("argv", [
    ["generate", "--preset", "5v5", "--count", "2", "--out", "OUT"],
    ["generate", "--preset", "3v3", "--count", "0", "--out", "OUT"],
    ["generate", "--preset", "3v3", "--count", "two", "--out", "OUT"],
])
def test_generate_bad_input_exits_2_with_one_line(tmp_path, capsys, argv):
    argv = [str(tmp_path / "o") if a == "OUT" else a for a in argv]
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_ground_truth_of_generated_instances():
    from mgmatch.core.presets import generate_with_truth
    from mgmatch.core.world import engagement

    g = generate_with_truth("3v3", 1, 2)[0]
    w = g.witness
    teams = np.array([[np.flatnonzero(w == 0), np.flatnonzero(w == 1)]])
    assert g.true_engagement(w) == pytest.approx(float(engagement(g.preset.world, g.population, teams)[0]))
    swapped = np.where(w == 0, 1, np.where(w == 1, 0, -1))
    batch = g.true_engagement(np.stack([w, swapped]))
    assert batch.shape == (2,) and 4.0 < batch.min() <= batch.max() < 6.0
    with pytest.raises(InvalidInput):
        g.true_engagement(np.full(g.instance.n, -1))
