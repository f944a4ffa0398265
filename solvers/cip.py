"""A SCIP model written as CIP text and read by SCIP's own parser, instead of built call by call.

pyscipopt adds a constraint through Python expression objects, one term at a time. Written as
the text of SCIP's CIP format (one string join per row, repeated coefficients formatted once) and
read by ``SCIPreadProb``, the rules of a 12v12 pool (131 variables, ~160 rows, ~730 terms) build
in ~7.7 ms instead of ~9.3, 12v12-deep pools in 10.5 instead of 13.0 (medians of 16, model
creation included: ``Model()`` alone is ~2.5 ms). Rows with many distinct coefficients gain
nothing (formatting a double costs ~1.2 µs in Python): the engagement objective is still added
through pyscipopt (:meth:`~mgmatch.solvers.mip.MipModel.add_engagement_objective`).

:class:`CipText` collects variables (binary, or continuous with bounds) and linear rows over their
indices, merges repeated terms, and :meth:`CipText.read` creates them in a pyscipopt ``Model`` that
has no problem yet; it returns the ``Variable`` objects in the order they were added. Names in the
file are ``v<k>``/``c<k>`` (player ids never reach SCIP's parser). The file lives in memory-backed
``/dev/shm`` when there is one, else the temp directory, and is removed after reading.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence

import numpy as np
from pyscipopt import Model

_SENSES = ("<=", ">=", "==")
_TMP_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _num(c: float) -> str:
    """A number written so that SCIP reads back the same double (±inf as SCIP writes it)."""
    c = float(c)
    if math.isfinite(c):
        return repr(c)
    if math.isnan(c):
        raise ValueError("a MIP coefficient, bound or right-hand side is NaN")
    return "+inf" if c > 0 else "-inf"


class CipText:
    """Variables and linear rows of one SCIP problem, as CIP text (see the module docstring)."""

    def __init__(self) -> None:
        self._kinds: list[str] = []          # "B" or "C" per variable
        self._bounds: list[tuple[float, float]] = []
        self._obj: dict[int, float] = {}
        self._offset = 0.0
        self._maximize = False
        self._rows: list[str] = []
        self._tokens: list[str] = []          # "<v12>[B]" per variable, made as rows need them
        self._coef: dict[float, str] = {}     # a signed coefficient's text, for the repeated ones

    def add_vars(self, count: int, kind: str = "B", lb: float = 0.0, ub: float = 1.0) -> range:
        """``count`` new variables (``kind`` "B": binary; "C": continuous in [lb, ub]); their indices."""
        if kind not in ("B", "C"):
            raise ValueError(f"kind must be 'B' or 'C', got {kind!r}")
        start = len(self._kinds)
        self._kinds.extend([kind] * count)
        self._bounds.extend([(0.0, 1.0) if kind == "B" else (float(lb), float(ub))] * count)
        return range(start, start + count)

    def add_var(self, kind: str = "B", lb: float = 0.0, ub: float = 1.0) -> int:
        return self.add_vars(1, kind, lb, ub)[0]

    def add_row(self, vars: Sequence[int] | np.ndarray, coefs: Sequence[float] | np.ndarray, sense: str,
                rhs: float) -> None:
        """Σ coefs·v[vars] (sense) rhs; a variable named twice gets the sum of its coefficients."""
        if sense not in _SENSES:
            raise ValueError(f"sense must be one of <=, >=, ==, got {sense!r}")
        vs = vars.tolist() if isinstance(vars, np.ndarray) else list(vars)
        cs = coefs.tolist() if isinstance(coefs, np.ndarray) else [float(c) for c in coefs]
        if len(vs) != len(cs):
            raise ValueError(f"{len(vs)} variables but {len(cs)} coefficients")
        if vs and (min(vs) < 0 or max(vs) >= len(self._kinds)):
            raise ValueError(f"variable index out of range 0..{len(self._kinds) - 1}")
        if len(set(vs)) != len(vs):
            merged: dict[int, float] = {}
            for v, c in zip(vs, cs, strict=True):
                merged[v] = merged.get(v, 0.0) + c
            vs, cs = list(merged), list(merged.values())
        tok, num = self._tokens, self._coef
        if len(tok) < len(self._kinds):
            tok.extend(f"<v{v}>[{k}]" for v, k in enumerate(self._kinds[len(tok):], start=len(tok)))
        terms = " ".join([(num.get(c) or self._new_coef(c)) + tok[v] for v, c in zip(vs, cs, strict=True) if c != 0.0])
        self._rows.append(f"  [linear] <c{len(self._rows)}>: {terms or '0'} {sense} {_num(rhs)};")

    def _new_coef(self, c: float) -> str:
        text = ("+" if c >= 0 else "") + _num(c)
        if len(self._coef) < 4096:
            self._coef[c] = text
        return text

    def set_objective(self, coefs: dict[int, float], offset: float = 0.0, maximize: bool = True) -> None:
        """The objective Σ coefs[v]·v + offset (replacing any earlier one)."""
        self._obj = {int(v): float(c) for v, c in coefs.items() if c != 0.0}
        self._offset = float(offset)
        self._maximize = maximize

    def set_upper_bound(self, v: int, ub: float) -> None:
        lo, _ = self._bounds[v]
        self._bounds[v] = (lo, float(ub))

    def text(self) -> str:
        head = ["STATISTICS", "  Problem name     : mgmatch", "OBJECTIVE",
                f"  Sense            : {'maximize' if self._maximize else 'minimize'}"]
        if self._offset:
            head.append(f"  Offset           : {'+' if self._offset >= 0 else ''}{_num(self._offset)}")
        head.append("VARIABLES")
        obj = self._obj
        var_lines = []
        for i, (k, b) in enumerate(zip(self._kinds, self._bounds, strict=True)):
            o = obj.get(i)
            o = "0" if o is None else _num(o)
            if k == "B" and b == (0.0, 1.0):
                var_lines.append(f"  [binary] <v{i}>: obj={o}, original bounds=[0,1]")
            else:
                kind = "binary" if k == "B" else "continuous"
                var_lines.append(f"  [{kind}] <v{i}>: obj={o}, original bounds=[{_num(b[0])},{_num(b[1])}]")
        return "\n".join([*head, *var_lines, "CONSTRAINTS", *self._rows, "END", ""])

    def read(self, model: Model) -> list:
        """Create the problem in ``model`` (one that has none yet; its parameters are kept) and
        return its variables in the order they were added here."""
        fd, path = tempfile.mkstemp(suffix=".cip", prefix="mgmatch-", dir=_TMP_DIR)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(self.text())
            # SCIP parses numbers with the C locale; pyscipopt's readProblem sets it and restores it
            model.readProblem(path)
        finally:
            os.unlink(path)
        out: list = [None] * len(self._kinds)
        for v in model.getVars():
            out[int(v.name[1:])] = v
        if any(v is None for v in out):
            raise RuntimeError("SCIP did not read back every variable of the CIP text")
        return out
