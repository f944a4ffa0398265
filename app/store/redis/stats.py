"""Wait statistics and unmatched reasons in Redis (:class:`~mgmatch.app.store.protocols.StatsStore`):
the pool's throughput hash per second of Redis TIME, and one script that reads a wait estimate's inputs."""

from __future__ import annotations

import anyio.to_thread

from ..base import THROUGHPUT_WINDOW_S, WaitInputs, rate_of
from ..protocols import StatsStore
from .core import RedisCore, _lua
from .errors import _guard_public


@_guard_public
class RedisStats(RedisCore, StatsStore):
    """Throughput, wait inputs and unmatched reasons."""

    def record_matched(self, pool: str, players: int, now: float | None = None) -> None:
        """One committed match at Redis TIME (``now`` is ignored: the server's clock decides)."""
        self._script("record_matched")(keys=[self.keys.throughput(pool)], args=[int(players), THROUGHPUT_WINDOW_S])

    def _wait_kv(self, pool: str, ticket_id: str) -> dict[str, list]:
        k = self.keys
        return {"keys": [k.queue(pool), k.pending(pool), k.players(pool), k.throughput(pool)],
                "args": [ticket_id]}

    @staticmethod
    def _wait_reply(out: list) -> WaitInputs:
        rank, depth, pending, players, now, flat = out
        samples = [(int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
        rank = int(rank)
        return WaitInputs(rank if rank >= 0 else None, int(depth), int(players), int(depth) + int(pending),
                          rate_of(samples, float(now)), float(now))

    def wait_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        return self._wait_reply(self._script("wait_inputs")(**self._wait_kv(pool, ticket_id)))

    async def await_inputs(self, pool: str, ticket_id: str) -> WaitInputs:
        aio = self._async()
        if aio is None:
            return await anyio.to_thread.run_sync(self.wait_inputs, pool, ticket_id)
        client, scripts = aio
        if "wait_inputs" not in scripts:
            scripts["wait_inputs"] = client.register_script(_lua("wait_inputs"))
        return self._wait_reply(await scripts["wait_inputs"](**self._wait_kv(pool, ticket_id)))

    def set_unmatched_reason(self, pool: str, ticket_id: str, reason: str | None) -> bool:
        return bool(self._script("unmatched")(keys=[self.keys.ticket(pool, ticket_id)], args=[reason or ""]))
