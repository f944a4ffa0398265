"""Imports every solver module so that each registers its method name."""

from . import exact  # noqa: F401
