"""The worlds of ``mgmatch bench lift``: a player population, a hidden truth model and a pool's rules.

A world stands in for a studio's game: :meth:`World.players` draws its players (features, skill,
roles) and :meth:`World.truth` is the players' true engagement as a spec §3 model (what ``replay
--truth`` scores matches with). The matchmaker never sees the truth; it starts from a model fitted
on a log its old skill-based matchmaker made (:func:`mgmatch.lab.lift.skill_log`).

- ``5v5``: the worked example ``examples/5v5`` (its hidden world, read from the repository's
  ``examples/5v5/simulate.py``): roles, skill balance, close games, teamwork, moderate aggression.
- ``mentor``: a 3v3 game of 8 features where skill-based logs mislead. Veterans (high skill, long
  hours) and newcomers (low skill, few hours) lift a team when they play *together* (a mentoring
  term min(veterans, newcomers) per team); a skill-based matchmaker puts near-equal skills together,
  so its log almost never holds such a team, and a model fitted on it cannot know the effect.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.core.errors import InvalidInput

REPO = Path(__file__).resolve().parent.parent


@dataclass
class World:
    """A game for ``bench lift`` (see the module doc)."""

    name: str
    teams: int
    team_size: int
    rules: list[dict[str, Any]]
    truth: Callable[[], dict[str, Any]]
    population: Callable[[np.random.Generator, int], list[dict[str, Any]]]
    noise: float                       # sd of a result around the truth
    pool: dict[str, Any] = field(default_factory=dict)  # extra pool keys (budget, candidates, dispatch)

    @property
    def match_size(self) -> int:
        return self.teams * self.team_size


# --------------------------------------------------------------------------- 5v5 (examples/5v5)


def _example_5v5() -> Any:
    path = REPO / "examples" / "5v5" / "simulate.py"
    if not path.is_file():
        raise InvalidInput("world", f"world 5v5 reads {path}, which is not there (run from a clone of the repository)")
    spec = importlib.util.spec_from_file_location("mgmatch_example_5v5", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _players_5v5(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    sim = _example_5v5()
    pop = sim.population(n, rng)
    return [{k: v for k, v in sim.player_json("x", pop["features"][i], pop["roles"][i]).items() if k != "id"}
            for i in range(n)]


def _truth_5v5() -> dict[str, Any]:
    return _example_5v5().truth_model()


# --------------------------------------------------------------------------- mentor (3v3, 8 features)

MENTOR_F = 8  # skill_z, hours_z, veteran, newcomer, teamwork, tilt, voice, aggression


def _players_mentor(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    skill = rng.normal(size=n)
    hours = 0.8 * skill + 0.6 * rng.normal(size=n)
    veteran = (hours > 0.9).astype(float)
    newcomer = (hours < -0.9).astype(float)
    teamwork = np.clip(rng.beta(2.5, 2.5, size=n), 0, 1)
    tilt = rng.beta(1.5, 4.0, size=n)
    voice = (rng.random(n) < 0.5).astype(float)
    aggression = rng.beta(2.0, 2.0, size=n)
    feats = np.round(np.stack([skill, hours, veteran, newcomer, teamwork, tilt, voice, aggression], axis=1), 4)
    return [{"features": [float(v) for v in feats[i]], "skill": round(1500.0 + 300.0 * float(skill[i]), 1)}
            for i in range(n)]


def _truth_mentor() -> dict[str, Any]:
    """E = 1 − 0.35·|ΔS_skill| + 0.6·Σ_j min(S_vet_j, S_new_j) + 0.15·min(S_tw) − 0.3·max(0, S_tilt − 1.5)
    + 0.05·min(S_voice) − 0.2·|S_agg − 3|, written exactly as a one-hidden-layer ReLU network of the
    team sums (|x| = relu(x) + relu(−x); min(a, b) = a − relu(a − b) with a = relu(a) for a ≥ 0)."""
    F = MENTOR_F

    def unit(c0: dict[int, float], c1: dict[int, float], bias: float = 0.0) -> tuple[list[float], float]:
        w = [0.0] * (2 * F)
        for k, v in c0.items():
            w[k] = v
        for k, v in c1.items():
            w[F + k] = v
        return w, bias

    units = [
        (unit({0: 1}, {0: -1}), -0.35), (unit({0: -1}, {0: 1}), -0.35),
        # mentoring, per team: min(vet, new) = vet − relu(vet − new)
        (unit({2: 1}, {}), 0.6), (unit({2: 1, 3: -1}, {}), -0.6),
        (unit({}, {2: 1}), 0.6), (unit({}, {2: 1, 3: -1}), -0.6),
        (unit({4: 1}, {}), 0.15), (unit({4: 1}, {4: -1}), -0.15),
        (unit({5: 1}, {5: 1}, -1.5), -0.3),
        (unit({6: 1}, {}), 0.05), (unit({6: 1}, {6: -1}), -0.05),
        (unit({7: 1}, {7: 1}, -3.0), -0.2), (unit({7: -1}, {7: -1}, 3.0), -0.2),
    ]
    eye = np.eye(F).tolist()
    return {"format": "mgmatch-engagement/v1", "teams": 2, "feature_dim": F, "name": "mentor-truth",
            "player_layers": [{"weight": eye, "bias": [0.0] * F}],
            "head_layers": [{"weight": [u[0][0] for u in units], "bias": [u[0][1] for u in units]},
                            {"weight": [[u[1] for u in units]], "bias": [1.0]}],
            "training": {"source": "mgmatch.lab.lift_worlds: the mentor world's exact objective"}}


WORLDS: dict[str, World] = {
    "5v5": World("5v5", 2, 5,
                 [{"kind": "roles", "slots": {"tank": 1, "healer": 1, "dps": 3}},
                  {"kind": "skill_balance", "max_diff": 60}],
                 _truth_5v5, _players_5v5, noise=0.15),
    "mentor": World("mentor", 2, 3, [{"kind": "skill_balance", "max_diff": 150}],
                    _truth_mentor, _players_mentor, noise=0.15),
}


def get_world(name: str) -> World:
    if name not in WORLDS:
        raise InvalidInput("world", f"unknown world {name!r}; expected one of {', '.join(WORLDS)}")
    return WORLDS[name]
