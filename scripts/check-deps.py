#!/usr/bin/env python3
"""Check that the declared dependencies are exactly the packages the code imports.

Reads every ``.py`` file of the package folders (module-level and function-local imports alike;
an import inside an ``except ImportError:`` fallback does not count), maps each third-party
top-level module to its distribution and reports:

- a distribution imported but not declared in pyproject's ``dependencies`` (or, for the ones in
  ``OPTIONAL``, in that extra);
- a declared distribution nothing imports (``INDIRECT`` lists the ones used without an import
  statement of ours);
- a distribution the service needs (everything but ``NOT_IN_IMAGE``) missing from
  ``deploy/requirements-service.txt``, one there that the code does not use or that the image must
  not have, and a requirement whose version bounds differ from pyproject's.

Exit status 1 on any finding; the last line is a summary. Run: ``python scripts/check-deps.py``.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "solvers", "models", "pipeline", "app", "lab")
REQUIREMENTS = ROOT / "deploy" / "requirements-service.txt"
#: import name → distribution name, where they differ
DIST_OF = {
    "yaml": "pyyaml", "google": "protobuf", "grpc": "grpcio", "grpc_tools": "grpcio-tools",
    "prometheus_client": "prometheus-client", "pydantic_settings": "pydantic-settings",
    "torch_geometric": "torch-geometric", "sklearn": "scikit-learn",
}
#: distributions that come from an extra rather than the core dependencies
OPTIONAL = {"grpcio": "grpc", "protobuf": "grpc", "ray": "ray"}
#: the torch side and offline tools (training, export, plots, distributed labelling): not in the image
NOT_IN_IMAGE = {"torch", "torch-geometric", "onnx", "matplotlib", "tqdm", "ray"}
#: declared distributions used without an import statement of ours, and why
INDIRECT = {"onnx": "torch.onnx.export imports it at run time (models/export.py); torch does not declare it"}


def _fallback_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside ``except ImportError``/``ModuleNotFoundError`` handlers."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            for h in node.handlers:
                names = {getattr(t, "id", None) for t in
                         (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])} if h.type else set()
                if names & {"ImportError", "ModuleNotFoundError"}:
                    out.update(id(n) for stmt in h.body for n in ast.walk(stmt))
    return out


def imported_modules(path: Path) -> set[str]:
    """Top-level names of the absolute imports in ``path`` (fallback imports excluded)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _fallback_nodes(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(req: str) -> tuple[str, str]:
    """``"uvicorn[standard]>=0.29"`` → (``uvicorn``, ``[standard]>=0.29``): the name and the rest."""
    req = req.split("#", 1)[0].strip().replace(" ", "")
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(.*)", req)
    if m is None:
        raise ValueError(f"cannot read requirement {req!r}")
    return canonical(m.group(1)), m.group(2)


def used_distributions() -> dict[str, set[str]]:
    """Distribution → the files that import it."""
    std = set(sys.stdlib_module_names) | {"__future__", "mgmatch"}
    used: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for mod in imported_modules(path) - std:
                used.setdefault(canonical(DIST_OF.get(mod, mod)), set()).add(str(path.relative_to(ROOT)))
    return used


def main() -> int:
    used = used_distributions()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = dict(parse_requirement(r) for r in project["dependencies"])
    extras = {k: dict(parse_requirement(r) for r in v) for k, v in project.get("optional-dependencies", {}).items()}
    image = dict(parse_requirement(line) for line in REQUIREMENTS.read_text().splitlines()
                 if line.split("#", 1)[0].strip())
    problems = []
    for dist, files in sorted(used.items()):
        where = ", ".join(sorted(files))
        home = extras.get(OPTIONAL[dist], {}) if dist in OPTIONAL else declared
        if dist not in home:
            what = f"the [{OPTIONAL[dist]}] extra" if dist in OPTIONAL else "pyproject's dependencies"
            problems.append(f"{dist}: imported ({where}) but not in {what}")
        if dist not in NOT_IN_IMAGE and dist not in image:
            problems.append(f"{dist}: imported ({where}) but not in {REQUIREMENTS.relative_to(ROOT)}")
    for dist in sorted(set(declared) - set(used) - set(INDIRECT)):
        problems.append(f"{dist}: declared in pyproject but imported nowhere")
    for dist in sorted(set(INDIRECT) - set(declared)):
        problems.append(f"{dist}: needed ({INDIRECT[dist]}) but not declared in pyproject")
    for dist, spec in sorted(image.items()):
        if dist not in used:
            problems.append(f"{dist}: in {REQUIREMENTS.name} but imported nowhere")
        if dist in NOT_IN_IMAGE:
            problems.append(f"{dist}: in {REQUIREMENTS.name} but the service image must not need it")
        want = extras.get(OPTIONAL[dist], {}) if dist in OPTIONAL else declared
        if dist in want and want[dist] != spec:
            problems.append(f"{dist}: {REQUIREMENTS.name} says {spec!r}, pyproject {want[dist]!r}")
    for line in problems:
        print(line)
    print(f"check-deps: {len(used)} third-party distributions imported, {len(declared)} declared, "
          f"{len(image)} in the service image: {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
