"""Imports every solver module so that each registers its method name."""

from . import baselines, eomm, exact, game_queue, lobby, local_search, mgmatch, surrogate  # noqa: F401
