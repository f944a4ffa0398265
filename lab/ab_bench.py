"""``mgmatch bench ab``: a replayed A/B experiment whose players answer with a truth model, read out by the report.

A ticket stream goes through a service config with an experiment (:func:`mgmatch.lab.replay.simulate`: the
real matchmaker, solvers and arms, on a simulated clock). Every match formed then gets the result
``truth(teams) + Normal(0, noise²)``, posted through the service's results path (:func:`service.post_result`,
what ``POST /v1/matches/{id}/result`` runs), where ``truth`` is an engagement model file (§3) standing in for
the players. The A/B report (:func:`mgmatch.app.abreport.report_from_store`) is read from the same store, and
set beside the lift measured with the truth itself (each arm's mean of ``truth(teams)``, without noise): the
report's confidence sequence should cover it, and find it when it is large enough.

Results are posted once the stream has run, in the order the matches formed: the arms' solvers do not read
results, so when they arrive does not change a match. An experiment pool with ``learning`` (spec §7) does read
them: then each match gets its result as it forms (:class:`mgmatch.lab.replay.Truth`, the replay's seeded
draws), so the learning arm refits during the stream as it would in service.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from mgmatch.app import service
from mgmatch.app.abreport import experiment_config, experiment_pools, report_from_store
from mgmatch.app.config import ServiceConfig
from mgmatch.app.results import export_matchlog
from mgmatch.app.runtime import Runtime
from mgmatch.core.engagement import EngagementModel
from mgmatch.core.errors import InvalidInput
from mgmatch.pipeline import abstats

from .replay import STREAM_FORMAT, Arrival, SimTicket, Truth, simulate


def stream_from_instances(paths: list[Path], rate: float, seed: int, pool: str) -> list[dict[str, Any]]:
    """A ``mgmatch-tickets/v1`` stream of the players of spec instance files, one player per ticket (ids made
    unique, ``party`` and ``waited_s`` left out), arriving at ``rate`` tickets per second (Poisson, seeded)."""
    rng = np.random.default_rng(seed)
    players: list[dict[str, Any]] = []
    for k, path in enumerate(paths):
        obj = json.loads(path.read_text())
        for p in obj.get("players", []):
            d = {key: v for key, v in p.items() if key not in ("party", "waited_s")}
            d["id"] = f"i{k}-{p['id']}"
            players.append(d)
    order = rng.permutation(len(players))
    times = np.cumsum(rng.exponential(1.0 / rate, len(players)))
    out = []
    for n, (i, t) in enumerate(zip(order, times, strict=True)):
        line: dict[str, Any] = {"time": round(float(t), 4), "pool": pool, "players": [players[i]], "id": f"t{n}"}
        if n == 0:
            line["format"] = STREAM_FORMAT
        out.append(line)
    return out


def true_engagement(truth: EngagementModel, teams: list[list[dict[str, Any]]]) -> float:
    """``truth`` of a match's teams (spec players with their features)."""
    feats = np.array([p["features"] for team in teams for p in team], dtype=np.float64)
    team_of = np.array([j for j, team in enumerate(teams) for _ in team])
    return float(truth.evaluate(truth.embed(feats), team_of))


def every_look(stream: list[tuple[float, str, float, float]], control: str, arm: str, alpha: float
               ) -> dict[str, Any] | None:
    """The report read after every result of ``arm`` or ``control`` (in the order the matches formed): the first
    look (counted in matches of the two arms) at which the lift was significant at ``alpha`` and at 0.01, and
    the looks at which the confidence sequence missed the lift measured with the truth over the matches so far
    (the average lift up to that look, what the sequence covers) or over the whole run."""
    rows = [(a == arm, y, e) for _, a, y, e in stream if a in (control, arm)]
    if not rows:
        return None
    treat = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    e = np.array([r[2] for r in rows])
    est, p, half, _ = abstats.sequential_p_values(y[~treat], y[treat], treat, alpha)
    kc, kt = np.cumsum(~treat), np.cumsum(treat)
    with np.errstate(invalid="ignore", divide="ignore"):
        running = np.cumsum(np.where(treat, e, 0.0)) / kt - np.cumsum(np.where(~treat, e, 0.0)) / kc
    ok = ~np.isnan(est)

    def first(mask: np.ndarray) -> int | None:
        hits = np.flatnonzero(ok & mask)
        return int(hits[0]) + 1 if hits.size else None

    with np.errstate(invalid="ignore"):
        return {"looks": int(ok.sum()), "first_significant_at": first(p < alpha), "first_p_below_0_01_at": first(p < 0.01),
                "cs_missed_running_true_lift": int((np.abs(est - running) > half)[ok].sum()),
                "cs_missed_final_true_lift": int((np.abs(est - running[-1]) > half)[ok].sum())}


