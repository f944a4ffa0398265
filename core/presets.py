"""Scenario presets ("3v3", "12v12", "12v12-deep"), the instance generator and the shipped engagement models.

A preset is a game: its player world (:mod:`mgmatch.core.world`), its team format, its rule
book and its fitted engagement model, shipped as JSON in ``core/presets/engagement-<name>.json``
(package data of ``mgmatch.core``).

Shaped like the paper's datasets (MGMatch §5, Table 1):

- **3v3**: D=2, K=3, 196 features, pools of 10–20 candidates, roles guard/forward/center, about
  75 compiled constraints of which about 14% logical (``if``).
- **12v12**: D=2, K=12, 66 features, pools of 30–60, roles tank 3 / healer 3 / dps 6, about 149
  constraints of which about 11% logical.
- **12v12-deep**: the 12v12 game (same world, roles and rule kinds) with pools of 60–100
  candidates and a deeper engagement head (two hidden layers of 64): the paper's hard regime,
  where an exact proof takes seconds.

:func:`generate_instances` plants a witness: it first builds one assignment that fills the role
slots inside one host region, keeps parties whole and the long waiters in, then sets every rule
so that this assignment satisfies it (skill limits are the game's setting, relaxed only when the
witness needs it; ``if`` rules the witness would break are redrawn). Every generated instance is
therefore feasible; :func:`generate_with_witness` returns the witness too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from .checker import Checker
from .engagement import EngagementModel, parse_engagement
from .errors import InvalidInput
from .instance import Instance, Player, parse_instance
from .rules import (
    All,
    AnyOf,
    AvoidRule,
    IfRule,
    IncludeRule,
    LinearExpr,
    Lit,
    MaxPingRule,
    Not,
    PartyTogetherRule,
    RoleMinRule,
    RolesRule,
    Rule,
    SkillBalanceRule,
    SkillSpreadRule,
    Term,
)
from .world import Population, WorldConfig, engagement, features, sample_population

REGIONS = ("eu", "us-east", "us-west", "asia")


@dataclass(frozen=True)
class Preset:
    """A scenario: the world, the pool sizes and the rule book's settings."""

    name: str
    world: WorldConfig
    pool: tuple[int, int]                 # candidates per instance, inclusive range
    bracket_sd: float                     # skill spread of a queue bracket
    max_diff: tuple[float, ...]           # skill_balance settings the game uses
    spread_prob: float                    # share of instances with a skill_spread rule
    max_spread: tuple[float, ...]
    max_ping: tuple[float, ...]
    party_sizes: tuple[int, ...]
    parties: tuple[int, int]              # number of parties per pool, inclusive range
    avoid: tuple[int, int]
    include: tuple[int, int]
    logical: tuple[int, int]              # number of `if` rules, inclusive range
    #: the role rule: None → ``roles`` (the world's slots, exactly); a dict → one ``role_min`` per role
    #: (e.g. every squad has a support), cheaper for many teams; no slots and no dict → no role rule
    role_min: dict[str, int] | None = None
    balance: bool = True                  # a skill_balance rule (teams of one: skill_spread instead)

    @property
    def teams(self) -> int:
        return self.world.teams

    @property
    def team_size(self) -> int:
        return self.world.team_size

    @property
    def feature_dim(self) -> int:
        return self.world.feature_dim


