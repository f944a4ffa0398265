"""mgmatch: real-time matchmaking that maximizes predicted engagement under hard rules.

The code lives in top-level folders mapped onto this namespace by pyproject.toml:
``core`` → ``mgmatch.core``, ``solvers`` → ``mgmatch.solvers``, ``models`` → ``mgmatch.models``,
``app`` → ``mgmatch.app``, ``pipeline`` → ``mgmatch.pipeline``.
"""

__version__ = "0.1.0"
