#!/usr/bin/env python3
"""Check that each role's code imports exactly what its install declares.

``pip install mgmatch`` is the service: the API, the store, the workers, the CLI and every method that
needs no training. The extras add roles: ``[train]`` the torch side (fit, train, export, plots),
``[lab]`` the benchmarks, chaos and simulations, ``[grpc]`` the gRPC API, ``[ray]`` distributed
labelling, ``[gpu]`` onnxruntime's CUDA build. This script reads every ``.py`` file of the package
folders, maps each third-party import to its distribution and reports, one line each:

- an import of a distribution that pyproject declares nowhere;
- a module whose **module-level** imports (followed through the project's own modules) need a
  distribution outside ``dependencies`` and outside the extras its folder may need
  (:data:`MAY_NEED`: the service folders none, the torch side ``[train]``, the lab ``[lab]``); a
  module the ``mgmatch`` command loads at start (:data:`ENTRY`) may need no extra at all;
- a **function-local** import of an extra's distribution that the CLI cannot explain: the command
  that hits it exits 2 naming the extra only when ``EXTRA_OF`` of ``app/cli.py`` maps the import to
  an extra holding the distribution (imports guarded by ``try: … except ImportError`` fall back on
  their own and only need declaring);
- a distribution in ``dependencies`` that no service module imports (it belongs in the extra of the
  role that does), or one in an extra that nothing imports (:data:`INDIRECT` names the ones used
  without an import statement of ours).

Imports inside an ``except ImportError`` handler (fallbacks) do not count. Exit status 1 on any
finding; the last line is a summary. Run: ``python scripts/check-deps.py``.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: folder → package
PACKAGES = {"core": "mgmatch.core", "solvers": "mgmatch.solvers", "models": "mgmatch.models",
            "pipeline": "mgmatch.pipeline", "app": "mgmatch.app", "lab": "mgmatch.lab"}
#: the folders of the service: a distribution in ``dependencies`` must be imported by one of them
SERVICE_FOLDERS = ("core", "solvers", "models", "pipeline", "app")
#: folder → the extras its modules may need at import time (beyond ``dependencies``)
MAY_NEED = {"core": set(), "solvers": set(), "models": {"train"}, "pipeline": {"train"},
            "app": {"grpc"}, "lab": {"lab"}}
#: modules the ``mgmatch`` command imports before it knows the command: they must import with no extra
ENTRY = re.compile(r"^mgmatch\.(app\.cli|app\.commands(\..*)?|lab\.commands(\..*)?|app\.settings|app\.config)$")
#: import name → distribution name, where they differ
DIST_OF = {
    "yaml": "pyyaml", "google": "protobuf", "grpc": "grpcio", "grpc_tools": "grpcio-tools",
    "prometheus_client": "prometheus-client", "pydantic_settings": "pydantic-settings",
    "torch_geometric": "torch-geometric", "sklearn": "scikit-learn",
}
#: declared distributions used without an import statement of ours, and why
INDIRECT = {
    "onnx": "torch.onnx.export imports it at run time (models/export.py); torch does not declare it",
    "onnxruntime-gpu": "installs the module onnxruntime with the CUDA provider, in place of the CPU build",
}
#: extras that are not a role of their own: the test suite's tools (checked by the tests, not here) and the
#: docs site's (make docs runs mkdocs and its theme; no module of ours imports them)
NOT_A_ROLE = {"dev", "docs"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(req: str) -> tuple[str, str]:
    """``"uvicorn[standard]>=0.29"`` → (``uvicorn``, ``[standard]>=0.29``): the name and the rest."""
    req = req.split("#", 1)[0].strip().replace(" ", "")
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(.*)", req)
    if m is None:
        raise ValueError(f"cannot read requirement {req!r}")
    return canonical(m.group(1)), m.group(2)


@dataclass
class Imports:
    """What one file imports: third-party top-level names and project modules, by how they run."""

    module_level: set[str] = field(default_factory=set)  # third-party, run when the module is imported
    local: set[str] = field(default_factory=set)  # third-party, inside a function: run when it is called
    guarded: set[str] = field(default_factory=set)  # third-party, in ``try: … except ImportError``
    project: set[str] = field(default_factory=set)  # mgmatch modules imported at module level


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return False
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return bool({getattr(t, "id", None) for t in types} & {"ImportError", "ModuleNotFoundError"})


def _resolve(module: str | None, level: int, package: str) -> str | None:
    if level == 0:
        return module
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(base + ([module] if module else []))


def read_imports(path: Path, package: str = "") -> Imports:
    """The imports of ``path`` (``package``: the package the file lives in, for relative imports)."""
    tree = ast.parse(path.read_text(), str(path))
    out = Imports()

    def visit(node: ast.AST, in_function: bool, guarded: bool) -> None:
        if isinstance(node, ast.Try):
            catches = any(_catches_import_error(h) for h in node.handlers)
            for stmt in node.body:
                visit(stmt, in_function, guarded or catches)
            for h in node.handlers:
                if not _catches_import_error(h):  # a fallback's imports do not count
                    for stmt in h.body:
                        visit(stmt, in_function, guarded)
            for stmt in node.orelse + node.finalbody:
                visit(stmt, in_function, guarded)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                targets = names
            else:
                mod = _resolve(node.module, node.level, package)
                names = [mod] if mod else []
                targets = [f"{mod}.{a.name}" for a in node.names] + names if mod else []
            for name in names:
                top = name.split(".")[0]
                if top == "mgmatch":
                    if not in_function:
                        out.project.update(t for t in targets if t.startswith("mgmatch"))
                elif guarded:
                    out.guarded.add(top)
                elif in_function:
                    out.local.add(top)
                else:
                    out.module_level.add(top)
            return
        now_in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, now_in_function, guarded)

    visit(tree, False, False)
    return out


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every absolute import in ``path`` that runs (fallback imports excluded)."""
    got = read_imports(path)
    return got.module_level | got.local | got.guarded | {m.split(".")[0] for m in got.project}


