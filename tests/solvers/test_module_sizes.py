"""Rooms a newcomer can live in: no module of the solvers or the core is over 600 lines unless its
docstring says why (a line starting with "Over 600 lines:")."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 600


@pytest.mark.parametrize("package", ["solvers", "core"])
def test_no_module_is_over_600_lines_without_a_reason(package):
    too_long = []
    for path in sorted((ROOT / package).rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > LIMIT and "Over 600 lines:" not in text[:4000]:
            too_long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert too_long == []
