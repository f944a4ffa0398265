"""A learning pool's refit (mgmatch.pipeline.refit): which held-out results judge a candidate."""

from __future__ import annotations

import json

from mgmatch.pipeline.refit import judging


def _log(path, rows):
    path.write_text("".join(json.dumps({"match_id": f"m{k}", "engagement": 1.0, **r}) + "\n"
                            for k, r in enumerate(rows)))


def test_the_live_versions_own_exploit_results_do_not_judge(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _log(a, [{"model_version": "v1", "policy": "exploit"}] * 15 + [{"model_version": "v2", "policy": "exploit"}] * 3)
    _log(b, [{"model_version": "v2", "policy": "explore"}] * 10 + [{}] * 10)   # explore and unversioned results judge
    rows, keep = judging([a, b], "v2")
    assert rows == 38
    assert keep.tolist() == list(range(15)) + list(range(18, 38))
    rows, keep = judging([a, b], "v1")
    assert keep.tolist() == list(range(15, 38))


def test_every_result_judges_when_too_few_would_remain(tmp_path):
    a = tmp_path / "a.jsonl"
    _log(a, [{"model_version": "v2", "policy": "exploit"}] * 30 + [{"model_version": "v1", "policy": "exploit"}] * 5)
    rows, keep = judging([a], "v2", min_rows=20)
    assert rows == 35 and keep.tolist() == list(range(35))
    assert judging([a], "v2", min_rows=5)[1].tolist() == list(range(30, 35))
