"""The dependency check (scripts/check-deps.py) and the smoke's reading of ``mgmatch solve --help``.

The install smoke itself (tests/install/smoke.py) is not a pytest module: scripts/install-smoke.sh
runs it with the Python of each fresh environment.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


check_deps = _load("check_deps", ROOT / "scripts" / "check-deps.py")
smoke = _load("install_smoke", ROOT / "tests" / "install" / "smoke.py")


def test_imports_are_read_from_every_scope_but_not_from_fallbacks(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(textwrap.dedent("""
        import numpy as np
        from sortedcontainers import SortedList
        from . import sibling
        from mgmatch.core import errors

        try:
            from typer._click import exceptions
        except ImportError:
            from click import exceptions

        def late():
            import ortools.sat.python.cp_model
            from yaml import safe_load
    """))
    assert check_deps.imported_modules(src) == {"numpy", "sortedcontainers", "mgmatch", "typer", "ortools", "yaml"}


def test_requirements_are_split_into_name_and_bounds():
    assert check_deps.parse_requirement("uvicorn[standard]>=0.29") == ("uvicorn", "[standard]>=0.29")
    assert check_deps.parse_requirement("pydantic_settings>=2.3  # settings") == ("pydantic-settings", ">=2.3")
    assert check_deps.parse_requirement("protobuf>=6.33,<6.34") == ("protobuf", ">=6.33,<6.34")


def test_the_repository_declares_exactly_what_it_imports(capsys):
    assert check_deps.main() == 0, capsys.readouterr().out
    used = check_deps.used_distributions()
    assert "sortedcontainers" in used and "anyio" in used  # the two that were missing (issue 9)
    assert "openskill" not in used and used["torch-geometric"] == {"models/networks.py"}


def test_methods_are_read_from_help_with_nested_parentheses_and_semicolons():
    help_text = (
        "│ --method  -m  <str>  Method: bgcn (BGCN: prediction → MIP (SCIP); 100 ms default); eomm (EOMM: churn\n"
        "│                      (openskill outcomes, logistic churn; blossom for 1v1)); random (Random: sample)\n"
        "│                      [default: exact]\n"
    )
    assert smoke.listed_methods(help_text) == ["bgcn", "eomm", "random"]
