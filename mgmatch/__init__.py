"""mgmatch: real-time matchmaking that maximizes predicted engagement under hard rules.

The code lives in top-level folders mapped onto this namespace by pyproject.toml:
``core`` → ``mgmatch.core``, ``solvers`` → ``mgmatch.solvers``, ``models`` → ``mgmatch.models``,
``app`` → ``mgmatch.app``, ``pipeline`` → ``mgmatch.pipeline``.
"""

import os as _os

# One BLAS thread unless the user sets OPENBLAS_NUM_THREADS (read when numpy loads OpenBLAS, so
# before any mgmatch module imports numpy). The solvers' matrix products are small and many, and
# OpenBLAS's worker threads spin on the other core between them: the same
# `mgmatch bench quality --preset 12v12 --budgets 10,20,50,100 --count 20` took 23.3 s of CPU for
# 15.0 s of wall time with them, 14.2 s for 14.4 s without; a second solver worker or the API
# needs that core. Training sets torch's own threads (--threads).
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