PRESETS: dict[str, Preset] = {
    "3v3": Preset(
        name="3v3",
        world=WorldConfig(
            name="3v3", teams=2, team_size=3, feature_dim=196,
            roles=("guard", "forward", "center"), role_share=(0.4, 0.35, 0.25),
            slots={"guard": 1, "forward": 1, "center": 1}, regions=REGIONS,
            n_heroes=60, n_modes=8, stats_per_mode=12, base_churn=-3.0),
        pool=(10, 19), bracket_sd=160.0, max_diff=(80.0, 100.0, 120.0), spread_prob=0.3,
        max_spread=(400.0, 500.0, 600.0), max_ping=(90.0, 110.0, 130.0), party_sizes=(2, 2, 3),
        parties=(1, 3), avoid=(0, 2), include=(0, 2), logical=(8, 13),
    ),
    "12v12": Preset(
        name="12v12",
        world=WorldConfig(
            name="12v12", teams=2, team_size=12, feature_dim=66,
            roles=("tank", "healer", "dps"), role_share=(0.25, 0.25, 0.5),
            slots={"tank": 3, "healer": 3, "dps": 6}, regions=REGIONS,
            n_heroes=20, n_modes=2, stats_per_mode=5, base_churn=-1.6, accept_threshold=0.3),
        pool=(30, 52), bracket_sd=180.0, max_diff=(50.0, 70.0, 90.0), spread_prob=0.0,
        max_spread=(900.0,), max_ping=(100.0, 120.0, 150.0), party_sizes=(2, 2, 3, 4, 5),
        parties=(1, 4), avoid=(0, 3), include=(1, 3), logical=(13, 20),
    ),
}
# The paper's hard regime: the 12v12 game with big queues (60–100 candidates) scored by a deeper
# engagement model (head 24→64→64→1, shipped as engagement-12v12-deep.json), so that the exact
# big-M MIP (up to 128 head binaries over ~200 x variables) needs seconds, not milliseconds.
PRESETS["12v12-deep"] = dataclasses.replace(
    PRESETS["12v12"], name="12v12-deep", world=dataclasses.replace(PRESETS["12v12"].world, name="12v12-deep"),
    pool=(60, 100), parties=(2, 6), avoid=(1, 5), include=(1, 4), logical=(16, 24),
)


# Large lobbies (docs/guides/large-lobbies.md): a 32-player free-for-all (teams of one, no parties,
# no role slots, a skill window instead of team balance) and a battle royale of 25 squads of 4 from
# big regional queues (parties of 1–4, every squad with a support, squads balanced on mean skill).
_FFA_WORLD = WorldConfig(
    name="ffa-32", teams=32, team_size=1, feature_dim=40, roles=("rusher", "sniper", "support"),
    role_share=(0.45, 0.3, 0.25), slots={}, regions=REGIONS, n_heroes=4, n_modes=1, stats_per_mode=4,
    base_churn=-3.0)
PRESETS["ffa-32"] = Preset(
    name="ffa-32", world=_FFA_WORLD, pool=(48, 64), bracket_sd=200.0, max_diff=(0.0,), spread_prob=1.0,
    max_spread=(900.0, 1100.0, 1300.0), max_ping=(100.0, 120.0, 150.0), party_sizes=(1,), parties=(0, 0),
    avoid=(0, 3), include=(1, 4), logical=(2, 5), balance=False,
)
PRESETS["br-100"] = Preset(
    name="br-100",
    world=WorldConfig(
        name="br-100", teams=25, team_size=4, feature_dim=40, roles=("fragger", "support", "scout"),
        role_share=(0.45, 0.3, 0.25), slots={"fragger": 2, "support": 1, "scout": 1}, regions=REGIONS,
        n_heroes=4, n_modes=1, stats_per_mode=4, base_churn=-2.5, accept_threshold=0.3),
    pool=(150, 300), bracket_sd=220.0, max_diff=(150.0, 200.0, 250.0), spread_prob=0.0, max_spread=(2000.0,),
    max_ping=(110.0, 130.0, 150.0), party_sizes=(1, 2, 2, 3, 4, 4), parties=(20, 45), avoid=(2, 8),
    include=(2, 6), logical=(10, 20), role_min={"support": 1},
)


def preset_names() -> list[str]:
    return list(PRESETS)


