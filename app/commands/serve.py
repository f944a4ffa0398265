"""``mgmatch serve``: the HTTP API; embedded default = in-memory store and every worker in-process."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from mgmatch.app.cli import cli, fail


@cli.command("serve", help="Run the matchmaking service (HTTP API; OpenAPI at /docs).")
def serve_cmd(
    config: Annotated[Path | None, typer.Option(help="Service config (YAML); default: built-in 3v3 and 12v12 pools.")] = None,
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    store: Annotated[str | None, typer.Option(help="memory (default) or redis (env MGMATCH_STORE).")] = None,
    redis_url: Annotated[str | None, typer.Option(help="Redis URL (env MGMATCH_REDIS_URL).")] = None,
    workers: Annotated[bool | None, typer.Option("--workers/--no-workers",
                                                 help="Run matchmakers and solvers in this process (default on).")] = None,
    grpc_port: Annotated[int | None, typer.Option(help="Also serve the gRPC API on this port (env MGMATCH_GRPC_PORT; "
                                                       "0 = off, the default).")] = None,
) -> None:
    from pydantic import ValidationError

    from mgmatch.app.settings import load_settings

    if not 0 < port < 65536:
        fail(f"--port must be in 1..65535, got {port}")
    try:
        settings = load_settings(config=config, store=store, redis_url=redis_url, embedded_workers=workers,
                                 grpc_port=grpc_port)
    except ValidationError as err:
        first = err.errors()[0]
        fail(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")
    run_server(settings, host, port)


log = logging.getLogger("mgmatch.serve")


def run_server(settings, host: str, port: int) -> None:
    import uvicorn

    from mgmatch.app.api import build_asgi
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.store import wait_reachable

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rt = Runtime.build(settings)
    if settings.store == "redis" and not wait_reachable(rt.probe.check, settings.startup_wait_s,
                                                        f"store at {settings.redis_url}"):
        fail(f"cannot reach Redis at {settings.redis_url} within {settings.startup_wait_s:g} s (MGMATCH_STARTUP_WAIT_S)")
    if settings.grpc_port and settings.hmac_secret and not settings.api_keys:
        log.warning("gRPC takes API keys only: with MGMATCH_HMAC_SECRET and no MGMATCH_API_KEYS every gRPC call "
                    "is refused (UNAUTHENTICATED)")
    grpc_server = None
    if settings.grpc_port:
        try:
            from mgmatch.app.grpc_server import start_grpc
        except ImportError as err:
            fail(f"--grpc-port needs the grpc extra (pip install 'mgmatch[grpc]'): {err}")
        try:
            grpc_server, _ = start_grpc(rt, host, settings.grpc_port)
        except (OSError, RuntimeError) as err:
            fail(f"--grpc-port: {err}")
    if settings.embedded_workers:
        rt.start_embedded()
    rt.settle()
    try:
        uvicorn.run(build_asgi(rt), host=host, port=port, log_level="warning", access_log=False)
    finally:
        if grpc_server is not None:
            grpc_server.stop(grace=2)
        rt.stop()
