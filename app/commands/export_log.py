"""``mgmatch export-log``: the matches the service formed that have a result, as a spec §5 match log."""

from __future__ import annotations

import math
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import cli, emit, fail


def parse_since(text: str) -> float:
    """Unix seconds, or an ISO 8601 time (``2026-11-23T18:00:00Z``; no zone = UTC)."""
    try:
        value = float(text)
    except ValueError:
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            fail(f"--since must be unix seconds or an ISO 8601 time like 2026-11-23T18:00:00Z, got {text!r}")
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    if not math.isfinite(value):
        fail(f"--since must be a finite number of unix seconds, got {text!r}")
    return value


@cli.command("export-log",
             help="Write the matches the service formed that have a posted result (POST /v1/matches/{id}/result) as "
                  "a match log (mgmatch-matchlog/v1, spec §5) for `mgmatch fit-engagement --logs`. Reads the "
                  "shared store (Redis at --redis-url); written to a temporary file and renamed when complete.")
def export_log_cmd(
    out: Annotated[Path, typer.Option(help="Output match log (JSON Lines); replaced only when complete.")],
    config: Annotated[Path | None, typer.Option(help="Service config (YAML) naming the pools (env MGMATCH_CONFIG; "
                                                     "default: the built-in pools).")] = None,
    store: Annotated[str | None, typer.Option(help="The store the service uses, as `serve` takes it: redis "
                                                   "(env MGMATCH_STORE; implied by a Redis URL).")] = None,
    redis_url: Annotated[str | None, typer.Option(help="Redis URL (env MGMATCH_REDIS_URL); implies --store redis; "
                                                       "keys under MGMATCH_KEY_PREFIX.")] = None,
    pool: Annotated[list[str] | None, typer.Option("--pool", help="Only this pool (repeat for several); default: "
                                                                  "every pool of the config.")] = None,
    since: Annotated[str | None, typer.Option(help="Only matches formed at or after this time (unix seconds or "
                                                   "ISO 8601).")] = None,
) -> None:
    from pydantic import ValidationError

    from mgmatch.app.config import POOL_NAME, load_config
    from mgmatch.app.results import export_matchlog
    from mgmatch.app.settings import load_settings
    from mgmatch.app.store import StoreUnavailable, make_store

    if out.is_dir():
        fail(f"--out names a folder: {str(out)!r}")
    if not out.parent.is_dir():
        fail(f"--out: no such folder {str(out.parent)!r}")
    t0 = parse_since(since) if since is not None else None
    if store is None and not os.environ.get("MGMATCH_STORE") and (redis_url or os.environ.get("MGMATCH_REDIS_URL")):
        store = "redis"  # a Redis URL names the shared store; only a store given outright overrides it
    try:
        settings = load_settings(config=config, store=store, redis_url=redis_url)
    except ValidationError as err:
        first = err.errors()[0]
        fail(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")
    if settings.store != "redis":
        fail("--store: the memory store lives inside the serving process and ends with it; export-log reads a "
             "shared store: give --redis-url (or MGMATCH_REDIS_URL), which implies --store redis")
    if pool:
        for p in pool:
            if not re.match(POOL_NAME, p):
                fail(f"--pool: {p!r} is not a pool name ({POOL_NAME})")
    configured = [p.name for p in load_config(settings.config).pools]
    pools = list(dict.fromkeys(pool)) if pool else configured
    st = make_store(settings)
    try:
        for p in pools:
            # a pool no longer in the config still exports while the store keeps its records (retention);
            # one that neither knows is a typo, not "no matches yet"
            if p not in configured and not st.match_index(p, float("-inf"), 1):
                fail(f"--pool: unknown pool {p!r}: not in the config ({', '.join(configured) or 'no pools'}) and "
                     f"the store holds no match of it")
        stats = export_matchlog(st, pools, out, t0)
    except StoreUnavailable as err:
        fail(f"--redis-url: cannot read the store at {settings.redis_url}: {err}")
    except ValueError as err:
        fail(str(err))
    finally:
        st.close()
    if not stats.matches:
        kept = sum(stats.without_result.values())
        sys.stderr.write(f"mgmatch: export-log: no matches with a result in {', '.join(pools)}"
                         + (f" since {since}" if since is not None else "")
                         + (f" ({kept} without one yet)" if kept else "") + f"; {out} is empty\n")
    emit({"out": str(out), "matches": stats.matches, "per_pool": stats.written,
          "without_result": stats.without_result})