def module_files(root: Path = ROOT) -> dict[str, tuple[str, Path]]:
    """Module name → (folder, file) for every module of the package folders under ``root``."""
    out: dict[str, tuple[str, Path]] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("").parts
            name = ".".join((package, *rel[:-1])) if rel[-1] == "__init__" else ".".join((package, *rel))
            out[name] = (folder, path)
    return out


def _dist(mod: str) -> str:
    return canonical(DIST_OF.get(mod, mod))


@dataclass
class Project:
    """The project's modules, their imports and what each needs when imported."""

    root: Path
    files: dict[str, tuple[str, Path]]
    imports: dict[str, Imports]
    needs: dict[str, set[str]]  # module → third-party distributions its import runs (module level, closure)

    @classmethod
    def read(cls, root: Path = ROOT) -> Project:
        files = module_files(root)
        std = set(sys.stdlib_module_names) | {"__future__", "mgmatch"}
        imports: dict[str, Imports] = {}
        for name, (_, path) in files.items():
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            got = read_imports(path, package)
            got.module_level -= std
            got.local -= std
            got.guarded -= std
            imports[name] = got

        def project_deps(name: str) -> set[str]:
            deps: set[str] = set()
            for target in imports[name].project:
                parts = target.split(".")
                # a module and the packages above it run; ``from pkg import name`` may name a module or not
                for i in range(2, len(parts) + 1):
                    if ".".join(parts[:i]) in files:
                        deps.add(".".join(parts[:i]))
            return deps - {name}

        needs: dict[str, set[str]] = {}
        for name in files:
            seen, todo, dists = {name}, [name], set()
            while todo:
                cur = todo.pop()
                dists |= {_dist(m) for m in imports[cur].module_level}
                for dep in project_deps(cur) - seen:
                    seen.add(dep)
                    todo.append(dep)
            needs[name] = dists
        return cls(root, files, imports, needs)

    def used(self) -> dict[str, set[str]]:
        """Distribution → the files that import it (any way that runs)."""
        out: dict[str, set[str]] = {}
        for name, got in self.imports.items():
            for mod in got.module_level | got.local | got.guarded:
                out.setdefault(_dist(mod), set()).add(self.files[name][1].relative_to(self.root).as_posix())
        return out


def used_distributions() -> dict[str, set[str]]:
    """Distribution → the files that import it."""
    return Project.read().used()


