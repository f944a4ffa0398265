"""The checks of ``scripts/image-test.sh`` against the running images; the standard library only, so the
host's plain ``python3`` runs them (the images hold mgmatch, the host need not).

Not a pytest module. Subcommands:

- ``spec-config DIR MOUNT``: print a service config (JSON, which is YAML) registering the spec example's
  engagement model ``small`` at ``MOUNT/engagement-small.json`` (pinned by its SHA-256 read in ``DIR``);
- ``solve URL DIR``: wait for ``URL/readyz``, then POST ``DIR/instance-3v3-small.json`` to ``/v1/solve``
  with the model ``small``: the answer must be the optimum of ``DIR/expected-small.json``;
- ``prometheus-config``: print the local stack's Prometheus config for the ports in the environment
  (``MGMATCH_STACK_*``, as deploy/local/compose.host.yml reads them);
- ``stack POOL``: against that stack (API key ``MGMATCH_API_KEYS``): the API ready, 6 tickets of pool 3v3
  made from the players of the instance file ``POOL`` all matched into one match, a 7th cancelled,
  ``/metrics`` counting the match, and Prometheus's targets API saying every mgmatch process is up.

Each check prints one line; exit status 1 with the reason on failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

#: the 3v3 pool of deploy/config/service.yaml, the service's default built-in pools besides
POOL_3V3 = {"name": "3v3", "teams": 2, "team_size": 3, "engagement_model": "3v3",
            "rules": [{"kind": "party_together"}], "method": "exact", "time_budget_ms": 100,
            "max_candidates": 24, "dispatch": {"policy": "immediate"}}


def http(method: str, url: str, body: object | None = None, key: str | None = None,
         timeout: float = 30) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"} | ({"x-api-key": key} if key else {})
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            return err.code, json.loads(raw or b"{}")
        except ValueError:
            return err.code, raw.decode(errors="replace")
    try:
        return resp.status, json.loads(raw or b"{}")
    except ValueError:
        return resp.status, raw.decode(errors="replace")


def poll(fn: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            got = fn()
        except (OSError, ValueError) as err:
            got, last = None, err
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last: {last})" if last else ""))


def ok(line: str) -> None:
    print(f"image-test:   ok  {line}", flush=True)


def spec_config(folder: Path, mount: str) -> dict:
    model = folder / "engagement-small.json"
    return {"pools": [POOL_3V3], "models": {"engagement": [
        {"name": "small", "path": f"{mount}/engagement-small.json",
         "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}]}}


def ready(url: str, timeout: float = 120) -> None:
    poll(lambda: http("GET", f"{url}/readyz", timeout=5)[0] == 200, timeout, f"{url}/readyz")


def check_solve(url: str, folder: Path) -> None:
    t0 = time.monotonic()
    ready(url)
    ok(f"the image serves: {url}/readyz after {time.monotonic() - t0:.0f} s")
    body = json.loads((folder / "instance-3v3-small.json").read_text())
    body |= {"engagement_model": "small", "time_limit_ms": 5000}
    status, sol = http("POST", f"{url}/v1/solve", body)
    if status != 200 or not isinstance(sol, dict):
        raise AssertionError(f"/v1/solve: HTTP {status}: {sol}")
    want = json.loads((folder / "expected-small.json").read_text())
    if sol.get("status") != want["status"] or abs(sol.get("objective", float("nan")) - want["objective"]) > 1e-6:
        raise AssertionError(f"/v1/solve answered {sol.get('status')} {sol.get('objective')}, the spec expects "
                             f"{want['status']} {want['objective']}")
    if sorted(map(sorted, sol["teams"])) != sorted(map(sorted, want["teams"])):
        raise AssertionError(f"/v1/solve teams {sol['teams']}, the spec expects {want['teams']}")
    ok(f"POST /v1/solve on the spec example: {sol['status']}, objective {sol['objective']:.6f} (the spec's optimum)")


def ports() -> dict[str, int]:
    names = {"redis": "REDIS_PORT", "api": "API_PORT", "matchmaker": "MATCHMAKER_METRICS_PORT",
             "solver": "SOLVER_METRICS_PORT", "solver-2": "SOLVER2_METRICS_PORT", "prometheus": "PROMETHEUS_PORT"}
    defaults = {"redis": 16379, "api": 18000, "matchmaker": 19101, "solver": 19102, "solver-2": 19103,
                "prometheus": 19090}
    return {k: int(os.environ.get(f"MGMATCH_STACK_{v}", defaults[k])) for k, v in names.items()}


def prometheus_config() -> str:
    p = ports()
    jobs = {"mgmatch-api": [p["api"]], "mgmatch-matchmaker": [p["matchmaker"]],
            "mgmatch-solver": [p["solver"], p["solver-2"]]}
    lines = ["global:", "  scrape_interval: 2s", "  evaluation_interval: 10s", "scrape_configs:"]
    for job, targets in jobs.items():
        lines += [f"  - job_name: {job}", "    static_configs:",
                  f"      - targets: {json.dumps([f'127.0.0.1:{t}' for t in targets])}"]
    return "\n".join(lines) + "\n"


#: loopback addresses as /proc/net/tcp{,6} write them: 127.0.0.1, ::ffff:127.0.0.1 and ::1
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def listening_beyond_loopback(ports: set[int]) -> list[str]:
    """Listening TCP sockets on ``ports`` bound to anything but 127.0.0.1 (read from /proc/net/tcp{,6}:
    the stack runs on the host network, so its sockets are the host's)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, port = local.rsplit(":", 1)
            if state != "0A" or int(port, 16) not in ports:  # 0A: LISTEN
                continue
            if addr not in LOOPBACK:
                out.append(f"{table}: {addr}:{int(port, 16)}")
    return out


def ticket_players(pool_instance: Path) -> list[dict]:
    players = json.loads(pool_instance.read_text())["players"]
    return [{k: v for k, v in pl.items() if k not in ("waited_s", "party")} | {"id": f"it-{i}"}
            for i, pl in enumerate(players)]


def check_stack(pool_instance: Path) -> None:
    p = ports()
    api = f"http://127.0.0.1:{p['api']}"
    key = os.environ["MGMATCH_API_KEYS"].split(",")[0]
    t0 = time.monotonic()
    ready(api)
    ok(f"api ready on 127.0.0.1:{p['api']} after {time.monotonic() - t0:.0f} s (Redis on 127.0.0.1:{p['redis']})")
    for name in ("matchmaker", "solver", "solver-2"):
        poll(lambda name=name: http("GET", f"http://127.0.0.1:{p[name]}/metrics", timeout=5)[0] == 200, 120,
             f"the {name} worker's /metrics on 127.0.0.1:{p[name]}")
    ok("matchmaker and both solvers serve /metrics")
    status, _ = http("POST", f"{api}/v1/tickets", {"pool": "3v3", "players": [ticket_players(pool_instance)[0]]})
    if status != 401:
        raise AssertionError(f"POST /v1/tickets without the API key: HTTP {status}, expected 401")
    # every player of the pool, one ticket each: deploy/config/service.yaml splits pool 3v3 between two
    # A/B arms by player, and a match forms inside one arm
    players = ticket_players(pool_instance)
    ids = []
    for pl in players:
        status, t = http("POST", f"{api}/v1/tickets", {"pool": "3v3", "players": [pl]}, key)
        if status != 201 or not isinstance(t, dict):
            raise AssertionError(f"POST /v1/tickets: HTTP {status}: {t}")
        ids.append(t["id"])
    ok(f"{len(ids)} tickets posted to pool 3v3 ({ids[0]}, …)")

    def matched():  # the tickets of a match turn matched one by one: wait for a whole match
        got = [http("GET", f"{api}/v1/tickets/{i}", key=key)[1] for i in ids]
        done = [t for t in got if isinstance(t, dict) and t.get("status") == "matched"]
        per_match: dict[str, int] = {}
        for t in done:
            per_match[t["match"]["match_id"]] = per_match.get(t["match"]["match_id"], 0) + 1
        return done if any(n >= 6 for n in per_match.values()) else None

    t0 = time.monotonic()
    done = poll(matched, 120, "a match of pool 3v3 (matchmaker → solvers over Redis)")
    match = next(t["match"] for t in done
                 if sum(u["match"]["match_id"] == t["match"]["match_id"] for u in done) >= 6)
    members = [t for t in done if t["match"]["match_id"] == match["match_id"]]
    placed = sorted(x for team in match["teams"] for x in team)
    if [len(team) for team in match["teams"]] != [3, 3] or len(members) != 6 \
            or placed != sorted(pl if isinstance(pl, str) else pl["id"] for t in members for pl in t["players"]):
        raise AssertionError(f"not a 3v3 match of 6 matched tickets: {match} ({len(members)} tickets)")
    ok(f"matched in {time.monotonic() - t0:.1f} s: {match['match_id']} by {match.get('method')} (arm "
       f"{match.get('arm')}), teams {match['teams']}; {len(done)} of {len(ids)} tickets matched")
    queued = [i for i in ids if http("GET", f"{api}/v1/tickets/{i}", key=key)[1].get("status") == "queued"]
    if queued:
        status, gone = http("DELETE", f"{api}/v1/tickets/{queued[0]}", key=key)
        if status != 200 or gone.get("status") != "cancelled":
            raise AssertionError(f"DELETE of a queued ticket: HTTP {status}: {gone}")
        ok(f"a queued ticket cancelled ({queued[0]})")

    exposed = listening_beyond_loopback(set(p.values()) | {int(os.environ.get("MGMATCH_STACK_GRPC_PORT", 15051))})
    if exposed:
        raise AssertionError(f"listening beyond the loopback: {exposed}")
    ok(f"every port of the stack listens on 127.0.0.1 only ({', '.join(map(str, sorted(p.values())))}, gRPC)")

    prom = f"http://127.0.0.1:{p['prometheus']}"
    want = {"mgmatch-api": 1, "mgmatch-matchmaker": 1, "mgmatch-solver": 2}

    def all_up():
        status, got = http("GET", f"{prom}/api/v1/targets?state=active", timeout=5)
        if status != 200:
            return None
        up: dict[str, int] = {}
        for t in got["data"]["activeTargets"]:
            if t["health"] == "up":
                up[t["labels"]["job"]] = up.get(t["labels"]["job"], 0) + 1
        return up if all(up.get(j, 0) >= n for j, n in want.items()) else None

    t0 = time.monotonic()
    up = poll(all_up, 90, f"Prometheus (127.0.0.1:{p['prometheus']}) to report every target up: {want}")
    ok(f"Prometheus scrapes every process, all up after {time.monotonic() - t0:.0f} s: {up}")

    def scraped_match():
        status, got = http("GET", f"{prom}/api/v1/query?query=sum(mgmatch_matchmaker_matches_total)", timeout=5)
        result = got["data"]["result"] if status == 200 else []
        return result and float(result[0]["value"][1]) >= 1

    poll(scraped_match, 60, "Prometheus to hold mgmatch_matchmaker_matches_total ≥ 1")
    ok("Prometheus holds the match in mgmatch_matchmaker_matches_total")


def main(argv: list[str]) -> int:
    try:
        match argv:
            case ["spec-config", folder, mount]:
                print(json.dumps(spec_config(Path(folder), mount)))
            case ["solve", url, folder]:
                check_solve(url, Path(folder))
            case ["prometheus-config"]:
                sys.stdout.write(prometheus_config())
            case ["stack", pool]:
                check_stack(Path(pool))
            case _:
                print(__doc__, file=sys.stderr)
                return 2
    except (AssertionError, OSError, KeyError, ValueError, TypeError) as err:
        print(f"image-test:   FAILED {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