def run(config: ServiceConfig, arrivals: list[Arrival], truth: EngagementModel, *, experiment: str | None = None,
        noise: float = 0.0, seed: int = 0, alpha: float = 0.05, tick_s: float = 0.05,
        log: Path | None = None) -> dict[str, Any]:
    """Replay ``arrivals`` through ``config``, post ``truth + noise`` for every match, read the A/B report."""
    if experiment is None:
        if len(config.experiments) != 1:
            raise InvalidInput("experiment", "name the experiment: the config has "
                               + (", ".join(e.name for e in config.experiments) or "no experiments"))
        experiment = config.experiments[0].name
    exp = experiment_config(config, experiment)
    pools = experiment_pools(config, exp)
    if not pools:
        raise InvalidInput("experiment", f"experiment {experiment!r} covers no matchmaker pool of the config")
    holder: dict[str, Runtime] = {}

    def keep(rt: Runtime, _: SimTicket) -> None:
        holder.setdefault("rt", rt)

    learns = any(p.learning is not None for p in config.pools if p.name in pools)
    t0 = time.perf_counter()
    sim = simulate(config, arrivals, tick_s=tick_s, on_created=keep,
                   truth=Truth(truth, noise, seed) if learns else None)
    replay_s = time.perf_counter() - t0
    rt = holder["rt"]
    rng = np.random.default_rng(seed)
    arms = [a.name for a in exp.arms]
    true_by_arm: dict[str, list[float]] = {a: [] for a in arms}
    stream: list[tuple[float, str, float, float]] = []  # (time, arm, observed, truth) of every match
    for pool in pools:
        for rec in rt.store.iter_matches(pool):
            if rec.arm not in true_by_arm:
                continue
            e = true_engagement(truth, rec.teams)
            if learns:  # posted as the match formed
                if rec.result is None:
                    continue
                observed = float(rec.result["engagement"])
            else:
                observed = e + (float(rng.normal(0.0, noise)) if noise > 0 else 0.0)
                service.post_result(rt, rec.match_id, service.ResultIn(engagement=observed), None)
            true_by_arm[rec.arm].append(e)
            stream.append((rec.time, rec.arm, observed, e))
    stream.sort(key=lambda x: x[0])
    report = report_from_store(rt.store, rt.config, experiment, alpha=alpha)
    if log is not None:
        export_matchlog(rt.store, pools, log)
    control = report["control"]
    true_mean = {a: float(np.mean(v)) if v else None for a, v in true_by_arm.items()}
    arms_out = []
    for a in report["arms"]:
        lift = a["lift"]
        true_lift = (true_mean[a["name"]] - true_mean[control]
                     if lift is not None and true_mean[a["name"]] is not None and true_mean[control] is not None
                     else None)
        arms_out.append({"name": a["name"], "matches": a["matches"], "true_engagement_mean": true_mean[a["name"]],
                         "true_lift": true_lift,
                         "ci_covers_true_lift": None if true_lift is None else lift["ci"][0] <= true_lift <= lift["ci"][1],
                         "looks": None if a["control"] else every_look(stream, control, a["name"], alpha)})
    return {"experiment": experiment, "pools": pools, "noise": noise, "seed": seed, "tickets": len(arrivals),
            "matches": len(sim.matches), "replay_wall_s": replay_s, "truth": arms_out, "report": report}