def get_preset(name: str, field: str = "preset") -> Preset:
    if name not in PRESETS:
        raise InvalidInput(field, f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return PRESETS[name]


# --------------------------------------------------------------------------- models


def model_names() -> list[str]:
    """Names of the shipped engagement models (one per preset)."""
    pkg = resources.files("mgmatch.core") / "presets"
    names = []
    for entry in pkg.iterdir():
        n = entry.name
        if n.startswith("engagement-") and n.endswith(".json"):
            names.append(n[len("engagement-"):-len(".json")])
    return sorted(names)


@cache
def _load_cached(name: str) -> EngagementModel:
    path = resources.files("mgmatch.core") / "presets" / f"engagement-{name}.json"
    raw = path.read_bytes()
    model = parse_engagement(json.loads(raw), f"engagement-{name}.json")
    if model.name is None:
        model = model.model_copy(update={"name": name})
        model.model_post_init(None)
    model._file_sha256 = hashlib.sha256(raw).hexdigest()  # = model_sha256(name)
    return model


def model_sha256(name: str) -> str:
    """Hex SHA-256 of the shipped engagement model file ``engagement-<name>.json`` (what labels and
    predictors trained on it pin); unknown → InvalidInput(engagement_model)."""
    if not isinstance(name, str) or name not in model_names():
        raise InvalidInput("engagement_model", f"unknown engagement model {name!r}; known: {', '.join(model_names())}")
    data = (resources.files("mgmatch.core") / "presets" / f"engagement-{name}.json").read_bytes()
    return hashlib.sha256(data).hexdigest()


def load_model(name: str) -> EngagementModel:
    """The shipped engagement model ``name`` (e.g. "3v3"); unknown → InvalidInput(engagement_model)."""
    if not isinstance(name, str) or name not in model_names():
        raise InvalidInput("engagement_model", f"unknown engagement model {name!r}; known: {', '.join(model_names())}")
    return _load_cached(name)


def resolve_model(instance: Instance, override: EngagementModel | None = None) -> tuple[str, EngagementModel]:
    """The model that scores ``instance``: the override, else the named one, else the matching default.

    The default is the shipped model whose ``teams`` and ``feature_dim`` match the instance.
    Returns (name, model); the name of an override is its ``name`` or "custom".
    """
    if override is not None:
        return (override.name or "custom"), override
    if instance.engagement_model is not None:
        return instance.engagement_model, load_model(instance.engagement_model)
    dim = len(instance.players[0].features)
    for name in model_names():
        m = load_model(name)
        if m.teams == instance.teams and m.feature_dim == dim:
            return name, m
    shipped = ", ".join(f"{n} (teams={load_model(n).teams}, feature_dim={load_model(n).feature_dim})" for n in model_names())
    raise InvalidInput("engagement_model", f"no shipped engagement model matches teams={instance.teams} and "
                       f"feature_dim={dim}; shipped: {shipped}; name one or pass a model file")


# --------------------------------------------------------------------------- generator


def generate_instances(preset: str, count: int, seed: int) -> list[Instance]:
    """``count`` instances of ``preset``, deterministic by ``seed``; each names its model."""
    return [inst for inst, _ in generate_with_witness(preset, count, seed)]


def generate_with_witness(preset: str, count: int, seed: int) -> list[tuple[Instance, np.ndarray]]:
    """Like :func:`generate_instances`, with the planted feasible assignment (team_of [N]) of each."""
    return [(g.instance, g.witness) for g in generate_with_truth(preset, count, seed)]


@dataclass
class Generated:
    """One generated instance with its planted feasible assignment and its players' latent state."""

    preset: Preset
    instance: Instance
    witness: np.ndarray          # team_of [N], satisfies every rule
    population: Population       # latent state of the instance's players (pings: the instance's regions)

    def true_engagement(self, team_of: np.ndarray) -> np.ndarray | float:
        """Ground-truth engagement (:func:`mgmatch.core.world.engagement`) of one [N] or a batch [B, N]
        of full assignments (every team at its size)."""
        T = np.asarray(team_of)
        one = T.ndim == 1
        T = T.reshape(-1, self.instance.n)
        D, K = self.instance.teams, self.instance.sizes[0]
        counts = np.stack([(T == j).sum(1) for j in range(D)], axis=1)
        if not (counts == K).all():
            raise InvalidInput("team_of", f"every team needs {K} players")
        teams = np.stack([np.argsort(T != j, axis=1, kind="stable")[:, :K] for j in range(D)], axis=1)
        y = engagement(self.preset.world, self.population, teams)
        return float(y[0]) if one else y


def generate_with_truth(preset: str, count: int, seed: int) -> list[Generated]:
    """Like :func:`generate_instances`, keeping the witness and the ground truth of each instance."""
    p = get_preset(preset)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidInput("count", f"expected a non-negative integer, got {count!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInput("seed", f"expected an integer, got {seed!r}")
    root = np.random.SeedSequence([seed, _preset_key(preset)])
    return [_one(p, np.random.default_rng(child)) for child in root.spawn(count)]


def _preset_key(name: str) -> int:
    return int.from_bytes(name.encode()[:8].ljust(8, b"\0"), "little")


def _one(p: Preset, rng: np.random.Generator) -> Generated:
    for _ in range(50):
        got = _attempt(p, rng)
        if got is not None:
            return got
    raise RuntimeError(f"preset {p.name}: could not plant a feasible match")  # pragma: no cover


def _attempt(p: Preset, rng: np.random.Generator) -> Generated | None:
    w = p.world
    D, K, R = w.teams, w.team_size, len(w.roles)
    N = int(rng.integers(p.pool[0], p.pool[1] + 1))
    center = rng.normal(w.skill_mean, w.skill_sd)
    # a regional queue: most candidates live near one region
    G = len(w.regions)
    home_probs = rng.dirichlet(np.full(G, 0.4)) * 0.35
    home_probs[rng.integers(G)] += 0.65
    pop = sample_population(w, N, rng, skill_center=center, skill_sd=p.bracket_sd, home_probs=home_probs)
    X = features(w, pop, rng)
    n_regions = int(rng.integers(2, len(w.regions) + 1))
    reg_idx = np.sort(rng.choice(len(w.regions), n_regions, replace=False))
    ping = pop.ping[:, reg_idx]
    max_ms = float(rng.choice(p.max_ping))

    # witness: host region, then fill every team's slots with players who accept the role
    reach = (ping <= max_ms).sum(0)
    host = int(rng.choice(np.flatnonzero(reach == reach.max())))
    ok_ping = ping[:, host] <= max_ms
    team_of = np.full(N, -1)
    role_of = np.full(N, -1)
    cand = [i for i in rng.permutation(N) if ok_ping[i]]
    slot_list = [(j, w.roles.index(r)) for j in range(D) for r, c in w.slots.items() for _ in range(c)]
    if not w.slots:  # no role slots (free-for-all): any candidate fills any place
        slot_list = [(j, -1) for j in range(D) for _ in range(K)]
    # scarce roles first
    slot_list.sort(key=lambda jr: int(pop.accepts[:, jr[1]].sum()) if jr[1] >= 0 else 0)
    for j, r in slot_list:
        k = next((i for i in cand if r < 0 or pop.accepts[i, r]), None)
        if k is None:
            return None
        cand.remove(k)
        team_of[k], role_of[k] = j, r
    # rebalance: swap same-role players between teams while it narrows the skill gap
    if D == 2:
        _rebalance(team_of, role_of, pop.rating, D)
    elif K > 1:
        _rebalance_many(team_of, role_of, pop.rating, D)

    ids = [f"p{i:02d}" for i in range(N)]
    rules: list[Rule] = []
    if p.role_min is not None:
        rules.extend(RoleMinRule(role, m) for role, m in p.role_min.items())
    elif w.slots:
        rules.append(RolesRule(dict(w.slots)))

    # parties: whole inside one witness team, or whole on the bench
    party = [None] * N
    n_parties = int(rng.integers(p.parties[0], p.parties[1] + 1))
    pid = 0
    for _ in range(n_parties):
        size = int(rng.choice(p.party_sizes))
        if rng.random() < 0.6:
            j = int(rng.integers(D))
            free = [i for i in range(N) if team_of[i] == j and party[i] is None]
        else:
            free = [i for i in range(N) if team_of[i] == -1 and party[i] is None]
        if len(free) < size:
            continue
        for i in rng.choice(free, size, replace=False):
            party[i] = f"g{pid}"
        pid += 1
    if pid:
        rules.append(PartyTogetherRule())

    sel = team_of >= 0
    means = [pop.rating[team_of == j].mean() for j in range(D)]
    gap = max(means) - min(means)
    max_diff = float(rng.choice(p.max_diff))
    if gap > max_diff:
        max_diff = float(np.ceil(gap / 10) * 10)
    if p.balance:
        rules.append(SkillBalanceRule(max_diff))
    if rng.random() < p.spread_prob:
        spread = float(pop.rating[sel].max() - pop.rating[sel].min())
        ms = float(rng.choice(p.max_spread))
        rules.append(SkillSpreadRule(max(ms, float(np.ceil(spread / 50) * 50))))
    rules.append(MaxPingRule(max_ms))

    # avoid pairs (reported toxicity / blocked players)
    for _ in range(int(rng.integers(p.avoid[0], p.avoid[1] + 1))):
        a, b = (int(v) for v in rng.choice(N, 2, replace=False))
        if sel[a] and sel[b] and team_of[a] != team_of[b]:
            rules.append(AvoidRule((ids[a], ids[b]), "team"))
        elif not (sel[a] and sel[b]):
            rules.append(AvoidRule((ids[a], ids[b]), str(rng.choice(["team", "match"]))))

    # long waiters must be included
    waited = rng.exponential(35.0, N)
    n_inc = int(rng.integers(p.include[0], p.include[1] + 1))
    inc = list(rng.choice(np.flatnonzero(sel), n_inc, replace=False)) if n_inc else []
    for i in inc:
        waited[i] = rng.uniform(120, 300)
    waited[~sel] = np.minimum(waited[~sel], 119.0)
    if inc:
        rules.append(IncludeRule(tuple(ids[i] for i in sorted(inc))))

    players = tuple(
        Player(id=ids[i], features=tuple(float(v) for v in np.round(X[i], 5)), skill=round(float(pop.rating[i]), 1),
               roles=tuple(w.roles[r] for r in range(R) if pop.accepts[i, r]), party=party[i],
               pings={w.regions[g]: float(ping[i, q]) for q, g in enumerate(reg_idx)},
               waited_s=round(float(waited[i]), 1))
        for i in range(N))

    n_log = int(rng.integers(p.logical[0], p.logical[1] + 1))
    if K == 1:
        rules.extend(_lobby_rules(p, rng, n_log, ids, team_of, pop, ping, max_ms))
    else:
        rules.extend(_logical_rules(p, rng, n_log, ids, team_of, pop, ping, max_ms))

    obj = {"format": "mgmatch-instance/v1", "teams": D, "team_size": K,
           "players": [pl.to_json() for pl in players], "rules": [r.to_json() for r in rules],
           "engagement_model": p.name}
    inst = parse_instance(obj)
    if Checker(inst).violations(team_of):  # pragma: no cover - the construction guarantees it
        return None
    truth = dataclasses.replace(pop, ping=ping)
    return Generated(p, inst, team_of, truth)


def _rebalance(team_of: np.ndarray, role_of: np.ndarray, rating: np.ndarray, D: int) -> None:
    def gap() -> float:
        m = [rating[team_of == j].mean() for j in range(D)]
        return max(m) - min(m)

    improved = True
    while improved:
        improved = False
        best = gap()
        sel = np.flatnonzero(team_of >= 0)
        for a in sel:
            for b in sel:
                if team_of[a] < team_of[b] and role_of[a] == role_of[b]:
                    team_of[a], team_of[b] = team_of[b], team_of[a]
                    g = gap()
                    if g < best - 1e-9:
                        best, improved = g, True
                    else:
                        team_of[a], team_of[b] = team_of[b], team_of[a]


def _rebalance_many(team_of: np.ndarray, role_of: np.ndarray, rating: np.ndarray, D: int, passes: int = 20) -> None:
    """:func:`_rebalance` for many teams: swap same-role players between the strongest and the weakest
    team while it narrows the gap of team means (team sums kept incrementally; a few passes)."""
    sizes = np.bincount(team_of[team_of >= 0], minlength=D).astype(np.float64)
    sums = np.bincount(team_of[team_of >= 0], weights=rating[team_of >= 0], minlength=D)
    for _ in range(passes * D):
        means = sums / sizes
        hi, lo = int(np.argmax(means)), int(np.argmin(means))
        gap = means[hi] - means[lo]
        A, B = np.flatnonzero(team_of == hi), np.flatnonzero(team_of == lo)
        same = role_of[A][:, None] == role_of[B][None, :]
        delta = rating[A][:, None] - rating[B][None, :]          # what hi gives up for lo's player
        new_hi, new_lo = (sums[hi] - delta) / sizes[hi], (sums[lo] + delta) / sizes[lo]
        others = np.delete(means, [hi, lo])
        top = np.maximum(np.maximum(new_hi, new_lo), others.max() if len(others) else -np.inf)
        bot = np.minimum(np.minimum(new_hi, new_lo), others.min() if len(others) else np.inf)
        new_gap = np.where(same, top - bot, np.inf)
        a, b = np.unravel_index(int(np.argmin(new_gap)), new_gap.shape)
        if not new_gap[a, b] < gap - 1e-9:
            return
        ia, ib = A[a], B[b]
        team_of[ia], team_of[ib] = lo, hi
        sums[hi] -= delta[a, b]
        sums[lo] += delta[a, b]


def _lobby_rules(p: Preset, rng: np.random.Generator, n: int, ids: list[str], team_of: np.ndarray,
                 pop, ping: np.ndarray, max_ms: float) -> list[IfRule]:
    """``if`` rules of a free-for-all (teams of one), about who is in the lobby, not on which team:
    "in the lobby" is the condition ``any`` over every team, so that the rules, like the set-form
    engagement model, do not tell the teams apart. Each is satisfied by the witness."""
    D, N = p.teams, len(ids)
    sel = team_of >= 0
    high_ping = np.flatnonzero(ping.min(1) > 0.6 * max_ms)
    novices = np.flatnonzero(pop.games < np.quantile(pop.games, 0.3))
    veterans = np.flatnonzero(pop.games >= np.quantile(pop.games, 0.6))

    def lobby(i: int) -> AnyOf:
        return AnyOf(tuple(Lit(ids[i], j) for j in range(D)))

    def count(players, sense: str, rhs: float) -> LinearExpr:
        return LinearExpr(tuple(Term(ids[i], j, 1.0) for i in players for j in range(D)), sense, rhs)

    out: list[IfRule] = []
    tries = 0
    while len(out) < n and tries < 40 * n:
        tries += 1
        kind = rng.integers(3)
        if kind == 0:
            # rivals: when a and b are both in the lobby, their rival c is not
            a, b, c = (int(v) for v in rng.choice(N, 3, replace=False))
            if sel[a] and sel[b] and sel[c]:
                continue
            out.append(IfRule(All((lobby(a), lobby(b))), count([c], "<=", 0)))
        elif kind == 1 and len(novices) and len(veterans) >= 2:
            # a newcomer in the lobby: at least two veterans in it too
            nv = int(rng.choice(novices))
            vets = [int(i) for i in veterans if i != nv]
            if sel[nv] and sel[vets].sum() < 2:
                continue
            out.append(IfRule(lobby(nv), count(vets, ">=", 2)))
        elif kind == 2 and len(high_ping) >= 2:
            # a high-ping player in the lobby: at most two other high-ping players in it
            h = int(rng.choice(high_ping))
            others = [int(i) for i in high_ping if i != h]
            if sel[h] and sel[others].sum() > 2:
                continue
            out.append(IfRule(lobby(h), count(others, "<=", 2)))
    return out


def _logical_rules(p: Preset, rng: np.random.Generator, n: int, ids: list[str], team_of: np.ndarray,
                   pop, ping: np.ndarray, max_ms: float) -> list[IfRule]:
    """``if`` rules in the spirit of the paper's example, each satisfied by the witness."""
    D, N = p.teams, len(ids)
    out: list[IfRule] = []
    high_ping = np.flatnonzero(ping.min(1) > 0.6 * max_ms)
    novices = np.flatnonzero(pop.games < np.quantile(pop.games, 0.3))
    veterans = np.flatnonzero(pop.games >= np.quantile(pop.games, 0.6))
    by_rating = np.argsort(-pop.rating)

    def holds(rule: IfRule) -> bool:
        def cond(c) -> bool:
            if isinstance(c, Lit):
                return team_of[int(c.player[1:])] == c.team
            if isinstance(c, Not):
                return not cond(c.arg)
            return all(cond(a) for a in c.args)
        if not cond(rule.when):
            return True
        act = sum(t.coef for t in rule.then.terms if team_of[int(t.player[1:])] == t.team)
        return act <= rule.then.rhs + 1e-9 if rule.then.sense == "<=" else act >= rule.then.rhs - 1e-9

    def expr(pairs: list[tuple[int, int]], sense: str, rhs: float) -> LinearExpr:
        return LinearExpr(tuple(Term(ids[i], j, 1.0) for i, j in pairs), sense, rhs)

    tries = 0
    while len(out) < n and tries < 40 * n:
        tries += 1
        j = int(rng.integers(D))
        kind = rng.integers(5)
        if kind == 0:
            # paper style: if (NOT a on j AND b on j) then c and d not both on j
            a, b, c, d = (int(v) for v in rng.choice(N, 4, replace=False))
            r = IfRule(All((Not(Lit(ids[a], j)), Lit(ids[b], j))), expr([(c, j), (d, j)], "<=", 1))
        elif kind == 1 and len(high_ping) >= 2:
            # a high-ping player on team j: at most one other high-ping teammate
            h = int(rng.choice(high_ping))
            others = [i for i in high_ping if i != h]
            r = IfRule(Lit(ids[h], j), expr([(i, j) for i in others], "<=", 1))
        elif kind == 2 and len(novices) and len(veterans):
            # a newcomer on team j gets at least one veteran teammate
            nv = int(rng.choice(novices))
            vets = [i for i in veterans if i != nv]
            if not vets:
                continue
            r = IfRule(Lit(ids[nv], j), expr([(i, j) for i in vets], ">=", 1))
        elif kind == 3:
            # two rivals on team j: their rival c plays elsewhere (not on team j)
            a, b, c = (int(v) for v in rng.choice(N, 3, replace=False))
            r = IfRule(All((Lit(ids[a], j), Lit(ids[b], j))), expr([(c, j)], "<=", 0))
        else:
            # the two top-rated candidates are not stacked on one team
            top = by_rating[: max(2, min(4, N // 5))]
            a, b = (int(v) for v in rng.choice(top, 2, replace=False))
            r = IfRule(Lit(ids[a], j), expr([(b, j)], "<=", 0))
        if holds(r):
            out.append(r)
    return out


def stats(instances: list[Instance]) -> dict:
    """Average compiled size of a list of instances (constraints, logical share, players)."""
    from .compiler import compile_instance

    rows = [compile_instance(i).stats() for i in instances]
    n = max(1, len(rows))
    cons = sum(r["constraints"] for r in rows) / n
    log = sum(r["logical_constraints"] for r in rows) / n
    return {
        "instances": len(rows),
        "players": sum(i.n for i in instances) / n,
        "constraints": cons,
        "logical_constraints": log,
        "logical_share": log / cons if cons else 0.0,
        "variables": sum(r["variables"] for r in rows) / n,
        "aux_variables": sum(r["aux_variables"] for r in rows) / n,
    }
