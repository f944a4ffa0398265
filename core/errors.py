"""The one error type for bad input, carrying the path of the offending field."""

from __future__ import annotations

from typing import Any


class InvalidInput(ValueError):
    """Input that does not satisfy the spec.

    ``field`` is a JSON-path-like location such as ``rules[3].max_diff`` or
    ``players[2].features``; ``str(err)`` is one readable line that names it.

    A pydantic validator may raise it with a ``field`` relative to the model it validates
    (``sigma`` in a player): :func:`from_pydantic` joins it onto the model's own location.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


def join(prefix: str, loc: tuple | list) -> str:
    """Join a pydantic location tuple onto a prefix: ('players', 2, 'id') → players[2].id."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


#: what pydantic puts in front of the message of a ValueError raised by a validator
_VALUE_ERROR = "Value error, "


def describe(error: dict[str, Any], prefix: str = "") -> tuple[str, str]:
    """``(field, message)`` of one pydantic error (an entry of ``ValidationError.errors()``).

    The field is the path a client wrote, without pydantic's internal location parts: validator
    tags (``function-after[…]``) go, and a bad dictionary key (pydantic's ``[key]`` marker) is
    reported at the dictionary with the key in the message. An :class:`InvalidInput` raised inside
    a validator contributes its own field and message.
    """
    loc = [p for p in error.get("loc", ()) if not (isinstance(p, str) and p.startswith("function-"))]
    msg = str(error.get("msg", "invalid value"))
    kind = error.get("type")
    if kind == "missing":
        msg = "field required"
    elif kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "value_error":
        inner = (error.get("ctx") or {}).get("error")
        if isinstance(inner, InvalidInput):
            return join(join(prefix, loc), [inner.field] if inner.field else []), inner.message
        msg = msg.removeprefix(_VALUE_ERROR)
    if len(loc) >= 2 and loc[-1] == "[key]":
        key = str(loc[-2])
        msg = f"key {key[:40] + '…' if len(key) > 40 else key!r}: {msg}"
        loc = loc[:-2]
    return join(prefix, loc), msg


def from_pydantic(err, prefix: str = "") -> InvalidInput:
    """Turn the first error of a pydantic ``ValidationError`` into an :class:`InvalidInput`."""
    return InvalidInput(*describe(err.errors()[0], prefix))
