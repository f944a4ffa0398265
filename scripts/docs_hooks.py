"""mkdocs build hook: writes the generated pages (scripts/gen_docs.py) before mkdocs collects the files,
so that ``mkdocs build --strict`` from a fresh clone has the reference and the benchmark tables."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_GEN = Path(__file__).resolve().parent / "gen_docs.py"


def on_pre_build(config, **kwargs) -> None:
    spec = importlib.util.spec_from_file_location("gen_docs", _GEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate()
