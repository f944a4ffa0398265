"""A studio's match log (``mgmatch-matchlog/v1``, spec §5): streamed, validated, loaded into arrays.

A log is JSON Lines, one played match per line::

    {"format": "mgmatch-matchlog/v1", "match_id": "m-17", "time": 1795400000.0,
     "teams": [[{"id": "u1", "features": [0.3, 1.2]}, ...], [...]], "engagement": 0.64}

Optional per line (what the service writes for a learning pool's match, spec §5 and §7):
``model_version`` (the engagement model that formed it), ``policy`` (``exploit`` or ``explore``)
and ``propensity`` (that policy's probability, in (0, 1]).

:func:`load_matchlog` reads one or more logs in **two streaming passes** and never holds more
than one line's JSON at a time:

1. validate every line and measure the log: the number of matches, the number of teams D (the
   same on every line), the largest size of each team, and ``feature_dim`` (the same for every
   player of every line);
2. parse the lines again into preallocated arrays: features ``[M, D, Kmax, F]`` float32 (zeros
   where a team is smaller than its largest size), team sizes ``[M, D]`` and the engagement
   ``[M]``; feature means and standard deviations are accumulated over real players on the way.

Team sizes may differ between teams and between lines (a match a player left early); the
engagement network sums each team's member embeddings, so only D and ``feature_dim`` are fixed
by the log. Other player fields (``skill``, ``roles``, …) are accepted and not used by the fit.

A bad line raises :class:`~mgmatch.core.errors.InvalidInput` whose field names the file, the
line number (1-based, counting blank lines) and the field, e.g.
``logs.jsonl line 7, teams[1][0].features[2]: must be a finite number``.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from mgmatch.core.errors import InvalidInput

MATCHLOG_FORMAT = "mgmatch-matchlog/v1"
_NUMBER = (int, float)
#: largest |feature| or |engagement| accepted (features are stored as float32; squares must stay finite)
MAX_ABS = 1e15


@dataclass
class LogShape:
    """What pass 1 measured: matches, teams, largest team sizes and features per player."""

    matches: int
    teams: int
    max_sizes: tuple[int, ...]
    feature_dim: int
    min_sizes: tuple[int, ...]


@dataclass
class MatchData:
    """Matches as arrays (the fitter's input).

    Shapes: features [M, D, Kmax, F] float32 (padding rows are 0), sizes [M, D] int16, y [M]
    float64.
    """

    features: np.ndarray
    sizes: np.ndarray
    y: np.ndarray
    sources: list[str]

    @property
    def matches(self) -> int:
        return int(self.y.shape[0])

    @property
    def teams(self) -> int:
        return int(self.features.shape[1])

    @property
    def feature_dim(self) -> int:
        return int(self.features.shape[3])

    def mask(self, idx: np.ndarray | slice | None = None) -> np.ndarray:
        """1.0 for real players, 0.0 for padding: [m, D, Kmax] float32 for rows ``idx``."""
        s = self.sizes if idx is None else self.sizes[idx]
        k = np.arange(self.features.shape[2])
        return (k[None, None, :] < s[..., None]).astype(np.float32)

    def take(self, idx: np.ndarray) -> MatchData:
        """The matches ``idx`` (copies)."""
        return MatchData(self.features[idx], self.sizes[idx], self.y[idx], self.sources)

    def feature_stats(self, idx: np.ndarray, chunk: int = 65536) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation [F] of the real players of matches ``idx`` (chunked)."""
        total = np.zeros(self.feature_dim)
        total_sq = np.zeros(self.feature_dim)
        count = 0.0
        for s in range(0, len(idx), chunk):
            part = np.sort(idx[s:s + chunk])
            x = self.features[part].astype(np.float64)
            w = self.mask(part)[..., None]
            total += (x * w).sum((0, 1, 2))
            total_sq += (x * x * w).sum((0, 1, 2))
            count += float(w.sum())
        mean = total / max(count, 1.0)
        return mean, np.sqrt(np.maximum(total_sq / max(count, 1.0) - mean ** 2, 0.0))


def _open(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def iter_lines(path: str | Path, progress=None) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded JSON)`` of every non-blank line; bad JSON is an InvalidInput.

    ``progress``, when given, is called with the byte length of every line read.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInput("logs", f"no such file {str(path)!r}")
    with _open(path) as f:
        lines = iter(f)
        n = 0
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                break
            except (OSError, EOFError, zlib.error) as err:  # not gzip, truncated, corrupt or unreadable
                raise InvalidInput("logs", f"{str(path)!r}: {_read_error(path, err)}") from None
            n += 1
            if progress is not None:
                progress(len(raw))
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError
                msg = err.msg if isinstance(err, json.JSONDecodeError) else type(err).__name__
                raise InvalidInput(f"{path.name} line {n}", f"not valid JSON ({msg})") from None
            yield n, obj


def _read_error(path: Path, err: BaseException) -> str:
    """Why a log file cannot be read, in one line (a ``.gz`` that is not gzip, cut short or corrupt)."""
    gz = path.suffix == ".gz"
    if isinstance(err, EOFError):
        return "the gzip file is truncated (it ends before the end-of-stream marker)" if gz else "ends early"
    if isinstance(err, gzip.BadGzipFile):
        return f"not a gzip file ({err})"
    if isinstance(err, zlib.error):
        return f"corrupt gzip data ({err})"
    reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return f"cannot be read ({reason})"


def _where(path: Path, n: int, field: str) -> str:
    return f"{path.name} line {n}, {field}"


def _finite(v: Any) -> bool:
    return isinstance(v, _NUMBER) and not isinstance(v, bool) and math.isfinite(v)


def check_line(obj: Any, path: Path, n: int, first: bool, teams: int | None, feature_dim: int | None
               ) -> tuple[list[int], int, float]:
    """Validate one decoded line; returns (team sizes, feature_dim, engagement).

    ``teams`` / ``feature_dim``: what earlier lines fixed (None on the first line).
    """
    if not isinstance(obj, dict):
        raise InvalidInput(f"{path.name} line {n}", "a match must be a JSON object")
    fmt = obj.get("format")
    if fmt is None and first:
        raise InvalidInput(_where(path, n, "format"), f"field required on the first line ({MATCHLOG_FORMAT!r})")
    if fmt is not None and fmt != MATCHLOG_FORMAT:
        raise InvalidInput(_where(path, n, "format"), f"must be {MATCHLOG_FORMAT!r}, got {fmt!r}")
    if "match_id" in obj and not isinstance(obj["match_id"], str | int):
        raise InvalidInput(_where(path, n, "match_id"), "must be a string")
    if "time" in obj and not _finite(obj["time"]):
        raise InvalidInput(_where(path, n, "time"), "must be a finite number")
    # optional fields a learning pool writes (spec §5, §7): the model that formed the match, the policy and its probability
    for key in ("model_version", "policy"):
        if key in obj and obj[key] is not None and not (isinstance(obj[key], str) and obj[key]):
            raise InvalidInput(_where(path, n, key), "must be a non-empty string")
    if "propensity" in obj and obj["propensity"] is not None and not (
            _finite(obj["propensity"]) and 0 < obj["propensity"] <= 1):
        raise InvalidInput(_where(path, n, "propensity"), f"must be a number in (0, 1], got {json.dumps(obj['propensity'])[:40]}")
    if "engagement" not in obj:
        raise InvalidInput(_where(path, n, "engagement"), "field required")
    y = obj["engagement"]
    if not _finite(y):
        raise InvalidInput(_where(path, n, "engagement"), f"must be a finite number, got {json.dumps(y)[:40]}")
    if abs(y) > MAX_ABS:
        raise InvalidInput(_where(path, n, "engagement"), f"|value| must be ≤ {MAX_ABS:g}")
    if "teams" not in obj:
        raise InvalidInput(_where(path, n, "teams"), "field required")
    tl = obj["teams"]
    if not isinstance(tl, list) or len(tl) < 2:
        got = f"{len(tl)} team" + ("s" if len(tl) != 1 else "") if isinstance(tl, list) else type(tl).__name__
        raise InvalidInput(_where(path, n, "teams"), f"must be a list of at least 2 teams, got {got}")
    if teams is not None and len(tl) != teams:
        raise InvalidInput(_where(path, n, "teams"), f"has {len(tl)} teams; earlier lines have {teams}")
    sizes: list[int] = []
    seen: set[str] = set()
    dim = feature_dim
    for j, team in enumerate(tl):
        if not isinstance(team, list) or not team:
            raise InvalidInput(_where(path, n, f"teams[{j}]"), "must be a non-empty list of players")
        for k, p in enumerate(team):
            at = f"teams[{j}][{k}]"
            if not isinstance(p, dict):
                raise InvalidInput(_where(path, n, at), "a player must be a JSON object")
            pid = p.get("id")
            if not isinstance(pid, str) or not pid:
                raise InvalidInput(_where(path, n, f"{at}.id"), "field required (a non-empty string)")
            if pid in seen:
                raise InvalidInput(_where(path, n, f"{at}.id"), f"player {pid!r} appears twice in this match")
            seen.add(pid)
            if "features" not in p:
                raise InvalidInput(_where(path, n, f"{at}.features"), "field required")
            f = p["features"]
            if not isinstance(f, list) or not f:
                raise InvalidInput(_where(path, n, f"{at}.features"), "must be a non-empty list of numbers")
            if dim is None:
                dim = len(f)
            elif len(f) != dim:
                raise InvalidInput(_where(path, n, f"{at}.features"),
                                   f"has {len(f)} numbers; every player must have {dim} (feature_dim)")
            if not set(map(type, f)) <= {int, float} or not all(map(math.isfinite, f)):
                bad = next(i for i, v in enumerate(f) if not _finite(v))
                raise InvalidInput(_where(path, n, f"{at}.features[{bad}]"),
                                   f"must be a finite number, got {json.dumps(f[bad])[:40]}")
            if max(map(abs, f)) > MAX_ABS:
                bad = next(i for i, v in enumerate(f) if abs(v) > MAX_ABS)
                raise InvalidInput(_where(path, n, f"{at}.features[{bad}]"), f"|value| must be ≤ {MAX_ABS:g}")
        sizes.append(len(team))
    assert dim is not None
    return sizes, dim, float(y)


def measure(paths: Sequence[str | Path], progress: bool = False) -> LogShape:
    """Pass 1: validate every line of ``paths`` and measure the log (nothing is kept)."""
    teams: int | None = None
    dim: int | None = None
    max_sizes: list[int] = []
    min_sizes: list[int] = []
    m = 0
    bar = _bar(paths, "validate", progress)
    try:
        for path in map(Path, paths):
            first = True
            for n, obj in iter_lines(path, bar.update if bar is not None else None):
                sizes, dim, _ = check_line(obj, path, n, first, teams, dim)
                first = False
                if teams is None:
                    teams, max_sizes, min_sizes = len(sizes), list(sizes), list(sizes)
                else:
                    max_sizes = [max(a, b) for a, b in zip(max_sizes, sizes, strict=True)]
                    min_sizes = [min(a, b) for a, b in zip(min_sizes, sizes, strict=True)]
                m += 1
    finally:
        if bar is not None:
            bar.close()
    if m == 0 or teams is None or dim is None:
        raise InvalidInput("logs", f"{', '.join(Path(p).name for p in paths)}: no matches (the log is empty)")
    return LogShape(m, teams, tuple(max_sizes), dim, tuple(min_sizes))


def _bar(paths: Sequence[str | Path], desc: str, progress: bool):
    if not progress:
        return None
    from tqdm import tqdm

    total = sum(Path(p).stat().st_size for p in paths if Path(p).is_file() and Path(p).suffix != ".gz")
    # disable=None: no bar when stderr is not a terminal, so a bad line's error stays the one line there
    return tqdm(total=total or None, desc=desc, unit="B", unit_scale=True, file=sys.stderr, leave=False, disable=None)


def load_matchlog(paths: Sequence[str | Path], progress: bool = False, shape: LogShape | None = None) -> MatchData:
    """Validate and load logs into arrays (two streaming passes; see the module doc).

    Args:
        paths: one or more ``.jsonl`` (or ``.jsonl.gz``) files, read in order.
        progress: a progress bar per pass on stderr.
        shape: pass 1's result when already measured.
    Raises:
        InvalidInput: a bad line (file, line number and field in ``field``), or an empty log.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise InvalidInput("logs", "give at least one log file")
    shape = shape or measure(paths, progress)
    M, D, F = shape.matches, shape.teams, shape.feature_dim
    K = max(shape.max_sizes)
    X = np.zeros((M, D, K, F), dtype=np.float32)
    S = np.zeros((M, D), dtype=np.int16)
    y = np.empty(M, dtype=np.float64)
    m = 0
    bar = _bar(paths, "load", progress)
    try:
        for path in paths:
            for n, obj in iter_lines(path, bar.update if bar is not None else None):
                if m >= M:
                    raise InvalidInput(_where(path, n, "teams"), "the log changed while it was read")
                sizes, _, y[m] = check_line(obj, path, n, False, D, F)
                for j, team in enumerate(obj["teams"]):
                    X[m, j, :len(team)] = [p["features"] for p in team]
                    S[m, j] = len(team)
                m += 1
    finally:
        if bar is not None:
            bar.close()
    if m != M:
        raise InvalidInput("logs", "the log changed while it was read")
    return MatchData(X, S, y, [str(p) for p in paths])
