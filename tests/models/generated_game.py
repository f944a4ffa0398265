"""A generated game that is not a preset, for the network tests: pools of ``teams`` teams of 2."""

from __future__ import annotations

import numpy as np

from mgmatch.core.engagement import parse_engagement
from mgmatch.core.instance import parse_instance
from mgmatch.core.problem import Problem


def game_problems(teams: int, pools: tuple[int, ...], seed: int) -> list[Problem]:
    """Pools of a generated game (not a preset): ``teams`` teams of 2, 3 features, a random engagement net."""
    rng = np.random.default_rng(seed)

    def layer(o, i):
        return {"weight": rng.normal(scale=0.5, size=(o, i)).round(4).tolist(),
                "bias": rng.normal(scale=0.1, size=o).round(4).tolist()}

    model = parse_engagement({"format": "mgmatch-engagement/v1", "teams": teams, "feature_dim": 3,
                              "player_layers": [layer(6, 3), layer(5, 6)], "head_layers": [layer(8, 5 * teams), layer(1, 8)]})
    out = []
    for n in pools:
        players = [{"id": f"p{i}", "features": rng.normal(size=3).round(3).tolist()} for i in range(n)]
        a, b, c = rng.choice(n, 3, replace=False)
        rules = [{"kind": "if", "when": {"all": [[f"p{a}", 0], {"not": [f"p{b}", 1]}]},
                  "then": {"terms": [[f"p{c}", teams - 1, 1.0]], "sense": "<=", "rhs": 0}},
                 {"kind": "avoid", "players": [f"p{b}", f"p{c}"], "scope": "team"}]
        out.append(Problem(parse_instance({"teams": teams, "team_size": 2, "players": players, "rules": rules}), model))
    return out
