"""Players' ratings from match results, with openskill (Plackett–Luce).

A result may carry the match's outcome (``ranks``, one per team, lower is better, or ``winner``); the
service then updates every player of the match with openskill's Plackett–Luce model and keeps the
ratings in the store (:class:`~mgmatch.app.store.RatingStore`), once per match. A pool with
``skill_from: ratings`` uses a player's ``mu`` as the ticket's ``skill`` when the ticket gives none.
"""

from __future__ import annotations

from typing import Any

from openskill.models import PlackettLuce

from .store import Rating, RatingStore, StoreUnavailable

MODEL = PlackettLuce()
#: how often an update reads again when another match rated one of its players meanwhile
_ATTEMPTS = 16


def default_rating() -> Rating:
    """A player never rated: the model's prior (mu 25, sigma 25/3)."""
    return Rating(float(MODEL.mu), float(MODEL.sigma), 0, 0)


def rating_view(player_id: str, r: Rating | None) -> dict[str, Any]:
    """``GET /v1/players/{id}``: mu, sigma, ordinal (mu − 3·sigma, a conservative skill) and games rated."""
    r = r or default_rating()
    return {"id": player_id, "mu": r.mu, "sigma": r.sigma, "ordinal": r.mu - 3.0 * r.sigma, "games": r.games}


def ranks_from(winner: int, teams: int) -> list[float]:
    """A winner as ranks: the winning team first, the others tied behind it."""
    return [0.0 if j == winner else 1.0 for j in range(teams)]


def rate_match(store: RatingStore, match_id: str, teams: list[list[str]], ranks: list[float]) -> tuple[str, dict]:
    """Update the match's players from ``ranks``, once per match: ``("applied", ratings)`` or ``("done", {})``
    when the match was rated before. Reads the players' ratings, computes, and writes only if none of
    them changed meanwhile (else reads again).

    Raises:
        StoreUnavailable: the players' ratings kept changing under concurrent updates (retry later).
    """
    ids = [p for team in teams for p in team]
    for _ in range(_ATTEMPTS):
        have = store.get_ratings(ids)
        prior = {p: have.get(p) or default_rating() for p in ids}
        new = MODEL.rate([[MODEL.rating(mu=prior[p].mu, sigma=prior[p].sigma) for p in team] for team in teams],
                         ranks=list(ranks))
        after = {p: Rating(float(r.mu), float(r.sigma), prior[p].games + 1)
                 for team, rated in zip(teams, new, strict=True) for p, r in zip(team, rated, strict=True)}
        status = store.rate_match(match_id, {p: prior[p].version for p in ids}, after)
        if status == "applied":
            return status, {p: rating_view(p, r) for p, r in after.items()}
        if status == "done":
            return status, {}
    raise StoreUnavailable(f"ratings of match {match_id}'s players kept changing; retry")


def skill_of(r: Rating | None) -> float:
    """The ``skill`` a ``skill_from: ratings`` pool gives a player without one: the rating's mu."""
    return (r or default_rating()).mu
