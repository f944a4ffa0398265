"""Imports every solver module so that each registers its method name."""

from . import baselines, eomm, exact, explore, game_queue, lobby, local_search, mgmatch, skill, surrogate  # noqa: F401
