"""A seeded synthetic player world, its ground-truth engagement process and match history.

Everything here is numpy only and takes an explicit ``np.random.Generator``: the same seed gives
the same world, the same matches and the same engagement values.

**Latent state** of every player (:class:`Population`): true skill ``mu``, an observed rating
with a rating deviation, lifetime games, play frequency (games per day), tenure, a preference
over the game's roles (the main role and the roles he accepts), a home region with a ping per
region, the outcomes of his last 10 matches (+1 win, 0 draw, −1 loss; from which his current
streak follows) and a base churn propensity (hidden; correlated with play frequency).

**Raw features** (:func:`features`): one vector of ``feature_dim`` numbers per player, in
column blocks (``WorldConfig.blocks()`` gives the exact ranges):

========== ============================================================================
block      columns
========== ============================================================================
profile    8: rating/1000, rating deviation/100, log lifetime games, log games per day,
           tenure in years, account level (noisy log games), days since last match,
           lifetime win rate (noisy function of skill)
recent     10: outcomes of the last 10 matches, most recent first (+1 / 0 / −1)
streak     3: signed current streak, wins in the last 10, losses in the last 10
role_pref  R: noisy observed share of matches played in each role
role_ok    R: 1 if the player queued for that role (accepts it)
ping       G: log(ping ms) to each of the world's regions
heroes     H: hero-usage histogram (heroes belong to roles; usage follows role preference)
modes      M×S: per game mode stats (win rate, KDA, damage, objective time, …), noisy
           functions of skill and role
misc       the rest: redundant re-encodings (rating², rating×win rate, …) and pure noise
========== ============================================================================

**Ground-truth engagement** (:func:`engagement`), in the spirit of EOMM: the outcome of a match
follows Elo on the teams' mean true skill with a draw probability that grows when the match is
close; each player's churn probability after the match is a logistic function of the outcome,
his streak (a loss on a losing streak hurts more, a win on one relieves), the match's
unfairness (the gap between team strengths), whether his main role was crowded out on his team,
his ping to the host region (the region with the lowest worst ping) and his distance to his
team's skill. The match's engagement is the expected number of players retained,
Σ_i Σ_o P(o)·(1 − churn_i(o)).

**Match history** (:func:`simulate_history`): matches drawn from the world by a mix of random
team formation, skill-bracketed queues with random, snake-draft balanced or role-aware splits,
so the data holds good and bad matches alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

HISTORY = 10  # length of the recent-outcomes window
PROFILE = 8
STREAK = 3


@dataclass(frozen=True)
class WorldConfig:
    """The shape of one game's world (a preset picks one)."""

    name: str
    teams: int
    team_size: int
    feature_dim: int
    roles: tuple[str, ...]
    role_share: tuple[float, ...]           # share of players whose main role is each role
    slots: dict[str, int]                   # role slots per team
    regions: tuple[str, ...]
    n_heroes: int
    n_modes: int
    stats_per_mode: int
    base_churn: float                       # logit of a typical player's churn after a fair draw
    accept_threshold: float = 0.25          # a role preference this high means the role is accepted
    skill_mean: float = 1500.0
    skill_sd: float = 300.0
    extra: dict = field(default_factory=dict)

    def blocks(self) -> dict[str, tuple[int, int]]:
        """Column ranges [start, stop) of each feature block."""
        R, G = len(self.roles), len(self.regions)
        sizes = [("profile", PROFILE), ("recent", HISTORY), ("streak", STREAK), ("role_pref", R),
                 ("role_ok", R), ("ping", G), ("heroes", self.n_heroes),
                 ("modes", self.n_modes * self.stats_per_mode)]
        out, s = {}, 0
        for name, n in sizes:
            out[name] = (s, s + n)
            s += n
        if s > self.feature_dim:
            raise ValueError(f"{self.name}: blocks need {s} columns, feature_dim is {self.feature_dim}")
        out["misc"] = (s, self.feature_dim)
        return out


