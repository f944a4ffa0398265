"""The optional §5 fields a learning pool's match log carries: model_version, policy, propensity."""

from __future__ import annotations

import json

import pytest

from mgmatch.core.errors import InvalidInput
from mgmatch.pipeline.matchlog import load_matchlog


def line(**extra):
    return json.dumps({"format": "mgmatch-matchlog/v1", "teams": [[{"id": "a", "features": [1.0, 2.0]}],
                                                                  [{"id": "b", "features": [0.5, 0.0]}]],
                       "engagement": 0.5, **extra})


def test_the_learning_fields_are_accepted(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text(line(model_version="3fa2c1d0e9b8", policy="explore", propensity=0.2) + "\n")
    assert load_matchlog([p]).matches == 1


@pytest.mark.parametrize(("key", "value"), [("propensity", 0), ("propensity", 1.5), ("propensity", "0.2"),
                                            ("policy", ""), ("policy", 3), ("model_version", [])])
def test_a_bad_learning_field_names_line_and_field(tmp_path, key, value):
    p = tmp_path / "log.jsonl"
    p.write_text(line() + "\n" + line(**{key: value}) + "\n")
    with pytest.raises(InvalidInput) as err:
        load_matchlog([p])
    assert err.value.field == f"log.jsonl line 2, {key}"
