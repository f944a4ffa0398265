"""``mgmatch replay``, ``mgmatch generate-tickets`` and ``mgmatch bench waits``: ticket streams pushed
through service configs offline on a simulated clock (:mod:`mgmatch.lab.replay`)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from mgmatch.app.cli import bench_app, cli, emit, fail, seed_option

_METRICS = (("matches", "matches formed", "{:d}"), ("players_matched", "players matched", "{:d}"),
            ("players_unmatched", "players left unmatched", "{:d}"), ("tickets_expired", "tickets expired", "{:d}"),
            ("refused", "tickets refused (player already queued)", "{:d}"),
            ("engagement_mean", "engagement mean (pool's model)", "{:.4f}"), ("wait_p50_s", "wait p50 (s)", "{:.2f}"),
            ("wait_p99_s", "wait p99 (s)", "{:.2f}"), ("wait_mean_s", "wait mean (s)", "{:.2f}"),
            ("skill_gap_mean", "skill gap between teams, mean", "{:.1f}"))


def _config(path: Path | None):
    from mgmatch.app.config import load_config

    return load_config(path)


def _truth(path: Path):
    """The truth model file (spec §3); exit 2 naming it when it cannot be read."""
    from mgmatch.core.engagement import load_engagement
    from mgmatch.core.errors import InvalidInput

    try:
        return load_engagement(path)
    except FileNotFoundError:
        fail(f"--truth: no such file {path}")
    except InvalidInput as err:
        fail(f"--truth: {err}")
    except (OSError, ValueError) as err:
        fail(f"--truth: cannot read {path}: {err}")


def _truth_fits(model, cfg, arrivals) -> None:
    """The truth model scores every pool of the stream: its teams and the tickets' feature width."""
    pools = {p.name: p for p in cfg.pools}
    for name in dict.fromkeys(a.pool for a in arrivals):
        p = pools[name]
        if model.teams != p.teams:
            fail(f"--truth: the model scores {model.teams} teams, pool {name} has {p.teams}")
        a = next(a for a in arrivals if a.pool == name)
        dim = len(a.players[0]["features"])
        if model.feature_dim != dim:
            fail(f"--truth: the model takes {model.feature_dim} features, the tickets of pool {name} carry {dim}")


def _fmt(v: Any, spec: str) -> str:
    return "—" if v is None else spec.format(v)


def _tick(tick_s: float) -> float:
    if not (tick_s > 0) or math.isinf(tick_s):
        fail(f"--tick-s must be a number > 0, got {tick_s}")
    return tick_s


#: most matchmaker ticks a replay (or ``bench waits``) may run: a tick every 0.05 s over ~5.8 days of live tickets
MAX_REPLAY_TICKS = 10_000_000


def _live_span_s(arrivals: list, configs: list) -> float:
    """Simulated seconds during which some ticket can be live: the union of [arrival, arrival + TTL]
    (the longest TTL any of ``configs`` gives the ticket's pool). The replay skips the ticks outside it."""
    ttl_of: dict[str, float] = {}
    for cfg in configs:
        for p in cfg.pools:
            ttl_of[p.name] = max(ttl_of.get(p.name, 0.0), float(p.ticket_ttl_s))
    default = max(ttl_of.values(), default=0.0)
    span, lo, hi = 0.0, None, None
    for a in arrivals:  # sorted by time
        end = a.time + (a.ttl_s if a.ttl_s is not None else ttl_of.get(a.pool, default))
        if hi is None or a.time > hi:
            if hi is not None:
                span += hi - lo
            lo, hi = a.time, end
        else:
            hi = max(hi, end)
    if hi is not None:
        span += hi - lo
    return span + default  # the drain after the last arrival (the longest TTL)


