"""Imports every solver module so that each registers its method name."""

from . import exact  # noqa: F401
from . import baselines, mgmatch  # noqa: F401
from . import eomm, local_search  # noqa: F401
