"""``mgmatch simulate wu``: Wu's greedy vs patient when-to-match policies against the closed forms."""

from __future__ import annotations

from typing import Annotated

import typer

from mgmatch.app.cli import emit, fail, seed_option, short_int, simulate_app


@simulate_app.command("wu", help="Simulate Wu's dynamic matching with teams (one arrival per period, high skill "
                                 "w.p. q, two teams of n) under the greedy or patient policy; prints JSON with "
                                 "cost_per_period next to the closed form.")
def wu_cmd(
    n: Annotated[int, typer.Option("--n", help="Team size n (a game is n vs n).")] = 5,
    q: Annotated[float, typer.Option("--q", help="Probability that an arrival is high skill.")] = 0.5,
    alpha: Annotated[float, typer.Option(help="Imbalance cost α per player per unit of |#H₁ − #H₂|.")] = 1.0,
    periods: Annotated[int, typer.Option(help="Simulated periods (arrivals).")] = 200_000,
    policy: Annotated[str, typer.Option(help="greedy or patient.")] = "greedy",
    seed: Annotated[int, seed_option(help="Seed.")] = 0,
) -> None:
    from mgmatch.lab.sim_wu import MAX_PERIODS, POLICIES, simulate

    if policy not in POLICIES:
        fail(f"--policy: expected one of {', '.join(POLICIES)}, got {policy!r}")
    if n < 1:
        fail(f"--n must be ≥ 1, got {short_int(n)}")
    if not 0.0 <= q <= 1.0:
        fail(f"--q must be in [0, 1], got {q}")
    if not alpha >= 0.0 or alpha == float("inf"):
        fail(f"--alpha must be a finite number ≥ 0, got {alpha}")
    if not 1 <= periods <= MAX_PERIODS:
        fail(f"--periods must be ≥ 1 and ≤ {MAX_PERIODS:,}, got {short_int(periods)}")
    emit(simulate(n, q, alpha, periods, policy, seed).to_json())
