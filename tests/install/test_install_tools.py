"""The dependency check (scripts/check-deps.py) and the smoke's reading of ``mgmatch solve --help``.

The install smoke itself (tests/install/smoke.py) is not a pytest module: scripts/install-smoke.sh
runs it with the Python of each fresh environment.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
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
    assert used["openskill"] == {"app/ratings.py"} and used["torch-geometric"] == {"models/networks.py"}


def test_the_smokes_lists_of_modules_that_need_an_extra_are_the_ones_check_deps_finds():
    """What the service environment must fail to import (no torch, no grpcio) follows from the imports."""
    project = check_deps.Project.read()
    train_only = {"torch", "torch-geometric", "onnx", "matplotlib", "tqdm"}
    assert check_deps.modules_needing(project, train_only) == smoke.TORCH_MODULES
    assert check_deps.modules_needing(project, {"grpcio"}) == smoke.GRPC_MODULES
    # the mgmatch command loads every command module at start: none of them may need an extra
    entry = {m for m in project.files if check_deps.ENTRY.match(m)}
    assert "mgmatch.lab.commands.bench_chaos" in entry and "mgmatch.app.commands.train" in entry
    extras = {"torch", "torch-geometric", "onnx", "matplotlib", "tqdm", "rich", "grpcio", "ray"}
    assert not {m for m in entry if project.needs[m] & extras}


PYPROJECT = """
[project]
name = "x"
dependencies = ["numpy>=1.26", "typer>=0.26", "sortedcontainers>=2.4"]
[project.optional-dependencies]
train = ["torch==2.13.0", "tqdm>=4.66", "onnx>=1.16"]
lab = ["httpx>=0.27"]
gpu = ["onnxruntime-gpu>=1.17"]
dev = ["x[train,lab]", "pytest>=8"]
"""


def _tree(root: Path, files: dict[str, str], pyproject: str = PYPROJECT) -> Path:
    (root / "pyproject.toml").write_text(pyproject)
    for folder in check_deps.PACKAGES:
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    files = {"app/cli.py": 'EXTRA_OF = {"torch": ("torch", "train"), "httpx": ("httpx", "lab")}\n', **files}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def _problems(root: Path) -> list[str]:
    import tomllib

    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    declared = dict(check_deps.parse_requirement(r) for r in meta["dependencies"])
    extras = {k: dict(check_deps.parse_requirement(r) for r in v) for k, v in meta["optional-dependencies"].items()}
    return check_deps.check(check_deps.Project.read(root), declared, extras, check_deps.cli_extra_of(root))


GOOD = {
    "core/a.py": "import numpy\n",
    "solvers/s.py": "from sortedcontainers import SortedList\n",
    "models/train.py": "import torch\nfrom tqdm import tqdm\n",
    "app/commands/train.py": "import typer\n\ndef run():\n    from mgmatch.models.train import fit\n",
    "app/commands/fit.py": "def run():\n    import torch\n",
    "lab/chaos.py": "import httpx\n",
    "lab/commands/chaos.py": "def run():\n    from mgmatch.lab.chaos import go\n",
}


def test_roles_pass_when_each_imports_what_its_install_declares(tmp_path):
    assert _problems(_tree(tmp_path, GOOD)) == []


def test_a_service_module_that_reaches_torch_at_import_is_reported(tmp_path):
    # app → models.train at module level: the service would need torch to start
    root = _tree(tmp_path, {**GOOD, "app/workers.py": "from mgmatch.models.train import fit\n"})
    got = _problems(root)
    assert any(p.startswith("app/workers.py: importing it needs torch (in [train])") for p in got), got


def test_a_command_module_may_need_no_extra_even_in_the_lab(tmp_path):
    root = _tree(tmp_path, {**GOOD, "lab/commands/chaos.py": "from mgmatch.lab.chaos import go\n"})
    got = _problems(root)
    assert got == ["lab/commands/chaos.py: importing it needs httpx (in [lab]), but the mgmatch command loads "
                   "it at start"], got


def test_a_lazy_import_the_cli_cannot_name_an_extra_for_is_reported(tmp_path):
    root = _tree(tmp_path, {**GOOD, "pipeline/label.py": "def bar():\n    from tqdm import tqdm\n"})
    got = _problems(root)
    assert len(got) == 1 and got[0].startswith("pipeline/label.py: imports tqdm inside a function; add it to "
                                               "EXTRA_OF"), got
    # guarded by `except ImportError` it falls back on its own: declared is enough
    guarded = "def bar():\n    try:\n        from tqdm import tqdm\n    except ImportError:\n        return None\n"
    assert _problems(_tree(tmp_path, {**GOOD, "pipeline/label.py": guarded})) == []


def test_a_dependency_only_the_lab_uses_and_a_wrong_cli_extra_are_reported(tmp_path):
    pyproject = PYPROJECT.replace('"sortedcontainers>=2.4"', '"sortedcontainers>=2.4", "rich>=13"')
    files = {**GOOD, "lab/table.py": "import rich\n",
             "app/cli.py": 'EXTRA_OF = {"torch": ("torch", "lab"), "httpx": ("httpx", "lab")}\n'}
    got = _problems(_tree(tmp_path, files, pyproject))
    assert "rich: in dependencies, but no service module imports it (only lab/table.py: move it to that " \
           "role's extra)" in got, got
    assert "app/cli.py EXTRA_OF: torch → [lab], but [lab] does not hold torch" in got, got
    # an undeclared import and an extra nothing uses
    got = _problems(_tree(tmp_path, {**GOOD, "solvers/s.py": "import ortools\n"}))
    assert "solvers/s.py: imports ortools (ortools), which pyproject declares nowhere" in got, got
    assert "sortedcontainers: in dependencies, but no service module imports it" in got, got


def test_methods_are_read_from_help_with_nested_parentheses_and_semicolons():
    help_text = (
        "│ --method  -m  <str>  Method: bgcn (BGCN: prediction → MIP (SCIP); 100 ms default); eomm (EOMM: churn\n"
        "│                      (openskill outcomes, logistic churn; blossom for 1v1)); random (Random: sample)\n"
        "│                      [default: exact]\n"
    )
    assert smoke.listed_methods(help_text) == ["bgcn", "eomm", "random"]


# --------------------------------------------------------------------------- the images (scripts/image-test.sh)

image_checks = _load("image_checks", ROOT / "tests" / "install" / "image_checks.py")


def _podman_args(tmp_path: Path, *args: str) -> list[str]:
    """The arguments scripts/podman-host-net hands to podman (a stand-in that prints them)."""
    import subprocess

    fake = tmp_path / "podman"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    proc = subprocess.run([str(ROOT / "scripts" / "podman-host-net"), *args], capture_output=True, text=True,
                          env={"MGMATCH_PODMAN": str(fake), "PATH": "/usr/bin:/bin"}, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.service  # runs scripts/podman-host-net
def test_the_podman_wrapper_drops_what_host_networking_refuses(tmp_path):
    # what podman-compose 1.0.3 writes for a service with `network_mode: host` and published ports
    got = _podman_args(tmp_path, "run", "--name=it_api_1", "-d", "--network", "host", "-e", "A=1",
                       "-p", "8000:8000", "--net", "it_default", "--network-alias", "api", "img", "serve")
    assert got == ["--runtime", "runc", "run", "--name=it_api_1", "-d", "--network", "host", "-e", "A=1", "img",
                   "serve"]
    # a container on a bridge network keeps its network, alias and ports; other commands pass unchanged
    bridge = ["create", "-p", "8000:8000", "--net", "it_default", "--network-alias", "api", "img"]
    assert _podman_args(tmp_path, *bridge) == ["--runtime", "runc", *bridge]
    assert _podman_args(tmp_path, "network", "exists", "host") == ["--runtime", "runc", "network", "exists", "host"]


def _interpolate(value, env: dict[str, str]):
    """Compose's ``${VAR:-default}`` in every string of ``value``."""
    import re

    if isinstance(value, str):
        return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: env.get(m.group(1), m.group(2)), value)
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    return value


