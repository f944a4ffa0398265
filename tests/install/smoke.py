"""Smoke test of an installed mgmatch wheel, run by the virtual environment's own Python.

Not a pytest module (pytest collects ``test_*.py`` only): ``scripts/install-smoke.sh`` builds the
wheel, installs it in a fresh environment per role and runs::

    <venv>/bin/python tests/install/smoke.py --env service|train --wheel W --work DIR [--spec FILE]

``--env service``: ``pip install 'mgmatch[grpc]'`` from the wheel, as the service image installs it:
no torch. ``--env train``: ``pip install 'mgmatch[train]'`` (torch, torch-geometric, onnx, matplotlib,
tqdm), without the grpc extra. Checks, each reported on one line:

- the wheel holds every module and every package-data file of the source tree;
- every module of the installed package imports, except those listed below that need what the
  role leaves out on purpose (torch in the service, grpcio in training): each of those must fail with
  ``ModuleNotFoundError`` for exactly that package;
- ``mgmatch solve --method M`` for every method ``mgmatch solve --help`` lists (the shipped
  predictors for mgmatch/bgcn) on a preset pool made by ``mgmatch generate``, each answer accepted
  by ``mgmatch check``;
- ``mgmatch serve`` as a process (service: on the Redis store at ``--redis-url`` when one answers,
  with gRPC; train: in-memory): ``/v1/solve`` on the spec example (the spec's optimum, accepted by
  ``mgmatch check``), six tickets matched into one 3v3 match, another ticket cancelled, and no
  traceback in its log;
- service: a training command exits 2 with one line naming the extra to install;
- train: without the grpc extra, ``serve --grpc-port`` ends with exit 2 and one line; then the
  training path end to end on a small scale: ``fit-engagement`` (a simulated log, with its plot),
  ``label`` (exact optima), ``train`` (a tiny predictor, exported to ONNX and checked against torch
  by the command), and ``solve --method mgmatch --predictor`` with that model.

Exit status 0 when every check passed; the last line is a summary.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import pkgutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import traceback
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: modules that import torch at module level, directly or through one of these (training, export,
#: the torch engagement model): the service image has no torch, so there they must fail with
#: ModuleNotFoundError('torch') and only so
TORCH_MODULES = {
    "mgmatch.models.engagement_torch",
    "mgmatch.models.export",
    "mgmatch.models.networks",
    "mgmatch.models.train",
    "mgmatch.pipeline.fit_engagement",
    "mgmatch.pipeline.train",
    "mgmatch.pipeline.refit",
}
#: modules that need the grpc extra (grpcio), absent from a plain install
GRPC_MODULES = {
    "mgmatch.app.grpc_server",
    "mgmatch.app.rpc.matchmaker_pb2_grpc",
}
#: per environment: module → the top-level package whose absence it must report
EXPECTED_MISSING = {
    "service": dict.fromkeys(TORCH_MODULES, "torch"),
    "train": dict.fromkeys(GRPC_MODULES, "grpc"),
}
#: packages a role must not have at all (the others may come in through a dependency)
ABSENT = {"service": ("torch",), "train": ("grpc",)}
#: the spec example, relative to the repository (docs/spec carries the spec and its examples)
SPEC_EXAMPLE = "docs/spec/examples/instance-3v3-small.json"
SOLVE_LIMIT_MS = 500
#: methods made for large lobbies only (solvers/lobby.py): smoke-tested on a generated ffa-32 pool
LARGE_LOBBY_METHODS = {"lobby"}


class Checks:
    """Runs named checks, prints one line per check, keeps the failures."""

    def __init__(self, env: str):
        self.env = env
        self.passed: list[str] = []
        self.failed: list[str] = []

    def run(self, name: str, fn: Callable[[], str | None]) -> bool:
        t0 = time.perf_counter()
        try:
            note = fn()
        except Exception as err:  # a check failing is a report, not a crash of the smoke
            self.failed.append(name)
            detail = "".join(traceback.format_exception_only(err)).strip()
            print(f"FAIL  {name} ({time.perf_counter() - t0:.1f} s): {detail}", flush=True)
            return False
        self.passed.append(name)
        print(f"ok    {name} ({time.perf_counter() - t0:.1f} s){': ' + note if note else ''}", flush=True)
        return True


def mgmatch_exe() -> str:
    exe = Path(sys.executable).with_name("mgmatch")
    if not exe.exists():
        raise AssertionError(f"the wheel installed no console script at {exe}")
    return str(exe)


def cli(*args: str, cwd: Path, timeout: float = 300, ok: bool = True) -> subprocess.CompletedProcess:
    """Run the installed ``mgmatch`` command; with ``ok``, fail on a non-zero exit or a traceback.

    The timeout catches a hung command, not a slow one: ``make test`` runs the smoke at nice 10 beside
    pytest, where a command's first run (its imports compiled, its numba kernels built) took up to
    two minutes on a loaded 2-core machine."""
    env = {**os.environ, "COLUMNS": "4000", "NO_COLOR": "1", "TERM": "dumb", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([mgmatch_exe(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if "Traceback" in proc.stderr:
        raise AssertionError(f"mgmatch {' '.join(args)}: traceback:\n{proc.stderr[-2000:]}")
    if ok and proc.returncode != 0:
        raise AssertionError(f"mgmatch {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc


# --------------------------------------------------------------------------- the wheel


def check_wheel(wheel: Path, source: Path) -> str:
    """Every module and package-data file of the source tree ``source`` (what it was built from) is in the wheel."""
    conf = tomllib.loads((source / "pyproject.toml").read_text())["tool"]["setuptools"]
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for pkg, src in conf["package-dir"].items():
        base = pkg.replace(".", "/")
        for path in (source / src).rglob("*.py"):
            rel = path.relative_to(source / src)
            # mgmatch/ holds symlinks to the other package folders: those are checked under their own names
            if "__pycache__" in rel.parts or (source / src / rel.parts[0]).is_symlink():
                continue
            if f"{base}/{rel.as_posix()}" not in names:
                missing.append(f"{base}/{rel.as_posix()}")
    data = 0
    for pkg, globs in conf.get("package-data", {}).items():
        top = next(p for p in sorted(conf["package-dir"], key=len, reverse=True) if pkg == p or pkg.startswith(p + "."))
        src = source / conf["package-dir"][top] / pkg[len(top) + 1:].replace(".", "/")
        for pattern in globs:
            for path in src.glob(pattern):
                data += 1
                want = f"{pkg.replace('.', '/')}/{path.relative_to(src).as_posix()}"
                if want not in names:
                    missing.append(want)
    for needed in ("mgmatch/models/shipped/3v3.onnx", "mgmatch/models/shipped/12v12-bgcn.onnx",
                   "mgmatch/core/presets/engagement-3v3.json"):
        if needed not in names:
            missing.append(needed)
    if missing:
        raise AssertionError(f"{len(missing)} source file(s) not in {wheel.name}: {', '.join(sorted(missing)[:12])}")
    return f"{len(names)} files, {data} package-data files"


# --------------------------------------------------------------------------- imports


def check_imports(env: str) -> str:
    """Import every module of the installed package; only the expected ones may fail, and only so."""
    import mgmatch

    where = Path(mgmatch.__file__).resolve()
    if not where.is_relative_to(Path(sys.prefix).resolve()):
        raise AssertionError(f"mgmatch imported from {where}, not from the environment {sys.prefix}")
    expected = {name: pkg for name, pkg in EXPECTED_MISSING[env].items()
                if pkg in ABSENT[env] or importlib.util.find_spec(pkg) is None}
    names: list[str] = []
    walk_errors: list[str] = []
    for mod in pkgutil.walk_packages(mgmatch.__path__, "mgmatch.", onerror=walk_errors.append):
        names.append(mod.name)
    problems = [f"{n}: package not importable" for n in walk_errors]
    failed_ok = 0
    for name in sorted(names):
        want = expected.get(name)
        if name.endswith(".__main__"):  # runs the CLI when imported: run it as `python -m` instead
            pkg = name.removesuffix(".__main__")
            proc = subprocess.run([sys.executable, "-m", pkg, "--help"], capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                problems.append(f"python -m {pkg} --help: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            root = (err.name or "").split(".")[0]
            if want is not None and root == want:
                failed_ok += 1
                continue
            problems.append(f"{name}: ModuleNotFoundError {err.name!r}")
            continue
        except Exception as err:
            problems.append(f"{name}: {type(err).__name__}: {err}")
            continue
        if want is not None:
            problems.append(f"{name}: imported, but {want!r} should be missing here")
    absent = sorted(set(expected) - set(names))
    problems += [f"{n}: listed as needing {expected[n]!r} but not in the package" for n in absent]
    if problems:
        raise AssertionError("; ".join(problems))
    return f"{len(names) - failed_ok} modules imported, {failed_ok} failed as expected (no {', '.join(sorted(set(expected.values())))})"


def check_absent(env: str) -> str:
    """What the role leaves out is not installed at all (torch in the service, grpcio in training)."""
    present = [pkg for pkg in ABSENT[env] if importlib.util.find_spec(pkg) is not None]
    if present:
        raise AssertionError(f"{', '.join(present)} importable in the {env} environment")
    return f"{', '.join(ABSENT[env])} not installed"


# --------------------------------------------------------------------------- solve and check


def listed_methods(help_text: str) -> list[str]:
    """Method names from ``mgmatch solve --help``: ``Method: a (…); b (…)`` (descriptions may nest parentheses)."""
    flat = " ".join(line.strip(" │|") for line in help_text.splitlines())
    start = flat.find("Method: ")
    if start < 0:
        raise AssertionError("`mgmatch solve --help` lists no methods")
    text, i, out = flat[start + len("Method: "):], 0, []
    while True:
        j = text.find(" (", i)
        if j < 0:
            break
        out.append(text[i:j].strip())
        depth, k = 0, j + 1
        while k < len(text):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        if not text.startswith("; ", k):
            break
        i = k + 2
    return out


def solve_and_check(work: Path, instance: Path, method: str) -> str:
    t0 = time.perf_counter()
    out = work / f"solution-{instance.parent.name}-{method}.json"
    proc = cli("solve", str(instance), "--method", method, "--time-limit-ms", str(SOLVE_LIMIT_MS), "--seed", "1",
               cwd=work)
    sol = json.loads(proc.stdout)
    if sol.get("status") not in ("optimal", "feasible") or not sol.get("teams"):
        raise AssertionError(f"{method}: status {sol.get('status')!r}, teams {sol.get('teams')!r}")
    out.write_text(proc.stdout)
    verdict = json.loads(cli("check", str(instance), str(out), cwd=work).stdout)
    if not verdict["feasible"]:
        raise AssertionError(f"{method}: mgmatch check found {verdict['violations']}")
    return f"{sol['status']}, objective {sol['objective']:.4f}, {time.perf_counter() - t0:.1f} s for both commands"


# --------------------------------------------------------------------------- the service


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: object | None = None, timeout: float = 30) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def poll(fn: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = fn()
        except (OSError, ValueError):
            got = None
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Server:
    """``mgmatch serve`` as a child process on a free port (in-memory store, embedded workers).

    ``config``: a service config file (else the built-in default); ``grpc``: serve gRPC too;
    ``settings``: ``MGMATCH_*`` environment settings (e.g. the Redis store).
    """

    def __init__(self, work: Path, config: Path | None = None, grpc: bool = False, settings: dict | None = None):
        self.port = free_port()
        self.grpc_port = free_port() if grpc else None
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MGMATCH_")}  # no outside settings
        env |= {"OMP_NUM_THREADS": "1", **(settings or {})}
        argv = [mgmatch_exe(), "serve", "--port", str(self.port)]
        argv += ["--config", str(config)] if config is not None else []
        argv += ["--grpc-port", str(self.grpc_port)] if grpc else []
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(argv, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)

    def ready(self) -> str:
        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"mgmatch serve exited with {self.proc.returncode}: {self.log_tail()}")
            return http("GET", f"{self.url}/readyz", timeout=2)[0] == 200

        t0 = time.monotonic()
        poll(up, 90, "/readyz")
        return f"ready in {time.monotonic() - t0:.1f} s on port {self.port}"

    def log_tail(self) -> str:
        return self.log.read_text()[-1500:] if self.log.exists() else ""

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("mgmatch serve did not stop within 20 s of SIGTERM") from None
        text = self.log.read_text()
        if "Traceback" in text:
            raise AssertionError(f"traceback in the server log:\n{text[-2000:]}")
        return f"exit {self.proc.returncode}"


def spec_config(work: Path, spec: Path) -> Path:
    """The built-in pools plus the spec example's engagement model ``small`` (pinned by SHA-256)."""
    from mgmatch.app.config import DEFAULT_CONFIG

    model = spec.with_name("engagement-small.json")
    cfg = {**DEFAULT_CONFIG, "models": {"engagement": [
        {"name": "small", "path": str(model.resolve()), "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}]}}
    path = work / "service.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def check_http_solve(srv: Server, instance: Path, work: Path, spec: bool) -> str:
    """``/v1/solve`` answers a solved Solution that ``mgmatch check`` accepts (the spec's optimum for its example)."""
    body = json.loads(instance.read_text())
    if spec:
        body |= {"engagement_model": "small", "time_limit_ms": 5000}
    status, sol = http("POST", f"{srv.url}/v1/solve", body)
    if status != 200:
        raise AssertionError(f"/v1/solve {instance.name}: HTTP {status}: {sol}")
    if sol.get("format") != "mgmatch-solution/v1" or sol.get("status") not in ("optimal", "feasible"):
        raise AssertionError(f"/v1/solve: not a solved Solution: {sol}")
    out = work / "http-solution.json"
    out.write_text(json.dumps(sol))
    model = ["--engagement", str(instance.with_name("engagement-small.json"))] if spec else []
    verdict = json.loads(cli("check", str(instance), str(out), *model, cwd=work).stdout)
    if not verdict["feasible"]:
        raise AssertionError(f"/v1/solve answer rejected by mgmatch check: {verdict['violations']}")
    expected = instance.with_name("expected-small.json")
    if spec and expected.exists():
        want = json.loads(expected.read_text())
        if sol["status"] != want["status"] or abs(sol["objective"] - want["objective"]) > 1e-6:
            raise AssertionError(f"/v1/solve: {sol['status']} {sol['objective']}, the spec expects {want}")
    return f"{instance.name}: {sol['status']}, objective {sol['objective']:.6f}, method {sol.get('method')}"


def redis_store(url: str) -> dict | None:
    """Settings for the Redis store under a fresh key prefix, or None when no Redis answers at ``url``."""
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception:  # no client or no server: the smoke runs on the in-memory store
        return None
    return {"MGMATCH_STORE": "redis", "MGMATCH_REDIS_URL": url, "MGMATCH_KEY_PREFIX": f"smoke{os.getpid()}"}


def drop_keys(settings: dict) -> str:
    import redis

    r = redis.Redis.from_url(settings["MGMATCH_REDIS_URL"])
    keys = list(r.scan_iter(match=f"{settings['MGMATCH_KEY_PREFIX']}:*", count=1000))
    if keys:
        r.delete(*keys)
    return f"{len(keys)} keys under {settings['MGMATCH_KEY_PREFIX']}: deleted"


def check_grpc_listens(srv: Server) -> str:
    with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5):
        return f"gRPC accepts connections on port {srv.grpc_port}"


def check_grpc_needs_extra(work: Path) -> str:
    """Without the grpc extra, ``serve --grpc-port`` ends with exit 2 and one line naming the extra."""
    proc = cli("serve", "--port", str(free_port()), "--grpc-port", str(free_port()), cwd=work, ok=False, timeout=90)
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 2 or not lines or "grpc" not in lines[-1]:
        raise AssertionError(f"exit {proc.returncode}, stderr {proc.stderr.strip()[-400:]!r}")
    return lines[-1]


def ticket_players(pool_instance: Path) -> list[dict]:
    """Ticket players (the spec's player without the service-set fields) from a 3v3 preset pool."""
    players = json.loads(pool_instance.read_text())["players"]
    return [{k: v for k, v in p.items() if k not in ("waited_s", "party")} | {"id": f"smoke-{i}"}
            for i, p in enumerate(players)]


def check_ticket_lifecycle(srv: Server, pool_instance: Path) -> str:
    players = ticket_players(pool_instance)
    if len(players) < 7:
        raise AssertionError(f"the preset pool has {len(players)} players; the lifecycle needs 7")
    ids = []
    for p in players[:6]:
        status, t = http("POST", f"{srv.url}/v1/tickets", {"pool": "3v3", "players": [p]})
        if status != 201 or t.get("status") not in ("queued", "proposed", "matched"):
            raise AssertionError(f"POST /v1/tickets: HTTP {status}: {t}")
        ids.append(t["id"])

    def all_matched():
        got = [http("GET", f"{srv.url}/v1/tickets/{i}")[1] for i in ids]
        return got if all(t.get("status") == "matched" for t in got) else None

    done = poll(all_matched, 60, "6 tickets of pool 3v3 to be matched")
    matches = {t["match"]["match_id"] for t in done}
    teams = done[0]["match"]["teams"]
    if len(matches) != 1 or sorted(x for team in teams for x in team) != sorted(p["id"] for p in players[:6]):
        raise AssertionError(f"expected one 3v3 match of the 6 players, got {matches} with teams {teams}")
    status, extra = http("POST", f"{srv.url}/v1/tickets", {"pool": "3v3", "players": [players[6]]})
    if status != 201:
        raise AssertionError(f"POST /v1/tickets (7th): HTTP {status}: {extra}")
    status, cancelled = http("DELETE", f"{srv.url}/v1/tickets/{extra['id']}")
    if status != 200 or cancelled.get("status") != "cancelled":
        raise AssertionError(f"DELETE of a queued ticket: HTTP {status}: {cancelled}")
    status, again = http("GET", f"{srv.url}/v1/tickets/{extra['id']}")
    if status != 200 or again.get("status") != "cancelled":
        raise AssertionError(f"GET after DELETE: HTTP {status}: {again}")
    return f"match {next(iter(matches))} ({done[0]['match'].get('method')}), ticket {extra['id']} cancelled"


def check_extra_named(work: Path, args: list[str], extra: str, package: str) -> str:
    """A command needing what this role lacks ends with exit 2 and one line naming the extra to install."""
    proc = cli(*args, cwd=work, ok=False, timeout=120)
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 2 or len(lines) != 1 or f"needs {package}" not in lines[0] \
            or f"mgmatch[{extra}]" not in lines[0]:
        raise AssertionError(f"mgmatch {' '.join(args)}: exit {proc.returncode}, stderr {proc.stderr.strip()[-400:]!r}")
    return lines[0]


def check_training(work: Path) -> Callable[[], str]:
    """The training path on a small scale, each step a command of the installed wheel."""
    train = work / "train"

    def fit() -> str:
        train.mkdir()
        out = json.loads(cli("fit-engagement", "--preset", "3v3", "--matches", "400", "--players", "200",
                             "--holdout", "100", "--epochs", "3", "--seed", "0", "--quiet", "--out",
                             str(train / "engagement.json"), "--plot", str(train / "fit.png"), cwd=work,
                             timeout=300).stdout)
        if not (train / "fit.png").read_bytes().startswith(b"\x89PNG"):
            raise AssertionError("fit-engagement --plot wrote no PNG")
        return f"holdout r2 {out['holdout']['r2']}, {out['seconds']['total']} s"

    def label() -> str:
        pools = train / "pools"
        cli("generate", "--preset", "3v3", "--count", "6", "--seed", "3", "--out", str(pools), cwd=work)
        (pools / "engagement.json").unlink()  # the fitted model labels them, not the preset's
        out = json.loads(cli("label", "--instances", str(pools), "--engagement", str(train / "engagement.json"),
                             "--out", str(train / "labels"), "--workers", "1", "--no-progress", cwd=work,
                             timeout=300).stdout)
        if out["labelled"] != 6 or out["optimal"] != 6:
            raise AssertionError(f"label: {out}")
        return f"{out['optimal']} of 6 optimal"

    def train_export() -> str:
        side = json.loads(cli("train", "--data", str(train / "labels"), "--out", str(train / "model"), "--epochs",
                              "2", "--hidden", "16", "--rounds", "1", "--quiet", cwd=work, timeout=300).stdout)
        onnx_file = train / "model" / "model.onnx"
        if not onnx_file.is_file() or side.get("parity_max_abs", 1.0) > 1e-4:
            raise AssertionError(f"train: no ONNX export or no parity with torch: {side}")
        import onnxruntime

        onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
        return f"{side['version']}, ONNX {onnx_file.stat().st_size} bytes, parity {side['parity_max_abs']:.1e}"

    def solve_with_it() -> str:
        inst = train / "pools" / "instance-00000.json"
        proc = cli("solve", str(inst), "--engagement", str(train / "engagement.json"), "--method", "mgmatch",
                   "--predictor", str(train / "model" / "model.onnx"), "--time-limit-ms", "2000", cwd=work)
        sol = json.loads(proc.stdout)
        if sol.get("status") not in ("optimal", "feasible"):
            raise AssertionError(f"solve with the trained predictor: {sol}")
        return f"{sol['status']}, objective {sol['objective']:.4f}"

    return fit, label, train_export, solve_with_it


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", choices=sorted(EXPECTED_MISSING), required=True)
    ap.add_argument("--wheel", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (emptied first)")
    ap.add_argument("--spec", type=Path, default=ROOT / SPEC_EXAMPLE, help="the spec's 3v3 example instance")
    ap.add_argument("--source", type=Path, default=ROOT, help="the source tree the wheel was built from")
    ap.add_argument("--redis-url", default=os.environ.get("MGMATCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
                    help="Redis for the service environment's server (in-memory store when none answers)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    work = args.work.resolve()
    if work.exists():
        for f in sorted(work.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
    work.mkdir(parents=True, exist_ok=True)
    checks = Checks(args.env)
    print(f"install smoke [{args.env}] with {sys.executable} ({args.wheel.name})", flush=True)

    checks.run("wheel holds every module and data file", lambda: check_wheel(args.wheel.resolve(), args.source))
    checks.run("every installed module imports", lambda: check_imports(args.env))
    checks.run(f"what the {args.env} role leaves out is not installed", lambda: check_absent(args.env))

    pools = {"3v3": work / "pool-3v3", "12v12": work / "pool-12v12", "ffa-32": work / "pool-ffa-32"}
    made = checks.run("mgmatch generate (3v3, 12v12, ffa-32)", lambda: "; ".join(
        cli("generate", "--preset", p, "--count", "1", "--seed", "7", "--out", str(d), cwd=work).stdout or str(d)
        for p, d in pools.items()))
    found: list[str] = []

    def read_methods() -> str:
        found.extend(listed_methods(cli("solve", "--help", cwd=work).stdout))
        from mgmatch.solvers.base import methods

        registered = list(methods())
        if sorted(found) != sorted(registered):
            raise AssertionError(f"--help lists {found}, the registry has {registered}")
        return ", ".join(found)

    checks.run("mgmatch solve --help lists every method", read_methods)
    if made:
        inst3 = pools["3v3"] / "instance-00000.json"
        # each method on a pool it is made for: the large-lobby search on a free-for-all lobby (it answers
        # no_solution where a pool's rules need role slots), every other one on the 3v3 pool
        lobby = pools["ffa-32"] / "instance-00000.json"
        jobs = ([(lobby if m in LARGE_LOBBY_METHODS else inst3, m) for m in found]
                + [(pools["12v12"] / "instance-00000.json", m) for m in ("mgmatch", "bgcn")])
        with ThreadPoolExecutor(max_workers=2) as ex:
            futures = {(i, m): ex.submit(solve_and_check, work, i, m) for i, m in jobs}
            for (inst, m), fut in futures.items():
                checks.run(f"solve --method {m} on {inst.parent.name} + check", fut.result)

        spec = args.spec if args.spec.exists() else None
        if spec is None:
            print(f"note  {args.spec} not found: /v1/solve gets a generated 3v3 pool", flush=True)
        # the service image runs on Redis: its server uses the Redis store (Lua scripts from the wheel)
        store = redis_store(args.redis_url) if args.env == "service" else None
        if args.env == "service" and store is None:
            print(f"note  no Redis at {args.redis_url}: the service smoke runs on the in-memory store", flush=True)
        srv = Server(work, config=spec_config(work, spec) if spec else None, grpc=args.env == "service",
                     settings=store)
        print(f"note  mgmatch serve on the {'Redis' if store else 'in-memory'} store", flush=True)
        try:
            if checks.run("mgmatch serve answers /readyz", srv.ready):
                checks.run("POST /v1/solve + mgmatch check",
                           lambda: check_http_solve(srv, spec or inst3, work, spec is not None))
                checks.run("ticket lifecycle: 6 matched, 1 cancelled", lambda: check_ticket_lifecycle(srv, inst3))
                if srv.grpc_port:
                    checks.run("serve --grpc-port listens", lambda: check_grpc_listens(srv))
        finally:
            checks.run("mgmatch serve stops cleanly, no traceback", srv.stop)
            if store is not None:
                checks.run("the smoke's Redis keys deleted", lambda: drop_keys(store))
        if args.env == "service":
            checks.run("a training command names [train]", lambda: check_extra_named(
                work, ["fit-engagement", "--preset", "3v3", "--out", str(work / "e.json")], "train", "torch"))
        if args.env == "train":
            checks.run("serve --grpc-port without the grpc extra: exit 2, one line", lambda: check_grpc_needs_extra(work))
            fit, label, train_export, solve_with_it = check_training(work)
            if checks.run("fit-engagement: a simulated log, its plot", fit) and checks.run(
                    "label: exact optima of 6 pools", label) and checks.run(
                    "train: a tiny predictor exported to ONNX", train_export):
                checks.run("solve --method mgmatch with the trained predictor + check", solve_with_it)

    total = len(checks.passed) + len(checks.failed)
    took = time.perf_counter() - t0
    if checks.failed:
        print(f"install smoke [{args.env}]: FAILED {len(checks.failed)} of {total} checks in {took:.0f} s: "
              f"{'; '.join(checks.failed)}", flush=True)
        return 1
    print(f"install smoke [{args.env}]: PASSED all {total} checks in {took:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
