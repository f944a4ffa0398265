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
#: test folders whose tests are CPU-bound, many of them timed against a solve budget → their xdist group: under
#: pytest-xdist (``make test``) each group runs one after another on one worker, so a budget test shares the
#: machine with at most one other CPU-bound test of the suite (of the other group); the service tests, which
#: mostly wait, spread over the other workers. Two groups, not one: one worker would hold over a third of
#: the suite's time and finish last; ``cpu`` (the solvers) and ``cpu-fit`` (fitting, training, labelling)
#: each hold about a sixth.
CPU_GROUPS = {"core": "cpu", "solvers": "cpu", "examples": "cpu", "models": "cpu-fit", "pipeline": "cpu-fit"}
#: reruns of a failed test of the ``cpu`` group (pytest-rerunfailures)
CPU_RERUNS = 2
#: modules whose tests share an xdist group by a module-level ``xdist_group`` marker
MODULE_GROUPS = {"tests/docs/test_offline_render.py": "docs-site",
                 # SCIP within a budget, like the solvers' tests: never beside another budget test
                 "tests/pipeline/test_label.py": "cpu", "tests/pipeline/test_preset_12v12_deep.py": "cpu"}
TESTS = Path(__file__).resolve().parent


def xdist_group_of(nodeid: str) -> str | None:
    """The xdist group of a test, from its node id alone (the scheduler, in the controller, sees nothing
    else): its module's group, else its folder's."""
    path = nodeid.split("::", 1)[0]
    if path in MODULE_GROUPS:
        return MODULE_GROUPS[path]
    parts = path.split("/")
    return CPU_GROUPS.get(parts[1]) if len(parts) > 2 and parts[0] == "tests" else None


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` that reads each test's group with :func:`xdist_group_of`: pytest-xdist groups by
    an ``@group`` suffix it writes into the node ids, which pytest 9 no longer reads back (``Item.nodeid``
    is derived from the node's path), so its groups would silently be ignored."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupsByPath(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # a pytest that keeps xdist's suffix
                return super()._split_scope(nodeid)
            return xdist_group_of(nodeid) or nodeid

    return GroupsByPath(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark ``service`` every test that starts a server or a subprocess, or needs Redis: by its markers
    (``redis``, ``cluster``, ``service`` on the test or its module) or by the fixtures it asks for. The fast
    tier (``make check``) deselects them with ``-m "not service and not slow"``.

    Runs first: pytest-xdist's own hook (``--dist loadgroup``) turns the ``xdist_group`` markers into the
    node ids' ``@group`` suffix (read by pytests before 9), so a group marker added after it would be ignored.
    A group marker the scheduler cannot read from the node id (:func:`xdist_group_of`) is a usage error."""
    for item in items:
        folder = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
        if folder in CPU_GROUPS:
            group = xdist_group_of(item.nodeid)
            item.add_marker(pytest.mark.xdist_group(group))
            if group == "cpu":
                # the budget tests time solvers on a machine the service tests share: a test that misses its
                # bound runs again (same assertions), up to twice, so one starved moment does not fail it
                item.add_marker(pytest.mark.flaky(reruns=CPU_RERUNS, reruns_delay=1))
        marked = {m.args[0] if m.args else m.kwargs.get("name", "default") for m in item.iter_markers("xdist_group")}
        if marked and marked != {xdist_group_of(item.nodeid)}:
            raise pytest.UsageError(f"{item.nodeid}: xdist_group {sorted(marked)} is not the group the scheduler "
                                    f"reads from its path ({xdist_group_of(item.nodeid)}): add it to MODULE_GROUPS "
                                    "in tests/conftest.py")
        if (SERVICE_FIXTURES & set(getattr(item, "fixturenames", ()))
                or item.get_closest_marker("redis") or item.get_closest_marker("cluster")):
            item.add_marker(pytest.mark.service)


#: programs that libraries run for themselves, allowed in the fast tier
LIBRARY_HELPERS = {"fc-list"}


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

    popen_init = subprocess.Popen.__init__

    def popen(self, args, *rest, **kwargs):
        # a library's own helper program (matplotlib lists the fonts with fc-list when it builds its font
        # cache, on a fresh machine only) is not a server or a command of ours
        program = args[0] if isinstance(args, (list, tuple)) and args else args
        if os.path.basename(str(program)) in LIBRARY_HELPERS:
            return popen_init(self, args, *rest, **kwargs)
        refuse("a subprocess")()

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - uvicorn is a dependency of the service
        return
    monkeypatch.setattr(uvicorn.Server, "run", refuse("a uvicorn server"))
    monkeypatch.setattr(uvicorn.Server, "serve", refuse("a uvicorn server"))
