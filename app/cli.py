"""The ``mgmatch`` command line (spec §4).

Commands live in small modules under ``mgmatch.app.commands``; each registers itself on one of
the Typer apps below. Bad input anywhere ends with exit 2 and one line on stderr.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import math
import os
import pkgutil
import re
import sys
from typing import Any, NoReturn

import typer
from typer._click import (
    exceptions as cx,  # typer ≥ 0.26 vendors its own click; its exceptions are not click's
)

from mgmatch.core.errors import InvalidInput

cli = typer.Typer(
    name="mgmatch",
    help="Real-time matchmaking that maximizes predicted engagement under hard rules.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
simulate_app = typer.Typer(help="Simulations that reproduce the source papers' experiments.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks (speed and quality); results as Markdown/JSON.", no_args_is_help=True)
cli.add_typer(simulate_app, name="simulate")
cli.add_typer(bench_app, name="bench")


class UsageFailure(Exception):
    """Raised by commands for bad input: printed as one line, exit 2."""


def fail(message: str) -> NoReturn:
    raise UsageFailure(message)


#: largest seed a command takes: numpy's seed sequences need seeds ≥ 0, OR-Tools (optmatch) seeds < 2**31
MAX_SEED = 2**31 - 1

#: largest ``--time-limit-ms`` of ``mgmatch solve``: a day. The HTTP API caps a request at
#: ``MGMATCH_MAX_TIME_LIMIT_MS`` (10 s); offline solves may run far longer, but never unbounded (the
#: local searches use all of their budget, so ``1e308`` ran until it was killed).
MAX_TIME_LIMIT_MS = 86_400_000.0

#: import name → (distribution, extra) for what ``pip install mgmatch`` leaves out on purpose: the torch side
#: and the offline tools (``[train]``), the lab's (``[lab]``), distributed labelling (``[ray]``). A command that
#: needs one of them exits 2 naming the extra instead of a traceback; scripts/check-deps.py checks the table
#: against pyproject's extras and every function-local import of an extra's distribution against the table.
EXTRA_OF = {"torch": ("torch", "train"), "torch_geometric": ("torch-geometric", "train"), "onnx": ("onnx", "train"),
            "matplotlib": ("matplotlib", "train"), "tqdm": ("tqdm", "train"), "ray": ("ray", "ray"),
            "rich": ("rich", "lab")}
#: what the lab's extra holds among those: a lab command missing one names ``[lab]`` (matplotlib is in both)
LAB_EXTRA = {"rich", "matplotlib"}


def short_int(v: int) -> str:
    """An integer for an error message: its digits, or its size when it has more than 20."""
    return str(v) if abs(v) < 10**20 else f"an integer of about {int(abs(v).bit_length() * 0.30103) + 1} digits"


def seed_option(*names: str, help: str) -> Any:
    """The ``--seed`` option of every command: an integer in 0 … :data:`MAX_SEED` (else exit 2 naming it)."""
    return typer.Option(*names, help=help, min=0, max=MAX_SEED)


def check_time_limit_ms(value: float | None, flag: str = "--time-limit-ms") -> None:
    """A wall-clock budget in ms: finite, > 0 and ≤ :data:`MAX_TIME_LIMIT_MS` (else exit 2 naming ``flag``)."""
    if value is None:
        return
    if not (value > 0 and math.isfinite(value)):
        fail(f"{flag} must be a finite number > 0, got {value}")
    if value > MAX_TIME_LIMIT_MS:
        fail(f"{flag} must be ≤ {MAX_TIME_LIMIT_MS:,.0f} (a day), got {value:g}")


def emit(obj: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(obj, allow_nan=False) + "\n")
    sys.stdout.flush()


#: the service's command modules; the full CLI (:mod:`mgmatch.cli`) adds the lab's
SERVICE_COMMANDS = ("mgmatch.app.commands",)


#: the Typer apps that command modules register on, by the variable name they use, and the command group
#: each stands for (None: the top level)
_APPS = {"cli": None, "bench_app": "bench", "simulate_app": "simulate"}
#: ``@<app>.command("name"`` and ``cli.add_typer(<app>, name="name")`` in a command module's source
_COMMAND_RE = re.compile(r'@(\w+)\.command\(\s*"([\w-]+)"')
_GROUP_RE = re.compile(r'cli\.add_typer\(\s*\w+\s*,\s*name\s*=\s*"([\w-]+)"')


def _command_modules(packages: tuple[str, ...]) -> list[str]:
    """Every command module of ``packages``, sorted by name within each package."""
    out = []
    for name in packages:
        package = importlib.import_module(name)
        out += [f"{name}.{m.name}" for m in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name)]
    return out


def command_index(packages: tuple[str, ...] = SERVICE_COMMANDS) -> dict[tuple[str, ...], str]:
    """``("solve",)``, ``("bench", "push")``, ``("models",)`` … → the module that defines the command, read
    from the modules' source (nothing imported): a run imports only the module of the command it runs."""
    index: dict[tuple[str, ...], str] = {}
    for module in _command_modules(packages):
        spec = importlib.util.find_spec(module)
        origin = getattr(spec, "origin", None)
        if not origin or not origin.endswith(".py"):
            continue
        with open(origin, encoding="utf-8") as f:
            source = f.read()
        for app, name in _COMMAND_RE.findall(source):
            if app in _APPS:
                group = _APPS[app]
                index[(name,) if group is None else (group, name)] = module
        for group in _GROUP_RE.findall(source):
            index[(group,)] = module
    return index


