"""File helpers shared by every layer that reads input files or pins model files."""

from __future__ import annotations

import hashlib
from pathlib import Path


def read_text(path: str | Path) -> str:
    """A UTF-8 text file (JSON, JSON Lines, YAML) as a string, with or without a byte-order mark.

    Editors on Windows save UTF-8 with a leading BOM (EF BB BF); ``json`` refuses it and YAML keeps it
    in the text, so every input file is read through here. Raises what ``Path.read_text`` raises
    (``FileNotFoundError``, ``OSError``, ``UnicodeDecodeError``) for the caller to name.
    """
    return Path(path).read_text(encoding="utf-8-sig")


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
