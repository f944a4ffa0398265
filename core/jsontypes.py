"""Strict JSON number types for the input models (instances, tickets, backfills, results, models).

Pydantic's default ("lax") mode turns ``"2"`` into 2 and ``true`` into 1.0; the spec's numbers are
JSON numbers, so every input model uses these instead: :data:`Number` takes integers and floats
(never strings or booleans), :data:`Integer` takes integers and integral floats (``3.0``, as some
producers write them), never strings, booleans or fractions. Bounds and finiteness stay with the
field (``Field(ge=…, le=…)``, ``allow_inf_nan=False``).
"""

from __future__ import annotations

import numbers
from typing import Annotated, Any

from pydantic import BeforeValidator, Strict


def _integral(v: Any) -> Any:
    """An integral float (``3.0``) or a numpy integer as the int it names; anything else as it is (then
    strictly checked)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, numbers.Integral) and not isinstance(v, (bool, int)):
        return int(v)
    return v


#: a JSON number read as a float: ints and floats, not ``"1"`` or ``true``
Number = Annotated[float, Strict()]
#: a JSON integer: ints and integral floats, not ``"2"``, ``true`` or ``2.5``
Integer = Annotated[int, BeforeValidator(_integral), Strict()]
