"""Alman–McKay game queues (Theorem 1 and §6): the least-imbalanced k-vs-k game by skill.

- :mod:`.imbalance` — the imbalance f = α·d_p + v_q of a game, exact best splits, :class:`Game`;
- :mod:`.structure` — :class:`GameQueue`: insert, delete and best-game query in O(log n) for fixed k;
- :mod:`.partition` — the offline O(n log n) ρ-approximation;
- :mod:`.roles` — role-restricted games (shortest intervals with distinct representatives);
- :mod:`.solver` — ``--method game-queue`` (registered when this package is imported).

The dispatch policy ``game_queue`` that runs a queue over a pool's waiting tickets is
:class:`mgmatch.solvers.dispatch.game_queue.GameQueuePolicy`.
"""

from .imbalance import (
    MAX_K,
    Game,
    Params,
    best_split,
    best_split_all,
    best_split_batch,
    check_values,
    d_p,
    imbalance,
    p_skill,
    split_ids,
    split_masks,
    v_q,
)
from .partition import Partition, partition
from .solver import EXHAUSTIVE_GAMES, GameQueueSolver
from .structure import GameQueue

__all__ = [
    "EXHAUSTIVE_GAMES", "MAX_K", "Game", "GameQueue", "GameQueueSolver", "Params", "Partition", "best_split",
    "best_split_all", "best_split_batch", "check_values", "d_p", "imbalance", "p_skill", "partition",
    "split_ids", "split_masks", "v_q",
]
