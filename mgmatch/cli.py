"""The ``mgmatch`` command: the service's commands (:mod:`mgmatch.app.commands`) and the lab's
(:mod:`mgmatch.lab.commands`: benchmarks, simulations, replay). It sits above both layers, so the
service package never imports the lab."""

from __future__ import annotations

from mgmatch.app.cli import SERVICE_COMMANDS
from mgmatch.app.cli import main as _main

COMMANDS = (*SERVICE_COMMANDS, "mgmatch.lab.commands")


def main(argv: list[str] | None = None) -> None:
    _main(argv, COMMANDS)
