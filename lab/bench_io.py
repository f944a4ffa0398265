"""What the store benches' commands (``bench backfill``, ``bench ready``, ``bench ratings``) share: ``--json``'s
folder checked up front, the run's input and store errors as one line naming the flag, the result written as
JSON and printed as Markdown, and exit 1 when the run found a fault."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from mgmatch.app.cli import fail

R = TypeVar("R")


def check_json_out(json_file: Path | None) -> None:
    """``--json``'s folder must exist before the run (else exit 2 naming the flag)."""
    if json_file is not None and not json_file.parent.is_dir():
        fail(f"--json: no directory {json_file.parent}")


def run_bench(run: Callable[[], R]) -> R:
    """``run()``, with bad input (exit 2 naming its flag) and an unreachable store (``--redis-url``) as one line."""
    from mgmatch.app.store import StoreUnavailable
    from mgmatch.core.errors import InvalidInput

    try:
        return run()
    except InvalidInput as err:
        fail(f"--{err.field.replace('_', '-')}: {err.message}")
    except StoreUnavailable as err:
        fail(f"--redis-url: {err}")


def report(res: Any, json_file: Path | None, ok: bool) -> None:
    """Write ``res.to_json()`` to ``json_file`` (if given), print ``res.markdown()``, exit 1 unless ``ok``."""
    if json_file is not None:
        try:
            json_file.write_text(json.dumps(res.to_json(), indent=1, allow_nan=False))
        except OSError as err:
            fail(f"--json: cannot write {json_file}: {err.strerror}")
    sys.stdout.write(res.markdown())
    if not ok:
        raise typer.Exit(1)
