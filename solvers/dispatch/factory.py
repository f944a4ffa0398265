"""``make_policy(name, **params)``: a dispatch policy by name, every parameter validated."""

from __future__ import annotations

from typing import Any

from mgmatch.core.errors import InvalidInput

from .base import BasePolicy
from .batch import Batch
from .contract import Policy
from .game_queue import GameQueuePolicy
from .immediate import Immediate
from .quality_threshold import QualityThreshold
from .wu import WuPolicy

#: policy name → class (each parses its own parameters in ``from_params``)
POLICY_CLASSES: dict[str, type[BasePolicy]] = {
    "immediate": Immediate,
    "batch": Batch,
    "quality_threshold": QualityThreshold,
    "wu": WuPolicy,
    "game_queue": GameQueuePolicy,
}
POLICIES = tuple(POLICY_CLASSES)


def make_policy(name: str, **params: Any) -> Policy:
    """Build a policy by name; every parameter is validated (InvalidInput names the bad one)."""
    cls = POLICY_CLASSES.get(name)
    if cls is None:
        raise InvalidInput("policy", f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}")
    return cls.from_params(dict(params))
