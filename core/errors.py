"""The one error type for bad input, carrying the path of the offending field."""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input that does not satisfy the spec.

    ``field`` is a JSON-path-like location such as ``rules[3].max_diff`` or
    ``players[2].features``; ``str(err)`` is one readable line that names it.
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


def from_pydantic(err, prefix: str = "") -> InvalidInput:
    """Turn the first error of a pydantic ``ValidationError`` into an :class:`InvalidInput`."""
    first = err.errors()[0]
    loc = [p for p in first.get("loc", ()) if not (isinstance(p, str) and p.startswith("function-"))]
    msg = first.get("msg", "invalid value")
    if first.get("type") == "missing":
        msg = "field required"
    elif first.get("type") == "extra_forbidden":
        msg = "unknown field"
    return InvalidInput(join(prefix, loc), msg)