def _wanted(args: list[str], index: dict[tuple[str, ...], str]) -> str | None:
    """The one module that defines the command ``args`` run, or None when they run none or several (help of
    the top level or of a group, an unknown command): then every command is loaded."""
    words = list(itertools.takewhile(lambda a: not a.startswith("-"), args))[:2]
    for n in (2, 1):
        if len(words) >= n and tuple(words[:n]) in index:
            return index[tuple(words[:n])]
    return None


def _load_commands(packages: tuple[str, ...] = SERVICE_COMMANDS, args: list[str] | None = None) -> None:
    """Import the command modules: with ``args``, only the one that defines the command they run (a command
    starts in a fraction of the time the whole CLI takes to import), else every one."""
    if args is not None:
        try:
            module = _wanted(args, command_index(packages))
        except (OSError, ImportError):  # a package without readable sources: load everything
            module = None
        if module is not None:
            importlib.import_module(module)
            return
    for module in _command_modules(packages):
        importlib.import_module(module)


def _command_name(command: Any, args: list[str]) -> str:
    """``bench predictor`` for args ``["bench", "predictor", "--count", …]``."""
    names: list[str] = []
    for arg in args:
        sub = (getattr(command, "commands", None) or {}).get(arg)
        if sub is None:
            break
        names.append(arg)
        command = sub
    return " ".join(names) or "this command"


def missing_package_message(err: ImportError, command: str = "this command", lab: bool = False) -> str | None:
    """The one line for a package an extra provides (:data:`EXTRA_OF`), or None for any other.

    ``lab``: the command is one of the lab's (``mgmatch.lab``), which names ``[lab]`` for what that extra holds.
    """
    top = (err.name or "").split(".")[0]
    if top not in EXTRA_OF:
        return None
    dist, extra = EXTRA_OF[top]
    if lab and top in LAB_EXTRA:
        extra = "lab"
    what = {"train": "the training tools", "lab": "the lab's benchmarks and simulations",
            "ray": "distributed labelling"}.get(extra, extra)
    return (f"{command} needs {dist}, which is not installed here (pip install mgmatch leaves out {what}): "
            f"pip install 'mgmatch[{extra}]'")


def _is_lab_command(command: Any, args: list[str]) -> bool:
    """Whether ``args`` name a command of the lab (its callback lives in ``mgmatch.lab``)."""
    for arg in args:
        sub = (getattr(command, "commands", None) or {}).get(arg)
        if sub is None:
            break
        command = sub
    return (getattr(getattr(command, "callback", None), "__module__", "") or "").startswith("mgmatch.lab")


#: the OSErrors that mean a path the user gave cannot be used (the one line names the path); any other
#: OSError, or one without a file name, is a bug and keeps its traceback
_PATH_ERRORS = (NotADirectoryError, IsADirectoryError, FileExistsError, PermissionError, FileNotFoundError)


def path_error_message(err: OSError) -> str | None:
    """``<path>: <reason>`` for an OSError on a path (:data:`_PATH_ERRORS` with a file name), else None."""
    if not isinstance(err, _PATH_ERRORS) or not err.filename:
        return None
    name = os.fsdecode(err.filename) if isinstance(err.filename, (str, bytes, os.PathLike)) else str(err.filename)
    reason = err.strerror or type(err).__name__
    return f"{name}: {reason}".splitlines()[0]


def main(argv: list[str] | None = None, packages: tuple[str, ...] = SERVICE_COMMANDS) -> None:
    """Run the CLI with the commands of ``packages`` (the service's alone by default)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _load_commands(packages, args)
    command = typer.main.get_command(cli)
    try:
        rv = command.main(args=args, prog_name="mgmatch", standalone_mode=False)
    except cx.NoArgsIsHelpError as err:  # pragma: no cover - prints help
        sys.stdout.write((err.ctx.get_help() if err.ctx else str(err)) + "\n")
        sys.exit(2)
    except cx.UsageError as err:
        sys.stderr.write(f"mgmatch: {err.format_message().splitlines()[0]}\n")
        sys.exit(2)
    except (InvalidInput, UsageFailure) as err:
        sys.stderr.write(f"mgmatch: {str(err).splitlines()[0]}\n")
        sys.exit(2)
    except ImportError as err:  # the service image has no torch, tqdm, …: the offline commands say so
        message = missing_package_message(err, _command_name(command, args), _is_lab_command(command, args))
        if message is None:
            raise
        sys.stderr.write(f"mgmatch: {message}\n")
        sys.exit(2)
    except OSError as err:  # a path the user gave: a file where a directory must be, no permission, …
        message = path_error_message(err)
        if message is None:
            raise
        sys.stderr.write(f"mgmatch: {message}\n")
        sys.exit(2)
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except typer.Abort:
        sys.stderr.write("mgmatch: aborted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.stderr.write("mgmatch: interrupted\n")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)
