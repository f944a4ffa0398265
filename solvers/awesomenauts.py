"""The Awesomenauts match score (Ronimo's matchmaking blog): a weighted average of factors in [0, 1].

Factors (each in [0, 1], higher is better; a factor without the data it needs is left out and the
weights of the others are renormalized):

- ``team_skill``: equal teams — 1 − (max − min of team mean skills) / team_scale, clipped.
- ``player_skill``: equal players — mean over all pairs of 1 − |s_a − s_b| / player_scale, clipped.
- ``premades``: both teams have the same premade structure → 1.0, small difference (partitions
  at L1/2 distance 1, e.g. 3 vs 2+1) → 0.6, big (3 vs 1+1+1) → 0.
- ``ping``: ping with enemies, perceived (log scale): 1 at ≤ ``ping_good`` ms, 0 at ≥ ``ping_bad``
  ms, averaged over enemy pairs. Player-to-player ping is the optional player field
  ``peer_pings`` {id: ms}, else estimated from region pings as min over regions of p_a + p_b.
- ``variation``: opponent variation vs the previous match (optional player field ``previous``:
  ``{"teammates": [ids], "opponents": [ids]}``): a pair meeting in the same relation again costs 1,
  in the swapped relation 0.5; score = 1 − mean penalty over pairs.
- ``hosts``: two possible hosts (peer-to-peer): players whose ping to every other player of the
  match is ≤ ``host_ms``; ≥ 2 → 1.0, 1 → 0.5, 0 → 0.

Skills are capped to a workable range (default the pool's 5th–95th percentile) before scoring.
Everything is vectorized over a batch of match configurations: ``idx [C, m]`` player indices and
``lab [C, m]`` team labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mgmatch.core.instance import Player

FACTORS = ("team_skill", "player_skill", "premades", "ping", "variation", "hosts")
DEFAULT_WEIGHTS = {"team_skill": 3.0, "player_skill": 2.0, "premades": 1.0, "ping": 3.0,
                   "variation": 0.5, "hosts": 1.0}


def player_extra(p: Player) -> dict:
    """Optional fields beyond the spec's (kept when the Player model keeps extras)."""
    return dict(getattr(p, "model_extra", None) or {})


def peer_pings(players: Sequence[Player]) -> np.ndarray | None:
    """Player-to-player ping [N, N] (ms), or None when some player has no ping data."""
    n = len(players)
    index = {p.id: i for i, p in enumerate(players)}
    out = np.full((n, n), np.nan)
    regions = sorted({r for p in players for r in (p.pings or {})})
    if regions and all(p.pings for p in players):
        P = np.asarray([[(p.pings or {}).get(r, np.inf) for r in regions] for p in players])
        out = (P[:, None, :] + P[None, :, :]).min(2)
    for i, p in enumerate(players):
        for other, ms in (player_extra(p).get("peer_pings") or {}).items():
            if other in index:
                out[i, index[other]] = out[index[other], i] = float(ms)
    np.fill_diagonal(out, 0.0)
    if not np.isfinite(out).all():
        return None
    return out


