"""Players' ratings in Redis (:class:`~mgmatch.app.store.protocols.RatingStore`): a hash per player and a
mark per rated match, all in the ``{ratings}`` slot so one script updates a match's players at once."""

from __future__ import annotations

import anyio.to_thread

from ..base import Rating
from ..protocols import RatingStore
from .core import RedisCore
from .errors import _guard_public


def _rating(f: list) -> Rating | None:
    mu, sigma, games, version = f
    if mu is None or sigma is None:
        return None
    return Rating(float(mu), float(sigma), int(games or 0), int(version or 0))


@_guard_public
class RedisRatings(RedisCore, RatingStore):
    """Ratings by player id; updates once per match, compared on each player's version."""

    def get_ratings(self, player_ids: list[str]) -> dict[str, Rating]:
        if not player_ids:
            return {}
        pipe = self.r.pipeline(transaction=False)
        for pid in player_ids:
            pipe.hmget(self.keys.rating(pid), "mu", "sigma", "games", "version")
        return {pid: r for pid, f in zip(player_ids, pipe.execute(), strict=True) if (r := _rating(f)) is not None}

    async def aget_ratings(self, player_ids: list[str]) -> dict[str, Rating]:
        aio = self._async()
        if aio is None or not player_ids:
            return await anyio.to_thread.run_sync(self.get_ratings, player_ids)
        async with aio[0].pipeline(transaction=False) as pipe:
            for pid in player_ids:
                pipe.hmget(self.keys.rating(pid), "mu", "sigma", "games", "version")
            rows = await pipe.execute()
        return {pid: r for pid, f in zip(player_ids, rows, strict=True) if (r := _rating(f)) is not None}

    def rate_match(self, match_id: str, before: dict[str, int], after: dict[str, Rating]) -> str:
        pids = list(after)
        args: list = [max(1, int(self.match_retention_s * 1000))]
        for pid in pids:
            r = after[pid]
            args += [int(before.get(pid, 0)), repr(float(r.mu)), repr(float(r.sigma)), int(r.games)]
        keys = [self.keys.rated(match_id), *(self.keys.rating(pid) for pid in pids)]
        return str(self._s["rate_match"](keys=keys, args=args))