@dataclass
class Population:
    """Latent state of n players (arrays of length n, or [n, ·])."""

    mu: np.ndarray          # true skill
    rating: np.ndarray      # observed rating
    rd: np.ndarray          # rating deviation
    games: np.ndarray       # lifetime games
    freq: np.ndarray        # games per day
    tenure: np.ndarray      # years
    role_pref: np.ndarray   # [n, R], rows sum to 1
    main_role: np.ndarray   # [n]
    accepts: np.ndarray     # [n, R] bool
    home: np.ndarray        # [n] region index
    ping: np.ndarray        # [n, G] ms
    recent: np.ndarray      # [n, HISTORY] in {-1, 0, 1}, most recent first
    propensity: np.ndarray  # base churn logit offset (hidden)

    @property
    def n(self) -> int:
        return len(self.mu)

    @property
    def streak(self) -> np.ndarray:
        """Signed current streak: +k after k straight wins, −k after k straight losses, 0 after a draw."""
        first = self.recent[:, 0]
        same = self.recent == first[:, None]
        run = np.where(same.all(1), HISTORY, np.argmin(same, axis=1))
        return (first * run).astype(np.float64)

    def take(self, idx: np.ndarray) -> Population:
        return Population(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


def region_distance(G: int) -> np.ndarray:
    """Extra round-trip ms from a home region to each region (eu, us-east, us-west, asia, …)."""
    base = np.array([[0, 75, 140, 160], [75, 0, 60, 170], [140, 60, 0, 110], [160, 170, 110, 0]], dtype=np.float64)
    if G <= 4:
        return base[:G, :G]
    out = np.full((G, G), 150.0)
    out[:4, :4] = base
    np.fill_diagonal(out, 0.0)
    return out


def sample_population(cfg: WorldConfig, n: int, rng: np.random.Generator, skill_center: float | None = None,
                      skill_sd: float | None = None, home_probs: np.ndarray | None = None) -> Population:
    """Draw n players.

    ``skill_center``/``skill_sd`` draw a queue bracket instead of the whole world; ``home_probs``
    (one per region) the home regions of a regional queue (uniform by default).
    """
    R, G = len(cfg.roles), len(cfg.regions)
    center = cfg.skill_mean if skill_center is None else skill_center
    mu = rng.normal(center, cfg.skill_sd if skill_sd is None else skill_sd, n)
    games = np.exp(rng.normal(5.0, 1.2, n)).round() + 5
    rd = 30 + 250 / np.sqrt(games)
    rating = mu + rng.normal(0, 1, n) * rd
    freq = np.exp(rng.normal(0.5, 0.7, n))
    tenure = games / (freq * 365) * np.exp(rng.normal(0.3, 0.3, n))
    main = rng.choice(R, size=n, p=np.asarray(cfg.role_share))
    pref = rng.dirichlet(np.full(R, 0.5), size=n)
    pref = 0.4 * pref
    pref[np.arange(n), main] += 0.6
    accepts = (pref >= cfg.accept_threshold) | (np.arange(R)[None, :] == main[:, None])
    home = rng.choice(G, size=n, p=home_probs)
    base = rng.uniform(12, 50, n)
    dist = region_distance(G)
    ping = (base[:, None] + dist[home] * rng.uniform(0.85, 1.3, (n, G))).round()
    # recent outcomes: players in form / out of form
    form = rng.normal(0, 0.6, n)
    p_win = 0.45 / (1 + np.exp(-form))
    p_loss = 0.45 / (1 + np.exp(form))
    u = rng.random((n, HISTORY))
    recent = np.where(u < p_win[:, None] * 2 * 0.95, 1, np.where(u > 1 - p_loss[:, None] * 2 * 0.95, -1, 0))
    # first position correlated with the second: streaks exist
    keep = rng.random((n, HISTORY - 1)) < 0.3
    for h in range(HISTORY - 2, -1, -1):
        recent[:, h] = np.where(keep[:, h], recent[:, h + 1], recent[:, h])
    propensity = rng.normal(0, 0.35, n) - 0.35 * np.log(freq)
    return Population(mu, rating, rd, games, freq, tenure, pref, main, accepts, home, ping,
                      recent.astype(np.int8), propensity)


# --------------------------------------------------------------------------- features


def _hero_roles(cfg: WorldConfig) -> np.ndarray:
    """Role of each hero: heroes are spread over the roles in proportion to role_share."""
    share = np.asarray(cfg.role_share)
    counts = np.maximum(1, np.round(share * cfg.n_heroes).astype(int))
    counts[-1] = cfg.n_heroes - counts[:-1].sum()
    return np.repeat(np.arange(len(cfg.roles)), counts)


def features(cfg: WorldConfig, pop: Population, rng: np.random.Generator) -> np.ndarray:
    """Raw feature vectors [n, feature_dim] (float64) for the players of ``pop``; see the module doc."""
    n, R = pop.n, len(cfg.roles)
    b = cfg.blocks()
    X = np.empty((n, cfg.feature_dim))
    z = (pop.mu - cfg.skill_mean) / cfg.skill_sd
    winrate = np.clip(0.5 + 0.06 * z + rng.normal(0, 0.03, n), 0.05, 0.95)
    s, _ = b["profile"]
    X[:, s + 0] = pop.rating / 1000
    X[:, s + 1] = pop.rd / 100
    X[:, s + 2] = np.log(pop.games)
    X[:, s + 3] = np.log(pop.freq)
    X[:, s + 4] = pop.tenure
    X[:, s + 5] = np.log(pop.games) + rng.normal(0, 0.2, n)
    X[:, s + 6] = rng.exponential(1 / pop.freq)
    X[:, s + 7] = winrate
    s, e = b["recent"]
    X[:, s:e] = pop.recent
    s, _ = b["streak"]
    X[:, s + 0] = pop.streak
    X[:, s + 1] = (pop.recent == 1).sum(1)
    X[:, s + 2] = (pop.recent == -1).sum(1)
    s, e = b["role_pref"]
    obs = pop.role_pref + rng.normal(0, 0.04, (n, R))
    X[:, s:e] = np.clip(obs, 0, None) / np.clip(obs, 0, None).sum(1, keepdims=True).clip(1e-9)
    s, e = b["role_ok"]
    X[:, s:e] = pop.accepts
    s, e = b["ping"]
    X[:, s:e] = np.log(pop.ping + 1)
    s, e = b["heroes"]
    hero_role = _hero_roles(cfg)
    usage = rng.gamma(0.6, 1.0, (n, cfg.n_heroes)) * pop.role_pref[:, hero_role]
    X[:, s:e] = usage / usage.sum(1, keepdims=True)
    s, e = b["modes"]
    M, S = cfg.n_modes, cfg.stats_per_mode
    mode_skill = z[:, None] + rng.normal(0, 0.5, (n, M))
    base = np.linspace(0.5, 1.5, S)[None, None, :]
    role_eff = pop.role_pref @ np.linspace(-0.3, 0.3, R * S).reshape(R, S)
    stats = base * (1 + 0.3 * mode_skill[:, :, None]) + role_eff[:, None, :] + rng.normal(0, 0.15, (n, M, S))
    X[:, s:e] = stats.reshape(n, M * S)
    s, e = b["misc"]
    k = e - s
    if k:
        red = [z ** 2, z * winrate, X[:, b["streak"][0]] * z, np.log(pop.ping.min(1) + 1), pop.freq * pop.tenure]
        cols = [red[m % len(red)] + rng.normal(0, 0.1, n) for m in range(min(k, len(red)))]
        cols += [rng.normal(0, 1, n) for _ in range(k - len(cols))]
        X[:, s:e] = np.stack(cols, axis=1)
    return X


# --------------------------------------------------------------------------- engagement


@dataclass(frozen=True)
class ChurnParams:
    """Coefficients of the churn logit (ground truth)."""

    win: float = -0.55
    draw: float = 0.0
    loss: float = 0.45
    loss_on_losing_streak: float = 0.22   # per game of the current losing streak (up to 5)
    win_on_losing_streak: float = -0.12   # relief, per game of the losing streak
    win_on_winning_streak: float = 0.04   # boredom, per game of the winning streak
    unfair: float = 1.1                   # per 250 rating points of team strength gap (capped at 2)
    off_role: float = 0.9                 # share of same-main-role teammates pushed off their role
    ping: float = 0.7                     # per 100 ms of host ping above 60 ms
    outlier: float = 0.35                 # per 300 points below the team mean
    draw_base: float = 0.12               # draw probability of a perfectly even match


def outcome_probs(strength: np.ndarray, draw_base: float) -> tuple[np.ndarray, np.ndarray]:
    """P(team j wins) and P(draw).

    Shapes: strength [M, D] → win [M, D], draw [M].
    """
    gap = strength.max(1) - strength.min(1)
    p_draw = draw_base * np.exp(-(gap / 150.0) ** 2)
    logits = strength * (np.log(10.0) / 400.0)
    logits -= logits.max(1, keepdims=True)
    w = np.exp(logits)
    w /= w.sum(1, keepdims=True)
    return (1 - p_draw)[:, None] * w, p_draw


def host_ping(pop: Population, teams: np.ndarray) -> np.ndarray:
    """Each player's ping to the match's host (the region with the lowest worst ping).

    Shapes: teams [M, D, K] (player indexes into ``pop``) → [M, D, K].
    """
    P = pop.ping[teams]                                   # [M, D, K, G]
    worst = P.max(axis=(1, 2))                            # [M, G]
    host = worst.argmin(1)
    return np.take_along_axis(P, host[:, None, None, None], axis=3)[..., 0]


def engagement(cfg: WorldConfig, pop: Population, teams: np.ndarray, params: ChurnParams | None = None,
               per_player: bool = False) -> np.ndarray:
    """Expected number of players retained after each match.

    Args:
        teams: player indexes into ``pop``, [M, D, K] (every team the same size here).
        per_player: return the retention probability per player [M, D, K] instead.
    Returns:
        [M] engagement (or [M, D, K]).
    """
    c = params or ChurnParams()
    teams = np.asarray(teams)
    M, D, K = teams.shape
    mu = pop.mu[teams]                                    # [M, D, K]
    strength = mu.mean(2)                                 # [M, D]
    p_win_team, p_draw = outcome_probs(strength, c.draw_base)
    p_win = np.broadcast_to(p_win_team[:, :, None], (M, D, K))
    p_draw3 = np.broadcast_to(p_draw[:, None, None], (M, D, K))
    p_loss = 1 - p_win - p_draw3
    streak = pop.streak[teams]
    losing = np.clip(-streak, 0, 5)
    winning = np.clip(streak, 0, 5)
    gap = strength.max(1) - strength.min(1)
    unfair = np.minimum(gap / 250.0, 2.0)[:, None, None]
    # role crowding: for the main role r of each player, the share of teammates with main role r
    # beyond the team's slots for r (they must play something else)
    R = len(cfg.roles)
    slots = np.asarray([cfg.slots.get(r, 0) for r in cfg.roles], dtype=np.float64)
    main = pop.main_role[teams]                           # [M, D, K]
    onehot = main[..., None] == np.arange(R)              # [M, D, K, R]
    count = onehot.sum(2)                                 # [M, D, R]
    overflow = np.clip(count - slots, 0, None) / np.maximum(count, 1)
    crowded = np.take_along_axis(overflow[:, :, None, :].repeat(K, 2), main[..., None], axis=3)[..., 0]
    if not cfg.slots:  # no role slots (free-for-all): nobody is pushed off a role
        crowded = np.zeros_like(crowded)
    ping = host_ping(pop, teams)
    outlier = np.clip((strength[:, :, None] - mu) / 300.0, 0, None)
    common = (cfg.base_churn + pop.propensity[teams] + c.unfair * unfair + c.off_role * crowded
              + c.ping * np.clip(ping - 60, 0, None) / 100 + c.outlier * outlier)
    l_win = common + c.win + c.win_on_losing_streak * losing + c.win_on_winning_streak * winning
    l_draw = common + c.draw
    l_loss = common + c.loss + c.loss_on_losing_streak * losing
    retain = (p_win * (1 - _sigmoid(l_win)) + p_draw3 * (1 - _sigmoid(l_draw))
              + p_loss * (1 - _sigmoid(l_loss)))
    return retain if per_player else retain.sum(axis=(1, 2))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# --------------------------------------------------------------------------- history


@dataclass
class History:
    """Simulated matches over one world: ``teams[m]`` holds player indexes, ``y[m]`` the engagement."""

    features: np.ndarray    # [n_players, feature_dim] float32
    teams: np.ndarray       # [M, D, K] int32
    y: np.ndarray           # [M] float64
    formation: np.ndarray   # [M] int8: index into FORMATIONS


FORMATIONS = ("random", "bracket_random", "bracket_snake", "bracket_roles", "regional_random", "regional_roles")
FORMATION_SHARE = (0.12, 0.12, 0.12, 0.12, 0.26, 0.26)


def simulate_history(cfg: WorldConfig, n_players: int, n_matches: int, rng: np.random.Generator,
                     params: ChurnParams | None = None) -> History:
    """A world of ``n_players`` and ``n_matches`` matches formed by a mix of methods.

    ``random``: any players, random teams. ``bracket_*``: a pool from a window of the rating
    ladder (window width log-uniform), split at random, by snake draft on rating, or role-aware
    (each slot taken by a player whose main role it is, when the pool has one). ``regional_*``:
    pools like a regional queue's (as the instance generator draws them: most players from one
    home region, a narrow rating window), split at random or role-aware.
    """
    pop = sample_population(cfg, n_players, rng)
    X = features(cfg, pop, rng).astype(np.float32)
    D, K = cfg.teams, cfg.team_size
    G = len(cfg.regions)
    order = np.argsort(pop.rating)
    rank = np.empty(n_players, dtype=np.int64)
    rank[order] = np.arange(n_players)
    by_region = [order[pop.home[order] == g] for g in range(G)]   # each sorted by rating
    teams = np.empty((n_matches, D, K), dtype=np.int32)
    form = rng.choice(len(FORMATIONS), size=n_matches, p=np.asarray(FORMATION_SHARE)).astype(np.int8)
    need = D * K
    slot_roles = (np.concatenate([[cfg.roles.index(r)] * c for r, c in cfg.slots.items()]) if cfg.slots
                  else np.full(K, -1))
    snake = np.concatenate([np.arange(D) if r % 2 == 0 else np.arange(D)[::-1] for r in range(K)])

    def window(ladder: np.ndarray, width: int, center: int | None = None) -> np.ndarray:
        width = int(min(len(ladder), max(width, need)))
        if center is None:
            start = int(rng.integers(0, len(ladder) - width + 1))
        else:
            start = int(np.clip(center - width // 2, 0, len(ladder) - width))
        return ladder[start:start + width]

    def role_split(pool: np.ndarray) -> np.ndarray:
        avail = list(rng.permutation(pool))
        out = np.empty((D, K), dtype=np.int64)
        for j in range(D):
            for k, r in enumerate(slot_roles):
                pick = next((a for a in avail if r < 0 or pop.main_role[a] == r), avail[0])
                avail.remove(pick)
                out[j, k] = pick
        return out

    for m in range(n_matches):
        f = form[m]
        if f == 0:
            teams[m] = rng.choice(n_players, need, replace=False).reshape(D, K)
            continue
        if f <= 3:
            width = int(np.exp(rng.uniform(np.log(need * 2), np.log(n_players / 4))))
            win = window(order, width)
            pool = win[rng.choice(len(win), min(len(win), need * 3), replace=False)] if len(win) < 4 * need * 3 \
                else np.unique(win[rng.integers(0, len(win), need * 3)])
        else:
            g = int(rng.integers(G))
            local = by_region[g]
            c = rng.integers(len(local))
            width = int(np.exp(rng.uniform(np.log(need * 3), np.log(max(need * 4, len(local) / 10)))))
            n_pool = int(rng.integers(need + need // 2, need * 3 + 1))
            n_local = min(int(round(n_pool * rng.uniform(0.6, 1.0))), len(local))
            lw = window(local, width, int(c))
            pool_local = rng.choice(lw, min(n_local, len(lw)), replace=False)
            ow = window(order, width * G, int(rank[local[c]]))
            others = ow[rng.integers(0, len(ow), n_pool - len(pool_local))]
            pool = np.unique(np.concatenate([pool_local, others]))
            while len(pool) < need:
                pool = np.unique(np.concatenate([pool, rng.integers(0, n_players, need - len(pool))]))
        if f in (1, 4):
            teams[m] = rng.choice(pool, need, replace=False).reshape(D, K)
        elif f == 2:
            pick = rng.choice(pool, need, replace=False)
            pick = pick[np.argsort(rank[pick])]
            for j in range(D):
                teams[m, j] = pick[snake == j]
        else:
            teams[m] = role_split(pool)
    y = engagement(cfg, pop, teams, params)
    return History(X, teams, y, form)


MATCHLOG_FORMAT = "mgmatch-matchlog/v1"


def matchlog_lines(hist: History, id_prefix: str = "p", decimals: int = 6) -> Iterator[str]:
    """The matches of ``hist`` as match-log lines (spec §5 ``mgmatch-matchlog/v1``, no newline).

    Player ``i`` of the world is ``{id_prefix}{i}``; features are rounded to ``decimals`` places
    (they are float32 in the history); the first line carries ``format``.
    """
    D, K = hist.teams.shape[1:]
    for m in range(hist.teams.shape[0]):
        idx = hist.teams[m]
        X = np.round(hist.features[idx.reshape(-1)].astype(np.float64), decimals).reshape(D, K, -1).tolist()
        teams = [[{"id": f"{id_prefix}{int(i)}", "features": X[j][k]} for k, i in enumerate(idx[j])] for j in range(D)]
        line = {"format": MATCHLOG_FORMAT} if m == 0 else {}
        line.update({"match_id": f"m-{m:07d}", "teams": teams, "engagement": round(float(hist.y[m]), 9)})
        yield json.dumps(line, separators=(",", ":"))
