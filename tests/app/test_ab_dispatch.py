"""An A/B arm's own dispatch policy: used for its tickets under ``key: player`` (they are matched among
themselves), refused at start-up where the arm is drawn after the dispatch decision, and checked
against the pools the experiment covers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from svc_helpers import features, service_config  # noqa: E402

from mgmatch.app.matchmaker import Matchmaker  # noqa: E402
from mgmatch.app.runtime import Runtime  # noqa: E402
from mgmatch.app.settings import Settings  # noqa: E402
from mgmatch.app.store import Ticket, new_ticket_id  # noqa: E402
from mgmatch.core.errors import InvalidInput  # noqa: E402


def _config(tmp_path: Path, experiment: dict) -> Path:
    path = service_config(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg["experiments"] = [experiment]
    path.write_text(yaml.safe_dump(cfg))
    return path


def _queue(rt: Runtime, arm: str, n: int, start: int) -> list[str]:
    now = time.time()
    items = [(Ticket(new_ticket_id("small"), "small", [{"id": f"{arm}{i}", "features": features(start + i)}],
                     now - 10, now + 300, arm=arm), None) for i in range(n)]
    return [res[0].id for res in rt.store.create_many(items)]


def test_an_arm_with_its_own_dispatch_policy_decides_for_its_tickets(tmp_path):
    """Arm ``hold`` batches its tickets in hourly rounds; arm ``now`` keeps the pool's immediate policy:
    one tick matches the six ``now`` tickets and none of ``hold``'s."""
    rt = Runtime.build(Settings(config=_config(tmp_path, {
        "name": "e", "pools": ["small"], "key": "player",
        "arms": [{"name": "hold", "weight": 1, "dispatch": {"policy": "batch", "params": {"interval_s": 3600}}},
                 {"name": "now", "weight": 1}]}), store="memory"))
    rt.warm()
    held, prompt = _queue(rt, "hold", 6, 0), _queue(rt, "now", 6, 6)
    mm = Matchmaker(rt.pools["small"], rt.store, rt.runner, rt.experiments)
    assert mm.tick() >= 1
    assert all(rt.store.get(t).status == "matched" for t in prompt)
    assert all(rt.store.get(t).status == "queued" for t in held)


@pytest.mark.parametrize("experiment, field", [
    ({"name": "e", "pools": ["small"], "key": "match",
      "arms": [{"name": "a", "dispatch": {"policy": "batch", "params": {"interval_s": 5}}}]},
     "experiments[0].arms[0].dispatch"),
    ({"name": "e", "pools": ["small"], "key": "player",
      "arms": [{"name": "a"}, {"name": "b", "dispatch": {"policy": "nope"}}]},
     "experiments[0].arms[1].dispatch.params"),
    ({"name": "e", "pools": ["small"], "key": "player",
      "arms": [{"name": "a", "dispatch": {"policy": "batch", "params": {"interval_s": -1}}}]},
     "experiments[0].arms[0].dispatch.params.interval_s"),
    ({"name": "e", "pools": ["small"], "key": "player",
      "arms": [{"name": "a", "dispatch": {"policy": "immediate", "params": {"max_candidates": 50}}}]},
     "experiments[0].arms[0].dispatch.params.max_candidates"),
])
def test_an_arm_dispatch_policy_that_cannot_run_fails_at_start_up(tmp_path, experiment, field):
    with pytest.raises(InvalidInput) as err:
        Runtime.build(Settings(config=_config(tmp_path, experiment), store="memory"))
    assert err.value.field.startswith(field), str(err.value)
