"""The lift benchmark's page (mgmatch.lab.lift.page): one row per run, and each world's mean over its seeds."""

from __future__ import annotations

from mgmatch.lab.lift import page


def _run(world, seed, cap, safe=True):
    arm = {"true_engagement_mean": 1.0, "windows": [], "seconds": 1.0}
    return {"world": world, "seed": seed, "stem": f"{world}-seed{seed}", "matches": 2000, "history": {"matches": 5000},
            "window_matches": 250, "seconds": 10.0, "starting_model": {"holdout_r2": 0.8},
            "last_half_true_engagement": {"skill": 1.0, "learning": 1.0 + cap, "truth": 2.0},
            "arms": {"skill": arm, "learning": {**arm, "explore_share": 0.1, "refits": [{"outcome": "live"}]}},
            "lift_capture_learning": cap, "safety": {"safe": safe}}


def test_several_seeds_give_each_run_and_the_worlds_mean():
    text = page([_run("5v5", 0, 0.5), _run("5v5", 1, 0.7, safe=False), _run("mentor", 0, 0.9)], "mgmatch bench lift")
    assert "| 5v5 | 0 | 2000 |" in text and "| 5v5 | 1 | 2000 |" in text
    assert "| 5v5 | 2 | **0.60** | 0.50 | 0.70 | 1 / 2 |" in text
    assert "| mentor | 1 | **0.90** | 0.90 | 0.90 | 1 / 1 |" in text
    assert "![true engagement per window, 5v5, seed 1](lift-5v5-seed1.png)" in text


def test_one_seed_keeps_one_row_per_world_and_no_means():
    one = _run("5v5", 0, 0.5)
    one["stem"] = "5v5"
    text = page([one], "mgmatch bench lift")
    assert "mean lift capture" not in text and "![true engagement per window, 5v5](lift-5v5.png)" in text
