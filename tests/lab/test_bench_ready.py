"""``mgmatch bench ready`` end to end on a small queue: with declines, every ticket ends matched,
declined, or queued as a leftover; requeued tickets are matched later; nobody is in two matches."""

from __future__ import annotations

from mgmatch.lab.ready_bench import run_ready_bench


def test_with_declines_nothing_is_lost_and_requeued_players_match_later():
    r = run_ready_bench("3v3", "memory", tickets=60, decline_share=0.2, seed=4, max_s=120)
    assert r.ok and r.lost == 0 and r.double_booked == 0, r.markdown()
    assert r.declined_checks > 0 and r.confirmed > 0 and r.requeued_then_matched > 0, r.markdown()
    assert r.by_status.get("declined", 0) == r.declined_checks
    assert sum(r.by_status.values()) == 60 and r.leftover < 6