class MatchScorer:
    """Scores match configurations of a pool of players with the blog's factors."""

    def __init__(self, players: Sequence[Player], weights: dict[str, float] | None = None,
                 skill_cap: tuple[float, float] | None = None, team_scale: float | None = None,
                 player_scale: float | None = None, ping_good: float = 60.0, ping_bad: float = 300.0,
                 host_ms: float = 150.0):
        self.players = list(players)
        n = len(self.players)
        w = dict(DEFAULT_WEIGHTS)
        w.update(weights or {})
        unknown = set(w) - set(FACTORS)
        if unknown:
            raise ValueError(f"unknown factor(s) {sorted(unknown)}; expected {FACTORS}")
        raw = np.asarray([p.skill if p.skill is not None else np.nan for p in self.players], dtype=float)
        self.skill = None
        if np.isfinite(raw).all():
            lo, hi = skill_cap if skill_cap is not None else (np.percentile(raw, 5), np.percentile(raw, 95))
            self.cap = (float(lo), float(hi))
            self.skill = np.clip(raw, lo, hi)
            rng = max(hi - lo, 1e-9)
            self.team_scale = team_scale if team_scale is not None else 0.25 * rng
            self.player_scale = player_scale if player_scale is not None else 0.5 * rng
        party_names = {p.party for p in self.players if p.party is not None}
        code = {name: k for k, name in enumerate(sorted(party_names))}
        self.party = np.asarray([code[p.party] if p.party is not None else -1 for p in self.players])
        self.ping = peer_pings(self.players)
        self.ping_good, self.ping_bad, self.host_ms = ping_good, ping_bad, host_ms
        if self.ping is not None:
            self.ping_q = self.ping_score(self.ping)  # perceived quality per pair, precomputed
            self.host_ok = self.ping <= host_ms
        index = {p.id: i for i, p in enumerate(self.players)}
        rel = np.zeros((n, n), dtype=np.int8)  # 1 teammates last match, 2 opponents
        for i, p in enumerate(self.players):
            prev = player_extra(p).get("previous") or {}
            for code_, key in ((1, "teammates"), (2, "opponents")):
                for other in prev.get(key, []) or []:
                    if other in index:
                        rel[i, index[other]] = rel[index[other], i] = code_
        self.rel = rel
        avail = {"team_skill": self.skill is not None, "player_skill": self.skill is not None,
                 "premades": bool(party_names), "ping": self.ping is not None,
                 "variation": bool(rel.any()), "hosts": self.ping is not None}
        self.weights = {k: float(w[k]) for k in FACTORS if avail[k] and w[k] > 0}

    # ------------------------------------------------------------------ factors

    def ping_score(self, ms: np.ndarray) -> np.ndarray:
        """Perceived ping quality: 1 at ≤ ping_good, 0 at ≥ ping_bad, linear in log(ms) between."""
        x = np.log(np.maximum(ms, 1e-9) / self.ping_good) / math.log(self.ping_bad / self.ping_good)
        return np.clip(1.0 - x, 0.0, 1.0)

    def factors(self, idx: np.ndarray, lab: np.ndarray, teams: int) -> dict[str, np.ndarray]:
        """Each available factor for a batch of configurations.

        Shapes: idx, lab [C, m] → {factor: [C]}.
        """
        idx, lab = np.asarray(idx), np.asarray(lab)
        C, m = idx.shape
        iu, ju = np.triu_indices(m, 1)
        out: dict[str, np.ndarray] = {}
        onehot = lab[:, None, :] == np.arange(teams)[None, :, None]  # [C, D, m]
        counts = onehot.sum(2)
        same = lab[:, :, None] == lab[:, None, :]
        if self.skill is not None:
            S = self.skill[idx]
            means = (onehot * S[:, None, :]).sum(2) / np.maximum(counts, 1)
            out["team_skill"] = np.clip(1 - (means.max(1) - means.min(1)) / self.team_scale, 0, 1)
            d = np.abs(S[:, iu] - S[:, ju])
            out["player_skill"] = np.clip(1 - d / self.player_scale, 0, 1).mean(1)
        if "premades" in self.weights:
            out["premades"] = self._premades(idx, lab, onehot, same, teams)
        if self.ping is not None:
            ii, jj = idx[:, :, None], idx[:, None, :]
            enemy = ~same
            out["ping"] = (self.ping_q[ii, jj] * enemy).sum((1, 2)) / np.maximum(enemy.sum((1, 2)), 1)
            hosts = self.host_ok[ii, jj].all(2).sum(1)
            out["hosts"] = np.minimum(hosts, 2) / 2.0
        if "variation" in self.weights:
            R = self.rel[idx[:, iu], idx[:, ju]]
            s = same[:, iu, ju]
            pen = np.where(R == 0, 0.0, np.where((R == 1) == s, 1.0, 0.5))
            out["variation"] = 1.0 - pen.mean(1)
        return out

    def _premades(self, idx, lab, onehot, same, teams) -> np.ndarray:
        pa = self.party[idx]
        together = (pa[:, :, None] == pa[:, None, :]) & (pa[:, :, None] >= 0) & same
        group = np.maximum(together.sum(2), 1)  # size of each member's premade within its team
        C, m = idx.shape
        K = int(onehot.sum(2).max())
        parts = np.zeros((C, teams, K), dtype=np.int64)
        for j in range(teams):
            # n_g = (members in groups of size g) / g
            pos = np.zeros(C, dtype=np.int64)
            for g in range(K, 0, -1):
                n_g = ((group == g) & onehot[:, j, :]).sum(1) // g
                for r in range(K // g):
                    put = n_g > r
                    rows = np.flatnonzero(put)
                    parts[rows, j, pos[rows]] = g
                    pos += put
        score = np.zeros(C)
        npairs = 0
        for a in range(teams):
            for b in range(a + 1, teams):
                d = np.abs(parts[:, a] - parts[:, b]).sum(1) / 2
                score += np.where(d == 0, 1.0, np.where(d <= 1, 0.6, 0.0))
                npairs += 1
        return score / npairs

    def score(self, idx: np.ndarray, lab: np.ndarray, teams: int) -> np.ndarray:
        """Weighted average of the available factors, [C]; 1.0 when no factor applies."""
        if not self.weights:
            return np.ones(np.asarray(idx).shape[0])
        f = self.factors(idx, lab, teams)
        total = sum(self.weights.values())
        return sum(self.weights[k] * f[k] for k in self.weights) / total


def canonical_splits(teams: int, team_size: int) -> np.ndarray:
    """All splits of m = teams·team_size slots into unlabeled teams, as labels [S, m].

    Slot 0 is always in team 0, and teams are numbered in order of first appearance.
    """
    m = teams * team_size
    out: list[list[int]] = []

    def rec(lab: list[int], counts: list[int], used: int) -> None:
        if len(lab) == m:
            out.append(list(lab))
            return
        for j in range(min(used + 1, teams)):
            if counts[j] < team_size:
                counts[j] += 1
                lab.append(j)
                rec(lab, counts, max(used, j + 1))
                lab.pop()
                counts[j] -= 1

    rec([], [0] * teams, 0)
    return np.asarray(out, dtype=np.int64)
