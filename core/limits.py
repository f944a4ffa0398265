"""Documented bounds on input, shared by the CLI, HTTP and gRPC (README "Input limits").

Every value here is part of the contract with clients: input beyond a bound is refused with the
field's path (HTTP 422, or 400 for ``body``; CLI exit 2), never clipped. The bounds leave the spec
example and every preset far inside them; they exist so that no input can make a request run
out of memory, stack or floating-point range.

:func:`json_depth_exceeds` measures a JSON document's nesting on its raw bytes, before any
parser recurses into it.
"""

from __future__ import annotations

import re

import numpy as np

#: deepest nesting of objects/lists a JSON document (a request body, an instance file) may have
MAX_JSON_DEPTH = 64
#: deepest nesting of a rule condition (``not``/``all``/``any``; a literal counts 1)
MAX_CONDITION_DEPTH = 16
#: most teams in an instance or a pool (100 teams of one or two: a battle royale or a large free-for-all;
#: measured up to 32 teams of one and 25 teams of four, docs/guides/large-lobbies.md)
MAX_TEAMS = 100
#: largest team
MAX_TEAM_SIZE = 64
#: most players one match selects (Σ team sizes; FlexMatch's largest matches)
MAX_SELECTED = 200
#: longest player id
MAX_ID_CHARS = 64
#: longest party id, role name, region name, attribute key
MAX_NAME_CHARS = 64
#: longest string attribute value of a ticket
MAX_TEXT_CHARS = 256
#: most features per player (a pool's model fixes the exact number)
MAX_FEATURES = 4096
#: most roles one player accepts, most regions one player has a ping for
MAX_ROLES = 32
MAX_REGIONS = 64
#: |feature| bound
MAX_ABS_FEATURE = 1e6
#: |skill| bound
MAX_ABS_SKILL = 1e6
#: largest ping, milliseconds
MAX_PING_MS = 100_000.0
#: largest ``waited_s`` (seconds; about 116 days)
MAX_WAITED_S = 1e7
#: largest ``games_per_day`` of a player (optional field read by EOMM)
MAX_GAMES_PER_DAY = 1e4
#: longest ``recent`` outcome list of a player (EOMM reads the first 10)
MAX_RECENT = 1000
#: most player ids in one player's ``previous.teammates`` / ``previous.opponents`` / ``peer_pings``
MAX_PLAYER_REFS = 4096
#: longest a backfill (an open slot request of a running match) stays open, seconds
MAX_BACKFILL_TTL_S = 3600.0
#: |weight| and |bias| of an engagement model (trained models stay below 100; float32 evaluation never overflows)
MAX_ABS_WEIGHT = 1e6
#: smallest |feature_scale| of an engagement model (dividing by less overflows the embedding)
MIN_ABS_SCALE = 1e-9
#: most instances one ``generate`` / ``preset-stats`` / ``label --preset`` run makes
MAX_INSTANCE_COUNT = 1_000_000
#: |coefficient|, |rhs| and the thresholds of rules (``max_diff``, ``max_spread``, ``max_ms``)
MAX_ABS_RULE_NUMBER = 1e9

# a JSON string (with escapes), matched without backtracking
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # what translate deletes to keep only brackets
_STEP = np.zeros(256, dtype=np.int32)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def json_depth_exceeds(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON document nests objects/lists deeper than ``limit``, brackets inside strings aside.

    Runs in time linear in the size (regex and numpy, no Python loop per byte) and never recurses,
    so it is safe on hostile input; it does not validate the document (the parser does that after).
    """
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if len(brackets) <= limit:
        return False
    return bool(np.cumsum(_STEP[np.frombuffer(brackets, dtype=np.uint8)], dtype=np.int32).max() > limit)
