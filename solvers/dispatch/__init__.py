"""Dispatch policies: *when* to run a solve for a pool, and *on which waiting tickets*.

The service's matchmaker loop owns one :class:`Policy` object per pool (policies may keep
state between calls, e.g. the next batch round or the observed skill mix) and calls
:meth:`Policy.decide` every tick::

    from mgmatch.solvers.dispatch import PoolShape, Waiting, make_policy

    policy = make_policy("batch", interval_s=60, max_candidates=300,
                         relax={"steps": [{"after_s": 30, "rule": "skill_balance",
                                           "set": {"max_diff": 400}}]})
    shape = PoolShape(teams=2, sizes=(5, 5))
    d = policy.decide(waiting, shape, now=time.time())   # waiting: list[Waiting]
    if d.solve:
        cands = [t for t in waiting if t.ticket_id in set(d.tickets)]   # ordered by priority: d.tickets
        inst = d.apply(build_instance(cands, shape, pool_rules))        # applies d.relax_steps
        for _ in range(d.max_matches):                                  # solve, claim, drop matched …
            ...
    # tickets not in d.tickets (or not matched): d.eta_s.get(ticket_id) → seconds, or None
    # call decide again after d.next_check_s seconds (None: on the next tick / next arrival)

Types (all frozen dataclasses, JSON-friendly via ``to_json``):

- :class:`Waiting` — one ticket: ``ticket_id``, ``players`` (core :class:`Player` objects; a
  party ticket has several and is never split), ``enqueued_at`` (seconds, same clock as
  ``now``), ``pool``.
- :class:`PoolShape` — ``teams`` and ``sizes`` of a match in the pool.
- :class:`Decision` — ``solve`` (run a solve now?), ``tickets`` (candidate ticket ids in
  priority order, at most ``max_candidates`` players in all; empty when ``solve`` is false),
  ``max_matches`` (how many matches the loop may form from these candidates, one after the
  other), ``relax_steps`` (the :class:`~mgmatch.solvers.relax.RelaxStep` list active now;
  :meth:`Decision.apply` applies them to an instance), ``waited_s`` (the waiting time that
  selected them), ``eta_s`` (ticket id → estimated seconds until that ticket is next
  considered, for tickets left waiting; set by fixed-round policies), ``next_check_s`` and a
  human-readable ``reason``.

Policies (``make_policy(name, **params)``; every policy also takes ``max_candidates`` (default
200), ``relax`` (a relaxation config, see :mod:`mgmatch.solvers.relax`), ``skill_scale``
(default 100) and ``wait_scale`` (default 30 s), the last two weighting skill distance
against waiting time when candidates are chosen):

- ``immediate`` — solve as soon as enough players wait to fill one match.
- ``batch`` (Awesomenauts) — fixed rounds every ``interval_s`` seconds (``offset_s`` phase);
  at a round everything waiting (up to ``max_candidates``, default 300) is matched at once;
  between rounds every ticket gets the exact ETA of the next round.
- ``quality_threshold`` (Heroes of the Storm) — the longest waiter is top priority; a match is
  started as soon as a group of good enough quality exists (skill spread ≤ ``max_spread`` +
  ``spread_growth_per_s`` × waited, capped at ``spread_cap``).
- ``wu`` (Wu, dynamic matching with teams) — greedy (match as soon as 2n wait) or patient
  (with 2n waiting match only if a zero-imbalance split exists, else wait for one more arrival),
  chosen by Wu's threshold rule from the observed fraction q of high-skill arrivals (skill ≥
  ``high_skill``), team size n and the configured ``alpha``.
- ``game_queue`` (Alman–McKay) — an incremental game queue over the waiting players; the
  players of the ``games`` best games (imbalance α·d_p + v_q + β·entry time) form the pool,
  solved when the best game's imbalance is ≤ ``max_imbalance``.

Bad parameters raise :class:`~mgmatch.core.errors.InvalidInput` naming the parameter.

Layout: :mod:`.contract` (the types above and the :class:`Policy` protocol), :mod:`.base`
(:class:`BasePolicy`: the shared parameters, candidate selection and parameter parsing), one
module per policy (:mod:`.immediate`, :mod:`.batch`, :mod:`.quality_threshold`, :mod:`.wu`,
:mod:`.game_queue`; each class parses its own parameters in ``from_params``) and
:mod:`.factory` (:func:`make_policy`). A new policy is a :class:`BasePolicy` subclass with
``from_params`` and ``decide``, added to :data:`~.factory.POLICY_CLASSES`.
"""

from .base import BasePolicy
from .batch import Batch
from .contract import Decision, Policy, PoolShape, Waiting, player_skill, total_players
from .factory import POLICIES, make_policy
from .game_queue import GameQueuePolicy
from .immediate import Immediate
from .quality_threshold import QualityThreshold
from .wu import WuPolicy

__all__ = [
    "POLICIES", "BasePolicy", "Batch", "Decision", "GameQueuePolicy", "Immediate", "Policy", "PoolShape",
    "QualityThreshold", "Waiting", "WuPolicy", "make_policy", "player_skill", "total_players",
]