def cli_extra_of(root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """``EXTRA_OF`` of app/cli.py (import name → (distribution, extra)), read without importing the CLI."""
    tree = ast.parse((root / "app" / "cli.py").read_text())
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == "EXTRA_OF" for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    raise SystemExit("check-deps: app/cli.py has no EXTRA_OF table")


def modules_needing(project: Project, extra_dists: set[str]) -> set[str]:
    """The modules whose import runs one of ``extra_dists``."""
    return {name for name, dists in project.needs.items() if dists & extra_dists}


def check(project: Project, declared: dict[str, str], extras: dict[str, dict[str, str]],
          extra_of: dict[str, tuple[str, str]]) -> list[str]:
    """Every finding, one line each (see the module docstring)."""
    problems: list[str] = []
    roles = {k: v for k, v in extras.items() if k not in NOT_A_ROLE}
    known = set(declared).union(*roles.values())

    def where(dist: str) -> str:
        homes = sorted(k for k, v in roles.items() if dist in v)
        return "dependencies" if dist in declared else " or ".join(f"[{h}]" for h in homes) or "nowhere"

    for name in sorted(project.files):
        folder, path = project.files[name]
        rel = path.relative_to(project.root).as_posix()
        got = project.imports[name]
        for mod in sorted(got.module_level | got.local | got.guarded):
            if _dist(mod) not in known:
                problems.append(f"{rel}: imports {mod} ({_dist(mod)}), which pyproject declares nowhere")
        allowed = set(declared).union(*(roles.get(e, {}) for e in MAY_NEED[folder]))
        if ENTRY.match(name):
            allowed = set(declared)
        for dist in sorted((project.needs[name] - allowed) & known):
            why = "the mgmatch command loads it at start" if ENTRY.match(name) else f"{folder}/ may need " + (
                ", ".join(f"[{e}]" for e in sorted(MAY_NEED[folder])) or "no extra")
            problems.append(f"{rel}: importing it needs {dist} (in {where(dist)}), but {why}")
        for mod in sorted(got.local):
            dist = _dist(mod)
            if dist in declared or dist not in known:
                continue
            named = extra_of.get(mod)
            if named is None:
                problems.append(f"{rel}: imports {mod} inside a function; add it to EXTRA_OF in app/cli.py "
                                f"(its extra: {where(dist)}) so that a command missing it exits 2 naming the extra")
    for mod, (dist, extra) in sorted(extra_of.items()):
        if canonical(dist) not in roles.get(extra, {}):
            problems.append(f"app/cli.py EXTRA_OF: {mod} → [{extra}], but [{extra}] does not hold {dist}")
    used = project.used()
    service_used = {d for d, files in used.items() if any(f.split("/")[0] in SERVICE_FOLDERS for f in files)}
    for dist in sorted(set(declared) - service_used - set(INDIRECT)):
        users = sorted(used.get(dist, ()))
        problems.append(f"{dist}: in dependencies, but no service module imports it"
                        + (f" (only {', '.join(users)}: move it to that role's extra)" if users else ""))
    for extra, dists in sorted(roles.items()):
        for dist in sorted(set(dists) - set(used) - set(INDIRECT)):
            problems.append(f"{dist}: in [{extra}], but nothing imports it")
    for dist, why in sorted(INDIRECT.items()):
        if dist not in known:
            problems.append(f"{dist}: needed ({why}) but not declared in pyproject")
    return problems


def main(root: Path = ROOT) -> int:
    project = Project.read(root)
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    declared = dict(parse_requirement(r) for r in meta["dependencies"])
    extras = {k: dict(parse_requirement(r) for r in v) for k, v in meta.get("optional-dependencies", {}).items()}
    problems = check(project, declared, extras, cli_extra_of(root))
    for line in problems:
        print(line)
    roles = {k: len(v) for k, v in extras.items() if k not in NOT_A_ROLE}
    print(f"check-deps: {len(project.files)} modules, {len(project.used())} third-party distributions imported; "
          f"{len(declared)} in dependencies, " + ", ".join(f"{n} in [{k}]" for k, n in roles.items()) + ": "
          + ("OK" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
