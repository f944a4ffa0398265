"""Balance units: a function-preserving widening of an engagement model (spec §3, dense form).

Team balance is the first thing a matchmaker's engagement depends on, and a network fitted on a
skill-based log rarely has it: the old matchmaker balanced every match, so the log never showed what
an unbalanced one costs. A learning pool's optimizer then forms matches the model overrates, and the
pool's results hold the answer, but a network must discover a kinked function of a *difference*
between two teams' sums (``|S_a − S_b|``) from noisy results, which early stopping on a few hundred
of them rarely lets it do.

:func:`add_balance_units` gives the network that function to use. The player network passes each
player's normalized raw features through to its embedding (a ReLU layer passes ``x`` as ``relu(x)``
and ``relu(−x)``; the embedding, a linear layer, adds them back), and the head's first hidden layer gets
two units per feature and pair of teams, ``relu(±(x̂_a − x̂_b))`` summed over each team's players, with
output weight 0. The widened model computes exactly what the model did; training (a refit,
:mod:`mgmatch.pipeline.refit`) then weighs each unit by how the results depend on that imbalance. A
feature whose imbalance does not matter keeps weights near 0.

Pure numpy on the spec JSON, so any role can widen a model. The model's ``training.balance_units``
records the widening, so a model is widened once.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

#: a model is widened only when it gets at most this many new head units (2 · F · pairs of teams):
#: every head unit is a binary of the exact MIP; a free-for-all of many teams is left as it is
MAX_BALANCE_UNITS = 96


def balance_units(training: dict[str, Any] | None) -> int:
    """How many balance units a model has, from its ``training`` record (0: never widened)."""
    return int((training or {}).get("balance_units") or 0)


def add_balance_units(model: dict[str, Any]) -> dict[str, Any] | None:
    """``model`` (spec JSON, dense form) with balance units (see the module doc), computing the same
    function; None when it cannot take them: the set form, a single team, more than
    :data:`MAX_BALANCE_UNITS` units, or already widened."""
    if balance_units(model.get("training")) or model.get("team_layers") is not None:
        return None
    F, D = int(model["feature_dim"]), int(model["teams"])
    pairs = list(combinations(range(D), 2))
    n_units = 2 * F * len(pairs)
    if not pairs or n_units > MAX_BALANCE_UNITS:
        return None
    P = [(np.asarray(x["weight"], float), np.asarray(x["bias"], float)) for x in model["player_layers"]]
    H = [(np.asarray(x["weight"], float), np.asarray(x["bias"], float)) for x in model["head_layers"]]
    if len(H) < 2:  # a head without a hidden layer has no place for a unit
        return None
    eye = np.eye(F)
    player = []
    for li, (W, b) in enumerate(P):
        rows, cols = W.shape
        last = li == len(P) - 1
        if li == 0:  # normalized features in: relu(x̂), relu(−x̂) (or x̂ itself when this is the embedding)
            add = eye if last else np.vstack([eye, -eye])
            W2 = np.vstack([W, add])
        else:  # the pass-through pairs in: copied (a ReLU keeps them), or recombined to x̂ in the embedding
            add = np.hstack([eye, -eye]) if last else np.eye(2 * F)
            W2 = np.zeros((rows + add.shape[0], cols + 2 * F))
            W2[:rows, :cols] = W
            W2[rows:, cols:] = add
        player.append({"weight": W2.tolist(), "bias": np.concatenate([b, np.zeros(add.shape[0])]).tolist()})
    E = P[-1][0].shape[0]
    E2 = E + F
    W0, b0 = H[0]
    h0 = W0.shape[0]
    W0n = np.zeros((h0 + n_units, D * E2))
    for d in range(D):
        W0n[:h0, d * E2:d * E2 + E] = W0[:, d * E:(d + 1) * E]
    row = h0
    for a, c in pairs:
        for k in range(F):
            for sign in (1.0, -1.0):
                W0n[row, a * E2 + E + k] = sign
                W0n[row, c * E2 + E + k] = -sign
                row += 1
    head = [{"weight": W0n.tolist(), "bias": np.concatenate([b0, np.zeros(n_units)]).tolist()}]
    for li in range(1, len(H)):
        W, b = H[li]
        rows, cols = W.shape
        if li == len(H) - 1:  # the output: the new units weigh 0
            head.append({"weight": np.hstack([W, np.zeros((rows, n_units))]).tolist(), "bias": b.tolist()})
        else:  # a later hidden layer: the units pass through (they are never negative)
            W2 = np.zeros((rows + n_units, cols + n_units))
            W2[:rows, :cols] = W
            W2[rows:, cols:] = np.eye(n_units)
            head.append({"weight": W2.tolist(), "bias": np.concatenate([b, np.zeros(n_units)]).tolist()})
    return {**model, "player_layers": player, "head_layers": head,
            "training": {**(model.get("training") or {}), "balance_units": n_units}}
