"""Helpers of the pipeline tests: ``own_game`` (a small generated game that is not a preset)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
