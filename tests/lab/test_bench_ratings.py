"""``mgmatch bench ratings`` runs end to end on a small, contended workload: every player's games count
matches the matches they played, retries change nothing; bad arguments exit 2 naming the option."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mgmatch.lab.ratings_bench import run_ratings_bench


def test_a_contended_run_counts_every_game_once():
    r = run_ratings_bench("memory", matches=60, team_size=2, players=8, threads=4, seed=3, repeat_share=0.5)
    assert r.ok and r.statuses == {"applied": 60} and r.ratings_per_s > 0
    assert r.to_json()["games_mismatched"] == 0 and "ratings written per second" in r.markdown()


@pytest.mark.service  # runs the command line as a user does, in a process of its own
def test_bad_arguments_exit_2_naming_the_option():
    for args, option in ((["--players", "3"], "--players"), (["--store", "disk"], "--store")):
        p = subprocess.run([sys.executable, "-c", "from mgmatch.cli import main; main()", "bench", "ratings", *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.startswith(f"mgmatch: {option}:"), p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