def test_the_local_stack_override_listens_on_loopback_only():
    import yaml

    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    local = yaml.safe_load((ROOT / "deploy" / "local" / "compose.host.yml").read_text())["services"]
    env = dict(line.split("=", 1) for line in (ROOT / "deploy" / "local" / "stack.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["MGMATCH_STACK_HOST"] == "127.0.0.1"
    assert set(local) == {"redis", "api", "matchmaker", "solver", "solver-2", "prometheus"}
    assert set(local) - {"solver-2"} <= set(base)

    def lists(node, path=""):  # podman-compose 1.0.3 appends an override's list to the base's
        if isinstance(node, dict):
            for k, v in node.items():
                yield from lists(v, f"{path}.{k}")
        elif isinstance(node, list):
            yield path

    for name, svc in local.items():
        assert svc["network_mode"] == "host", name
        if name in base:
            # (volumes excepted: both replace a mount of the same target)
            assert not [p for p in lists(svc) if p.split(".")[1] in base[name] and p != ".volumes"], name
        merged = _interpolate({**base.get(name, {}), **svc, "environment": {
            **base.get(name, {}).get("environment", {}), **svc.get("environment", {})}}, env)
        if name not in ("redis", "prometheus"):
            assert merged["environment"]["MGMATCH_REDIS_URL"] == f"redis://127.0.0.1:{env['MGMATCH_STACK_REDIS_PORT']}/0"
            assert merged["environment"]["MGMATCH_METRICS_HOST"] == "127.0.0.1", name
        if name == "redis":
            assert merged["command"][1:5] == ["--bind", "127.0.0.1", "--port", env["MGMATCH_STACK_REDIS_PORT"]]
        if name == "api":
            assert merged["command"][1:5] == ["--host", "127.0.0.1", "--port", env["MGMATCH_STACK_API_PORT"]]
        if name == "prometheus":
            assert f"--web.listen-address=127.0.0.1:{env['MGMATCH_STACK_PROMETHEUS_PORT']}" in merged["command"]
    # without the stack's variables the base file is what it was: every address its own default
    assert _interpolate(base["api"]["command"], {}) == ["serve", "--host", "0.0.0.0", "--port", "8000", "--no-workers"]
    # two solvers, each with its own metrics port
    ports = {local[s]["environment"]["MGMATCH_METRICS_PORT"] for s in ("matchmaker", "solver", "solver-2")}
    assert len(ports) == 3 and local["solver"]["deploy"]["replicas"] == 1
    assert local["solver-2"]["command"] == base["solver"]["command"]
    for name in ("redis", "prometheus"):  # built locally from Debian packages
        build = local[name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).read_text().count("apt-get install") == 1


def test_the_committed_prometheus_config_is_the_one_made_for_the_default_ports(monkeypatch):
    import yaml

    for var in [v for v in __import__("os").environ if v.startswith("MGMATCH_STACK_")]:
        monkeypatch.delenv(var)
    committed = yaml.safe_load((ROOT / "deploy" / "local" / "prometheus.yml").read_text())
    made = yaml.safe_load(image_checks.prometheus_config())
    assert committed == made
    monkeypatch.setenv("MGMATCH_STACK_SOLVER2_METRICS_PORT", "23456")
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in yaml.safe_load(
        image_checks.prometheus_config())["scrape_configs"]}
    assert jobs["mgmatch-solver"] == ["127.0.0.1:19102", "127.0.0.1:23456"]


def test_the_loopback_check_reports_a_socket_bound_to_every_interface():
    import socket

    with socket.socket() as lo, socket.socket() as anyaddr:
        lo.bind(("127.0.0.1", 0))
        anyaddr.bind(("0.0.0.0", 0))
        lo.listen()
        anyaddr.listen()
        exposed = anyaddr.getsockname()[1]
        got = image_checks.listening_beyond_loopback({lo.getsockname()[1], exposed})
    assert got == [f"/proc/net/tcp: 00000000:{exposed}"], got


def test_the_loopback_check_takes_ipv6_loopbacks_as_loopback():
    import socket

    with socket.socket(socket.AF_INET6) as mapped, socket.socket(socket.AF_INET6) as any6:
        mapped.bind(("::ffff:127.0.0.1", 0))
        any6.bind(("::", 0))
        mapped.listen()
        any6.listen()
        exposed = any6.getsockname()[1]
        got = image_checks.listening_beyond_loopback({mapped.getsockname()[1], exposed})
    assert got == [f"/proc/net/tcp6: {'0' * 32}:{exposed}"], got
