"""Shared fixtures: the spec's worked example and small helpers."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

#: the spec and its worked example, carried by the repository (docs/spec)
SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec"
EXAMPLES = SPEC / "examples"


@pytest.fixture
def example_paths() -> dict[str, Path]:
    return {
        "instance": EXAMPLES / "instance-3v3-small.json",
        "engagement": EXAMPLES / "engagement-small.json",
        "expected": EXAMPLES / "expected-small.json",
    }


@pytest.fixture
def example_instance_obj(example_paths) -> dict:
    return json.loads(example_paths["instance"].read_text())


@pytest.fixture
def mutate(example_instance_obj):
    """Return a deep copy of the example instance, changed by ``fn``."""

    def _m(fn):
        obj = copy.deepcopy(example_instance_obj)
        fn(obj)
        return obj

    return _m