def _tick_budget(tick_s: float, arrivals: list, configs: list) -> None:
    """Refuse a ``--tick-s`` that would run more than :data:`MAX_REPLAY_TICKS` ticks over the stream."""
    span = _live_span_s(arrivals, configs)
    ticks = span / tick_s + len(arrivals)
    if ticks > MAX_REPLAY_TICKS:
        fail(f"--tick-s {tick_s:g} would run about {ticks:.3g} matchmaker ticks over the stream's {span:,.0f} s of "
             f"live tickets; at most {MAX_REPLAY_TICKS:,}: raise --tick-s to ≥ {span / MAX_REPLAY_TICKS:.3g}")


@cli.command("replay", help="Push a recorded ticket stream (mgmatch-tickets/v1 JSON Lines) through one or two "
                            "service configs offline, on a simulated clock with the real solvers, and compare "
                            "engagement, wait p50/p99, skill gap and matches formed: a table, or --json.")
def replay_cmd(
    tickets: Annotated[Path, typer.Option(help="The ticket stream (mgmatch-tickets/v1).")],
    config: Annotated[list[Path], typer.Option("--config", help="A service config (YAML); give it twice for A/B.")],
    tick_s: Annotated[float, typer.Option(help="Matchmaker tick in simulated seconds.")] = 0.05,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as one JSON document.")] = False,
    truth: Annotated[Path | None, typer.Option(help="A truth engagement model (spec §3) standing in for the players: "
                                                    "each match formed gets truth(teams) + Normal(0, noise²) as its "
                                                    "result, so a learning pool learns during the replay.")] = None,
    noise: Annotated[float, typer.Option(help="With --truth: the result noise's standard deviation (absolute).")] = 0.0,
    seed: Annotated[int, seed_option(help="With --truth: seed of the result noise.")] = 0,
    window_matches: Annotated[int, typer.Option(help="With --truth: matches per window of the --json windows.")] = 500,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from mgmatch.lab.replay import Truth, read_stream, simulate, summarize, validate

    if not 1 <= len(config) <= 2:
        fail(f"--config: give one or two configs, got {len(config)}")
    _tick(tick_s)
    if not (math.isfinite(noise) and noise >= 0):
        fail(f"--noise must be a finite number ≥ 0, got {noise}")
    if window_matches < 1:
        fail(f"--window-matches must be ≥ 1, got {window_matches}")
    truth_model = _truth(truth) if truth is not None else None
    arrivals = read_stream(tickets)
    configs = [_config(p) for p in config]
    _tick_budget(tick_s, arrivals, configs)
    for cfg in configs:  # every error before any run
        validate(cfg, arrivals, str(tickets))
        if truth_model is not None:
            _truth_fits(truth_model, cfg, arrivals)
    results = []
    for path, cfg in zip(config, configs, strict=True):
        t = Truth(truth_model, noise, seed) if truth_model is not None else None
        res = simulate(cfg, arrivals, tick_s=tick_s, truth=t)
        summary = summarize(res, window_matches if t is not None else None)
        if t is not None and "learning" in res.details:
            summary["learning"] = res.details["learning"]
        results.append({"config": str(path), **summary})
    if as_json:
        emit({"tickets_file": str(tickets), "tick_s": tick_s, "results": results}
             | ({"truth": str(truth), "noise": noise, "seed": seed, "window_matches": window_matches}
                if truth is not None else {}))
        return
    table = Table(title=f"replay of {tickets} ({results[0]['tickets']} tickets, "
                        f"{results[0]['simulated_s']:.0f} simulated s)")
    table.add_column("metric", no_wrap=True)
    for arm, r in zip("AB", results, strict=False):
        table.add_column(f"{arm}: {Path(r['config']).name}", justify="right")
    for key, label, spec in _METRICS:
        table.add_row(label, *(_fmt(r[key], spec) for r in results))
    if truth is not None:
        table.add_row("true engagement mean (--truth)", *(_fmt(r["true_engagement_mean"], "{:.4f}") for r in results))
        last = [r["windows"][-1]["true_engagement_mean"] if r["windows"] else None for r in results]
        table.add_row("true engagement, last window", *(_fmt(v, "{:.4f}") for v in last))
    top = [r["unmatched_reasons"][0] if r["unmatched_reasons"] else None for r in results]
    table.add_row("top unmatched reason (players)",
                  *("—" if t is None else f"{t['reason']} ({t['players']})" for t in top))
    Console(file=sys.stdout, width=160).print(table)


#: most tickets a generated stream may hold (--rate × --duration); each is a few KB of JSON
MAX_STREAM_TICKETS = 1_000_000
#: largest party of a generated stream (a ticket holds at most 64 players)
MAX_PARTY = 64


def _stream_args(rate: float, duration: float, party_share: float, max_party: int) -> None:
    if not (rate > 0) or math.isinf(rate):
        fail(f"--rate must be a number > 0, got {rate}")
    if not (duration > 0) or math.isinf(duration):
        fail(f"--duration must be a number > 0, got {duration}")
    if rate * duration > MAX_STREAM_TICKETS:
        fail(f"--rate × --duration must be ≤ {MAX_STREAM_TICKETS:,} tickets, got {rate * duration:.3g}")
    if not 0 <= party_share <= 1:
        fail(f"--party-share must be in [0, 1], got {party_share}")
    if not 1 <= max_party <= MAX_PARTY:
        fail(f"--max-party must be ≥ 1 and ≤ {MAX_PARTY}, got {max_party}")


def _preset(preset: str) -> None:
    from mgmatch.core.presets import PRESETS

    if preset not in PRESETS:
        fail(f"--preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")


def _party_fits(preset: str, max_party: int) -> None:
    """A party must fit the preset's smallest team (as ``PoolConfig.check_fit`` refuses it in replay)."""
    from mgmatch.core.presets import PRESETS

    team = PRESETS[preset].team_size
    if max_party > team:
        fail(f"--max-party: a party of {max_party} does not fit a team of {team} (preset {preset})")


def _pool_name(pool: str) -> None:
    """The service's pool-name rule (``config.POOL_NAME``): what replay and the API accept."""
    import re

    from mgmatch.app.config import POOL_NAME

    if not re.fullmatch(POOL_NAME, pool):
        shown = pool if len(pool) <= 40 else pool[:40] + "…"
        fail(f"--pool: {shown!r} is not a pool name: 1–32 characters, lower-case letters, digits and '-', "
             f"starting with a letter or digit")


@cli.command("generate-tickets", help="Write a seeded ticket stream (mgmatch-tickets/v1) for one pool: arrivals "
                                      "at --rate tickets/s for --duration s, players from a preset's player world.")
def generate_tickets_cmd(
    out: Annotated[Path, typer.Option(help="Output file (.jsonl).")],
    preset: Annotated[str, typer.Option(help="Scenario preset whose players are drawn.")] = "3v3",
    pool: Annotated[str, typer.Option(help="Pool name written on every ticket.")] = "3v3",
    rate: Annotated[float, typer.Option(help="Tickets per second.")] = 1.0,
    duration: Annotated[float, typer.Option(help="Seconds of arrivals.")] = 600.0,
    arrivals: Annotated[str, typer.Option(help="poisson (exponential gaps) or steady (evenly spaced).")] = "poisson",
    party_share: Annotated[float, typer.Option(help="Share of tickets that are parties.")] = 0.0,
    max_party: Annotated[int, typer.Option(help="Largest party.")] = 2,
    seed: Annotated[int, seed_option(help="Seed.")] = 0,
) -> None:
    from mgmatch.lab.replay import generate_stream, write_stream

    _preset(preset)
    _pool_name(pool)
    _stream_args(rate, duration, party_share, max_party)
    _party_fits(preset, max_party)
    if arrivals not in ("poisson", "steady"):
        fail(f"--arrivals: expected poisson or steady, got {arrivals!r}")
    lines = generate_stream(preset, pool, rate, duration, seed, arrivals, party_share, max_party)
    try:
        write_stream(lines, out)
    except OSError as err:
        fail(f"--out: cannot write {out}: {err.strerror}")
    emit({"out": str(out), "tickets": len(lines), "players": sum(len(x["players"]) for x in lines)})


@bench_app.command("waits", help="Measure estimated_wait_s against the real waits: a ticket stream (generated and "
                                 "seeded, or --tickets) through a service config on a simulated clock; each "
                                 "ticket's estimate is read right after it is stored. A table, or --json FILE.")
def bench_waits_cmd(
    config: Annotated[Path | None, typer.Option(help="Service config (default: the built-in pools).")] = None,
    tickets: Annotated[Path | None, typer.Option(help="A ticket stream to use instead of a generated one.")] = None,
    preset: Annotated[str, typer.Option(help="Preset whose players are drawn (generated stream).")] = "3v3",
    pool: Annotated[str, typer.Option(help="Pool of the generated stream.")] = "3v3",
    rate: Annotated[float, typer.Option(help="Tickets per second (generated stream).")] = 1.0,
    duration: Annotated[float, typer.Option(help="Seconds of arrivals (generated stream).")] = 600.0,
    arrivals: Annotated[str, typer.Option(help="poisson or steady (generated stream).")] = "poisson",
    party_share: Annotated[float, typer.Option(help="Share of party tickets (generated stream).")] = 0.0,
    max_party: Annotated[int, typer.Option(help="Largest party (generated stream).")] = 2,
    seed: Annotated[int, seed_option(help="Seed (generated stream).")] = 0,
    tick_s: Annotated[float, typer.Option(help="Matchmaker tick in simulated seconds.")] = 0.05,
    json_file: Annotated[Path | None, typer.Option("--json", help="Write the JSON results here.")] = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    from mgmatch.lab.replay import bench_waits, generate_stream, parse_arrival, read_stream, validate

    _tick(tick_s)
    cfg = _config(config)
    if tickets is not None:
        stream = read_stream(tickets)
        where = str(tickets)
    else:
        _preset(preset)
        _stream_args(rate, duration, party_share, max_party)
        if arrivals not in ("poisson", "steady"):
            fail(f"--arrivals: expected poisson or steady, got {arrivals!r}")
        if cfg.pool(pool) is None:
            fail(f"--pool: unknown pool {pool!r}; the config has {', '.join(p.name for p in cfg.pools)}")
        lines = generate_stream(preset, pool, rate, duration, seed, arrivals, party_share, max_party)
        stream = [parse_arrival(obj, n, "generated") for n, obj in enumerate(lines, 1)]
        where = "generated"
    _tick_budget(tick_s, stream, [cfg])
    validate(cfg, stream, where)
    res = bench_waits(cfg, stream, tick_s=tick_s)
    res["setup"] = {"config": str(config) if config else "built-in", "tickets_file": str(tickets) if tickets else None,
                    "preset": preset, "pool": pool, "rate": rate, "duration": duration, "arrivals": arrivals,
                    "party_share": party_share, "max_party": max_party, "seed": seed, "tick_s": tick_s}
    table = Table(title=f"wait estimates vs real waits ({res['scored']} tickets scored of {res['tickets']}; "
                        f"real wait mean {_fmt(res['real_wait_mean_s'], '{:.2f}')} s, "
                        f"estimate mean {_fmt(res['estimate_mean_s'], '{:.2f}')} s)")
    for col in ("estimator", "n", "median |est−real|/real", "p90", "within 30%", "mean |est−real| s"):
        table.add_column(col, justify="right")
    for name, key in (("estimated_wait_s", "estimate"), ("players ahead / throughput", "queue_drain_baseline")):
        e = res[key]
        table.add_row(name, str(e["n"]), _fmt(e["median_rel_error"], "{:.1%}"), _fmt(e["p90_rel_error"], "{:.1%}"),
                      _fmt(e["within_30pct"], "{:.1%}"), _fmt(e["mean_abs_error_s"], "{:.2f}"))
    Console(file=sys.stdout, width=140).print(table)
    if json_file is not None:
        try:
            json_file.parent.mkdir(parents=True, exist_ok=True)
            json_file.write_text(json.dumps(res, indent=2, allow_nan=False) + "\n")
        except OSError as err:
            fail(f"--json: cannot write {json_file}: {err.strerror}")
