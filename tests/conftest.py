"""Shared fixtures: the spec's worked example and small helpers."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

#: the spec and its worked example, carried by the repository (docs/spec)
SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec"
EXAMPLES = SPEC / "examples"


@pytest.fixture
def example_paths() -> dict[str, Path]:
    return {
        "instance": EXAMPLES / "instance-3v3-small.json",
        "engagement": EXAMPLES / "engagement-small.json",
        "expected": EXAMPLES / "expected-small.json",
    }


@pytest.fixture
def example_instance_obj(example_paths) -> dict:
    return json.loads(example_paths["instance"].read_text())


@pytest.fixture
def mutate(example_instance_obj):
    """Return a deep copy of the example instance, changed by ``fn``."""

    def _m(fn):
        obj = copy.deepcopy(example_instance_obj)
        fn(obj)
        return obj

    return _m


#: fixtures that start a server or reach a Redis: a test that asks for one is in the service tier
SERVICE_FIXTURES = {"live", "redis_url", "spare_redis", "redis_cluster", "cluster_url"}
#: test folders whose tests are CPU-bound and many of them timed against a solve budget: under pytest-xdist
#: (``make test``) they run one after another on one worker (group ``cpu``), so a budget test never shares
#: its core with another solve of the suite; the service tests, which mostly wait, spread over the others
CPU_FOLDERS = {"core", "solvers", "models", "pipeline", "examples"}
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark ``service`` every test that starts a server or a subprocess, or needs Redis: by its markers
    (``redis``, ``cluster``, ``service`` on the test or its module) or by the fixtures it asks for. The fast
    tier (``make check``) deselects them with ``-m "not service and not slow"``.

    Runs first: pytest-xdist's own hook (``--dist loadgroup``) turns the ``xdist_group`` markers into the
    node ids' ``@group`` suffix, so a group marker added after it would be ignored and the ``cpu`` tests
    spread over every worker."""
    for item in items:
        folder = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
        if folder in CPU_FOLDERS:
            item.add_marker(pytest.mark.xdist_group("cpu"))
        if (SERVICE_FIXTURES & set(getattr(item, "fixturenames", ()))
                or item.get_closest_marker("redis") or item.get_closest_marker("cluster")):
            item.add_marker(pytest.mark.service)


class TierViolation(RuntimeError):
    """A test of the fast tier started a subprocess or a server."""


@pytest.fixture(autouse=True)
def _fast_tier_guard(request, monkeypatch):
    """Under ``MGMATCH_TEST_TIER=fast`` (``make check``), a test that starts a subprocess or a uvicorn server
    fails at once, naming what to mark, so the fast tier stays what it says."""
    if os.environ.get("MGMATCH_TEST_TIER") != "fast":
        return
    import subprocess

    def refuse(what):
        def _raise(*args, **kwargs):
            raise TierViolation(f"{request.node.nodeid} starts {what}: mark it @pytest.mark.service")
        return _raise

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("a subprocess"))
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - uvicorn is a dependency of the service
        return
    monkeypatch.setattr(uvicorn.Server, "run", refuse("a uvicorn server"))
    monkeypatch.setattr(uvicorn.Server, "serve", refuse("a uvicorn server"))
