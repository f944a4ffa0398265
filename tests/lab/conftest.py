"""The lab's tests (benchmarks, chaos, replay, simulations) share the service tests' helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))
